package signin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// keyFileName is the file under Options.DataDir that holds the cookie key.
// It is raw random bytes, created once with mode 0600 and reused after a
// restart so that sessions survive it.
const keyFileName = "signin-cookie.key"

// keySize is the length of the key file: 256 bits of randomness, from which
// the AES-256 key is derived.
const keySize = 32

// maxCookieValue bounds what is decoded: browsers keep at most about 4 KiB
// per cookie, so anything longer was not set by us.
const maxCookieValue = 4096

// sealer encrypts and authenticates cookie values. AES-GCM both hides the
// content (names, roles) and makes any change to it detectable; the cookie
// name is the additional data, so a value sealed for one cookie does not
// open under another name.
type sealer struct {
	aead cipher.AEAD
}

// newSealer derives the cookie key from the key file's secret. The HKDF step
// keeps the raw file content usable for other purposes later without ever
// using the same key twice.
func newSealer(secret []byte) (*sealer, error) {
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
	return &sealer{aead: aead}, nil
}

// seal returns the cookie value for plaintext under the cookie name.
func (s *sealer) seal(name string, plaintext []byte) string {
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nil, nil, plaintext, []byte(name)))
}

// errUnsealed says a cookie value was not sealed by this key under this name.
var errUnsealed = errors.New("signin: cookie not sealed by this service")

// open returns the plaintext of a value made by seal with the same name.
func (s *sealer) open(name, value string) ([]byte, error) {
	if len(value) > maxCookieValue {
		return nil, errUnsealed
	}
	// Strict: a value with changed padding bits would otherwise open too.
	raw, err := base64.RawURLEncoding.Strict().DecodeString(value)
	if err != nil {
		return nil, errUnsealed
	}
	plain, err := s.aead.Open(nil, nil, raw, []byte(name))
	if err != nil {
		return nil, errUnsealed
	}
	return plain, nil
}

// loadOrCreateKey reads the key file under dir, creating it on first start.
// Creation writes a temporary file and links it into place, so two processes
// starting together agree on one key and a crash never leaves half a key.
// The key is never logged and never part of an error message.
func loadOrCreateKey(dir string, log *slog.Logger) ([]byte, error) {
	if dir == "" {
		return nil, errors.New("signin: DataDir is required: the cookie key is kept there")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("signin: create data folder %s: %w", dir, err)
	}
	path := filepath.Join(dir, keyFileName)
	key, err := readKey(path, log)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}

	key = make([]byte, keySize)
	rand.Read(key)
	tmp, err := os.CreateTemp(dir, keyFileName+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("signin: create key file in %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp already uses 0600; Chmod makes the intent explicit and
	// independent of that detail.
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("signin: key file permissions: %w", err)
	}
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("signin: write key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("signin: write key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("signin: write key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process won the race: use its key.
			return readKey(path, log)
		}
		return nil, fmt.Errorf("signin: install key file %s: %w", path, err)
	}
	log.Info("created cookie key", slog.String("path", path))
	return key, nil
}

// readKey reads an existing key file and checks its size.
func readKey(path string, log *slog.Logger) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("signin: open key file %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("signin: key file %s: %w", path, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		// Not refused: a mounted secret may come with wider modes. Said
		// loudly so that an operator notices.
		log.Warn("cookie key file is readable by others; it should be mode 0600",
			slog.String("path", path), slog.String("mode", info.Mode().Perm().String()))
	}
	key, err := io.ReadAll(io.LimitReader(f, keySize+1))
	if err != nil {
		return nil, fmt.Errorf("signin: read key file %s: %w", path, err)
	}
	if len(key) != keySize {
		return nil, fmt.Errorf("signin: key file %s must hold exactly %d bytes; remove it to have a new one made (existing sessions end)", path, keySize)
	}
	return key, nil
}
