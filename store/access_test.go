package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

func putBindings(t *testing.T, s *store.Store, bs ...store.Binding) {
	t.Helper()
	for _, b := range bs {
		if err := s.PutBinding(context.Background(), b); err != nil {
			t.Fatalf("PutBinding(%+v): %v", b, err)
		}
	}
}

func bindingsOf(t *testing.T, s *store.Store, tenant, agent string) []store.Binding {
	t.Helper()
	got, err := s.Bindings(context.Background(), tenant, agent)
	if err != nil {
		t.Fatalf("Bindings(%q, %q): %v", tenant, agent, err)
	}
	return got
}

func testBindingsPutListDelete(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	now := clk.Now()
	ada := store.Binding{TenantID: "tenant-1", AgentID: "sales", Subject: "user-ada", Kind: store.KindUser,
		Role: store.RoleAdmin, DisplayName: "Ada", CreatedBy: "user-root", CreatedAt: now.Add(-time.Hour)}
	// Stamped by the store.
	ops := store.Binding{TenantID: "tenant-1", AgentID: "sales", Subject: "group-ops", Kind: store.KindGroup,
		Role: store.RoleRunner, DisplayName: "Ops"}
	// Same subject and agent, another role: a binding of its own.
	adaReader := ada
	adaReader.Role = store.RoleReader
	everywhere := store.Binding{TenantID: "tenant-1", AgentID: store.AllAgents, Subject: "group-all", Kind: store.KindGroup, Role: store.RoleReader}
	hr := store.Binding{TenantID: "tenant-1", AgentID: "hr", Subject: "user-bob", Kind: store.KindUser, Role: store.RoleRunner}
	other := store.Binding{TenantID: "tenant-2", AgentID: "sales", Subject: "user-ada", Kind: store.KindUser, Role: store.RoleAdmin}
	putBindings(t, s, ada, ops, adaReader, everywhere, hr, other)
	ops.CreatedAt = now
	everywhere.CreatedAt, hr.CreatedAt = now, now

	if got, want := bindingsOf(t, s, "tenant-1", "sales"), []store.Binding{ops, ada, adaReader}; !cmp.Equal(got, want) {
		t.Errorf("Bindings of agent sales (-want +got):\n%s", cmp.Diff(want, got))
	}
	if got, want := bindingsOf(t, s, "tenant-1", ""), []store.Binding{everywhere, hr, ops, ada, adaReader}; !cmp.Equal(got, want) {
		t.Errorf("Bindings of every agent (-want +got):\n%s", cmp.Diff(want, got))
	}
	if got, want := bindingsOf(t, s, "tenant-1", store.AllAgents), []store.Binding{everywhere}; !cmp.Equal(got, want) {
		t.Errorf("Bindings made for all agents (-want +got):\n%s", cmp.Diff(want, got))
	}
	for _, c := range []struct{ tenant, agent string }{{"tenant-1", "nobody"}, {"tenant-3", ""}, {"tenant", ""}, {"tenant-1", "sale"}} {
		if got := bindingsOf(t, s, c.tenant, c.agent); len(got) != 0 {
			t.Errorf("Bindings(%q, %q) = %+v, want none", c.tenant, c.agent, got)
		}
	}

	if err := s.DeleteBinding(ctx, "tenant-1", "sales", store.KindUser, "user-ada", store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if got, want := bindingsOf(t, s, "tenant-1", "sales"), []store.Binding{ops, adaReader}; !cmp.Equal(got, want) {
		t.Errorf("Bindings after the delete (-want +got):\n%s", cmp.Diff(want, got))
	}
	if got := bindingsOf(t, s, "tenant-2", "sales"); len(got) != 1 {
		t.Errorf("deleting tenant-1's binding changed tenant-2's: %+v", got)
	}
	// Each part of the identity must match: none of these is stored.
	for _, c := range []struct{ tenant, agent, kind, subject, role string }{
		{"tenant-1", "sales", store.KindUser, "user-ada", store.RoleAdmin}, // just deleted
		{"tenant-3", "sales", store.KindUser, "user-ada", store.RoleReader},
		{"tenant-1", "hr", store.KindUser, "user-ada", store.RoleReader},
		{"tenant-1", "sales", store.KindGroup, "user-ada", store.RoleReader},
		{"tenant-1", "sales", store.KindUser, "user-adam", store.RoleReader},
		{"tenant-1", "sales", store.KindUser, "user-ada", store.RoleRunner},
	} {
		err := s.DeleteBinding(ctx, c.tenant, c.agent, c.kind, c.subject, c.role)
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("DeleteBinding(%+v) = %v, want ErrNotFound", c, err)
		}
	}
	if got := bindingsOf(t, s, "tenant-1", ""); len(got) != 4 {
		t.Errorf("after deletes of absent bindings, %d bindings, want 4: %+v", len(got), got)
	}
}

