package signin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/labstack/echo/v4"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"
	"teamsbot/signin"
)

// postLocal submits the local form as a same-origin browser would.
func (e *env) postLocal(form url.Values, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signin/local", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(e.t, e.noFollow(), req)
}

func localForm(ret string) url.Values {
	return url.Values{
		"name":   {"Dana Dev"},
		"tenant": {"local-tenant"},
		"user":   {"dana"},
		"roles":  {"agents.read agents.run"},
		"return": {ret},
	}
}

func TestLocalSignIn(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	if !e.svc.Local() {
		t.Fatal("Local() = false without an issuer")
	}
	resp, body := e.get(e.client, e.srv.URL+e.svc.SignInURL("/mcp-apps/v1"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /signin: %d", resp.StatusCode)
	}
	for _, want := range []string{
		"Development sign-in",
		`<html lang="en">`,
		`<label for="tenant">`,
		`id="tenant" name="tenant" value="` + signin.LocalTenant + `"`,
		`Megan Bowen`, `Adele Vance`,
		`name="return" value="/mcp-apps/v1"`,
		`action="/signin/local"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("form lacks %q:\n%s", want, body)
		}
	}

	resp, body = e.postLocal(localForm("/mcp-apps/v1"), nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/mcp-apps/v1" {
		t.Fatalf("POST /signin/local: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	s, code := e.whoami()
	if code != http.StatusOK {
		t.Fatalf("whoami: %d", code)
	}
	want := signin.Session{TenantID: "local-tenant", UserID: "dana", Name: "Dana Dev", Username: "dana", Roles: []string{"agents.read", "agents.run"}, Local: true}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(signin.Session{}, "Expires")); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}

	// The signed-out page of the local sign-in says what it is too.
	_, body = e.get(e.client, e.srv.URL+"/signed-out")
	if !strings.Contains(body, "Development sign-in") {
		t.Error("signed-out page lacks the development banner")
	}
}

// checkedPerson is the person the local sign-in form has selected: the
// value of its checked radio button ("" when none is).
func checkedPerson(body string) string {
	m := regexp.MustCompile(`name="person" value="([^"]*)" checked`).FindAllStringSubmatch(body, -1)
	if len(m) != 1 {
		return ""
	}
	return m[0][1]
}

