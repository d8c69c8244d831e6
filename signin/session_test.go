package signin_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/netaddr"
	"teamsbot/signin"
)

func TestSessionCookieTamperedIsRefused(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	f := e.begin("/x")
	flowCookie := e.cookie("teamsbot-signin")
	if resp, body := e.finish(f); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d: %s", resp.StatusCode, body)
	}
	good := e.cookie("teamsbot-session")
	if good == nil {
		t.Fatal("no session cookie")
	}
	if _, err := e.svc.Session(requestWith(good.Name, good.Value)); err != nil {
		t.Fatalf("untouched cookie refused: %v", err)
	}

	flip := func(v string, i int) string {
		b := []byte(v)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	cases := map[string]string{
		"first byte changed":        flip(good.Value, 0),
		"middle byte changed":       flip(good.Value, len(good.Value)/2),
		"last byte changed":         flip(good.Value, len(good.Value)-1),
		"cut short":                 good.Value[:len(good.Value)-4],
		"empty":                     "",
		"not base64":                "!!!" + good.Value,
		"sign-in cookie as session": flowCookie.Value,
		"unsealed payload":          base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"tid":"t","oid":"o","exp":99999999999}`)),
		"oversized":                 strings.Repeat("A", 5000),
	}
	for name, v := range cases {
		if _, err := e.svc.Session(requestWith(good.Name, v)); !errors.Is(err, signin.ErrNoSession) {
			t.Errorf("%s: Session: %v, want ErrNoSession", name, err)
		}
	}

	// Through the browser: the app route sees no session.
	e.jar.SetCookies(mustURL(e.srv.URL), []*http.Cookie{{Name: good.Name, Value: flip(good.Value, 10), Path: "/"}})
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Errorf("whoami with a tampered cookie: %d, want 401", code)
	}
}

// The cookie's own expiry is inside the sealed payload: a client that
// keeps the cookie past its Max-Age still has no session.
func TestSessionExpiresAfterLifetime(t *testing.T) {
	for _, lifetime := range []time.Duration{0, time.Hour} {
		m := startMock(t)
		e := newOIDCEnv(t, m, false, func(o *signin.Options) { o.SessionLifetime = lifetime })
		want := lifetime
		if want == 0 {
			want = 8 * time.Hour
		}
		m.QueueUser(alice())
		start := e.clock.Now()
		if resp, body := e.finish(e.begin("/x")); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("callback: %d: %s", resp.StatusCode, body)
		} else if c := setCookie(resp, "teamsbot-session"); c == nil || c.MaxAge != int(want/time.Second) {
			t.Errorf("lifetime %v: Max-Age of %+v, want %d", lifetime, c, int(want/time.Second))
		}
		e.clock.Advance(want - time.Minute)
		if s, code := e.whoami(); code != http.StatusOK {
			t.Fatalf("lifetime %v: a minute before expiry: %d", lifetime, code)
		} else if !s.Expires.Equal(start.Add(want).Truncate(time.Second)) {
			t.Errorf("lifetime %v: Expires %v, want %v", lifetime, s.Expires, start.Add(want))
		}
		e.clock.Advance(time.Minute)
		if _, code := e.whoami(); code != http.StatusUnauthorized {
			t.Errorf("lifetime %v: at expiry: %d, want 401", lifetime, code)
		}
	}
}

func TestSessionWithoutCookie(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	if _, err := e.svc.Session(r); !errors.Is(err, signin.ErrNoSession) {
		t.Errorf("Session: %v, want ErrNoSession", err)
	}
}

// Cookies are HttpOnly and SameSite=Lax with Path=/; with an https base URL
// they are Secure and carry the __Host- prefix.
func TestCookieAttributes(t *testing.T) {
	for _, tls := range []bool{false, true} {
		m := startMock(t)
		e := newOIDCEnv(t, m, tls, nil)
		m.QueueUser(alice())
		f := e.begin("/x")
		resp, body := e.finish(f)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("tls=%v: callback %d: %s", tls, resp.StatusCode, body)
		}
		prefix := ""
		if tls {
			prefix = "__Host-"
		}
		for _, c := range []*http.Cookie{setCookie(f.start, "teamsbot-signin"), setCookie(resp, "teamsbot-session")} {
			if c == nil {
				t.Fatalf("tls=%v: cookie missing", tls)
			}
			if !strings.HasPrefix(c.Name, prefix) || c.Name[len(prefix):] != strings.TrimPrefix(c.Name, "__Host-") {
				t.Errorf("tls=%v: name %q, want prefix %q", tls, c.Name, prefix)
			}
			if !tls && strings.HasPrefix(c.Name, "__Host-") {
				t.Errorf("tls=false: name %q has __Host- without Secure", c.Name)
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" || c.Secure != tls {
				t.Errorf("tls=%v: %s: HttpOnly=%v SameSite=%v Path=%q Domain=%q Secure=%v", tls, c.Name, c.HttpOnly, c.SameSite, c.Path, c.Domain, c.Secure)
			}
		}
		if c := setCookie(f.start, "teamsbot-signin"); c.MaxAge != 600 {
			t.Errorf("tls=%v: sign-in cookie Max-Age %d, want 600", tls, c.MaxAge)
		}
		if c := setCookie(resp, "teamsbot-signin"); c == nil || c.MaxAge >= 0 {
			t.Errorf("tls=%v: the callback does not delete the sign-in cookie: %+v", tls, c)
		}
		if _, code := e.whoami(); code != http.StatusOK {
			t.Errorf("tls=%v: whoami %d", tls, code)
		}
		// No token or claim is readable in the cookie.
		v := setCookie(resp, "teamsbot-session").Value
		for _, leak := range []string{"alice", "eyJ", alice().OID} {
			if strings.Contains(v, leak) {
				t.Errorf("tls=%v: session cookie shows %q", tls, leak)
			}
		}
	}
}

// However hostile the return parameter, sign-in ends on a path of this
// service.
func TestSignInReturnIsAlwaysLocal(t *testing.T) {
	hostile := []string{
		"",
		"//evil.example",
		"///evil.example",
		"////evil.example/x",
		"/\\evil.example",
		"\\\\evil.example",
		"/\\/evil.example",
		"https://evil.example/",
		"HTTPS://evil.example/",
		"https:/evil.example",
		"http:evil.example",
		"//evil.example@good",
		"javascript:alert(document.cookie)",
		"data:text/html,<script>alert(1)</script>",
		"evil.example",
		"/%2F%2Fevil.example",
		"/%2f/evil.example",
		"/%5Cevil.example",
		"/%5C%5Cevil.example",
		"/%252F%252Fevil.example",
		"/\t/evil.example",
		"/%09/evil.example",
		"\t//evil.example",
		" //evil.example",
		"/%0d%0aLocation:%20https://evil.example",
		"/x\r\nSet-Cookie: a=b",
		"/..//evil.example",
		"/%2e%2e//evil.example",
		"/signin?return=//evil.example",
		"/signout",
		"/x?" + strings.Repeat("a", 3000),
	}
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	for _, ret := range hostile {
		m.QueueUser(alice())
		resp, body := e.finish(e.begin(ret))
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("return %q: callback %d: %s", ret, resp.StatusCode, body)
		}
		if loc := resp.Header.Get("Location"); loc != "/" {
			t.Errorf("return %q: redirected to %q, want /", ret, loc)
		}
		if got := signin.LocalPath(ret); got != "/" {
			t.Errorf("LocalPath(%q) = %q, want /", ret, got)
		}
		if got := e.svc.SignInURL(ret); got != "/signin?return=%2F" {
			t.Errorf("SignInURL(%q) = %q", ret, got)
		}
	}
	for _, ret := range []string{"/mcp-apps/abc", "/mcp-apps/abc?x=1&y=%2F%2Fz", "/a/b%20c", "/a//b", "/"} {
		m.QueueUser(alice())
		resp, _ := e.finish(e.begin(ret))
		if loc := resp.Header.Get("Location"); loc != ret {
			t.Errorf("return %q: redirected to %q, want it kept", ret, loc)
		}
		if got := e.svc.SignInURL(ret); got != "/signin?return="+url.QueryEscape(ret) {
			t.Errorf("SignInURL(%q) = %q", ret, got)
		}
	}
}

// Sign-out needs a same-origin POST; a cross-site one leaves the session.
func TestSignOut(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	m.QueueUser(alice())
	e.finish(e.begin("/x"))
	if _, code := e.whoami(); code != http.StatusOK {
		t.Fatalf("not signed in: %d", code)
	}

	post := func(h map[string]string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signout", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		return do(t, e.client, req)
	}
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
		{"Origin": "https://evil.example"},
	} {
		resp, body := post(h)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "another site") {
			t.Errorf("POST /signout %v: %d, want 403: %s", h, resp.StatusCode, body)
		}
		if _, code := e.whoami(); code != http.StatusOK {
			t.Errorf("POST /signout %v ended the session", h)
		}
	}

	// GET /signout only shows the button.
	resp, body := e.get(e.client, e.srv.URL+"/signout")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post" action="/signout">`) {
		t.Errorf("GET /signout: %d: %s", resp.StatusCode, body)
	}
	if _, code := e.whoami(); code != http.StatusOK {
		t.Error("GET /signout ended the session")
	}

	resp, body = post(map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": e.srv.URL})
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/signed-out" || !strings.Contains(body, "You are signed out") {
		t.Errorf("POST /signout: %d at %s: %s", resp.StatusCode, resp.Request.URL, body)
	}
	if strings.Contains(body, "Development sign-in") {
		t.Error("the OIDC signed-out page shows the development banner")
	}
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Errorf("after sign-out: %d, want 401", code)
	}
}

