package graph_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"teamsbot/access"
	"teamsbot/store"
)

// decider is the access decision point with group membership from this
// package's client, against the fake Graph ("user: checkMemberGroups").
func decider(t *testing.T, e *env) (*access.Service, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := access.New(access.Options{Store: st, Groups: e.client, Now: e.clock.Now, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st
}

var tenantAdmin = access.Person{TenantID: tenantA, UserID: "adadadad-0000-4000-8000-0000000000ad", Roles: []string{access.PermAdmin}}

// The tenant's agent readers as a group: a direct member, a member through
// a nested group and a member three levels down may open views of a run
// without a person; someone in no group may not.
func TestReadersByGroup(t *testing.T) {
	e := newEnv(t, nil)
	svc, _ := decider(t, e)
	ctx := context.Background()
	if err := svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: store.AllAgents, Kind: store.KindGroup, Subject: readers, Role: store.RoleReader, DisplayName: "Agent readers"}); err != nil {
		t.Fatal(err)
	}
	if err := svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: "default", Kind: store.KindGroup, Subject: deep1, Role: store.RoleReader}); err != nil {
		t.Fatal(err)
	}
	view := access.View{ID: "v-trigger", TenantID: tenantA, AgentID: "default"}
	for who, want := range map[string]bool{alice: true, bob: true, dave: true, carol: false} {
		err := svc.CanRead(ctx, access.Person{TenantID: tenantA, UserID: who}, view)
		if (err == nil) != want {
			t.Errorf("%s: CanRead = %v, want allowed %v", who, err, want)
		}
		if !want && !errors.Is(err, access.ErrDenied) {
			t.Errorf("%s: %v, want a refusal", who, err)
		}
	}
	// A group binding of one tenant means nothing in another.
	if err := svc.CanRead(ctx, access.Person{TenantID: tenantB, UserID: bart}, access.View{ID: "v", TenantID: tenantB, AgentID: "default"}); !errors.Is(err, access.ErrDenied) {
		t.Errorf("tenant B: %v", err)
	}
}

// A tightened default: only members of one group may use the bot.
func TestDefaultLimitedToAGroup(t *testing.T) {
	e := newEnv(t, nil)
	svc, _ := decider(t, e)
	ctx := context.Background()
	if err := svc.SetDefault(ctx, tenantAdmin, access.Default{Runner: true, Group: team}); err != nil {
		t.Fatal(err)
	}
	if err := svc.CanRun(ctx, access.Person{TenantID: tenantA, UserID: bob}, "default"); err != nil {
		t.Errorf("a member of the group: %v", err)
	}
	if err := svc.CanRun(ctx, access.Person{TenantID: tenantA, UserID: carol}, "default"); !errors.Is(err, access.ErrDenied) {
		t.Errorf("someone outside the group: %v, want a refusal", err)
	}
}

// Graph down: the decision fails closed. Graph throttling: the lookup is
// retried after Retry-After and the decision made.
func TestDecisionsWhenGraphFails(t *testing.T) {
	e := newEnv(t, nil)
	svc, _ := decider(t, e)
	ctx := context.Background()
	if err := svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: store.AllAgents, Kind: store.KindGroup, Subject: readers, Role: store.RoleReader}); err != nil {
		t.Fatal(err)
	}
	view := access.View{ID: "v-trigger", TenantID: tenantA, AgentID: "default"}

	e.fake.Down(true)
	err := svc.CanRead(ctx, access.Person{TenantID: tenantA, UserID: alice}, view)
	if !errors.Is(err, access.ErrUnavailable) {
		t.Fatalf("Graph down: %v, want ErrUnavailable", err)
	}
	e.fake.Down(false)

	e.fake.Throttle(1, time.Second)
	before := e.fake.Counts().CheckMemberGroups
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := svc.CanRead(cctx, access.Person{TenantID: tenantA, UserID: alice}, view); err != nil {
		t.Fatalf("throttled once: %v", err)
	}
	if n := e.fake.Counts().CheckMemberGroups - before; n != 2 {
		t.Errorf("%d checkMemberGroups calls, want the throttled one and its retry", n)
	}
}

// BenchmarkDecisionWarm is one full decision for a view's tool call, as the
// governed path makes it: the tenant's rules from memory, group membership
// from the client's cache, CanCall and the Cedar Invoke with ten policies
// beside the default. Target: under 50 µs.
func BenchmarkDecisionWarm(b *testing.B) {
	e := newEnv(b, nil)
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	svc, err := access.New(access.Options{Store: st, Groups: e.client, CacheTTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := range 20 {
		if err := svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: "default", Kind: store.KindUser, Subject: guid(0x77, i), Role: store.RoleRunner}); err != nil {
			b.Fatal(err)
		}
	}
	if err := svc.AddBinding(ctx, tenantAdmin, store.Binding{AgentID: store.AllAgents, Kind: store.KindGroup, Subject: readers, Role: store.RoleReader}); err != nil {
		b.Fatal(err)
	}
	text := access.DefaultPolicyText
	for i := range 10 {
		text += fmt.Sprintf("\n@id(\"rule-%d\")\nforbid (principal, action, resource) when { context.tool == \"tool-%d\" && context.caller == \"view\" };\n", i, i)
	}
	if _, err := svc.SetPolicies(ctx, tenantAdmin, text, 0); err != nil {
		b.Fatal(err)
	}
	p := access.Person{TenantID: tenantA, UserID: alice}
	v := access.View{ID: "v1", TenantID: tenantA, UserID: alice, AgentID: "default"}
	call := access.Call{AgentID: "default", AgentTenantID: tenantA, Server: "crm", Tool: "lookup", Caller: access.CallerView, ViewID: "v1"}
	if err := svc.CanCall(ctx, p, v); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := svc.CanCall(ctx, p, v); err != nil {
			b.Fatal(err)
		}
		d, err := svc.Invoke(ctx, p, call)
		if err != nil || !d.Allowed {
			b.Fatalf("%+v %v", d, err)
		}
	}
}
