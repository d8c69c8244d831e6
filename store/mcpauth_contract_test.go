package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// sealedTokens stands for what the caller seals: bytes the store keeps
// as they are, NUL and all.
func sealedTokens(who string) []byte { return []byte("\x00sealed:" + who + "\xff") }

func mcpConn(user, agent, server string) store.MCPConnection {
	return store.MCPConnection{
		TenantID: "tenant-a", UserID: user, AgentID: agent, Server: server, UserName: "Name of " + user,
		Sealed: sealedTokens(user + "/" + agent + "/" + server), KeyID: "k1",
		Issuer: "https://login.example.com/" + server, Scopes: []string{"read", "write"},
	}
}

// connNames names connections as agent/server/user, in the order given.
func connNames(cs []store.MCPConnection) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, c.AgentID+"/"+c.Server+"/"+c.UserID)
	}
	return out
}

// words is the reason a refusal gives a person.
func words(err error) string {
	var w interface{ Words() string }
	if errors.As(err, &w) {
		return w.Words()
	}
	return ""
}

// Connections are put, read back as put, replaced, listed and deleted by
// every filter, each write with its audit records, and one tenant never
// sees another's.
func testMCPConnections(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	all := []store.MCPConnection{
		mcpConn("ada", "sales", "crm"), mcpConn("bob", "sales", "crm"), mcpConn("ada", "sales", "wiki"),
		mcpConn("ada", "default", "crm"), mcpConn("cyd", "default", "wiki"), mcpConn("bob", "default", "crm"),
	}
	for _, c := range all {
		if err := s.PutMCPConnection(ctx, c, store.AuditRecord{Action: "mcp.connect", Actor: c.UserID}); err != nil {
			t.Fatal(err)
		}
	}
	other := mcpConn("ada", "sales", "crm")
	other.TenantID = "tenant-ab"
	if err := s.PutMCPConnection(ctx, other); err != nil {
		t.Fatal(err)
	}

	got, err := s.MCPConnection(ctx, "tenant-a", "ada", "sales", "crm")
	if err != nil {
		t.Fatal(err)
	}
	want := all[0]
	want.ConnectedAt = clk.Now()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-put +got):\n%s", diff)
	}
	if _, err := s.MCPConnection(ctx, "tenant-a", "ada", "sales", "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown connection: %v, want ErrNotFound", err)
	}

	for _, c := range []struct {
		f    store.MCPConnectionFilter
		want []string
	}{
		{store.MCPConnectionFilter{TenantID: "tenant-a"},
			[]string{"default/crm/ada", "default/crm/bob", "default/wiki/cyd", "sales/crm/ada", "sales/crm/bob", "sales/wiki/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada"}, []string{"default/crm/ada", "sales/crm/ada", "sales/wiki/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", AgentID: "sales"}, []string{"sales/crm/ada", "sales/crm/bob", "sales/wiki/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", Server: "crm"}, []string{"default/crm/ada", "default/crm/bob", "sales/crm/ada", "sales/crm/bob"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", AgentID: "sales", Server: "crm"}, []string{"sales/crm/ada", "sales/crm/bob"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada", AgentID: "sales"}, []string{"sales/crm/ada", "sales/wiki/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada", Server: "crm"}, []string{"default/crm/ada", "sales/crm/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "bob", AgentID: "default", Server: "crm"}, []string{"default/crm/bob"}},
		{store.MCPConnectionFilter{TenantID: "tenant-ab"}, []string{"sales/crm/ada"}},
		{store.MCPConnectionFilter{TenantID: "tenant"}, []string{}},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "nobody"}, []string{}},
	} {
		cs, err := s.MCPConnections(ctx, c.f)
		if err != nil {
			t.Fatalf("%+v: %v", c.f, err)
		}
		if diff := cmp.Diff(c.want, connNames(cs)); diff != "" {
			t.Errorf("MCPConnections(%+v) (-want +got):\n%s", c.f, diff)
		}
	}

	// A replace keeps one connection, with what was put last.
	clk.Advance(time.Hour)
	again := all[0]
	again.Sealed, again.KeyID, again.RefreshedAt = sealedTokens("refreshed"), "k2", clk.Now()
	if err := s.PutMCPConnection(ctx, again, store.AuditRecord{Action: "mcp.refresh"}); err != nil {
		t.Fatal(err)
	}
	got, err = s.MCPConnection(ctx, "tenant-a", "ada", "sales", "crm")
	if err != nil || string(got.Sealed) != string(sealedTokens("refreshed")) || got.KeyID != "k2" || !got.RefreshedAt.Equal(clk.Now()) ||
		!got.ConnectedAt.Equal(clk.Now()) {
		t.Errorf("replaced: %+v %v", got, err)
	}
	if cs, _ := s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a", AgentID: "sales", Server: "crm"}); len(cs) != 2 {
		t.Errorf("after a replace: %v", connNames(cs))
	}

	// Deletes by each filter, each with its records of what it removed.
	var seen [][]string
	record := func(removed []store.MCPConnection) []store.AuditRecord {
		seen = append(seen, connNames(removed))
		return []store.AuditRecord{{Action: "mcp.disconnect", Fields: map[string]any{"count": len(removed)}}}
	}
	for _, c := range []struct {
		f    store.MCPConnectionFilter
		want int
	}{
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "bob", AgentID: "default", Server: "crm"}, 1},
		{store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada", Server: "crm"}, 2},
		{store.MCPConnectionFilter{TenantID: "tenant-a", AgentID: "default"}, 1},
		{store.MCPConnectionFilter{TenantID: "tenant-a", Server: "wiki"}, 1},
		{store.MCPConnectionFilter{TenantID: "tenant-a", AgentID: "sales", Server: "wiki"}, 0},
		{store.MCPConnectionFilter{TenantID: "tenant-a"}, 1},
		{store.MCPConnectionFilter{TenantID: "tenant-a"}, 0},
	} {
		n, err := s.DeleteMCPConnections(ctx, c.f, record)
		if err != nil || n != c.want {
			t.Errorf("DeleteMCPConnections(%+v) = %d, %v; want %d", c.f, n, err, c.want)
		}
	}
	wantSeen := [][]string{{"default/crm/bob"}, {"default/crm/ada", "sales/crm/ada"}, {"default/wiki/cyd"}, {"sales/wiki/ada"}, {"sales/crm/bob"}}
	if diff := cmp.Diff(wantSeen, seen); diff != "" {
		t.Errorf("what the audit function was given (-want +got):\n%s", diff)
	}
	if cs, _ := s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a"}); len(cs) != 0 {
		t.Errorf("left after deleting all: %v", connNames(cs))
	}
	if cs, _ := s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-ab"}); len(cs) != 1 {
		t.Errorf("another tenant's connection: %v", connNames(cs))
	}
	// A nil audit function writes no record.
	if err := s.PutMCPConnection(ctx, all[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.DeleteMCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a"}, nil); n != 1 || err != nil {
		t.Errorf("delete without audit: %d %v", n, err)
	}
	recs := auditOf(t, s, "tenant-a")
	wantActions := []string{"mcp.connect", "mcp.connect", "mcp.connect", "mcp.connect", "mcp.connect", "mcp.connect", "mcp.refresh",
		"mcp.disconnect", "mcp.disconnect", "mcp.disconnect", "mcp.disconnect", "mcp.disconnect"}
	if diff := cmp.Diff(wantActions, actions(recs)); diff != "" {
		t.Errorf("audit of tenant-a (-want +got):\n%s", diff)
	}
	if recs := auditOf(t, s, "tenant-ab"); len(recs) != 0 {
		t.Errorf("tenant-ab's audit log: %v", actions(recs))
	}
}

