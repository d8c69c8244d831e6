package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"teamsbot/access"
	"teamsbot/admin"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// sharedBrowser is the one headless Chromium of this test binary; each
// test opens its tabs in their own browser contexts in it.
var sharedBrowser testenv.SharedChromium

func TestMain(m *testing.M) {
	code := m.Run()
	sharedBrowser.Close()
	os.Exit(code)
}

// consolePages are every page of a console with keys, triggers and
// connections, by path and h1.
var consolePages = []struct{ path, h1 string }{
	{"/admin/overview", "Overview"}, {"/admin", "Access"}, {"/admin/policies", "Policies"}, {"/admin/views", "Active views"}, {"/admin/runs", "Recent runs"},
	{"/admin/conversations", "Conversations"}, {"/admin/keys", "API keys"}, {"/admin/triggers", "Scheduled triggers"},
	{"/admin/connections", "People's connections to MCP servers"}, {"/admin/audit", "Audit log"},
}

// fullEnv is the console with every page and something in each: a
// binding, a view, a run, a key, a trigger, people's connections, and
// the audit records of all that.
type fullEnv struct {
	*env
	view    string
	key     string
	trigger string
}

func newFullEnv(t *testing.T) *fullEnv {
	t.Helper()
	e := newEnvOpts(t, func(o *admin.Options, base netaddr.Origin) {
		o.Triggers = triggersOn(t, o.Store, o.Access)
		b, err := mcpauth.New(mcpauth.Options{Store: o.Store, DataDir: t.TempDir(), PublicBaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		o.Connections = b
	})
	ctx := context.Background()
	adm := access.Person{TenantID: tenantA, UserID: adminA.OID, Name: adminA.Name, Roles: adminA.Roles}
	if err := e.access.AddBinding(ctx, adm, store.Binding{TenantID: tenantA, AgentID: "default", Kind: store.KindUser, Subject: userA.OID, Role: "runner"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	v := store.View{ID: "view-of-alice-0001", AgentID: "default", UserID: userA.OID, UserName: "Alice", Server: "demo", Tool: "sales_report",
		ResourceURI: "ui://demo/sales", Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`{"content":[]}`), CreatedAt: now, ExpiresAt: now.Add(store.ViewLifetime)}
	if err := e.store.SaveRun(ctx, store.Run{ID: "run-of-alice-0001", AgentID: "default", TenantID: tenantA, UserID: userA.OID, UserName: "Alice", CreatedAt: now,
		Notes: []string{"a note of the run"}}, []store.NewView{{View: v, HTML: []byte("<!doctype html><p>view</p>")}}, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []store.MCPConnection{
		{TenantID: tenantA, UserID: userA.OID, UserName: userA.Name, AgentID: "default", Server: "crm", Scopes: []string{"crm.read"}, LastUsedAt: now},
		{TenantID: tenantA, UserID: bobID, UserName: "Bob", AgentID: "default", Server: "crm"},
	} {
		c.Sealed, c.KeyID = sealedOf(c.UserID, c.Server), "sealing-key-7"
		if err := e.store.PutMCPConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	h := e.client(adminA)
	code, body := e.form(h, "/admin/keys", url.Values{"name": {"Nightly CI"}, "agent": {"default"}})
	if code != http.StatusCreated {
		t.Fatalf("create key: %d %s", code, body)
	}
	code, body = e.form(h, "/admin/triggers", url.Values{"name": {"Morning summary"}, "agent": {"default"}, "cron": {"0 9 * * mon-fri"},
		"timeZone": {"Europe/Berlin"}, "conversation": {convA}, "text": {"Summarise yesterday's tickets"}})
	if code != http.StatusOK {
		t.Fatalf("create trigger: %d %s", code, body)
	}
	f := &fullEnv{env: e, view: v.ID}
	var keys struct{ Keys []struct{ ID string } }
	_, raw := e.do(h, http.MethodGet, "/api/admin/keys", "", "")
	if json.Unmarshal([]byte(raw), &keys); len(keys.Keys) != 1 {
		t.Fatalf("keys: %s", raw)
	}
	f.key = keys.Keys[0].ID
	var trigs struct{ Triggers []struct{ ID string } }
	_, raw = e.do(h, http.MethodGet, "/api/admin/triggers", "", "")
	if json.Unmarshal([]byte(raw), &trigs); len(trigs.Triggers) != 1 {
		t.Fatalf("triggers: %s", raw)
	}
	f.trigger = trigs.Triggers[0].ID
	return f
}

// tab opens a tab signed in as the admin of tenant A.
func (e *fullEnv) tab(t *testing.T) *testenv.Tab {
	t.Helper()
	tb := testenv.NewTab(t, sharedBrowser.Get(t), nil)
	e.oidc.QueueUser(adminA)
	tb.Navigate(e.base + "/admin")
	tb.Wait("", `!!document.querySelector("h1") && document.querySelector("h1").textContent === "Access"`, "the console")
	return tb
}

// open loads a console page and waits for its heading.
func open(tb *testenv.Tab, base, path, h1 string) {
	tb.T.Helper()
	tb.Navigate(base + path)
	tb.Wait("", `!!document.querySelector("h1") && document.querySelector("h1").textContent === `+js(h1), path)
}

func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func press(t *testing.T, tb *testenv.Tab, key string) {
	t.Helper()
	if err := chromedp.Do(tb.Ctx, chromedp.KeyEvent(key)); err != nil {
		t.Fatal(err)
	}
}

// Every page of the console, in light, dark and forced colours, in a
// desktop window and a phone's: axe-core finds nothing serious or
// critical, and nothing makes the page scroll sideways; the confirmation
// dialog too.
func TestBrowserConsolePagesAccessibleInEveryThemeAndSize(t *testing.T) {
	e := newFullEnv(t)
	tb := e.tab(t)
	for _, w := range testenv.WindowSizes {
		for _, th := range testenv.Themes {
			tb.Emulate(w, th)
			for _, p := range consolePages {
				open(tb, e.base, p.path, p.h1)
				what := p.path + ", " + string(th) + ", " + w.Name
				tb.Wait("", `!!customElements.get("fluent-dialog")`, "Fluent's components")
				tb.CheckAxe(what)
				tb.CheckNoSidewaysScroll(what)
			}
			// The dialog that asks before a key is revoked.
			open(tb, e.base, "/admin/keys", "API keys")
			tb.Must("", `document.querySelector('form[action$="/revoke"] button').click(), 0`)
			tb.Wait("", `document.querySelector("fluent-dialog") && document.querySelector("fluent-dialog").shadowRoot.querySelector("dialog").open`, "the dialog")
			what := "the confirmation dialog, " + string(th) + ", " + w.Name
			tb.CheckAxe(what)
			tb.CheckNoSidewaysScroll(what)
		}
	}
	// The themes are Fluent's: its web light and dark backgrounds.
	tb.Emulate(testenv.WindowSizes[0], testenv.Dark)
	open(tb, e.base, "/admin", "Access")
	if bg := tb.Str("", `getComputedStyle(document.querySelector("fieldset")).backgroundColor`); bg != "rgb(41, 41, 41)" {
		t.Errorf("a fieldset in the dark theme is %s, want Fluent's colorNeutralBackground1 #292929", bg)
	}
	tb.Emulate(testenv.WindowSizes[0], testenv.Light)
	open(tb, e.base, "/admin", "Access")
	if bg := tb.Str("", `getComputedStyle(document.querySelector('form[action="/admin/bindings"] button[type=submit]')).backgroundColor`); bg != "rgb(15, 108, 189)" {
		t.Errorf("a submit button in the light theme is %s, want Fluent's brand #0f6cbd", bg)
	}
}

// Every page of the console can be worked with the keyboard alone: Tab
// reaches the skip link, the sections in order and then every control,
// each showing where the focus is; Enter follows a section link and
// presses a button.
func TestBrowserConsoleKeyboardWalk(t *testing.T) {
	e := newFullEnv(t)
	tb := e.tab(t)
	nav := []string{"A:/admin/overview", "A:/admin", "A:/admin/policies", "A:/admin/views", "A:/admin/runs", "A:/admin/conversations",
		"A:/admin/keys", "A:/admin/triggers", "A:/admin/connections", "A:/admin/audit"}
	for _, p := range consolePages {
		open(tb, e.base, p.path, p.h1)
		controls := `a[href], button, input:not([type=hidden]), select, textarea, [tabindex="0"]`
		// A group of radio buttons is one stop of Tab (the arrows move
		// within it), as in every browser.
		want := int(tb.Must("", `(() => { const all = [...document.querySelectorAll(`+js(controls)+`)];
  return all.filter(e => e.type !== "radio").length + new Set(all.filter(e => e.type === "radio").map(e => e.name)).size; })()`).(float64))
		tb.Must("", `document.activeElement && document.activeElement.blur(), 0`)
		var order []string
		seen := map[string]bool{}
		for i := 0; i < 8*want && len(seen) < want; i++ {
			press(t, tb, kb.Tab)
			// What has the focus, and whether it shows: an outline or
			// Fluent's focus ring (a box shadow) on it.
			at := tb.Str("", `(() => { const a = document.activeElement; if (!a || a === document.body) return "none";
  const s = getComputedStyle(a); const shown = (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== "none";
  return (shown ? "" : "INVISIBLE ") + a.tagName + ":" + (a.getAttribute("href") || a.id || a.getAttribute("aria-labelledby") || a.textContent.trim().slice(0, 40)); })()`)
			if strings.HasPrefix(at, "INVISIBLE ") {
				t.Errorf("%s: the focus does not show on %s", p.path, at)
			}
			if !seen[at] {
				seen[at] = true
				order = append(order, at)
			}
		}
		if len(order) < len(nav)+1 || order[0] != "A:#main" || strings.Join(order[1:len(nav)+1], " ") != strings.Join(nav, " ") {
			t.Errorf("%s: focus order starts %v, want the skip link then the sections %v", p.path, order, nav)
		}
		if len(seen) != want {
			t.Errorf("%s: Tab reached %d distinct controls of %d: %v", p.path, len(seen), want, order)
		}
	}

	// Enter on a section link opens it.
	open(tb, e.base, "/admin", "Access")
	tb.Must("", `document.querySelector('nav a[href="/admin/keys"]').focus(), 0`)
	press(t, tb, kb.Enter)
	tb.Wait("", `location.pathname === "/admin/keys" && document.querySelector("h1").textContent === "API keys"`, "the keys page after Enter")
	// Enter on a button presses it: the revoke asks, Escape cancels and
	// gives the focus back, Enter on the dialog's button revokes.
	tb.Must("", `document.querySelector('form[action$="/revoke"] button').focus(), 0`)
	press(t, tb, kb.Enter)
	dialogOpen := `document.querySelector("fluent-dialog").shadowRoot.querySelector("dialog").open`
	tb.Wait("", `!!document.querySelector("fluent-dialog") && `+dialogOpen, "the dialog after Enter")
	press(t, tb, kb.Escape)
	tb.Wait("", `!(`+dialogOpen+`) && document.activeElement.textContent === "Revoke key Nightly CI"`, "the dialog closed, the focus back on its button")
	press(t, tb, kb.Enter)
	tb.Wait("", dialogOpen, "the dialog again")
	tb.Must("", `document.getElementById("confirm-ok").focus(), 0`)
	press(t, tb, kb.Enter)
	tb.Wait("", `document.body.innerText.includes("The API key was revoked")`, "the revoke after Enter on the dialog's button")
}

// Each destructive action asks in a Fluent dialog, saying what will stop
// working; Cancel changes nothing, the dialog's button does it.
func TestBrowserConsoleConfirmsDestructiveActions(t *testing.T) {
	e := newFullEnv(t)
	tb := e.tab(t)
	h := e.client(adminA)
	state := func(path string) string { _, body := e.do(h, http.MethodGet, path, "", ""); return body }
	for _, c := range []struct {
		page, h1, form, says, done string
		gone                       func() bool
	}{
		{"/admin/keys", "API keys", `form[action="/admin/keys/` + e.key + `/revoke"]`, "will get 401 Unauthorized", "The API key was revoked",
			func() bool { return strings.Contains(state("/api/admin/keys"), `"revoked":true`) }},
		{"/admin/triggers", "Scheduled triggers", `form[action="/admin/triggers/` + e.trigger + `/delete"]`, "It will not run again", "The trigger was deleted",
			func() bool { return !strings.Contains(state("/api/admin/triggers"), e.trigger) }},
		{"/admin", "Access", `form[action="/admin/bindings/remove"]`, "will no longer ask the agent in Teams", "The binding was removed",
			func() bool { return !strings.Contains(state("/api/admin/bindings"), userA.OID) }},
		{"/admin/connections", "People's connections to MCP servers", `form[action="/admin/connections/revoke"]:has(input[name=user][value="` + bobID + `"])`,
			"The agent can no longer act as Bob on crm", "The connection of Bob",
			func() bool { return !strings.Contains(state("/api/admin/mcp-connections"), bobID) }},
		{"/admin/views", "Active views", `form[action="/admin/views/` + e.view + `/revoke"]`, "Nobody can open this view", "The view was revoked",
			func() bool { return !strings.Contains(state("/api/admin/views"), e.view) }},
	} {
		open(tb, e.base, c.page, c.h1)
		dialogOpen := `!!document.querySelector("fluent-dialog") && document.querySelector("fluent-dialog").shadowRoot.querySelector("dialog").open`
		tb.Must("", `document.querySelector(`+js(c.form+" button")+`).click(), 0`)
		tb.Wait("", dialogOpen, c.page+": the dialog")
		if got := tb.Str("", `document.getElementById("confirm-text").textContent`); !strings.Contains(got, c.says) {
			t.Errorf("%s: the dialog says %q, want %q in it", c.page, got, c.says)
		}
		tb.Must("", `document.getElementById("confirm-cancel").click(), 0`)
		tb.Wait("", `!(`+dialogOpen+`)`, c.page+": the dialog closed")
		if c.gone() {
			t.Fatalf("%s: Cancel did it anyway", c.page)
		}
		tb.Must("", `document.querySelector(`+js(c.form+" button")+`).click(), 0`)
		tb.Wait("", dialogOpen, c.page+": the dialog again")
		tb.Must("", `document.getElementById("confirm-ok").click(), 0`)
		tb.Wait("", `document.body.innerText.includes(`+js(c.done)+`)`, c.page+": the notice")
		if !c.gone() {
			t.Errorf("%s: confirmed, and not done", c.page)
		}
	}
}

// With JavaScript off the console still works: a form posts, and a
// destructive one gets a page that asks (which passes axe-core), whose
// button does it.
func TestBrowserConsoleWithoutJavaScript(t *testing.T) {
	e := newFullEnv(t)
	tb := e.tab(t)
	if _, err := chromedp.Call(tb.Ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	open(tb, e.base, "/admin/keys", "API keys")
	if tb.Must("", `!!customElements.get("fluent-dialog")`) != false {
		t.Fatal("the page's script ran with JavaScript off")
	}
	// A form posts as it is.
	tb.Must("", `document.getElementById("k-name").value = "Release bot", 0`)
	tb.Must("", `document.querySelector('form[action="/admin/keys"] button[type=submit]').focus(), 0`)
	press(t, tb, kb.Enter)
	tb.Wait("", `document.body.innerText.includes("The new key “Release bot”")`, "the new key")

	// A destructive one asks on a page of its own first.
	open(tb, e.base, "/admin/keys", "API keys")
	tb.Must("", `document.querySelector('form[action="/admin/keys/`+e.key+`/revoke"] button').focus(), 0`)
	press(t, tb, kb.Enter)
	tb.Wait("", `document.querySelector("h1").textContent === "Revoke the API key “Nightly CI”?"`, "the page that asks")
	if got := tb.Str("", `document.querySelector(".what").textContent`); !strings.Contains(got, "will get 401 Unauthorized") {
		t.Errorf("the page says %q", got)
	}
	if strings.Contains(e.state(t, "/api/admin/keys"), `"revoked":true`) {
		t.Fatal("the key was revoked before it was confirmed")
	}
	// axe-core is a script: it runs once scripts are on again, on the page
	// as it was loaded without them.
	if _, err := chromedp.Call(tb.Ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: false}); err != nil {
		t.Fatal(err)
	}
	for _, w := range testenv.WindowSizes {
		for _, th := range testenv.Themes {
			tb.Emulate(w, th)
			what := "the page that asks, " + string(th) + ", " + w.Name
			tb.CheckAxe(what)
			tb.CheckNoSidewaysScroll(what)
		}
	}
	tb.Must("", `document.querySelector('form.confirm button[type=submit]').focus(), 0`)
	press(t, tb, kb.Enter)
	tb.Wait("", `document.body.innerText.includes("The API key was revoked")`, "the revoke")
	if !strings.Contains(e.state(t, "/api/admin/keys"), `"revoked":true`) {
		t.Error("confirmed on the page, and the key is not revoked")
	}
}

// state reads an admin API answer as tenant A's admin.
func (e *fullEnv) state(t *testing.T, path string) string {
	t.Helper()
	_, body := e.do(e.client(adminA), http.MethodGet, path, "", "")
	return body
}

// The server does no destructive change without confirm=yes, whatever
// sends the post: each answers the unconfirmed post with the page that
// asks (saying what will stop working, and posting the same fields with
// confirm=yes) and changes nothing; confirmed, it is done.
func TestDestructivePostsNeedConfirmation(t *testing.T) {
	e := newFullEnv(t)
	h := e.client(adminA)
	state := func(path string) string { _, body := e.do(h, http.MethodGet, path, "", ""); return body }
	for _, c := range []struct {
		name, path string
		form       url.Values
		says       string
		done       func() bool
	}{
		{"revoke a key", "/admin/keys/" + e.key + "/revoke", url.Values{}, "will get 401 Unauthorized",
			func() bool { return strings.Contains(state("/api/admin/keys"), `"revoked":true`) }},
		{"delete a trigger", "/admin/triggers/" + e.trigger + "/delete", url.Values{}, "It will not run again",
			func() bool { return !strings.Contains(state("/api/admin/triggers"), e.trigger) }},
		{"remove a binding", "/admin/bindings/remove", url.Values{"agent": {"default"}, "kind": {"user"}, "subject": {userA.OID}, "role": {"runner"}},
			"will no longer ask the agent in Teams", func() bool { return !strings.Contains(state("/api/admin/bindings"), userA.OID) }},
		{"revoke a connection", "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "user": {bobID}},
			"The agent can no longer act as Bob on crm", func() bool { return !strings.Contains(state("/api/admin/mcp-connections"), bobID) }},
		{"revoke every connection to a server", "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}},
			"as any of the 1 person", func() bool { return !strings.Contains(state("/api/admin/mcp-connections"), `"crm"`) }},
		{"revoke a view", "/admin/views/" + e.view + "/revoke", url.Values{}, "Nobody can open this view",
			func() bool { return !strings.Contains(state("/api/admin/views"), e.view) }},
	} {
		for _, unconfirmed := range []string{"", "no", "YES"} {
			f := url.Values{}
			for k, v := range c.form {
				f[k] = v
			}
			if unconfirmed != "" {
				f.Set("confirm", unconfirmed)
			}
			code, body := e.form(h, c.path, f)
			if code != http.StatusOK || !strings.Contains(body, c.says) || !strings.Contains(body, `<input type="hidden" name="confirm" value="yes">`) ||
				!strings.Contains(body, `action="`+c.path+`"`) {
				t.Errorf("%s, confirm=%q: %d, not the page that asks:\n%.600s", c.name, unconfirmed, code, body)
			}
			for k := range c.form {
				if !strings.Contains(body, `name="`+k+`" value="`+c.form.Get(k)+`"`) {
					t.Errorf("%s: the page that asks does not post %s again", c.name, k)
				}
			}
			if c.done() {
				t.Fatalf("%s, confirm=%q: done without the confirmation", c.name, unconfirmed)
			}
		}
		f := url.Values{"confirm": {"yes"}}
		for k, v := range c.form {
			f[k] = v
		}
		if code, body := e.form(h, c.path, f); code != http.StatusOK || !c.done() {
			t.Errorf("%s, confirmed: %d, done %v\n%.600s", c.name, code, c.done(), body)
		}
	}
}
