package signin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// A session whose sealed value fits 4096 bytes only without the cookie's
// name is refused too: browsers count the name and the value together.
func TestSessionCookieLimitCountsTheName(t *testing.T) {
	s, err := New(context.Background(), Options{Loopback: true, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// Find a payload whose sealed value is between 4096-len(name)+1 and
	// 4096 bytes long, sealed as startSession seals it.
	sealedLen := func(p sessionPayload) int {
		p.V = 1
		p.Exp = s.now().Add(s.lifetime).Unix()
		plain, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return len(s.seal.seal(s.sessionCookie, plain))
	}
	var p sessionPayload
	found := false
	for roles := 0; roles < 64 && !found; roles++ {
		for name := 0; name <= 256 && !found; name++ {
			p = sessionPayload{TID: "t", OID: "o", Name: strings.Repeat("n", name), Local: true}
			for range roles {
				p.Roles = append(p.Roles, strings.Repeat("r", 100))
			}
			n := sealedLen(p)
			found = n > maxCookieValue-len(s.sessionCookie) && n <= maxCookieValue
		}
	}
	if !found {
		t.Fatal("no payload lands between the two limits")
	}
	c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/", nil), httptest.NewRecorder())
	if _, err := s.startSession(c, p); err == nil {
		t.Errorf("a session cookie of more than %d bytes of name and value was set", maxCookieValue)
	}
}

// A one-key cookie key file of an earlier version (32 raw bytes) keeps
// working: its cookies carry no key id and still open after a rotation,
// which rewrites the file with key ids; new cookies carry the new key's
// id; once the old key is retired, its cookies are refused.
func TestCookieKeyOfAnEarlierVersion(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, legacySize)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, keyFileName), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	discard := slog.New(slog.DiscardHandler)
	before, err := loadSealer(dir, now, discard)
	if err != nil {
		t.Fatal(err)
	}
	old := before.seal("teamsbot-session", []byte("before"))
	if strings.Contains(old, ".") {
		t.Fatalf("a cookie of the one-key file carries a key id: %q", old)
	}
	if got, err := before.open("teamsbot-session", old); err != nil || string(got) != "before" {
		t.Fatalf("open: %q, %v", got, err)
	}

	k, err := CookieKeys(dir).Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	after, err := loadSealer(dir, now, discard) // the service restarted
	if err != nil {
		t.Fatal(err)
	}
	if got, err := after.open("teamsbot-session", old); err != nil || string(got) != "before" {
		t.Errorf("a cookie of the one-key file after the rotation: %q, %v", got, err)
	}
	fresh := after.seal("teamsbot-session", []byte("after"))
	if id, _, _ := strings.Cut(fresh, "."); id != k.ID {
		t.Errorf("a new cookie carries key id %q, want the new key's %q", id, k.ID)
	}
	if _, err := after.open("teamsbot-signin", fresh); err == nil {
		t.Error("a session cookie opened as the sign-in cookie")
	}
	// Its key id is bound to it: named as another key, it does not open.
	ks, _ := CookieKeys(dir).Load()
	legacy, ok := ks.Legacy()
	if !ok {
		t.Fatal("the rotated file lost the old key")
	}
	_, sealed, _ := strings.Cut(fresh, ".")
	if _, err := after.open("teamsbot-session", legacy.ID+"."+sealed); err == nil {
		t.Error("a cookie opened under another key id")
	}

	if found, err := CookieKeys(dir).Retire(legacy.ID); !found || err != nil {
		t.Fatalf("retire: %v, %v", found, err)
	}
	retired, err := loadSealer(dir, now, discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := retired.open("teamsbot-session", old); err == nil {
		t.Error("a cookie of the retired key still opens")
	}
	if got, err := retired.open("teamsbot-session", fresh); err != nil || string(got) != "after" {
		t.Errorf("a cookie of the current key after the retirement: %q, %v", got, err)
	}
}
