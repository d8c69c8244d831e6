package agent_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/store"
)

// The audit records of tool calls, field by field, as docs/operations.md documents
// them and the admin console reads them: the model's (agent.tool.call)
// allowed, refused by a policy and refused before the governed path, and
// a view's (agent.mcp_app.call) allowed, refused by the page, refused as
// no app tool, and made by a caller of another tenant. Ids that change
// from run to run are written as RUN, REF and VIEW.
func TestCallAuditRecordFields(t *testing.T) {
	var g govServer
	st := openStore(t)
	ax, err := access.New(access.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
	ctx := context.Background()
	if _, err := ax.SetPolicies(ctx, admin, access.DefaultPolicyText+`
@id("nobody-fails")
forbid (principal, action, resource) when { context.tool == "fails" };
`, 0); err != nil {
		t.Fatal(err)
	}
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Access: ax, Builtins: map[string]func() *mcp.Server{"gov": g.new}})

	var want []string
	check := func(action string, recs []store.AuditRecord, tenant, actor string, ids map[string]string) {
		t.Helper()
		if len(recs) == 0 {
			t.Fatalf("no %s record", action)
		}
		r := recs[len(recs)-1]
		if r.Action != action || r.TenantID != tenant || r.Actor != actor {
			t.Errorf("record %s in %s by %s, want %s in %s by %s", r.Action, r.TenantID, r.Actor, action, tenant, actor)
		}
		f := map[string]any{}
		for k, v := range r.Fields {
			if s, ok := v.(string); ok && ids[s] != "" {
				v = ids[s]
			}
			f[k] = v
		}
		b, _ := json.Marshal(f)
		if len(want) == 0 {
			t.Fatalf("no expectation left for %s", b)
		}
		if string(b) != want[0] {
			t.Errorf("%s fields\n%s\nwant\n%s", action, b, want[0])
		}
		want = want[1:]
	}

	want = []string{
		`{"agent":"default","caller":"model","decision":"deny","policies":["nobody-fails"],"ref":"REF","result":"refused","run":"RUN","server":"gov","tool":"fails","why":"agent: denied: Cedar policy: forbidden by nobody-fails"}`,
		`{"agent":"default","caller":"model","decision":"allow","policies":["default.agents-run"],"result":"ok","run":"RUN","server":"gov","tool":"secret","why":""}`,
		`{"agent":"default","caller":"model","result":"refused","run":"RUN","server":"","tool":"nosuch","why":"no tool \"nosuch\""}`,
		`{"agent":"default","caller":"user-alice","decision":"allow","policies":["default.agents-run"],"result":"ok","server":"gov","tool":"secret","view":"VIEW","why":""}`,
		`{"agent":"default","caller":"user-alice","result":"refused","server":"gov","tool":"secret","view":"VIEW","why":"the page refused it"}`,
		`{"agent":"default","caller":"user-alice","result":"refused","server":"gov","tool":"nosuch","view":"VIEW","why":"server gov has no tool \"nosuch\""}`,
		`{"agent":"default","caller":"user-eve","caller_tenant":"tenant-2","decision":"deny","policies":["platform.same-tenant"],"result":"refused","server":"gov","tool":"secret","view":"VIEW","why":"agent: denied: Cedar policy: forbidden by platform.same-tenant"}`,
	}
	ans := run(t, s, "/fails {}")
	check(agent.AuditToolCall, audit(t, st, agent.AuditToolCall), alice.TenantID, alice.UserID,
		map[string]string{ans.RunID: "RUN", refIn(ans.ToolErrors[0].Message): "REF"})
	ans = run(t, s, "/secret {}")
	check(agent.AuditToolCall, audit(t, st, agent.AuditToolCall), alice.TenantID, alice.UserID, map[string]string{ans.RunID: "RUN"})
	if len(ans.Views) != 1 {
		t.Fatalf("no view: %+v", ans)
	}
	v := ans.Views[0]
	ans = run(t, s, "/nosuch {}")
	check(agent.AuditToolCall, audit(t, st, agent.AuditToolCall), alice.TenantID, alice.UserID, map[string]string{ans.RunID: "RUN"})

	ids := map[string]string{v.ID: "VIEW"}
	if _, err := s.CallFromView(ctx, v, alice, "secret", nil); err != nil {
		t.Fatal(err)
	}
	check(agent.AuditAppCall, audit(t, st, agent.AuditAppCall), alice.TenantID, alice.UserID, ids)
	if err := s.RefuseViewCall(ctx, v, alice, "secret", "the page refused it"); err != nil {
		t.Fatal(err)
	}
	check(agent.AuditAppCall, audit(t, st, agent.AuditAppCall), alice.TenantID, alice.UserID, ids)
	if _, err := s.CallFromView(ctx, v, alice, "nosuch", nil); err == nil {
		t.Fatal("a call of no tool went through")
	}
	check(agent.AuditAppCall, audit(t, st, agent.AuditAppCall), alice.TenantID, alice.UserID, ids)
	eve := agent.Person{TenantID: "tenant-2", UserID: "user-eve"}
	if _, err := s.CallFromView(ctx, v, eve, "secret", nil); err == nil {
		t.Fatal("another tenant's call went through")
	}
	recs, err := st.Audit(ctx, store.AuditQuery{TenantID: eve.TenantID, Action: agent.AuditAppCall})
	if err != nil {
		t.Fatal(err)
	}
	check(agent.AuditAppCall, recs, eve.TenantID, eve.UserID, ids)
}