// The local sign-in lists the local people (the playground's, in its
// tenant) with their names and roles, the first one selected; ?as= selects
// another of them and nobody else; picking a person signs them in with
// the tenant and roles of the list, whatever else the form carries, and
// typed ids still work for someone else.
func TestLocalSignInPeople(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	people := signin.LocalPeople()
	admin := signin.LocalAdmin()
	if !admin.Admin() || !slices.ContainsFunc(people, func(p signin.LocalPerson) bool { return p.UserID == admin.UserID }) {
		t.Fatalf("the local people have no tenant admin: %+v", people)
	}
	if r := signin.LocalReader(); !r.Reader() {
		t.Fatalf("the local people have no agent reader: %+v", people)
	}

	_, body := e.get(e.client, e.srv.URL+e.svc.SignInURL("/admin"))
	for _, p := range people {
		for _, want := range []string{`value="` + p.UserID + `"`, ">" + p.Name + "</label>", "<code>" + p.RoleList() + "</code>"} {
			if !strings.Contains(body, want) {
				t.Errorf("the form lacks %q of %s", want, p.Name)
			}
		}
	}
	if got := checkedPerson(body); got != people[0].UserID {
		t.Errorf("selected %q, want the first person %s", got, people[0].Name)
	}

	u := e.svc.SignInAsURL("/admin", admin.UserID)
	if want := "/signin?return=%2Fadmin&as=" + admin.UserID; u != want {
		t.Errorf("SignInAsURL = %q, want %q", u, want)
	}
	_, body = e.get(e.client, e.srv.URL+u)
	if got := checkedPerson(body); got != admin.UserID {
		t.Errorf("?as= the admin selected %q", got)
	}
	// Anyone not in the list is not pre-selected, nor put in a URL.
	for _, as := range []string{"someone-typed", `"><script>`} {
		if got := e.svc.SignInAsURL("/admin", as); got != e.svc.SignInURL("/admin") {
			t.Errorf("SignInAsURL(%q) = %q, want the plain sign-in", as, got)
		}
		_, body = e.get(e.client, e.srv.URL+"/signin?return=%2Fadmin&as="+url.QueryEscape(as))
		if got := checkedPerson(body); got != people[0].UserID || strings.Contains(body, "<script>") {
			t.Errorf("?as=%q selected %q", as, got)
		}
	}

	// Picking the admin signs the admin in, with the list's tenant and
	// roles, even when the typed fields say otherwise.
	form := localForm("/admin")
	form.Set("person", admin.UserID)
	resp, body := e.postLocal(form, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin" {
		t.Fatalf("POST as the admin: %d to %q: %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	s, _ := e.whoami()
	want := signin.Session{TenantID: signin.LocalTenant, UserID: admin.UserID, Name: admin.Name, Username: admin.UserID, Roles: admin.Roles, Local: true}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(signin.Session{}, "Expires")); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	// Signed in, the form says who and offers the others.
	_, body = e.get(e.client, e.srv.URL+e.svc.SignInURL("/"))
	if !strings.Contains(body, "You are signed in as <strong>"+admin.Name+"</strong>") {
		t.Errorf("the form does not say who is signed in:\n%s", body)
	}

	// "Someone else" takes the typed fields.
	form.Set("person", "other")
	e.postLocal(form, nil)
	if s, _ := e.whoami(); s.UserID != "dana" || s.TenantID != "local-tenant" {
		t.Errorf("someone else: signed in as %s/%s, want local-tenant/dana", s.TenantID, s.UserID)
	}
	// A person who is not in the list is refused, not made up.
	form.Set("person", "nobody-listed")
	if resp, body := e.postLocal(form, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "no such person") {
		t.Errorf("an unknown person: %d %s", resp.StatusCode, body)
	}
}

func TestLocalSignInRefusesCrossSiteAndBadInput(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "", "Origin": "http://evil.example"},
	} {
		resp, body := e.postLocal(localForm("/"), h)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "came from another site") {
			t.Errorf("POST %v: %d, want 403 page: %s", h, resp.StatusCode, body)
		}
	}
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Errorf("signed in by a cross-site POST")
	}

	for _, f := range []url.Values{
		{"tenant": {""}, "user": {"u"}},
		{"tenant": {"t"}, "user": {"a/b"}},
		{"tenant": {"../x"}, "user": {"u"}},
		{"tenant": {"t"}, "user": {strings.Repeat("u", 200)}},
	} {
		if resp, body := e.postLocal(f, nil); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Tenant id and user id") {
			t.Errorf("POST %v: %d, want 400 page: %s", f, resp.StatusCode, body)
		}
	}
	resp, _ := e.postLocal(localForm("//evil.example"), nil)
	if loc := resp.Header.Get("Location"); loc != "/" {
		t.Errorf("hostile return in the form: redirected to %q, want /", loc)
	}
}

// A session that would not fit in a cookie (browsers keep about 4 KiB)
// is refused at sign-in with a clear page, instead of a cookie the browser
// drops and a sign-in that starts over and over.
func TestSessionTooLargeForACookie(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	f := localForm("/x")
	var roles []string
	for i := range 64 {
		roles = append(roles, fmt.Sprintf("role-%03d-%s", i, strings.Repeat("r", 100)))
	}
	f.Set("roles", strings.Join(roles, " "))
	resp, body := e.postLocal(f, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "more than a session can hold") {
		t.Errorf("POST with 64 long roles: %d, want 400 saying why: %s", resp.StatusCode, body)
	}
	if c := setCookie(resp, "teamsbot-session"); c != nil && c.MaxAge >= 0 {
		t.Errorf("a session cookie of %d bytes was set", len(c.Value))
	}
	// A handful of roles fits.
	f.Set("roles", strings.Join(roles[:8], " "))
	if resp, body := e.postLocal(f, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("POST with 8 roles: %d: %s", resp.StatusCode, body)
	}
	if _, code := e.whoami(); code != http.StatusOK {
		t.Errorf("whoami after signing in with 8 roles: %d", code)
	}
}

