package signin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
