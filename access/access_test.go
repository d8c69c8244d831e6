package access_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/access"
	"teamsbot/internal/testenv"
	"teamsbot/store"
)

const (
	tenantA = "11111111-1111-4111-8111-111111111111"
	tenantB = "22222222-2222-4222-8222-222222222222"
	alice   = "aaaaaaaa-0000-4000-8000-00000000000a"
	bob     = "bbbbbbbb-0000-4000-8000-00000000000b"
	admin   = "adadadad-0000-4000-8000-0000000000ad"
	agentID = "default"
)

type env struct {
	st    *store.Store
	svc   *access.Service
	clock *testenv.Clock
}

func newEnv(t testing.TB, groups access.Groups) *env {
	t.Helper()
	clk := testenv.NewClock(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := access.New(access.Options{Store: st, Groups: groups, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, svc: svc, clock: clk}
}

func person(tenant, user string, roles ...string) access.Person {
	return access.Person{TenantID: tenant, UserID: user, Roles: roles}
}

var tenantAdmin = person(tenantA, admin, access.PermAdmin)

// missing returns the permission a refusal names, "" for no refusal, and
// "not found" or the error text for other errors.
func missing(err error) string {
	var de *access.DeniedError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &de):
		if de.Missing == "" {
			return "denied"
		}
		return de.Missing
	case errors.Is(err, access.ErrNotFound):
		return "not found"
	default:
		return err.Error()
	}
}

// The ownership rule and the roles, every combination a view page meets.
func TestViewDecisions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	own := access.View{ID: "v1", TenantID: tenantA, UserID: alice, AgentID: agentID}
	noPerson := access.View{ID: "v2", TenantID: tenantA, AgentID: agentID}
	for _, tc := range []struct {
		name       string
		who        access.Person
		view       access.View
		read, call string
	}{
		{"owner under the default, no roles", person(tenantA, alice), own, "", ""},
		{"owner with agents.read only", person(tenantA, alice, access.PermRead), own, "", ""},
		{"another person of the tenant, every role", person(tenantA, bob, access.PermRead, access.PermRun, access.PermAdmin), own, "denied", "denied"},
		{"the owner's id in another tenant", person(tenantB, alice, access.PermRead, access.PermRun), own, "not found", "not found"},
		{"a run without a person, default only", person(tenantA, bob), noPerson, access.PermRead, access.PermRead},
		{"a run without a person, a reader by role", person(tenantA, bob, access.PermRead), noPerson, "", access.PermRun},
		{"a run without a person, reader and runner", person(tenantA, bob, access.PermRead, access.PermRun), noPerson, "", ""},
		{"a run without a person, an admin", person(tenantA, admin, access.PermAdmin), noPerson, access.PermRead, access.PermRead},
		{"another tenant's run without a person", person(tenantB, bob, access.PermRead, access.PermRun), noPerson, "not found", "not found"},
		{"no tenant", person("", alice, access.PermRead), own, "not found", "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := missing(e.svc.CanRead(ctx, tc.who, tc.view)); got != tc.read {
				t.Errorf("CanRead: %q, want %q", got, tc.read)
			}
			if got := missing(e.svc.CanCall(ctx, tc.who, tc.view)); got != tc.call {
				t.Errorf("CanCall: %q, want %q", got, tc.call)
			}
		})
	}
}

