// Package keyfile keeps the service's symmetric keys in files under its
// data folder, several keys to a file, each with an id, so that keys can be
// rotated: the newest key signs or seals, the older ones still verify or
// open what they made until an operator retires them. The cookie keys
// (package signin) and the frame-token keys (package viewpage) are such
// files, and `teamsbot keys` makes, rotates and retires them.
//
// A file is JSON:
//
//	{"keys": [{"id": "3f9a1c2e", "secret": "<base64 of 32 bytes>", "created": "2026-12-03T09:00:00Z"}, ...]}
//
// oldest first. A one-key file of an earlier version (raw bytes, no id,
// File.LegacySize long) is read as one key marked Legacy, whose tokens
// carry no key id; the next Rotate rewrites the file as JSON, giving that
// key an id and keeping its mark.
//
// It is ours: the rules are the service's (ids fit a URL's query, the
// earlier one-key form, no key ever in an error or a log line), and the
// standard library does the rest. Every write is atomic (a temporary file
// in the same folder, written, synced, then linked or renamed into place,
// then the folder synced), mode 0600, so a crash never leaves half a key
// and two processes making a missing file at once agree on one.
package keyfile

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// SecretSize is the length of a key made here: 256 bits of randomness.
const SecretSize = 32

// MaxIDLen bounds a key id, which every token carries.
const MaxIDLen = 64

// maxFileBytes bounds what is read of a key file: thousands of keys.
const maxFileBytes = 1 << 20

// Key is one key of a file.
type Key struct {
	// ID names the key in what it signs or seals: 1 to MaxIDLen letters,
	// digits, '-' or '_'. It is "" only for the key of a one-key file of
	// an earlier version not yet rewritten.
	ID string
	// Secret is the key itself, at least SecretSize bytes.
	Secret []byte
	// Created is when the key was made.
	Created time.Time
	// Legacy marks the key of a one-key file of an earlier version: what
	// it sealed or signed carries no key id.
	Legacy bool
}

// Keys are a file's keys, oldest first.
type Keys []Key

// Current is the newest key, the one that signs or seals.
func (ks Keys) Current() Key { return ks[len(ks)-1] }

// ByID returns the key with id.
func (ks Keys) ByID(id string) (Key, bool) {
	for _, k := range ks {
		if k.ID == id {
			return k, true
		}
	}
	return Key{}, false
}

// Legacy returns the key of the earlier one-key form, if the file holds it.
func (ks Keys) Legacy() (Key, bool) {
	for _, k := range ks {
		if k.Legacy {
			return k, true
		}
	}
	return Key{}, false
}

// File is a key file.
type File struct {
	// Path is the file.
	Path string
	// Name says what the keys are for, in messages and the log: "cookie
	// key", "frame token key".
	Name string
	// LegacySize, when not zero, is the length of the raw one-key file of
	// an earlier version, read as one Legacy key without id.
	LegacySize int
}

// fileJSON is the file's form.
type fileJSON struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"` // base64 (standard) of the key
	Created time.Time `json:"created"`
	Legacy  bool      `json:"legacy,omitempty"`
}

// Load reads the file. A missing file is an error that wraps
// fs.ErrNotExist. No error holds a key.
func (f File) Load() (Keys, error) {
	data, err := f.read()
	if err != nil {
		return nil, err
	}
	return f.parse(data)
}

func (f File) read() ([]byte, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s file %s: %w", f.Name, f.Path, err)
		}
		return nil, fmt.Errorf("%s file %s cannot be opened: %w", f.Name, f.Path, err)
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s file %s cannot be read: %w", f.Name, f.Path, err)
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%s file %s is larger than %d bytes", f.Name, f.Path, maxFileBytes)
	}
	return data, nil
}

