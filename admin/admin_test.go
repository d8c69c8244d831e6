package admin_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/access"
	"teamsbot/admin"
	"teamsbot/internal/fluent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/triggers"
)

const (
	tenantA = "11111111-1111-4111-8111-111111111111"
	tenantB = "22222222-2222-4222-8222-222222222222"
)

var (
	adminA = &testenv.EntraUser{TID: tenantA, OID: "adadadad-0000-4000-8000-0000000000aa", Name: "Ada Admin", Roles: []string{access.PermAdmin}}
	adminB = &testenv.EntraUser{TID: tenantB, OID: "adadadad-0000-4000-8000-0000000000bb", Name: "Bea Admin", Roles: []string{access.PermAdmin}}
	userA  = &testenv.EntraUser{TID: tenantA, OID: "aaaaaaaa-0000-4000-8000-00000000000a", Name: "Alice", Roles: []string{access.PermRead, access.PermRun}}
)

// env is the console on real HTTP on loopback: a bbolt store, access, the
// OIDC sign-in against mockoidc with Entra ID claims, and the server's one
// error handler.
type env struct {
	t      *testing.T
	base   string
	store  *store.Store
	access *access.Service
	oidc   *mockoidc.MockOIDC
}

func newEnv(t *testing.T) *env { return newEnvWith(t, nil) }

// newEnvWith is newEnv whose console gets what more returns, built on the
// same store and access.
func newEnvWith(t *testing.T, more func(*store.Store, *access.Service) *triggers.Service) *env {
	t.Helper()
	return newEnvOpts(t, func(o *admin.Options, _ netaddr.Origin) {
		if more != nil {
			o.Triggers = more(o.Store, o.Access)
		}
	})
}