// MCPServerUses counts the people per agent and server and the last use,
// of one tenant.
func testMCPServerUses(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	if uses, err := s.MCPServerUses(ctx, "tenant-a"); err != nil || len(uses) != 0 {
		t.Fatalf("no connections: %v %v", uses, err)
	}
	t0 := clk.Now()
	for _, c := range []store.MCPConnection{
		mcpConn("ada", "sales", "crm"), mcpConn("bob", "sales", "crm"), mcpConn("cyd", "sales", "crm"),
		mcpConn("ada", "sales", "wiki"), mcpConn("ada", "default", "crm"),
	} {
		if err := s.PutMCPConnection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	other := mcpConn("eve", "sales", "crm")
	other.TenantID = "tenant-b"
	other.LastUsedAt = t0.Add(48 * time.Hour)
	if err := s.PutMCPConnection(ctx, other); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.UseMCPConnection(ctx, "tenant-a", "bob", "sales", "crm", t0.Add(time.Hour)))
	must(s.UseMCPConnection(ctx, "tenant-a", "ada", "sales", "crm", t0.Add(2*time.Hour)))
	must(s.UseMCPConnection(ctx, "tenant-a", "ada", "default", "crm", t0.Add(30*time.Minute)))
	uses, err := s.MCPServerUses(ctx, "tenant-a")
	must(err)
	want := []store.MCPServerUse{
		{AgentID: "default", Server: "crm", People: 1, LastUsedAt: t0.Add(30 * time.Minute)},
		{AgentID: "sales", Server: "crm", People: 3, LastUsedAt: t0.Add(2 * time.Hour)},
		{AgentID: "sales", Server: "wiki", People: 1},
	}
	if diff := cmp.Diff(want, uses); diff != "" {
		t.Errorf("MCPServerUses (-want +got):\n%s", diff)
	}
	if _, err := s.DeleteMCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada"}, nil); err != nil {
		t.Fatal(err)
	}
	uses, err = s.MCPServerUses(ctx, "tenant-a")
	must(err)
	want = []store.MCPServerUse{{AgentID: "sales", Server: "crm", People: 2, LastUsedAt: t0.Add(time.Hour)}}
	if diff := cmp.Diff(want, uses); diff != "" {
		t.Errorf("MCPServerUses after ada disconnected (-want +got):\n%s", diff)
	}
	if _, err := s.MCPServerUses(ctx, ""); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no tenant: %v", err)
	}
}

