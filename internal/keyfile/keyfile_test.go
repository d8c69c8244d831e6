package keyfile_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/internal/keyfile"
	"teamsbot/internal/testenv"
)

var now = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

func file(t *testing.T) keyfile.File {
	return keyfile.File{Path: filepath.Join(t.TempDir(), "data", "test.key"), Name: "test key", LegacySize: 32}
}

// leftovers lists what else than the key file is in its folder: a write
// that left a temporary file behind.
func leftovers(t *testing.T, f keyfile.File) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(f.Path))
	if err != nil {
		t.Fatal(err)
	}
	var other []string
	for _, e := range entries {
		if e.Name() != filepath.Base(f.Path) {
			other = append(other, e.Name())
		}
	}
	return other
}

// A missing file is made once, mode 0600 in a folder of mode 0700, with
// one key; it is read back the same; concurrent makers agree on one key.
func TestCreateOnceAndReuse(t *testing.T) {
	f := file(t)
	var logs testenv.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	const n = 8
	got := make([]keyfile.Keys, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = f.LoadOrCreate(now, log) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || len(got[i]) != 1 || !bytes.Equal(got[i][0].Secret, got[0][0].Secret) || got[i][0].ID != got[0][0].ID {
			t.Fatalf("maker %d: %v, %v; every maker must read the one key made", i, got[i], errs[i])
		}
	}
	k := got[0].Current()
	if !keyfile.ValidID(k.ID) || len(k.Secret) != keyfile.SecretSize || !k.Created.Equal(now) || k.Legacy {
		t.Errorf("key %q, %d bytes, created %v, legacy %v", k.ID, len(k.Secret), k.Created, k.Legacy)
	}
	fi, err := os.Stat(f.Path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file: %v, %v; want mode 0600", fi, err)
	}
	if di, err := os.Stat(filepath.Dir(f.Path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("folder: %v, %v; want mode 0700", di, err)
	}
	again, err := f.Load()
	if err != nil || len(again) != 1 || !bytes.Equal(again[0].Secret, k.Secret) {
		t.Errorf("read back: %v, %v", again, err)
	}
	if l := leftovers(t, f); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
	if strings.Count(logs.String(), "made a test key file") != 1 || strings.Contains(logs.String(), base64.StdEncoding.EncodeToString(k.Secret)) {
		t.Errorf("log:\n%s\nwant one line of the making, without the key", logs.String())
	}

	// A file others may read is used, with a warning.
	if err := os.Chmod(f.Path, 0o644); err != nil {
		t.Fatal(err)
	}
	logs = testenv.LogBuffer{}
	log = slog.New(slog.NewTextHandler(&logs, nil))
	if _, err := f.LoadOrCreate(now, log); err != nil || !strings.Contains(logs.String(), "readable by others") {
		t.Errorf("a 0644 file: %v; log %q", err, logs.String())
	}
}

// Rotate adds a key that becomes the current one, and keeps the old one;
// Retire removes the old one and refuses to remove the current one.
func TestRotateAndRetire(t *testing.T) {
	f := file(t)
	first, err := f.LoadOrCreate(now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	old := first.Current()
	k, err := f.Rotate(now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := f.Load()
	if err != nil || len(ks) != 2 || ks.Current().ID != k.ID || ks[0].ID != old.ID || !bytes.Equal(ks[0].Secret, old.Secret) || k.ID == old.ID {
		t.Fatalf("after rotate: %v, %v; want the old key then the new one", ks, err)
	}
	if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after rotate: %v, %v; want mode 0600", fi, err)
	}
	if found, err := f.Retire(k.ID); !found || !errors.Is(err, keyfile.ErrCurrent) {
		t.Errorf("retiring the current key: %v, %v; want ErrCurrent", found, err)
	}
	if found, err := f.Retire("nosuchkey"); found || err != nil {
		t.Errorf("retiring an unknown id: %v, %v", found, err)
	}
	if found, err := f.Retire(old.ID); !found || err != nil {
		t.Fatalf("retiring the old key: %v, %v", found, err)
	}
	if ks, err := f.Load(); err != nil || len(ks) != 1 || ks[0].ID != k.ID {
		t.Errorf("after retire: %v, %v; want the new key alone", ks, err)
	}
	if l := leftovers(t, f); len(l) != 0 {
		t.Errorf("left behind: %v", l)
	}
	// Rotating a missing file makes it.
	g := file(t)
	if k, err := g.Rotate(now); err != nil || !keyfile.ValidID(k.ID) {
		t.Errorf("rotating a missing file: %v, %v", k, err)
	}
}

// A one-key file of an earlier version (32 raw bytes) is read as one key
// without id, marked legacy; Rotate rewrites it as JSON, the old key kept
// with an id and its mark, the new key current.
func TestLegacyFileUpgradedOnRotate(t *testing.T) {
	f := file(t)
	raw := bytes.Repeat([]byte{0x7b}, 32) // starts like JSON, and is not
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := f.Load()
	if err != nil || len(ks) != 1 || ks[0].ID != "" || !ks[0].Legacy || !bytes.Equal(ks[0].Secret, raw) {
		t.Fatalf("legacy file: %+v, %v", ks, err)
	}
	k, err := f.Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	ks, err = f.Load()
	if err != nil || len(ks) != 2 {
		t.Fatalf("after rotate: %v, %v", ks, err)
	}
	legacy, ok := ks.Legacy()
	if !ok || !keyfile.ValidID(legacy.ID) || !bytes.Equal(legacy.Secret, raw) || ks.Current().ID != k.ID || ks.Current().Legacy {
		t.Errorf("after rotate: %+v; want the old key with an id and its mark, then the new one", ks)
	}
	data, _ := os.ReadFile(f.Path)
	if !bytes.HasPrefix(data, []byte("{")) {
		t.Errorf("not rewritten as JSON: %q", data)
	}
}

// Damaged files are refused with what is wrong, and never the key.
func TestDamagedFilesRefused(t *testing.T) {
	secret := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("k"), 32))
	for name, tc := range map[string]struct{ content, says string }{
		"short raw":    {"short", "exactly 32 bytes"},
		"no keys":      {`{"keys":[]}`, "no keys"},
		"short secret": {`{"keys":[{"id":"a","secret":"c2hvcnQ="}]}`, "at least 32 bytes"},
		"bad id":       {`{"keys":[{"id":"a.b","secret":"` + secret + `"}]}`, "key id"},
		"empty id":     {`{"keys":[{"id":"","secret":"` + secret + `"}]}`, "key id"},
		"duplicate":    {`{"keys":[{"id":"a","secret":"` + secret + `"},{"id":"a","secret":"` + secret + `"}]}`, "duplicate"},
		"broken JSON":  {`{"keys":[{"id":"a","secret":"` + secret + `"`, "not a key file"},
	} {
		t.Run(name, func(t *testing.T) {
			f := file(t)
			os.MkdirAll(filepath.Dir(f.Path), 0o700)
			if err := os.WriteFile(f.Path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := f.LoadOrCreate(now, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tc.says) || errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("err = %v, want it to say %q", err, tc.says)
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "short\"") {
				t.Errorf("the error shows the content: %v", err)
			}
		})
	}
}