// newEnvOpts is newEnv whose console's options more completes, given the
// store, access and the console's own address.
func newEnvOpts(t *testing.T, more func(o *admin.Options, base netaddr.Origin)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ax, err := access.New(access.Options{Store: st, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	m := testenv.StartMockOIDC(t)
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	srv := httptest.NewUnstartedServer(e)
	base := "http://" + srv.Listener.Addr().String()
	cfg := m.Config()
	si, err := signin.New(ctx, signin.Options{Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		PublicBaseURL: netaddr.MustParseOrigin(base), DataDir: t.TempDir(), Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	opts := admin.Options{Store: st, Access: ax, SignIn: si, Agents: []string{"default"}, AppsEnabled: true,
		Rules:   []admin.Rules{{Agent: "default", Deny: []string{"crm/delete_customer"}}},
		Servers: []admin.Server{{Name: "demo"}, {Name: "transcript", Configured: []string{"microphone"}}}}
	if more != nil {
		more(&opts, netaddr.MustParseOrigin(base))
	}
	h, err := admin.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	si.Register(e)
	h.Register(e)
	srv.Start()
	t.Cleanup(srv.Close)
	return &env{t: t, base: base, store: st, access: ax, oidc: m}
}

// client signs u in through mockoidc and returns a browser-like client.
func (e *env) client(u *testenv.EntraUser) *http.Client {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	e.oidc.QueueUser(u)
	resp, err := c.Get(e.base + "/signin?return=/")
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return c
}

func (e *env) do(c *http.Client, method, path, contentType, body string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(method, e.base+path, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *env) form(c *http.Client, path string, v url.Values) (int, string) {
	return e.do(c, http.MethodPost, path, "application/x-www-form-urlencoded", v.Encode())
}

// Only admins, each of their own tenant; the pages carry the strict CSP.
func TestConsoleIsForAdminsOfTheirTenant(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	// The audit log and the overview have a script of their own, allowed
	// by its hash alone; the other pages have none.
	scripted := map[string]bool{"/admin/audit": true, "/admin/overview": true}
	for _, path := range []string{"/admin", "/admin/overview", "/admin/policies", "/admin/views", "/admin/runs", "/admin/conversations", "/admin/audit"} {
		req, _ := http.NewRequest(http.MethodGet, e.base+path, nil)
		resp, err := admin.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		// Fluent's script on every page, and on the audit log and the
		// overview a script of the page's own beside it, each allowed by
		// its hash alone.
		scriptOK := onlyFluentScript(string(body))
		if scripted[path] {
			scriptOK = strings.Count(string(body), "<script") == 2 && strings.Contains(string(body), "<script>"+fluent.Script()+"</script>") &&
				strings.Count(csp, "'sha256-") >= 4 && !strings.Contains(csp, "unsafe")
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tenantA) || !scriptOK ||
			!strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: %d, CSP %q", path, resp.StatusCode, csp)
		}
	}
	user := e.client(userA)
	if code, body := e.do(user, http.MethodGet, "/admin", "", ""); code != http.StatusForbidden || !strings.Contains(body, "agents.admin") {
		t.Errorf("a non-admin: %d %s", code, body)
	} else if strings.Contains(body, "Sign in as someone else") || strings.Contains(body, signin.LocalAdmin().Name) {
		// Offering another person, and naming one, is the local sign-in's.
		t.Errorf("with Entra sign-in the refusal offers the local sign-in: %s", body)
	}
	if code, _ := e.do(user, http.MethodGet, "/api/admin/bindings", "", ""); code != http.StatusForbidden {
		t.Errorf("a non-admin on the API: %d", code)
	}
	anon := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if resp, err := anon.Get(e.base + "/admin"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?return=%2Fadmin" {
		t.Errorf("not signed in: %d to %q, want a redirect to the plain sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := e.do(anon, http.MethodGet, "/api/admin/bindings", "", ""); code != http.StatusUnauthorized {
		t.Errorf("not signed in, API: %d", code)
	}

	// What one tenant's admin does, the other's never sees.
	if code, body := e.form(admin, "/admin/bindings", url.Values{"kind": {"user"}, "subject": {userA.OID}, "role": {"reader"}, "agent": {"*"}}); code != http.StatusOK || !strings.Contains(body, "The binding was added") {
		t.Fatalf("add binding: %d %s", code, body)
	}
	other := e.client(adminB)
	if _, body := e.do(other, http.MethodGet, "/api/admin/bindings", "", ""); strings.Contains(body, userA.OID) {
		t.Errorf("tenant B's admin sees tenant A's bindings: %s", body)
	}
	if _, body := e.do(other, http.MethodGet, "/admin/audit", "", ""); strings.Contains(body, userA.OID) || strings.Contains(body, "admin.binding.add") {
		t.Errorf("tenant B's admin sees tenant A's audit log")
	}
}

// onlyFluentScript reports whether a page's one script is internal/fluent's.
func onlyFluentScript(body string) bool {
	return strings.Count(body, "<script") == 1 && strings.Contains(body, "<script>"+fluent.Script()+"</script>")
}

// Cross-site posts are refused before anything changes.
func TestConsoleRefusesCrossSitePosts(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	req, _ := http.NewRequest(http.MethodPost, e.base+"/admin/default", strings.NewReader("group="))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site post: %d", resp.StatusCode)
	}
	if s, _ := e.access.TenantSettings(context.Background(), tenantA); !s.Default.Runner {
		t.Error("the cross-site post turned the default off")
	}
}

// The policy page checks a text before saving it and its tester says what
// a call would get; the API does the same, with the line of a parse error.
func TestPoliciesAndTester(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	text := access.DefaultPolicyText + "\n@id(\"no-export\")\nforbid (principal, action, resource) when { context.tool == \"export_all\" };\n"
	code, body := e.form(admin, "/admin/policies", url.Values{"text": {"permit (principal,\naction"}, "version": {"0"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "line") {
		t.Errorf("a text that does not parse: %d %s", code, body)
	}
	if code, body = e.form(admin, "/admin/policies", url.Values{"text": {text}, "version": {"0"}}); code != http.StatusOK || !strings.Contains(body, "checked and saved") {
		t.Fatalf("save: %d %s", code, body)
	}
	code, body = e.form(admin, "/admin/policies/test", url.Values{"user": {userA.OID}, "agent": {"default"}, "server": {"crm"}, "tool": {"export_all"}, "caller": {"view"}})
	if code != http.StatusOK || !strings.Contains(body, "<strong>Denied</strong> by <code>no-export</code>") {
		t.Errorf("tester: %d %s", code, body)
	}
	code, body = e.do(admin, http.MethodPost, "/api/admin/policies/test", "application/json",
		`{"user":"`+userA.OID+`","agent":"default","server":"crm","tool":"lookup","caller":"model"}`)
	var res struct {
		Allowed  bool
		Policies []string
	}
	if json.Unmarshal([]byte(body), &res) != nil || code != http.StatusOK || !res.Allowed || len(res.Policies) != 1 {
		t.Errorf("API tester: %d %s", code, body)
	}
	code, body = e.do(admin, http.MethodPut, "/api/admin/policies", "application/json", `{"text":"permit (principal,\naction","version":1}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `"line":2`) {
		t.Errorf("API parse error: %d %s", code, body)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/policies", "application/json", `{"text":"","version":0}`); code != http.StatusConflict {
		t.Errorf("API version conflict: %d %s", code, body)
	}
}

// The tenant's own data rules: the form checks every line before saving
// and keeps what the admin typed when it refuses; the API does the same
// with a list of problems and a version; another tenant's admin sees none
// of it.
func TestDataRulesFormAndAPI(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	_, body := e.do(admin, http.MethodGet, "/admin", "", "")
	if !strings.Contains(body, `<label for="r-deny">`) || !strings.Contains(body, `name="version" value="0"`) || !strings.Contains(body, "<code>crm/delete_customer</code>") {
		t.Fatalf("the access page has no rules form or misses the configured rules:\n%s", body)
	}

	code, body := e.form(admin, "/admin/rules", url.Values{"deny": {"crm/export\r\n\r\nbad tool\r\n"}, "redact": {"(unclosed\r\n"}, "version": {"0"}})
	if code != http.StatusBadRequest || !strings.Contains(body, `denied tool 2 (&#34;bad tool&#34;)`) || !strings.Contains(body, `redacted pattern 1 (&#34;(unclosed&#34;)`) ||
		!strings.Contains(body, "crm/export\n\nbad tool") {
		t.Errorf("refused rules: %d, want 400 naming both problems and keeping the text:\n%s", code, body)
	}
	if r, v, _ := e.access.TenantDataRules(context.Background(), tenantA); v != 0 || len(r.DenyTools) != 0 {
		t.Errorf("refused rules were saved: %+v at %d", r, v)
	}

	code, body = e.form(admin, "/admin/rules", url.Values{"deny": {" crm/export \r\n\r\ndebug/*"}, "redact": {`\bSSN-\d+\b`}, "version": {"0"}})
	if code != http.StatusOK || !strings.Contains(body, "The data rules were checked and saved") || !strings.Contains(body, "crm/export\ndebug/*") {
		t.Fatalf("save: %d\n%s", code, body)
	}
	if code, body = e.form(admin, "/admin/rules", url.Values{"deny": {""}, "redact": {""}, "version": {"0"}}); code != http.StatusConflict || !strings.Contains(body, "Someone else saved") {
		t.Errorf("stale form: %d\n%s", code, body)
	}

	code, body = e.do(admin, http.MethodGet, "/api/admin/datarules", "", "")
	var got struct {
		DenyTools, Redact []string
		Version           uint64
		Configured        []struct {
			Agent     string
			DenyTools []string
		}
	}
	if err := json.Unmarshal([]byte(body), &got); err != nil || code != http.StatusOK || got.Version != 1 || strings.Join(got.DenyTools, ",") != "crm/export,debug/*" ||
		len(got.Configured) != 1 || got.Configured[0].DenyTools[0] != "crm/delete_customer" {
		t.Errorf("API read: %d %s", code, body)
	}
	code, body = e.do(admin, http.MethodPut, "/api/admin/datarules", "application/json", `{"denyTools":["","x/y/z"],"redact":[".*"],"version":1}`)
	var refused struct{ Problems []string }
	if json.Unmarshal([]byte(body), &refused) != nil || code != http.StatusBadRequest || len(refused.Problems) != 3 {
		t.Errorf("API refusal: %d %s; want 400 with three problems", code, body)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/datarules", "application/json", `{"denyTools":[],"redact":["secret"],"version":1}`); code != http.StatusOK || !strings.Contains(body, `"version":2`) {
		t.Errorf("API save: %d %s", code, body)
	}
	if code, _ = e.do(admin, http.MethodPut, "/api/admin/datarules", "application/json", `{"denyTools":[],"redact":[],"version":1}`); code != http.StatusConflict {
		t.Errorf("API stale save: %d", code)
	}

	other := e.client(adminB)
	if _, body := e.do(other, http.MethodGet, "/api/admin/datarules", "", ""); !strings.Contains(body, `"version":0`) || strings.Contains(body, "secret") {
		t.Errorf("tenant B's admin reads %s", body)
	}
	user := e.client(userA)
	if code, _ := e.form(user, "/admin/rules", url.Values{"deny": {""}, "redact": {""}, "version": {"2"}}); code != http.StatusForbidden {
		t.Errorf("a non-admin's save: %d", code)
	}
	recs, _ := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA, Action: access.AuditDataRulesSet})
	if len(recs) != 2 || recs[0].Actor != adminA.OID {
		t.Errorf("audit: %+v", recs)
	}
}

// The audit log pages and its two exports hold the same records, and the
// exports are the admin's tenant's only.
func TestAuditPagesAndExports(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var recs []store.AuditRecord
	for i := range 120 {
		tenant := tenantA
		if i%4 == 3 {
			tenant = tenantB
		}
		recs = append(recs, store.AuditRecord{TenantID: tenant, Action: "agent.mcp_app.call", Actor: userA.OID,
			Time: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC), Fields: map[string]any{"tool": "refresh_sales", "result": []string{"ok", "refused"}[i%2], "n": i}})
	}
	if err := e.store.Append(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	admin := e.client(adminA)
	code, body := e.do(admin, http.MethodGet, "/api/admin/audit?result=refused&tool=refresh_sales", "", "")
	var page struct {
		Records []store.AuditRecord
		Next    string
	}
	if json.Unmarshal([]byte(body), &page) != nil || code != http.StatusOK {
		t.Fatalf("audit page: %d %s", code, body)
	}
	seen := 0
	for {
		for _, r := range page.Records {
			if r.TenantID != tenantA || r.Fields["result"] != "refused" {
				t.Fatalf("record %+v does not match the filter", r)
			}
			seen++
		}
		if page.Next == "" {
			break
		}
		_, body = e.do(admin, http.MethodGet, "/api/admin/audit?result=refused&tool=refresh_sales&cursor="+url.QueryEscape(page.Next), "", "")
		page.Records, page.Next = nil, ""
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
	}
	// Of i in 0..119: tenant A (i%4 != 3) and refused (odd i): i%4 == 1.
	if seen != 30 {
		t.Errorf("%d refused records of tenant A over all pages, want 30", seen)
	}
	_, jsonl := e.do(admin, http.MethodGet, "/admin/audit/export.jsonl?result=refused", "", "")
	if n := strings.Count(jsonl, "\n"); n != 30 || strings.Contains(jsonl, tenantB) {
		t.Errorf("JSON Lines export: %d lines", n)
	}
	_, body = e.do(admin, http.MethodGet, "/admin/audit/export.csv?result=refused", "", "")
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 31 || rows[0][2] != "action" || strings.Contains(body, tenantB) {
		t.Errorf("CSV export: %d rows, %v", len(rows), err)
	}
	if code, _ := e.do(admin, http.MethodGet, "/api/admin/audit?cursor=not-a-cursor", "", ""); code != http.StatusBadRequest {
		t.Errorf("a forged cursor: %d", code)
	}
}

// The permissions form and the API: a tenant admin allows a server's views
// permissions in their tenant, audited as admin.settings.set; an unknown
// server or permission is refused.
func TestPermissionsFormAndAPI(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	_, page := e.do(admin, http.MethodGet, "/admin", "", "")
	if !strings.Contains(page, "Views of server <code>transcript</code>") || !strings.Contains(page, "allows microphone for every tenant") {
		t.Fatalf("the access page lacks the permissions form")
	}
	code, body := e.form(admin, "/admin/permissions", url.Values{"server": {"transcript"}, "perm": {"microphone", "camera"}})
	if code != http.StatusOK || !strings.Contains(body, "The permissions were saved") {
		t.Fatalf("save: %d", code)
	}
	ctx := context.Background()
	if got := e.access.AppPermissions(ctx, tenantA, "transcript"); strings.Join(got, ",") != "camera,microphone" {
		t.Errorf("saved %v", got)
	}
	_, page = e.do(admin, http.MethodGet, "/admin", "", "")
	if !strings.Contains(page, `name="perm" value="camera" checked`) {
		t.Errorf("the form does not show the saved permissions")
	}
	if code, _ := e.form(admin, "/admin/permissions", url.Values{"server": {"nosuch"}, "perm": {"camera"}}); code != http.StatusBadRequest {
		t.Errorf("unknown server: %d", code)
	}
	if code, _ := e.form(admin, "/admin/permissions", url.Values{"server": {"demo"}, "perm": {"usb"}}); code != http.StatusBadRequest {
		t.Errorf("unknown permission: %d", code)
	}
	code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json",
		`{"defaultRunner": true, "appsEnabled": true, "appPermissions": {"demo": ["clipboardWrite"]}}`)
	if code != http.StatusOK || !strings.Contains(body, `"appPermissions":{"demo":["clipboardWrite"]}`) {
		t.Errorf("PUT settings: %d %s", code, body)
	}
	recs, _ := e.store.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditSettingsSet})
	if len(recs) != 3 {
		t.Errorf("%d admin.settings.set records, want 3 (transcript allowed, then taken back by the PUT, demo allowed)", len(recs))
	}
}

// The memory setting for runs without a person: the access page's form
// saves it with a notice after the redirect and shows it checked; the API
// reads it and writes it, and a PUT without it leaves it as it is; each
// change is audited; a non-admin and a cross-site post change nothing;
// another tenant's setting stays off.
func TestHistoryForTriggersFormAndAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(adminA)
	const box = `<input type="checkbox" id="h-on" name="on" value="on"`
	_, page := e.do(admin, http.MethodGet, "/admin", "", "")
	if !containsAll(page, `<form method="post" action="/admin/history">`, box+`>`,
		`<label for="h-on">Let runs without a person (schedules, the runs API) read and add to the memory of the conversation they post into</label>`,
		"was said to the agent, not to a script") {
		t.Fatalf("the access page lacks the memory form or its explanation:\n%s", page)
	}
	setting := func(tenant string) bool {
		t.Helper()
		s, err := e.access.TenantSettings(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return s.HistoryForTriggers
	}

	// Cross-site, and by a non-admin: refused, nothing saved.
	req, _ := http.NewRequest(http.MethodPost, e.base+"/admin/history", strings.NewReader("on=on"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || setting(tenantA) {
		t.Errorf("cross-site post: %d, saved %v", resp.StatusCode, setting(tenantA))
	}
	user := e.client(userA)
	if code, _ := e.form(user, "/admin/history", url.Values{"on": {"on"}}); code != http.StatusForbidden || setting(tenantA) {
		t.Errorf("a non-admin's post: %d, saved %v", code, setting(tenantA))
	}
	if code, _ := e.do(user, http.MethodPut, "/api/admin/settings", "application/json", `{"historyForTriggers": true}`); code != http.StatusForbidden || setting(tenantA) {
		t.Errorf("a non-admin's PUT: %d, saved %v", code, setting(tenantA))
	}

	// The form turns it on: the redirect's page says so and shows it.
	code, body := e.form(admin, "/admin/history", url.Values{"on": {"on"}})
	if code != http.StatusOK || !strings.Contains(body, "The memory setting for runs without a person was saved.") || !strings.Contains(body, box+` checked>`) {
		t.Fatalf("save: %d\n%s", code, body)
	}
	if !setting(tenantA) || setting(tenantB) {
		t.Errorf("after tenant A's admin turned it on: tenant A %v, tenant B %v", setting(tenantA), setting(tenantB))
	}
	var got map[string]any
	if code, body = e.do(admin, http.MethodGet, "/api/admin/settings", "", ""); code != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || got["historyForTriggers"] != true {
		t.Errorf("API read: %d %s", code, body)
	}
	if _, body := e.do(e.client(adminB), http.MethodGet, "/api/admin/settings", "", ""); !strings.Contains(body, `"historyForTriggers":false`) {
		t.Errorf("tenant B's admin reads %s", body)
	}

	// A PUT that does not name it leaves it as it is; one that does sets it.
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true}`); code != http.StatusOK || !strings.Contains(body, `"historyForTriggers":true`) {
		t.Errorf("PUT without it: %d %s", code, body)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true, "historyForTriggers": false}`); code != http.StatusOK || !strings.Contains(body, `"historyForTriggers":false`) || setting(tenantA) {
		t.Errorf("PUT turning it off: %d %s", code, body)
	}
	// The form's box left unchecked turns it off too.
	if code, body = e.form(admin, "/admin/history", url.Values{}); code != http.StatusOK || !strings.Contains(body, box+`>`) || setting(tenantA) {
		t.Errorf("unchecked save: %d, on %v", code, setting(tenantA))
	}

	recs, _ := e.store.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditHistoryForTriggersSet})
	var changes []string
	for _, r := range recs {
		changes = append(changes, fmt.Sprint(r.Actor, " ", r.Fields["before"], " ", r.Fields["after"]))
	}
	on, off := " map[historyForTriggers:false] map[historyForTriggers:true]", " map[historyForTriggers:true] map[historyForTriggers:false]"
	// The form's save, the PUT that turned it off, and the form's save
	// with the box unchecked (the PUT without it changed nothing).
	if want := []string{adminA.OID + on, adminA.OID + off, adminA.OID + " map[historyForTriggers:false] map[historyForTriggers:false]"}; !slices.Equal(changes, want) {
		t.Errorf("audited changes %q, want %q", changes, want)
	}
	if other, _ := e.store.Audit(ctx, store.AuditQuery{TenantID: tenantB, Action: access.AuditHistoryForTriggersSet}); len(other) != 0 {
		t.Errorf("tenant B's log got %d records", len(other))
	}
}

// The elicitation switches: the access page shows one per configured
// server, on by default; its form turns one server off or on with a
// notice after the redirect; the API reads the servers turned off and
// sets them, and a PUT without them leaves them as they are; an unknown
// server is refused; each change is audited and summed up on the audit
// page; a non-admin and a cross-site post change nothing; another
// tenant's servers may still ask.
func TestElicitationFormAndAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.client(adminA)
	const demoBox, transcriptBox = `<input type="checkbox" role="switch" id="e-0" name="on" value="on"`, `<input type="checkbox" role="switch" id="e-1" name="on" value="on"`
	_, page := e.do(admin, http.MethodGet, "/admin", "", "")
	if !containsAll(page, `<form method="post" action="/admin/elicitation">`, `<legend>Server <code>demo</code></legend>`,
		`<input type="hidden" name="server" value="transcript">`, demoBox+` checked>`, transcriptBox+` checked>`,
		`<label for="e-0">Ask people for input (elicitation)</label>`, "with <code>decline</code> at once, in runs and views alike, without asking anyone") {
		t.Fatalf("the access page lacks the elicitation switches, on, or their explanation:\n%s", page)
	}
	may := func(tenant string) string {
		t.Helper()
		var on []string
		for _, server := range []string{"demo", "transcript"} {
			if e.access.ElicitationAllowed(ctx, tenant, server) {
				on = append(on, server)
			}
		}
		return strings.Join(on, " ")
	}

	// Cross-site, and by a non-admin: refused, nothing saved.
	req, _ := http.NewRequest(http.MethodPost, e.base+"/admin/elicitation", strings.NewReader("server=demo"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || may(tenantA) != "demo transcript" {
		t.Errorf("cross-site post: %d, %q may ask", resp.StatusCode, may(tenantA))
	}
	user := e.client(userA)
	if code, _ := e.form(user, "/admin/elicitation", url.Values{"server": {"demo"}}); code != http.StatusForbidden || may(tenantA) != "demo transcript" {
		t.Errorf("a non-admin's post: %d, %q may ask", code, may(tenantA))
	}
	if code, _ := e.do(user, http.MethodPut, "/api/admin/settings", "application/json", `{"elicitationOff": ["demo"]}`); code != http.StatusForbidden || may(tenantA) != "demo transcript" {
		t.Errorf("a non-admin's PUT: %d, %q may ask", code, may(tenantA))
	}

	// The form turns demo off: the redirect's page says so and shows it.
	code, body := e.form(admin, "/admin/elicitation", url.Values{"server": {"demo"}})
	if code != http.StatusOK || !strings.Contains(body, "The setting for asking people for input was saved.") ||
		!strings.Contains(body, demoBox+`>`) || !strings.Contains(body, transcriptBox+` checked>`) {
		t.Fatalf("save: %d\n%s", code, body)
	}
	if a, b := may(tenantA), may(tenantB); a != "transcript" || b != "demo transcript" {
		t.Errorf("after tenant A's admin turned demo off: tenant A %q may ask, tenant B %q", a, b)
	}
	if code, body := e.form(admin, "/admin/elicitation", url.Values{"server": {"nosuch"}}); code != http.StatusBadRequest ||
		!strings.Contains(body, "No MCP server of the configuration has that name.") {
		t.Errorf("unknown server: %d", code)
	}
	if code, body = e.do(admin, http.MethodGet, "/api/admin/settings", "", ""); code != http.StatusOK || !strings.Contains(body, `"elicitationOff":["demo"]`) {
		t.Errorf("API read: %d %s", code, body)
	}
	if _, body := e.do(e.client(adminB), http.MethodGet, "/api/admin/settings", "", ""); !strings.Contains(body, `"elicitationOff":[]`) {
		t.Errorf("tenant B's admin reads %s", body)
	}

	// A PUT that does not name them leaves them as they are; one that does
	// sets them; an unknown server is refused with the configured ones.
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true}`); code != http.StatusOK || !strings.Contains(body, `"elicitationOff":["demo"]`) {
		t.Errorf("PUT without them: %d %s", code, body)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true, "elicitationOff": ["transcript", "nosuch"]}`); code != http.StatusBadRequest ||
		!strings.Contains(body, `elicitationOff: no MCP server of the configuration is named \"nosuch\"; the configured servers are demo, transcript.`) || may(tenantA) != "transcript" {
		t.Errorf("PUT with an unknown server: %d %s; %q may ask", code, body, may(tenantA))
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true, "elicitationOff": ["transcript"]}`); code != http.StatusOK ||
		!strings.Contains(body, `"elicitationOff":["transcript"]`) || may(tenantA) != "demo" {
		t.Errorf("PUT turning transcript off and demo on: %d %s; %q may ask", code, body, may(tenantA))
	}
	// The form's switch left on turns transcript on again.
	if code, body = e.form(admin, "/admin/elicitation", url.Values{"server": {"transcript"}, "on": {"on"}}); code != http.StatusOK || !strings.Contains(body, transcriptBox+` checked>`) || may(tenantA) != "demo transcript" {
		t.Errorf("save with the switch on: %d, %q may ask", code, may(tenantA))
	}
	// A server that left the configuration stays off until it is taken
	// out of the list: what a GET gave can be put back.
	if err := e.access.SetElicitation(ctx, access.Person{TenantID: tenantA, UserID: adminA.OID, Roles: adminA.Roles}, "retired", false); err != nil {
		t.Fatal(err)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true, "elicitationOff": ["retired"]}`); code != http.StatusOK || !strings.Contains(body, `"elicitationOff":["retired"]`) {
		t.Errorf("PUT of what the GET gave: %d %s", code, body)
	}
	if code, body = e.do(admin, http.MethodPut, "/api/admin/settings", "application/json", `{"defaultRunner": true, "appsEnabled": true, "elicitationOff": []}`); code != http.StatusOK || !strings.Contains(body, `"elicitationOff":[]`) {
		t.Errorf("PUT of none: %d %s", code, body)
	}

	recs, _ := e.store.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditElicitationSet})
	var changes []string
	for _, r := range recs {
		changes = append(changes, fmt.Sprint(r.Actor, " ", r.Fields["server"], " ", r.Fields["before"], " ", r.Fields["after"]))
	}
	on, off := " map[elicitation:false] map[elicitation:true]", " map[elicitation:true] map[elicitation:false]"
	// The form's save, the PUT that swapped the two servers, the form's
	// save with the switch on, the retired server turned off and the PUT
	// that took it out.
	if want := []string{adminA.OID + " demo" + off, adminA.OID + " demo" + on, adminA.OID + " transcript" + off, adminA.OID + " transcript" + on,
		adminA.OID + " retired" + off, adminA.OID + " retired" + on}; !slices.Equal(changes, want) {
		t.Errorf("audited changes %q, want %q", changes, want)
	}
	if other, _ := e.store.Audit(ctx, store.AuditQuery{TenantID: tenantB, Action: access.AuditElicitationSet}); len(other) != 0 {
		t.Errorf("tenant B's log got %d records", len(other))
	}
	if _, page := e.do(admin, http.MethodGet, "/admin/audit?action="+access.AuditElicitationSet, "", ""); !containsAll(page, "demo may no longer ask people for input.", "transcript may ask people for input.") {
		t.Errorf("the audit page does not sum the changes up:\n%s", page)
	}
}