// The tenant default makes a fresh install usable; an admin can switch it
// off, and a binding still grants.
func TestTenantDefaultAndBindings(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.svc.CanRun(ctx, person(tenantA, bob), agentID); err != nil {
		t.Fatalf("fresh install: %v", err)
	}
	if err := e.svc.SetDefault(ctx, tenantAdmin, access.Default{Runner: false}); err != nil {
		t.Fatal(err)
	}
	err := e.svc.CanRun(ctx, person(tenantA, bob), agentID)
	var de *access.DeniedError
	if !errors.As(err, &de) || de.Missing != access.PermRun || !strings.Contains(de.Reason, "agents.run") || !strings.Contains(de.Reason, "administrator") {
		t.Fatalf("default off: %v, want a refusal naming agents.run and whom to ask", err)
	}
	if err := e.svc.CanRun(ctx, person(tenantA, bob, access.PermRun), agentID); err != nil {
		t.Errorf("an app role still grants: %v", err)
	}
	// The other tenant keeps its own default.
	if err := e.svc.CanRun(ctx, person(tenantB, bob), agentID); err != nil {
		t.Errorf("tenant B was changed by tenant A's admin: %v", err)
	}

	// A direct binding, for this agent only.
	if err := e.svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: agentID, Kind: store.KindUser, Subject: bob, Role: store.RoleRunner}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.CanRun(ctx, person(tenantA, bob), agentID); err != nil {
		t.Errorf("runner binding: %v", err)
	}
	if err := e.svc.CanRun(ctx, person(tenantA, bob), "other-agent"); missing(err) != access.PermRun {
		t.Errorf("a binding for one agent granted another: %v", err)
	}
	// A reader binding on every agent lets bob open views of runs without a person.
	noPerson := access.View{ID: "v", TenantID: tenantA, AgentID: "other-agent"}
	if err := e.svc.CanRead(ctx, person(tenantA, bob), noPerson); missing(err) != access.PermRead {
		t.Fatalf("before the binding: %v", err)
	}
	if err := e.svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: store.AllAgents, Kind: store.KindUser, Subject: bob, Role: store.RoleReader}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.CanRead(ctx, person(tenantA, bob), noPerson); err != nil {
		t.Errorf("reader binding on every agent: %v", err)
	}
	if err := e.svc.RemoveBinding(ctx, tenantAdmin, store.AllAgents, store.KindUser, bob, store.RoleReader); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.CanRead(ctx, person(tenantA, bob), noPerson); missing(err) != access.PermRead {
		t.Errorf("after removing the binding: %v", err)
	}
}

// A rule that names a group needs Graph; without it a decision that
// depends on the group fails closed, with a message that says so, while
// an admin by app role can still undo the rule.
func TestGroupRuleWithoutGraphFailsClosed(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	if err := e.svc.SetDefault(ctx, tenantAdmin, access.Default{Runner: true, Group: "9e000000-0000-4000-8000-000000000001"}); err != nil {
		t.Fatal(err)
	}
	err := e.svc.CanRun(ctx, person(tenantA, bob), agentID)
	if !errors.Is(err, access.ErrUnavailable) || !strings.Contains(err.Error(), "cannot be checked") {
		t.Fatalf("CanRun: %v, want ErrUnavailable", err)
	}
	if _, err := e.svc.Invoke(ctx, person(tenantA, bob, access.PermRun), access.Call{AgentID: agentID, AgentTenantID: tenantA, Server: "s", Tool: "t", Caller: access.CallerModel}); !errors.Is(err, access.ErrUnavailable) {
		t.Errorf("Invoke: %v, want ErrUnavailable (a Cedar decision needs every group)", err)
	}
	if err := e.svc.CanRun(ctx, person(tenantA, bob, access.PermRun), agentID); err != nil {
		t.Errorf("an app role needs no group: %v", err)
	}
	if err := e.svc.SetDefault(ctx, tenantAdmin, access.Default{Runner: true}); err != nil {
		t.Fatalf("the admin could not undo the group rule: %v", err)
	}
	if err := e.svc.CanRun(ctx, person(tenantA, bob), agentID); err != nil {
		t.Errorf("after undoing: %v", err)
	}
}