// BindingsFor is what every access decision reads: exactly the bindings
// of the tenant, for the agent or all agents, whose subject is the user or
// one of its groups.
func testBindingsForFindsUserGroupsAndAllAgentsOnly(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	b := func(tenant, agent, kind, subject, role string) store.Binding {
		return store.Binding{TenantID: tenant, AgentID: agent, Kind: kind, Subject: subject, Role: role, CreatedAt: clk.Now()}
	}
	userRunner := b("tenant-a", "sales", store.KindUser, "user-1", store.RoleRunner)
	groupReader := b("tenant-a", "sales", store.KindGroup, "group-1", store.RoleReader)
	groupAdmin := b("tenant-a", "sales", store.KindGroup, "group-2", store.RoleAdmin)
	allAgents := b("tenant-a", store.AllAgents, store.KindGroup, "group-2", store.RoleReader)
	allAgentsUser := b("tenant-a", store.AllAgents, store.KindUser, "user-1", store.RoleAdmin)
	putBindings(t, s, userRunner, groupReader, groupAdmin, allAgents, allAgentsUser,
		// None of these may be found for user-1 in groups 1 and 2 on
		// agent sales of tenant-a.
		b("tenant-ab", "sales", store.KindUser, "user-1", store.RoleAdmin),        // a tenant whose id starts with tenant-a
		b("tenant-b", store.AllAgents, store.KindUser, "user-1", store.RoleAdmin), // another tenant, all agents
		b("tenant-a", "sales-eu", store.KindUser, "user-1", store.RoleAdmin),      // an agent whose id starts with sales
		b("tenant-a", "hr", store.KindGroup, "group-1", store.RoleAdmin),          // another agent
		b("tenant-a", "sales", store.KindUser, "user-10", store.RoleAdmin),        // a subject whose id starts with user-1
		b("tenant-a", "sales", store.KindGroup, "group-3", store.RoleAdmin),       // a group the user is not in
	)

	for _, c := range []struct {
		name, tenant, agent string
		subjects            []string
		want                []store.Binding
	}{
		{"user and groups", "tenant-a", "sales", []string{"user-1", "group-2", "group-1"},
			[]store.Binding{groupReader, groupAdmin, userRunner, allAgents, allAgentsUser}},
		{"user alone", "tenant-a", "sales", []string{"user-1"}, []store.Binding{userRunner, allAgentsUser}},
		{"a group alone", "tenant-a", "sales", []string{"group-1"}, []store.Binding{groupReader}},
		{"a subject twice", "tenant-a", "sales", []string{"group-1", "group-1"}, []store.Binding{groupReader}},
		{"only all-agents bindings on another agent", "tenant-a", "finance", []string{"user-1", "group-2"},
			[]store.Binding{allAgents, allAgentsUser}},
		{"asked for all agents", "tenant-a", store.AllAgents, []string{"user-1", "group-2"},
			[]store.Binding{allAgents, allAgentsUser}},
		{"a tenant that starts like another", "tenant", "sales", []string{"user-1"}, nil},
		{"no such tenant", "tenant-c", "sales", []string{"user-1", "group-1", "group-2"}, nil},
		{"nobody bound", "tenant-a", "sales", []string{"user-2", "group-9"}, nil},
		{"no subjects", "tenant-a", "sales", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := s.BindingsFor(ctx, c.tenant, c.agent, c.subjects)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("BindingsFor(%q, %q, %q) (-want +got):\n%s", c.tenant, c.agent, c.subjects, diff)
			}
		})
	}

	// Ids that could reach into another tenant's or agent's keys, or that
	// do not identify anyone, are refused rather than looked up.
	for _, c := range []struct {
		name, tenant, agent string
		subjects            []string
	}{
		{"NUL in tenant", "tenant-a\x00sales", "", []string{"user-1"}},
		{"NUL in agent", "tenant-a", "sales\x00user-1", []string{"x"}},
		{"NUL in subject", "tenant-a", "sales", []string{"user-1\x00user"}},
		{"empty tenant", "", "sales", []string{"user-1"}},
		{"empty agent", "tenant-a", "", []string{"user-1"}},
		{"empty subject", "tenant-a", "sales", []string{"user-1", ""}},
		{"too many subjects", "tenant-a", "sales", make([]string, 10_001)},
	} {
		if got, err := s.BindingsFor(ctx, c.tenant, c.agent, c.subjects); !errors.Is(err, store.ErrInvalid) || got != nil {
			t.Errorf("BindingsFor with %s = %+v, %v; want ErrInvalid and nothing", c.name, got, err)
		}
	}
	if _, err := s.Bindings(ctx, "tenant-a\x00sales", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Bindings with NUL in tenant = %v, want ErrInvalid", err)
	}
	if _, err := s.Bindings(ctx, "", ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Bindings without tenant = %v, want ErrInvalid", err)
	}
}

