package viewpage_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/agent/demo"
	"teamsbot/internal/testenv"
	"teamsbot/mcpapps"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// "Only the person the run was for can open it": the page sends a person
// who is not signed in to sign-in and back, refuses another person of the
// tenant with a 403 page that shows nothing of the view, answers another
// tenant exactly as for an unknown view (404, the same words, expired or
// not), and tells an expired view (410) from an unknown one (404).
func TestPageAccess(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {\"region\": \"EMEA\"}")
	page := e.base + "/mcp-apps/" + v.ID

	t.Run("not signed in goes to sign-in and back", func(t *testing.T) {
		r := do(t, noRedirect(e.client(nil)), http.MethodGet, page, nil, "")
		if r.status != http.StatusSeeOther {
			t.Fatalf("status %d, want 303", r.status)
		}
		if want := e.signin.SignInURL("/mcp-apps/" + v.ID); r.header.Get("Location") != want {
			t.Fatalf("Location %q, want %q", r.header.Get("Location"), want)
		}
		// Following it through mockoidc lands on the page.
		e.oidc.QueueUser(alice())
		r = do(t, e.client(nil), http.MethodGet, page, nil, "")
		if r.status != http.StatusOK || !strings.Contains(r.body, `id="tool-title"`) {
			t.Fatalf("after sign-in: %d %.300s", r.status, r.body)
		}
	})

	t.Run("owner sees the tool, server and arguments", func(t *testing.T) {
		r := do(t, e.client(alice()), http.MethodGet, page, nil, "")
		if r.status != http.StatusOK {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		for _, want := range []string{"Sales report", `<code id="tool-name">sales_report</code>`, `<strong id="server">demo</strong>`, "EMEA"} {
			if !strings.Contains(r.body, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})

	// With Entra sign-in a view link tells the sign-in nothing (not whose
	// view it is, nor that it exists), and no refusal offers another
	// person: that is the local sign-in's alone.
	t.Run("the sign-in is not told whose view it is", func(t *testing.T) {
		noPerson := e.run(nil, "/sales_report {}")
		for _, id := range []string{v.ID, noPerson.ID, "no-such-view"} {
			r := do(t, noRedirect(e.client(nil)), http.MethodGet, e.base+"/mcp-apps/"+id, nil, "")
			if want := "/signin?return=" + url.QueryEscape("/mcp-apps/"+id); r.status != http.StatusSeeOther || r.header.Get("Location") != want {
				t.Errorf("%s: %d to %q, want 303 to %q", id, r.status, r.header.Get("Location"), want)
			}
		}
	})
	leaks := []string{alice().Name, alice().OID, "sales_report", "Sales report", "EMEA", v.Server + "<", v.ResourceURI, "Sign in as someone else", "&amp;as="}
	unknown := do(t, e.client(mallory()), http.MethodGet, e.base+"/mcp-apps/no-such-view", nil, "")
	unknownAPI := do(t, e.client(mallory()), http.MethodGet, e.base+"/api/mcp-apps/no-such-view", nil, "")
	t.Run("another tenant gets exactly what an unknown id gets", func(t *testing.T) {
		cl := e.client(mallory())
		for _, expired := range []bool{false, true} {
			if expired {
				e.clock.Advance(store.ViewLifetime + time.Minute)
			}
			r := do(t, cl, http.MethodGet, page, nil, "")
			api := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, "")
			if r.status != http.StatusNotFound || r.body != unknown.body || api.status != http.StatusNotFound || api.body != unknownAPI.body {
				t.Errorf("expired %v: page %d, API %d %s; want what an unknown id gets (404 %s)", expired, r.status, api.status, api.body, unknownAPI.body)
			}
			if expired {
				e.clock.Advance(-(store.ViewLifetime + time.Minute))
			}
		}
	})
	for _, c := range []struct {
		name string
		p    *person
	}{{"another person of the tenant", bob()}} {
		t.Run(c.name+" gets 403 and nothing of the view", func(t *testing.T) {
			cl := e.client(c.p)
			r := do(t, cl, http.MethodGet, page, nil, "")
			if r.status != http.StatusForbidden {
				t.Fatalf("page status %d, want 403", r.status)
			}
			if !strings.Contains(r.body, "This view is not yours") {
				t.Errorf("403 page does not say the view is not theirs: %s", r.body)
			}
			api := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, "")
			if api.status != http.StatusForbidden {
				t.Fatalf("API status %d, want 403", api.status)
			}
			for _, leak := range leaks {
				if strings.Contains(r.body, leak) || strings.Contains(api.body, leak) {
					t.Errorf("refusal leaks %q", leak)
				}
			}
		})
	}

	// Under the tenant default the owner needs no app role at all.
	t.Run("the owner without app roles opens it under the default", func(t *testing.T) {
		noRoles := alice()
		noRoles.Roles = nil
		cl := e.client(noRoles)
		if r := do(t, cl, http.MethodGet, page, nil, ""); r.status != http.StatusOK {
			t.Errorf("page: %d %s", r.status, r.body)
		}
		if api := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); api.status != http.StatusOK {
			t.Errorf("API: %d %s", api.status, api.body)
		}
	})

	// "It needs agents.read" holds for the owner too once an admin turns
	// the default off; the page says which role is missing rather than that
	// the view is someone else's.
	t.Run("the owner without agents.read gets 403 naming the role", func(t *testing.T) {
		e.setDefault(false)
		defer e.setDefault(true)
		noRoles := alice()
		noRoles.Roles = nil
		cl := e.client(noRoles)
		r := do(t, cl, http.MethodGet, page, nil, "")
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "agents.read") || strings.Contains(r.body, "not yours") {
			t.Errorf("page: %d %s, want 403 naming agents.read", r.status, r.body)
		}
		if api := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); api.status != http.StatusForbidden {
			t.Errorf("API: %d %s, want 403", api.status, api.body)
		}
	})

	t.Run("unknown view is 404", func(t *testing.T) {
		cl := e.client(alice())
		for _, id := range []string{"no-such-view", "bad%20id"} {
			r := do(t, cl, http.MethodGet, e.base+"/mcp-apps/"+id, nil, "")
			if r.status != http.StatusNotFound || !strings.Contains(r.body, "no such view") {
				t.Errorf("%s: status %d %s, want 404 page", id, r.status, r.body)
			}
		}
		r := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/no-such-view", nil, "")
		if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
			t.Errorf("API: %d %s %s, want 404 JSON", r.status, r.header.Get("Content-Type"), r.body)
		}
	})

	t.Run("expired view is 410", func(t *testing.T) {
		cl := e.client(alice())
		e.clock.Advance(store.ViewLifetime + time.Minute)
		defer e.clock.Advance(-(store.ViewLifetime + time.Minute))
		r := do(t, cl, http.MethodGet, page, nil, "")
		if r.status != http.StatusGone || !strings.Contains(r.body, "expired") {
			t.Fatalf("status %d %s, want 410 page", r.status, r.body)
		}
		r = do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, "")
		if r.status != http.StatusGone {
			t.Fatalf("API status %d, want 410", r.status)
		}
	})
}