// Admin operations are for admins of their own tenant, and audited with
// who, what, before and after.
func TestAdminOperations(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	for _, who := range []access.Person{person(tenantA, bob, access.PermRead, access.PermRun), person(tenantA, bob)} {
		if err := e.svc.SetDefault(ctx, who, access.Default{}); missing(err) != access.PermAdmin {
			t.Errorf("non-admin %v set the default: %v", who.Roles, err)
		}
		if _, err := e.svc.SetPolicies(ctx, who, "", 0); missing(err) != access.PermAdmin {
			t.Errorf("non-admin %v saved policies: %v", who.Roles, err)
		}
		if err := e.svc.AddBinding(ctx, who, store.Binding{AgentID: agentID, Kind: store.KindUser, Subject: bob, Role: store.RoleAdmin}); missing(err) != access.PermAdmin {
			t.Errorf("non-admin %v made themselves admin: %v", who.Roles, err)
		}
	}
	// An admin binding makes an admin too, for their own tenant only.
	if err := e.svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: store.AllAgents, Kind: store.KindUser, Subject: bob, Role: store.RoleAdmin, DisplayName: "Bob"}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.SetDefault(ctx, person(tenantA, bob), access.Default{Runner: false}); err != nil {
		t.Errorf("bound admin: %v", err)
	}
	if err := e.svc.SetDefault(ctx, person(tenantB, bob), access.Default{Runner: false}); missing(err) != access.PermAdmin {
		t.Errorf("tenant A's binding made bob an admin of tenant B: %v", err)
	}

	recs, err := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Action)
		if _, ok := r.Fields["before"]; !ok {
			t.Errorf("%s has no before", r.Action)
		}
		if _, ok := r.Fields["after"]; !ok {
			t.Errorf("%s has no after", r.Action)
		}
	}
	if !slices.Equal(actions, []string{access.AuditBindingAdd, access.AuditDefaultSet}) {
		t.Errorf("audit actions %v", actions)
	}
	if recs[1].Actor != bob || recs[1].Fields["before"].(map[string]any)["runner"] != true || recs[1].Fields["after"].(map[string]any)["runner"] != false {
		t.Errorf("default change record %+v", recs[1])
	}
	if other, _ := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantB}); len(other) != 0 {
		t.Errorf("tenant B's log got %d records", len(other))
	}
}

