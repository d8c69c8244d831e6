package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"teamsbot/store"
)

func hash64(c byte) string { return strings.Repeat(string(c), 64) }

func testAPIKeys(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	k := store.APIKey{ID: "k1", TenantID: "tenant-a", AgentID: "default", Name: "CI", Hash: hash64('a'), CreatedBy: "admin"}
	if err := s.PutAPIKey(ctx, k, store.AuditRecord{Action: "admin.apikey.create", Actor: "admin"}); err != nil {
		t.Fatal(err)
	}
	// The id is unique across tenants: the runs API finds a key by id.
	other := k
	other.TenantID = "tenant-b"
	if err := s.PutAPIKey(ctx, other); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same id again: %v, want store.ErrConflict", err)
	}
	bad := k
	bad.ID, bad.Hash = "k2", "short"
	if err := s.PutAPIKey(ctx, bad); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("short hash: %v", err)
	}
	got, err := s.APIKey(ctx, "k1")
	if err != nil || got.TenantID != "tenant-a" || got.Hash != hash64('a') || got.CreatedAt.IsZero() {
		t.Fatalf("store.APIKey: %+v %v", got, err)
	}
	if _, err := s.APIKey(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	if err := s.UseAPIKey(ctx, "tenant-a", "k1", at, store.AuditRecord{Action: "trigger.apikey.use"}); err != nil {
		t.Fatal(err)
	}
	// Another tenant cannot revoke it: the key is not found there.
	if _, err := s.RevokeAPIKey(ctx, "tenant-b", "k1", "eve", nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke from another tenant: %v", err)
	}
	var seen [2]store.APIKey
	rev, err := s.RevokeAPIKey(ctx, "tenant-a", "k1", "admin", func(b, a store.APIKey) []store.AuditRecord {
		seen = [2]store.APIKey{b, a}
		return []store.AuditRecord{{Action: "admin.apikey.revoke", Actor: "admin"}}
	})
	if err != nil || !rev.Revoked() || !rev.LastUsedAt.Equal(at) {
		t.Fatalf("revoke: %+v %v", rev, err)
	}
	if seen[0].Revoked() || !seen[1].Revoked() {
		t.Errorf("audit saw before %+v after %+v", seen[0], seen[1])
	}
	if _, err := s.RevokeAPIKey(ctx, "tenant-a", "k1", "admin", nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("revoke twice: %v", err)
	}
	if err := s.UseAPIKey(ctx, "tenant-a", "k1", at); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("use of a revoked key: %v", err)
	}
	recs, _ := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a"})
	if len(recs) != 3 {
		t.Errorf("%d audit records, want create, use and revoke", len(recs))
	}
	if keys, _ := s.APIKeys(ctx, "tenant-b"); len(keys) != 0 {
		t.Errorf("tenant-b sees %v", keys)
	}
}

