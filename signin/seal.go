package signin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"teamsbot/internal/keyfile"
)

// keyFileName is the file under Options.DataDir that holds the cookie
// keys (package internal/keyfile: JSON, keys with ids, mode 0600), made on
// first start and reused after a restart so that sessions survive it. A
// file of an earlier version holds one raw key of legacySize bytes.
const keyFileName = "signin-cookie.key"

// legacySize is the length of the one-key file of earlier versions: 256
// bits, from which the AES-256 key is derived.
const legacySize = 32

// maxCookieValue bounds what is decoded: browsers keep at most about 4 KiB
// per cookie, so anything longer was not set by us.
const maxCookieValue = 4096

// cookieKeys is the key file under dir.
func cookieKeys(dir string) keyfile.File {
	return keyfile.File{Path: filepath.Join(dir, keyFileName), Name: "cookie key", LegacySize: legacySize}
}

// sealer encrypts and authenticates cookie values. AES-GCM both hides the
// content (names, roles) and makes any change to it detectable; the cookie
// name and the key id are the additional data, so a value sealed for one
// cookie does not open under another name, nor its key id changed.
//
// A value is "<key id>.<base64url of nonce and ciphertext>", sealed with
// the newest key of the file; the older keys still open what they sealed
// until they are retired. A value without a key id was sealed by the key
// of an earlier one-key file, which opens it as long as the file holds
// that key (marked legacy once the file is rotated).
type sealer struct {
	current string // key id of the sealing key; "" for a legacy one
	aeads   map[string]cipher.AEAD
	legacy  cipher.AEAD // nil when the file holds no legacy key
}

// loadSealer reads the key file under dir, making it on first start, and
// derives a cipher from each key. The keys are never logged and never
// part of an error message.
func loadSealer(dir string, now time.Time, log *slog.Logger) (*sealer, error) {
	if dir == "" {
		return nil, errors.New("signin: DataDir is required: the cookie keys are kept there")
	}
	ks, err := cookieKeys(dir).LoadOrCreate(now, log)
	if err != nil {
		return nil, fmt.Errorf("signin: %w", err)
	}
	s := &sealer{aeads: make(map[string]cipher.AEAD, len(ks))}
	for _, k := range ks {
		aead, err := newAEAD(k.Secret)
		clear(k.Secret)
		if err != nil {
			return nil, err
		}
		if k.Legacy {
			s.legacy = aead
		}
		if k.ID != "" {
			s.aeads[k.ID] = aead
		}
	}
	s.current = ks.Current().ID
	return s, nil
}

// newAEAD derives the cookie key from a key file's secret. The HKDF step
// keeps the raw secret usable for other purposes later without ever using
// the same key twice.
func newAEAD(secret []byte) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "teamsbot signin cookie v1", 32)
	if err != nil {
		return nil, fmt.Errorf("signin: derive cookie key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("signin: cookie cipher: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return nil, fmt.Errorf("signin: cookie cipher: %w", err)
	}
	return aead, nil
}

// additional is what a value is bound to besides its content: the cookie
// name, and the key id when the value carries one.
func additional(name, keyID string) []byte {
	if keyID == "" {
		return []byte(name)
	}
	return []byte(name + "\x00" + keyID)
}

// seal returns the cookie value for plaintext under the cookie name.
func (s *sealer) seal(name string, plaintext []byte) string {
	if s.current == "" {
		return base64.RawURLEncoding.EncodeToString(s.legacy.Seal(nil, nil, plaintext, additional(name, "")))
	}
	return s.current + "." + base64.RawURLEncoding.EncodeToString(s.aeads[s.current].Seal(nil, nil, plaintext, additional(name, s.current)))
}

// errUnsealed says a cookie value was not sealed by these keys under this
// name.
var errUnsealed = errors.New("signin: cookie not sealed by this service")

// open returns the plaintext of a value made by seal with the same name
// and a key the file still holds.
func (s *sealer) open(name, value string) ([]byte, error) {
	if len(value) > maxCookieValue {
		return nil, errUnsealed
	}
	keyID, sealed, withID := strings.Cut(value, ".")
	aead := s.legacy
	if withID {
		aead = s.aeads[keyID]
	} else {
		keyID, sealed = "", value
	}
	if aead == nil {
		return nil, errUnsealed
	}
	// Strict: a value with changed padding bits would otherwise open too.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(sealed)
	if err != nil {
		return nil, errUnsealed
	}
	plain, err := aead.Open(nil, nil, raw, additional(name, keyID))
	if err != nil {
		return nil, errUnsealed
	}
	return plain, nil
}