// A use is written only when the last one stored is a minute old or
// more; a use of a connection gone is ErrNotFound; a replace made from an
// older read keeps the later use.
func testMCPConnectionUseOneMinute(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	c := mcpConn("ada", "sales", "crm")
	if err := s.PutMCPConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		t.Helper()
		got, err := s.MCPConnection(ctx, "tenant-a", "ada", "sales", "crm")
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}
	t0 := clk.Now()
	for _, step := range []struct {
		at, want time.Time
	}{
		{t0, t0},                       // never used: written
		{t0.Add(59 * time.Second), t0}, // less than a minute later: nothing written
		{t0.Add(time.Minute - time.Nanosecond), t0},        // still less
		{t0.Add(time.Minute), t0.Add(time.Minute)},         // a minute: written
		{t0.Add(30 * time.Second), t0.Add(time.Minute)},    // earlier than stored: never back
		{t0.Add(3 * time.Minute), t0.Add(3 * time.Minute)}, // written
	} {
		writes := s.Stats().Writes
		if err := s.UseMCPConnection(ctx, "tenant-a", "ada", "sales", "crm", step.at); err != nil {
			t.Fatal(err)
		}
		if got := lastUsed(); !got.Equal(step.want) {
			t.Errorf("use at +%s: LastUsedAt +%s, want +%s", step.at.Sub(t0), got.Sub(t0), step.want.Sub(t0))
		}
		var wantWrites uint64
		if step.at.Equal(step.want) {
			wantWrites = 1
		}
		if wrote := s.Stats().Writes - writes; wrote != wantWrites {
			t.Errorf("use at +%s: %d writes, want %d", step.at.Sub(t0), wrote, wantWrites)
		}
	}
	// A zero time is the store's clock.
	clk.Advance(time.Hour)
	if err := s.UseMCPConnection(ctx, "tenant-a", "ada", "sales", "crm", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(clk.Now()) {
		t.Errorf("use at the zero time: %s, want the clock's %s", got, clk.Now())
	}
	// A refresh put from the record as read before the last use keeps it.
	stale := c
	stale.Sealed, stale.RefreshedAt = sealedTokens("refreshed"), clk.Now()
	if err := s.PutMCPConnection(ctx, stale); err != nil {
		t.Fatal(err)
	}
	if got := lastUsed(); !got.Equal(clk.Now()) {
		t.Errorf("a refresh moved LastUsedAt back to %s", got)
	}
	if _, err := s.DeleteMCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a", UserID: "ada"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.UseMCPConnection(ctx, "tenant-a", "ada", "sales", "crm", clk.Now().Add(time.Hour)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("use of a connection gone: %v, want ErrNotFound", err)
	}
	if _, err := s.MCPConnection(ctx, "tenant-a", "ada", "sales", "crm"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a use brought a deleted connection back: %v", err)
	}
}

