package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// auditLog is a log of 300 records over three tenants ("tenant-a" a
// prefix of "tenant-ab"), three actions, four actors, three tools and two
// results, appended out of time order with some times shared, and the
// brute-force answer to any filter.
type auditLog struct {
	all []store.AuditRecord // in append order, Seq set
	t0  time.Time
}

func writeAuditLog(t *testing.T, s *store.Store, t0 time.Time) *auditLog {
	t.Helper()
	tenants := []string{"tenant-a", "tenant-ab", "tenant-b"}
	actions := []string{"agent.mcp_app.view", "agent.tool.call", "admin.binding.add"}
	tools := []string{"show_chart", "list_sales", "show_map"}
	results := []string{"ok", "error"}
	l := &auditLog{t0: t0}
	var batch []store.AuditRecord
	for i := range 300 {
		r := store.AuditRecord{
			Time:     t0.Add(time.Duration((i*97)%300) * time.Minute),
			TenantID: tenants[i%3],
			Action:   actions[(i/3)%3],
			Actor:    fmt.Sprintf("user-%d", (i/2)%4),
			Fields:   map[string]any{"tool": tools[(i/5)%3], "result": results[(i/7)%2], "n": float64(i)},
		}
		if i%10 == 9 {
			r.Time = l.all[i-1].Time // same time, appended later
		}
		if i%50 == 0 {
			r.Fields["tool"] = 42.0 // a tool that is not a string matches no tool filter
		}
		batch = append(batch, r)
		r.Seq = uint64(i + 1)
		l.all = append(l.all, r)
		if len(batch) == 13 || i == 299 {
			if err := s.Append(context.Background(), batch...); err != nil {
				t.Fatal(err)
			}
			batch = nil
		}
	}
	return l
}

// want answers q by brute force: filter, then newest first.
func (l *auditLog) want(q store.AuditFilter) []store.AuditRecord {
	var out []store.AuditRecord
	for _, r := range l.all {
		if r.TenantID == q.TenantID && (q.Action == "" || r.Action == q.Action) &&
			(q.Actor == "" || r.Actor == q.Actor) &&
			(q.Tool == "" || r.Fields["tool"] == q.Tool) &&
			(q.Result == "" || r.Fields["result"] == q.Result) &&
			(q.From.IsZero() || !r.Time.Before(q.From)) && (q.To.IsZero() || r.Time.Before(q.To)) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b store.AuditRecord) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return int(b.Seq) - int(a.Seq)
	})
	return out
}

// allPages reads every page of q, failing the test on an error or a
// cursor loop.
func allPages(t *testing.T, s *store.Store, q store.AuditFilter, limit int) (recs []store.AuditRecord, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := s.AuditPage(context.Background(), q, cursor, limit)
		if err != nil {
			t.Fatalf("AuditPage(%+v, page %d): %v", q, pages+1, err)
		}
		if len(page) > limit {
			t.Fatalf("page %d has %d records, limit %d", pages+1, len(page), limit)
		}
		pages++
		recs = append(recs, page...)
		if next == "" {
			return recs, pages
		}
		if pages > 1000 {
			t.Fatal("AuditPage never ends")
		}
		cursor = next
	}
}

func auditFilters(t0 time.Time) []store.AuditFilter {
	from, to := t0.Add(40*time.Minute), t0.Add(200*time.Minute)
	return []store.AuditFilter{
		{TenantID: "tenant-a"},
		{TenantID: "tenant-ab"},
		{TenantID: "tenant-a", Action: "agent.tool.call"},
		{TenantID: "tenant-a", Actor: "user-2"},
		{TenantID: "tenant-b", Tool: "show_map"},
		{TenantID: "tenant-b", Result: "error"},
		{TenantID: "tenant-a", From: from},
		{TenantID: "tenant-a", To: to},
		{TenantID: "tenant-ab", From: from, To: to},
		{TenantID: "tenant-a", Action: "agent.mcp_app.view", Actor: "user-1", Tool: "show_chart"},
		{TenantID: "tenant-b", Action: "admin.binding.add", Result: "ok", From: from, To: to},
		{TenantID: "tenant-ab", Actor: "user-3", Tool: "list_sales", Result: "error", From: from},
		{TenantID: "tenant-a", Action: "agent.tool.call", Actor: "user-0", Tool: "show_map", Result: "ok", From: from, To: to},
		{TenantID: "tenant-a", Actor: "nobody"},
		{TenantID: "no-such-tenant"},
		{TenantID: "tenant-a", From: to, To: from}, // empty range
	}
}

// Each filter alone and combined, newest first, and paging at several
// sizes returns every matching record exactly once.
func testAuditPageFiltersAndPaging(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	l := writeAuditLog(t, s, clk.Now())
	for _, q := range auditFilters(l.t0) {
		want := l.want(q)
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			if len(want) == 0 && q.Actor != "nobody" && q.TenantID != "no-such-tenant" && !q.To.Before(q.From) {
				t.Fatal("the filter matches nothing; the test proves little")
			}
			for _, limit := range []int{1, 7, 50, store.MaxPageSize} {
				got, pages := allPages(t, s, q, limit)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("pages of %d (-want +got):\n%s", limit, diff)
				}
				if limit == 7 && pages < len(want)/7 {
					t.Errorf("%d records in %d pages of 7", len(want), pages)
				}
			}
		})
	}
	// A limit of zero is the default page size.
	page, next, err := s.AuditPage(context.Background(), store.AuditFilter{TenantID: "tenant-a"}, "", 0)
	if err != nil || len(page) != store.DefaultPageSize || next == "" {
		t.Errorf("AuditPage with limit 0 = %d records, next %q, %v; want %d and a next page", len(page), next, err, store.DefaultPageSize)
	}
}

