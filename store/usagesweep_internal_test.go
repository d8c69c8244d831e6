package store

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"teamsbot/internal/pgtest"
)

// The sweep's batch of usage counters on PostgreSQL reads the oldest
// days from an index by day, in both plan modes, never the whole table
// (the primary key starts with the tenant, so it cannot find a day's rows
// of every tenant), and deletes each row it chose through the key.
func TestSweepUsagePlanUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	s, err := openPostgres(ctx, pgtest.Database(t), Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 200 tenants, 200 days, a few counters each: 120,000 rows.
	if _, err := pg.pool.Exec(ctx, `INSERT INTO usage (tenant, day, metric, label, n)
		SELECT convert_to('tenant-' || t, 'UTF8'), $1::integer + d, m, convert_to('user-' || (t + d) % 7, 'UTF8'), 1
		FROM generate_series(1, 200) AS t, generate_series(0, 199) AS d, unnest(ARRAY['runs', 'people', 'calls']) AS m`, usageDay(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.pool.Exec(ctx, `VACUUM ANALYZE usage`); err != nil {
		t.Fatal(err)
	}
	index := regexp.MustCompile(`(?s)Index (Only )?Scan using usage_by_day.*Index Scan using usage_pkey`)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, pg, mode, pgSweepUsage, []any{usageDay(t0) + 10, 1000})
		if !index.MatchString(plan) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Sort") {
			t.Errorf("the sweep of usage counters (%s) is not read from its index in order:\n%s", mode, plan)
		}
	}
}

// usageSweepTenants are tenants whose keys on bbolt are prefixes of one
// another's ("t", "t-a"), so that the sweep's seek past a tenant must
// not skip the next.
var usageSweepTenants = []string{"t", "t-a", "t-b", "tenant", "u", "z"}

// sweepUsageBatches writes a call a day at noon for each of
// usageSweepTenants over the 20 days before now's: by u-leaver on the 10
// days that ended before the audit retention's cutoff, by u-stay on the
// 10 after. Three counters a tenant and day (calls, tools, people): a
// sweep with a first batch of 7 deletes the 180 of the old days in four
// transactions or more, where an empty store's takes one, and leaves the
// overview of the days kept as it was.
func sweepUsageBatches(t *testing.T, s *Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	empty, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	today := now.Truncate(24 * time.Hour)
	var recs []AuditRecord
	for d := 1; d <= 20; d++ {
		user := "u-stay"
		if d > 10 {
			user = "u-leaver"
		}
		for _, tenant := range usageSweepTenants {
			recs = append(recs, AuditRecord{Time: today.AddDate(0, 0, -d).Add(12 * time.Hour), TenantID: tenant, Action: actionAppCall, Actor: user,
				Fields: map[string]any{"server": "demo", "tool": "echo", "result": "ok"}})
		}
	}
	if err := s.Append(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	before := map[string]Overview{}
	for _, tenant := range usageSweepTenants {
		o, err := s.Overview(ctx, tenant, today.AddDate(0, 0, -10), today)
		if err != nil || o.Totals.CallsOK != 10 || o.People != 1 {
			t.Fatalf("overview of %s before the sweep = %+v, %v; want 10 calls of one person", tenant, o, err)
		}
		before[tenant] = o
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsageCounters != len(usageSweepTenants)*10*3 || st.Transactions-empty.Transactions < 3 {
		t.Errorf("Sweep = %+v (an empty store's took %d transactions), want %d usage counters in four transactions or more",
			st, empty.Transactions, len(usageSweepTenants)*10*3)
	}
	for _, tenant := range usageSweepTenants {
		o, err := s.Overview(ctx, tenant, today.AddDate(0, 0, -10), today)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before[tenant], o); diff != "" {
			t.Errorf("overview of %s's days kept changed with the sweep (-before +after):\n%s", tenant, diff)
		}
	}
}

// The sweep deletes the usage counters of the old days in bounded
// batches on bbolt, every tenant's, and no counter names u-leaver after
// it.
func TestSweepUsageInBatchesBolt(t *testing.T) {
	now := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }, AuditRetention: 10 * 24 * time.Hour}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	sweepUsageBatches(t, s.Store, now)
	n := 0
	if err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketUsage)).ForEach(func(k, _ []byte) error {
			n++
			if bytes.Contains(k, []byte("u-leaver")) {
				t.Errorf("usage key %q names u-leaver after the sweep", k)
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if want := len(usageSweepTenants) * 10 * 3; n != want {
		t.Errorf("%d usage counters left, want the %d of the days kept", n, want)
	}
}

// The same on PostgreSQL.
func TestSweepUsageInBatchesPostgres(t *testing.T) {
	now := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	s, err := openPostgres(context.Background(), pgtest.Database(t), Options{Now: func() time.Time { return now }, AuditRetention: 10 * 24 * time.Hour}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	pg.sweepBatch = 7
	sweepUsageBatches(t, s, now)
	var n, leaver int
	if err := pg.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE position('u-leaver'::bytea IN label) > 0) FROM usage`).Scan(&n, &leaver); err != nil {
		t.Fatal(err)
	}
	if want := len(usageSweepTenants) * 10 * 3; n != want || leaver != 0 {
		t.Errorf("%d usage counters left, %d naming u-leaver; want the %d of the days kept, none naming u-leaver", n, leaver, want)
	}
}