// Putting a binding again changes nothing but its display name: it stays
// one binding, granted when and by whom it first was.
func testPutBindingIsIdempotent(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	first := store.Binding{TenantID: "tenant-1", AgentID: "sales", Subject: "group-1", Kind: store.KindGroup,
		Role: store.RoleRunner, DisplayName: "Sales", CreatedBy: "user-admin"}
	putBindings(t, s, first)
	first.CreatedAt = clk.Now()

	clk.Set(clk.Now().Add(time.Hour))
	again := first
	again.CreatedAt = time.Time{}
	again.CreatedBy = "user-other-admin"
	again.DisplayName = "Sales (EMEA)"
	putBindings(t, s, again, again)

	want := first
	want.DisplayName = "Sales (EMEA)"
	if diff := cmp.Diff([]store.Binding{want}, bindingsOf(t, s, "tenant-1", "")); diff != "" {
		t.Errorf("Bindings after putting one three times (-want +got):\n%s", diff)
	}
	got, err := s.BindingsFor(context.Background(), "tenant-1", "sales", []string{"group-1"})
	if err != nil || len(got) != 1 {
		t.Errorf("BindingsFor after putting one three times = %+v, %v; want the one", got, err)
	}
}

func testBindingRefusesInvalidAndWritesNothing(t *testing.T, bk backend) {
	s, _ := openTemp(t, bk, newClock())
	ctx := context.Background()
	good := store.Binding{TenantID: "tenant-1", AgentID: "sales", Subject: "user-1", Kind: store.KindUser, Role: store.RoleRunner}
	for _, c := range []struct {
		name   string
		change func(*store.Binding)
		reason string // in the error
	}{
		{"unknown kind", func(b *store.Binding) { b.Kind = "service" }, "kind"},
		{"kind in capitals", func(b *store.Binding) { b.Kind = "User" }, "kind"},
		{"empty kind", func(b *store.Binding) { b.Kind = "" }, "kind"},
		{"unknown role", func(b *store.Binding) { b.Role = "owner" }, "role"},
		{"empty role", func(b *store.Binding) { b.Role = "" }, "role"},
		{"no tenant", func(b *store.Binding) { b.TenantID = "" }, "tenant"},
		{"no agent", func(b *store.Binding) { b.AgentID = "" }, "agent"},
		{"no subject", func(b *store.Binding) { b.Subject = "" }, "subject"},
		{"NUL in tenant", func(b *store.Binding) { b.TenantID = "tenant-1\x00sales" }, "NUL"},
		{"NUL in agent", func(b *store.Binding) { b.AgentID = "sales\x00user-1" }, "NUL"},
		{"NUL in subject", func(b *store.Binding) { b.Subject = "user-1\x00user" }, "NUL"},
		{"subject not UTF-8", func(b *store.Binding) { b.Subject = "user-\xff" }, "UTF-8"},
		{"subject far too long", func(b *store.Binding) { b.Subject = strings.Repeat("x", 600) }, "subject"},
		{"display name far too long", func(b *store.Binding) { b.DisplayName = strings.Repeat("x", 2000) }, "display name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := good
			c.change(&b)
			err := s.PutBinding(ctx, b)
			if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), c.reason) {
				t.Errorf("PutBinding = %v, want ErrInvalid saying %q", err, c.reason)
			}
			if b.TenantID != "" && !strings.Contains(b.TenantID, "\x00") {
				if got := bindingsOf(t, s, b.TenantID, ""); len(got) != 0 {
					t.Errorf("a refused put stored %+v", got)
				}
			}
			if c.reason == "display name" {
				return // not part of what names a binding
			}
			err = s.DeleteBinding(ctx, b.TenantID, b.AgentID, b.Kind, b.Subject, b.Role)
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("DeleteBinding = %v, want ErrInvalid", err)
			}
		})
	}
}

