package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/internal/pgtest"
	"teamsbot/store"
)

// Everything a bbolt file holds reads the same from PostgreSQL after the
// copy; a second copy inserts nothing; the audit log's numbers go on; a
// database with records of its own is refused.
func TestCopyToPostgres(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	src, _ := openTemp(t, boltBackend(), clk)
	html := []byte("<p>copied</p>")
	v := sampleView("view-1", clk.Now(), store.ViewLifetime)
	v2 := sampleView("view-2", clk.Now(), store.ViewLifetime)
	run := store.Run{ID: "run-1", TenantID: "tenant-1", AgentID: "default", Text: "done"}
	audit := []store.AuditRecord{{TenantID: "tenant-1", Action: "agent.run", Actor: "user-1"}, {TenantID: "tenant-1", Action: "agent.mcp_app.view"}}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(src.SaveRun(ctx, run, []store.NewView{{View: v, HTML: html}, {View: v2, HTML: html}}, audit))
	must(src.PutConversation(ctx, store.ConversationRef{Key: "tenant-1/conv-1", TenantID: "tenant-1", ConversationID: "conv-1", Reference: []byte(`{}`)}))
	must(src.PutDelivery(ctx, store.Delivery{RunID: "run-1", ConversationKey: "tenant-1/conv-1", ConversationID: "conv-1", ActivityIDs: []string{"a1"}}))
	must(src.PutBinding(ctx, store.Binding{TenantID: "tenant-1", AgentID: "default", Subject: "user-1", Kind: store.KindUser, Role: store.RoleAdmin}))
	_, err := src.PutTenantSettings(ctx, store.TenantSettings{TenantID: "tenant-1", DefaultRunner: true}, 0)
	must(err)
	_, err = src.PutPolicySet(ctx, store.PolicySet{TenantID: "tenant-1", Text: "permit(principal, action, resource);"}, 0)
	must(err)
	must(src.PutAPIKey(ctx, store.APIKey{ID: "k1", TenantID: "tenant-1", AgentID: "default", Hash: hash64('c'), CreatedBy: "admin"}))
	must(src.PutTrigger(ctx, store.Trigger{ID: "t1", TenantID: "tenant-1", Name: "daily", AgentID: "default", Cron: "0 9 * * *",
		TimeZone: "UTC", Text: "hi", ConversationID: "conv-1", CreatedBy: "admin"}))
	must(src.RecordArrival(ctx, "conv-1\x00act-1", 15*time.Minute))
	conn := store.MCPConnection{TenantID: "tenant-1", UserID: "user-1", AgentID: "default", Server: "crm", UserName: "Ada",
		Sealed: []byte("\x00sealed\xff"), KeyID: "k1", Issuer: "https://as.example", Scopes: []string{"read"}}
	must(src.PutMCPConnection(ctx, conn))
	must(src.UseMCPConnection(ctx, "tenant-1", "user-1", "default", "crm", clk.Now().Add(time.Minute)))
	req := store.MCPAuthRequest{ID: "req-1", State: "state-1", TenantID: "tenant-1", UserID: "user-1", AgentID: "default", Server: "wiki",
		AuthURL: "https://as.example/authorize?state=state-1", ExpiresAt: clk.Now().Add(10 * time.Minute)}
	must(src.PutMCPAuthRequest(ctx, req))
	_, err = src.UpdateMCPAuthRequest(ctx, "req-1", func(r *store.MCPAuthRequest) error {
		r.Status, r.Answer = store.MCPAuthAnswered, []byte("sealed code")
		return nil
	}, nil)
	must(err)
	q := store.Question{ID: "q-1", TenantID: "tenant-1", UserID: "user-1", ConversationID: "conv-1", ServiceURL: "https://smba.example/",
		Shown: []byte(`{"message":"Which project?"}`), ExpiresAt: clk.Now().Add(10 * time.Minute)}
	must(src.PutQuestion(ctx, q))
	_, err = src.UpdateQuestion(ctx, "q-1", func(q *store.Question) error {
		q.Status, q.CardID, q.Answer = store.QuestionAnswered, "card-1", []byte(`{"action":"decline"}`)
		return nil
	}, nil)
	must(err)

	var turns []store.HistoryTurn
	// More turns than a write is tried again for (a copy that left the
	// history's numbers at 1 would fail the next append outright).
	for i, conv := range []string{"conv-1", "conv-1;messageid=1", "conv-1", "conv-2", "conv-3", "conv-3", "conv-3", "conv-3", "conv-3", "conv-3", "conv-3", "conv-3"} {
		tr, err := src.AppendTurn(ctx, store.HistoryTurn{TenantID: "tenant-1", ConversationID: conv, AgentID: "default", RunID: fmt.Sprintf("run-%d", i),
			UserID: "user-1", UserName: "Ada", Messages: json.RawMessage(`[{"role":"user","content":"\u0000 <b>"}]`), Tokens: 10 + i})
		must(err)
		turns = append(turns, tr)
	}

	url := pgtest.Database(t)
	dst := openAt(t, postgresBackend(), url, clk)
	counts, err := store.CopyToPostgres(ctx, src, dst)
	must(err)
	inserted := map[string]int{}
	for _, c := range counts {
		inserted[c.Kind] = c.Inserted
		if c.AlreadyThere != 0 || c.Skipped != 0 {
			t.Errorf("first copy of %s: %+v", c.Kind, c)
		}
	}
	want := map[string]int{"html": 1, "runs": 1, "views": 2, "audit records": 2, "conversations": 1, "deliveries": 1,
		"bindings": 1, "tenant settings": 1, "policy sets": 1, "API keys": 1, "triggers": 1, "activities": 1,
		"MCP connections": 1, "MCP authorization requests": 1, "questions": 1, "history turns": 12, "usage counters": 2}
	if diff := cmp.Diff(want, inserted); diff != "" {
		t.Errorf("inserted (-want +got):\n%s", diff)
	}
	same := func(what string, read func(s *store.Store) (any, error)) {
		t.Helper()
		a, errA := read(src)
		b, errB := read(dst)
		if errA != nil || errB != nil {
			t.Errorf("%s: %v / %v", what, errA, errB)
			return
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s differs after the copy (-bbolt +postgres):\n%s", what, diff)
		}
	}
	same("view", func(s *store.Store) (any, error) { return s.View(ctx, "view-1") })
	same("html", func(s *store.Store) (any, error) { return s.ViewHTML(ctx, shaHex(html)) })
	same("run", func(s *store.Store) (any, error) { return s.GetRun(ctx, "run-1") })
	same("audit", func(s *store.Store) (any, error) { return s.Audit(ctx, store.AuditQuery{TenantID: "tenant-1"}) })
	same("conversations", func(s *store.Store) (any, error) { return s.Conversations(ctx, "tenant-1") })
	same("delivery", func(s *store.Store) (any, error) { return s.Delivery(ctx, "run-1") })
	same("bindings", func(s *store.Store) (any, error) { return s.Bindings(ctx, "tenant-1", "") })
	same("settings", func(s *store.Store) (any, error) { return s.TenantSettings(ctx, "tenant-1") })
	same("policy", func(s *store.Store) (any, error) { return s.PolicySet(ctx, "tenant-1") })
	same("key", func(s *store.Store) (any, error) { return s.APIKey(ctx, "k1") })
	same("triggers", func(s *store.Store) (any, error) { return s.ActiveTriggers(ctx) })
	same("seen", func(s *store.Store) (any, error) { return s.Seen(ctx, "conv-1\x00act-1") })
	same("MCP connections", func(s *store.Store) (any, error) {
		return s.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: "tenant-1"})
	})
	same("overview", func(s *store.Store) (any, error) {
		return s.Overview(ctx, "tenant-1", clk.Now().AddDate(0, 0, -30), clk.Now().AddDate(0, 0, 1))
	})
	same("MCP server uses", func(s *store.Store) (any, error) { return s.MCPServerUses(ctx, "tenant-1") })
	same("MCP authorization request", func(s *store.Store) (any, error) { return s.MCPAuthRequest(ctx, "req-1") })
	same("MCP authorization request by state", func(s *store.Store) (any, error) { return s.MCPAuthRequestByState(ctx, "state-1") })
	same("question", func(s *store.Store) (any, error) { return s.Question(ctx, "q-1") })
	for _, conv := range []string{"conv-1", "conv-1;messageid=1", "conv-2", "conv-3"} {
		same("history of "+conv, func(s *store.Store) (any, error) { return s.History(ctx, "tenant-1", conv, "default", 50, 1000) })
	}
	if got, _ := dst.History(ctx, "tenant-1", "conv-1", "default", 50, 1000); len(got) != 2 || got[1].Seq != turns[2].Seq {
		t.Errorf("history after the copy: %+v, want the turns with their numbers", got)
	}
	if uses, _ := dst.MCPServerUses(ctx, "tenant-1"); len(uses) != 1 || !uses[0].LastUsedAt.Equal(clk.Now().Add(time.Minute)) {
		t.Errorf("server uses after the copy: %+v", uses)
	}

	again, err := store.CopyToPostgres(ctx, src, dst)
	must(err)
	for _, c := range again {
		if c.Inserted != 0 || c.AlreadyThere != c.Read {
			t.Errorf("second copy of %s: %+v, want nothing inserted", c.Kind, c)
		}
	}
	// The HTML is shared by two views: a sweep of one keeps it.
	must(dst.RevokeView(ctx, "tenant-1", "view-1", "admin"))
	if _, err := dst.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.ViewHTML(ctx, shaHex(html)); err != nil {
		t.Errorf("HTML of the other view lost: %v", err)
	}
	// The history's numbers go on after the largest copied.
	if tr, err := dst.AppendTurn(ctx, store.HistoryTurn{TenantID: "tenant-1", ConversationID: "conv-1", AgentID: "default", RunID: "run-after",
		Messages: json.RawMessage(`[]`)}); err != nil || tr.Seq != turns[len(turns)-1].Seq+1 {
		t.Errorf("the first turn after the copy: %+v, %v; want Seq %d", tr, err, turns[len(turns)-1].Seq+1)
	}
	recs, err := dst.Audit(ctx, store.AuditQuery{TenantID: "tenant-1"})
	must(err)
	if last := recs[len(recs)-1]; last.Action != store.AuditViewRevoke || last.Seq != 3 {
		t.Errorf("the first record after the copy: %+v, want seq 3", last)
	}

	used := openAt(t, postgresBackend(), pgtest.Database(t), clk)
	must(used.Append(ctx, store.AuditRecord{TenantID: "tenant-1", Action: "x"}))
	if _, err := store.CopyToPostgres(ctx, src, used); !errors.Is(err, store.ErrNotEmpty) {
		t.Errorf("copy into a database in use: %v, want ErrNotEmpty", err)
	}
}