// What the store refuses of connections, it refuses in words a person
// reads, and writes nothing.
func testMCPConnectionRefusals(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	for _, c := range []struct {
		name   string
		change func(c *store.MCPConnection)
		words  string
	}{
		{"no tenant", func(c *store.MCPConnection) { c.TenantID = "" }, "the tenant id is empty"},
		{"no user", func(c *store.MCPConnection) { c.UserID = "" }, "the user id is empty"},
		{"no agent", func(c *store.MCPConnection) { c.AgentID = "" }, "the agent id is empty"},
		{"no server", func(c *store.MCPConnection) { c.Server = "" }, "the MCP server is empty"},
		{"NUL in the server", func(c *store.MCPConnection) { c.Server = "crm\x00x" }, "the MCP server contains a NUL byte"},
		{"long user", func(c *store.MCPConnection) { c.UserID = strings.Repeat("u", 513) }, "the user id is 513 bytes long, at most 512"},
		{"no key id", func(c *store.MCPConnection) { c.KeyID = "" }, "the sealing key id is empty"},
		{"nothing sealed", func(c *store.MCPConnection) { c.Sealed = nil }, "the sealed token set is empty"},
		{"too much sealed", func(c *store.MCPConnection) { c.Sealed = make([]byte, 64<<10+1) }, "the sealed token set is 65537 bytes long, at most 65536"},
		{"bad user name", func(c *store.MCPConnection) { c.UserName = "\xff" }, "the user name is not valid UTF-8"},
		{"empty scope", func(c *store.MCPConnection) { c.Scopes = []string{"read", ""} }, "scope 2 is empty"},
	} {
		conn := mcpConn("ada", "sales", "crm")
		c.change(&conn)
		err := s.PutMCPConnection(ctx, conn, store.AuditRecord{Action: "mcp.connect"})
		if !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("%s: %v (words %q), want ErrInvalid saying %q", c.name, err, words(err), c.words)
		}
	}
	// A full 64 KiB is kept.
	full := mcpConn("ada", "sales", "crm")
	full.Sealed = make([]byte, 64<<10)
	if err := s.PutMCPConnection(ctx, full); err != nil {
		t.Errorf("64 KiB sealed: %v", err)
	}
	if cs, _ := s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-a"}); len(cs) != 1 {
		t.Errorf("connections stored: %v, want the full one alone", connNames(cs))
	}
	if recs := auditOf(t, s, "tenant-a"); len(recs) != 0 {
		t.Errorf("refused puts wrote audit records: %v", actions(recs))
	}
	// An audit record of another tenant is refused with the connection.
	c := mcpConn("bob", "sales", "crm")
	if err := s.PutMCPConnection(ctx, c, store.AuditRecord{TenantID: "tenant-b", Action: "mcp.connect"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("another tenant's audit record: %v", err)
	}
	if _, err := s.MCPConnection(ctx, "tenant-a", "bob", "sales", "crm"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("stored despite its refused audit record: %v", err)
	}
	for _, f := range []store.MCPConnectionFilter{{}, {UserID: "ada"}, {TenantID: "tenant-a", Server: "a\x00b"}} {
		if _, err := s.MCPConnections(ctx, f); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("MCPConnections(%+v): %v, want ErrInvalid", f, err)
		}
		if _, err := s.DeleteMCPConnections(ctx, f, nil); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("DeleteMCPConnections(%+v): %v, want ErrInvalid", f, err)
		}
	}
	if _, err := s.DeleteMCPConnections(ctx, store.MCPConnectionFilter{}, nil); words(err) != "the tenant id is empty" {
		t.Errorf("delete without a tenant says %q", words(err))
	}
	if _, err := s.MCPConnection(ctx, "tenant-a", "", "sales", "crm"); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("read without a user: %v", err)
	}
}