func (f File) parse(data []byte) (Keys, error) {
	var fj fileJSON
	if err := json.Unmarshal(data, &fj); err != nil {
		if f.LegacySize > 0 && len(data) == f.LegacySize {
			// The earlier form: the raw key, no id. A random key that
			// happens to parse as this JSON is not a worry.
			return Keys{{Secret: bytes.Clone(data), Legacy: true}}, nil
		}
		if f.LegacySize > 0 && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			return nil, fmt.Errorf("%s file %s holds neither keys as JSON nor exactly %d bytes (the one-key form of earlier versions); remove it to have a new one made (what its keys made stops working)", f.Name, f.Path, f.LegacySize)
		}
		// json's error names a position, never the content.
		return nil, fmt.Errorf("%s file %s is not a key file: %w", f.Name, f.Path, err)
	}
	if len(fj.Keys) == 0 {
		return nil, fmt.Errorf("%s file %s holds no keys", f.Name, f.Path)
	}
	ks := make(Keys, 0, len(fj.Keys))
	for _, kj := range fj.Keys {
		if !ValidID(kj.ID) {
			return nil, fmt.Errorf("%s file %s: key id %q must be 1 to %d letters, digits, '-' or '_' (it is part of every token)", f.Name, f.Path, kj.ID, MaxIDLen)
		}
		if _, dup := ks.ByID(kj.ID); dup {
			return nil, fmt.Errorf("%s file %s: duplicate key id %q", f.Name, f.Path, kj.ID)
		}
		secret, err := base64.StdEncoding.DecodeString(kj.Secret)
		if err != nil || len(secret) < SecretSize {
			return nil, fmt.Errorf("%s file %s: key %q must be at least %d bytes of base64", f.Name, f.Path, kj.ID, SecretSize)
		}
		ks = append(ks, Key{ID: kj.ID, Secret: secret, Created: kj.Created, Legacy: kj.Legacy})
	}
	return ks, nil
}

