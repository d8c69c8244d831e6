package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"teamsbot/internal/retry"
	"teamsbot/internal/testenv"
)

// Teams' documented per-conversation limits ("Optimize your bot with rate
// limiting in Teams"): the pacer must stay at or under every one.
var documentedLimits = []window{{time.Second, 7}, {2 * time.Second, 8}, {30 * time.Second, 60}, {time.Hour, 1800}}

// overLimit returns the first documented limit that times (sorted) break.
func overLimit(times []time.Time, limits []window) (window, bool) {
	for _, w := range limits {
		for i := range times {
			n := sort.Search(len(times), func(j int) bool { return !times[j].Before(times[i].Add(w.d)) }) - i
			if n > w.n {
				return w, true
			}
		}
	}
	return window{}, false
}

// A burst of 100 sends into one conversation, on a fake clock, is paced
// under every documented window, while a send to another conversation in
// the middle of the burst goes at once.
func TestPacerKeepsAConversationUnderTeamsLimits(t *testing.T) {
	clk := testenv.NewClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var waited []time.Duration
	p := newPacer(clk.Now, func(_ context.Context, d time.Duration) error {
		mu.Lock()
		waited = append(waited, d)
		mu.Unlock()
		return nil
	}, func(int, string) {})

	// Each send goes at the time the pacer gave it: the clock is moved
	// there, as a real sleep would.
	var sent []time.Time
	for i := range 100 {
		before := len(waited)
		if err := p.wait(context.Background(), "tenant-1", "busy"); err != nil {
			t.Fatal(err)
		}
		if len(waited) > before {
			clk.Advance(waited[len(waited)-1])
		}
		sent = append(sent, clk.Now())
		if i == 50 {
			before := len(waited)
			if err := p.wait(context.Background(), "tenant-1", "quiet"); err != nil || len(waited) != before {
				t.Errorf("a send to another conversation waited %v (%v)", waited[before:], err)
			}
		}
	}
	if w, over := overLimit(sent, documentedLimits); over {
		t.Errorf("100 paced sends break the limit of %d in %v", w.n, w.d)
	}
	// Not slower than needed: 100 sends at 55 per 30 s take about 60 s.
	if took := sent[99].Sub(sent[0]); took > 61*time.Second {
		t.Errorf("100 sends took %v, want about 60 s", took)
	}
}