func authRequest(id, state string, created time.Time) store.MCPAuthRequest {
	return store.MCPAuthRequest{
		ID: id, State: state, TenantID: "tenant-a", UserID: "ada", UserName: "Ada", AgentID: "sales", Server: "crm", RunID: "run-1",
		AuthURL:   "https://login.example.com/authorize?client_id=c&state=" + state,
		CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute),
	}
}

// errAnsweredAlready is what a change refuses a request that is no longer
// waiting with.
var errAnsweredAlready = errors.New("answered already")

// answer is the change the callback makes: only a waiting or opened
// request takes an answer.
func answer(code string, at time.Time) func(r *store.MCPAuthRequest) error {
	return func(r *store.MCPAuthRequest) error {
		if r.Status != store.MCPAuthWaiting && r.Status != store.MCPAuthOpened {
			return errAnsweredAlready
		}
		r.Status, r.Answer, r.Iss, r.AnsweredAt = store.MCPAuthAnswered, []byte(code), "https://login.example.com", at
		return nil
	}
}

// Authorization requests are put once, read by id and by state, changed
// in one commit with their audit records, and a replayed answer leaves
// them as they were.
func testMCPAuthRequests(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	// A zero CreatedAt is the store's clock.
	r := authRequest("req-1", "state-1", time.Time{})
	r.ExpiresAt = clk.Now().Add(10 * time.Minute)
	if err := s.PutMCPAuthRequest(ctx, r, store.AuditRecord{Action: "mcp.auth.request", Actor: "ada"}); err != nil {
		t.Fatal(err)
	}
	want := r
	want.CreatedAt, want.Status, want.Version = clk.Now(), store.MCPAuthWaiting, 1
	for name, read := range map[string]func() (store.MCPAuthRequest, error){
		"by id":    func() (store.MCPAuthRequest, error) { return s.MCPAuthRequest(ctx, "req-1") },
		"by state": func() (store.MCPAuthRequest, error) { return s.MCPAuthRequestByState(ctx, "state-1") },
	} {
		got, err := read()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("read %s (-put +got):\n%s", name, diff)
		}
	}
	if _, err := s.MCPAuthRequest(ctx, "req-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := s.MCPAuthRequestByState(ctx, "state-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown state: %v", err)
	}
	// An id or a state stored already is refused, and nothing is written.
	dupID := authRequest("req-1", "state-9", clk.Now())
	if err := s.PutMCPAuthRequest(ctx, dupID, store.AuditRecord{Action: "mcp.auth.request"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same id again: %v, want ErrConflict", err)
	}
	dupState := authRequest("req-2", "state-1", clk.Now())
	err := s.PutMCPAuthRequest(ctx, dupState, store.AuditRecord{Action: "mcp.auth.request"})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same state again: %v, want ErrConflict", err)
	}
	if err != nil && strings.Contains(err.Error(), "state-1") {
		t.Errorf("the refusal quotes the state: %v", err)
	}
	if _, err := s.MCPAuthRequest(ctx, "req-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a request with a taken state was stored: %v", err)
	}
	if _, err := s.MCPAuthRequestByState(ctx, "state-9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a request with a taken id was stored by its state: %v", err)
	}

	// Opened, then answered; what cannot change stays.
	clk.Advance(time.Minute)
	opened, err := s.UpdateMCPAuthRequest(ctx, "req-1", func(r *store.MCPAuthRequest) error {
		r.Status, r.OpenedAt = store.MCPAuthOpened, clk.Now()
		r.State, r.UserID, r.TenantID, r.Version = "state-moved", "eve", "tenant-b", 40
		return nil
	}, nil)
	if err != nil || opened.Status != store.MCPAuthOpened || opened.Version != 2 || opened.State != "state-1" || opened.UserID != "ada" ||
		opened.TenantID != "tenant-a" {
		t.Fatalf("opened: %+v %v", opened, err)
	}
	if _, err := s.MCPAuthRequestByState(ctx, "state-moved"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the state moved: %v", err)
	}
	clk.Advance(time.Minute)
	var before, after store.MCPAuthRequest
	answered, err := s.UpdateMCPAuthRequest(ctx, "req-1", answer("sealed-code", clk.Now()), func(b, a store.MCPAuthRequest) []store.AuditRecord {
		before, after = b, a
		return []store.AuditRecord{{Action: "mcp.auth.answer", Actor: a.UserID}}
	})
	if err != nil || answered.Status != store.MCPAuthAnswered || answered.Version != 3 || string(answered.Answer) != "sealed-code" {
		t.Fatalf("answered: %+v %v", answered, err)
	}
	if before.Status != store.MCPAuthOpened || after.Status != store.MCPAuthAnswered || after.Version != 3 {
		t.Errorf("audit saw before %s/%d, after %s/%d", before.Status, before.Version, after.Status, after.Version)
	}
	stored, err := s.MCPAuthRequestByState(ctx, "state-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(answered, stored); diff != "" {
		t.Errorf("stored after the answer (-returned +stored):\n%s", diff)
	}
	// A replayed callback: the change refuses, its error comes back as
	// it is, and the request stays as it was.
	audited := false
	got, err := s.UpdateMCPAuthRequest(ctx, "req-1", answer("replayed-code", clk.Now()), func(b, a store.MCPAuthRequest) []store.AuditRecord {
		audited = true
		return []store.AuditRecord{{Action: "mcp.auth.answer"}}
	})
	if err != errAnsweredAlready {
		t.Errorf("replay: %v, want the change's own error", err)
	}
	if got.ID != "" || audited {
		t.Errorf("replay returned %+v, audit called %v", got, audited)
	}
	again, err := s.MCPAuthRequest(ctx, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stored, again); diff != "" {
		t.Errorf("the replay changed the request (-before +after):\n%s", diff)
	}
	// The run takes the answer.
	done, err := s.UpdateMCPAuthRequest(ctx, "req-1", func(r *store.MCPAuthRequest) error {
		r.Status = store.MCPAuthDone
		return nil
	}, nil)
	if err != nil || done.Status != store.MCPAuthDone || done.Version != 4 {
		t.Errorf("done: %+v %v", done, err)
	}
	if _, err := s.UpdateMCPAuthRequest(ctx, "req-9", answer("x", clk.Now()), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of an unknown request: %v", err)
	}
	// An error answered by the authorization server is cut to 1 KiB on
	// a character's boundary, marked as cut; bytes that are not UTF-8
	// and NUL bytes are replaced.
	if err := s.PutMCPAuthRequest(ctx, authRequest("req-3", "state-3", clk.Now())); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("é", 600) // 1,200 bytes
	refused, err := s.UpdateMCPAuthRequest(ctx, "req-3", func(r *store.MCPAuthRequest) error {
		r.Status, r.Error = store.MCPAuthAnswered, "access_denied:\x00\xff "+long
		return nil
	}, nil)
	if err != nil || len(refused.Error) > 1024 || len(refused.Error) < 1020 || !strings.HasPrefix(refused.Error, "access_denied:\uFFFD\uFFFD éé") ||
		!strings.HasSuffix(refused.Error, "é…") {
		t.Errorf("a long error: %d bytes %q, %v", len(refused.Error), refused.Error, err)
	}
	if stored, _ := s.MCPAuthRequest(ctx, "req-3"); stored.Error != refused.Error {
		t.Errorf("stored error %q, returned %q", stored.Error, refused.Error)
	}
	recs := auditOf(t, s, "tenant-a")
	if diff := cmp.Diff([]string{"mcp.auth.request", "mcp.auth.answer"}, actions(recs)); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

