package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"teamsbot/mcpapps"
)

// oldRecords are records as the programs before schema version 4 wrote
// them.
type oldRecords struct {
	runs  []Run
	views []View // with RunID, TenantID, CreatedAt and ExpiresAt set; HTML is made from the id's last byte
	convs []ConversationRef
	audit []AuditRecord
}

// oldHTML is the document of an old view: views whose ids end alike share
// one.
func oldHTML(id string) []byte { return fmt.Appendf(nil, "<p>%c</p>", id[len(id)-1]) }

// writeOld writes recs into s's file as the version-1 to version-3
// programs did: runs, views, conversations without any index of tenant or
// time, and an expiry index whose value is the HTML hash alone. It writes
// the buckets directly, since today's methods write today's indexes.
func writeOld(t *testing.T, s *boltTestStore, recs oldRecords) {
	t.Helper()
	prepared, err := s.prepareAudit(recs.audit)
	if err != nil {
		t.Fatal(err)
	}
	put := func(tx *bbolt.Tx, bucket, key string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return tx.Bucket([]byte(bucket)).Put([]byte(key), b)
	}
	if err := s.db.Update(func(tx *bbolt.Tx) error {
		for _, r := range recs.runs {
			if err := put(tx, bucketRuns, r.ID, r); err != nil {
				return err
			}
		}
		for _, v := range recs.views {
			html := oldHTML(v.ID)
			v.HTMLSHA256 = mcpapps.HTMLSHA256(html)
			if err := put(tx, bucketViews, v.ID, v); err != nil {
				return err
			}
			if err := tx.Bucket([]byte(bucketViewsByExpiry)).Put(timeIDKey(timeKey(v.ExpiresAt), []byte(v.ID)), []byte(v.HTMLSHA256)); err != nil {
				return err
			}
			if err := addHTMLRef(tx, []byte(v.HTMLSHA256), html); err != nil {
				return err
			}
		}
		for _, c := range recs.convs {
			if err := put(tx, bucketConversations, c.Key, c); err != nil {
				return err
			}
		}
		// A file of this age has no usage rollup: its records are
		// counted when it is migrated.
		for i := range prepared {
			prepared[i].usage = nil
		}
		return boltTx{tx}.appendAudit(prepared)
	}); err != nil {
		t.Fatal(err)
	}
}

// v4Buckets are the buckets migration 4 adds.
var v4Buckets = []string{bucketRunsByTime, bucketRunsByTenant, bucketViewsByTenant, bucketConvsByTenant}