func testTriggersAndRemovedConversation(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	mk := func(id, conv string) store.Trigger {
		return store.Trigger{ID: id, TenantID: "tenant-a", Name: "n-" + id, AgentID: "default", Cron: "0 9 * * *", TimeZone: "UTC",
			Text: "hi", ConversationID: conv, CreatedBy: "admin"}
	}
	for _, tr := range []store.Trigger{mk("t1", "conv-1"), mk("t2", "conv-1"), mk("t3", "conv-2")} {
		if err := s.PutTrigger(ctx, tr, store.AuditRecord{Action: "admin.trigger.create"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutTrigger(ctx, mk("t1", "conv-1")); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("same id: %v", err)
	}
	got, err := s.Trigger(ctx, "tenant-a", "t1")
	if err != nil || got.LastDue != got.CreatedAt || got.Version != 1 {
		t.Fatalf("store.Trigger: %+v %v", got, err)
	}
	if _, err := s.Trigger(ctx, "tenant-b", "t1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's trigger: %v", err)
	}
	// A claim that expects another LastDue writes nothing.
	due := got.LastDue.Add(time.Hour)
	claim := func(want time.Time) func(*store.Trigger) error {
		return func(tr *store.Trigger) error {
			if !tr.LastDue.Equal(want) {
				return store.ErrConflict
			}
			tr.LastDue = due
			return nil
		}
	}
	if _, err := s.UpdateTrigger(ctx, "tenant-a", "t1", claim(got.LastDue), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateTrigger(ctx, "tenant-a", "t1", claim(got.LastDue), nil); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second claim of the same due time: %v", err)
	}

	// The app is removed from conv-1: its reference goes, its history
	// and its threads' with it, and its two triggers are paused with the
	// reason, in one commit with the audit.
	if err := s.PutConversation(ctx, store.ConversationRef{Key: "tenant-a/conv-1", TenantID: "tenant-a", ConversationID: "conv-1"}); err != nil {
		t.Fatal(err)
	}
	for _, conv := range []string{"conv-1", "conv-1;messageid=7", "conv-10", "conv-2"} {
		for _, agent := range []string{"default", "sales"} {
			appendTurns(t, s, store.HistoryTurn{TenantID: "tenant-a", ConversationID: conv, AgentID: agent, RunID: "r", Messages: []byte(`[]`), Tokens: 1})
		}
	}
	other := store.HistoryTurn{TenantID: "tenant-b", ConversationID: "conv-1", AgentID: "default", RunID: "r", Messages: []byte(`[]`)}
	appendTurns(t, s, other)
	paused, err := s.RemoveConversation(ctx, "tenant-a/conv-1", "tenant-a", "conv-1", "the app was removed", func(p [][2]store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "bot.conversation.removed", Fields: map[string]any{"paused": len(p)}}}
	})
	if err != nil || len(paused) != 2 {
		t.Fatalf("RemoveConversation: %v %v", paused, err)
	}
	if _, err := s.Conversation(ctx, "tenant-a/conv-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("reference kept: %v", err)
	}
	for _, c := range []struct {
		tenant, conv string
		want         int
	}{
		{"tenant-a", "conv-1", 0}, {"tenant-a", "conv-1;messageid=7", 0},
		{"tenant-a", "conv-10", 1}, {"tenant-a", "conv-2", 1}, {"tenant-b", "conv-1", 1},
	} {
		for _, agent := range []string{"default", "sales"} {
			if c.tenant == "tenant-b" && agent == "sales" {
				continue
			}
			if got := history(t, s, c.tenant, c.conv, agent, 50, 1000); len(got) != c.want {
				t.Errorf("history of %s of %s (%s) after the removal: %d turns, want %d", c.conv, c.tenant, agent, len(got), c.want)
			}
		}
	}
	// Teams announces one uninstall twice: the second removal finds the
	// reference gone and writes nothing, its audit record included.
	called := false
	again, err := s.RemoveConversation(ctx, "tenant-a/conv-1", "tenant-a", "conv-1", "the app was removed", func(p [][2]store.Trigger) []store.AuditRecord {
		called = true
		return []store.AuditRecord{{Action: "bot.conversation.removed"}}
	})
	if !errors.Is(err, store.ErrNotFound) || len(again) != 0 || called {
		t.Errorf("second removal: %v %v, audit called %v; want ErrNotFound and nothing written", again, err, called)
	}
	active, _ := s.ActiveTriggers(ctx)
	if len(active) != 1 || active[0].ID != "t3" {
		t.Errorf("active after removal: %+v", active)
	}
	t1, _ := s.Trigger(ctx, "tenant-a", "t1")
	if !t1.Paused || t1.PausedReason != "the app was removed" {
		t.Errorf("t1 %+v", t1)
	}
	if err := s.DeleteTrigger(ctx, "tenant-a", "t1", func(store.Trigger) []store.AuditRecord { return []store.AuditRecord{{Action: "admin.trigger.delete"}} }); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Triggers(ctx, "tenant-a"); len(list) != 2 {
		t.Errorf("after delete: %+v", list)
	}
	if err := s.DeleteTrigger(ctx, "tenant-a", "t1", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	recs, _ := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a", Action: "bot.conversation.removed"})
	if len(recs) != 1 {
		t.Errorf("removal audit: %+v", recs)
	}
}

// Revoked keys leave with the audit records of their use.
func testSweepRevokedAPIKeys(t *testing.T, bk backend) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	s := openOpts(t, bk, bk.location(t), store.Options{Now: func() time.Time { return now }, AuditRetention: 24 * time.Hour})
	for _, id := range []string{"old", "new", "live"} {
		if err := s.PutAPIKey(ctx, store.APIKey{ID: id, TenantID: "t", AgentID: "a", Hash: hash64('b'), CreatedBy: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.RevokeAPIKey(ctx, "t", "old", "x", nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(47 * time.Hour)
	if _, err := s.RevokeAPIKey(ctx, "t", "new", "x", nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.APIKeys != 1 {
		t.Fatalf("sweep: %+v %v", st, err)
	}
	if _, err := s.APIKey(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("old revoked key kept: %v", err)
	}
	for _, id := range []string{"new", "live"} {
		if _, err := s.APIKey(ctx, id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}
