package signin_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/internal/netaddr"
	"teamsbot/signin"
)

// A person who opens a view's link signs in with the provider and lands on
// the view page they asked for, signed in as themselves.
func TestOIDCSignInLandsOnRequestedPageSignedIn(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	// An Entra sign-in is never told whom to expect, nor does it say
	// anything of the local people.
	if got, want := e.svc.SignInAsURL("/mcp-apps/view-1", signin.LocalPeople()[0].UserID), e.svc.SignInURL("/mcp-apps/view-1"); got != want {
		t.Errorf("SignInAsURL with an issuer = %q, want %q", got, want)
	}
	if e.svc.LocalRequest(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)) {
		t.Error("LocalRequest holds with an issuer")
	}

	resp, body := e.get(e.client, e.srv.URL+e.svc.SignInURL("/mcp-apps/view-1?tab=2"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("after sign-in: status %d: %s", resp.StatusCode, body)
	}
	if got := resp.Request.URL.RequestURI(); got != "/mcp-apps/view-1?tab=2" {
		t.Errorf("landed on %q, want /mcp-apps/view-1?tab=2", got)
	}
	s, code := e.whoami()
	if code != http.StatusOK {
		t.Fatalf("whoami: status %d", code)
	}
	want := signin.Session{
		TenantID: "11111111-1111-1111-1111-111111111111",
		UserID:   "aaaaaaaa-0000-0000-0000-00000000000a",
		Name:     "Alice Example",
		Username: "alice@contoso.example",
		Roles:    []string{"agents.read", "agents.run"},
	}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(signin.Session{}, "Expires")); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	if wantExp := e.clock.Now().Add(signin.DefaultSessionLifetime).Truncate(time.Second); !s.Expires.Equal(wantExp) {
		t.Errorf("expires %v, want %v (8 h)", s.Expires, wantExp)
	}
	if e.cookie("teamsbot-signin") != nil {
		t.Error("the sign-in cookie is still in the browser after the callback")
	}
}

// The authorization request is an authorization code request with PKCE
// (S256), state, nonce, response_mode=query and the scopes openid profile
// email; the callback URL comes from the public base URL.
func TestAuthorizationRequestParameters(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	resp, _ := e.get(e.noFollow(), e.srv.URL+"/signin?return=/x")
	loc, err := resp.Location()
	if err != nil {
		t.Fatal(err)
	}
	q := loc.Query()
	checks := map[string]string{
		"response_type":         "code",
		"response_mode":         "query",
		"scope":                 "openid profile email",
		"code_challenge_method": "S256",
		"client_id":             m.ClientID,
		"redirect_uri":          e.opts.PublicBaseURL.URL("/signin/callback"),
	}
	for k, want := range checks {
		if got := q.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 43 {
			t.Errorf("%s = %q: want at least 256 random bits", k, q.Get(k))
		}
	}
	if q.Get("state") == q.Get("nonce") {
		t.Error("state and nonce are the same value")
	}
	if loc.Scheme+"://"+loc.Host+loc.Path != m.AuthorizationEndpoint() {
		t.Errorf("sent to %s, want the provider's authorization endpoint", loc)
	}
}

func TestCallbackRefusesWrongNonce(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	u := alice()
	bad := "nonce-of-another-sign-in"
	u.Nonce = &bad
	m.QueueUser(u)

	resp, body := e.finish(e.begin("/x"))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "could not be verified") {
		t.Errorf("page does not say why: %s", body)
	}
	if setCookie(resp, "teamsbot-session") != nil {
		t.Error("a session cookie was set")
	}
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Errorf("whoami: %d, want 401", code)
	}
}

func TestCallbackRefusesWrongState(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	q := f.callback.Query()
	q.Set("state", "state-from-an-attacker")
	f.callback.RawQuery = q.Encode()

	resp, body := e.finish(f)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "does not belong to the sign-in started in this browser") {
		t.Errorf("page does not say why: %s", body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("content type %q, want an HTML page", ct)
	}
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Errorf("whoami: %d, want 401", code)
	}
}

