package signin_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// teamsEnv is an https sign-in service with Teams single sign-on on,
// trusting the key set of keys, with tenant A onboarded.
func teamsEnv(t *testing.T, keys *testenv.EntraKeys) *env {
	t.Helper()
	m := startMock(t)
	return newOIDCEnv(t, m, true, func(o *signin.Options) {
		o.AllowedTenants = []string{alice().TID}
		o.Teams = &signin.TeamsOptions{KeysURL: keys.URL, HTTPClient: keys.Client}
	})
}

// goodToken is a Teams single sign-on token for Alice that the env takes.
func goodToken(e *env) testenv.TeamsToken {
	u, _ := url.Parse(e.srv.URL)
	return testenv.TeamsToken{
		Audience: signin.ApplicationIDURI(u.Hostname(), e.opts.ClientID),
		Tenant:   alice().TID, User: alice().OID, Name: "Alice Example", Roles: []string{"agents.read", "agents.run"},
	}
}

// exchange posts a token to /api/signin/teams as the page inside Teams
// does (same origin, JSON) and returns the status and the Set-Cookie.
func (e *env) exchange(token string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/signin/teams", strings.NewReader(`{"token":"`+token+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, _ := do(e.t, e.client, req)
	return resp.StatusCode, resp.Header.Get("Set-Cookie")
}

// A token Teams got for this service opens the same session as the
// browser sign-in (tenant, user, name, roles), in a cookie that a browser
// sends inside Teams' frame: SameSite=None, Secure, Partitioned.
func TestTeamsTokenOpensASession(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	e := teamsEnv(t, keys)
	for _, v := range []string{"2.0", "1.0"} {
		e.jar.SetCookies(mustURL(e.srv.URL), nil)
		tok := goodToken(e)
		tok.Version = v
		status, cookie := e.exchange(keys.Sign(t, tok))
		if status != http.StatusNoContent {
			t.Fatalf("v%s: POST /api/signin/teams = %d, want 204", v, status)
		}
		for _, attr := range []string{"__Host-teamsbot-session=", "SameSite=None", "Secure", "Partitioned", "HttpOnly", "Path=/"} {
			if !strings.Contains(cookie, attr) {
				t.Errorf("v%s: session cookie %q lacks %s", v, cookie, attr)
			}
		}
		resp, body := e.get(e.client, e.srv.URL+"/")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, alice().OID) || !strings.Contains(body, alice().TID) ||
			!strings.Contains(body, "agents.run") || !strings.Contains(body, "Alice Example") {
			t.Fatalf("v%s: session after the Teams token: %d %s", v, resp.StatusCode, body)
		}
	}
	// The client id is an audience Entra uses too.
	tok := goodToken(e)
	tok.Audience = e.opts.ClientID
	if status, _ := e.exchange(keys.Sign(t, tok)); status != http.StatusNoContent {
		t.Fatalf("a token for the client id: %d, want 204", status)
	}
}

// Every rule of the token has a token that breaks it, and each is refused
// without a session.
func TestTeamsTokenRefusals(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	e := teamsEnv(t, keys)
	otherTenant := "33333333-3333-3333-3333-333333333333"
	for name, c := range map[string]struct {
		edit   func(*testenv.TeamsToken)
		other  bool // signed by a key the set does not hold
		status int
	}{
		"another audience":       {edit: func(tk *testenv.TeamsToken) { tk.Audience = "api://other.example/" + e.opts.ClientID }, status: 401},
		"Graph's audience":       {edit: func(tk *testenv.TeamsToken) { tk.Audience = "https://graph.microsoft.com" }, status: 401},
		"a tenant not onboarded": {edit: func(tk *testenv.TeamsToken) { tk.Tenant = otherTenant }, status: 403},
		"an issuer of another tenant": {edit: func(tk *testenv.TeamsToken) {
			tk.Issuer = "https://login.microsoftonline.com/" + otherTenant + "/v2.0"
		}, status: 401},
		"a foreign issuer":   {edit: func(tk *testenv.TeamsToken) { tk.Issuer = "https://evil.example/" + alice().TID + "/v2.0" }, status: 401},
		"expired":            {edit: func(tk *testenv.TeamsToken) { tk.IssuedAt = time.Now().Add(-3 * time.Hour) }, status: 401},
		"not yet valid":      {edit: func(tk *testenv.TeamsToken) { tk.IssuedAt = time.Now().Add(time.Hour) }, status: 401},
		"a bad signature":    {other: true, status: 401},
		"no scope":           {edit: func(tk *testenv.TeamsToken) { tk.Scope = "User.Read" }, status: 401},
		"an unknown client":  {edit: func(tk *testenv.TeamsToken) { tk.Client = "99999999-9999-9999-9999-999999999999" }, status: 401},
		"no user":            {edit: func(tk *testenv.TeamsToken) { tk.User = "" }, status: 401},
		"an unknown version": {edit: func(tk *testenv.TeamsToken) { tk.Version = "3.0" }, status: 401},
	} {
		t.Run(name, func(t *testing.T) {
			e.jar.SetCookies(mustURL(e.srv.URL), nil)
			tok := goodToken(e)
			if c.edit != nil {
				c.edit(&tok)
			}
			raw := keys.Sign(t, tok)
			if c.other {
				raw = keys.SignWithOtherKey(t, tok)
			}
			status, cookie := e.exchange(raw)
			if status != c.status || cookie != "" {
				t.Fatalf("status %d cookie %q, want %d and no cookie", status, cookie, c.status)
			}
			if resp, _ := e.get(e.client, e.srv.URL+"/"); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a session after a refused token: %d", resp.StatusCode)
			}
		})
	}
	// A request from another site never reaches the token check.
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/signin/teams", strings.NewReader(`{"token":"`+keys.Sign(t, goodToken(e))+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, _ := do(t, e.client, req); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Fatalf("cross-site POST: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// Outside Teams the browser sign-in keeps its Lax, unpartitioned cookie.
func TestBrowserSessionCookieUnchangedInTeamsMode(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	m := startMock(t)
	e := newOIDCEnv(t, m, true, func(o *signin.Options) {
		o.AllowedTenants = []string{alice().TID}
		o.Teams = &signin.TeamsOptions{KeysURL: keys.URL, HTTPClient: keys.Client}
	})
	m.QueueUser(alice())
	f := e.begin("/")
	resp, _ := e.get(e.noFollow(), f.callback.String())
	var session string
	for _, c := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, "__Host-teamsbot-session=") {
			session = c
		}
	}
	if !strings.Contains(session, "SameSite=Lax") || strings.Contains(session, "Partitioned") || strings.Contains(session, "SameSite=None") {
		t.Fatalf("browser session cookie in Teams mode: %q", session)
	}
}