// Cedar decides each tool call with the tenant's saved policies: a forbid
// beats the default permit, a forbid can name one tool and one caller, a
// text that does not parse is refused with its line and changes nothing.
func TestInvokeWithTenantPolicies(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	runner := person(tenantA, alice) // a runner by the default
	call := func(tool, caller string) access.Decision {
		t.Helper()
		c := access.Call{AgentID: agentID, AgentTenantID: tenantA, Server: "crm", Tool: tool, Caller: caller}
		if caller == access.CallerView {
			c.ViewID = "v1"
		}
		d, err := e.svc.Invoke(ctx, runner, c)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := call("delete_customer", access.CallerView); !d.Allowed || !slices.Equal(d.Policies, []string{"default.agents-run"}) {
		t.Fatalf("default policy: %+v", d)
	}
	text, version, err := e.svc.PolicyText(ctx, tenantA)
	if err != nil || version != 0 || text != access.DefaultPolicyText {
		t.Fatalf("PolicyText = %q, %d, %v", text, version, err)
	}

	bad := access.DefaultPolicyText + "\n\n@id(\"broken\")\nforbid (principal, action, resource) when { context.tool == };\n"
	_, err = e.svc.SetPolicies(ctx, tenantAdmin, bad, 0)
	var pe *access.PolicyError
	if !errors.As(err, &pe) || pe.Line != 5 {
		t.Fatalf("a text that does not parse: %v, want a PolicyError on line 5", err)
	}
	if _, v, _ := e.svc.PolicyText(ctx, tenantA); v != 0 {
		t.Fatalf("the refused text was saved (version %d)", v)
	}

	next := access.DefaultPolicyText + `
@id("no-deletes-from-views")
forbid (principal, action == Action::"invoke", resource)
when { context.caller == "view" && context.tool == "delete_customer" };
`
	v, err := e.svc.SetPolicies(ctx, tenantAdmin, next, 0)
	if err != nil || v != 1 {
		t.Fatalf("SetPolicies: %d, %v", v, err)
	}
	if d := call("delete_customer", access.CallerView); d.Allowed || !slices.Equal(d.Policies, []string{"no-deletes-from-views"}) {
		t.Errorf("forbid on one tool from views: %+v", d)
	}
	if d := call("delete_customer", access.CallerModel); !d.Allowed {
		t.Errorf("the model's call was forbidden too: %+v", d)
	}
	if d := call("lookup_customer", access.CallerView); !d.Allowed {
		t.Errorf("another tool was forbidden: %+v", d)
	}
	if _, err := e.svc.SetPolicies(ctx, tenantAdmin, access.DefaultPolicyText, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a save over a version edited by someone else: %v, want ErrConflict", err)
	}

	// Someone with no permission at all is denied by the default policy.
	if err := e.svc.SetDefault(ctx, tenantAdmin, access.Default{Runner: false}); err != nil {
		t.Fatal(err)
	}
	if d := call("lookup_customer", access.CallerModel); d.Allowed {
		t.Errorf("a person without agents.run was allowed: %+v", d)
	}
	// Another tenant's agent is never invoked, whatever the policy says.
	d, err := e.svc.Invoke(ctx, person(tenantB, alice, access.PermRun), access.Call{AgentID: agentID, AgentTenantID: tenantA, Server: "crm", Tool: "x", Caller: access.CallerModel})
	if err != nil || d.Allowed || !slices.Contains(d.Policies, access.PlatformPolicyID) {
		t.Errorf("cross-tenant invoke: %+v %v", d, err)
	}
}

// The policy tester answers for any person of the admin's tenant, for the
// saved policies or a text being edited, and only for admins.
func TestExplainAndAppsSetting(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	forbid := access.DefaultPolicyText + "\n@id(\"no-export\")\nforbid (principal, action, resource) when { context.tool == \"export_all\" };\n"
	c := access.Call{AgentID: agentID, Server: "crm", Tool: "export_all", Caller: access.CallerModel}
	d, err := e.svc.Explain(ctx, tenantAdmin, forbid, bob, c)
	if err != nil || d.Allowed || !slices.Equal(d.Policies, []string{"no-export"}) {
		t.Errorf("edited text: %+v %v", d, err)
	}
	if d, err := e.svc.Explain(ctx, tenantAdmin, "", bob, c); err != nil || !d.Allowed {
		t.Errorf("saved (default) policies: %+v %v", d, err)
	}
	if _, err := e.svc.Explain(ctx, tenantAdmin, "permit (principal", bob, c); err == nil {
		t.Error("a text that does not parse was tested")
	}
	if _, err := e.svc.Explain(ctx, person(tenantA, bob), "", bob, c); missing(err) != access.PermAdmin {
		t.Errorf("a non-admin used the tester: %v", err)
	}

	if !e.svc.AppsEnabled(ctx, tenantA) {
		t.Fatal("MCP Apps off by default")
	}
	if err := e.svc.SetAppsEnabled(ctx, person(tenantA, bob), false); missing(err) != access.PermAdmin {
		t.Errorf("a non-admin turned MCP Apps off: %v", err)
	}
	if err := e.svc.SetAppsEnabled(ctx, tenantAdmin, false); err != nil {
		t.Fatal(err)
	}
	if e.svc.AppsEnabled(ctx, tenantA) || !e.svc.AppsEnabled(ctx, tenantB) {
		t.Errorf("apps: tenant A %v, tenant B %v", e.svc.AppsEnabled(ctx, tenantA), e.svc.AppsEnabled(ctx, tenantB))
	}
	recs, _ := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditSettingsSet})
	if len(recs) != 1 || recs[0].Fields["after"].(map[string]any)["appsEnabled"] != false {
		t.Errorf("settings audit %+v", recs)
	}
}