// A copy of the sign-in cookie and the callback URL, taken before the
// callback, is worth nothing after it: the state is single use.
func TestCallbackRefusesReplayedStateCookie(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	stolen := e.cookie("teamsbot-signin")
	if stolen == nil {
		t.Fatal("no sign-in cookie after GET /signin")
	}
	if resp, body := e.finish(f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first callback: status %d: %s", resp.StatusCode, body)
	}

	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(e.srv.URL)
	jar.SetCookies(u, []*http.Cookie{{Name: stolen.Name, Value: stolen.Value, Path: "/"}})
	attacker := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, body := e.get(attacker, f.callback.String())
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("replayed callback: status %d, want 400: %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "already used") {
		t.Errorf("page does not say why: %s", body)
	}
	if setCookie(resp, "teamsbot-session") != nil && setCookie(resp, "teamsbot-session").MaxAge >= 0 {
		t.Error("the replay got a session cookie")
	}
}

func TestCallbackRefusesExpiredStateCookie(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	e.clock.Advance(10*time.Minute + time.Second)

	resp, body := e.finish(f)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "expired") {
		t.Errorf("page does not say the sign-in expired: %s", body)
	}
	if !strings.Contains(body, `href="/signin?return=%2Fx"`) {
		t.Errorf("page does not offer to start again towards /x: %s", body)
	}
}

func TestCallbackWithoutSignInCookie(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	for _, q := range []string{"", "?code=abc&state=def", "?state=", "?code=%00&state=%ff%fe"} {
		resp, body := e.get(e.noFollow(), e.srv.URL+"/signin/callback"+q)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Please start again") {
			t.Errorf("callback%s: status %d, want 400 with a clear page: %s", q, resp.StatusCode, body)
		}
	}
}

// An error sent back by the provider (the error response of OpenID Connect
// Core 3.1.2.6, as Entra sends it on the redirect URI) is shown on a 400
// page, its text escaped.
func TestCallbackShowsProviderError(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	q := url.Values{
		"error":             {"access_denied"},
		"error_description": {"AADSTS65004: User declined to consent <script>alert(1)</script>"},
		"state":             {f.callback.Query().Get("state")},
	}
	resp, body := e.get(e.noFollow(), e.srv.URL+"/signin/callback?"+q.Encode())
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
	}
	if !strings.Contains(body, "access_denied") || !strings.Contains(body, "AADSTS65004") {
		t.Errorf("page does not show the provider's error: %s", body)
	}
	if strings.Contains(body, "<script>") {
		t.Errorf("provider text not escaped: %s", body)
	}
	// The sign-in cookie was spent by the error.
	if resp, _ := e.finish(f); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("callback after the error: status %d, want 400", resp.StatusCode)
	}

	// A crafted error link (no sign-in started here, or another state)
	// gets the service's own words, never the link's.
	m.QueueUser(alice())
	f = e.begin("/x")
	for _, state := range []string{"", "state-from-an-attacker"} {
		crafted := url.Values{
			"error":             {"access_denied"},
			"error_description": {"Your account is locked. Call +1 555 0100 to unlock it."},
			"state":             {state},
		}
		for _, c := range []*http.Client{e.noFollow(), &http.Client{}} {
			resp, body := e.get(c, e.srv.URL+"/signin/callback?"+crafted.Encode())
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "did not sign you in") {
				t.Errorf("crafted error link: status %d, want 400 saying sign-in failed: %s", resp.StatusCode, body)
			}
			if strings.Contains(body, "555 0100") || strings.Contains(body, "access_denied") {
				t.Errorf("crafted error link: the page repeats the link's text: %s", body)
			}
		}
	}
}

// When the token endpoint refuses the code, or cannot be reached, the
// person gets a page, not a panic.
func TestCallbackTokenEndpointFailures(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	m.QueueError(&mockoidc.ServerError{Code: http.StatusBadRequest, Error: "invalid_grant", Description: "code expired"})
	resp, body := e.finish(f)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "refused the sign-in code") {
		t.Errorf("refused code: status %d: %s", resp.StatusCode, body)
	}

	m.QueueUser(alice())
	f = e.begin("/x")
	m.Shutdown()
	resp, body = e.finish(f)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "could not be reached") {
		t.Errorf("provider down: status %d: %s", resp.StatusCode, body)
	}
}

// A token without Entra's tid and oid (mockoidc's default user) does not
// sign anyone in: identity is (tid, oid).
func TestCallbackRefusesTokenWithoutTenantOrObjectID(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(mockoidc.DefaultUser())
	resp, body := e.finish(e.begin("/x"))
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %s", resp.StatusCode, body)
	}
}

