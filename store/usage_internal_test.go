package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"teamsbot/internal/pgtest"
)

// usageFixture writes runs and more audit records than a backfill
// batch holds, and returns the overview they make.
func usageFixture(t *testing.T, s *Store) Overview {
	t.Helper()
	ctx := context.Background()
	start := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	var recs []AuditRecord
	for i := range migrateBatch + 2500 {
		at := start.Add(time.Duration(i) * time.Minute)
		recs = append(recs, AuditRecord{Time: at, TenantID: "t", Action: actionToolCall, Actor: "u",
			Fields: map[string]any{"server": "demo", "tool": fmt.Sprint("tool-", i%3), "result": []string{"ok", "error", "refused"}[i%3]}})
	}
	if err := s.Append(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := s.SaveRun(ctx, Run{ID: fmt.Sprint("r", i), TenantID: "t", UserID: fmt.Sprint("u", i%4), CreatedAt: start.Add(time.Duration(i) * time.Hour)}, nil,
			[]AuditRecord{{Time: start, TenantID: "t", Action: actionViewOpen, Actor: "u9"}}); err != nil {
			t.Fatal(err)
		}
	}
	o, err := s.Overview(ctx, "t", start.Truncate(24*time.Hour), start.AddDate(0, 0, 20))
	if err != nil {
		t.Fatal(err)
	}
	if o.Totals.Runs != 30 || o.Totals.CallsOK+o.Totals.CallsError+o.Totals.CallsRefused != int64(migrateBatch+2500) || o.People != 5 || o.Totals.ViewsOpened != 30 {
		t.Fatalf("the fixture's overview: %+v, people %d", o.Totals, o.People)
	}
	return o
}

// A file of version 8 holds runs and audit records but no rollup:
// opening it counts them, over more than one batch, by the rule new
// records are counted by.
func TestMigrationV9CountsWhatIsStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	s := mustOpen(t, path, schema())
	want := usageFixture(t, s.Store)
	// Back to version 8: no rollup.
	if err := s.boltStore.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket([]byte(bucketUsage)); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketMeta)).Put([]byte(keySchemaVersion), u64(8))
	}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = mustOpen(t, path, schema())
	defer s.Close()
	if v := versionOf(t, s); v != uint64(len(schema())) {
		t.Fatalf("version %d, want the last, %d", v, len(schema()))
	}
	got, err := s.Overview(ctx, "t", want.From, want.To)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overview after the migration:\n%+v, %v\nwant\n%+v", got, err, want)
	}
}

// The same on PostgreSQL: a database of version 4 gets the table, filled.
func TestPostgresMigrationV5CountsWhatIsStored(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s, err := openPostgres(ctx, url, Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	want := usageFixture(t, s)
	pool := s.be.(*pgStore).pool
	if _, err := pool.Exec(ctx, `DROP TABLE usage; DELETE FROM schema_migrations WHERE version >= 5`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = openPostgres(ctx, url, Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Overview(ctx, "t", want.From, want.To)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("overview after the migration:\n%+v, %v\nwant\n%+v", got, err, want)
	}
}
