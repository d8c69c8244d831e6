package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"teamsbot/store"
)

// errTaken is what a claim's change returns when the due time moved.
var errTaken = errors.New("claimed by another")

// Of many schedulers claiming the same due time at once (replicas, on
// PostgreSQL), exactly one gets it: each compares LastDue inside the
// update, which sees the others' commits.
func testTriggerDueTimeClaimedOnce(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	tr := store.Trigger{ID: "t1", TenantID: "tenant-a", Name: "daily", AgentID: "default", Cron: "0 9 * * *",
		TimeZone: "UTC", Text: "hi", ConversationID: "conv-1", CreatedBy: "admin"}
	if err := s.PutTrigger(ctx, tr); err != nil {
		t.Fatal(err)
	}
	stored, err := s.Trigger(ctx, "tenant-a", "t1")
	if err != nil {
		t.Fatal(err)
	}
	due := stored.LastDue.Add(time.Hour)
	const claimers = 8
	var wg sync.WaitGroup
	errs := make([]error, claimers)
	for i := range claimers {
		wg.Go(func() {
			_, errs[i] = s.UpdateTrigger(ctx, "tenant-a", "t1", func(cur *store.Trigger) error {
				if !cur.LastDue.Equal(stored.LastDue) {
					return errTaken
				}
				cur.LastDue = due
				return nil
			}, func(before, after store.Trigger) []store.AuditRecord {
				return []store.AuditRecord{{Action: "trigger.run", Fields: map[string]any{"due": due.Format(time.RFC3339)}}}
			})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case errors.Is(err, errTaken), errors.Is(err, store.ErrConflict):
		default:
			t.Errorf("claim: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d claims of one due time succeeded, want 1", won)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a", Action: "trigger.run"})
	if err != nil || len(recs) != 1 {
		t.Errorf("%d run records (%v), want 1", len(recs), err)
	}
	got, _ := s.Trigger(ctx, "tenant-a", "t1")
	if !got.LastDue.Equal(due) || got.Version != 2 {
		t.Errorf("after the claim: LastDue %v version %d, want %v and 2", got.LastDue, got.Version, due)
	}
}

// ActiveViews pages through a tenant's open views newest first, leaving
// out expired and other tenants' views; RecentRuns lists runs newest
// first.
func testActiveViewsAndRecentRuns(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	t0 := clk.Now()
	html := []byte("<p>v</p>")
	var want []string
	for i := range 7 {
		tenant := "tenant-1"
		if i == 3 {
			tenant = "tenant-2"
		}
		life := store.ViewLifetime
		if i == 5 {
			life = time.Minute // expired by the time of the listing
		}
		created := t0.Add(time.Duration(i) * time.Second)
		v := sampleView(fmt.Sprintf("view-%d", i), created, life)
		v.TenantID = tenant
		run := store.Run{ID: fmt.Sprintf("run-%d", i), TenantID: tenant, AgentID: "default", CreatedAt: created}
		if err := s.SaveRun(ctx, run, []store.NewView{{View: v, HTML: html}}, nil); err != nil {
			t.Fatal(err)
		}
		if tenant == "tenant-1" && i != 5 {
			want = append([]string{v.ID}, want...)
		}
	}
	clk.Advance(time.Hour)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		views, next, err := s.ActiveViews(ctx, "tenant-1", 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			got = append(got, v.ID)
		}
		if next == "" {
			break
		}
		if _, _, err := s.ActiveViews(ctx, "tenant-2", 2, next); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("tenant-1's cursor used by tenant-2: %v, want ErrInvalid", err)
		}
		cursor = next
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("active views %v, want %v", got, want)
	}
	runs, err := s.RecentRuns(ctx, "tenant-1", 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if fmt.Sprint(ids) != "[run-6 run-5 run-4]" {
		t.Errorf("recent runs %v, want [run-6 run-5 run-4]", ids)
	}
}

// A revoked view answers as revoked at once, leaves the listing, is not
// brought back by a save, and is swept; another tenant cannot revoke it.
func testRevokeView(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	v := sampleView("view-1", clk.Now(), store.ViewLifetime)
	html := []byte("<p>revoked</p>")
	run := store.Run{ID: "run-1", TenantID: "tenant-1", AgentID: "default"}
	if err := s.SaveRun(ctx, run, []store.NewView{{View: v, HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeView(ctx, "tenant-2", "view-1", "eve"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another tenant's revoke: %v, want ErrNotFound", err)
	}
	clk.Advance(time.Minute)
	if err := s.RevokeView(ctx, "tenant-1", "view-1", "admin-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.View(ctx, "view-1"); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("View after revoke: %v, want ErrRevoked", err)
	}
	if err := s.RevokeView(ctx, "tenant-1", "view-1", "admin-1"); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("second revoke: %v, want ErrRevoked", err)
	}
	if views, _, err := s.ActiveViews(ctx, "tenant-1", 10, ""); err != nil || len(views) != 0 {
		t.Errorf("ActiveViews after revoke: %d views, %v", len(views), err)
	}
	if err := s.SaveRun(ctx, run, []store.NewView{{View: v, HTML: html}}, nil); !errors.Is(err, store.ErrRevoked) {
		t.Errorf("saving a revoked view again: %v, want ErrRevoked", err)
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-1", Action: store.AuditViewRevoke})
	if err != nil || len(recs) != 1 || recs[0].Actor != "admin-1" {
		t.Errorf("revoke audit: %+v %v", recs, err)
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.Views != 1 || st.HTML != 1 {
		t.Errorf("sweep after revoke: %+v %v, want the view and its HTML", st, err)
	}
	if _, err := s.ViewHTML(ctx, shaHex(html)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("HTML of a swept view: %v", err)
	}
}

// Of admins putting a tenant's settings over the same version at once,
// one wins and the others get ErrConflict.
func testConcurrentSettingsPutsOneWins(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	const admins = 6
	var wg sync.WaitGroup
	errs := make([]error, admins)
	for i := range admins {
		wg.Go(func() {
			_, errs[i] = s.PutTenantSettings(ctx, store.TenantSettings{TenantID: "tenant-1", DefaultGroup: fmt.Sprint("g", i)}, 0,
				store.AuditRecord{Action: "admin.settings"})
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("put: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d puts over version 0 succeeded, want 1", won)
	}
	ts, err := s.TenantSettings(ctx, "tenant-1")
	if err != nil || ts.Version != 1 {
		t.Errorf("settings %+v %v, want version 1", ts, err)
	}
	if recs, _ := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-1"}); len(recs) != 1 {
		t.Errorf("%d audit records, want the winner's", len(recs))
	}
}

// Saves sharing one document while sweeps delete the expired views that
// use it never leave a stored view without its HTML: replicas on
// PostgreSQL do both at once.
func testHTMLSurvivesConcurrentSweeps(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	html := []byte("<p>shared by everyone</p>")
	const savers, each = 4, 40
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var sweepErr error
	var sweeps sync.WaitGroup
	for range 2 {
		sweeps.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := s.Sweep(ctx); err != nil {
					sweepErr = err
					return
				}
			}
		})
	}
	for g := range savers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("v-%d-%d", g, i)
				life := time.Hour
				if i%2 == 0 {
					life = -time.Second // expired when saved: the sweeps take it at once
				}
				v := sampleView(id, clk.Now(), life)
				if err := s.SaveRun(ctx, store.Run{ID: "r-" + id, TenantID: "tenant-1"}, []store.NewView{{View: v, HTML: html}}, nil); err != nil {
					t.Errorf("SaveRun: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	sweeps.Wait()
	if sweepErr != nil {
		t.Fatalf("Sweep: %v", sweepErr)
	}
	for g := range savers {
		for i := 1; i < each; i += 2 {
			v, err := s.View(ctx, fmt.Sprintf("v-%d-%d", g, i))
			if err != nil {
				t.Fatalf("View: %v", err)
			}
			if got, err := s.ViewHTML(ctx, v.HTMLSHA256); err != nil || string(got) != string(html) {
				t.Fatalf("a live view lost its HTML: %v", err)
			}
		}
	}
}
