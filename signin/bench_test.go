package signin_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/netaddr"
	"teamsbot/signin"
)

// BenchmarkSession measures what every view page request pays: reading and
// opening the session cookie.
func BenchmarkSession(b *testing.B) {
	svc, err := signin.New(context.Background(), signin.Options{Loopback: true, DataDir: b.TempDir(), PublicBaseURL: netaddr.MustParseOrigin("http://localhost:3978")})
	if err != nil {
		b.Fatal(err)
	}
	e := echo.New()
	svc.Register(e)
	form := url.Values{"tenant": {"local-tenant"}, "user": {"local-user"}, "name": {"Local Developer"}, "roles": {"agents.read agents.run"}}
	req := httptest.NewRequest(http.MethodPost, "/signin/local", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Host = "127.0.0.1:3978" // the local sign-in answers only under a loopback name
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	cookies := rec.Result().Cookies()
	if len(cookies) != 1 {
		b.Fatalf("sign-in gave %d cookies", len(cookies))
	}
	r := httptest.NewRequest(http.MethodGet, "/mcp-apps/v", nil)
	r.AddCookie(cookies[0])
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Session(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOIDCSignIn measures a whole sign-in over loopback HTTP: /signin,
// mockoidc's authorize and token endpoints, ID token verification, and the
// session cookie.
func BenchmarkOIDCSignIn(b *testing.B) {
	m := startMock(b)
	e := newOIDCEnv(b, m, false, nil)
	b.ReportAllocs()
	for b.Loop() {
		m.QueueUser(alice())
		if resp, _ := e.finish(e.begin("/x")); resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("callback: %d", resp.StatusCode)
		}
	}
}