// A file written by the version-3 program, with more runs than one
// backfill transaction takes, is opened by this one: migration 4 indexes
// every run, view and conversation by tenant (and runs by time), rewrites
// the expiry index, and the new listings and sweeps work on the old
// records. A migration stopped half way is run again from the start and
// leaves exactly one index entry per record.
func TestMigrationV4IndexesV3File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	v3 := schema()[:3]
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	tenants := []string{"tenant-a", "tenant-ab", "tenant-b"} // "tenant-a" is a prefix of another

	var recs oldRecords
	nRuns := 2*migrateBatch + 7
	for i := range nRuns {
		recs.runs = append(recs.runs, Run{ID: fmt.Sprintf("run-%06d", i), TenantID: tenants[i%3],
			Text: "old", CreatedAt: t0.Add(time.Duration(i) * time.Second)})
	}
	// 30 views of the first 30 runs, half of them expiring after a day,
	// half after 60 days; view ids end in 0..9, so 10 documents.
	for i := range 30 {
		r := recs.runs[i]
		life := 24 * time.Hour
		if i%2 == 1 {
			life = 60 * 24 * time.Hour
		}
		recs.views = append(recs.views, View{ID: fmt.Sprintf("view-%02d", i), RunID: r.ID, TenantID: r.TenantID,
			CreatedAt: r.CreatedAt, ExpiresAt: r.CreatedAt.Add(life)})
		recs.runs[i].ViewIDs = []string{recs.views[i].ID}
	}
	for i := range 9 {
		recs.convs = append(recs.convs, ConversationRef{Key: fmt.Sprintf("%s/conv-%d", tenants[i%3], i), TenantID: tenants[i%3]})
	}
	recs.audit = []AuditRecord{{Time: t0, TenantID: "tenant-a", Action: "agent.mcp_app.view"}}

	old := mustOpen(t, path, v3)
	writeOld(t, old, recs)
	for _, b := range v4Buckets {
		if hasBucket(t, old, b) {
			t.Fatalf("a v3 file already has the %s bucket; this test proves nothing", b)
		}
	}
	old.Close()

	// Stopped half way: the second backfill transaction fails.
	calls := 0
	broken := schema()
	broken[3].backfill = func(tx *bbolt.Tx, after []byte) ([]byte, error) {
		if calls++; calls == 2 {
			return nil, errors.New("power cut")
		}
		return backfillV4(tx, after)
	}
	if _, err := openTest(ctx, path, Options{}, broken); err == nil {
		t.Fatal("open with a failing backfill succeeded")
	}
	s := mustOpen(t, path, v3)
	if got := versionOf(t, s); got != 3 {
		t.Errorf("after a failed backfill the version is %d, want 3", got)
	}
	s.Close()

	now := t0.Add(2 * 24 * time.Hour)
	clock := func() time.Time { return now }
	s, err := openTest(ctx, path, Options{Now: clock}, schema())
	if err != nil {
		t.Fatalf("Open of a v3 file: %v", err)
	}
	defer func() { s.Close() }()
	if got, want := versionOf(t, s), uint64(len(schema())); got != want {
		t.Errorf("after Open the version is %d, want %d", got, want)
	}
	for b, want := range map[string]int{
		bucketRunsByTime: nRuns, bucketRunsByTenant: nRuns, bucketViewsByTenant: 30,
		bucketViewsByExpiry: 30, bucketConvsByTenant: 9,
	} {
		if n := bucketLen(t, s, b); n != want {
			t.Errorf("bucket %s has %d entries after the migration, want %d", b, n, want)
		}
	}

	// The listings find the old records of each tenant, and only those.
	for ti, tenant := range tenants {
		runs, err := s.RecentRuns(ctx, tenant, 5)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := nRuns - 1; i >= 0 && len(want) < 5; i-- {
			if i%3 == ti {
				want = append(want, recs.runs[i].ID)
			}
		}
		if got := runIDs(runs); !slices.Equal(got, want) {
			t.Errorf("RecentRuns(%s) = %v, want %v", tenant, got, want)
		}
		views, next, err := s.ActiveViews(ctx, tenant, 100, "")
		if err != nil || next != "" {
			t.Fatalf("ActiveViews(%s) = %v, %q; want one page", tenant, err, next)
		}
		var wantViews []string
		for i := 29; i >= 0; i-- {
			if i%3 == ti && i%2 == 1 { // the 60-day views are still open
				wantViews = append(wantViews, recs.views[i].ID)
			}
		}
		if got := viewIDs(views); !slices.Equal(got, wantViews) {
			t.Errorf("ActiveViews(%s) = %v, want %v", tenant, got, wantViews)
		}
		convs, err := s.Conversations(ctx, tenant)
		if err != nil || len(convs) != 3 {
			t.Errorf("Conversations(%s) = %d, %v; want 3", tenant, len(convs), err)
		}
		for _, c := range convs {
			if c.TenantID != tenant {
				t.Errorf("Conversations(%s) gave %s's %s", tenant, c.TenantID, c.Key)
			}
		}
	}
	// The rewritten expiry index sweeps the expired old views with their
	// tenant index entries, and runs past 30 days go, those with an open
	// view kept.
	st, err := s.Sweep(ctx)
	if err != nil || st.Views != 15 || st.HTML != 5 || st.Runs != 0 {
		t.Errorf("Sweep at +2 days = %+v, %v; want 15 views (ids ending in an even digit), their 5 documents and no run", st, err)
	}
	now = t0.Add(45 * 24 * time.Hour)
	st, err = s.Sweep(ctx)
	if err != nil || st.Views != 0 || st.Runs != nRuns-15 || st.RunsHeld != 15 {
		t.Errorf("Sweep at +45 days = %+v, %v; want %d runs, 15 held", st, err, nRuns-15)
	}
	now = t0.Add(70 * 24 * time.Hour)
	if st, err = s.Sweep(ctx); err != nil || st.Views != 15 || st.HTML != 5 || st.Runs != 15 {
		t.Errorf("Sweep at +70 days = %+v, %v; want the 15 last views, 5 documents and 15 runs", st, err)
	}
	for _, b := range []string{bucketRuns, bucketRunsByTime, bucketRunsByTenant, bucketViews, bucketViewsByTenant, bucketViewsByExpiry, bucketHTML, bucketHTMLRefs} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d entries after everything expired, want 0", b, n)
		}
	}
	if len(s.cursorKey) != 32 {
		t.Errorf("cursor key of %d bytes after the migration, want 32", len(s.cursorKey))
	}
	s.Close()
	if _, err := openTest(ctx, path, Options{}, v3); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("the v3 program opening the migrated file = %v, want ErrSchemaTooNew", err)
	}
	s = mustOpen(t, path, schema()) // for the deferred Close
}

func runIDs(runs []Run) []string {
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func viewIDs(views []View) []string {
	var ids []string
	for _, v := range views {
		ids = append(ids, v.ID)
	}
	return ids
}