// auditOf returns the audit records of tenant, oldest first.
func auditOf(t *testing.T, s *store.Store, tenant string) []store.AuditRecord {
	t.Helper()
	recs, err := s.Audit(context.Background(), store.AuditQuery{TenantID: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func actions(recs []store.AuditRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Action
	}
	return out
}

// A change of bindings and its audit records are committed together: a
// change that is refused, before or inside the transaction, leaves no
// audit record, and one that lands leaves exactly its own.
func testBindingChangesAndTheirAuditCommitTogether(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	b := store.Binding{TenantID: "tenant-1", AgentID: "sales", Subject: "group-1", Kind: store.KindGroup, Role: store.RoleRunner, CreatedBy: "user-admin"}
	rec := func(action string) store.AuditRecord {
		return store.AuditRecord{Action: action, Actor: "user-admin", Fields: map[string]any{"subject": "group-1"}}
	}

	before := s.Stats()
	if err := s.PutBinding(ctx, b, rec("access.binding.put")); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Writes-before.Writes != 1 {
		t.Errorf("a put with its audit record took %d writes, want 1", st.Writes-before.Writes)
	}
	want := rec("access.binding.put")
	want.Seq, want.Time, want.TenantID = 1, clk.Now(), "tenant-1" // the tenant is the binding's
	if diff := cmp.Diff([]store.AuditRecord{want}, auditOf(t, s, "tenant-1")); diff != "" {
		t.Errorf("Audit after PutBinding (-want +got):\n%s", diff)
	}

	// Refused before the transaction: an invalid binding, or an audit
	// record that is invalid or of another tenant, writes neither.
	bad := b
	bad.Role = "owner"
	if err := s.PutBinding(ctx, bad, rec("access.binding.put")); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutBinding with an invalid role = %v, want ErrInvalid", err)
	}
	other := b
	other.Subject = "group-2"
	foreign := rec("access.binding.put")
	foreign.TenantID = "tenant-2"
	if err := s.PutBinding(ctx, other, foreign); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutBinding with another tenant's audit record = %v, want ErrInvalid", err)
	}
	if err := s.PutBinding(ctx, other, store.AuditRecord{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutBinding with an audit record without action = %v, want ErrInvalid", err)
	}
	if err := s.DeleteBinding(ctx, "tenant-1", "sales", store.KindGroup, "group-1", store.RoleRunner, foreign); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("DeleteBinding with another tenant's audit record = %v, want ErrInvalid", err)
	}
	// Refused inside the transaction: deleting what is not there.
	if err := s.DeleteBinding(ctx, "tenant-1", "sales", store.KindGroup, "group-2", store.RoleRunner, rec("access.binding.delete")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteBinding of an absent binding = %v, want ErrNotFound", err)
	}
	if got := bindingsOf(t, s, "tenant-1", ""); len(got) != 1 || got[0].Subject != "group-1" {
		t.Errorf("after refused changes, bindings = %+v; want only group-1's", got)
	}
	if got := actions(auditOf(t, s, "")); !cmp.Equal(got, []string{"access.binding.put"}) {
		t.Errorf("after refused changes, audit actions = %q; want only the first put's", got)
	}

	if err := s.DeleteBinding(ctx, "tenant-1", "sales", store.KindGroup, "group-1", store.RoleRunner, rec("access.binding.delete")); err != nil {
		t.Fatal(err)
	}
	if got := bindingsOf(t, s, "tenant-1", ""); len(got) != 0 {
		t.Errorf("after the delete, bindings = %+v", got)
	}
	if got := actions(auditOf(t, s, "tenant-1")); !cmp.Equal(got, []string{"access.binding.put", "access.binding.delete"}) {
		t.Errorf("after the delete, audit actions = %q", got)
	}
}

