package store

import (
	"context"
	"encoding/binary"
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

// These tests look inside the file, for what the exported API cannot show:
// the schema version, how many copies of a document are kept, and the
// writer's handling of a write that fails inside a shared transaction.

func mustOpen(t *testing.T, path string, migrations []migration) *Store {
	t.Helper()
	s, err := open(context.Background(), path, Options{}, migrations)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func versionOf(t *testing.T, s *Store) uint64 {
	t.Helper()
	var v uint64
	if err := s.read(func(tx *bbolt.Tx) error {
		var err error
		v, err = schemaVersion(tx)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func bucketLen(t *testing.T, s *Store, name string) int {
	t.Helper()
	n := 0
	if err := s.read(func(tx *bbolt.Tx) error {
		n = tx.Bucket([]byte(name)).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// v2 is the kind of migration a later version adds: a new bucket, and a
// rewrite of existing records (here each run gets a note).
func v2(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists([]byte("tenant_settings")); err != nil {
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
		r.Notes = append(r.Notes, "migrated to v2")
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

	s := mustOpen(t, path, schema())
	if got := versionOf(t, s); got != 1 {
		t.Fatalf("new file has schema version %d, want 1", got)
	}
	if err := s.SaveRun(ctx, Run{ID: "run-1", Text: "before"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// A failing migration leaves the file at its version, data intact.
	failing := append(schema(), migration{version: 2, name: "broken", apply: func(tx *bbolt.Tx) error {
		if _, err := tx.CreateBucket([]byte("half_done")); err != nil {
			return err
		}
		return errors.New("disk says no")
	}})
	if _, err := open(ctx, path, Options{}, failing); err == nil {
		t.Fatal("open with a failing migration succeeded")
	}
	s = mustOpen(t, path, schema())
	if got := versionOf(t, s); got != 1 {
		t.Errorf("after a failed migration the version is %d, want 1", got)
	}
	if err := s.read(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("half_done")) != nil {
			return errors.New("the failed migration's bucket was kept")
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	s.Close()

	// v2 runs once, on open, over the existing data.
	withV2 := append(schema(), migration{version: 2, name: "tenant settings, run notes", apply: v2})
	for range 2 {
		s = mustOpen(t, path, withV2)
		if got := versionOf(t, s); got != 2 {
			t.Errorf("after v2 the version is %d, want 2", got)
		}
		r, err := s.GetRun(ctx, "run-1")
		if err != nil || r.Text != "before" || !slices.Equal(r.Notes, []string{"migrated to v2"}) {
			t.Errorf("run after v2 = %+v, %v; want its text kept and one note", r, err)
		}
		s.Close()
	}

	// This program, knowing only v1, refuses the v2 file.
	if _, err := open(ctx, path, Options{}, schema()); !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("open of a newer file = %v, want ErrSchemaTooNew", err)
	}
	// Migrations out of order are a programming error caught at open.
	bad := []migration{{version: 2, name: "skips one", apply: migrateV1}}
	if _, err := open(ctx, filepath.Join(t.TempDir(), "x.db"), Options{}, bad); err == nil {
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
		v := mcpapps.View{ID: fmt.Sprintf("v%d", i), ExpiresAt: exp}
		if err := s.SaveRun(ctx, Run{ID: fmt.Sprintf("r%d", i)}, []NewView{{View: v, HTML: html}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Saving v0 again (a retried SaveRun) must not count it twice.
	if err := s.SaveRun(ctx, Run{ID: "r0"}, []NewView{{View: mcpapps.View{ID: "v0", ExpiresAt: exp}, HTML: html}}, nil); err != nil {
		t.Fatal(err)
	}
	if n := bucketLen(t, s, bucketHTML); n != 1 {
		t.Errorf("%d documents stored, want 1", n)
	}
	if n := bucketLen(t, s, bucketViewsByExpiry); n != 5 {
		t.Errorf("%d expiry index entries, want 5", n)
	}
	var refs uint64
	s.read(func(tx *bbolt.Tx) error {
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
	s, err := open(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), Options{Now: func() time.Time { return now }}, schema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.sweepBatch = 7
	var views []NewView
	for i := range 50 {
		views = append(views, NewView{
			View: mcpapps.View{ID: fmt.Sprintf("v%02d", i), ExpiresAt: now.Add(-time.Minute)},
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
	// The first batch holds 7 views, so 50 take more than one.
	if st.Views != 50 || st.HTML != 5 || st.Transactions < 2 {
		t.Errorf("Sweep = %+v, want 50 views, 5 documents, in several transactions", st)
	}
	for _, b := range []string{bucketViews, bucketViewsByExpiry, bucketHTML, bucketHTMLRefs} {
		if n := bucketLen(t, s, b); n != 0 {
			t.Errorf("bucket %s has %d keys after the sweep, want 0", b, n)
		}
	}
}