// A cursor works only with the query it came from: another tenant's
// query, other filters, an edited or made-up cursor are ErrInvalid.
func testAuditCursorIsBoundToItsQuery(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	l := writeAuditLog(t, s, clk.Now())
	q := store.AuditFilter{TenantID: "tenant-a", Action: "agent.tool.call"}
	first, next, err := s.AuditPage(ctx, q, "", 5)
	if err != nil || next == "" {
		t.Fatalf("first page: %v, next %q", err, next)
	}
	second, _, err := s.AuditPage(ctx, q, next, 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.want(q)[:10], append(first, second...)); diff != "" {
		t.Fatalf("two pages of 5 (-want +got):\n%s", diff)
	}

	edited := []byte(next)
	edited[len(edited)/2] ^= 1
	for name, c := range map[string]struct {
		q      store.AuditFilter
		cursor string
	}{
		"another tenant":          {store.AuditFilter{TenantID: "tenant-b", Action: q.Action}, next},
		"a tenant it prefixes":    {store.AuditFilter{TenantID: "tenant-ab", Action: q.Action}, next},
		"another action":          {store.AuditFilter{TenantID: q.TenantID, Action: "agent.mcp_app.view"}, next},
		"no action":               {store.AuditFilter{TenantID: q.TenantID}, next},
		"another actor":           {store.AuditFilter{TenantID: q.TenantID, Action: q.Action, Actor: "user-1"}, next},
		"a time range":            {store.AuditFilter{TenantID: q.TenantID, Action: q.Action, From: l.t0}, next},
		"edited":                  {q, string(edited)},
		"cut short":               {q, next[:len(next)-3]},
		"made up":                 {q, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"},
		"not base64":              {q, "not a cursor!"},
		"huge":                    {q, strings.Repeat("A", 1<<16)},
		"no tenant":               {store.AuditFilter{Action: q.Action}, ""},
		"NUL in tenant":           {store.AuditFilter{TenantID: "tenant-a\x00"}, ""},
		"an active views' cursor": {q, activeViewsCursor(t, s, clk)},
	} {
		page, n, err := s.AuditPage(ctx, c.q, c.cursor, 5)
		if !errors.Is(err, store.ErrInvalid) || page != nil || n != "" {
			t.Errorf("AuditPage with %s = %d records, %q, %v; want ErrInvalid and nothing", name, len(page), n, err)
		}
	}
}

// activeViewsCursor returns a next cursor of ActiveViews of tenant-1.
func activeViewsCursor(t *testing.T, s *store.Store, clk *testClock) string {
	t.Helper()
	ctx := context.Background()
	for i := range 2 {
		v := sampleView(fmt.Sprintf("cursor-view-%d", i), clk.Now(), time.Hour)
		if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("cursor-run-%d", i), TenantID: "tenant-1"},
			[]store.NewView{{View: v, HTML: []byte("<p>")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	_, next, err := s.ActiveViews(ctx, "tenant-1", 1, "")
	if err != nil || next == "" {
		t.Fatalf("ActiveViews = %v, next %q", err, next)
	}
	return next
}

func testAuditCursorSurvivesReopen(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	l := writeAuditLog(t, s, clk.Now())
	q := store.AuditFilter{TenantID: "tenant-b"}
	first, next, err := s.AuditPage(ctx, q, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, bk, path, clk)
	second, _, err := s.AuditPage(ctx, q, next, 10)
	if err != nil {
		t.Fatalf("a cursor after reopening: %v", err)
	}
	if diff := cmp.Diff(l.want(q)[:20], append(first, second...)); diff != "" {
		t.Errorf("two pages across a reopen (-want +got):\n%s", diff)
	}
}

// The export streams every matching record newest first, and stops at
// fn's first error.
func testExportAudit(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	l := writeAuditLog(t, s, clk.Now())
	for _, q := range auditFilters(l.t0) {
		var got []store.AuditRecord
		if err := s.ExportAudit(ctx, q, func(r store.AuditRecord) error {
			got = append(got, r)
			return nil
		}); err != nil {
			t.Fatalf("ExportAudit(%+v): %v", q, err)
		}
		if diff := cmp.Diff(l.want(q), got); diff != "" {
			t.Errorf("ExportAudit(%+v) (-want +got):\n%s", q, diff)
		}
	}

	q := store.AuditFilter{TenantID: "tenant-a"}
	stop := errors.New("disk full")
	calls := 0
	err := s.ExportAudit(ctx, q, func(store.AuditRecord) error {
		if calls++; calls == 17 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 17 {
		t.Errorf("ExportAudit with fn failing at the 17th record = %v after %d calls; want its error after 17", err, calls)
	}
	if err := s.ExportAudit(ctx, store.AuditFilter{}, func(store.AuditRecord) error { return nil }); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ExportAudit without a tenant = %v, want ErrInvalid", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.ExportAudit(cancelled, q, func(store.AuditRecord) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("ExportAudit with a cancelled context = %v", err)
	}
}
