package viewpage

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// discard is the logger of tests that do not read the log.
var discard = slog.New(slog.DiscardHandler)

// keyFile is the key file's JSON (package internal/keyfile), as an
// operator could write it by hand.
type keyFile struct {
	Keys []keyEntry `json:"keys"`
}

type keyEntry struct {
	ID      string    `json:"id"`
	Secret  string    `json:"secret"` // base64 (std)
	Created time.Time `json:"created"`
}

func newTestKeys(t *testing.T) (*tokenKeys, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	k, err := loadTokenKeys(dir, time.Now(), discard)
	if err != nil {
		t.Fatalf("loadTokenKeys: %v", err)
	}
	return k, dir
}

// The frame token rules of the product specification: "The frame URLs
// carry a signed token that expires after 10 minutes. Without that token,
// neither page is served."
func TestFrameTokenRules(t *testing.T) {
	k, _ := newTestKeys(t)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good := k.mint(purposeView, "view1", now)

	tamper := func(tok string, i int) string {
		b := []byte(tok)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	kid, rest, _ := strings.Cut(good, ".")
	exp, mac, _ := strings.Cut(rest, ".")
	laterExp, _ := strconv.ParseInt(exp, 10, 64)

	cases := []struct {
		name    string
		token   string
		purpose string
		view    string
		at      time.Time
		reason  string // "" means accepted
	}{
		{"fresh", good, purposeView, "view1", now, ""},
		{"just before expiry", good, purposeView, "view1", now.Add(TokenLifetime - time.Second), ""},
		{"at expiry", good, purposeView, "view1", now.Add(TokenLifetime), reasonExpired},
		{"missing", "", purposeView, "view1", now, reasonMissing},
		{"another view", good, purposeView, "view2", now, reasonMAC},
		{"another purpose", good, purposeProxy, "view1", now, reasonMAC},
		{"tampered MAC", tamper(good, len(good)-3), purposeView, "view1", now, reasonMAC},
		{"expiry moved later", kid + "." + strconv.FormatInt(laterExp+60, 10) + "." + mac, purposeView, "view1", now, reasonMAC},
		{"unknown key id", "zz" + good[len(kid):], purposeView, "view1", now, reasonKey},
		{"garbage", "not-a-token", purposeView, "view1", now, reasonMalformed},
		{"leading zero expiry", kid + ".0" + exp + "." + mac, purposeView, "view1", now, reasonMalformed},
		{"too long", strings.Repeat("a", 300), purposeView, "view1", now, reasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := k.verify(c.token, c.purpose, c.view, c.at)
			if c.reason == "" {
				if err != nil {
					t.Fatalf("verify: %v, want accepted", err)
				}
				return
			}
			var te *tokenError
			if !errors.As(err, &te) || te.reason != c.reason {
				t.Fatalf("verify: %v, want refusal %q", err, c.reason)
			}
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("verify: %v does not wrap ErrBadToken", err)
			}
		})
	}
}

// A token whose expiry lies further ahead than any this service issues is
// refused even with a valid MAC: a stolen key id cannot mint long-lived
// links with a clock that ran ahead.
func TestFrameTokenFromTheFutureRefused(t *testing.T) {
	k, _ := newTestKeys(t)
	now := time.Now()
	tok := k.mint(purposeProxy, "v", now.Add(time.Hour))
	err := k.verify(tok, purposeProxy, "v", now)
	var te *tokenError
	if !errors.As(err, &te) || te.reason != reasonFuture {
		t.Fatalf("verify: %v, want refusal %q", err, reasonFuture)
	}
}