// A wait that would pass the caller's deadline fails at once and leaves
// the queue as it was.
func TestPacerRefusesAWaitPastTheDeadline(t *testing.T) {
	clk := testenv.NewClock(time.Now())
	p := newPacer(clk.Now, func(context.Context, time.Duration) error { return nil }, func(int, string) {})
	for range 6 {
		if err := p.wait(context.Background(), "", "c"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(100*time.Millisecond))
	defer cancel()
	if err := p.wait(ctx, "", "c"); err != context.DeadlineExceeded {
		t.Errorf("the seventh send within a second with 100 ms left: %v, want DeadlineExceeded", err)
	}
	if n := len(p.queues["c\x00c"].times); n != 6 {
		t.Errorf("the refused wait left %d times in the queue, want 6", n)
	}
}

// Through the real connector and HTTP on loopback: a burst of 30 answers
// into one conversation arrives at the Bot Connector within Teams' limits,
// and an answer into another conversation, sent after the burst started,
// is not held behind it.
func TestBurstIntoOneConversationIsPacedOnTheWire(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := withTenant(context.Background(), testTenant)
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			if _, err := h.bot.conn.Send(ctx, h.conn.srv.URL, "19:busy@thread.v2", "", &outActivity{Type: "message", Text: fmt.Sprint("answer ", i)}); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	time.Sleep(50 * time.Millisecond)
	// The answers held back wait in the pacer's queues, their senders
	// blocked in Send alone: none waits with the connector's call (its
	// request, its retries) on its stack.
	buf := make([]byte, 8<<20)
	if dump := string(buf[:runtime.Stack(buf, true)]); strings.Contains(dump, "(*pacer).wait(") || strings.Contains(dump, "(*connector).do(") && strings.Contains(dump, "retry.Sleep(") {
		t.Errorf("held answers wait inside the connector's call:\n%s", dump)
	}
	start := time.Now()
	if _, err := h.bot.conn.Send(ctx, h.conn.srv.URL, "19:quiet@thread.v2", "", &outActivity{Type: "message", Text: "elsewhere"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the other conversation's answer took %v behind the burst", d)
	}
	wg.Wait()
	var busy []time.Time
	for _, c := range h.conn.snapshot() {
		if c.ConversationID == "19:busy@thread.v2" {
			busy = append(busy, c.At)
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i].Before(busy[j]) })
	if len(busy) != 30 {
		t.Fatalf("%d of 30 answers arrived", len(busy))
	}
	if w, over := overLimit(busy, documentedLimits); over {
		t.Errorf("the burst broke Teams' limit of %d in %v at the connector: %v", w.n, w.d, busy)
	}
	if got := counterValue(t, h.reg, "teamsbot_bot_sends_paced_total", nil); got < 8 {
		t.Errorf("teamsbot_bot_sends_paced_total = %v, want the held sends counted", got)
	}
}

// Sends that were given their times but held up on the way (waiting for a
// connection, or for a core) and then written all at once are spaced
// again as they are written: 40 sends to 40 conversations of one tenant,
// all about to be written in the same instant, go out within the
// tenant's 30 a second, and each conversation's under its own limits.
func TestPacerSpacesSendsHeldOnTheWay(t *testing.T) {
	clk := testenv.NewClock(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
	p := newPacer(clk.Now, func(_ context.Context, d time.Duration) error {
		clk.Advance(d)
		return nil
	}, func(int, string) {})
	ctx := context.Background()
	for i := range 40 {
		if err := p.wait(ctx, "tenant-1", fmt.Sprint("conversation-", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Held: the 40 all reach the wire together, now.
	var written []time.Time
	perConversation := map[string][]time.Time{}
	for i := range 40 {
		conv := fmt.Sprint("conversation-", i%3) // three conversations share them
		if err := p.sending(ctx, "tenant-1", conv); err != nil {
			t.Fatal(err)
		}
		written = append(written, clk.Now())
		perConversation[conv] = append(perConversation[conv], clk.Now())
	}
	if w, over := overLimit(written, []window{{time.Second, 30}}); over {
		t.Errorf("40 held sends written %d in %v: over the tenant's limit", w.n, w.d)
	}
	for conv, ts := range perConversation {
		if w, over := overLimit(ts, documentedLimits); over {
			t.Errorf("%s: held sends written over the limit of %d in %v", conv, w.n, w.d)
		}
	}
	// A send that kept its time passes at once.
	before := clk.Now()
	if err := p.sending(ctx, "tenant-2", "elsewhere"); err != nil || !clk.Now().Equal(before) {
		t.Errorf("a send on time was held %v (%v)", clk.Now().Sub(before), err)
	}
}

// heldTransport holds every request until a moment, then lets them all
// go at once, as a stalled connection or a core busy elsewhere holds sends
// that already have their times.
type heldTransport struct {
	base  http.RoundTripper
	until time.Time
}

func (h heldTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	time.Sleep(time.Until(h.until))
	return h.base.RoundTrip(r)
}

// Sends held on the way after their last look at the pace still reach
// Teams within its limits: 90 sends at once to 30 conversations of one
// tenant, those that leave in the first 1.5 s held until then and written
// together, arrive at a Bot Connector on loopback never more than 30 in a
// second for the tenant, nor over a conversation's 7 in 1 s and 8 in 2 s,
// since each conversation and the tenant bound their sends under way.
func TestSendsHeldOnTheWayArriveWithinTeamsLimits(t *testing.T) {
	var mu sync.Mutex
	var all []time.Time
	perConversation := map[string][]time.Time{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		conv := strings.Split(strings.TrimPrefix(r.URL.Path, "/v3/conversations/"), "/")[0]
		mu.Lock()
		all = append(all, now)
		perConversation[conv] = append(perConversation[conv], now)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"1"}`)
	}))
	defer srv.Close()
	c, _ := testConnector(t)
	c.client = &http.Client{Transport: heldTransport{base: srv.Client().Transport, until: time.Now().Add(1500 * time.Millisecond)}}
	c.pacer = newPacer(time.Now, retry.Sleep, func(int, string) {})
	ctx := withTenant(context.Background(), "tenant-1")
	var wg sync.WaitGroup
	for i := range 90 {
		wg.Go(func() {
			if _, err := c.Send(ctx, srv.URL, fmt.Sprint("a:conv-", i%30), "", &outActivity{Type: "message", Text: "hi"}); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	slices.SortFunc(all, time.Time.Compare)
	if w, over := overLimit(all, []window{{time.Second, 30}}); over {
		t.Errorf("%d sends of one tenant arrived over its limit of %d in %v", len(all), w.n, w.d)
	}
	for conv, ts := range perConversation {
		slices.SortFunc(ts, time.Time.Compare)
		if w, over := overLimit(ts, documentedLimits); over {
			t.Errorf("%s: sends arrived over the limit of %d in %v", conv, w.n, w.d)
		}
	}
	if len(all) != 90 {
		t.Errorf("%d sends arrived, want 90", len(all))
	}
}

// admitAll admits n sends to conversation of tenant and returns, in the
// order they were admitted, when each was, and the errors of those that
// were not.
func admitAll(ctx context.Context, p *pacer, n int, tenant, conversation string, hold time.Duration) ([]time.Time, []error) {
	var mu sync.Mutex
	var at []time.Time
	var errs []error
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		p.admit(ctx, tenant, conversation, func(release func(), err error) {
			defer wg.Done()
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			} else {
				at = append(at, time.Now())
			}
			mu.Unlock()
			if release != nil {
				time.Sleep(hold) // the request under way
				release()
			}
		})
	}
	wg.Wait()
	return at, errs
}

// Sends admitted without a goroutine each keep the same rules as sends
// that wait in one: 60 sends into one conversation of a tenant, with
// windows a tenth of Teams', are admitted under every window and one at a
// time, and while they wait the process holds no goroutine for them.
func TestPacerAdmitsWithoutGoroutines(t *testing.T) {
	p := newPacer(time.Now, retry.Sleep, func(int, string) {})
	scaled := func(ws []window) []window {
		out := slices.Clone(ws)
		for i := range out {
			out[i].d /= 10
		}
		return out
	}
	p.conversation, p.tenantLimits = scaled(conversationWindows()), scaled(tenantWindows())

	before := runtime.NumGoroutine()
	var underWay, most atomic.Int32
	var mu sync.Mutex
	var at []time.Time
	var wg sync.WaitGroup
	for range 60 {
		wg.Add(1)
		p.admit(context.Background(), "tenant-1", "busy", func(release func(), err error) {
			defer wg.Done()
			if err != nil {
				t.Error(err)
				return
			}
			n := underWay.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			underWay.Add(-1)
			release()
		})
	}
	// The first send goes at once; the other 59 wait, on timers and in
	// the queue of places under way.
	// (A goroutine each would be 59 more; other tests' timers may add a
	// few.)
	time.Sleep(20 * time.Millisecond)
	if n := runtime.NumGoroutine() - before; n > 20 {
		t.Errorf("%d goroutines more while 60 sends wait, want a handful at most", n)
	}
	wg.Wait()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	limits := scaled(documentedLimits)
	if w, over := overLimit(at, limits); over {
		t.Errorf("60 admitted sends break the (scaled) limit of %d in %v", w.n, w.d)
	}
	if m := most.Load(); m != conversationInFlight {
		t.Errorf("at most %d sends of the conversation under way at once, want %d", m, conversationInFlight)
	}
	if p.waiting != 0 || len(p.underWay) != 0 {
		t.Errorf("after the sends: %d counted as waiting, %d keys with places under way; want none", p.waiting, len(p.underWay))
	}
}

// An admission ends with its context, and with its patience for the
// places under way, and hands on any place it held: the sends after it
// still go.
func TestPacerAdmissionsEndWithTheirContext(t *testing.T) {
	p := newPacer(time.Now, retry.Sleep, func(int, string) {})
	// One send holds the conversation's only place under way.
	held := make(chan func(), 1)
	p.admit(context.Background(), "tenant-1", "c", func(release func(), err error) {
		if err != nil {
			t.Error(err)
		}
		held <- release
	})
	release := <-held

	// One waits with a context that is cancelled, one with a patience.
	ctx, cancel := context.WithCancelCause(context.Background())
	errs := make(chan error, 2)
	p.admit(ctx, "tenant-1", "c", func(r func(), err error) {
		if r != nil {
			r()
		}
		errs <- err
	})
	p.admit(withPatience(context.Background(), 1200*time.Millisecond), "tenant-1", "c", func(r func(), err error) {
		if r != nil {
			r()
		}
		errs <- err
	})
	cause := errors.New("the turn ended")
	cancel(cause)
	if err := <-errs; !errors.Is(err, cause) {
		t.Errorf("a cancelled admission ended with %v, want its context's cause", err)
	}
	if err := <-errs; !errors.Is(err, errPaceBusy) {
		t.Errorf("an admission past its patience ended with %v, want errPaceBusy", err)
	}
	release()
	// Nothing was left taken: the next send is admitted.
	at, failed := admitAll(context.Background(), p, 1, "tenant-1", "c", 0)
	if len(at) != 1 || len(failed) != 0 {
		t.Errorf("the send after them: admitted %d, failed %v", len(at), failed)
	}
	if p.waiting != 0 || len(p.underWay) != 0 {
		t.Errorf("%d counted as waiting, %d keys with places under way; want none", p.waiting, len(p.underWay))
	}
}