// The runs page gives an operator what a reference a person was shown
// leads to: the run's own (a failure card's) and each problem's, with the
// detail only the console and the log hold.
func TestRunsPageShowsReferences(t *testing.T) {
	e := newEnv(t)
	run := store.Run{ID: "01jx5k2m3n-run-of-tenant-a", AgentID: "default", TenantID: tenantA, UserID: userA.OID, UserName: "Alice",
		Notes:    []string{"the crm server is unavailable, so its tools were not offered (ref 7KQ2M9XD)"},
		Problems: []store.RunProblem{{Ref: "7KQ2M9XD", Said: "the crm server is unavailable, so its tools were not offered", Detail: "starting /opt/mcp/crm: no such file or directory"}}}
	if err := e.store.SaveRun(context.Background(), run, nil, nil); err != nil {
		t.Fatal(err)
	}
	code, body := e.do(e.client(adminA), http.MethodGet, "/admin/runs", "", "")
	if code != http.StatusOK || !containsAll(body, run.ID, "7KQ2M9XD", "starting /opt/mcp/crm: no such file or directory", "(ref 7KQ2M9XD)") {
		t.Errorf("runs page %d:\n%s", code, body)
	}
	if _, body := e.do(e.client(adminB), http.MethodGet, "/admin/runs", "", ""); strings.Contains(body, "7KQ2M9XD") {
		t.Error("another tenant's admin sees the run's problems")
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// memoryDuring runs f and returns how much the process grew (memory
// obtained from the system, a high-water mark that also counts goroutine
// stacks) and how much was allocated meanwhile.
func memoryDuring(f func()) (grown, allocated uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.Sys - before.Sys, after.TotalAlloc - before.TotalAlloc
}

// A policy text nested far too deep, sent to every place of the console
// and the API that takes one, is refused in words that name the line, the
// column and the limit, before cedar-go sees it: the request answers, the
// next one works, and the process stays small. (Before the limits, 250,000
// nested parentheses took the process past 1 GB and a few million ended it
// with a stack overflow.)
func TestDeepPolicyTextRefusedOverHTTP(t *testing.T) {
	e := newEnv(t)
	admin := e.client(adminA)
	head := "permit (principal, action, resource) when { "
	const nested = "line 1, column 76: `(`, `[`, `{` and `if` are nested more than 32 deep here; at most 32 levels are allowed"
	deepJSON, _ := json.Marshal(map[string]any{"text": head + strings.Repeat("(", 250_000), "version": 0})
	balanced := head + strings.Repeat("(", 130_000) + "true" + strings.Repeat(")", 130_000) + " };"
	huge := head + strings.Repeat("(", 3_000_000)

	type answer struct {
		Error    string
		Problems []string
		Line     int
		Column   int
	}
	for _, tc := range []struct {
		name, method, path, contentType, body string
		want                                  string // in the page, or the JSON error
		ceiling                               uint64
	}{
		{"API save, 250,000 open", http.MethodPut, "/api/admin/policies", "application/json", string(deepJSON),
			"The policies were not saved: " + nested, 32 << 20},
		{"API tester, 250,000 open", http.MethodPost, "/api/admin/policies/test", "application/json",
			strings.Replace(string(deepJSON), `"version":0`, `"user":"`+userA.OID+`","agent":"default","server":"crm","tool":"lookup","caller":"model"`, 1),
			"The policies were not tested: " + nested, 32 << 20},
		{"console save, 130,000 deep", http.MethodPost, "/admin/policies", "application/x-www-form-urlencoded",
			url.Values{"text": {balanced}, "version": {"0"}}.Encode(),
			"The policies were not saved: " + nested, 32 << 20},
		{"console tester, 3,000,000 open", http.MethodPost, "/admin/policies/test", "application/x-www-form-urlencoded",
			url.Values{"text": {huge}, "user": {userA.OID}, "agent": {"default"}, "server": {"crm"}, "tool": {"lookup"}, "caller": {"model"}}.Encode(),
			"The policies were not tested: the text is 3,000,044 bytes long; policies may be at most 262,144 bytes (256 KiB) in all: remove what is not needed", 96 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var code int
			var body string
			grown, allocated := memoryDuring(func() { code, body = e.do(admin, tc.method, tc.path, tc.contentType, tc.body) })
			t.Logf("%d bytes sent: the process grew %d MiB, %d MiB allocated", len(tc.body), grown>>20, allocated>>20)
			if code != http.StatusBadRequest {
				t.Fatalf("answer %d, want 400: %.500s", code, body)
			}
			if strings.HasPrefix(tc.path, "/api/") {
				var a answer
				if err := json.Unmarshal([]byte(body), &a); err != nil || a.Error != tc.want || len(a.Problems) != 1 || a.Line != 1 || a.Column != 76 {
					t.Errorf("answer %.500s, want error %q, one problem, line 1, column 76", body, tc.want)
				}
			} else if !strings.Contains(body, `<p class="problem" role="alert">`+html.EscapeString(tc.want)+`</p>`) {
				t.Errorf("the page does not say %q:\n%.1500s", tc.want, body[max(0, strings.Index(body, "<main")):])
			}
			if strings.Contains(body, "access:") {
				t.Errorf("the answer shows a package prefix: %.500s", body)
			}
			if grown > tc.ceiling || allocated > 2*tc.ceiling {
				t.Errorf("the process grew %d MiB and allocated %d MiB, want at most %d and %d", grown>>20, allocated>>20, tc.ceiling>>20, 2*tc.ceiling>>20)
			}
			// The service goes on: the next request works, and nothing
			// was saved.
			code, body = e.do(admin, http.MethodGet, "/api/admin/policies", "", "")
			if code != http.StatusOK || !strings.Contains(body, `"version":0`) {
				t.Errorf("the next request: %d %.300s", code, body)
			}
		})
	}

	// A text saved before the limits (or by hand) is refused when the
	// tenant is loaded: the console and the tester say so.
	if _, err := e.store.PutPolicySet(context.Background(), store.PolicySet{TenantID: tenantA, Text: balanced}, 0); err != nil {
		t.Fatal(err)
	}
	saved := "The saved policies are refused, so every tool call is denied: " + nested + ". Correct them and save."
	code, body := e.do(admin, http.MethodGet, "/admin/policies", "", "")
	if code != http.StatusOK || !strings.Contains(body, html.EscapeString(saved)) {
		t.Errorf("the policy page with a refused saved text: %d %.1000s", code, body[max(0, strings.Index(body, "<main")):])
	}
	code, body = e.do(admin, http.MethodPost, "/api/admin/policies/test", "application/json",
		`{"user":"`+userA.OID+`","agent":"default","server":"crm","tool":"lookup","caller":"model"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, `"error":`+strconv.Quote(saved)) {
		t.Errorf("the API tester on a refused saved text: %d %.500s", code, body)
	}
}