// The master key is generated on first start, kept 0600 under DataDir and
// reused by the next start, so tokens survive a restart; a key added later
// signs new tokens while the old one still verifies (rotation).
func TestFrameTokenKeysPersistAndRotate(t *testing.T) {
	k1, dir := newTestKeys(t)
	path := filepath.Join(dir, keyFileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	now := time.Now()
	tok := k1.mint(purposeView, "v", now)

	k2, err := loadTokenKeys(dir, now, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := k2.verify(tok, purposeView, "v", now); err != nil {
		t.Fatalf("token minted before a restart: %v", err)
	}

	var kf keyFile
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &kf); err != nil {
		t.Fatal(err)
	}
	kf.Keys = append(kf.Keys, keyEntry{ID: "second", Secret: strings.Repeat("QUJD", 11), Created: now})
	b, _ = json.Marshal(kf)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	k3, err := loadTokenKeys(dir, now, discard)
	if err != nil {
		t.Fatal(err)
	}
	if err := k3.verify(tok, purposeView, "v", now); err != nil {
		t.Fatalf("old key after rotation: %v", err)
	}
	if nt := k3.mint(purposeView, "v", now); !strings.HasPrefix(nt, "second.") {
		t.Fatalf("new token %q not signed with the newest key", nt)
	}
}

// A key file that others may read still works, and the log says so
// without showing the key.
func TestFrameTokenKeysReadableByOthersWarned(t *testing.T) {
	_, dir := newTestKeys(t)
	path := filepath.Join(dir, keyFileName)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	if _, err := loadTokenKeys(dir, time.Now(), slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "readable by others") || !strings.Contains(logs.String(), keyFileName) {
		t.Errorf("no warning about a key file of mode 0644: %q", logs.String())
	}
	var kf keyFile
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &kf); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), kf.Keys[0].Secret) {
		t.Error("the log shows the key")
	}
	logs.Reset()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTokenKeys(dir, time.Now(), slog.New(slog.NewTextHandler(&logs, nil))); err != nil || logs.Len() != 0 {
		t.Errorf("mode 0600: %v, log %q, want no warning", err, logs.String())
	}
}

func TestFrameTokenKeysBadFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, keyFileName), []byte(`{"keys":[{"id":"a","secret":"c2hvcnQ="}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadTokenKeys(dir, time.Now(), discard); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
	if _, err := loadTokenKeys("", time.Now(), discard); err == nil {
		t.Fatal("an empty DataDir was accepted")
	}
	// A key id goes into every frame URL as it is: one that a URL or the
	// token format would read otherwise, or too long for a token, is
	// refused at start rather than making every frame a 403.
	secret := strings.Repeat("QUJD", 11)
	for _, id := range []string{"", "a.b", "a&b", "a+b", "key 2", "a#b", "ключ", strings.Repeat("k", maxKeyIDLen+1)} {
		b, _ := json.Marshal(keyFile{Keys: []keyEntry{{ID: id, Secret: secret}}})
		if err := os.WriteFile(filepath.Join(dir, keyFileName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadTokenKeys(dir, time.Now(), discard); err == nil || !strings.Contains(err.Error(), "key id") {
			t.Errorf("key id %q: %v, want a clear refusal", id, err)
		}
	}
	longest := strings.Repeat("k", maxKeyIDLen)
	b, _ := json.Marshal(keyFile{Keys: []keyEntry{{ID: longest, Secret: secret}}})
	if err := os.WriteFile(filepath.Join(dir, keyFileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := loadTokenKeys(dir, time.Now(), discard)
	if err != nil {
		t.Fatalf("key id of %d characters: %v", len(longest), err)
	}
	now := time.Now()
	if err := k.verify(k.mint(purposeView, "v", now), purposeView, "v", now); err != nil {
		t.Errorf("a token signed with the longest key id: %v", err)
	}
}

// No string but the minted token verifies, and none makes verify panic.
func FuzzFrameTokenVerify(f *testing.F) {
	k, err := loadTokenKeys(f.TempDir(), time.Now(), discard)
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good := k.mint(purposeView, "view1", now)
	f.Add(good)
	f.Add(good + "A")
	f.Add(strings.Replace(good, ".", "..", 1))
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		err := k.verify(tok, purposeView, "view1", now)
		if tok != good && err == nil {
			t.Fatalf("verify accepted %q", tok)
		}
	})
}
