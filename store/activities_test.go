package store_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"teamsbot/store"
)

// An arrival is seen within its window, also after the store was closed
// and opened again (a restart), and no more once the window is over; a
// later arrival starts its window anew; the sweep takes expired arrivals away
// and keeps the others.
func testArrivalsSurviveRestartAndWindow(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	const window = 15 * time.Minute
	seen := func(s *store.Store, key string) bool {
		t.Helper()
		ok, err := s.Seen(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	record := func(s *store.Store, key string) {
		t.Helper()
		if err := s.RecordArrival(ctx, key, window); err != nil {
			t.Fatal(err)
		}
	}
	if seen(s, "conv-1\x00act-1") {
		t.Fatal("an activity never recorded is seen")
	}
	record(s, "conv-1\x00act-1")
	record(s, "conv-2\x00act-1")
	if !seen(s, "conv-1\x00act-1") || seen(s, "conv-3\x00act-1") {
		t.Error("a recorded arrival is not seen, or another conversation's is")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	s = openAt(t, bk, path, clk)
	if !seen(s, "conv-1\x00act-1") {
		t.Error("after a restart, an arrival within its window is forgotten")
	}
	record(s, "conv-2\x00act-1") // again, 10 minutes after the first: its window starts anew
	clk.Advance(6 * time.Minute) // conv-1's window is over; conv-2's began 6 minutes ago
	if seen(s, "conv-1\x00act-1") {
		t.Error("an arrival past its window still counts")
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.Activities != 1 {
		t.Fatalf("sweep removed %d arrivals (%v), want conv-1's", st.Activities, err)
	}
	if !seen(s, "conv-2\x00act-1") {
		t.Error("the sweep took an arrival whose window is not over")
	}
	for _, bad := range []string{"", strings.Repeat("x", 600)} {
		if _, err := s.Seen(ctx, bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Seen(%d bytes) = %v, want ErrInvalid", len(bad), err)
		}
		if err := s.RecordArrival(ctx, bad, window); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("RecordArrival(%d bytes) = %v, want ErrInvalid", len(bad), err)
		}
	}
}

// Arrivals recorded without waiting are each answered once, are seen once
// answered, and are all kept by Close, which commits what was handed in
// before it; a bad key is refused in the answer, and a closed store
// answers ErrClosed.
func testArrivalsRecordedLater(t *testing.T, bk backend) {
	clk := newClock()
	s, path := openTemp(t, bk, clk)
	ctx := context.Background()
	const n = 200
	answers := make(chan error, n+2)
	for i := range n {
		s.RecordArrivalLater(ctx, "conv-later\x00act-"+strconv.Itoa(i), time.Hour, func(err error) { answers <- err })
	}
	s.RecordArrivalLater(ctx, "", time.Hour, func(err error) { answers <- err })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var ok, invalid int
	for range n + 1 {
		switch err := <-answers; {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrInvalid):
			invalid++
		default:
			t.Errorf("an arrival recorded later was answered %v", err)
		}
	}
	if ok != n || invalid != 1 {
		t.Errorf("%d arrivals recorded and %d refused, want %d and the empty key's", ok, invalid, n)
	}
	s.RecordArrivalLater(ctx, "conv-later\x00after", time.Hour, func(err error) { answers <- err })
	if err := <-answers; !errors.Is(err, store.ErrClosed) {
		t.Errorf("recorded after Close: %v, want ErrClosed", err)
	}
	select {
	case err := <-answers:
		t.Errorf("an arrival was answered twice (%v)", err)
	default:
	}
	s = openAt(t, bk, path, clk)
	for _, i := range []int{0, n / 2, n - 1} {
		if seen, err := s.Seen(ctx, "conv-later\x00act-"+strconv.Itoa(i)); err != nil || !seen {
			t.Errorf("arrival %d not seen after a restart (%v)", i, err)
		}
	}
}
