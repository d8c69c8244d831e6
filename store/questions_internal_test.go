package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
)

// testQuestion is a question asked at created that waits ten minutes.
func testQuestion(id string, created time.Time) Question {
	return Question{ID: id, TenantID: "t", UserID: "u", ConversationID: "c", ServiceURL: "https://smba.example/", Shown: []byte(`{}`),
		CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute)}
}

// sweepQuestionBatches puts 50 questions that expired two days ago into
// s and sweeps them with a first batch of 7: the part of the sweep that
// deletes them takes at least four transactions (7, then at most 14, 28,
// and what is left), where an empty store's sweep takes one for it.
func sweepQuestionBatches(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	empty, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.PutQuestion(ctx, testQuestion(fmt.Sprintf("q%02d", i), now.Add(-49*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Questions != 50 || st.Transactions-empty.Transactions < 3 {
		t.Errorf("Sweep = %+v (an empty store's took %d transactions), want 50 questions in four transactions or more",
			st, empty.Transactions)
	}
}

// The sweep deletes questions in bounded batches, with their index
// entries, on bbolt.
func TestSweepQuestionsInBatchesBolt(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	sweepQuestionBatches(t, s.Store, now)
	for _, b := range []string{bucketQuestions, bucketQuestionsByExpiry} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d keys after the sweep, want 0", b, n)
		}
	}
}

// The same on PostgreSQL.
func TestSweepQuestionsInBatchesPostgres(t *testing.T) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openPostgres(context.Background(), pgtest.Database(t), Options{Now: func() time.Time { return now }}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	pg.sweepBatch = 7
	sweepQuestionBatches(t, s, now)
	var n int
	if err := pg.pool.QueryRow(context.Background(), `SELECT count(*) FROM questions`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows left after the sweep (%v), want 0", n, err)
	}
}

// A version-9 file opens at version 10 with the buckets of questions, and
// what it held is still there.
func TestMigrationV10AddsQuestionBuckets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	old := mustOpen(t, path, schema()[:9])
	if err := old.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	buckets := []string{bucketQuestions, bucketQuestionsByExpiry}
	for _, b := range buckets {
		if hasBucket(t, old, b) {
			t.Fatalf("a v9 file already has %s", b)
		}
	}
	old.Close()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(ctx, path, Options{Now: func() time.Time { return now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v := versionOf(t, s); v != uint64(len(schema())) || len(schema()) < 10 {
		t.Fatalf("version %d of %d, want the last", v, len(schema()))
	}
	for _, b := range buckets {
		if !hasBucket(t, s, b) {
			t.Errorf("no bucket %s after the migration", b)
		}
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	if err := s.PutQuestion(ctx, testQuestion("q", now)); err != nil {
		t.Fatal(err)
	}
	if q, err := s.Question(ctx, "q"); err != nil || q.Version != 1 || q.Status != QuestionWaiting {
		t.Errorf("Question = %+v, %v", q, err)
	}
}

// A database of version 6 opens at version 7 with the questions table,
// and what it held is still there.
func TestPostgresMigrationV7AddsQuestions(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	v6, err := openPostgres(ctx, url, Options{}, pgSchema()[:6])
	if err != nil {
		t.Fatal(err)
	}
	if err := v6.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	var exists bool
	if err := v6.be.(*pgStore).pool.QueryRow(ctx, `SELECT to_regclass('questions') IS NOT NULL`).Scan(&exists); err != nil || exists {
		t.Fatalf("a version 6 database has the questions table (%v)", err)
	}
	v6.Close()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openPostgres(ctx, url, Options{Now: func() time.Time { return now }}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.be.(*pgStore).pool.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil || v != len(pgSchema()) || len(pgSchema()) < 7 {
		t.Fatalf("version %d of %d (%v), want the last", v, len(pgSchema()), err)
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	if err := s.PutQuestion(ctx, testQuestion("q", now)); err != nil {
		t.Fatal(err)
	}
	if q, err := s.Question(ctx, "q"); err != nil || q.Version != 1 || q.Status != QuestionWaiting {
		t.Errorf("Question = %+v, %v", q, err)
	}
}
