package viewpage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"teamsbot/agent/demo"
	"teamsbot/internal/netaddr"
	"teamsbot/mcpapps"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// A view document is served under the service's directives and then the
// policy stored with the view, read back by the CSP builder: a stored
// directive that repeats the service's is dropped (a browser would ignore
// it anyway), and a stored text that is not a valid policy (a stray
// directive after a comma, a line break, a keyword without its quotes) is
// not passed on at all: the view gets default-src 'none', its
// Connection-Allowlist names nothing, and the log says so.
func TestViewDocumentStoredPolicy(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	now := e.clock.Now()
	declared := mcpapps.BuildCSP(mcpapps.CSPDomains{ConnectDomains: []string{"https://api.example.com"}}).Header
	for i, c := range []struct {
		name, stored, want, allowlist string
		logged                        bool
	}{
		{"as stored", declared,
			"sandbox allow-scripts; webrtc 'block'; " + declared, `(response-origin "https://api.example.com")`, false},
		{"a repeated sandbox directive", "sandbox allow-scripts allow-same-origin; " + mcpapps.DefaultCSP,
			"sandbox allow-scripts; webrtc 'block'; " + mcpapps.DefaultCSP, "(response-origin)", false},
		{"nothing stored", "  ", "sandbox allow-scripts; webrtc 'block'; default-src 'none'", "(response-origin)", false},
		{"a comma", "default-src 'none'; connect-src https://a.example,script-src *",
			"sandbox allow-scripts; webrtc 'block'; default-src 'none'", "(response-origin)", true},
		{"a line break", "default-src 'none'; connect-src https://a.example\r\nX-Injected: 1",
			"sandbox allow-scripts; webrtc 'block'; default-src 'none'", "(response-origin)", true},
		{"an unquoted keyword", "default-src 'none'; script-src self https://a.example",
			"sandbox allow-scripts; webrtc 'block'; default-src 'none'", "(response-origin)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := store.View{
				ID: "stored-policy-" + string(rune('a'+i)), AgentID: "default", TenantID: tenantA, UserID: alice().OID,
				Server: "demo", Tool: demo.ToolSalesReport, ResourceURI: demo.SalesReportURI, CSP: c.stored,
				Arguments: json.RawMessage(`{}`), Result: json.RawMessage(`{"content":[]}`),
				CreatedAt: now, ExpiresAt: now.Add(store.ViewLifetime),
			}
			err := e.store.SaveRun(ctx, store.Run{ID: "run-" + v.ID, AgentID: "default", TenantID: tenantA, UserID: alice().OID, CreatedAt: now},
				[]store.NewView{{View: v, HTML: []byte("<!doctype html><p>view</p>")}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			r := do(t, e.client(nil), http.MethodGet, e.viewInfo(e.client(alice()), v.ID).ViewURL, nil, "")
			if r.status != http.StatusOK {
				t.Fatalf("view document: %d %s", r.status, r.body)
			}
			if got := r.header.Get("Content-Security-Policy"); got != c.want {
				t.Errorf("CSP\n%s\nwant\n%s", got, c.want)
			}
			if got := r.header.Get("Connection-Allowlist"); got != c.allowlist {
				t.Errorf("Connection-Allowlist %q, want %q", got, c.allowlist)
			}
			if logged := strings.Contains(e.logText(), "view="+v.ID) && strings.Contains(e.logText(), "not a valid policy"); logged != c.logged {
				t.Errorf("logged = %v, want %v:\n%s", logged, c.logged, e.logText())
			}
		})
	}
}

// A Teams host that the page's own pattern lets through but that is no
// CSP source expression (an empty label) is refused when the handler is
// built, rather than written into frame-ancestors, where a browser would
// ignore it and Teams could not frame the page.
func TestTeamsHostsAreSourceExpressions(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, host := range []string{"https://teams..example.com", "https://.teams.example.com"} {
		_, err := viewpage.New(viewpage.Options{
			Store: e.store, Agent: e.agent, SignIn: e.signin, Access: e.access, DataDir: t.TempDir(),
			PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"),
			Teams:         &viewpage.TeamsOptions{FrameAncestors: []string{host}},
		})
		if err == nil || !strings.Contains(err.Error(), host) {
			t.Errorf("Teams host %q: %v, want it refused by name", host, err)
		}
	}
}
