package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"teamsbot/store"
)

func openWith(t *testing.T, bk backend, clk *testClock, opts store.Options) *store.Store {
	t.Helper()
	opts.Now = clk.Now
	s, err := bk.open(context.Background(), bk.location(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// retentionData is 48 runs made an hour apart (deliveries for the even
// ones) and 48 audit records an hour apart, over two tenants. Run 3 has a
// view open for 20 days, run 7 one open for the usual 7 days, run 5 one
// revoked; the others have none.
func retentionData(t *testing.T, s *store.Store, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	tenants := []string{"tenant-1", "tenant-2"}
	for i := range 48 {
		created := t0.Add(time.Duration(i) * time.Hour)
		run := store.Run{ID: fmt.Sprintf("run-%02d", i), TenantID: tenants[i%2], CreatedAt: created}
		var views []store.NewView
		life := map[int]time.Duration{3: 20 * 24 * time.Hour, 5: 20 * 24 * time.Hour, 7: store.ViewLifetime}[i]
		if life > 0 {
			v := sampleView(fmt.Sprintf("view-%02d", i), created, life)
			v.TenantID = run.TenantID
			views = append(views, store.NewView{View: v, HTML: fmt.Appendf(nil, "<p>%d</p>", i)})
		}
		if err := s.SaveRun(ctx, run, views, nil); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := s.PutDelivery(ctx, store.Delivery{RunID: run.ID, ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{"1:1"}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Append(ctx, store.AuditRecord{Time: created, TenantID: tenants[i%2], Action: "agent.tool.call", Actor: "user-1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RevokeView(ctx, "tenant-2", "view-05", "admin-1",
		store.AuditRecord{Time: t0.Add(47 * time.Hour), Action: store.AuditViewRevoke, Actor: "admin-1"}); err != nil {
		t.Fatal(err)
	}
}

// kept checks that exactly the runs (with their deliveries) and audit
// records for which keep says so are stored, through every way they are
// read: by id, through the tenant indexes, and through the whole log.
func kept(t *testing.T, s *store.Store, t0 time.Time, keepRun, keepAudit func(i int) bool) {
	t.Helper()
	ctx := context.Background()
	wantRecent := map[string][]string{}
	for i := 47; i >= 0; i-- {
		id := fmt.Sprintf("run-%02d", i)
		_, err := s.GetRun(ctx, id)
		_, derr := s.Delivery(ctx, id)
		switch {
		case keepRun(i) && err != nil:
			t.Errorf("%s: %v, want it kept", id, err)
		case !keepRun(i) && !errors.Is(err, store.ErrNotFound):
			t.Errorf("%s: %v, want it deleted", id, err)
		case i%2 == 0 && keepRun(i) && derr != nil:
			t.Errorf("delivery of %s: %v, want it kept", id, derr)
		case i%2 == 0 && !keepRun(i) && !errors.Is(derr, store.ErrNotFound):
			t.Errorf("delivery of %s: %v, want it deleted with its run", id, derr)
		}
		if keepRun(i) {
			tenant := []string{"tenant-1", "tenant-2"}[i%2]
			wantRecent[tenant] = append(wantRecent[tenant], id)
		}
	}
	for _, tenant := range []string{"tenant-1", "tenant-2"} {
		runs, err := s.RecentRuns(ctx, tenant, store.MaxPageSize)
		if err != nil {
			t.Fatalf("RecentRuns(%s): %v", tenant, err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.ID)
		}
		if !slices.Equal(got, wantRecent[tenant]) {
			t.Errorf("RecentRuns(%s) = %v, want %v", tenant, got, wantRecent[tenant])
		}
	}
	var wantAudit []time.Time
	for i := range 48 {
		if keepAudit(i) {
			wantAudit = append(wantAudit, t0.Add(time.Duration(i)*time.Hour))
		}
	}
	var got []time.Time
	for _, tenant := range []string{"tenant-1", "tenant-2"} {
		if err := s.ExportAudit(ctx, store.AuditFilter{TenantID: tenant, Action: "agent.tool.call"}, func(r store.AuditRecord) error {
			got = append(got, r.Time)
			return nil
		}); err != nil {
			t.Fatalf("ExportAudit(%s): %v", tenant, err)
		}
	}
	slices.SortFunc(got, time.Time.Compare)
	if !slices.EqualFunc(got, wantAudit, time.Time.Equal) {
		t.Errorf("audit records kept at %v, want %v", got, wantAudit)
	}
	all, err := s.Audit(ctx, store.AuditQuery{Action: "agent.tool.call"})
	if err != nil || len(all) != len(wantAudit) {
		t.Errorf("Audit by action = %d records, %v; want %d", len(all), err, len(wantAudit))
	}
}

// Retention deletes exactly the runs, deliveries and audit records past
// it (at the cutoff included), keeps a run while one of its views can be
// opened (a revoked one does not count), and keeps everything else.
func testRetentionDeletesExactlyWhatIsPastIt(t *testing.T, bk backend) {
	clk := newClock()
	t0 := clk.Now()
	s := openWith(t, bk, clk, store.Options{AuditRetention: 10 * 24 * time.Hour, RunRetention: 5 * 24 * time.Hour})
	retentionData(t, s, t0)
	ctx := context.Background()

	// Runs made at or before t0+10h are past 5 days; runs 3 and 7 have
	// open views. No audit record is 10 days old.
	clk.Set(t0.Add(5*24*time.Hour + 10*time.Hour))
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 9 || st.Deliveries != 6 || st.RunsHeld != 2 || st.Audit != 0 || st.Views != 1 {
		t.Errorf("first sweep = %+v; want 9 runs, 6 deliveries, 2 runs held, no audit, 1 (revoked) view", st)
	}
	kept(t, s, t0,
		func(i int) bool { return i > 10 || i == 3 || i == 7 },
		func(int) bool { return true })

	// Ten days and five hours on: records of t0+5h and before are past 10
	// days, every run is past 5 days, and only run 3's view is open.
	clk.Set(t0.Add(10*24*time.Hour + 5*time.Hour))
	if st, err = s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if st.Runs != 38 || st.Deliveries != 18 || st.RunsHeld != 1 || st.Audit != 6 || st.Views != 1 {
		t.Errorf("second sweep = %+v; want 38 runs, 18 deliveries, 1 held, 6 audit records, 1 view", st)
	}
	kept(t, s, t0, func(i int) bool { return i == 3 }, func(i int) bool { return i > 5 })
	// The revocation's own record (at t0+47h) is kept too.
	if recs, err := s.Audit(ctx, store.AuditQuery{Action: store.AuditViewRevoke}); err != nil || len(recs) != 1 {
		t.Errorf("revocation records = %d, %v; want 1", len(recs), err)
	}
	// Nothing is left behind for the next sweep to trip on.
	if st, err = s.Sweep(ctx); err != nil || st.Runs != 0 || st.Audit != 0 || st.Views != 0 || st.RunsHeld != 1 {
		t.Errorf("third sweep = %+v, %v; want nothing removed and run 3 held", st, err)
	}
}

func testRetentionDefaultsAndForever(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	t0 := clk.Now()
	s := openWith(t, bk, clk, store.Options{})
	if err := s.SaveRun(ctx, store.Run{ID: "run-1", TenantID: "tenant-1", CreatedAt: t0}, nil,
		[]store.AuditRecord{{Time: t0, TenantID: "tenant-1", Action: "a"}}); err != nil {
		t.Fatal(err)
	}
	forever := openWith(t, bk, clk, store.Options{AuditRetention: -1, RunRetention: -1})
	if err := forever.SaveRun(ctx, store.Run{ID: "run-1", TenantID: "tenant-1", CreatedAt: t0}, nil,
		[]store.AuditRecord{{Time: t0, TenantID: "tenant-1", Action: "a"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at          time.Duration
		runs, audit int
	}{
		{store.DefaultRunRetention - time.Nanosecond, 0, 0},
		{store.DefaultRunRetention, 1, 0},
		{store.DefaultAuditRetention - time.Nanosecond, 0, 0},
		{store.DefaultAuditRetention, 0, 1},
	} {
		clk.Set(t0.Add(c.at))
		st, err := s.Sweep(ctx)
		if err != nil || st.Runs != c.runs || st.Audit != c.audit {
			t.Errorf("default retention, sweep at +%s = %+v, %v; want %d runs and %d audit records", c.at, st, err, c.runs, c.audit)
		}
	}
	clk.Set(t0.Add(100 * 365 * 24 * time.Hour))
	if st, err := forever.Sweep(ctx); err != nil || st.Runs != 0 || st.Audit != 0 {
		t.Errorf("negative retention, sweep after 100 years = %+v, %v; want nothing removed", st, err)
	}
	if _, err := forever.GetRun(ctx, "run-1"); err != nil {
		t.Errorf("run kept forever: %v", err)
	}
}