// "A view from a run that had no person (a trigger, for example) can be
// opened by the tenant's agent readers" ("It needs agents.read"); others
// of the tenant may not, and calls need agents.run.
func TestNoPersonViewForReaders(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(nil, "/sales_report {}")
	reader := &person{TID: tenantA, OID: "cccccccc-0000-0000-0000-00000000000c", Name: "Carol", Roles: []string{"agents.read"}}
	nobody := &person{TID: tenantA, OID: "dddddddd-0000-0000-0000-00000000000d", Name: "Dan"}
	if r := do(t, e.client(reader), http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); r.status != http.StatusOK {
		t.Errorf("agent reader: %d %s", r.status, r.body)
	}
	if r := do(t, e.client(nobody), http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); r.status != http.StatusForbidden {
		t.Errorf("person without agents.read: %d, want 403", r.status)
	}
	if r := do(t, e.client(mallory()), http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); r.status != http.StatusNotFound {
		t.Errorf("reader of another tenant: %d, want 404 as for an unknown view", r.status)
	}

	// Calls need agents.run: a reader may look but not run, and the
	// refusal is audited like the agent's own.
	r := do(t, e.client(reader), http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "agents.run") {
		t.Errorf("reader's call: %d %s, want 403", r.status, r.body)
	}
	audited := false
	for _, rec := range e.callAudit(tenantA) {
		if rec.Fields["tool"] == "refresh_sales" && rec.Fields["result"] == "refused" && rec.Actor == reader.OID {
			audited = true
		}
	}
	if !audited {
		t.Errorf("the refused call was not audited: %+v", e.callAudit(tenantA))
	}
	// The owner of a view needs agents.run too ("It needs agents.run"),
	// which the tenant default gives; with the default off, a reader
	// alone may not run their view's tools.
	e.setDefault(false)
	own := alice()
	own.Roles = []string{"agents.read", "agents.run"}
	mine := e.run(own, "/sales_report {}")
	own.Roles = []string{"agents.read"}
	r = do(t, e.client(own), http.MethodPost, e.base+"/api/mcp-apps/"+mine.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "agents.run") {
		t.Errorf("owner without agents.run: %d %s, want 403", r.status, r.body)
	}
	runner := &person{TID: tenantA, OID: "eeeeeeee-0000-0000-0000-00000000000e", Name: "Erin", Roles: []string{"agents.read", "agents.run"}}
	r = do(t, e.client(runner), http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	if r.status != http.StatusOK {
		t.Errorf("runner's call: %d %s, want 200", r.status, r.body)
	}
}

// "GET /api/mcp-apps/{id} returns a view's sandbox URLs (each with a fresh
// token), the tool's arguments and its result."
func TestViewAPI(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {\"region\": \"APAC\"}")
	cl := e.client(alice())
	r := do(t, cl, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", r.header.Get("Cache-Control"))
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "server", "tool", "resourceUri", "proxyUrl", "viewUrl", "arguments", "result", "expiresAt", "sandbox", "permissions"} {
		if _, ok := got[k]; !ok {
			t.Errorf("answer lacks %q: %s", k, r.body)
		}
	}
	info := e.viewInfo(cl, v.ID)
	if info.Tool != demo.ToolSalesReport || info.Server != "demo" || info.ResourceURI != demo.SalesReportURI {
		t.Errorf("info %+v", info)
	}
	if !strings.Contains(string(info.Arguments), "APAC") {
		t.Errorf("arguments %s", info.Arguments)
	}
	var res struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(info.Result, &res); err != nil || len(res.Content) == 0 {
		t.Errorf("result %s: content not a non-empty array", info.Result)
	}
	if !strings.HasPrefix(info.ProxyURL, e.sandbox+"/sandbox/proxy?view="+v.ID+"&token=") ||
		!strings.HasPrefix(info.ViewURL, e.sandbox+"/sandbox/views/"+v.ID+"?token=") {
		t.Errorf("frame URLs not on the sandbox origin %s: %s %s", e.sandbox, info.ProxyURL, info.ViewURL)
	}
	if info.Sandbox != "allow-scripts" {
		t.Errorf("sandbox %q, want allow-scripts", info.Sandbox)
	}
	// Fresh tokens: a second answer a second later carries new ones.
	e.clock.Advance(time.Second)
	again := e.viewInfo(cl, v.ID)
	if again.ProxyURL == info.ProxyURL || again.ViewURL == info.ViewURL {
		t.Error("the second answer reused the tokens")
	}

	if r := do(t, e.client(nil), http.MethodGet, e.base+"/api/mcp-apps/"+v.ID, nil, ""); r.status != http.StatusUnauthorized ||
		!strings.Contains(r.body, `"error"`) {
		t.Errorf("not signed in: %d %s, want 401 JSON", r.status, r.body)
	}
}

// "The frame URLs carry a signed token that expires after 10 minutes.
// Without that token, neither page is served."
func TestFrameDocumentsNeedTheirToken(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	other := e.run(alice(), "/feedback_form {}")
	cl := e.client(alice())
	info := e.viewInfo(cl, v.ID)
	otherInfo := e.viewInfo(cl, other.ID)
	anon := e.client(nil) // the frames carry no cookie: the token is all

	token := func(u string) string {
		pu, _ := url.Parse(u)
		return pu.Query().Get("token")
	}
	proxyTok, viewTok := token(info.ProxyURL), token(info.ViewURL)
	tamper := func(s string) string {
		if s[len(s)-2] == 'A' {
			return s[:len(s)-2] + "B" + s[len(s)-1:]
		}
		return s[:len(s)-2] + "A" + s[len(s)-1:]
	}
	proxyURL := func(view, tok string) string {
		return e.sandbox + "/sandbox/proxy?view=" + view + "&token=" + url.QueryEscape(tok)
	}
	viewURL := func(view, tok string) string {
		return e.sandbox + "/sandbox/views/" + view + "?token=" + url.QueryEscape(tok)
	}

	cases := []struct {
		name string
		url  string
		want int
	}{
		{"proxy with its token", info.ProxyURL, 200},
		{"view with its token", info.ViewURL, 200},
		{"proxy without token", e.sandbox + "/sandbox/proxy?view=" + v.ID, 403},
		{"view without token", e.sandbox + "/sandbox/views/" + v.ID, 403},
		{"proxy, tampered token", proxyURL(v.ID, tamper(proxyTok)), 403},
		{"view, tampered token", viewURL(v.ID, tamper(viewTok)), 403},
		{"view, token of another view", viewURL(other.ID, viewTok), 403},
		{"proxy, token of another view", proxyURL(other.ID, proxyTok), 403},
		{"view, the proxy's token", viewURL(v.ID, proxyTok), 403},
		{"proxy, the view's token", proxyURL(v.ID, viewTok), 403},
		{"other view with its own token", otherInfo.ViewURL, 200},
	}
	for _, c := range cases {
		r := do(t, anon, http.MethodGet, c.url, nil, "")
		if r.status != c.want {
			t.Errorf("%s: status %d, want %d", c.name, r.status, c.want)
		}
	}

	// A browser asking for a frame document as anything but a frame (a
	// top-level window, a fetch) is refused even with the token.
	for _, dest := range []string{"document", "empty", "script"} {
		for _, u := range []string{info.ProxyURL, info.ViewURL} {
			if r := do(t, anon, http.MethodGet, u, map[string]string{"Sec-Fetch-Dest": dest}, ""); r.status != http.StatusForbidden {
				t.Errorf("Sec-Fetch-Dest %s, %s: %d, want 403", dest, u, r.status)
			}
			if r := do(t, anon, http.MethodGet, u, map[string]string{"Sec-Fetch-Dest": "iframe"}, ""); r.status != http.StatusOK {
				t.Errorf("Sec-Fetch-Dest iframe, %s: %d, want 200", u, r.status)
			}
		}
	}

	// Expired: ten minutes later, the same URLs are refused.
	e.clock.Advance(10 * time.Minute)
	for _, u := range []string{info.ProxyURL, info.ViewURL} {
		if r := do(t, anon, http.MethodGet, u, nil, ""); r.status != http.StatusForbidden {
			t.Errorf("%s after 10 minutes: %d, want 403", u, r.status)
		}
	}
}

// "Liyagent serves the view's HTML under a Content Security Policy built
// from the _meta.ui.csp its server declared" — as an HTTP header, with the
// sandbox directive, no-store, no-referrer, nosniff, and never
// X-Frame-Options (which would stop the page from framing it). The proxy's
// frame-ancestors names only the page's origin.
func TestFrameDocumentHeaders(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	info := e.viewInfo(e.client(alice()), v.ID)
	anon := e.client(nil)

	view := do(t, anon, http.MethodGet, info.ViewURL, nil, "")
	// No frame-ancestors (see TestFrameAncestorsOfSandboxedProxy); the
	// sandbox directive keeps the document opaque wherever it is loaded.
	wantCSP := "sandbox allow-scripts; webrtc 'block'; " + v.CSP
	if got := view.header.Get("Content-Security-Policy"); got != wantCSP {
		t.Errorf("view CSP\n got %q\nwant %q", got, wantCSP)
	}
	// The connections the view may make are its own origin's and the
	// origins its server declared, CSP or not (see TestBrowserExfiltration).
	if got, want := view.header.Get("Connection-Allowlist"), `(response-origin "https://api.example.com" "https://cdn.example.com")`; got != want {
		t.Errorf("view Connection-Allowlist %q, want %q", got, want)
	}
	// What is served is the guard, then the stored HTML byte for byte:
	// the record and its SHA-256 are the server's.
	stored, err := e.store.ViewHTML(context.Background(), v.HTMLSHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(view.body, viewpage.GuardScript()) || strings.Replace(view.body, "<script>"+viewpage.GuardScript()+"</script>", "", 1) != string(stored) {
		t.Errorf("the view document is not the stored HTML with the guard inserted")
	}
	if sum := sha256.Sum256(stored); hex.EncodeToString(sum[:]) != v.HTMLSHA256 {
		t.Errorf("the stored HTML's SHA-256 is not the view's record")
	}
	// The demo declares connectDomains https://api.example.com and
	// http://insecure.example.com: the first is in, the second dropped.
	// 'unsafe-eval' is for scripts only, never for where they connect.
	if csp := view.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src https://api.example.com;") ||
		strings.Contains(csp, "insecure.example.com") || strings.Contains(csp, "connect-src 'unsafe-eval'") {
		t.Errorf("view CSP does not follow the declaration: %s", csp)
	}
	proxy := do(t, anon, http.MethodGet, info.ProxyURL, nil, "")
	pcsp := proxy.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'sha256-", "frame-src " + e.sandbox + ";", "frame-ancestors " + e.base, "require-trusted-types-for 'script'"} {
		if !strings.Contains(pcsp, want) {
			t.Errorf("proxy CSP lacks %q: %s", want, pcsp)
		}
	}
	if strings.Contains(pcsp, "unsafe-inline") || strings.Contains(pcsp, "frame-ancestors "+e.base+" ") {
		t.Errorf("proxy CSP too wide: %s", pcsp)
	}
	if !strings.Contains(pcsp, "webrtc 'block'") {
		t.Errorf("proxy CSP lacks webrtc 'block': %s", pcsp)
	}
	if got := proxy.header.Values("Connection-Allowlist"); len(got) != 0 {
		t.Errorf("proxy Connection-Allowlist %q: with one on the proxy too, Chromium hangs when the view makes a peer connection", got)
	}
	for name, r := range map[string]response{"view": view, "proxy": proxy} {
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d", name, r.status)
		}
		for h, want := range map[string]string{
			"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
			"X-DNS-Prefetch-Control": "off",
		} {
			if got := r.header.Get(h); got != want {
				t.Errorf("%s %s = %q, want %q", name, h, got, want)
			}
		}
		if xfo := r.header.Values("X-Frame-Options"); len(xfo) > 0 {
			t.Errorf("%s sends X-Frame-Options %v", name, xfo)
		}
	}

	page := do(t, e.client(alice()), http.MethodGet, e.base+"/mcp-apps/"+v.ID, nil, "")
	csp := page.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'sha256-", "frame-src " + e.sandbox + ";", "connect-src 'self'", "frame-ancestors 'none'", "require-trusted-types-for 'script'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("page CSP lacks %q: %s", want, csp)
		}
	}
	if strings.Contains(csp, "unsafe-inline") {
		t.Errorf("page CSP allows inline scripts: %s", csp)
	}
}

