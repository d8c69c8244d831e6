package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

func openClocked(t *testing.T, now *time.Time) *boltTestStore {
	t.Helper()
	s, err := openTest(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return *now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A page reads at most pageScan index entries: a filter that matches only
// the oldest of 100 records takes ten pages of 10, nine of them empty but
// with a cursor to go on.
func TestAuditPageWorkIsBounded(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s := openClocked(t, &now)
	s.pageScan = 10
	var recs []AuditRecord
	for i := range 100 {
		r := AuditRecord{Time: now.Add(time.Duration(i) * time.Second), TenantID: "tenant-1", Action: "agent.tool.call", Actor: "user-1"}
		if i == 0 {
			r.Actor = "rare"
		}
		recs = append(recs, r)
	}
	if err := s.Append(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	q := AuditFilter{TenantID: "tenant-1", Actor: "rare"}
	cursor, pages, found := "", 0, 0
	for {
		page, next, err := s.AuditPage(ctx, q, cursor, 50)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		found += len(page)
		if next == "" {
			break
		}
		if len(page) != 0 {
			t.Errorf("page %d has %d records before the last page", pages, len(page))
		}
		if pages > 100 {
			t.Fatal("no end")
		}
		cursor = next
	}
	if pages != 10 || found != 1 {
		t.Errorf("%d pages found %d records; want 10 pages of at most 10 entries each, finding 1", pages, found)
	}
	// A filter the index answers fills its pages within the bound.
	page, next, err := s.AuditPage(ctx, AuditFilter{TenantID: "tenant-1", Action: "agent.tool.call"}, "", 10)
	if err != nil || len(page) != 10 || next == "" {
		t.Errorf("indexed page = %d records, next %q, %v; want 10 and more", len(page), next, err)
	}

	// ActiveViews too: 30 views of which the 20 newest have expired.
	var views []NewView
	for i := range 30 {
		life := time.Hour
		if i >= 10 {
			life = time.Minute
		}
		views = append(views, NewView{View: View{ID: fmt.Sprintf("view-%02d", i), CreatedAt: now.Add(time.Duration(i) * time.Second),
			ExpiresAt: now.Add(time.Duration(i)*time.Second + life)}, HTML: []byte("<p>")})
	}
	if err := s.SaveRun(ctx, Run{ID: "run-1", TenantID: "tenant-1"}, views, nil); err != nil {
		t.Fatal(err)
	}
	now = now.Add(10 * time.Minute)
	s.pageScan = 5
	cursor, pages, found = "", 0, 0
	for {
		page, next, err := s.ActiveViews(ctx, "tenant-1", 50, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		found += len(page)
		if next == "" {
			break
		}
		if pages > 100 {
			t.Fatal("no end")
		}
		cursor = next
	}
	if pages != 6 || found != 10 {
		t.Errorf("ActiveViews took %d pages for %d views; want 6 pages of 5 entries, finding 10", pages, found)
	}
}

// An export reads in short transactions and calls back outside them: a
// record appended during the export, older than every other, is exported
// too (one long transaction would not see it), and no export transaction
// is open while fn runs.
func TestExportReadsInShortTransactions(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s := openClocked(t, &now)
	s.exportBatch = 7
	var recs []AuditRecord
	for i := range 40 {
		recs = append(recs, AuditRecord{Time: now.Add(time.Duration(i) * time.Minute), TenantID: "tenant-1", Action: "a"})
	}
	if err := s.Append(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	var got []AuditRecord
	err := s.ExportAudit(ctx, AuditFilter{TenantID: "tenant-1"}, func(r AuditRecord) error {
		if n := s.exportReads.Load(); n != 0 {
			t.Fatalf("fn called with %d export transactions open", n)
		}
		if len(got) == 0 {
			// A write while exporting, which must not wait for the export.
			if err := s.Append(ctx, AuditRecord{Time: now.Add(-time.Hour), TenantID: "tenant-1", Action: "late"}); err != nil {
				return err
			}
		}
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 41 || got[0].Seq != 40 || got[40].Action != "late" {
		t.Errorf("export of %d records, first seq %d, last %+v; want 41, newest first, ending with the one appended meanwhile", len(got), got[0].Seq, got[len(got)-1])
	}
}
