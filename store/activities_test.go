package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/store"
)

// An activity is seen once within its window, also after the store was
// closed and opened again (a restart), and again once the window is over;
// a forgotten arrival counts as none; the sweep takes expired arrivals
// away and keeps the others.
func TestFirstSeenSurvivesRestartAndWindow(t *testing.T) {
	clk := newClock()
	s, path := openTemp(t, clk)
	ctx := context.Background()
	const window = 15 * time.Minute
	first := func(s *store.Store, key string) bool {
		t.Helper()
		ok, err := s.FirstSeen(ctx, key, window)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !first(s, "conv-1\x00act-1") || first(s, "conv-1\x00act-1") {
		t.Fatal("an activity is not first once, then seen")
	}
	if !first(s, "conv-2\x00act-1") {
		t.Error("the same activity id in another conversation counts as seen")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	s = openAt(t, path, clk)
	if first(s, "conv-1\x00act-1") {
		t.Error("after a restart, a retry within the window runs again")
	}
	if err := s.ForgetSeen(ctx, "conv-2\x00act-1"); err != nil {
		t.Fatal(err)
	}
	if !first(s, "conv-2\x00act-1") {
		t.Error("a forgotten arrival still counts")
	}
	clk.Advance(6 * time.Minute) // conv-1's window is over; conv-2's began 6 minutes ago
	st, err := s.Sweep(ctx)
	if err != nil || st.Activities != 1 {
		t.Fatalf("sweep removed %d arrivals (%v), want conv-1's", st.Activities, err)
	}
	if first(s, "conv-2\x00act-1") {
		t.Error("the sweep took an arrival whose window is not over")
	}
	if !first(s, "conv-1\x00act-1") {
		t.Error("an arrival past its window still counts")
	}
	for _, bad := range []string{"", strings.Repeat("x", 600)} {
		if _, err := s.FirstSeen(ctx, bad, window); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("FirstSeen(%d bytes) = %v, want ErrInvalid", len(bad), err)
		}
	}
}

// Of many concurrent arrivals of one activity (retries racing), exactly
// one is first.
func TestFirstSeenOnceUnderConcurrency(t *testing.T) {
	s, _ := openTemp(t, newClock())
	var wg sync.WaitGroup
	var mu sync.Mutex
	firsts := 0
	for range 20 {
		wg.Go(func() {
			ok, err := s.FirstSeen(context.Background(), "conv\x00same", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 {
		t.Errorf("%d arrivals were first, want 1", firsts)
	}
}