// Letting runs without a person use a conversation's memory is for an
// admin of the tenant only, changes that tenant only, is off by default,
// reads back as saved, and is audited as a change of its own with the
// setting before and after.
func TestHistoryForTriggersSetting(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	read := func(tenant string) bool {
		t.Helper()
		s, err := e.svc.TenantSettings(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return s.HistoryForTriggers
	}
	if read(tenantA) {
		t.Fatal("runs without a person use the memory by default")
	}
	for _, who := range []access.Person{person(tenantA, bob, access.PermRead, access.PermRun), person(tenantB, admin, access.PermRun)} {
		if err := e.svc.SetHistoryForTriggers(ctx, who, true); missing(err) != access.PermAdmin {
			t.Errorf("a non-admin %v of %s turned the memory on: %v", who.Roles, who.TenantID, err)
		}
	}
	if read(tenantA) || read(tenantB) {
		t.Fatal("a refused change was saved")
	}

	if err := e.svc.SetHistoryForTriggers(ctx, tenantAdmin, true); err != nil {
		t.Fatal(err)
	}
	if !read(tenantA) || read(tenantB) {
		t.Errorf("after tenant A's admin turned it on: tenant A %v, tenant B %v", read(tenantA), read(tenantB))
	}
	ts, err := e.st.TenantSettings(ctx, tenantA)
	if err != nil || !ts.HistoryForTriggers || ts.UpdatedBy != admin {
		t.Errorf("stored settings %+v %v: want it on, changed by the admin", ts, err)
	}
	// The other settings stay as they were.
	if s, _ := e.svc.TenantSettings(ctx, tenantA); !s.AppsEnabled || !s.Default.Runner {
		t.Errorf("other settings changed with it: %+v", s)
	}
	if err := e.svc.SetHistoryForTriggers(ctx, tenantAdmin, false); err != nil {
		t.Fatal(err)
	}
	if read(tenantA) {
		t.Error("still on after the admin turned it off")
	}

	recs, err := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditHistoryForTriggersSet})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, r := range recs {
		changes = append(changes, fmt.Sprint(r.Actor, " ", r.Fields["before"], " ", r.Fields["after"]))
	}
	want := []string{admin + " map[historyForTriggers:false] map[historyForTriggers:true]", admin + " map[historyForTriggers:true] map[historyForTriggers:false]"}
	if !slices.Equal(changes, want) {
		t.Errorf("audited changes %q, want %q", changes, want)
	}
	if other, _ := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantB}); len(other) != 0 {
		t.Errorf("tenant B's log got %d records", len(other))
	}
}

// A tenant admin allows permissions to one server's views in their own
// tenant only; a non-admin cannot, an unknown permission is refused, and
// each change is audited with the server's permissions before and after.
func TestAppPermissions(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	tenantAdmin := person(tenantA, alice, access.PermAdmin)
	if got := e.svc.AppPermissions(ctx, tenantA, "rec"); len(got) != 0 {
		t.Fatalf("permissions by default: %v", got)
	}
	if err := e.svc.SetAppPermissions(ctx, person(tenantA, bob), "rec", []string{"microphone"}); missing(err) != access.PermAdmin {
		t.Errorf("a non-admin allowed a permission: %v", err)
	}
	if err := e.svc.SetAppPermissions(ctx, tenantAdmin, "rec", []string{"usb"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("an unknown permission: %v", err)
	}
	if err := e.svc.SetAppPermissions(ctx, tenantAdmin, "rec", []string{"microphone", "camera", "microphone"}); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.AppPermissions(ctx, tenantA, "rec"); !slices.Equal(got, []string{"camera", "microphone"}) {
		t.Errorf("tenant A rec: %v", got)
	}
	if got := e.svc.AppPermissions(ctx, tenantB, "rec"); len(got) != 0 {
		t.Errorf("tenant B got tenant A's permissions: %v", got)
	}
	if err := e.svc.SetAppPermissions(ctx, tenantAdmin, "rec", nil); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.AppPermissions(ctx, tenantA, "rec"); len(got) != 0 {
		t.Errorf("after taking them back: %v", got)
	}
	recs, _ := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditSettingsSet})
	if len(recs) != 2 {
		t.Fatalf("%d settings records, want 2", len(recs))
	}
	var changes []string
	for _, r := range recs {
		changes = append(changes, fmt.Sprintln(r.Fields["server"], r.Fields["before"], r.Fields["after"]))
	}
	slices.Sort(changes)
	want := []string{"rec map[appPermissions:[]] map[appPermissions:[camera microphone]]\n", "rec map[appPermissions:[camera microphone]] map[appPermissions:[]]\n"}
	if !slices.Equal(changes, want) {
		t.Errorf("audited changes %q, want %q", changes, want)
	}
}