func testTenantSettings(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	defaults := store.TenantSettings{TenantID: "tenant-1", DefaultRunner: true}

	got, err := s.TenantSettings(ctx, "tenant-1")
	if err != nil {
		t.Fatalf("TenantSettings of a tenant that stored none: %v", err)
	}
	if diff := cmp.Diff(defaults, got); diff != "" {
		t.Errorf("TenantSettings of a tenant that stored none (-want +got):\n%s", diff)
	}

	first := store.TenantSettings{TenantID: "tenant-1", DefaultRunner: true, DefaultGroup: "group-staff", UpdatedBy: "user-admin", Version: 41,
		DenyTools: []string{"crm/delete_customer", "debug/*"}, Redact: []string{`\b\d{3}-\d{2}-\d{4}\b`}}
	prev, err := s.PutTenantSettings(ctx, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(defaults, prev); diff != "" {
		t.Errorf("first PutTenantSettings returned (-want +got):\n%s", diff)
	}
	first.UpdatedAt, first.Version = clk.Now(), 1 // set by the store
	if got, err := s.TenantSettings(ctx, "tenant-1"); err != nil || !cmp.Equal(got, first) {
		t.Errorf("TenantSettings after a put = %+v, %v; want %+v", got, err, first)
	}

	// Turning the default off is stored as such, not read back as the
	// default; history for runs without a person, off by default, is
	// stored on; the servers elicitation is turned off for are kept
	// sorted, whatever order they came in.
	clk.Set(clk.Now().Add(time.Minute))
	second := store.TenantSettings{TenantID: "tenant-1", DefaultRunner: false, AppsDisabled: true, HistoryForTriggers: true,
		ElicitationOff: []string{"tickets", "crm", "Écriture"}, UpdatedBy: "user-admin-2"}
	prev, err = s.PutTenantSettings(ctx, second, 1)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, prev); diff != "" {
		t.Errorf("second PutTenantSettings returned (-want +got):\n%s", diff)
	}
	if want := []string{"tickets", "crm", "Écriture"}; !cmp.Equal(second.ElicitationOff, want) {
		t.Errorf("PutTenantSettings reordered the caller's list to %q", second.ElicitationOff)
	}
	second.UpdatedAt, second.Version, second.ElicitationOff = clk.Now(), 2, []string{"crm", "tickets", "Écriture"}
	if got, err := s.TenantSettings(ctx, "tenant-1"); err != nil || !cmp.Equal(got, second) {
		t.Errorf("TenantSettings after a second put = %+v, %v; want %+v", got, err, second)
	}

	// What was turned off comes back as the replaced settings, off.
	third := first
	third.UpdatedAt = time.Time{}
	if prev, err := s.PutTenantSettings(ctx, third, 2); err != nil || !cmp.Equal(prev, second) {
		t.Errorf("third PutTenantSettings returned %+v, %v; want %+v", prev, err, second)
	}
	third.UpdatedAt, third.Version = clk.Now(), 3
	if got, err := s.TenantSettings(ctx, "tenant-1"); err != nil || !cmp.Equal(got, third) {
		t.Errorf("TenantSettings after a third put = %+v, %v; want %+v", got, err, third)
	}

	// Another tenant's settings are its own.
	for _, tenant := range []string{"tenant-2", "tenant-1x", "tenant-"} {
		if got, err := s.TenantSettings(ctx, tenant); err != nil || !cmp.Equal(got, store.TenantSettings{TenantID: tenant, DefaultRunner: true}) {
			t.Errorf("TenantSettings(%q) = %+v, %v; want the defaults", tenant, got, err)
		}
	}

	// A put over a version that is no longer stored loses to the change
	// that replaced it.
	for _, stale := range []uint64{0, 2, 4} {
		if prev, err := s.PutTenantSettings(ctx, second, stale); !errors.Is(err, store.ErrConflict) || !cmp.Equal(prev, store.TenantSettings{}) {
			t.Errorf("PutTenantSettings over version %d with 3 stored = %+v, %v; want ErrConflict", stale, prev, err)
		}
	}

	manyRules := make([]string, store.MaxTenantRules+1)
	for i := range manyRules {
		manyRules[i] = fmt.Sprintf("tool_%d", i)
	}
	manyServers := make([]string, store.MaxElicitationOff+1)
	for i := range manyServers {
		manyServers[i] = fmt.Sprintf("server-%d", i)
	}
	for name, bad := range map[string]store.TenantSettings{
		"no tenant":                            {DefaultRunner: true},
		"NUL in tenant":                        {TenantID: "tenant-1\x00"},
		"default group too long":               {TenantID: "tenant-1", DefaultGroup: strings.Repeat("g", 600)},
		"too many denied tools":                {TenantID: "tenant-1", DenyTools: manyRules},
		"too many patterns":                    {TenantID: "tenant-1", Redact: manyRules},
		"an empty denied tool":                 {TenantID: "tenant-1", DenyTools: []string{"crm/x", ""}},
		"a pattern too long":                   {TenantID: "tenant-1", Redact: []string{strings.Repeat("a", store.MaxTenantRuleText+1)}},
		"NUL in a pattern":                     {TenantID: "tenant-1", Redact: []string{"a\x00"}},
		"elicitation off for too many servers": {TenantID: "tenant-1", ElicitationOff: manyServers},
		"a server without a name":              {TenantID: "tenant-1", ElicitationOff: []string{"crm", ""}},
		"a server named twice":                 {TenantID: "tenant-1", ElicitationOff: []string{"crm", "tickets", "crm"}},
		"a server name too long":               {TenantID: "tenant-1", ElicitationOff: []string{strings.Repeat("s", 600)}},
		"NUL in a server name":                 {TenantID: "tenant-1", ElicitationOff: []string{"crm\x00"}},
	} {
		if prev, err := s.PutTenantSettings(ctx, bad, 3); !errors.Is(err, store.ErrInvalid) || !cmp.Equal(prev, store.TenantSettings{}) {
			t.Errorf("PutTenantSettings with %s = %+v, %v; want ErrInvalid", name, prev, err)
		}
	}
	if got, _ := s.TenantSettings(ctx, "tenant-1"); !cmp.Equal(got, third) {
		t.Errorf("refused puts changed the settings to %+v", got)
	}
	if _, err := s.TenantSettings(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("TenantSettings without tenant = %v, want ErrInvalid", err)
	}
}

