package viewpage

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Frame token purposes: a token minted for one frame document is refused by
// the other, so a leaked view URL cannot be replayed against the proxy and
// the reverse.
const (
	purposeProxy = "sandbox-proxy"
	purposeView  = "sandbox-view"
)

// TokenLifetime is how long a frame URL can be loaded after the page API
// minted it. The product specification fixes it at 10 minutes.
const TokenLifetime = 10 * time.Minute

// maxClockSkew is how far past now+TokenLifetime a token's expiry may lie
// before it is refused as one this service never issued.
const maxClockSkew = 5 * time.Second

// keyFileName is the file under DataDir that holds the frame token master
// keys. It is created on first start with mode 0600.
const keyFileName = "frame-token-keys.json"

// Reasons a frame token is refused; they label the refusal metric and are
// never shown to the browser, which only sees 403.
const (
	reasonMissing   = "missing"
	reasonMalformed = "malformed"
	reasonKey       = "unknown_key"
	reasonExpired   = "expired"
	reasonFuture    = "future"
	reasonMAC       = "mac"
)

// tokenError says why a frame token was refused.
type tokenError struct{ reason string }

func (e *tokenError) Error() string { return "viewpage: frame token refused: " + e.reason }

// Is lets callers test for ErrBadToken with errors.Is.
func (e *tokenError) Is(target error) bool { return target == ErrBadToken }

// keyFile is the JSON kept under DataDir. Keys are listed oldest first; the
// last one signs, every one verifies, so an operator rotates by appending a
// key and removes an old one once its tokens have expired (10 minutes).
type keyFile struct {
	Keys []keyEntry `json:"keys"`
}

type keyEntry struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"` // base64 (std) of 32 random bytes
	Created time.Time `json:"created"`
}

// tokenKeys signs and verifies frame tokens. Purpose keys are derived once
// at start so a request costs one HMAC.
type tokenKeys struct {
	current string
	// derived[keyID][purpose] is the HMAC key for that purpose.
	derived map[string]map[string][]byte
}

// loadTokenKeys reads the key file under dir, creating it with one fresh key
// when it does not exist. A file that others may read is used, with a
// warning on log: a mounted secret may come with wider modes, but whoever
// reads it can mint frame tokens.
func loadTokenKeys(dir string, now time.Time, log *slog.Logger) (*tokenKeys, error) {
	if dir == "" {
		return nil, errors.New("viewpage: DataDir is required (frame token keys are kept there)")
	}
	path := filepath.Join(dir, keyFileName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err = createKeyFile(dir, path, now)
	} else if fi, serr := os.Stat(path); err == nil && serr == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("frame token key file is readable by others; it should be mode 0600",
			slog.String("path", path), slog.String("mode", fi.Mode().Perm().String()))
	}
	if err != nil {
		return nil, fmt.Errorf("viewpage: frame token keys %s: %w", path, err)
	}
	var kf keyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, fmt.Errorf("viewpage: frame token keys %s: %w", path, err)
	}
	if len(kf.Keys) == 0 {
		return nil, fmt.Errorf("viewpage: frame token keys %s: no keys", path)
	}
	k := &tokenKeys{derived: make(map[string]map[string][]byte, len(kf.Keys))}
	for _, e := range kf.Keys {
		if !validKeyID(e.ID) {
			return nil, fmt.Errorf("viewpage: frame token keys %s: key id %q must be 1 to %d letters, digits, '-' or '_' (it is part of every frame URL)", path, e.ID, maxKeyIDLen)
		}
		master, err := base64.StdEncoding.DecodeString(e.Secret)
		if err != nil || len(master) < 32 {
			return nil, fmt.Errorf("viewpage: frame token keys %s: key %q must be at least 32 bytes of base64", path, e.ID)
		}
		if _, dup := k.derived[e.ID]; dup {
			return nil, fmt.Errorf("viewpage: frame token keys %s: duplicate key id %q", path, e.ID)
		}
		k.derived[e.ID] = map[string][]byte{}
		for _, p := range []string{purposeProxy, purposeView} {
			dk, err := hkdf.Key(sha256.New, master, nil, "teamsbot frame token v1 "+p, 32)
			if err != nil {
				return nil, fmt.Errorf("viewpage: derive %s key: %w", p, err)
			}
			k.derived[e.ID][p] = dk
		}
		k.current = e.ID
	}
	return k, nil
}