// What the store refuses of authorization requests, it refuses in words.
func testMCPAuthRequestRefusals(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	now := clk.Now()
	for _, c := range []struct {
		name   string
		change func(r *store.MCPAuthRequest)
		words  string
	}{
		{"no id", func(r *store.MCPAuthRequest) { r.ID = "" }, "the request id is empty"},
		{"no state", func(r *store.MCPAuthRequest) { r.State = "" }, "the OAuth state is empty"},
		{"no tenant", func(r *store.MCPAuthRequest) { r.TenantID = "" }, "the tenant id is empty"},
		{"no user", func(r *store.MCPAuthRequest) { r.UserID = "" }, "the user id is empty"},
		{"no agent", func(r *store.MCPAuthRequest) { r.AgentID = "" }, "the agent id is empty"},
		{"no server", func(r *store.MCPAuthRequest) { r.Server = "" }, "the MCP server is empty"},
		{"no URL", func(r *store.MCPAuthRequest) { r.AuthURL = "" }, "the authorization URL is empty"},
		{"long URL", func(r *store.MCPAuthRequest) { r.AuthURL = "https://x/?" + strings.Repeat("a", 8<<10) }, "the authorization URL is 8203 bytes long, at most 8192"},
		{"long answer", func(r *store.MCPAuthRequest) { r.Answer = make([]byte, 8<<10+1) }, "the answer is 8193 bytes long, at most 8192"},
		{"unknown status", func(r *store.MCPAuthRequest) { r.Status = "lost" }, `the status "lost" is none of waiting, opened, answered, done, refused, expired`},
		{"no expiry", func(r *store.MCPAuthRequest) { r.ExpiresAt = time.Time{} }, "the request has no expiry"},
		{"expires when made", func(r *store.MCPAuthRequest) { r.ExpiresAt = r.CreatedAt },
			"the request expires at 2026-03-01T09:00:00Z, not after it was made at 2026-03-01T09:00:00Z"},
		{"expires before made", func(r *store.MCPAuthRequest) { r.ExpiresAt = r.CreatedAt.Add(-time.Hour) },
			"the request expires at 2026-03-01T08:00:00Z, not after it was made at 2026-03-01T09:00:00Z"},
	} {
		r := authRequest("req-1", "state-1", now)
		c.change(&r)
		err := s.PutMCPAuthRequest(ctx, r, store.AuditRecord{Action: "mcp.auth.request"})
		if !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("%s: %v (words %q), want ErrInvalid saying %q", c.name, err, words(err), c.words)
		}
	}
	if _, err := s.MCPAuthRequest(ctx, "req-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused request was stored: %v", err)
	}
	if recs := auditOf(t, s, "tenant-a"); len(recs) != 0 {
		t.Errorf("refused puts wrote audit records: %v", actions(recs))
	}
	// A change that breaks a rule writes nothing either.
	if err := s.PutMCPAuthRequest(ctx, authRequest("req-1", "state-1", now)); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdateMCPAuthRequest(ctx, "req-1", func(r *store.MCPAuthRequest) error {
		r.Status, r.Answer = "", []byte("x")
		return nil
	}, nil)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(words(err), `the status "" is none of`) {
		t.Errorf("an update to no status: %v", err)
	}
	if got, _ := s.MCPAuthRequest(ctx, "req-1"); got.Version != 1 || got.Answer != nil {
		t.Errorf("a refused update was written: %+v", got)
	}
	for _, id := range []string{"", "a\x00b"} {
		if _, err := s.MCPAuthRequest(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("MCPAuthRequest(%q): %v", id, err)
		}
		if _, err := s.MCPAuthRequestByState(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("MCPAuthRequestByState(%q): %v", id, err)
		}
	}
}