// "POST /api/mcp-apps/{id}/call takes {name, arguments} and returns a
// CallToolResult", only through the governed path: "A view's tools/call for
// a tool without "app" is refused with 403 and audited."
func TestCall(t *testing.T) {
	e := newEnv(t, envOptions{
		servers:  []agent.ServerConfig{{Name: "other", Builtin: "other"}},
		builtins: map[string]func() *mcp.Server{"other": otherServer},
	})
	v := e.run(alice(), "/sales_report {}")
	cl := e.client(alice())
	callURL := e.base + "/api/mcp-apps/" + v.ID + "/call"
	jsonCT := map[string]string{"Content-Type": "application/json"}
	sameOrigin := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin", "Origin": e.base}

	r := do(t, cl, http.MethodPost, callURL, sameOrigin, `{"name":"refresh_sales","arguments":{"region":"Global","quarter":"2026-Q3","revision":1}}`)
	if r.status != http.StatusOK {
		t.Fatalf("app tool: %d %s", r.status, r.body)
	}
	var res struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
		IsError           bool             `json:"isError"`
	}
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res.Content) == 0 || res.IsError {
		t.Fatalf("result %s (%v)", r.body, err)
	}
	if res.StructuredContent["revision"] != float64(1) {
		t.Errorf("structuredContent %v, want revision 1", res.StructuredContent)
	}

	refused := []struct {
		name   string
		client func() *http.Client
		header map[string]string
		body   string
		want   int
	}{
		{"model-only tool", func() *http.Client { return cl }, jsonCT, `{"name":"lookup_customer","arguments":{"query":"Acme"}}`, 403},
		{"another server's app tool", func() *http.Client { return cl }, jsonCT, `{"name":"other_tool","arguments":{}}`, 403},
		{"cross-site", func() *http.Client { return cl }, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, `{"name":"refresh_sales"}`, 403},
		{"cross-origin without Sec-Fetch-Site", func() *http.Client { return cl }, map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, `{"name":"refresh_sales"}`, 403},
		{"form content type", func() *http.Client { return cl }, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, `name=refresh_sales`, 415},
		{"text/plain", func() *http.Client { return cl }, map[string]string{"Content-Type": "text/plain"}, `{"name":"refresh_sales"}`, 415},
		{"no content type", func() *http.Client { return cl }, nil, `{"name":"refresh_sales"}`, 415},
		{"bad JSON", func() *http.Client { return cl }, jsonCT, `{"name":`, 400},
		{"arguments not an object", func() *http.Client { return cl }, jsonCT, `{"name":"refresh_sales","arguments":[1]}`, 400},
		{"no name", func() *http.Client { return cl }, jsonCT, `{"arguments":{}}`, 400},
		{"too large", func() *http.Client { return cl }, jsonCT, `{"name":"refresh_sales","arguments":{"x":"` + strings.Repeat("a", 1<<20) + `"}}`, 413},
		{"not signed in", func() *http.Client { return e.client(nil) }, jsonCT, `{"name":"refresh_sales"}`, 401},
		{"another person", func() *http.Client { return e.client(bob()) }, jsonCT, `{"name":"refresh_sales"}`, 403},
		{"another tenant", func() *http.Client { return e.client(mallory()) }, jsonCT, `{"name":"refresh_sales"}`, 404},
	}
	for _, c := range refused {
		r := do(t, c.client(), http.MethodPost, callURL, c.header, c.body)
		if r.status != c.want {
			t.Errorf("%s: status %d %s, want %d", c.name, r.status, r.body, c.want)
			continue
		}
		var j struct{ Error string }
		if err := json.Unmarshal([]byte(r.body), &j); err != nil || j.Error == "" {
			t.Errorf("%s: body %q is not {\"error\": ...}", c.name, r.body)
		}
		if l := testenv.Leaks(j.Error); len(l) > 0 {
			t.Errorf("%s: the error holds %q: %s", c.name, l, j.Error)
		}
	}

	// The agent audited the refused model-only call and the call of
	// another server's tool ("a tool of another server is refused with
	// 403 and audited").
	for _, tool := range []string{"lookup_customer", "other_tool"} {
		found := false
		for _, rec := range e.callAudit(tenantA) {
			if rec.Fields["tool"] == tool && rec.Fields["result"] == "refused" && rec.Actor == alice().OID {
				found = true
			}
		}
		if !found {
			t.Errorf("no agent.mcp_app.call record with result refused for %s: %+v", tool, e.callAudit(tenantA))
		}
	}
	// Someone of another tenant learns nothing (404, as for an unknown
	// id) and writes nothing into the owner's log: the refusal is recorded
	// in their own tenant, without the tool name they chose (Mallory has
	// Alice's user id in her own tenant).
	for _, rec := range e.callAudit(tenantA) {
		if rec.Fields["caller_tenant"] != nil || (rec.Actor == mallory().OID && rec.Fields["tool"] == "refresh_sales" && rec.Fields["caller"] != alice().OID) {
			t.Errorf("another tenant's call reached the owner's log: %+v", rec)
		}
	}
	found := false
	for _, rec := range e.callAudit(tenantB) {
		if rec.Fields["result"] == "refused" && rec.Fields["view"] == v.ID && rec.Fields["tool"] == "" {
			found = true
		}
	}
	if !found {
		t.Errorf("no refused record in the caller's tenant %s: %+v", tenantB, e.callAudit(tenantB))
	}
}