// Sign-in pages refuse to render in a frame, and tell every browser so.
func TestSignInPagesRefuseFrames(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	e := teamsEnv(t, keys)
	for _, path := range []string{"/signin?return=/", "/signout", "/signed-out", "/signin/teams/start", "/signin/teams/done"} {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
		req.Header.Set("Sec-Fetch-Dest", "iframe")
		resp, body := do(t, e.noFollow(), req)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "does not open inside a frame") {
			t.Errorf("%s in a frame: %d, want 403 and why", path, resp.StatusCode)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s in a frame: CSP %q", path, csp)
		}
		req.Header.Set("Sec-Fetch-Dest", "document")
		resp, _ = do(t, e.noFollow(), req)
		if resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: X-Frame-Options %q CSP %q", path, resp.Header.Get("X-Frame-Options"), resp.Header.Get("Content-Security-Policy"))
		}
		if resp.StatusCode == http.StatusForbidden {
			t.Errorf("%s as a document: 403", path)
		}
	}
}

// Teams single sign-on refuses a configuration it cannot keep safe.
func TestTeamsOptionsChecked(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	_, err := signin.New(t.Context(), signin.Options{
		DataDir: t.TempDir(), Loopback: true, Teams: &signin.TeamsOptions{KeysURL: keys.URL},
	})
	if err == nil || !strings.Contains(err.Error(), "needs the OIDC sign-in") || !strings.Contains(err.Error(), "https://") {
		t.Fatalf("Teams without OIDC and https: %v", err)
	}
}

// The popup's last page hands over a one-time code for the person signed
// in there; the page inside Teams trades it once, within two minutes, for
// the frame's session cookie. A second trade, a late one or a forged code
// gets nothing.
func TestTeamsPopupHandoff(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	m := startMock(t)
	e := newOIDCEnv(t, m, true, func(o *signin.Options) {
		o.AllowedTenants = []string{alice().TID}
		o.Teams = &signin.TeamsOptions{KeysURL: keys.URL, HTTPClient: keys.Client, HostOrigins: []string{"https://teams.example"}}
	})
	m.QueueUser(alice())
	resp, _ := e.get(e.client, e.srv.URL+"/signin/teams/start")
	if resp.Request.URL.Path != "/signin/teams/done" {
		t.Fatalf("the popup ended at %s", resp.Request.URL)
	}
	code := func() string {
		_, body := e.get(e.client, e.srv.URL+"/signin/teams/done")
		_, rest, ok := strings.Cut(body, `data-code="`)
		c, _, _ := strings.Cut(rest, `"`)
		if !ok || c == "" || !strings.Contains(body, `data-teams-origins="https://teams.example"`) {
			t.Fatalf("the last popup page: %s", body)
		}
		return c
	}
	trade := func(c string) (int, string) {
		jar, _ := cookiejar.New(nil)
		cl := *e.client
		cl.Jar = jar
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/signin/teams/handoff", strings.NewReader(`{"code":"`+c+`"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, _ := do(t, &cl, req)
		return resp.StatusCode, resp.Header.Get("Set-Cookie")
	}
	c := code()
	status, cookie := trade(c)
	if status != http.StatusNoContent || !strings.Contains(cookie, "Partitioned") || !strings.Contains(cookie, "SameSite=None") {
		t.Fatalf("first trade: %d %q", status, cookie)
	}
	if status, cookie := trade(c); status != http.StatusUnauthorized || cookie != "" {
		t.Errorf("second trade of one code: %d %q", status, cookie)
	}
	if status, _ := trade(c[:len(c)-2] + "AA"); status != http.StatusUnauthorized {
		t.Errorf("a forged code: %d", status)
	}
	late := code()
	e.clock.Advance(3 * time.Minute)
	if status, _ := trade(late); status != http.StatusUnauthorized {
		t.Errorf("a code three minutes old: %d", status)
	}
}