// Of callbacks answering one request at once, each requiring it waiting,
// one wins and the others see the answer it left; of requests made at
// once with one state, one is stored.
func testMCPAuthRequestConcurrency(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	const rounds, callers = 5, 4
	for round := range rounds {
		id := fmt.Sprintf("req-%d", round)
		if err := s.PutMCPAuthRequest(ctx, authRequest(id, "state-"+id, clk.Now())); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				<-start
				_, errs[i] = s.UpdateMCPAuthRequest(ctx, id, func(r *store.MCPAuthRequest) error {
					if r.Status != store.MCPAuthWaiting {
						return errAnsweredAlready
					}
					r.Status, r.Answer = store.MCPAuthAnswered, fmt.Appendf(nil, "code-%d", i)
					return nil
				}, func(_, a store.MCPAuthRequest) []store.AuditRecord {
					return []store.AuditRecord{{Action: "mcp.auth.answer", Fields: map[string]any{"answer": string(a.Answer)}}}
				})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Errorf("round %d: callers %d and %d both answered", round, winner, i)
			case err != errAnsweredAlready:
				t.Errorf("round %d: caller %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody answered: %v", round, errs)
		}
		got, err := s.MCPAuthRequest(ctx, id)
		if err != nil || got.Version != 2 || string(got.Answer) != fmt.Sprintf("code-%d", winner) {
			t.Errorf("round %d: stored %+v %v, want the answer of caller %d at version 2", round, got, err, winner)
		}
	}
	if recs := auditOf(t, s, "tenant-a"); len(recs) != rounds {
		t.Errorf("%d audit records, want one per round's winner", len(recs))
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() {
			<-start
			errs[i] = s.PutMCPAuthRequest(ctx, authRequest(fmt.Sprintf("twin-%d", i), "one-state", clk.Now()))
		})
	}
	close(start)
	wg.Wait()
	stored := 0
	for i, err := range errs {
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("put %d: %v", i, err)
		}
	}
	if stored != 1 {
		t.Errorf("%d requests stored with one state, want 1", stored)
	}
	if _, err := s.MCPAuthRequestByState(ctx, "one-state"); err != nil {
		t.Errorf("by the shared state: %v", err)
	}
}