// Elicitation is on for every server by default; a tenant admin turns it
// off, and on again, for one server of their own tenant only; a
// non-admin cannot; each change is audited with the server and the
// setting before and after; and when the settings cannot be read no
// server may ask, with a log line for the operator.
func TestElicitationSetting(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	allowed := func(tenant string) string {
		t.Helper()
		var on []string
		for _, server := range []string{"crm", "tickets", "demo"} {
			if e.svc.ElicitationAllowed(ctx, tenant, server) {
				on = append(on, server)
			}
		}
		return strings.Join(on, " ")
	}
	off := func(tenant string) []string {
		t.Helper()
		s, err := e.svc.TenantSettings(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		return s.ElicitationOff
	}
	if got := allowed(tenantA); got != "crm tickets demo" {
		t.Fatalf("servers that may ask by default: %q, want all", got)
	}
	for _, who := range []access.Person{person(tenantA, bob, access.PermRead, access.PermRun), person(tenantB, admin, access.PermRun)} {
		if err := e.svc.SetElicitation(ctx, who, "crm", false); missing(err) != access.PermAdmin {
			t.Errorf("a non-admin %v of %s turned elicitation off: %v", who.Roles, who.TenantID, err)
		}
	}
	if err := e.svc.SetElicitation(ctx, tenantAdmin, "", false); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a server without a name: %v, want ErrInvalid", err)
	}
	if got := allowed(tenantA); got != "crm tickets demo" || len(off(tenantA)) != 0 {
		t.Fatalf("a refused change was saved: %q may ask, off %q", got, off(tenantA))
	}

	for _, server := range []string{"tickets", "crm", "crm"} {
		if err := e.svc.SetElicitation(ctx, tenantAdmin, server, false); err != nil {
			t.Fatal(err)
		}
	}
	if got, b := allowed(tenantA), allowed(tenantB); got != "demo" || b != "crm tickets demo" {
		t.Errorf("after tenant A's admin turned crm and tickets off: tenant A %q may ask, tenant B %q", got, b)
	}
	if got := off(tenantA); !slices.Equal(got, []string{"crm", "tickets"}) {
		t.Errorf("tenant A's settings say off for %q, want crm and tickets, once each", got)
	}
	ts, err := e.st.TenantSettings(ctx, tenantA)
	if err != nil || ts.UpdatedBy != admin {
		t.Errorf("stored settings %+v %v: want them changed by the admin", ts, err)
	}
	// The other settings stay as they were.
	if s, _ := e.svc.TenantSettings(ctx, tenantA); !s.AppsEnabled || !s.Default.Runner || s.HistoryForTriggers {
		t.Errorf("other settings changed with it: %+v", s)
	}
	if err := e.svc.SetElicitation(ctx, tenantAdmin, "crm", true); err != nil {
		t.Fatal(err)
	}
	if got := allowed(tenantA); got != "crm demo" {
		t.Errorf("after the admin turned crm on again, %q may ask", got)
	}

	recs, err := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditElicitationSet})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, r := range recs {
		changes = append(changes, fmt.Sprint(r.Actor, " ", r.Fields["server"], " ", r.Fields["before"], " ", r.Fields["after"]))
	}
	want := []string{
		admin + " tickets map[elicitation:true] map[elicitation:false]",
		admin + " crm map[elicitation:true] map[elicitation:false]",
		admin + " crm map[elicitation:false] map[elicitation:false]",
		admin + " crm map[elicitation:false] map[elicitation:true]",
	}
	if !slices.Equal(changes, want) {
		t.Errorf("audited changes %q, want %q", changes, want)
	}
	if other, _ := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantB}); len(other) != 0 {
		t.Errorf("tenant B's log got %d records", len(other))
	}

	// Settings that cannot be read: no server may ask.
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	svc, err := access.New(access.Options{Store: st, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	if !svc.ElicitationAllowed(ctx, tenantA, "demo") {
		t.Fatal("an open store's default does not allow elicitation")
	}
	st.Close()
	if svc.ElicitationAllowed(ctx, tenantA, "demo") {
		t.Error("elicitation allowed while the tenant's settings cannot be read")
	}
	if line := `"level":"WARN","msg":"tenant settings unreadable; elicitation declined","tenant":"` + tenantA + `","server":"demo"`; !strings.Contains(logs.String(), line) {
		t.Errorf("no operator log line %s in:\n%s", line, logs.String())
	}
}

// A saved policy text over a limit (saved before the limits, or written
// by hand) is refused when the tenant is loaded, before cedar-go sees it:
// that tenant's calls are denied with a reason that says so and an
// operator log line, the other tenants' calls go on, and the process
// stays small, call after call.
func TestStoredPolicyOverLimitDeniesThatTenantOnly(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs testenv.LogBuffer
	svc, err := access.New(access.Options{Store: st, Logger: slog.New(slog.NewJSONHandler(&logs, nil)), CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	head := "permit (principal, action, resource) when { "
	deep := head + strings.Repeat("(", 130_000) + "true" + strings.Repeat(")", 130_000) + " };"
	if _, err := st.PutPolicySet(ctx, store.PolicySet{TenantID: tenantA, Text: deep}, 0); err != nil {
		t.Fatal(err)
	}
	call := func(tenant string) access.Call {
		return access.Call{AgentID: agentID, AgentTenantID: tenant, Server: "crm", Tool: "lookup", Caller: access.CallerModel}
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 20 {
		d, err := svc.Invoke(ctx, person(tenantA, alice, access.PermRun), call(tenantA))
		if err != nil {
			t.Fatal(err)
		}
		want := "the organisation's saved Cedar policies are refused (line 1, column 76: `(`, `[`, `{` and `if` are nested more than 32 deep here; at most 32 levels are allowed)"
		if d.Allowed || len(d.Errors) != 1 || !strings.HasPrefix(d.Errors[0], want) || !strings.Contains(d.Errors[0], "administrator") {
			t.Fatalf("a call of the tenant whose saved policies are too deep = %+v, want a deny that starts %q", d, want)
		}
		if d, err := svc.Invoke(ctx, person(tenantB, bob, access.PermRun), call(tenantB)); err != nil || !d.Allowed {
			t.Fatalf("a call of another tenant = %+v, %v, want allowed", d, err)
		}
	}
	runtime.ReadMemStats(&after)
	if grown, allocated := after.Sys-before.Sys, after.TotalAlloc-before.TotalAlloc; grown > 16<<20 || allocated > 32<<20 {
		t.Errorf("40 calls with a saved text 130,000 levels deep grew the process by %d MiB and allocated %d MiB, want at most 16 and 32",
			grown>>20, allocated>>20)
	}

	if !strings.Contains(logs.String(), `"msg":"stored policy set refused; every tool call of the tenant is denied until an admin saves a correct one","tenant":"`+tenantA+`"`) ||
		!strings.Contains(logs.String(), `"over_limit":true`) {
		t.Errorf("no operator log line for the refused text:\n%.2000s", logs.String())
	}
	pe, err := svc.SavedPoliciesRefused(ctx, tenantA)
	if err != nil || pe == nil || !errors.Is(pe, access.ErrPolicyLimit) || pe.Line != 1 || pe.Column != 76 {
		t.Errorf("SavedPoliciesRefused = %v, %v, want the limit at line 1, column 76", pe, err)
	}
	if pe, err := svc.SavedPoliciesRefused(ctx, tenantB); pe != nil || err != nil {
		t.Errorf("SavedPoliciesRefused of the other tenant = %v, %v, want none", pe, err)
	}
	// The admin can still save a correct text, which is in force at once.
	v, err := svc.SetPolicies(ctx, person(tenantA, admin, access.PermAdmin), access.DefaultPolicyText, 1)
	if err != nil || v != 2 {
		t.Fatalf("SetPolicies over the refused text = %d, %v", v, err)
	}
	if d, err := svc.Invoke(ctx, person(tenantA, alice, access.PermRun), call(tenantA)); err != nil || !d.Allowed {
		t.Errorf("a call after the admin saved a correct text = %+v, %v, want allowed", d, err)
	}
}
