package viewpage

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"teamsbot/internal/keyfile"
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
// keys (package internal/keyfile: JSON, keys with ids, mode 0600). It is
// created on first start.
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

// tokenKeyFile is the key file under dir. Its keys are listed oldest
// first; the last one signs, every one verifies, so an operator rotates
// (`teamsbot keys rotate`) and retires an old key once its tokens have
// expired (10 minutes).
func tokenKeyFile(dir string) keyfile.File {
	return keyfile.File{Path: filepath.Join(dir, keyFileName), Name: "frame token key"}
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
	ks, err := tokenKeyFile(dir).LoadOrCreate(now, log)
	if err != nil {
		return nil, fmt.Errorf("viewpage: %w", err)
	}
	k := &tokenKeys{derived: make(map[string]map[string][]byte, len(ks)), current: ks.Current().ID}
	for _, e := range ks {
		k.derived[e.ID] = map[string][]byte{}
		for _, p := range []string{purposeProxy, purposeView} {
			dk, err := hkdf.Key(sha256.New, e.Secret, nil, "teamsbot frame token v1 "+p, 32)
			if err != nil {
				return nil, fmt.Errorf("viewpage: derive %s key: %w", p, err)
			}
			k.derived[e.ID][p] = dk
		}
		clear(e.Secret)
	}
	return k, nil
}

// maxKeyIDLen bounds a key id, which every token carries: with the expiry
// and the MAC a token stays well under the length verify accepts.
const maxKeyIDLen = keyfile.MaxIDLen

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
