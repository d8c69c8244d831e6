package admin_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"teamsbot/access"
	"teamsbot/access/graph"
	"teamsbot/access/graph/fakegraph"
	"teamsbot/admin"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/store"
)

// People are shown by the names Graph gives (the id on hover), the
// audit log's details panel holds the whole record with the ids, its
// time presets filter, and the overview's figures are the store's.
func TestConsoleNamesAuditAndOverview(t *testing.T) {
	fake := fakegraph.New(t)
	fake.AddApp("app-id", "app-secret")
	fake.AddPerson(tenantA, userA.OID, "Alice Graph")
	gc, err := graph.New(graph.Options{BaseURL: fake.BaseURL(), TokenURL: fake.TokenURL(), ClientID: "app-id",
		Credential: clientcred.Secret("app-secret"), HTTPClient: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOpts(t, func(o *admin.Options, _ netaddr.Origin) { o.People = gc })
	ctx := context.Background()
	now := time.Now()
	if err := e.store.SaveRun(ctx, store.Run{ID: "run-named", TenantID: tenantA, UserID: userA.OID, UserName: "Alice", CreatedAt: now},
		nil, []store.AuditRecord{{TenantID: tenantA, Action: "agent.tool.call", Actor: userA.OID,
			Fields: map[string]any{"server": "demo", "tool": "sales_report", "result": "refused", "decision": "deny", "why": "forbidden by policy", "agent": "default"}}}); err != nil {
		t.Fatal(err)
	}
	old := now.Add(-3 * time.Hour)
	if err := e.store.Append(ctx, store.AuditRecord{Time: old, TenantID: tenantA, Action: "agent.mcp_app.open", Actor: userA.OID,
		Fields: map[string]any{"server": "demo", "tool": "sales_report", "view": "view-old"}}); err != nil {
		t.Fatal(err)
	}
	admin := e.client(adminA)
	named := `<abbr class="id" title="` + userA.OID + `">Alice Graph</abbr>`

	code, body := e.do(admin, http.MethodGet, "/admin/runs", "", "")
	if code != http.StatusOK || !strings.Contains(body, named) {
		t.Errorf("runs page: %d, without %s:\n%s", code, named, body)
	}
	// A binding names the person bound and who bound them.
	adm := access.Person{TenantID: tenantA, UserID: adminA.OID, Name: adminA.Name, Roles: adminA.Roles}
	if err := e.access.AddBinding(ctx, adm, store.Binding{TenantID: tenantA, AgentID: "default", Kind: store.KindUser, Subject: userA.OID, Role: "runner"}); err != nil {
		t.Fatal(err)
	}
	code, body = e.do(admin, http.MethodGet, "/admin", "", "")
	if code != http.StatusOK || !strings.Contains(body, named) || !strings.Contains(body, `title="`+adminA.OID+`">`+adminA.Name+`</abbr>`) {
		t.Errorf("access page: %d, without the bound person's and the binder's names:\n%s", code, body)
	}
	code, body = e.do(admin, http.MethodGet, "/admin/audit", "", "")
	if code != http.StatusOK || !strings.Contains(body, named) ||
		!strings.Contains(body, "<summary>The model&#39;s call of sales_report of demo was refused: forbidden by policy.</summary>") ||
		!strings.Contains(html.UnescapeString(body), `"actor": "`+userA.OID+`"`) || !strings.Contains(body, "view-old") {
		t.Errorf("audit page: %d\n%s", code, body)
	}
	// The last hour leaves out the view opened three hours ago, and the
	// export of that page holds what it shows.
	code, body = e.do(admin, http.MethodGet, "/admin/audit?range=1h", "", "")
	if code != http.StatusOK || strings.Contains(body, "view-old") || !strings.Contains(body, "sales_report") {
		t.Errorf("audit page of the last hour: %d\n%s", code, body)
	}
	if !strings.Contains(body, `<option value="1h" selected>`) || !strings.Contains(body, "export.jsonl?from=2") {
		t.Errorf("the last hour is not kept in the form and the export links:\n%s", body)
	}
	// Alice, on every page, and the admin who bound her, on the access
	// page: each asked once, then cached.
	if n := fake.Counts().GetUser; n != 2 {
		t.Errorf("Graph was asked %d times for two people's names, want once each (cached)", n)
	}

	code, body = e.do(admin, http.MethodGet, "/admin/overview?days=7", "", "")
	if code != http.StatusOK {
		t.Fatalf("overview: %d %s", code, body)
	}
	day := time.Now().UTC().Truncate(24 * time.Hour)
	o, err := e.store.Overview(ctx, tenantA, day.AddDate(0, 0, -6), day.AddDate(0, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range o.Days {
		want := fmt.Sprintf(`<tr><th scope="row">%s</th><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>`, d.Day.Format("2006-01-02"), d.Runs, d.ViewsMade, d.ViewsOpened, d.People)
		if !strings.Contains(body, want) {
			t.Errorf("the overview does not show the store's figures of %s: %s", d.Day.Format("2006-01-02"), want)
		}
		calls := fmt.Sprintf(`<tr><th scope="row">%s</th><td>%d</td><td>%d</td><td>%d</td></tr>`, d.Day.Format("2006-01-02"), d.CallsOK, d.CallsError, d.CallsRefused)
		if !strings.Contains(body, calls) {
			t.Errorf("the overview does not show the store's calls of %s: %s", d.Day.Format("2006-01-02"), calls)
		}
	}
	if o.Totals.Runs != 1 || o.Totals.CallsRefused != 1 || o.Totals.ViewsOpened != 1 ||
		!strings.Contains(body, `<tr><th scope="row">Tool call forbidden by a Cedar policy</th><td>1</td></tr>`) ||
		!strings.Contains(body, `<tr><th scope="row">sales_report</th><td>demo</td><td>1</td></tr>`) {
		t.Errorf("the overview: %+v\n%s", o.Totals, body)
	}
	if code, _ := e.do(admin, http.MethodGet, "/admin/overview?days=12", "", ""); code != http.StatusBadRequest {
		t.Errorf("a period of 12 days: %d, want 400", code)
	}
}
