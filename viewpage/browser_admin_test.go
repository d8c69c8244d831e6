package viewpage_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"teamsbot/store"
)

// A tenant admin, in Chromium, signed in through mockoidc with Entra ID
// claims, works the console as the product describes it: adds a group
// binding (the group's name looked up through Graph), saves a Cedar policy
// that forbids one tool, sees the tester say so; a view's call to that
// tool is then refused, and the refusal is in the audit page and in both
// exports. A non-admin gets 403; an admin of another tenant sees none of
// it; a revoked view answers 410 on every route; every page can be walked
// with the keyboard alone.
func TestBrowserAdminConsole(t *testing.T) {
	e := newEnv(t, envOptions{admin: true})
	const support = "9e000000-0000-4000-8000-000000000002"
	e.graph.AddGroup(tenantA, support, "Support team")
	e.graph.AddUser(tenantA, alice().OID)
	e.graph.AddMember(tenantA, support, alice().OID)
	v := e.run(alice(), "/sales_report {}")

	admin := &person{TID: tenantA, OID: "adadadad-0000-0000-0000-0000000000ad", Name: "Ada Admin", Roles: []string{"agents.admin"}}
	tb := newTab(t)
	e.oidc.QueueUser(admin)
	tb.navigate(e.base + "/admin")
	tb.wait(mainFrame, `document.querySelector("h1") && document.querySelector("h1").textContent === "Access"`, "the console")
	keyboardWalk(t, tb, "/admin")

	// A group binding, typed and submitted with the keyboard.
	fill(t, tb, map[string]string{"#b-kind": "group", "#b-subject": support, "#b-role": "reader"})
	submit(t, tb, `form[action="/admin/bindings"]`)
	tb.wait(mainFrame, `document.body.innerText.includes("The binding was added")`, "the binding notice")
	// By its name, the id on hover.
	if got := tb.str(mainFrame, `(document.querySelector('tbody abbr[title="`+support+`"]') || {}).textContent || document.querySelector("tbody").innerText`); got != "Support team" {
		t.Errorf("bindings table does not name the group, its id on hover: %q", got)
	}

	// A policy that forbids refresh_sales from views.
	tb.navigate(e.base + "/admin/policies")
	tb.wait(mainFrame, `document.querySelector("#p-text") !== null`, "the policies page")
	keyboardWalk(t, tb, "/admin/policies")
	policy := `@id("default.agents-run")
permit (principal in Role::"agents.run", action == Action::"invoke", resource);
@id("no-refresh-from-views")
forbid (principal, action == Action::"invoke", resource) when { context.caller == "view" && context.tool == "refresh_sales" };`
	fill(t, tb, map[string]string{"#p-text": policy})
	submit(t, tb, `form[action="/admin/policies"]`)
	tb.wait(mainFrame, `document.body.innerText.includes("checked and saved")`, "the saved policies")
	fill(t, tb, map[string]string{"#t-user": alice().OID, "#t-server": "demo", "#t-tool": "refresh_sales", "#t-caller": "view"})
	submit(t, tb, `form[action="/admin/policies/test"]`)
	tb.wait(mainFrame, `document.querySelector("#decision") !== null`, "the tester's answer")
	if got := tb.str(mainFrame, `document.querySelector("#decision").innerText`); got != "Denied by no-refresh-from-views" {
		t.Errorf("tester says %q", got)
	}

	// The view's call is refused, and audited.
	r := do(t, e.client(alice()), http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/call",
		map[string]string{"Content-Type": "application/json"}, `{"name":"refresh_sales","arguments":{}}`)
	if r.status != http.StatusForbidden {
		t.Fatalf("the view's call after the policy: %d %s", r.status, r.body)
	}
	tb.navigate(e.base + "/admin/audit?result=refused&tool=refresh_sales")
	tb.wait(mainFrame, `document.querySelector("caption") !== null`, "the audit page")
	keyboardWalk(t, tb, "/admin/audit")
	if got := tb.str(mainFrame, `document.querySelector("tbody").innerText`); !strings.Contains(got, "agent.mcp_app.call") || !strings.Contains(got, "no-refresh-from-views") {
		t.Errorf("the audit page lacks the refusal: %q", got)
	}
	adminHTTP := e.client(admin)
	jsonl := do(t, adminHTTP, http.MethodGet, e.base+"/admin/audit/export.jsonl?result=refused&tool=refresh_sales", nil, "")
	if jsonl.status != http.StatusOK || !strings.Contains(jsonl.body, "no-refresh-from-views") {
		t.Errorf("JSON Lines export: %d %s", jsonl.status, jsonl.body)
	}
	csvOut := do(t, adminHTTP, http.MethodGet, e.base+"/admin/audit/export.csv?result=refused&tool=refresh_sales", nil, "")
	rows, err := csv.NewReader(strings.NewReader(csvOut.body)).ReadAll()
	if err != nil || len(rows) < 2 || !strings.Contains(csvOut.body, "no-refresh-from-views") {
		t.Errorf("CSV export: %d rows, %v: %s", len(rows), err, csvOut.body)
	}

	// Others see none of it.
	if r := do(t, e.client(alice()), http.MethodGet, e.base+"/admin", nil, ""); r.status != http.StatusForbidden {
		t.Errorf("a non-admin: %d", r.status)
	}
	otherAdmin := &person{TID: tenantB, OID: "bdbdbdbd-0000-0000-0000-0000000000bd", Name: "Bo Admin", Roles: []string{"agents.admin"}}
	for _, path := range []string{"/admin", "/admin/policies", "/admin/views", "/admin/audit", "/admin/audit/export.jsonl"} {
		r := do(t, e.client(otherAdmin), http.MethodGet, e.base+path, nil, "")
		for _, leak := range []string{support, "no-refresh-from-views", v.ID, alice().OID} {
			if strings.Contains(r.body, leak) {
				t.Errorf("tenant B's admin sees %q on %s", leak, path)
			}
		}
	}

	for _, path := range []string{"/admin/runs", "/admin/conversations", "/admin/keys", "/admin/triggers"} {
		tb.navigate(e.base + path)
		tb.wait(mainFrame, `document.querySelector("caption") !== null`, path)
		keyboardWalk(t, tb, path)
	}

	// Revoking the view: 410 on every route at once, the frames whose
	// tokens were minted before included.
	owner := e.client(alice())
	info := e.viewInfo(owner, v.ID)
	tb.navigate(e.base + "/admin/views")
	tb.wait(mainFrame, `document.querySelector("caption") !== null`, "the views page")
	keyboardWalk(t, tb, "/admin/views")
	// Asked first, in the console's dialog; its button, by the keyboard.
	submit(t, tb, fmt.Sprintf(`form[action="/admin/views/%s/revoke"]`, v.ID))
	tb.wait(mainFrame, `!!document.querySelector("fluent-dialog") && document.querySelector("fluent-dialog").shadowRoot.querySelector("dialog").open`, "the confirmation")
	tb.must(mainFrame, `document.getElementById("confirm-ok").focus(), true`)
	if err := chromedp.Do(tb.ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	tb.wait(mainFrame, `document.body.innerText.includes("The view was revoked")`, "the revoke notice")
	frame := map[string]string{"Sec-Fetch-Dest": "iframe"}
	for _, u := range []string{info.ProxyURL, info.ViewURL} {
		if r := do(t, owner, http.MethodGet, u, frame, ""); r.status != http.StatusGone {
			t.Errorf("frame %s after revoking: %d", u, r.status)
		}
	}
	for _, route := range []struct{ method, path, body string }{
		{http.MethodGet, "/mcp-apps/" + v.ID, ""},
		{http.MethodGet, "/api/mcp-apps/" + v.ID, ""},
		{http.MethodPost, "/api/mcp-apps/" + v.ID + "/call", `{"name":"refresh_sales"}`},
	} {
		r := do(t, owner, route.method, e.base+route.path, map[string]string{"Content-Type": "application/json"}, route.body)
		if r.status != http.StatusGone {
			t.Errorf("%s %s after revoking: %d", route.method, route.path, r.status)
		}
	}
	recs, _ := e.store.Audit(t.Context(), store.AuditQuery{TenantID: tenantA, Action: "admin.view.revoke"})
	if len(recs) != 1 || recs[0].Actor != admin.OID {
		t.Errorf("revoke audit %+v", recs)
	}
}

// fill sets form fields by selector, as typing would.
func fill(t *testing.T, tb *tab, values map[string]string) {
	t.Helper()
	for sel, v := range values {
		tb.must(mainFrame, `(() => { const el = document.querySelector(`+js(sel)+`); el.value = `+js(v)+`; el.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
	}
}

// submit focuses the form's submit button and presses Enter: the keyboard
// alone sends the form.
func submit(t *testing.T, tb *tab, form string) {
	t.Helper()
	tb.must(mainFrame, `(() => { document.querySelector(`+js(form+` button[type="submit"]`)+`).focus(); return true; })()`)
	if err := chromedp.Do(tb.ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatalf("submit %s: %v", form, err)
	}
}

// keyboardWalk presses Tab through a page and checks what a keyboard user
// meets: the link that skips to the content, the section links, in
// order, then every control (a table's scrollable region included); each
// control is reached, has a label or a name a screen reader says, and
// shows where the focus is.
func keyboardWalk(t *testing.T, tb *tab, page string) {
	t.Helper()
	problems := tb.str(mainFrame, `(() => {
	  const out = [];
	  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
	    if (!el.labels || el.labels.length === 0) out.push("no label: " + (el.id || el.name));
	  }
	  for (const el of document.querySelectorAll("button, a[href]")) {
	    if (!el.textContent.trim()) out.push("no name: " + el.outerHTML.slice(0, 80));
	  }
	  return out.join("; ");
	})()`)
	if problems != "" {
		t.Errorf("%s: %s", page, problems)
	}
	want := int(tb.must(mainFrame, `document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea, [tabindex='0']").length`).(float64))
	tb.must(mainFrame, `(() => { if (document.activeElement) document.activeElement.blur(); return true; })()`)
	// A date and time field takes several presses of Tab (its parts);
	// the walk goes on until every control was reached, within a bound.
	var order []string
	seen := map[string]bool{}
	for i := 0; i < 8*want && len(seen) < want; i++ {
		if err := chromedp.Do(tb.ctx, chromedp.KeyEvent(kb.Tab)); err != nil {
			t.Fatal(err)
		}
		at := tb.str(mainFrame, `(() => { const a = document.activeElement; return a ? a.tagName + ":" + (a.getAttribute("href") || a.id || a.textContent.trim().slice(0, 30)) : "none"; })()`)
		if !seen[at] {
			seen[at] = true
			order = append(order, at)
		}
	}
	nav := []string{"A:#main", "A:/admin/overview", "A:/admin", "A:/admin/policies", "A:/admin/views", "A:/admin/runs", "A:/admin/conversations", "A:/admin/keys", "A:/admin/triggers", "A:/admin/audit"}
	if len(order) < len(nav) || strings.Join(order[:len(nav)], " ") != strings.Join(nav, " ") {
		t.Errorf("%s: focus order starts %v, want the skip link and the section links %v", page, order, nav)
	}
	if len(seen) != want {
		t.Errorf("%s: Tab reached %d distinct controls of %d: %v", page, len(seen), want, order)
	}
}