// One error handler for the whole server: JSON under /api/, a small HTML
// page elsewhere, and only safe messages.
func TestErrorHandlerShapes(t *testing.T) {
	e := newEnv(t, envOptions{})
	anon := e.client(nil)
	r := do(t, anon, http.MethodGet, e.base+"/api/no-such-route", nil, "")
	if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
		t.Errorf("API 404: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	r = do(t, anon, http.MethodGet, e.base+"/no-such-page", nil, "")
	if r.status != http.StatusNotFound || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
		r.header.Get("Content-Security-Policy") == "" {
		t.Errorf("page 404: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
}

// otherServer is a second MCP server of the agent with an app-visible tool,
// which a view of the demo server must still not call.
func otherServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "other", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        "other_tool",
		InputSchema: map[string]any{"type": "object"},
		Meta:        mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}},
	}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "other"}}}, nil
	})
	return srv
}

// Refused frame tokens and view tool calls are counted for operators.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, envOptions{mutate: func(o *viewpage.Options) { o.Registerer = reg }})
	v := e.run(alice(), "/sales_report {}")
	do(t, e.client(nil), http.MethodGet, e.sandbox+"/sandbox/views/"+v.ID, nil, "")
	do(t, e.client(alice()), http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	if got["teamsbot_viewpage_frame_token_refusals_total purpose=sandbox-view reason=missing"] != 1 {
		t.Errorf("token refusal not counted: %v", got)
	}
	if got["teamsbot_viewpage_tool_calls_total result=ok"] != 1 {
		t.Errorf("tool call not counted: %v", got)
	}
}