// A sweep deletes the requests a day after they expired, whatever their
// status, and counts them; their state is free again.
func testSweepMCPAuthRequests(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	t0 := clk.Now()
	for i, life := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 25 * time.Hour} {
		r := authRequest(fmt.Sprintf("req-%d", i), fmt.Sprintf("state-%d", i), t0)
		r.ExpiresAt = t0.Add(life)
		if i == 1 {
			r.Status = store.MCPAuthDone
		}
		if err := s.PutMCPAuthRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// A request given more time is kept by its new expiry alone.
	if _, err := s.UpdateMCPAuthRequest(ctx, "req-0", func(r *store.MCPAuthRequest) error {
		r.ExpiresAt = t0.Add(2 * time.Hour)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	// A day after the first expired, less a nanosecond: nothing goes.
	clk.Set(t0.Add(10*time.Minute + 24*time.Hour - time.Nanosecond))
	st, err := s.Sweep(ctx)
	if err != nil || st.MCPAuthRequests != 0 {
		t.Fatalf("sweep before a day: %+v %v", st, err)
	}
	// A day after the second expired: it goes, and the one given more
	// time stays.
	clk.Set(t0.Add(10*time.Minute + 24*time.Hour))
	st, err = s.Sweep(ctx)
	if err != nil || st.MCPAuthRequests != 1 {
		t.Fatalf("sweep: %+v %v, want 1 request", st, err)
	}
	// A day after the extended one expired, and the third: both go.
	clk.Set(t0.Add(2*time.Hour + 24*time.Hour))
	if st, err = s.Sweep(ctx); err != nil || st.MCPAuthRequests != 2 {
		t.Fatalf("sweep: %+v %v, want 2 requests", st, err)
	}
	for i, kept := range []bool{false, false, false, true} {
		id, state := fmt.Sprintf("req-%d", i), fmt.Sprintf("state-%d", i)
		_, err := s.MCPAuthRequest(ctx, id)
		_, serr := s.MCPAuthRequestByState(ctx, state)
		if kept && (err != nil || serr != nil) {
			t.Errorf("%s swept too soon: %v / %v", id, err, serr)
		}
		if !kept && (!errors.Is(err, store.ErrNotFound) || !errors.Is(serr, store.ErrNotFound)) {
			t.Errorf("%s kept: %v / %v", id, err, serr)
		}
	}
	if err := s.PutMCPAuthRequest(ctx, authRequest("req-new", "state-0", clk.Now())); err != nil {
		t.Errorf("a swept request's state: %v", err)
	}
	clk.Advance(100 * 24 * time.Hour)
	st, err = s.Sweep(ctx)
	if err != nil || st.MCPAuthRequests != 2 {
		t.Errorf("the last sweep: %+v %v, want 2", st, err)
	}
}
