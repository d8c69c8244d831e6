package signin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// heard records what OnSignIn was told.
type heard struct {
	mu    sync.Mutex
	calls []string // "tenant/user: assertion"
}

func (h *heard) hook(_ context.Context, s signin.Session, assertion string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, s.TenantID+"/"+s.UserID+": "+assertion)
}

func (h *heard) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.calls...)
}

// A Teams single sign-on token is an access token for this service: once
// it opened a session, OnSignIn hears it, for the on-behalf-of flow; a
// refused token is heard by nobody.
func TestOnSignInHearsTheTeamsToken(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	var h heard
	m := startMock(t)
	e := newOIDCEnv(t, m, true, func(o *signin.Options) {
		o.AllowedTenants = []string{alice().TID}
		o.Teams = &signin.TeamsOptions{KeysURL: keys.URL, HTTPClient: keys.Client}
		o.OnSignIn = h.hook
	})
	good := keys.Sign(t, goodToken(e))
	if status, _ := e.exchange(good); status != http.StatusNoContent {
		t.Fatalf("exchange: %d", status)
	}
	bad := goodToken(e)
	bad.Audience = "api://someone-else"
	if status, _ := e.exchange(keys.Sign(t, bad)); status == http.StatusNoContent {
		t.Fatal("a token for another audience opened a session")
	}
	got := h.all()
	if len(got) != 1 || got[0] != alice().TID+"/"+alice().OID+": "+good {
		t.Errorf("OnSignIn heard %q", got)
	}
}

// The browser sign-in asks for the service's own API when told to
// (APIScopes), and hands OnSignIn its access token when that token is for
// this service (its aud the client id, as mockoidc's are).
func TestOnSignInHearsTheSignInsAccessToken(t *testing.T) {
	m := startMock(t)
	asks := newOIDCEnv(t, m, true, func(o *signin.Options) { o.APIScopes = []string{"api://teamsbot/access_as_user"} })
	start, _ := asks.get(asks.noFollow(), asks.srv.URL+"/signin?return=/")
	if loc := start.Header.Get("Location"); !strings.Contains(loc, "access_as_user") || !strings.Contains(loc, "openid") {
		t.Errorf("the sign-in does not ask for the service's API: %s", loc)
	}

	var h heard
	e := newOIDCEnv(t, m, true, func(o *signin.Options) { o.OnSignIn = h.hook })
	m.QueueUser(alice())
	if resp, body := e.finish(e.begin("/")); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	got := h.all()
	if len(got) != 1 || !strings.HasPrefix(got[0], alice().TID+"/"+alice().OID+": ") {
		t.Fatalf("OnSignIn heard %q", got)
	}
	tok := strings.SplitN(got[0], ": ", 2)[1]
	raw, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	var claims struct {
		Aud []string `json:"aud"`
	}
	_ = json.Unmarshal(raw, &claims)
	if len(claims.Aud) != 1 || claims.Aud[0] != m.Config().ClientID {
		t.Errorf("the access token handed on has aud %v", claims.Aud)
	}
}

// Only a token whose aud names this service (its client id or its
// application ID URI) is handed on: Microsoft Graph's default access
// token, or one for another app, is not.
func TestOnlyTokensForThisServiceAreHandedOn(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, true, nil)
	jwtWith := func(aud any) string {
		b, _ := json.Marshal(map[string]any{"aud": aud})
		// A real token's header names its algorithm.
		return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString(b) + ".c2ln"
	}
	id := m.Config().ClientID
	for tok, want := range map[string]bool{
		jwtWith(id):                true,
		jwtWith([]string{"x", id}): true,
		jwtWith("api://" + id):     true,
		jwtWith("00000003-0000-0000-c000-000000000000"): false,
		jwtWith("api://another-app"):                    false,
		jwtWith(nil):                                    false,
		"opaque-token":                                  false,
	} {
		if got := e.svc.ForThisService(tok); got != want {
			t.Errorf("%s: %v, want %v", tok, got, want)
		}
	}
}
