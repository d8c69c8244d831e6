package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/admin"
	"teamsbot/internal/netaddr"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// People of tenant A besides Alice, with connections of their own.
const (
	bobID   = "bbbbbbbb-0000-4000-8000-00000000000b"
	carolID = "cccccccc-0000-4000-8000-00000000000c"
	beaUser = "dddddddd-0000-4000-8000-00000000000d" // of tenant B
)

// sealedOf is the stand-in sealed token set of a connection: bytes this
// test can look for in every answer.
func sealedOf(user, server string) []byte { return []byte("SEALED-TOKEN-" + user + "-" + server) }

// newConnectionsEnv is the console with the MCP authorization broker on
// its store, and people's connections put straight into the store: in
// tenant A, Alice, Bob and Carol connected crm and Alice connected files
// too; in tenant B, one person connected crm.
func newConnectionsEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvOpts(t, func(o *admin.Options, base netaddr.Origin) {
		b, err := mcpauth.New(mcpauth.Options{Store: o.Store, DataDir: t.TempDir(), PublicBaseURL: base})
		if err != nil {
			t.Fatal(err)
		}
		o.Connections = b
	})
	used := time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC)
	for _, c := range []store.MCPConnection{
		{TenantID: tenantA, UserID: userA.OID, UserName: userA.Name, AgentID: "default", Server: "crm", Scopes: []string{"crm.read", "crm.write"}, LastUsedAt: used},
		{TenantID: tenantA, UserID: bobID, UserName: "Bob", AgentID: "default", Server: "crm"},
		{TenantID: tenantA, UserID: carolID, UserName: "Carol", AgentID: "default", Server: "crm", LastUsedAt: used.Add(-time.Hour)},
		{TenantID: tenantA, UserID: userA.OID, UserName: userA.Name, AgentID: "default", Server: "files"},
		{TenantID: tenantB, UserID: beaUser, UserName: "Dora", AgentID: "default", Server: "crm"},
	} {
		c.Sealed, c.KeyID = sealedOf(c.UserID, c.Server), "sealing-key-7"
		if err := e.store.PutMCPConnection(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// connected lists who of tenant is connected, as "user/server".
func (e *env) connected(tenant string) []string {
	e.t.Helper()
	list, err := e.store.MCPConnections(context.Background(), store.MCPConnectionFilter{TenantID: tenant})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, c := range list {
		out = append(out, c.UserID+"/"+c.Server)
	}
	slices.Sort(out)
	return out
}

// revokedAudit returns tenant's mcp.connection.revoked records.
func (e *env) revokedAudit(tenant string) []store.AuditRecord {
	e.t.Helper()
	recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenant, Action: mcpauth.ActionRevoked})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// noSecret fails when an answer shows a sealed token set: as it is, as
// JSON writes bytes, as a template prints them, or by its field.
func noSecret(t *testing.T, what, body string) {
	t.Helper()
	for _, u := range []string{userA.OID, bobID, carolID, beaUser} {
		for _, s := range []string{"crm", "files"} {
			raw := sealedOf(u, s)
			if strings.Contains(body, string(raw)) || strings.Contains(body, base64.StdEncoding.EncodeToString(raw)) || strings.Contains(body, fmt.Sprint(raw)) {
				t.Errorf("%s shows the sealed token set of %s on %s", what, u, s)
			}
		}
	}
	if strings.Contains(body, `"sealed"`) || strings.Contains(body, `"keyId"`) || strings.Contains(body, "sealing-key-7") {
		t.Errorf("%s names the sealed token set or its key: %s", what, body)
	}
}

// The page lists each server with how many people connected it and when
// it was last used, and each person's connection; no sealed token.
// Revoking one person's connection, then a whole server's, removes
// exactly those, says how many, and audits each with the admin as actor.
func TestConsoleConnectionsListAndRevoke(t *testing.T) {
	e := newConnectionsEnv(t)
	adm := e.client(adminA)
	code, body := e.do(adm, http.MethodGet, "/admin/connections", "", "")
	if code != http.StatusOK || !strings.Contains(body, `aria-current="page">Connections`) || !onlyFluentScript(body) {
		t.Fatalf("connections page: %d\n%s", code, body)
	}
	labelled(t, "connections", body)
	noSecret(t, "the page", body)
	for _, want := range []string{
		"<td>default</td><td>crm</td><td>3</td><td>30 Nov 2026 09:15 UTC</td>",
		"<td>default</td><td>files</td><td>1</td><td>never</td>",
		`<abbr class="id" title="` + userA.OID + `">Alice</abbr>`, `<abbr class="id" title="` + bobID + `">Bob</abbr>`, `<abbr class="id" title="` + carolID + `">Carol</abbr>`,
		"<code>crm.read</code> <code>crm.write</code>",
		"Revoke all of crm", "Revoke crm for Bob",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if strings.Contains(body, beaUser) || strings.Contains(body, "Dora") {
		t.Error("tenant A's page shows tenant B's connection")
	}

	// One person's connection to one server: asked first.
	code, body = e.form(adm, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "user": {userA.OID}})
	if code != http.StatusOK || !strings.Contains(body, "Revoke the connection of Alice to crm?") ||
		!strings.Contains(body, "The agent can no longer act as Alice on crm") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("an unconfirmed revoke of Alice's crm: %d\n%s", code, body)
	}
	if got := e.connected(tenantA); len(got) != 4 {
		t.Fatalf("an unconfirmed revoke changed the connections: %v", got)
	}
	code, body = e.form(adm, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "user": {userA.OID}, "confirm": {"yes"}})
	if code != http.StatusOK || !strings.Contains(body, html.EscapeString("The connection of Alice ("+userA.OID+") to crm was revoked")) {
		t.Fatalf("revoke Alice's crm: %d\n%s", code, body)
	}
	if !strings.Contains(body, "<td>default</td><td>crm</td><td>2</td>") {
		t.Error("after the revoke the page does not count 2 people on crm")
	}
	want := []string{bobID + "/crm", carolID + "/crm", userA.OID + "/files"}
	slices.Sort(want)
	if got := e.connected(tenantA); !slices.Equal(got, want) {
		t.Errorf("after revoking Alice's crm, tenant A has %v, want %v", got, want)
	}

	// Every connection to a server: asked first.
	code, body = e.form(adm, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}})
	if code != http.StatusOK || !strings.Contains(body, "Revoke every connection to crm?") || !strings.Contains(body, "any of the 2 people") {
		t.Fatalf("an unconfirmed revoke of all of crm: %d\n%s", code, body)
	}
	if got := e.connected(tenantA); len(got) != 3 {
		t.Fatalf("an unconfirmed revoke changed the connections: %v", got)
	}
	code, body = e.form(adm, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "confirm": {"yes"}})
	if code != http.StatusOK || !strings.Contains(body, "2 connections to crm were revoked") || strings.Contains(body, "Revoke all of crm") {
		t.Fatalf("revoke all of crm: %d\n%s", code, body)
	}
	if got := e.connected(tenantA); !slices.Equal(got, []string{userA.OID + "/files"}) {
		t.Errorf("after revoking crm, tenant A has %v, want Alice's files only", got)
	}
	if got := e.connected(tenantB); !slices.Equal(got, []string{beaUser + "/crm"}) {
		t.Errorf("tenant A's revoke reached tenant B: %v", got)
	}

	recs := e.revokedAudit(tenantA)
	var people []string
	for _, r := range recs {
		if r.Actor != adminA.OID || r.Fields["server"] != "crm" || r.Fields["agent"] != "default" || r.Fields["why"] != "revoked by a tenant admin" {
			t.Errorf("audit record %+v: want the admin as actor, crm of default, and why", r)
		}
		people = append(people, r.Fields["person"].(string))
		noSecret(t, "an audit record", mustJSON(t, r))
	}
	slices.Sort(people)
	want = []string{userA.OID, bobID, carolID}
	slices.Sort(want)
	if !slices.Equal(people, want) {
		t.Errorf("revoked audited for %v, want one record each for %v", people, want)
	}
	if n := len(e.revokedAudit(tenantB)); n != 0 {
		t.Errorf("%d records of revokes in tenant B", n)
	}

	// Refusals, in words, changing nothing.
	for _, tc := range []struct {
		name   string
		form   url.Values
		status int
		says   string
	}{
		{"a server nobody connected", url.Values{"agent": {"default"}, "server": {"crm"}}, http.StatusNotFound,
			"Nobody has connected crm; nothing was revoked."},
		{"a person not connected", url.Values{"agent": {"default"}, "server": {"crm"}, "user": {bobID}}, http.StatusNotFound,
			bobID + " has no connection to crm; nothing was revoked."},
		{"nothing selected", url.Values{}, http.StatusBadRequest,
			"Nothing was selected to revoke: use the Revoke all button of a server, or the Revoke button of a person's connection."},
		{"no agent", url.Values{"server": {"files"}}, http.StatusBadRequest, "Nothing was selected to revoke"},
		{"a server name too long", url.Values{"agent": {"default"}, "server": {strings.Repeat("s", 600)}}, http.StatusBadRequest, "That was refused: the MCP server"},
	} {
		code, body := e.form(adm, "/admin/connections/revoke", tc.form)
		if code != tc.status || !strings.Contains(body, `<p class="problem" role="alert">`+html.EscapeString(tc.says)) {
			t.Errorf("%s: %d, want %d saying %q:\n%s", tc.name, code, tc.status, tc.says, body[max(0, strings.Index(body, "<main")):])
		}
		if strings.Contains(body, "store:") || strings.Contains(body, "mcpauth:") || strings.Contains(body, "admin:") {
			t.Errorf("%s: the page shows a package prefix", tc.name)
		}
	}
	if got := e.connected(tenantA); !slices.Equal(got, []string{userA.OID + "/files"}) {
		t.Errorf("a refused revoke changed the connections: %v", got)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Another tenant's admin sees none of tenant A's connections and revokes
// none of them; a person who is not an admin is refused; a cross-origin
// post or delete is refused; nothing changes.
func TestConsoleConnectionsOthersRefused(t *testing.T) {
	e := newConnectionsEnv(t)
	before := e.connected(tenantA)

	other := e.client(adminB)
	code, body := e.do(other, http.MethodGet, "/admin/connections", "", "")
	if code != http.StatusOK || !strings.Contains(body, `<abbr class="id" title="`+beaUser+`">Dora</abbr>`) || strings.Contains(body, userA.OID) || strings.Contains(body, "Alice") ||
		strings.Contains(body, "files") || !strings.Contains(body, "<td>default</td><td>crm</td><td>1</td>") {
		t.Errorf("tenant B's page: %d\n%s", code, body)
	}
	if code, body = e.form(other, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"files"}}); code != http.StatusNotFound ||
		!strings.Contains(body, "Nobody has connected files; nothing was revoked.") {
		t.Errorf("tenant B revoking files (tenant A's only): %d", code)
	}
	if code, body = e.form(other, "/admin/connections/revoke", url.Values{"agent": {"default"}, "server": {"crm"}, "user": {userA.OID}}); code != http.StatusNotFound {
		t.Errorf("tenant B revoking Alice's crm: %d\n%s", code, body)
	}
	_, body = e.do(other, http.MethodGet, "/api/admin/mcp-connections", "", "")
	if strings.Contains(body, userA.OID) || strings.Contains(body, bobID) || !strings.Contains(body, beaUser) {
		t.Errorf("tenant B's API list: %s", body)
	}
	if code, body = e.do(other, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=files", "", ""); code != http.StatusOK || body != `{"revoked":0}`+"\n" {
		t.Errorf("tenant B's API revoke of files: %d %s", code, body)
	}
	// Tenant B's revoke of its own crm ends its own connection only.
	if code, body = e.do(other, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", "", ""); code != http.StatusOK || body != `{"revoked":1}`+"\n" {
		t.Errorf("tenant B's API revoke of its crm: %d %s", code, body)
	}
	if got := e.connected(tenantB); len(got) != 0 {
		t.Errorf("tenant B still has %v", got)
	}

	user := e.client(userA)
	for _, r := range []struct{ method, path, ctype, body string }{
		{http.MethodGet, "/admin/connections", "", ""},
		{http.MethodPost, "/admin/connections/revoke", "application/x-www-form-urlencoded", "agent=default&server=crm"},
		{http.MethodGet, "/api/admin/mcp-connections", "", ""},
		{http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", "", ""},
	} {
		if code, body := e.do(user, r.method, r.path, r.ctype, r.body); code != http.StatusForbidden || !strings.Contains(body, "agents.admin") || strings.Contains(body, bobID) {
			t.Errorf("a non-admin's %s %s: %d %s", r.method, r.path, code, body)
		}
	}

	adm := e.client(adminA)
	for _, r := range []struct{ method, path, body string }{
		{http.MethodPost, "/admin/connections/revoke", "agent=default&server=crm"},
		{http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", ""},
	} {
		req, _ := http.NewRequest(r.method, e.base+r.path, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := adm.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site %s %s: %d", r.method, r.path, resp.StatusCode)
		}
	}

	if got := e.connected(tenantA); !slices.Equal(got, before) {
		t.Errorf("tenant A's connections changed: %v, were %v", got, before)
	}
	if n := len(e.revokedAudit(tenantA)); n != 0 {
		t.Errorf("%d revokes audited in tenant A", n)
	}
}

// The admin API lists and revokes as the page does.
func TestAPIConnections(t *testing.T) {
	e := newConnectionsEnv(t)
	adm := e.client(adminA)
	code, body := e.do(adm, http.MethodGet, "/api/admin/mcp-connections", "", "")
	noSecret(t, "the API list", body)
	var list struct {
		Servers []struct {
			Agent, Server string
			People        int
			LastUsedAt    *time.Time
		}
		Connections []struct {
			UserID, UserName, Agent, Server string
			ConnectedAt                     time.Time
			LastUsedAt                      *time.Time
			Scopes                          []string
		}
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil || code != http.StatusOK {
		t.Fatalf("API list: %d %s", code, body)
	}
	if len(list.Servers) != 2 || list.Servers[0].Server != "crm" || list.Servers[0].People != 3 || list.Servers[0].Agent != "default" ||
		list.Servers[0].LastUsedAt == nil || !list.Servers[0].LastUsedAt.Equal(time.Date(2026, 11, 30, 9, 15, 0, 0, time.UTC)) ||
		list.Servers[1].Server != "files" || list.Servers[1].People != 1 || list.Servers[1].LastUsedAt != nil {
		t.Errorf("API servers: %s", body)
	}
	if len(list.Connections) != 4 {
		t.Fatalf("API connections: %s", body)
	}
	for _, c := range list.Connections {
		if c.Agent != "default" || c.ConnectedAt.IsZero() || c.Scopes == nil {
			t.Errorf("API connection %+v", c)
		}
		if c.UserID == userA.OID && c.Server == "crm" && (c.UserName != "Alice" || strings.Join(c.Scopes, " ") != "crm.read crm.write") {
			t.Errorf("Alice's crm: %+v", c)
		}
	}

	var refused struct{ Error string }
	code, body = e.do(adm, http.MethodDelete, "/api/admin/mcp-connections?agent=default", "", "")
	if json.Unmarshal([]byte(body), &refused) != nil || code != http.StatusBadRequest ||
		refused.Error != "agent and server are required: name the agent and the MCP server whose connections to revoke (and user for one person's only)." {
		t.Errorf("API revoke without a server: %d %s", code, body)
	}
	if code, body = e.do(adm, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server="+strings.Repeat("s", 600), "", ""); code != http.StatusBadRequest ||
		!strings.Contains(body, "That was refused: the MCP server") || strings.Contains(body, "store:") {
		t.Errorf("API revoke of a long name: %d %s", code, body)
	}
	if code, body = e.do(adm, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm&user="+bobID, "", ""); code != http.StatusOK || body != `{"revoked":1}`+"\n" {
		t.Errorf("API revoke of Bob's crm: %d %s", code, body)
	}
	if code, body = e.do(adm, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", "", ""); code != http.StatusOK || body != `{"revoked":2}`+"\n" {
		t.Errorf("API revoke of crm: %d %s", code, body)
	}
	if code, body = e.do(adm, http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", "", ""); code != http.StatusOK || body != `{"revoked":0}`+"\n" {
		t.Errorf("API revoke of crm again: %d %s", code, body)
	}
	if got := e.connected(tenantA); !slices.Equal(got, []string{userA.OID + "/files"}) {
		t.Errorf("after the API's revokes tenant A has %v", got)
	}
	recs := e.revokedAudit(tenantA)
	if len(recs) != 3 {
		t.Fatalf("%d revokes audited, want 3", len(recs))
	}
	for _, r := range recs {
		if r.Actor != adminA.OID || r.Fields["why"] != "revoked by a tenant admin" {
			t.Errorf("audit record %+v", r)
		}
	}
}

// A console without the broker has no Connections page: its link is not
// in the navigation, and its routes say why in words.
func TestConsoleWithoutConnections(t *testing.T) {
	e := newEnv(t)
	adm := e.client(adminA)
	if _, body := e.do(adm, http.MethodGet, "/admin", "", ""); strings.Contains(body, "/admin/connections") {
		t.Error("the navigation links to a Connections page that is not there")
	}
	for _, r := range []struct{ method, path, ctype, body string }{
		{http.MethodGet, "/admin/connections", "", ""},
		{http.MethodPost, "/admin/connections/revoke", "application/x-www-form-urlencoded", "agent=default&server=crm"},
		{http.MethodGet, "/api/admin/mcp-connections", "", ""},
		{http.MethodDelete, "/api/admin/mcp-connections?agent=default&server=crm", "", ""},
	} {
		if code, body := e.do(adm, r.method, r.path, r.ctype, r.body); code != http.StatusNotFound || !strings.Contains(body, "acts as each person") {
			t.Errorf("%s %s without the broker: %d %s", r.method, r.path, code, body)
		}
	}
}