// A tool call the view's server fails is a 502 for the view, audited as
// error; what the server said, which may repeat the arguments, never
// reaches the log ("never log tokens, cookies, tool arguments or
// results"). An absurd tool name is refused before anything is written.
func TestCallFailureKeepsArgumentsOutOfTheLog(t *testing.T) {
	e := newLabEnv(t)
	v := e.run(alice(), "/lab_view {}")
	cl := e.client(alice())
	callURL := e.base + "/api/mcp-apps/" + v.ID + "/call"
	jsonCT := map[string]string{"Content-Type": "application/json"}
	const secret = "S3CR3T-argument-value"

	r := do(t, cl, http.MethodPost, callURL, jsonCT, `{"name":"lab_fail","arguments":{"account":"`+secret+`"}}`)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, `"error"`) {
		t.Errorf("failing tool: %d %s, want 502 JSON", r.status, r.body)
	}
	if strings.Contains(r.body, secret) {
		t.Errorf("the answer repeats the arguments: %s", r.body)
	}
	logs := e.logText()
	if !strings.Contains(logs, "lab_fail") {
		t.Errorf("the failure was not logged: %q", logs)
	}
	if strings.Contains(logs, secret) {
		t.Errorf("the log shows the tool's arguments: %s", logs)
	}
	audited := false
	for _, rec := range e.callAudit(tenantA) {
		if rec.Fields["tool"] == "lab_fail" && rec.Fields["result"] == "error" {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no error audit record for lab_fail: %+v", e.callAudit(tenantA))
	}

	before := len(e.callAudit(tenantA))
	long := strings.Repeat("n", viewpage.MaxToolNameBytes+1)
	if r := do(t, cl, http.MethodPost, callURL, jsonCT, `{"name":"`+long+`"}`); r.status != http.StatusBadRequest {
		t.Errorf("tool name of %d bytes: %d %s, want 400", len(long), r.status, r.body)
	}
	if got := len(e.callAudit(tenantA)); got != before {
		t.Errorf("a refused tool name of %d bytes was audited", len(long))
	}
}

