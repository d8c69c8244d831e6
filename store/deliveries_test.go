package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// Where a run's answer went is kept with the run: stored, replaced, found
// again after the file is reopened, and refused for a run that is not
// stored or with ids that could never be updated.
func testDeliveries(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	if err := s.SaveRun(ctx, store.Run{ID: "run-1", TenantID: "tenant-1"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delivery(ctx, "run-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delivery before any was put = %v, want ErrNotFound", err)
	}

	d := store.Delivery{RunID: "run-1", ConversationKey: "tenant-1/a:conv", ConversationID: "a:conv", ActivityIDs: []string{"1:3", "1:4"}}
	if err := s.PutDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	d.SentAt = clk.Now() // stamped by the store
	got, err := s.Delivery(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("Delivery (-want +got):\n%s", diff)
	}

	// A later update replaces the ids, in their new order.
	d.ActivityIDs = []string{"1:4", "1:3", "1:9"}
	d.SentAt = clk.Now().Add(time.Minute)
	if err := s.PutDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, bk, path, clk)
	got, err = s.Delivery(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("Delivery after replace and reopen (-want +got):\n%s", diff)
	}

	// A delivery never outlives, nor precedes, its run.
	if err := s.PutDelivery(ctx, store.Delivery{RunID: "no-such-run", ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{"1:1"}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutDelivery for a run not stored = %v, want ErrNotFound", err)
	}
	if _, err := s.Delivery(ctx, "no-such-run"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Delivery of a refused put = %v, want ErrNotFound", err)
	}

	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf("1:%d", i)
	}
	for name, bad := range map[string]store.Delivery{
		"no run id":            {ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{"1:1"}},
		"no conversation key":  {RunID: "run-1", ConversationID: "c", ActivityIDs: []string{"1:1"}},
		"no conversation":      {RunID: "run-1", ConversationKey: "k", ActivityIDs: []string{"1:1"}},
		"no ids":               {RunID: "run-1", ConversationKey: "k", ConversationID: "c"},
		"an empty id":          {RunID: "run-1", ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{"1:1", ""}},
		"an id far too long":   {RunID: "run-1", ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{strings.Repeat("x", 600)}},
		"more ids than a turn": {RunID: "run-1", ConversationKey: "k", ConversationID: "c", ActivityIDs: tooMany},
	} {
		if err := s.PutDelivery(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutDelivery with %s = %v, want ErrInvalid", name, err)
		}
	}
	if got, err := s.Delivery(ctx, "run-1"); err != nil || !cmp.Equal(got, d) {
		t.Errorf("after refused puts Delivery = %+v, %v; want it unchanged", got, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.PutDelivery(cancelled, store.Delivery{RunID: "run-1", ConversationKey: "k", ConversationID: "c", ActivityIDs: []string{"1:1"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("PutDelivery with a cancelled context = %v, want context.Canceled", err)
	}
	if got, _ := s.Delivery(ctx, "run-1"); got.ConversationKey != d.ConversationKey {
		t.Errorf("a cancelled PutDelivery changed the record: %+v", got)
	}
}

// Turns that finish together record their runs and deliveries in shared
// commits, as one turn's SaveRun and PutDelivery come one after the other.
func TestConcurrentDeliveriesShareCommits(t *testing.T) {
	clk := newClock()
	s, _ := openTemp(t, boltBackend(), clk)
	ctx := context.Background()
	const n = 100
	before := s.Stats()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			run := fmt.Sprintf("run-%03d", i)
			if err := s.SaveRun(ctx, store.Run{ID: run, TenantID: "tenant-1"}, nil, nil); err != nil {
				errs[i] = err
				return
			}
			errs[i] = s.PutDelivery(ctx, store.Delivery{RunID: run, ConversationKey: "tenant-1/a:conv", ConversationID: "a:conv", ActivityIDs: []string{fmt.Sprintf("1:%d", i)}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("turn %d: %v", i, err)
		}
	}
	for i := range n {
		d, err := s.Delivery(ctx, fmt.Sprintf("run-%03d", i))
		if err != nil || len(d.ActivityIDs) != 1 || d.ActivityIDs[0] != fmt.Sprintf("1:%d", i) {
			t.Errorf("Delivery %d = %+v, %v", i, d, err)
		}
	}
	st := s.Stats()
	writes, commits := st.Writes-before.Writes, st.Commits-before.Commits
	t.Logf("%d writes in %d commits", writes, commits)
	if writes != 2*n || commits >= writes {
		t.Errorf("%d writes in %d commits; want %d writes sharing commits", writes, commits, 2*n)
	}
}
