package signin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/signin"
)

// clock and entraUser are the shared test clock and Entra ID user.
type (
	clock     = testenv.Clock
	entraUser = testenv.EntraUser
)

func newClock() *clock { return testenv.NewClock(time.Now()) }

func alice() *entraUser {
	return &entraUser{
		TID:   "11111111-1111-1111-1111-111111111111",
		OID:   "aaaaaaaa-0000-0000-0000-00000000000a",
		Name:  "Alice Example",
		UPN:   "alice@contoso.example",
		Roles: []string{"agents.read", "agents.run"},
	}
}

// startMock runs mockoidc on 127.0.0.1.
func startMock(t testing.TB) *mockoidc.MockOIDC { return testenv.StartMockOIDC(t) }

// env is a sign-in service served by Echo over real HTTP on 127.0.0.1,
// with an app route "/" that answers the session as JSON (401 without one),
// and a browser-like client with a cookie jar.
type env struct {
	t      testing.TB
	svc    *signin.Service
	srv    *httptest.Server
	client *http.Client
	jar    *cookiejar.Jar
	clock  *clock
	opts   signin.Options
}

// newEnv builds the env; opts gets PublicBaseURL (when empty), DataDir
// (when empty) and Now filled in. tls serves over https.
func newEnv(t testing.TB, opts signin.Options, tls bool) *env {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	srv := httptest.NewUnstartedServer(e)
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if opts.PublicBaseURL.IsZero() {
		opts.PublicBaseURL = netaddr.MustParseOrigin(scheme + "://" + srv.Listener.Addr().String())
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	clk := newClock()
	if opts.Now == nil {
		opts.Now = clk.Now
	}
	svc, err := signin.New(context.Background(), opts)
	if err != nil {
		srv.Close()
		t.Fatalf("signin.New: %v", err)
	}
	svc.Register(e)
	e.GET("/*", func(c echo.Context) error {
		s, err := svc.Session(c.Request())
		if err != nil {
			return c.JSON(http.StatusUnauthorized, map[string]string{"error": err.Error()})
		}
		return c.JSON(http.StatusOK, s)
	})
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	client := srv.Client()
	client.Jar = jar
	return &env{t: t, svc: svc, srv: srv, client: client, jar: jar, clock: clk, opts: opts}
}

// newOIDCEnv is newEnv against m as the issuer.
func newOIDCEnv(t testing.TB, m *mockoidc.MockOIDC, tls bool, edit func(*signin.Options)) *env {
	cfg := m.Config()
	opts := signin.Options{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret}
	if edit != nil {
		edit(&opts)
	}
	return newEnv(t, opts, tls)
}

// noFollow is the env's client (same jar) that stops at every redirect.
func (e *env) noFollow() *http.Client {
	c := *e.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &c
}

// do sends a request and returns the response with its body read.
func do(t testing.TB, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (e *env) get(c *http.Client, u string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return do(e.t, c, req)
}

// flow is one sign-in walked step by step.
type flow struct {
	start    *http.Response // GET /signin
	callback *url.URL       // where the provider sent the browser back
}

// begin starts sign-in for ret and walks through the provider up to (not
// including) the callback.
func (e *env) begin(ret string) flow {
	e.t.Helper()
	nf := e.noFollow()
	start, _ := e.get(nf, e.srv.URL+"/signin?return="+url.QueryEscape(ret))
	if start.StatusCode != http.StatusSeeOther {
		e.t.Fatalf("GET /signin: status %d, want 303", start.StatusCode)
	}
	authz, err := start.Location()
	if err != nil {
		e.t.Fatal(err)
	}
	resp, body := e.get(nf, authz.String())
	if resp.StatusCode != http.StatusFound {
		e.t.Fatalf("provider authorize: status %d: %s", resp.StatusCode, body)
	}
	cb, err := resp.Location()
	if err != nil {
		e.t.Fatal(err)
	}
	if cb.Path != "/signin/callback" {
		e.t.Fatalf("provider sent the browser to %s", cb)
	}
	return flow{start: start, callback: cb}
}

// finish requests the callback without following its redirect.
func (e *env) finish(f flow) (*http.Response, string) {
	e.t.Helper()
	return e.get(e.noFollow(), f.callback.String())
}

// whoami asks the app route for the session.
func (e *env) whoami() (signin.Session, int) {
	e.t.Helper()
	resp, body := e.get(e.client, e.srv.URL+"/whoami")
	var s signin.Session
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &s); err != nil {
			e.t.Fatalf("whoami: %v: %s", err, body)
		}
	}
	return s, resp.StatusCode
}

// cookie returns the jar's cookie named name for the server, or nil.
func (e *env) cookie(name string) *http.Cookie {
	u, _ := url.Parse(e.srv.URL)
	for _, c := range e.jar.Cookies(u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// setCookie returns the Set-Cookie of resp named like suffix, or nil.
func setCookie(resp *http.Response, suffix string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if strings.HasSuffix(c.Name, suffix) {
			return c
		}
	}
	return nil
}

// requestWith builds a request that carries one cookie.
func requestWith(name, value string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/whoami", nil)
	r.AddCookie(&http.Cookie{Name: name, Value: value})
	return r
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
