package store

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
)

// The reads and deletes of the history on PostgreSQL are answered from
// its indexes, in both plan modes: History reads the newest turns of one
// conversation and agent from history_by_conversation backwards, never
// sorting and never reading another conversation's; ClearHistory's two
// ranges and the sweep's batch each read their index too.
func TestHistoryPlanUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	s, err := openPostgres(ctx, pgtest.Database(t), Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	// 2,000 conversations of 20 turns, over two agents and four tenants.
	if _, err := pg.pool.Exec(ctx, `INSERT INTO history (tenant, conversation_id, agent, at_ns, data, messages)
		SELECT 'tenant-' || (i % 4), '19:conv-' || (i % 2000) || '@thread.tacv2', CASE WHEN i % 3 = 0 THEN 'sales' ELSE 'default' END,
			1793491200000000000 + i::bigint * 1000000000, convert_to('{"tokens":1}', 'UTF8'), convert_to('[]', 'UTF8')
		FROM generate_series(1, 40000) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.pool.Exec(ctx, `VACUUM ANALYZE history`); err != nil {
		t.Fatal(err)
	}
	const conv = "19:conv-7@thread.tacv2"
	threads := threadPrefix(conv)
	for _, q := range []struct {
		name, sql string
		args      []any
		index     *regexp.Regexp
	}{
		{"History", `SELECT seq, data, messages FROM history WHERE tenant = $1 AND conversation_id = $2 AND agent = $3 ORDER BY seq DESC LIMIT $4`,
			[]any{"tenant-3", conv, "default", 50}, regexp.MustCompile(`Index Scan Backward using history_by_conversation`)},
		{"ClearHistory", `DELETE FROM history WHERE tenant = $1 AND conversation_id = $2`,
			[]any{"tenant-3", conv}, regexp.MustCompile(`Index (Only )?Scan using history_by_conversation|Bitmap Index Scan on history_by_conversation`)},
		{"ClearHistory's threads", `DELETE FROM history WHERE tenant = $1 AND conversation_id >= $2 AND conversation_id < $3`,
			[]any{"tenant-3", threads, string(prefixEnd([]byte(threads)))},
			regexp.MustCompile(`Index (Only )?Scan using history_by_conversation|Bitmap Index Scan on history_by_conversation`)},
		{"the sweep", `DELETE FROM history WHERE seq IN (
			SELECT seq FROM history WHERE at_ns <= $1 ORDER BY at_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`,
			[]any{int64(1793491200000000000 + 100*1000000000), 1000}, regexp.MustCompile(`Index Scan using history_by_time`)},
	} {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			plan := explain(t, pg, mode, q.sql, q.args)
			if !q.index.MatchString(plan) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
				t.Errorf("%s (%s) is not read from its index in order:\n%s", q.name, mode, plan)
			}
		}
	}
}

// sweepHistoryBatches appends 50 turns of two days ago into s and sweeps
// them with a first batch of 7: the part of the sweep that deletes them
// takes at least four transactions, where an empty store's takes one.
func sweepHistoryBatches(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	empty, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := s.AppendTurn(ctx, HistoryTurn{TenantID: "t", ConversationID: fmt.Sprintf("c%d", i%5), AgentID: "a", RunID: "r",
			At: now.Add(-48*time.Hour + time.Duration(i)*time.Minute), Messages: json.RawMessage(`[]`)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.HistoryTurns != 50 || st.Transactions-empty.Transactions < 3 {
		t.Errorf("Sweep = %+v (an empty store's took %d transactions), want 50 turns in four transactions or more",
			st, empty.Transactions)
	}
}

// The sweep deletes turns in bounded batches, with their index entries,
// on bbolt.
func TestSweepHistoryInBatchesBolt(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }, RunRetention: 24 * time.Hour}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	sweepHistoryBatches(t, s.Store, now)
	for _, b := range []string{bucketHistory, bucketHistoryByTime} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d keys after the sweep, want 0", b, n)
		}
	}
}

// The same on PostgreSQL.
func TestSweepHistoryInBatchesPostgres(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openPostgres(context.Background(), pgtest.Database(t), Options{Now: func() time.Time { return now }, RunRetention: 24 * time.Hour}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	pg.sweepBatch = 7
	sweepHistoryBatches(t, s, now)
	var n int
	if err := pg.pool.QueryRow(context.Background(), `SELECT count(*) FROM history`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows left after the sweep (%v), want 0", n, err)
	}
}

// ClearHistory leaves no entry of history_by_time behind on bbolt, so
// that the sweep has nothing left of a cleared turn to find.
func TestClearHistoryDropsTimeIndexBolt(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "teamsbot.db"), schema())
	defer s.Close()
	for _, conv := range []string{"19:c@thread.tacv2", "19:c@thread.tacv2;messageid=1", "19:c@thread.tacv2x"} {
		if _, err := s.AppendTurn(ctx, HistoryTurn{TenantID: "t", ConversationID: conv, AgentID: "a", RunID: "r", Messages: json.RawMessage(`[]`)}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.ClearHistory(ctx, "t", "19:c@thread.tacv2"); err != nil || n != 2 {
		t.Fatalf("ClearHistory = %d, %v", n, err)
	}
	for _, b := range []string{bucketHistory, bucketHistoryByTime} {
		if n := bucketLen(t, s, b); n != 1 {
			t.Errorf("bucket %s has %d keys after the clear, want the other channel's 1", b, n)
		}
	}
}

// A version-7 file opens at version 8 with the buckets of conversation
// history, and what it held is still there.
func TestMigrationV8AddsHistoryBuckets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	old := mustOpen(t, path, schema()[:7])
	if err := old.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{bucketHistory, bucketHistoryByTime} {
		if hasBucket(t, old, b) {
			t.Fatalf("a v7 file already has %s", b)
		}
	}
	old.Close()
	s := mustOpen(t, path, schema())
	defer s.Close()
	if v := versionOf(t, s); v != uint64(len(schema())) || len(schema()) < 8 {
		t.Fatalf("version %d of %d, want the last", v, len(schema()))
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	tr, err := s.AppendTurn(ctx, HistoryTurn{TenantID: "t", ConversationID: "c", AgentID: "a", RunID: "r", Messages: json.RawMessage(`[]`), Tokens: 3})
	if err != nil || tr.Seq != 1 {
		t.Fatalf("AppendTurn = %+v, %v; want Seq 1", tr, err)
	}
	if got, err := s.History(ctx, "t", "c", "a", 10, 10); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("History = %+v, %v", got, err)
	}
}

// A database of version 3 opens at version 4 with the history table, and
// what it held is still there.
func TestPostgresMigrationV4AddsHistory(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	v3, err := openPostgres(ctx, url, Options{}, pgSchema()[:3])
	if err != nil {
		t.Fatal(err)
	}
	if err := v3.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	v3.Close()
	s, err := openPostgres(ctx, url, Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.be.(*pgStore).pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil || v != len(pgSchema()) || len(pgSchema()) < 4 {
		t.Fatalf("version %d of %d (%v), want the last", v, len(pgSchema()), err)
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	if tr, err := s.AppendTurn(ctx, HistoryTurn{TenantID: "t", ConversationID: "c", AgentID: "a", RunID: "r", Messages: json.RawMessage(`[]`)}); err != nil || tr.Seq != 1 {
		t.Fatalf("AppendTurn = %+v, %v; want Seq 1", tr, err)
	}
}

// The memo of decoded turn records gives what decoding gives: the same
// bytes again are served remembered, other bytes under the same Seq are
// decoded anew, and it keeps no more than its bound.
func TestTurnMemo(t *testing.T) {
	m := newTurnMemo(3)
	record := func(run string) []byte {
		enc, err := encodeTurn(HistoryTurn{TenantID: "t", ConversationID: "c", AgentID: "a", RunID: run, Tokens: 7,
			At: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Messages: json.RawMessage(`[]`)})
		if err != nil {
			t.Fatal(err)
		}
		return enc.json
	}
	for range 2 {
		got, err := m.decode(1, record("run-1"))
		if err != nil || got.RunID != "run-1" || got.Seq != 1 || got.Tokens != 7 || got.Messages != nil {
			t.Fatalf("decode = %+v, %v; want run-1, Seq 1, 7 tokens, no messages", got, err)
		}
	}
	if got, _ := m.decode(1, record("run-other")); got.RunID != "run-other" {
		t.Fatalf("other bytes under Seq 1 decoded as %q, want run-other", got.RunID)
	}
	for seq := uint64(2); seq < 10; seq++ {
		m.decode(seq, record(fmt.Sprint("run-", seq)))
	}
	if len(m.bySeq) != 3 || len(m.order) != 3 {
		t.Fatalf("the memo keeps %d records (%d in its ring), want its bound of 3", len(m.bySeq), len(m.order))
	}
	if _, ok := m.bySeq[9]; !ok {
		t.Error("the newest record is not kept")
	}
	if _, err := m.decode(20, []byte(`{"runId":`)); err == nil {
		t.Error("a malformed record decoded without an error")
	}
	if _, ok := m.bySeq[20]; ok {
		t.Error("a malformed record was kept")
	}
}