func testTenantSettingsAndTheirAuditCommitTogether(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	rec := store.AuditRecord{Action: "access.settings.put", Actor: "user-admin", Fields: map[string]any{"defaultRunner": false}}
	if _, err := s.PutTenantSettings(ctx, store.TenantSettings{TenantID: "tenant-1"}, 0, rec); err != nil {
		t.Fatal(err)
	}
	want := rec
	want.Seq, want.Time, want.TenantID = 1, clk.Now(), "tenant-1"
	if diff := cmp.Diff([]store.AuditRecord{want}, auditOf(t, s, "tenant-1")); diff != "" {
		t.Errorf("Audit after PutTenantSettings (-want +got):\n%s", diff)
	}

	foreign := rec
	foreign.TenantID = "tenant-2"
	for name, c := range map[string]struct {
		ts  store.TenantSettings
		rec store.AuditRecord
	}{
		"invalid settings":               {store.TenantSettings{TenantID: "tenant-1", DefaultGroup: "g\x00"}, rec},
		"another tenant's audit record":  {store.TenantSettings{TenantID: "tenant-1", AppsDisabled: true}, foreign},
		"an audit record without action": {store.TenantSettings{TenantID: "tenant-1", AppsDisabled: true}, store.AuditRecord{}},
	} {
		if _, err := s.PutTenantSettings(ctx, c.ts, 1, c.rec); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutTenantSettings with %s = %v, want ErrInvalid", name, err)
		}
	}
	if got, err := s.TenantSettings(ctx, "tenant-1"); err != nil || got.Version != 1 || got.AppsDisabled || got.DefaultRunner {
		t.Errorf("after refused puts, settings = %+v, %v; want version 1 as first put", got, err)
	}
	if got := auditOf(t, s, ""); len(got) != 1 {
		t.Errorf("after refused puts, %d audit records, want 1: %+v", len(got), got)
	}
}

const permitAll = `permit (principal, action, resource);`

