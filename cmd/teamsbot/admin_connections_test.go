package main

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/pgtest"
	"teamsbot/mcpauth"
	"teamsbot/signin"
	"teamsbot/store"
)

// The service gives the admin console the MCP authorization broker when a
// server is reached as each person: the Connections page lists a
// person's connection that the shared PostgreSQL database holds, and its
// Revoke all button ends it, audited with the admin as actor.
func TestConsoleConnectionsWired(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	cfgPath := filepath.Join(t.TempDir(), "agents.yaml")
	// Nothing listens on port 9: the server is reached only when a person
	// asks, and nobody does here.
	if err := os.WriteFile(cfgPath, []byte("agents:\n  - id: default\n    servers:\n      - name: demo\n        builtin: demo\n"+
		"      - name: crm\n        url: http://127.0.0.1:9/mcp\n        auth: person\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// On PostgreSQL the key files are made beforehand, as for replicas.
	data := t.TempDir()
	if _, err := runCmd(t, map[string]string{"TICKETIQ_DATA": data}, "keys"); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_DATABASE_URL": dbURL, "TICKETIQ_CONFIG": cfgPath})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", logs)
		}
	})
	st, err := store.OpenPostgres(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	megan, admin := signin.LocalPeople()[0], signin.LocalAdmin()
	if err := st.PutMCPConnection(ctx, store.MCPConnection{TenantID: signin.LocalTenant, UserID: megan.UserID, UserName: megan.Name,
		AgentID: "default", Server: "crm", Sealed: []byte("SEALED-TOKEN-OF-MEGAN"), KeyID: "k1"}); err != nil {
		t.Fatal(err)
	}
	c := newcomer()
	if l := visit(t, c, http.MethodPost, base+"/signin/local", url.Values{"person": {admin.UserID}, "return": {"/"}}); l.status != http.StatusOK {
		t.Fatalf("sign in as %s: %d", admin.Name, l.status)
	}

	code, body := get(t, c, base+"/admin/connections")
	if code != http.StatusOK || !strings.Contains(body, `aria-current="page">Connections`) || !strings.Contains(body, megan.Name) ||
		!strings.Contains(body, "<td>default</td><td>crm</td><td>1</td>") || strings.Contains(body, "SEALED-TOKEN") {
		t.Fatalf("connections page: %d\n%s", code, body)
	}
	if l := visit(t, c, http.MethodPost, base+"/admin/connections/revoke", url.Values{}); l.status != http.StatusBadRequest || !strings.Contains(l.body, "Nothing was selected to revoke") {
		t.Errorf("a revoke of nothing: %d", l.status)
	}
	// Unconfirmed, the console asks first and nothing is revoked.
	if l := visit(t, c, http.MethodPost, base+"/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}}); l.status != http.StatusOK ||
		strings.Contains(l.body, "was revoked") || !strings.Contains(l.body, `name="confirm" value="yes"`) {
		t.Errorf("an unconfirmed revoke of crm: %d\n%s", l.status, l.body)
	}
	if left, err := st.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: signin.LocalTenant}); err != nil || len(left) != 1 {
		t.Errorf("after an unconfirmed revoke: %d connections left (%v), want 1", len(left), err)
	}
	if l := visit(t, c, http.MethodPost, base+"/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "confirm": {"yes"}}); l.status != http.StatusOK ||
		!strings.Contains(l.body, "1 connection to crm was revoked") {
		t.Errorf("revoke all of crm: %d\n%s", l.status, l.body)
	}
	if left, err := st.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: signin.LocalTenant}); err != nil || len(left) != 0 {
		t.Errorf("after the revoke: %d connections left (%v)", len(left), err)
	}
	recs, err := st.Audit(ctx, store.AuditQuery{TenantID: signin.LocalTenant, Action: mcpauth.ActionRevoked})
	if err != nil || len(recs) != 1 || recs[0].Actor != admin.UserID || recs[0].Fields["person"] != megan.UserID {
		t.Errorf("audit: %+v %v", recs, err)
	}
}