// DNS rebinding: a page whose host name an attacker points at 127.0.0.1
// posts the local form as "same origin", but under its own Host; it gets
// no session. Loopback names are served.
func TestLocalSignInRefusesOtherHostNames(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true, PublicBaseURL: netaddr.MustParseOrigin("http://localhost:3978")}, false)
	port := mustURL(e.srv.URL).Port()
	post := func(host string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/signin/local", strings.NewReader(localForm("/").Encode()))
		req.Host = host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Origin", "http://"+host)
		return do(t, e.noFollow(), req)
	}
	for _, host := range []string{"rebound.attacker.example:" + port, "rebound.attacker.example", "127.0.0.1.attacker.example:" + port, "localhost.attacker.example"} {
		resp, body := post(host)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "loopback address") {
			t.Errorf("Host %s: %d, want 403 saying why: %s", host, resp.StatusCode, body)
		}
		if c := setCookie(resp, "teamsbot-session"); c != nil && c.MaxAge >= 0 {
			t.Errorf("Host %s: a session cookie was set", host)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "[::1]:" + port, "127.0.0.2"} {
		if resp, body := post(host); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("Host %s: %d, want 303: %s", host, resp.StatusCode, body)
		}
	}
}

// Without an issuer, only a loopback service may offer the local sign-in.
func TestLocalSignInRefusedWhenNotLoopback(t *testing.T) {
	// Without an issuer, off loopback, the service still starts (the bot and
	// the agent work), but nobody can sign in, and the page says how to fix it.
	var logs bytes.Buffer
	svc, err := signin.New(context.Background(), signin.Options{
		DataDir: t.TempDir(), PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if !svc.Off() || svc.Local() {
		t.Fatalf("Off %v Local %v, want sign-in off and no local sign-in", svc.Off(), svc.Local())
	}
	if !strings.Contains(logs.String(), "sign-in is off") || !strings.Contains(logs.String(), "TICKETIQ_OIDC_ISSUER") {
		t.Errorf("no start-up warning saying how to turn sign-in on:\n%s", logs.String())
	}
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	svc.Register(e)
	srv := httptest.NewServer(e)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/signin?return=/mcp-apps/x")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(page), "TICKETIQ_OIDC_ISSUER") {
		t.Errorf("/signin with sign-in off: %d\n%s", resp.StatusCode, page)
	}
	resp, err = http.PostForm(srv.URL+"/signin/local", url.Values{"tenant": {"t"}, "user": {"u"}, "return": {"/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusSeeOther || len(resp.Cookies()) > 0 {
		t.Errorf("local sign-in answered off loopback: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.AddCookie(&http.Cookie{Name: "teamsbot-session", Value: "anything"})
	if _, err := svc.Session(req); !errors.Is(err, signin.ErrNoSession) {
		t.Errorf("Session with sign-in off: %v", err)
	}
}

// The cookie key is made once with mode 0600, survives a restart (a
// session minted before it stays valid), and never reaches the log.
func TestKeyFileCreatedOnceAndReused(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := newEnv(t, signin.Options{Loopback: true, DataDir: dir, Logger: log}, false)

	path := filepath.Join(dir, "signin-cookie.key")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("key file: %v", err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", info.Mode().Perm())
	}
	key, _ := os.ReadFile(path)

	e.postLocal(localForm("/"), nil)
	ck := e.cookie("teamsbot-session")
	if ck == nil {
		t.Fatal("no session cookie")
	}
	e.whoami()

	// Restart: a new service on the same folder.
	again, err := signin.New(context.Background(), signin.Options{Loopback: true, DataDir: dir, Logger: log, PublicBaseURL: netaddr.MustParseOrigin("http://127.0.0.1:1")})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	s, err := again.Session(requestWith(ck.Name, ck.Value))
	if err != nil || s.UserID != "dana" {
		t.Errorf("session after restart: %+v, %v", s, err)
	}
	if key2, _ := os.ReadFile(path); !bytes.Equal(key, key2) {
		t.Error("key file changed on restart")
	}
	// Another data folder means another key.
	other, err := signin.New(context.Background(), signin.Options{Loopback: true, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Session(requestWith(ck.Name, ck.Value)); !errors.Is(err, signin.ErrNoSession) {
		t.Errorf("session under another key: %v, want ErrNoSession", err)
	}

	ks, err := signin.CookieKeys(dir).Load()
	if err != nil || len(ks) != 1 {
		t.Fatalf("the key file holds %v, %v; want one key", ks, err)
	}
	secret := ks[0].Secret
	for _, form := range []string{string(secret), hex.EncodeToString(secret), base64.StdEncoding.EncodeToString(secret), base64.RawURLEncoding.EncodeToString(secret), ck.Value} {
		if strings.Contains(logs.String(), form) {
			t.Errorf("the log shows the key or a cookie")
		}
	}
	if !strings.Contains(logs.String(), "signed in") {
		t.Errorf("the log does not record the sign-in: %s", logs.String())
	}
}

func TestKeyFileDamaged(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "signin-cookie.key"), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := signin.New(context.Background(), signin.Options{Loopback: true, DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "exactly 32 bytes") {
		t.Errorf("New with a damaged key file: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "short") {
		t.Error("the error shows the key file's content")
	}
}

// A tunnel or a reverse proxy on this machine makes every request come
// from 127.0.0.1: with a public base URL that is not a loopback http://
// address, the local sign-in is not offered at all, even on a loopback
// listener.
func TestLocalSignInRefusedUnderAPublicHostName(t *testing.T) {
	for _, base := range []string{"https://bot.example.com", "https://localhost:8443"} {
		svc, err := signin.New(context.Background(), signin.Options{
			Loopback: true, DataDir: t.TempDir(), PublicBaseURL: netaddr.MustParseOrigin(base),
		})
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if svc.Local() || !svc.Off() {
			t.Errorf("%s: Local %v, Off %v; want no local sign-in", base, svc.Local(), svc.Off())
		}
		e := echo.New()
		e.HTTPErrorHandler = web.ErrorHandler(nil)
		svc.Register(e)
		req := httptest.NewRequest(http.MethodPost, "/signin/local", strings.NewReader(localForm("/").Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = "127.0.0.1:3978"
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code < 400 || len(rec.Result().Cookies()) > 0 {
			t.Errorf("%s: POST /signin/local answered %d with cookies %v", base, rec.Code, rec.Result().Cookies())
		}
	}
}

// A request that says it came through a proxy (Forwarded, X-Forwarded-*)
// gets neither the form nor a session.
func TestLocalSignInRefusesProxiedRequests(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	for _, h := range []map[string]string{
		{"Forwarded": "for=203.0.113.7;proto=https"},
		{"X-Forwarded-For": "203.0.113.7"},
		{"X-Forwarded-Host": "bot.example.com"},
		{"X-Forwarded-Proto": "https"},
	} {
		resp, body := e.postLocal(localForm("/"), h)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "proxy") {
			t.Errorf("POST with %v: %d, want 403 saying why: %s", h, resp.StatusCode, body)
		}
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/signin?return=/", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		if resp, body := do(t, e.noFollow(), req); resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET /signin with %v: %d %s", h, resp.StatusCode, body)
		}
	}
	if _, code := e.whoami(); code != http.StatusUnauthorized {
		t.Error("a proxied request signed someone in")
	}
}

// LocalRequest, the rule for what a page may say in local mode, is the
// local sign-in's own: a loopback Host and no proxy on the way.
func TestLocalRequest(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	for _, c := range []struct {
		host   string
		header map[string]string
		want   bool
	}{
		{"127.0.0.1:3978", nil, true},
		{"localhost:3978", nil, true},
		{"[::1]:3978", nil, true},
		{"rebound.attacker.example:3978", nil, false},
		{"127.0.0.1.attacker.example", nil, false},
		{"127.0.0.1:3978", map[string]string{"X-Forwarded-For": "203.0.113.7"}, false},
		{"127.0.0.1:3978", map[string]string{"Forwarded": "for=203.0.113.7"}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/mcp-apps/v", nil)
		r.Host = c.host
		for k, v := range c.header {
			r.Header.Set(k, v)
		}
		if got := e.svc.LocalRequest(r); got != c.want {
			t.Errorf("Host %s, headers %v: LocalRequest %v, want %v", c.host, c.header, got, c.want)
		}
	}
}
