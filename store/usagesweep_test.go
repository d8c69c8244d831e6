package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// usageDays saves, for each of days days from d0 and each of two
// tenants, a run for user-<day> an hour into the day and a call of that
// person's view 22 hours later: four counters a tenant and day (runs,
// people, calls "ok", tools).
func usageDays(t *testing.T, s *store.Store, d0 time.Time, days int) {
	t.Helper()
	ctx := context.Background()
	for d := range days {
		for _, tenant := range []string{"tenant-1", "tenant-2"} {
			user := fmt.Sprintf("user-%02d", d)
			at := d0.AddDate(0, 0, d).Add(time.Hour)
			if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%s-%02d", tenant, d), TenantID: tenant, UserID: user, CreatedAt: at}, nil, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, store.AuditRecord{Time: at.Add(22 * time.Hour), TenantID: tenant, Action: "agent.mcp_app.call", Actor: user,
				Fields: map[string]any{"server": "demo", "tool": "echo", "result": "ok"}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// overviews is the overview of each tenant over [from, to).
func overviews(t *testing.T, s *store.Store, from, to time.Time) map[string]store.Overview {
	t.Helper()
	out := map[string]store.Overview{}
	for _, tenant := range []string{"tenant-1", "tenant-2"} {
		o, err := s.Overview(context.Background(), tenant, from, to)
		if err != nil {
			t.Fatal(err)
		}
		out[tenant] = o
	}
	return out
}

// The sweep deletes the usage counters of the days that ended at or
// before now minus the audit retention, counted, and keeps a day while
// any part of it is within the retention: the overview of the days kept
// is the same after the sweep (the runs it counted gone with their own
// shorter retention), and that of the days swept is empty. Kept forever
// when the audit records are.
func testSweepUsage(t *testing.T, bk backend) {
	ctx := context.Background()
	d0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clk := newClock()
	clk.Set(d0)
	s := openWith(t, bk, clk, store.Options{AuditRetention: 10 * 24 * time.Hour, RunRetention: 2 * 24 * time.Hour})
	forever := openWith(t, bk, clk, store.Options{AuditRetention: -1, RunRetention: -1})
	usageDays(t, s, d0, 14)
	usageDays(t, forever, d0, 14)
	end := d0.AddDate(0, 0, 14)
	kept := overviews(t, s, d0.AddDate(0, 0, 5), end)
	if o := kept["tenant-1"]; o.Totals.Runs != 9 || o.People != 9 || o.Totals.CallsOK != 9 {
		t.Fatalf("overview before the sweep = %+v, want 9 runs, calls and people", o.Totals)
	}
	everything := overviews(t, forever, d0, end)

	// The cutoff is 12:00 on day 5: days 0 to 4 ended before it, day 5
	// is partly within the retention (its call at 23:00 is kept).
	clk.Set(d0.AddDate(0, 0, 15).Add(12 * time.Hour))
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.UsageCounters != 2*5*4 || st.Audit != 2*5 {
		t.Errorf("sweep = %+v; want 40 usage counters (days 0 to 4 of two tenants) and 10 audit records", st)
	}
	if diff := cmp.Diff(kept, overviews(t, s, d0.AddDate(0, 0, 5), end)); diff != "" {
		t.Errorf("the overview of the days kept changed with the sweep (-before +after):\n%s", diff)
	}
	for tenant, o := range overviews(t, s, d0, d0.AddDate(0, 0, 5)) {
		if o.Totals != (store.DayUsage{}) || o.People != 0 || len(o.Tools) != 0 || len(o.Servers) != 0 {
			t.Errorf("overview of %s's swept days = %+v, want nothing", tenant, o)
		}
	}

	// At midnight at the end of day 15 the cutoff is the end of day 5:
	// day 5 has ended at the cutoff, and goes.
	clk.Set(d0.AddDate(0, 0, 16))
	if st, err = s.Sweep(ctx); err != nil || st.UsageCounters != 2*4 {
		t.Errorf("sweep at midnight = %+v, %v; want the 8 counters of day 5", st, err)
	}
	if o := overviews(t, s, d0, end)["tenant-2"]; o.Totals.Runs != 8 || o.People != 8 || o.Days[5].Runs != 0 || o.Days[6].Runs != 1 {
		t.Errorf("overview after the second sweep = %+v, want days 6 to 13 alone", o)
	}
	if st, err = s.Sweep(ctx); err != nil || st.UsageCounters != 0 {
		t.Errorf("a sweep with nothing past the retention = %+v, %v", st, err)
	}

	clk.Set(d0.AddDate(100, 0, 0))
	if st, err := forever.Sweep(ctx); err != nil || st.UsageCounters != 0 {
		t.Errorf("sweep with audit records kept forever = %+v, %v; want no usage counter removed", st, err)
	}
	if diff := cmp.Diff(everything, overviews(t, forever, d0, end)); diff != "" {
		t.Errorf("the overview kept forever changed with the sweep (-before +after):\n%s", diff)
	}
}
