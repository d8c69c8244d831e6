package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"teamsbot/internal/pgtest"
	"teamsbot/store"
)

// pgQuery runs one query on the database at url and scans its one row.
func pgQuery(t testing.TB, url, sql string, dest ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if len(dest) == 0 {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return
	}
	if err := conn.QueryRow(ctx, sql).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Replicas starting together on a new database migrate it once: every
// open succeeds, and each version is applied once.
func TestPostgresReplicasMigrateOnce(t *testing.T) {
	url := pgtest.Database(t)
	const replicas = 4
	var wg sync.WaitGroup
	stores := make([]*store.Store, replicas)
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = store.OpenPostgres(context.Background(), url, store.Options{}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	var rows, distinct, latest int
	pgQuery(t, url, `SELECT count(*), count(DISTINCT version), max(version) FROM schema_migrations`, &rows, &distinct, &latest)
	if rows != distinct || rows != latest || latest < 1 {
		t.Errorf("schema_migrations has %d rows, %d versions, latest %d: want each version once", rows, distinct, latest)
	}
	for i, s := range stores {
		if err := s.Ping(context.Background()); err != nil {
			t.Errorf("replica %d: Ping: %v", i, err)
		}
	}
}

// A database a newer program migrated is refused, as a newer bbolt file is.
func TestPostgresRefusesNewerSchema(t *testing.T) {
	url := pgtest.Database(t)
	s, err := store.OpenPostgres(context.Background(), url, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	pgQuery(t, url, `INSERT INTO schema_migrations (version, name) VALUES (999, 'from the future')`)
	if _, err := store.OpenPostgres(context.Background(), url, store.Options{}); !errors.Is(err, store.ErrSchemaTooNew) {
		t.Fatalf("open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
}

// Two stores on one database are two replicas: what one writes the other
// reads, HTML stays once per SHA-256 across them, an arrival recorded by
// one is seen by the other, a cursor made by one pages on the other, and
// sweeping on both at once deletes each expired view once.
func TestPostgresTwoStoresShareEverything(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	clk := newClock()
	bk := postgresBackend()
	a := openAt(t, bk, url, clk)
	b := openAt(t, bk, url, clk)
	html := []byte("<!doctype html><p>shared</p>")
	for i, s := range []*store.Store{a, b, a} {
		id := []string{"view-a", "view-b", "view-c"}[i]
		run := store.Run{ID: "run-" + id, TenantID: "tenant-1", AgentID: "default"}
		if err := s.SaveRun(ctx, run, []store.NewView{{View: sampleView(id, clk.Now(), time.Hour), HTML: html}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*store.Store{a, b} {
		for _, id := range []string{"view-a", "view-b", "view-c"} {
			v, err := s.View(ctx, id)
			if err != nil {
				t.Fatalf("View(%s): %v", id, err)
			}
			if got, err := s.ViewHTML(ctx, v.HTMLSHA256); err != nil || string(got) != string(html) {
				t.Fatalf("ViewHTML: %q %v", got, err)
			}
		}
	}
	var docs int
	pgQuery(t, url, `SELECT count(*) FROM html`, &docs)
	if docs != 1 {
		t.Errorf("html: %d documents, want 1", docs)
	}
	if err := a.RecordArrival(ctx, "conv-1\x00act-1", 15*time.Minute); err != nil {
		t.Fatal(err)
	}
	if seen, err := b.Seen(ctx, "conv-1\x00act-1"); err != nil || !seen {
		t.Errorf("an arrival recorded on one replica is not seen on the other: %v %v", seen, err)
	}
	page, next, err := a.ActiveViews(ctx, "tenant-1", 1, "")
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("first page: %v %q %v", page, next, err)
	}
	if rest, _, err := b.ActiveViews(ctx, "tenant-1", 10, next); err != nil || len(rest) != 2 {
		t.Errorf("a cursor made on one replica, paged on the other: %d views, %v", len(rest), err)
	}
	clk.Advance(2 * time.Hour)
	var wg sync.WaitGroup
	stats := make([]store.SweepStats, 2)
	errs := make([]error, 2)
	for i, s := range []*store.Store{a, b} {
		wg.Go(func() { stats[i], errs[i] = s.Sweep(ctx) })
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("sweeps: %v, %v", errs[0], errs[1])
	}
	if views, docs := stats[0].Views+stats[1].Views, stats[0].HTML+stats[1].HTML; views != 3 || docs != 1 {
		t.Errorf("two sweeps removed %d views and %d documents, want 3 and 1", views, docs)
	}
	pgQuery(t, url, `SELECT count(*) FROM html`, &docs)
	if docs != 0 {
		t.Errorf("%d documents left after their views were swept", docs)
	}
}

// A connection the server dropped (a restart, a failover) costs no write:
// the pool drops it, and the write goes through on another.
func TestPostgresSurvivesDroppedConnections(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	clk := newClock()
	s := openAt(t, postgresBackend(), url, clk)
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	var name string
	pgQuery(t, url, `SELECT current_database()`, &name)
	pgQuery(t, url, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`, new(int))
	run := store.Run{ID: "run-1", TenantID: "tenant-1", AgentID: "default"}
	if err := s.SaveRun(ctx, run, []store.NewView{{View: sampleView("view-1", clk.Now(), time.Hour), HTML: []byte("<p>x</p>")}}, nil); err != nil {
		t.Fatalf("SaveRun after the server dropped the pool's connections: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// A database that cannot be reached fails the open with an error that
// does not print the password.
func TestPostgresUnreachableNamesNoPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, url := range []string{
		"postgres://teamsbot:s3cret-pw@127.0.0.1:1/teamsbot?connect_timeout=2",
		"postgres://teamsbot:s3cret-pw@%zz/teamsbot",
	} {
		_, err := store.OpenPostgres(ctx, url, store.Options{OpenTimeout: 2 * time.Second})
		if err == nil {
			t.Fatalf("open of %s succeeded", url)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("the error prints the password: %v", err)
		}
	}
}