// Pages are served with headers that keep them from being framed, cached
// or leaking the callback URL.
func TestPageHeaders(t *testing.T) {
	m := startMock(t)
	e := newOIDCEnv(t, m, false, nil)
	resp, _ := e.get(e.client, e.srv.URL+"/signin/callback?state=x")
	h := resp.Header
	if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("Referrer-Policy") != "no-referrer" || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers: %v", h)
	}
}

// A session from the local sign-in is worth nothing once an issuer is
// configured on the same data folder, and a session of a tenant taken off
// the allow-list ends at once.
func TestSessionBoundToModeAndAllowList(t *testing.T) {
	dir := t.TempDir()
	local := newEnv(t, signin.Options{Loopback: true, DataDir: dir, PublicBaseURL: netaddr.MustParseOrigin("http://127.0.0.1:1")}, false)
	local.postLocal(localForm("/"), nil)
	lc := local.cookie("teamsbot-session")
	if lc == nil {
		t.Fatal("no local session")
	}

	m := startMock(t)
	e := newOIDCEnv(t, m, false, func(o *signin.Options) { o.DataDir = dir })
	if _, err := e.svc.Session(requestWith(lc.Name, lc.Value)); !errors.Is(err, signin.ErrNoSession) {
		t.Errorf("local session under OIDC: %v, want ErrNoSession", err)
	}

	m.QueueUser(alice())
	e.finish(e.begin("/"))
	oc := e.cookie("teamsbot-session")
	if _, err := e.svc.Session(requestWith(oc.Name, oc.Value)); err != nil {
		t.Fatalf("OIDC session: %v", err)
	}
	offboarded := newOIDCEnv(t, m, false, func(o *signin.Options) {
		o.DataDir = dir
		o.AllowedTenants = []string{"22222222-2222-2222-2222-222222222222"}
	})
	if _, err := offboarded.svc.Session(requestWith(oc.Name, oc.Value)); !errors.Is(err, signin.ErrNoSession) {
		t.Errorf("session of a tenant no longer listed: %v, want ErrNoSession", err)
	}
}