func testPolicySetVersions(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()

	if _, err := s.PolicySet(ctx, "tenant-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PolicySet of a tenant that stored none = %v, want ErrNotFound", err)
	}

	first := store.PolicySet{TenantID: "tenant-1", Text: permitAll, UpdatedBy: "user-admin", Version: 99}
	prev, err := s.PutPolicySet(ctx, first, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.PolicySet{TenantID: "tenant-1"}, prev); diff != "" {
		t.Errorf("first PutPolicySet returned (-want +got):\n%s", diff)
	}
	first.Version, first.UpdatedAt = 1, clk.Now() // set by the store
	if got, err := s.PolicySet(ctx, "tenant-1"); err != nil || !cmp.Equal(got, first) {
		t.Errorf("PolicySet after a put = %+v, %v; want %+v", got, err, first)
	}

	// A second admin who read no set, or version 1 after it changed,
	// does not overwrite what is stored.
	clk.Set(clk.Now().Add(time.Minute))
	second := store.PolicySet{TenantID: "tenant-1", Text: `forbid (principal, action, resource);`, UpdatedBy: "user-admin-2"}
	if _, err := s.PutPolicySet(ctx, second, 1); err != nil {
		t.Fatal(err)
	}
	second.Version, second.UpdatedAt = 2, clk.Now()
	for _, want := range []uint64{0, 1, 3} {
		stale := store.PolicySet{TenantID: "tenant-1", Text: "// lost update", UpdatedBy: "user-admin"}
		prev, err := s.PutPolicySet(ctx, stale, want)
		if !errors.Is(err, store.ErrConflict) || !cmp.Equal(prev, store.PolicySet{}) {
			t.Errorf("PutPolicySet over version %d with 2 stored = %+v, %v; want ErrConflict", want, prev, err)
		}
	}
	if got, err := s.PolicySet(ctx, "tenant-1"); err != nil || !cmp.Equal(got, second) {
		t.Errorf("PolicySet after conflicting puts = %+v, %v; want %+v", got, err, second)
	}

	// The stored version is the one replaced plus one.
	third := store.PolicySet{TenantID: "tenant-1", Text: permitAll + "\n// \x00 may be in a string"}
	prev, err = s.PutPolicySet(ctx, third, 2)
	if err != nil || !cmp.Equal(prev, second) {
		t.Errorf("PutPolicySet over version 2 = %+v, %v; want %+v", prev, err, second)
	}
	third.Version, third.UpdatedAt = 3, clk.Now()
	if got, err := s.PolicySet(ctx, "tenant-1"); err != nil || !cmp.Equal(got, third) {
		t.Errorf("PolicySet after the third put = %+v, %v; want %+v", got, err, third)
	}

	// Another tenant has none, and a first put of its own.
	for _, tenant := range []string{"tenant-2", "tenant-1x", "tenant-"} {
		if _, err := s.PolicySet(ctx, tenant); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("PolicySet(%q) = %v, want ErrNotFound", tenant, err)
		}
	}
	if _, err := s.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-2", Text: permitAll}, 0); err != nil {
		t.Errorf("first PutPolicySet of tenant-2: %v", err)
	}

	full := strings.Repeat("x", store.MaxPolicySetText)
	if _, err := s.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-3", Text: full}, 0); err != nil {
		t.Errorf("PutPolicySet of %d bytes: %v", len(full), err)
	}
	for name, bad := range map[string]store.PolicySet{
		"text one byte too long": {TenantID: "tenant-1", Text: full + "x"},
		"text not UTF-8":         {TenantID: "tenant-1", Text: "permit \xff"},
		"no tenant":              {Text: permitAll},
		"NUL in tenant":          {TenantID: "tenant-1\x00", Text: permitAll},
	} {
		if _, err := s.PutPolicySet(ctx, bad, 3); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutPolicySet with %s = %v, want ErrInvalid", name, err)
		}
	}
	if got, _ := s.PolicySet(ctx, "tenant-1"); !cmp.Equal(got, third) {
		t.Errorf("refused puts changed the policy set to version %d, %d bytes of text", got.Version, len(got.Text))
	}
	if _, err := s.PolicySet(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PolicySet without tenant = %v, want ErrInvalid", err)
	}
}