// "A view is kept for 7 days": a view that expires while its frame tokens
// are still good is refused all the same, by its document and its call.
func TestExpiredViewRefusedBehindGoodTokens(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	cl := e.client(alice())
	e.clock.Advance(store.ViewLifetime - time.Minute)
	info := e.viewInfo(cl, v.ID)
	if r := do(t, e.client(nil), http.MethodGet, info.ViewURL, nil, ""); r.status != http.StatusOK {
		t.Fatalf("view document a minute before expiry: %d", r.status)
	}
	e.clock.Advance(2 * time.Minute)
	if r := do(t, e.client(nil), http.MethodGet, info.ViewURL, nil, ""); r.status != http.StatusGone {
		t.Errorf("view document after expiry, token still good: %d, want 410", r.status)
	}
	r := do(t, cl, http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	if r.status != http.StatusGone {
		t.Errorf("call after expiry: %d %s, want 410", r.status, r.body)
	}
}

// The sandbox directive of a view document cannot be loosened by what is
// stored as the view's CSP: a browser keeps the first of two directives of
// one name, and the service's own comes first. (The stored CSP is built by
// mcpapps, which drops stray directives; this holds even if one got in.)
func TestViewSandboxDirectiveComesFirst(t *testing.T) {
	e := newEnv(t, envOptions{})
	now := e.clock.Now()
	v := store.View{
		ID: "hostile-csp-view", AgentID: "default", TenantID: tenantA, UserID: alice().OID,
		Server: "demo", Tool: demo.ToolSalesReport, ResourceURI: demo.SalesReportURI,
		CSP:       mcpapps.DefaultCSP + "; sandbox allow-scripts allow-same-origin allow-top-navigation allow-popups",
		Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`{"content":[]}`),
		CreatedAt: now, ExpiresAt: now.Add(store.ViewLifetime),
	}
	err := e.store.SaveRun(context.Background(), store.Run{ID: "hostile-run", AgentID: "default", TenantID: tenantA, UserID: alice().OID, CreatedAt: now},
		[]store.NewView{{View: v, HTML: []byte("<!doctype html><p>hostile</p>")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	info := e.viewInfo(e.client(alice()), v.ID)
	r := do(t, e.client(nil), http.MethodGet, info.ViewURL, nil, "")
	if r.status != http.StatusOK {
		t.Fatalf("view document: %d %s", r.status, r.body)
	}
	var first string
	for d := range strings.SplitSeq(r.header.Get("Content-Security-Policy"), ";") {
		if d = strings.TrimSpace(d); strings.HasPrefix(d, "sandbox") {
			first = d
			break
		}
	}
	if first != "sandbox allow-scripts" {
		t.Errorf("the first sandbox directive is %q, want \"sandbox allow-scripts\": %s", first, r.header.Get("Content-Security-Policy"))
	}
}

// Without a separate sandbox origin the frame URLs are paths and the
// frame headers say 'self', so the frames load under whatever host name
// the page was opened (TestBrowserOfficialDebugServer opens it under
// another name than the public base URL's).
func TestSameOriginFramesArePaths(t *testing.T) {
	e := newEnv(t, envOptions{sameOrigin: true})
	v := e.run(alice(), "/sales_report {}")
	cl := e.client(alice())
	info := e.viewInfo(cl, v.ID)
	if !strings.HasPrefix(info.ProxyURL, "/sandbox/proxy?view="+v.ID+"&token=") || !strings.HasPrefix(info.ViewURL, "/sandbox/views/"+v.ID+"?token=") {
		t.Errorf("frame URLs %q %q, want paths", info.ProxyURL, info.ViewURL)
	}
	proxy := do(t, e.client(nil), http.MethodGet, e.base+info.ProxyURL, nil, "")
	if proxy.status != http.StatusOK {
		t.Fatalf("proxy: %d", proxy.status)
	}
	pcsp := proxy.header.Get("Content-Security-Policy")
	if !strings.HasSuffix(pcsp, "; frame-ancestors 'self'") || !strings.Contains(pcsp, "frame-src 'self';") {
		t.Errorf("proxy CSP %q, want frame-src and frame-ancestors 'self'", pcsp)
	}
	if r := do(t, e.client(nil), http.MethodGet, e.base+info.ViewURL, nil, ""); r.status != http.StatusOK {
		t.Errorf("view document: %d", r.status)
	}
	page := do(t, cl, http.MethodGet, e.base+"/mcp-apps/"+v.ID, nil, "")
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-src 'self';") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("page CSP %q, want frame-src 'self'", csp)
	}
}

// "POST /api/mcp-apps/{id}/call ... needs agents.run and the Cedar invoke
// on the agent": a tenant policy that forbids one tool from views refuses
// the view's call with 403, audited as refused with the policy's id; once
// the admin changes the policy, the same call goes through.
func TestCedarPolicyDecidesViewCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	admin := access.Person{TenantID: tenantA, UserID: "adadadad-0000-0000-0000-0000000000ad", Roles: []string{access.PermAdmin}}
	ctx := context.Background()
	_, version, err := e.access.PolicyText(ctx, tenantA)
	if err != nil {
		t.Fatal(err)
	}
	if version, err = e.access.SetPolicies(ctx, admin, access.DefaultPolicyText+`
@id("no-refresh-from-views")
forbid (principal, action == Action::"invoke", resource) when { context.caller == "view" && context.tool == "refresh_sales" };
`, version); err != nil {
		t.Fatal(err)
	}
	call := func() response {
		return do(t, e.client(alice()), http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
			map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	}
	if r := call(); r.status != http.StatusForbidden || !strings.Contains(r.body, "policy denied") {
		t.Fatalf("forbidden call: %d %s, want 403", r.status, r.body)
	}
	recs := e.callAudit(tenantA)
	last := recs[len(recs)-1]
	if last.Fields["result"] != "refused" || last.Fields["decision"] != "deny" || fmt.Sprint(last.Fields["policies"]) != "[no-refresh-from-views]" {
		t.Errorf("audit record %+v, want refused by no-refresh-from-views", last)
	}
	if _, err := e.access.SetPolicies(ctx, admin, access.DefaultPolicyText, version); err != nil {
		t.Fatal(err)
	}
	if r := call(); r.status != http.StatusOK {
		t.Errorf("after the policy change: %d %s", r.status, r.body)
	}
}

// Opening a view is audited once a person within half an hour: a reload
// is the same opening, another person's is another, and an opening after
// the window is a new one.
func TestOpeningAViewIsAuditedOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(nil, "/sales_report {}") // a run without a person: every agent reader may open it
	openings := func() []store.AuditRecord {
		t.Helper()
		recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA, Action: agent.AuditOpened})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	a, b := e.client(alice()), e.client(bob())
	e.viewInfo(a, v.ID)
	e.viewInfo(a, v.ID) // a reload
	if got := openings(); len(got) != 1 || got[0].Actor != alice().OID || got[0].Fields["view"] != v.ID {
		t.Fatalf("after an opening and a reload: %+v, want one record of Alice's opening", got)
	}
	e.viewInfo(b, v.ID)
	e.clock.Advance(31 * time.Minute)
	e.viewInfo(a, v.ID)
	if got := openings(); len(got) != 3 {
		t.Errorf("Bob's opening and Alice's after half an hour: %d records, want 3", len(got))
	}
}
