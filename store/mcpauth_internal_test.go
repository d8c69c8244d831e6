package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
)

// sweepMCPAuthBatches puts 50 requests that expired two days ago into s
// and sweeps them with a first batch of 7: the part of the sweep that
// deletes them takes at least four transactions (7, then at most 14, 28,
// and what is left), where an empty store's sweep takes one for it.
func sweepMCPAuthBatches(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	empty, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		r := MCPAuthRequest{ID: fmt.Sprintf("r%02d", i), State: fmt.Sprintf("s%02d", i), TenantID: "t", UserID: "u", AgentID: "a",
			Server: "m", AuthURL: "https://as.example/authorize", CreatedAt: now.Add(-49 * time.Hour), ExpiresAt: now.Add(-48 * time.Hour)}
		if err := s.PutMCPAuthRequest(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.MCPAuthRequests != 50 || st.Transactions-empty.Transactions < 3 {
		t.Errorf("Sweep = %+v (an empty store's took %d transactions), want 50 requests in four transactions or more",
			st, empty.Transactions)
	}
}

// The sweep deletes authorization requests in bounded batches, with their
// index entries, on bbolt.
func TestSweepMCPAuthRequestsInBatchesBolt(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	sweepMCPAuthBatches(t, s.Store, now)
	for _, b := range []string{bucketMCPAuthRequests, bucketMCPAuthByState, bucketMCPAuthByExpiry} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d keys after the sweep, want 0", b, n)
		}
	}
}

// The same on PostgreSQL.
func TestSweepMCPAuthRequestsInBatchesPostgres(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openPostgres(context.Background(), pgtest.Database(t), Options{Now: func() time.Time { return now }}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	pg.sweepBatch = 7
	sweepMCPAuthBatches(t, s, now)
	var n int
	if err := pg.pool.QueryRow(context.Background(), `SELECT count(*) FROM mcp_auth_requests`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows left after the sweep (%v), want 0", n, err)
	}
}

// A version-6 file opens at version 7 with the buckets of MCP connections
// and authorization requests, and what it held is still there.
func TestMigrationV7AddsMCPBuckets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	old := mustOpen(t, path, schema()[:6])
	if err := old.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	mcpBuckets := []string{bucketMCPConnections, bucketMCPConnsByServer, bucketMCPAuthRequests, bucketMCPAuthByState, bucketMCPAuthByExpiry}
	for _, b := range mcpBuckets {
		if hasBucket(t, old, b) {
			t.Fatalf("a v6 file already has %s", b)
		}
	}
	old.Close()
	s := mustOpen(t, path, schema()[:7])
	defer s.Close()
	if v := versionOf(t, s); v != 7 {
		t.Fatalf("version %d, want 7", v)
	}
	for _, b := range mcpBuckets {
		if !hasBucket(t, s, b) {
			t.Errorf("no bucket %s after the migration", b)
		}
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	c := MCPConnection{TenantID: "t", UserID: "u", AgentID: "a", Server: "m", Sealed: []byte{1}, KeyID: "k"}
	if err := s.PutMCPConnection(ctx, c); err != nil {
		t.Fatal(err)
	}
	if cs, err := s.MCPConnections(ctx, MCPConnectionFilter{TenantID: "t"}); err != nil || len(cs) != 1 {
		t.Errorf("connections %v %v", cs, err)
	}
}