func testPolicySetAndItsAuditCommitTogether(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	rec := store.AuditRecord{Action: "access.policy_set.put", Actor: "user-admin"}
	if _, err := s.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-1", Text: permitAll}, 0, rec); err != nil {
		t.Fatal(err)
	}
	want := rec
	want.Seq, want.Time, want.TenantID = 1, clk.Now(), "tenant-1"
	if diff := cmp.Diff([]store.AuditRecord{want}, auditOf(t, s, "tenant-1")); diff != "" {
		t.Errorf("Audit after PutPolicySet (-want +got):\n%s", diff)
	}

	// Refused inside the transaction (a conflict) or before it (too long,
	// another tenant's record): no audit record either.
	if _, err := s.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-1", Text: "// stale"}, 0, rec); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale PutPolicySet = %v, want ErrConflict", err)
	}
	tooLong := store.PolicySet{TenantID: "tenant-1", Text: strings.Repeat("x", store.MaxPolicySetText+1)}
	if _, err := s.PutPolicySet(ctx, tooLong, 1, rec); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutPolicySet of too long a text = %v, want ErrInvalid", err)
	}
	foreign := rec
	foreign.TenantID = "tenant-2"
	if _, err := s.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-1", Text: "// other"}, 1, foreign); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("PutPolicySet with another tenant's audit record = %v, want ErrInvalid", err)
	}
	if got := auditOf(t, s, ""); len(got) != 1 {
		t.Errorf("after refused puts, %d audit records, want 1: %+v", len(got), got)
	}
	if got, err := s.PolicySet(ctx, "tenant-1"); err != nil || got.Text != permitAll || got.Version != 1 {
		t.Errorf("after refused puts, PolicySet = %+v, %v; want the first", got, err)
	}
}

// Access records are in the file, not only in memory: a reopened store
// has them all, and goes on numbering versions from where they were.
func testAccessRecordsSurviveReopen(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	binding := store.Binding{TenantID: "tenant-1", AgentID: store.AllAgents, Subject: "group-1", Kind: store.KindGroup,
		Role: store.RoleAdmin, DisplayName: "Admins", CreatedBy: "user-root"}
	putBindings(t, s, binding)
	binding.CreatedAt = clk.Now()
	settings := store.TenantSettings{TenantID: "tenant-1", DefaultRunner: false, AppsDisabled: true, UpdatedBy: "user-root"}
	if _, err := s.PutTenantSettings(ctx, settings, 0, store.AuditRecord{Action: "access.settings.put"}); err != nil {
		t.Fatal(err)
	}
	settings.UpdatedAt, settings.Version = clk.Now(), 1
	policy := store.PolicySet{TenantID: "tenant-1", Text: permitAll, UpdatedBy: "user-root"}
	if _, err := s.PutPolicySet(ctx, policy, 0, store.AuditRecord{Action: "access.policy_set.put"}); err != nil {
		t.Fatal(err)
	}
	policy.UpdatedAt, policy.Version = clk.Now(), 1
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openAt(t, bk, path, clk)
	if got, err := s.BindingsFor(ctx, "tenant-1", "sales", []string{"user-1", "group-1"}); err != nil || !cmp.Equal(got, []store.Binding{binding}) {
		t.Errorf("BindingsFor after reopen = %+v, %v; want %+v", got, err, binding)
	}
	if got, err := s.TenantSettings(ctx, "tenant-1"); err != nil || !cmp.Equal(got, settings) {
		t.Errorf("TenantSettings after reopen = %+v, %v; want %+v", got, err, settings)
	}
	if got, err := s.PolicySet(ctx, "tenant-1"); err != nil || !cmp.Equal(got, policy) {
		t.Errorf("PolicySet after reopen = %+v, %v; want %+v", got, err, policy)
	}
	if got := actions(auditOf(t, s, "tenant-1")); !cmp.Equal(got, []string{"access.settings.put", "access.policy_set.put"}) {
		t.Errorf("audit actions after reopen = %q", got)
	}
	if _, err := s.PutPolicySet(ctx, policy, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("PutPolicySet over version 0 after reopen = %v, want ErrConflict", err)
	}
	if prev, err := s.PutTenantSettings(ctx, settings, 1); err != nil || prev.Version != 1 {
		t.Errorf("PutTenantSettings after reopen replaced version %d (%v), want 1", prev.Version, err)
	}
}
