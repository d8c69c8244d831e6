package mcpauth

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"teamsbot/internal/keyfile"
)

// tokenKeyFile is the file under Options.DataDir that holds the keys that
// seal what authorization servers gave (package internal/keyfile: JSON,
// keys with ids, mode 0600). On PostgreSQL every replica needs the same
// file, like the cookie and frame-token keys.
const tokenKeyFile = "mcp-token.key"

// TokenKeys is the token key file under dir, for `teamsbot keys`.
func TokenKeys(dir string) keyfile.File {
	return keyfile.File{Path: filepath.Join(dir, tokenKeyFile), Name: "MCP token key"}
}

// sealer encrypts and authenticates what is kept of a connection with
// AES-GCM. The additional data binds a sealed value to what it is (a
// grant, a code) and to whose it is: a value copied into another
// person's record does not open there.
type sealer struct {
	current string
	aeads   map[string]cipher.AEAD
}

func loadSealer(dir string, now time.Time, log *slog.Logger) (*sealer, error) {
	if dir == "" {
		return nil, errors.New("mcpauth: a data folder is required: the token keys are kept there")
	}
	ks, err := TokenKeys(dir).LoadOrCreate(now, log)
	if err != nil {
		return nil, fmt.Errorf("mcpauth: %w", err)
	}
	s := &sealer{aeads: make(map[string]cipher.AEAD, len(ks))}
	for _, k := range ks {
		if k.ID == "" {
			continue // this file never had a one-key form
		}
		key, err := hkdf.Key(sha256.New, k.Secret, nil, "teamsbot mcp token v1", 32)
		clear(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("mcpauth: derive token key: %w", err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("mcpauth: token cipher: %w", err)
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, fmt.Errorf("mcpauth: token cipher: %w", err)
		}
		s.aeads[k.ID] = aead
	}
	s.current = ks.Current().ID
	if s.aeads[s.current] == nil {
		return nil, errors.New("mcpauth: the token key file has no key with an id: run `teamsbot keys rotate`")
	}
	return s, nil
}

// errUnsealed says a value was not sealed by these keys for this use.
var errUnsealed = errors.New("mcpauth: sealed value does not open (another key, another record, or changed)")

// seal returns "<key id>.<nonce and ciphertext>" and the key id, so that
// a value names the key that opens it and `teamsbot keys retire` can tell
// what a retire would strand.
func (s *sealer) seal(what string, plaintext []byte) (sealed []byte, keyID string) {
	out := append([]byte(s.current), '.')
	return s.aeads[s.current].Seal(out, nil, plaintext, []byte(what+"\x00"+s.current)), s.current
}

// open opens a value sealed by seal with the same what.
func (s *sealer) open(what string, value []byte) ([]byte, error) {
	i := bytes.IndexByte(value, '.')
	if i <= 0 {
		return nil, errUnsealed
	}
	keyID, sealed := string(value[:i]), value[i+1:]
	aead := s.aeads[keyID]
	if aead == nil {
		return nil, fmt.Errorf("%w: key %q is not in the token key file", errUnsealed, keyID)
	}
	plain, err := aead.Open(nil, nil, sealed, []byte(what+"\x00"+keyID))
	if err != nil {
		return nil, errUnsealed
	}
	return plain, nil
}