// ValidID reports whether id can be a key id: it can be put in a URL's
// query or a cookie as it is and told apart from the rest of a token.
func ValidID(id string) bool {
	if id == "" || len(id) > MaxIDLen {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// LoadOrCreate reads the file, making it with one new key when it is
// missing (and its folder, mode 0700). A file others may read is used,
// with a warning on log: a mounted secret may come with wider modes, but
// whoever reads it holds the keys.
func (f File) LoadOrCreate(now time.Time, log *slog.Logger) (Keys, error) {
	ks, err := f.Load()
	if errors.Is(err, fs.ErrNotExist) {
		return f.create(now, log)
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(f.Path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn(f.Name+" file is readable by others; it should be mode 0600",
			slog.String("path", f.Path), slog.String("mode", fi.Mode().Perm().String()))
	}
	return ks, nil
}

// create makes the file with one new key. It links the written file into
// place rather than renaming it, so that of two processes starting at once
// the second reads the first's key instead of replacing it.
func (f File) create(now time.Time, log *slog.Logger) (Keys, error) {
	dir := filepath.Dir(f.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%s file: making the folder %s: %w", f.Name, dir, err)
	}
	k, err := newKey(nil, now)
	if err != nil {
		return nil, fmt.Errorf("%s file: %w", f.Name, err)
	}
	ks := Keys{k}
	tmp, err := f.writeTemp(ks)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, f.Path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return f.Load()
		}
		return nil, fmt.Errorf("%s file %s cannot be put in place: %w", f.Name, f.Path, err)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("%s file %s: %w", f.Name, f.Path, err)
	}
	log.Info("made a "+f.Name+" file", slog.String("path", f.Path), slog.String("key", k.ID))
	return ks, nil
}

// Rotate adds a new key to the file, which then signs or seals; the older
// keys still verify or open until retired. A file of the earlier one-key
// form is rewritten as JSON, its key given an id and kept. A missing file
// is made, with the new key alone.
func (f File) Rotate(now time.Time) (Key, error) {
	ks, err := f.Load()
	if errors.Is(err, fs.ErrNotExist) {
		ks, err = f.create(now, slog.New(slog.DiscardHandler))
		if err != nil {
			return Key{}, err
		}
		return ks.Current(), nil
	}
	if err != nil {
		return Key{}, err
	}
	for i := range ks {
		if ks[i].ID == "" {
			if ks[i].ID, err = newID(ks); err != nil {
				return Key{}, fmt.Errorf("%s file: %w", f.Name, err)
			}
			if fi, err := os.Stat(f.Path); err == nil {
				ks[i].Created = fi.ModTime().UTC().Truncate(time.Second)
			}
		}
	}
	k, err := newKey(ks, now)
	if err != nil {
		return Key{}, fmt.Errorf("%s file: %w", f.Name, err)
	}
	if err := f.replace(append(ks, k)); err != nil {
		return Key{}, err
	}
	return k, nil
}

// ErrCurrent means a retire asked to remove the key that signs.
var ErrCurrent = errors.New("the newest key signs and cannot be retired; rotate first")

// Retire removes the key id from the file, if the file holds it: what
// that key made is refused from then on (by a service that reads the file
// again: a restarted one). The newest key, which signs, cannot be retired
// (ErrCurrent).
func (f File) Retire(id string) (found bool, err error) {
	ks, err := f.Load()
	if err != nil {
		return false, err
	}
	i := -1
	for j, k := range ks {
		if k.ID == id {
			i = j
		}
	}
	if i < 0 {
		return false, nil
	}
	if i == len(ks)-1 {
		return true, fmt.Errorf("%s %s: %w", f.Name, id, ErrCurrent)
	}
	return true, f.replace(append(ks[:i:i], ks[i+1:]...))
}

// replace writes ks over the file: a temporary file, synced, renamed over
// the old one, and the folder synced, so that a reader sees the old file
// or the new one, never a part.
func (f File) replace(ks Keys) error {
	tmp, err := f.writeTemp(ks)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Rename(tmp, f.Path); err != nil {
		return fmt.Errorf("%s file %s cannot be put in place: %w", f.Name, f.Path, err)
	}
	if err := syncDir(filepath.Dir(f.Path)); err != nil {
		return fmt.Errorf("%s file %s: %w", f.Name, f.Path, err)
	}
	return nil
}

// writeTemp writes ks to a new temporary file beside the file, mode 0600,
// synced, and returns its path.
func (f File) writeTemp(ks Keys) (string, error) {
	fj := fileJSON{Keys: make([]keyJSON, len(ks))}
	for i, k := range ks {
		fj.Keys[i] = keyJSON{ID: k.ID, Secret: base64.StdEncoding.EncodeToString(k.Secret), Created: k.Created.UTC(), Legacy: k.Legacy}
	}
	data, err := json.MarshalIndent(fj, "", "  ")
	if err != nil {
		return "", fmt.Errorf("%s file: %w", f.Name, err)
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), filepath.Base(f.Path)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("%s file %s cannot be written: %w", f.Name, f.Path, err)
	}
	name := tmp.Name()
	fail := func(err error) (string, error) {
		tmp.Close()
		os.Remove(name)
		return "", fmt.Errorf("%s file %s cannot be written: %w", f.Name, f.Path, err)
	}
	// CreateTemp uses 0600 already; Chmod says so whatever the umask.
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("%s file %s cannot be written: %w", f.Name, f.Path, err)
	}
	return name, nil
}

// syncDir makes a rename or a link in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing the folder %s: %w", dir, err)
	}
	return nil
}

// newKey makes a key with an id none of ks has.
func newKey(ks Keys, now time.Time) (Key, error) {
	id, err := newID(ks)
	if err != nil {
		return Key{}, err
	}
	secret := make([]byte, SecretSize)
	rand.Read(secret)
	return Key{ID: id, Secret: secret, Created: now.UTC().Truncate(time.Second)}, nil
}

// newID is 8 random hex digits that no key of ks has.
func newID(ks Keys) (string, error) {
	for range 100 {
		var b [4]byte
		rand.Read(b[:])
		id := hex.EncodeToString(b[:])
		if _, taken := ks.ByID(id); !taken {
			return id, nil
		}
	}
	return "", errors.New("no free key id")
}