// maxKeyIDLen bounds a key id, which every token carries: with the expiry
// and the MAC a token stays well under the length verify accepts.
const maxKeyIDLen = 64

// validKeyID reports whether id can be put in a URL's query as it is and
// told apart from the rest of a token.
func validKeyID(id string) bool {
	if id == "" || len(id) > maxKeyIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// createKeyFile writes a new key file atomically: a temporary file in the
// same folder, then a rename, so a crash never leaves half a key.
func createKeyFile(dir, path string, now time.Time) ([]byte, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	id := make([]byte, 4)
	rand.Read(id)
	kf := keyFile{Keys: []keyEntry{{
		ID:      fmt.Sprintf("%x", id),
		Secret:  base64.StdEncoding.EncodeToString(secret),
		Created: now.UTC(),
	}}}
	b, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(dir, keyFileName+".*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	// Link rather than rename, so that two processes starting at once
	// agree on the first key written.
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return os.ReadFile(path)
		}
		return nil, err
	}
	return b, nil
}

// tokenMAC is HMAC-SHA256 over the key id, the purpose and the view id, each
// prefixed with its length so no two inputs share an encoding, and the
// expiry as 8 bytes.
func tokenMAC(key []byte, keyID, purpose, viewID string, exp int64) []byte {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	for _, s := range []string{keyID, purpose, viewID} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		m.Write(n[:])
		m.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(n[:], uint64(exp))
	m.Write(n[:])
	return m.Sum(nil)
}

// mint returns a token for purpose and viewID that expires TokenLifetime
// after now: "<key id>.<expiry, unix seconds>.<base64url MAC>".
func (k *tokenKeys) mint(purpose, viewID string, now time.Time) string {
	exp := now.Add(TokenLifetime).Unix()
	mac := tokenMAC(k.derived[k.current][purpose], k.current, purpose, viewID, exp)
	return k.current + "." + strconv.FormatInt(exp, 10) + "." + base64.RawURLEncoding.EncodeToString(mac)
}

// verify checks a token for purpose and viewID at now. It refuses unknown
// keys, expired tokens and expiries later than any this service issues.
func (k *tokenKeys) verify(token, purpose, viewID string, now time.Time) error {
	if token == "" {
		return &tokenError{reasonMissing}
	}
	if len(token) > 200 {
		return &tokenError{reasonMalformed}
	}
	kid, rest, ok := strings.Cut(token, ".")
	if !ok {
		return &tokenError{reasonMalformed}
	}
	expS, macS, ok := strings.Cut(rest, ".")
	if !ok {
		return &tokenError{reasonMalformed}
	}
	exp, err := strconv.ParseInt(expS, 10, 64)
	if err != nil || strconv.FormatInt(exp, 10) != expS {
		return &tokenError{reasonMalformed}
	}
	mac, err := base64.RawURLEncoding.DecodeString(macS)
	if err != nil || len(mac) != sha256.Size {
		return &tokenError{reasonMalformed}
	}
	keys, ok := k.derived[kid]
	if !ok {
		return &tokenError{reasonKey}
	}
	key, ok := keys[purpose]
	if !ok {
		return &tokenError{reasonMalformed}
	}
	if !hmac.Equal(mac, tokenMAC(key, kid, purpose, viewID, exp)) {
		return &tokenError{reasonMAC}
	}
	if now.Unix() >= exp {
		return &tokenError{reasonExpired}
	}
	if exp > now.Add(TokenLifetime+maxClockSkew).Unix() {
		return &tokenError{reasonFuture}
	}
	return nil
}