// With a single-tenant issuer go-oidc checks iss; a token from another
// issuer is refused, and a tenant allow-list, when given, applies too.
func TestSingleTenantIssuerAndAllowList(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, func(o *signin.Options) {
		o.AllowedTenants = []string{"11111111-1111-1111-1111-111111111111"}
	})

	u := alice()
	u.Issuer = "https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111/v2.0"
	m.QueueUser(u)
	if resp, body := e.finish(e.begin("/x")); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("foreign issuer: status %d, want 400: %s", resp.StatusCode, body)
	}

	u = alice()
	u.TID = "99999999-9999-9999-9999-999999999999"
	m.QueueUser(u)
	resp, body := e.finish(e.begin("/x"))
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not set up to use this service") {
		t.Errorf("tenant not on the list: status %d, want 403: %s", resp.StatusCode, body)
	}

	m.QueueUser(alice())
	if resp, body := e.finish(e.begin("/x")); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("listed tenant: status %d, want 303: %s", resp.StatusCode, body)
	}
}

func TestNewRefusesIncompleteOIDCConfig(t *testing.T) {
	_, err := signin.New(context.Background(), signin.Options{
		Issuer:        "https://login.microsoftonline.com/organizations/v2.0",
		PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"),
		DataDir:       t.TempDir(),
	})
	if !errors.Is(err, signin.ErrConfig) {
		t.Fatalf("New: %v, want ErrConfig", err)
	}
	for _, want := range []string{"client id", "client secret", "AllowedTenants"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// Only a sign-in whose ID token verified spends its state: callbacks that
// carry a valid flow cookie but a code the provider refuses, sent as often
// as anyone likes, leave nothing behind in the service's memory, and the
// real sign-in still goes through.
func TestRefusedCallbacksRecordNoState(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	flowCookie := e.cookie("teamsbot-signin")
	if flowCookie == nil {
		t.Fatal("no sign-in cookie after GET /signin")
	}
	for i := range 20 {
		jar, _ := cookiejar.New(nil)
		jar.SetCookies(mustURL(e.srv.URL), []*http.Cookie{{Name: flowCookie.Name, Value: flowCookie.Value, Path: "/"}})
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		q := url.Values{"state": {f.callback.Query().Get("state")}, "code": {"made-up-code-" + strconv.Itoa(i)}}
		if resp, body := e.get(c, e.srv.URL+"/signin/callback?"+q.Encode()); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("made-up code: status %d, want 400: %s", resp.StatusCode, body)
		}
	}
	if n := signin.UsedStates(e.svc); n != 0 {
		t.Errorf("%d states recorded after refused callbacks, want 0", n)
	}
	if resp, body := e.finish(f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the real callback: status %d: %s", resp.StatusCode, body)
	}
	if n := signin.UsedStates(e.svc); n != 1 {
		t.Errorf("%d states recorded after one sign-in, want 1", n)
	}
}

// Nothing secret reaches the log in OIDC mode, at debug level, through a
// sign-in, a refused one and a forged cookie: not the code, the state, the
// nonce, an ID token, the client secret or a cookie.
func TestOIDCLogsNoSecrets(t *testing.T) {
	m := startMock(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newOIDCEnv(t, m, false, func(o *signin.Options) { o.Logger = logger })

	var secrets []string
	m.QueueUser(alice())
	f := e.begin("/x")
	authz, _ := f.start.Location()
	secrets = append(secrets, f.callback.Query().Get("code"), f.callback.Query().Get("state"),
		authz.Query().Get("nonce"), authz.Query().Get("code_challenge"), setCookie(f.start, "teamsbot-signin").Value)
	resp, _ := e.finish(f)
	session := setCookie(resp, "teamsbot-session")
	if session == nil {
		t.Fatal("no session cookie")
	}
	secrets = append(secrets, session.Value)
	e.whoami()

	u := alice()
	bad := "another-nonce"
	u.Nonce = &bad
	m.QueueUser(u)
	f = e.begin("/x")
	secrets = append(secrets, f.callback.Query().Get("code"), f.callback.Query().Get("state"))
	e.finish(f)
	forged := session.Value[:len(session.Value)-4] + "AAAA"
	e.svc.Session(requestWith(session.Name, forged))

	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "signed in") || !strings.Contains(out, "nonce does not match") {
		t.Fatalf("the log lacks the sign-in or the refusal: %s", out)
	}
	for _, s := range append(secrets, m.ClientSecret, forged, "eyJ") {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("the log shows %.12q…", s)
		}
	}
}

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
