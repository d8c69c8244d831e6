package retry_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/retry"
)

func TestAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for h, want := range map[string]struct {
		wait time.Duration
		told bool
	}{
		"":                              {0, false},
		"3":                             {3 * time.Second, true},
		" 3 ":                           {3 * time.Second, true},
		"-1":                            {0, false},
		"soon":                          {0, false},
		"Wed, 02 Dec 2026 10:00:07 GMT": {7 * time.Second, true},
		"Wed, 02 Dec 2026 09:00:00 GMT": {0, true},
	} {
		if wait, told := retry.After(h, now); wait != want.wait || told != want.told {
			t.Errorf("After(%q) = %v, %v; want %v, %v", h, wait, told, want.wait, want.told)
		}
	}
}

// recorder is a Sleep that records the waits instead of sleeping.
func recorder(waits *[]time.Duration) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		*waits = append(*waits, d)
		return ctx.Err()
	}
}

// The waits follow Retry-After when the server gives it, and else double
// from First with jitter (between half and all of it); Max caps both.
func TestWaits(t *testing.T) {
	var waits []time.Duration
	p := retry.Policy{Attempts: 6, First: 100 * time.Millisecond, Max: 10 * time.Second, Sleep: recorder(&waits)}
	r := p.Start()
	ctx := context.Background()
	for _, ra := range []string{"", "2", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), "", ""} {
		if _, err := r.Wait(ctx, ra); err != nil {
			t.Fatal(err)
		}
	}
	if r.Attempt() != 6 {
		t.Errorf("Attempt() = %d after 5 waits, want 6", r.Attempt())
	}
	in := func(i int, d time.Duration) {
		if waits[i] < d/2 || waits[i] > d {
			t.Errorf("wait %d = %v, want within [%v, %v]", i, waits[i], d/2, d)
		}
	}
	in(0, 100*time.Millisecond)
	if waits[1] != 2*time.Second {
		t.Errorf("wait after Retry-After: 2 = %v", waits[1])
	}
	if waits[2] != 10*time.Second {
		t.Errorf("wait after a Retry-After an hour ahead = %v, want the cap", waits[2])
	}
	in(3, 800*time.Millisecond)
	in(4, 1600*time.Millisecond)
	if _, err := r.Wait(ctx, ""); !errors.Is(err, retry.ErrAttempts) || len(waits) != 5 {
		t.Errorf("a sixth wait: %v (%d waits), want ErrAttempts and no wait", err, len(waits))
	}
}

// A wait that would end after the context's deadline is not made; nor is
// one past the budget of a call without a deadline.
func TestWaitBoundedByDeadlineAndBudget(t *testing.T) {
	var waits []time.Duration
	p := retry.Policy{Attempts: 10, First: time.Second, Budget: 3 * time.Second, Sleep: recorder(&waits)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.Start().Wait(ctx, "5")
	if !errors.Is(err, retry.ErrDeadline) || len(waits) != 0 {
		t.Fatalf("Retry-After past the deadline: %v, waits %v", err, waits)
	}
	if want := "Retry-After of 5s"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	r := p.Start()
	if _, err := r.Wait(context.Background(), "2"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(context.Background(), "2"); !errors.Is(err, retry.ErrBudget) {
		t.Errorf("4 s of waiting with a budget of 3 s: %v", err)
	}
	// The real sleep ends with its context.
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	if err := retry.Sleep(cctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep on a cancelled context = %v", err)
	}
}

// Again: the statuses the server asks to retry go again whatever the
// method; a connection refused before the request was written goes again;
// a request the server may have received goes again only when idempotent.
func TestAgain(t *testing.T) {
	p := retry.Policy{Statuses: []int{429, 503}}
	for _, tc := range []struct {
		status     int
		idempotent bool
		want       bool
	}{{429, false, true}, {503, false, true}, {500, false, false}, {500, true, false}, {404, true, false}, {200, true, false}} {
		if got := p.Again(tc.idempotent, tc.status, nil); got != tc.want {
			t.Errorf("Again(idempotent %v, %d) = %v", tc.idempotent, tc.status, got)
		}
	}

	// Nothing listens: the dial fails, nothing was sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	_, err = http.Post(refused, "text/plain", nil)
	if err == nil || !retry.NotSent(err) || !p.Again(false, 0, err) {
		t.Errorf("connection refused: %v; NotSent %v, want a retry even when not idempotent", err, retry.NotSent(err))
	}

	// The server reads the request, then drops the connection: it may
	// have applied it.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer srv.Close()
	_, err = http.Post(srv.URL, "text/plain", nil)
	if err == nil || retry.NotSent(err) {
		t.Fatalf("dropped connection: %v, NotSent %v", err, retry.NotSent(err))
	}
	if p.Again(false, 0, err) || !p.Again(true, 0, err) {
		t.Errorf("dropped connection: Again(not idempotent) %v, Again(idempotent) %v; want false, true", p.Again(false, 0, err), p.Again(true, 0, err))
	}

	// A request its own context ended is never sent again.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := http.DefaultClient.Do(req); p.Again(true, 0, err) {
		t.Errorf("a cancelled request is retried: %v", err)
	}
}
