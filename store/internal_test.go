package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"go.etcd.io/bbolt"
)

// These tests look inside the file, for what the exported API cannot show:
// the schema version, how many copies of a document are kept, and the
// writer's handling of a write that fails inside a shared transaction.

func mustOpen(t *testing.T, path string, migrations []migration) *boltTestStore {
	t.Helper()
	s, err := openTest(context.Background(), path, Options{}, migrations)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func versionOf(t *testing.T, s *boltTestStore) uint64 {
	t.Helper()
	var v uint64
	if err := s.view(func(tx *bbolt.Tx) error {
		var err error
		v, err = schemaVersion(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func bucketLen(t *testing.T, s *boltTestStore, name string) int {
	t.Helper()
	n := 0
	if err := s.view(func(tx *bbolt.Tx) error {
		n = tx.Bucket([]byte(name)).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// later is the kind of migration a later version adds: a new bucket, and
// a rewrite of existing records (here each run gets a note).
func later(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists([]byte("run_notes")); err != nil {
		return err
	}
	runs := tx.Bucket([]byte(bucketRuns))
	var ids [][]byte
	if err := runs.ForEach(func(k, _ []byte) error { ids = append(ids, slices.Clone(k)); return nil }); err != nil {
		return err
	}
	for _, id := range ids {
		var r Run
		if err := json.Unmarshal(runs.Get(id), &r); err != nil {
			return err
		}
		r.Notes = append(r.Notes, "migrated")
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := runs.Put(id, b); err != nil {
			return err
		}
	}
	return nil
}

func TestMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")

	current := uint64(len(schema()))
	next := current + 1
	s := mustOpen(t, path, schema())
	if got := versionOf(t, s); got != current {
		t.Fatalf("new file has schema version %d, want %d", got, current)
	}
	if err := s.SaveRun(ctx, Run{ID: "run-1", Text: "before"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A failing migration leaves the file at its version, data intact.
	failing := append(schema(), migration{version: next, name: "broken", apply: func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("half_done")); err != nil {
			return err
		}
		return errors.New("disk says no")
	}})
	if _, err := openTest(ctx, path, Options{}, failing); err == nil {
		t.Fatal("open with a failing migration succeeded")
	}
	s = mustOpen(t, path, schema())
	if got := versionOf(t, s); got != current {
		t.Errorf("after a failed migration the version is %d, want %d", got, current)
	}
	if err := s.view(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("half_done")) != nil {
			return errors.New("the failed migration's bucket was kept")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	s.Close()

	// The next migration runs once, on open, over the existing data.
	withNext := append(schema(), migration{version: next, name: "run notes", apply: later})
	for range 2 {
		s = mustOpen(t, path, withNext)
		if got := versionOf(t, s); got != next {
			t.Errorf("after the next migration the version is %d, want %d", got, next)
		}
		r, err := s.GetRun(ctx, "run-1")
		if err != nil || r.Text != "before" || !slices.Equal(r.Notes, []string{"migrated"}) {
			t.Errorf("run after the next migration = %+v, %v; want its text kept and one note", r, err)
		}
		s.Close()
	}

	// This program, not knowing the next migration, refuses the file.
	if _, err := openTest(ctx, path, Options{}, schema()); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("open of a newer file = %v, want ErrSchemaTooNew", err)
	}
	// Migrations out of order are a programming error caught at open.
	bad := []migration{{version: 2, name: "skips one", apply: migrateV1}}
	if _, err := openTest(ctx, filepath.Join(t.TempDir(), "x.db"), Options{}, bad); err == nil {
		t.Error("open with misnumbered migrations succeeded")
	}
}

func TestHTMLStoredOncePerHash(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "teamsbot.db"), schema())
	defer s.Close()
	html := []byte("<!doctype html><p>same</p>")
	exp := time.Now().Add(time.Hour)
	for i := range 5 {
		v := View{ID: fmt.Sprintf("v%d", i), ExpiresAt: exp}
		if err := s.SaveRun(ctx, Run{ID: fmt.Sprintf("r%d", i)}, []NewView{{View: v, HTML: html}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Saving v0 again (a retried SaveRun) must not count it twice.
	if err := s.SaveRun(ctx, Run{ID: "r0"}, []NewView{{View: View{ID: "v0", ExpiresAt: exp}, HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}
	if n := bucketLen(t, s, bucketHTML); n != 1 {
		t.Errorf("%d documents stored, want 1", n)
	}
	if n := bucketLen(t, s, bucketViewsByExpiry); n != 5 {
		t.Errorf("%d expiry index entries, want 5", n)
	}
	var refs uint64
	s.view(func(tx *bbolt.Tx) error {
		_, v := tx.Bucket([]byte(bucketHTMLRefs)).Cursor().First()
		refs = binary.BigEndian.Uint64(v)
		return nil
	})
	if refs != 5 {
		t.Errorf("reference count %d, want 5", refs)
	}
}

func TestFailingWriteDoesNotFailItsGroup(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "teamsbot.db"), schema())
	defer s.Close()
	put := func(key string) func(tx *bbolt.Tx) error {
		return func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte(bucketConversations)).Put([]byte(key), []byte(`{}`))
		}
	}
	boom := errors.New("boom")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	group := []*writeReq{
		{ctx: ctx, apply: put("a")},
		{ctx: ctx, apply: func(tx *bbolt.Tx) error {
			if err := put("half")(tx); err != nil {
				return err
			}
			return boom
		}},
		{ctx: cancelled, apply: put("cancelled")},
		{ctx: ctx, apply: put("b")},
	}
	for _, r := range group {
		r.done = make(chan error, 1)
	}
	s.commit(group) // as the writer does with a group
	want := []error{nil, boom, context.Canceled, nil}
	for i, r := range group {
		if err := <-r.done; !errors.Is(err, want[i]) || (want[i] == nil && err != nil) {
			t.Errorf("write %d: %v, want %v", i, err, want[i])
		}
	}
	for key, want := range map[string]bool{"a": true, "b": true, "half": false, "cancelled": false} {
		_, err := s.Conversation(ctx, key)
		if got := err == nil; got != want {
			t.Errorf("key %q stored = %v, want %v (%v)", key, got, want, err)
		}
	}
}

func TestSweepBatchesStayBounded(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := openTest(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	var views []NewView
	for i := range 50 {
		views = append(views, NewView{
			View: View{ID: fmt.Sprintf("v%02d", i), ExpiresAt: now.Add(-time.Minute)},
			HTML: fmt.Appendf(nil, "<p>%d</p>", i%5),
		})
	}
	if err := s.SaveRun(ctx, Run{ID: "r"}, views, nil); err != nil {
		t.Fatal(err)
	}
	st, err := s.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first batch holds 7 views, so 50 take more than one; runs and
	// audit records take one more each.
	if st.Views != 50 || st.HTML != 5 || st.Transactions < 4 {
		t.Errorf("Sweep = %+v, want 50 views, 5 documents, in several transactions", st)
	}
	for _, b := range []string{bucketViews, bucketViewsByExpiry, bucketHTML, bucketHTMLRefs} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d keys after the sweep, want 0", b, n)
		}
	}
}

func hasBucket(t *testing.T, s *boltTestStore, name string) bool {
	t.Helper()
	found := false
	if err := s.view(func(tx *bbolt.Tx) error {
		found = tx.Bucket([]byte(name)) != nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return found
}

// A file written by the version-1 program (runs, a conversation, no
// deliveries bucket) is opened by this one: migration 2 adds the bucket,
// keeps everything, and deliveries work on the old runs.
func TestMigrationV2AddsDeliveriesToV1File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	v1 := schema()[:1]

	old := mustOpen(t, path, v1)
	writeOld(t, old, oldRecords{
		runs:  []Run{{ID: "run-old", TenantID: "tenant-1", Text: "from v1"}},
		convs: []ConversationRef{{Key: "tenant-1/a:conv", ServiceURL: "https://smba.example/"}},
	})
	if got := versionOf(t, old); got != 1 {
		t.Fatalf("the v1 program wrote schema version %d", got)
	}
	if hasBucket(t, old, bucketDeliveries) {
		t.Fatal("a v1 file already has the deliveries bucket; this test proves nothing")
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	latest := uint64(len(schema()))
	s, err := openTest(ctx, path, Options{}, schema())
	if err != nil {
		t.Fatalf("Open of a v1 file: %v", err)
	}
	if got := versionOf(t, s); got != latest {
		t.Errorf("after Open the version is %d, want %d", got, latest)
	}
	if !hasBucket(t, s, bucketDeliveries) {
		t.Fatal("no deliveries bucket after the migration")
	}
	if r, err := s.GetRun(ctx, "run-old"); err != nil || r.Text != "from v1" {
		t.Errorf("run after the migration = %+v, %v; want it kept", r, err)
	}
	if c, err := s.Conversation(ctx, "tenant-1/a:conv"); err != nil || c.ServiceURL != "https://smba.example/" {
		t.Errorf("conversation after the migration = %+v, %v; want it kept", c, err)
	}
	if _, err := s.Delivery(ctx, "run-old"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delivery of a run from v1 = %v, want ErrNotFound", err)
	}
	want := Delivery{RunID: "run-old", ConversationKey: "tenant-1/a:conv", ConversationID: "a:conv", ActivityIDs: []string{"1:7", "1:8"}, SentAt: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	if err := s.PutDelivery(ctx, want); err != nil {
		t.Fatalf("PutDelivery after the migration: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Opened again, nothing is migrated twice and the delivery is there.
	s = mustOpen(t, path, schema())
	defer s.Close()
	if got := versionOf(t, s); got != latest {
		t.Errorf("after a second Open the version is %d, want %d", got, latest)
	}
	got, err := s.Delivery(ctx, "run-old")
	if err != nil || !got.SentAt.Equal(want.SentAt) || got.ConversationKey != want.ConversationKey || !slices.Equal(got.ActivityIDs, want.ActivityIDs) {
		t.Errorf("Delivery after reopening = %+v, %v; want %+v", got, err, want)
	}
	// And the version-1 program now refuses the file rather than write
	// runs whose deliveries it would not know.
	s.Close()
	if _, err := openTest(ctx, path, Options{}, v1); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("the v1 program opening the migrated file = %v, want ErrSchemaTooNew", err)
	}
}

// accessBuckets are the buckets migration 3 adds.
var accessBuckets = []string{bucketBindings, bucketTenantSettings, bucketPolicySets}

// A file written by the version-2 program (a run with its delivery, audit
// records, a conversation; no access buckets) is opened by this one:
// migration 3 adds the access buckets, keeps everything else, and the
// access methods work on the migrated file.
func TestMigrationV3AddsAccessRecordsToV2File(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	v2 := schema()[:2]

	old := mustOpen(t, path, v2)
	writeOld(t, old, oldRecords{
		runs:  []Run{{ID: "run-old", TenantID: "tenant-1", Text: "from v2"}},
		convs: []ConversationRef{{Key: "tenant-1/a:conv", ServiceURL: "https://smba.example/"}},
		audit: []AuditRecord{{TenantID: "tenant-1", Action: "agent.mcp_app.view"}},
	})
	if err := old.PutDelivery(ctx, Delivery{RunID: "run-old", ConversationKey: "tenant-1/a:conv", ConversationID: "a:conv", ActivityIDs: []string{"1:7"}}); err != nil {
		t.Fatal(err)
	}
	if got := versionOf(t, old); got != 2 {
		t.Fatalf("the v2 program wrote schema version %d", got)
	}
	for _, b := range accessBuckets {
		if hasBucket(t, old, b) {
			t.Fatalf("a v2 file already has the %s bucket; this test proves nothing", b)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	for range 2 { // the second Open finds nothing left to migrate
		s, err := openTest(ctx, path, Options{}, schema())
		if err != nil {
			t.Fatalf("Open of a v2 file: %v", err)
		}
		if got, want := versionOf(t, s), uint64(len(schema())); got != want {
			t.Errorf("after Open the version is %d, want %d", got, want)
		}
		for _, b := range accessBuckets {
			if !hasBucket(t, s, b) {
				t.Errorf("no %s bucket after the migration", b)
			}
		}
		if r, err := s.GetRun(ctx, "run-old"); err != nil || r.Text != "from v2" {
			t.Errorf("run after the migration = %+v, %v; want it kept", r, err)
		}
		if d, err := s.Delivery(ctx, "run-old"); err != nil || !slices.Equal(d.ActivityIDs, []string{"1:7"}) {
			t.Errorf("delivery after the migration = %+v, %v; want it kept", d, err)
		}
		if c, err := s.Conversation(ctx, "tenant-1/a:conv"); err != nil || c.ServiceURL != "https://smba.example/" {
			t.Errorf("conversation after the migration = %+v, %v; want it kept", c, err)
		}
		if recs, err := s.Audit(ctx, AuditQuery{TenantID: "tenant-1"}); err != nil || len(recs) != 1 {
			t.Errorf("audit after the migration = %+v, %v; want the one record", recs, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// The migrated file reads as no access records of its own, and takes
	// them.
	s := mustOpen(t, path, schema())
	if bs, err := s.Bindings(ctx, "tenant-1", ""); err != nil || len(bs) != 0 {
		t.Errorf("Bindings after the migration = %+v, %v; want none", bs, err)
	}
	if ts, err := s.TenantSettings(ctx, "tenant-1"); err != nil || !ts.DefaultRunner || ts.Version != 0 {
		t.Errorf("TenantSettings after the migration = %+v, %v; want the defaults", ts, err)
	}
	if _, err := s.PolicySet(ctx, "tenant-1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("PolicySet after the migration = %v, want ErrNotFound", err)
	}
	b := Binding{TenantID: "tenant-1", AgentID: "default", Subject: "user-1", Kind: KindUser, Role: RoleRunner}
	if err := s.PutBinding(ctx, b); err != nil {
		t.Errorf("PutBinding after the migration: %v", err)
	}
	if _, err := s.PutTenantSettings(ctx, TenantSettings{TenantID: "tenant-1"}, 0); err != nil {
		t.Errorf("PutTenantSettings after the migration: %v", err)
	}
	if _, err := s.PutPolicySet(ctx, PolicySet{TenantID: "tenant-1", Text: "permit (principal, action, resource);"}, 0); err != nil {
		t.Errorf("PutPolicySet after the migration: %v", err)
	}
	if bs, err := s.BindingsFor(ctx, "tenant-1", "default", []string{"user-1"}); err != nil || len(bs) != 1 {
		t.Errorf("BindingsFor after the migration = %+v, %v; want the one put", bs, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// The version-2 program now refuses the file rather than grant access
	// without the records this one keeps.
	if _, err := openTest(ctx, path, Options{}, v2); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("the v2 program opening the migrated file = %v, want ErrSchemaTooNew", err)
	}
}

// heldOrDone returns once one write is queued in s, or done has answered
// (then true, with its answer).
func heldOrDone(s *boltTestStore, done <-chan error) (bool, error) {
	for {
		select {
		case err := <-done:
			return true, err
		default:
		}
		s.mu.Lock()
		queued := len(s.pending) == 1
		s.mu.Unlock()
		if queued {
			return false, nil
		}
		runtime.Gosched()
	}
}

// A lazy write found alone waits for the next write and shares its
// commit; Close ends the wait and commits it too. The wait is made
// endless here, so nothing depends on timing: a lazy write that did not
// wait, or was not released, fails the test (or hangs it).
func TestLazyWriteWaitsForCompany(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	s := mustOpen(t, path, schema())
	s.lazyWait = time.Hour
	if err := s.SaveRun(ctx, Run{ID: "run-1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	lazyDone := make(chan error, 1)
	go func() {
		lazyDone <- s.PutDelivery(ctx, Delivery{RunID: "run-1", ConversationKey: "t/c", ConversationID: "c", ActivityIDs: []string{"1:1"}})
	}()
	// Wait, by watching the queue rather than the clock, until the lazy
	// write is queued and held, or has returned without waiting.
	if returned, err := heldOrDone(s, lazyDone); returned {
		t.Fatalf("the lazy write did not wait for company: %v", err)
	}
	if err := s.SaveRun(ctx, Run{ID: "run-2"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-lazyDone; err != nil {
		t.Fatalf("lazy write: %v", err)
	}
	if st := s.Stats(); st.Writes-before.Writes != 2 || st.Commits-before.Commits != 1 {
		t.Errorf("%d writes in %d commits, want 2 in 1", st.Writes-before.Writes, st.Commits-before.Commits)
	}

	// Alone until Close: Close does not wait an hour, and the write lands.
	go func() {
		lazyDone <- s.PutDelivery(ctx, Delivery{RunID: "run-2", ConversationKey: "t/c", ConversationID: "c", ActivityIDs: []string{"1:2"}})
	}()
	if returned, err := heldOrDone(s, lazyDone); returned {
		t.Fatalf("the lazy write did not wait for company: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-lazyDone; err != nil {
		t.Fatalf("lazy write pending at Close: %v", err)
	}
	s = mustOpen(t, path, schema())
	defer s.Close()
	if _, err := s.Delivery(ctx, "run-2"); err != nil {
		t.Errorf("the lazy write pending at Close is not in the file: %v", err)
	}
}

// boltTestStore is a Store on bbolt beside its backend, for the tests
// that look inside the file.
type boltTestStore struct {
	*Store
	*boltStore
}

// openTest is Open with the migrations given, keeping the backend.
func openTest(ctx context.Context, path string, opts Options, migrations []migration) (*boltTestStore, error) {
	s, err := openBolt(ctx, path, opts, migrations)
	if err != nil {
		return nil, err
	}
	return &boltTestStore{s, s.be.(*boltStore)}, nil
}
