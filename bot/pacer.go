package bot

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Sends are paced below the limits in Microsoft's "Optimize your bot with
// rate limiting in Teams": per bot per conversation at most 7 operations in
// 1 s, 8 in 2 s, 60 in 30 s and 1,800 in an hour, and per app per tenant 30
// requests a second. The pacer keeps a margin under each, in count and in
// time (each window a twentieth longer, as the connector's clock is not
// ours), so that a burst of answers never meets a 429 of its own making.
func conversationWindows() []window {
	return []window{{1050 * time.Millisecond, 6}, {2100 * time.Millisecond, 7}, {31500 * time.Millisecond, 55}, {63 * time.Minute, 1700}}
}

func tenantWindows() []window { return []window{{1050 * time.Millisecond, 25}} }

// Teams counts a send when it arrives; the pacer hands out the times at
// which sends leave, and a send may be held on the way (a busy core, a
// connection's queue) and arrive with later ones. So each conversation and
// each tenant also bounds its sends under way, from their second look
// (sending) until their answer: at most the difference between Teams'
// limit and the pacer's count in its shortest window. In any second then,
// at most the pacer's count of sends leave and at most that many more,
// sent earlier, arrive with them: 6 + 1 = 7 for a conversation, 25 + 5 =
// 30 for a tenant, however long any of them was held.
const (
	conversationInFlight = 7 - 6
	tenantInFlight       = 30 - 25
)

// window is a limit: at most n operations in any span of d.
type window struct {
	d time.Duration
	n int
}

// maxPacedKeys bounds the conversations and tenants the pacer remembers;
// past it, those idle for the longest window are forgotten.
const maxPacedKeys = 50_000

// pacer hands out send times, one queue per conversation and one per
// tenant. A conversation's sends wait only for its own queue and its
// tenant's, so one busy channel never delays another conversation beyond
// the tenant's share.
type pacer struct {
	now                        func() time.Time
	sleep                      func(context.Context, time.Duration) error
	conversation, tenantLimits []window

	mu      sync.Mutex
	queues  map[string]*paceQueue
	waiting int // sends waiting for their time, for the metrics
	onWait  func(waiting int, kind string)
	// underWay are the conversations' and tenants' sends under way
	// (inFlight), by key; a key with none is forgotten.
	underWay map[string]*underWay
}

// underWay is one key's sends under way and the sends waiting to be, in
// the order they came; a send that leaves hands its place to the first.
type underWay struct {
	n       int
	waiters []chan struct{}
}

// paceQueue holds the times handed out for one key, oldest first, as long
// as the longest window can still count them.
type paceQueue struct {
	times   []time.Time
	windows []window
}

func newPacer(now func() time.Time, sleep func(context.Context, time.Duration) error, onWait func(int, string)) *pacer {
	return &pacer{now: now, sleep: sleep, queues: map[string]*paceQueue{}, underWay: map[string]*underWay{}, onWait: onWait,
		conversation: conversationWindows(), tenantLimits: tenantWindows()}
}

// wait blocks until one more operation may go to conversation (of
// tenant, when known; see withTenant), or ctx ends: first for the
// conversation's turn, then for the tenant's. The tenant's turn is taken
// only once the conversation's has come, so a busy conversation's queued
// sends hold no places in the tenant's queue that another conversation
// could use. A wait that would pass ctx's deadline fails at once, taking
// no place in the queue, and so does one longer than ctx's patience
// (withPatience), with errPaceBusy.
func (p *pacer) wait(ctx context.Context, tenant, conversation string) error {
	if err := p.turn(ctx, "c\x00"+conversation, p.conversation, "conversation"); err != nil {
		return err
	}
	if tenant == "" {
		return nil
	}
	return p.turn(ctx, "t\x00"+tenant, p.tenantLimits, "tenant")
}

// turn takes the next place in key's queue and sleeps until its time.
func (p *pacer) turn(ctx context.Context, key string, ws []window, kind string) error {
	p.mu.Lock()
	now := p.now()
	q := p.queue(key, ws, now)
	at := q.next(now)
	delay := at.Sub(now)
	if dl, ok := ctx.Deadline(); ok && delay > 0 && dl.Before(at) {
		p.mu.Unlock()
		return context.DeadlineExceeded
	}
	if patience, ok := ctx.Value(patienceKey{}).(time.Duration); ok && delay > patience {
		p.mu.Unlock()
		return errPaceBusy
	}
	q.take(at)
	if delay <= 0 {
		p.mu.Unlock()
		return nil
	}
	p.waiting++
	p.onWait(p.waiting, kind)
	p.mu.Unlock()

	err := p.sleep(ctx, delay)
	p.mu.Lock()
	p.waiting--
	p.onWait(p.waiting, "")
	p.mu.Unlock()
	return err
}

// sending holds a send, as its request leaves for the connector, until
// the times at which sends left for conversation (and tenant) keep every
// window, and then records its own. wait gave the send its time, but it
// may have been held since (fetching a token, or waiting for a core when
// thousands of turns share two), and sends held together would reach
// Teams together: 10,000 streamed turns at once (BenchmarkSlowStreams)
// counted thousands of calls over a tenant's limit at the connector
// without this second look. Sends that kept their times pass at once. It
// runs before the request takes a connection, never while it holds one.
func (p *pacer) sending(ctx context.Context, tenant, conversation string) error {
	for {
		p.mu.Lock()
		now := p.now()
		cq := p.queue("wc\x00"+conversation, p.conversation, now)
		at := cq.next(now)
		var tq *paceQueue
		if tenant != "" {
			tq = p.queue("wt\x00"+tenant, p.tenantLimits, now)
			if t := tq.next(now); t.After(at) {
				at = t
			}
		}
		if !at.After(now) {
			cq.take(now)
			if tq != nil {
				tq.take(now)
			}
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		if err := p.sleep(ctx, at.Sub(now)); err != nil {
			return err
		}
	}
}

// inFlight takes the send's place among conversation's sends under way,
// then among tenant's (when known), waiting in order for one when all are
// taken, and returns the function that gives both back once the send is
// answered. A send with a patience (withPatience) waits for them no longer
// than it, and gives up with errPaceBusy.
func (p *pacer) inFlight(ctx context.Context, tenant, conversation string) (release func(), err error) {
	if patience, ok := ctx.Value(patienceKey{}).(time.Duration); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, patience, errPaceBusy)
		defer cancel()
	}
	ckey := "ic\x00" + conversation
	if err := p.enter(ctx, ckey, conversationInFlight); err != nil {
		return nil, err
	}
	if tenant == "" {
		return func() { p.leave(ckey) }, nil
	}
	tkey := "it\x00" + tenant
	if err := p.enter(ctx, tkey, tenantInFlight); err != nil {
		p.leave(ckey)
		return nil, err
	}
	return func() { p.leave(tkey); p.leave(ckey) }, nil
}

// enter takes one of key's max places under way, or waits in order for
// one until ctx ends (with its cause: errPaceBusy past a patience).
func (p *pacer) enter(ctx context.Context, key string, max int) error {
	p.mu.Lock()
	u := p.underWay[key]
	if u == nil {
		u = &underWay{}
		p.underWay[key] = u
	}
	if u.n < max {
		u.n++
		p.mu.Unlock()
		return nil
	}
	turn := make(chan struct{})
	u.waiters = append(u.waiters, turn)
	p.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if i := slices.Index(u.waiters, turn); i >= 0 {
		u.waiters = slices.Delete(u.waiters, i, i+1)
		p.mu.Unlock()
		return context.Cause(ctx)
	}
	p.mu.Unlock()
	// The place was handed over as ctx ended: hand it on.
	p.leave(key)
	return context.Cause(ctx)
}

// leave gives one of key's places back: to the first send waiting, or
// free.
func (p *pacer) leave(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.underWay[key]
	if len(u.waiters) > 0 {
		close(u.waiters[0])
		u.waiters = slices.Delete(u.waiters, 0, 1)
		return
	}
	u.n--
	if u.n == 0 {
		delete(p.underWay, key)
	}
}

// queue returns key's queue, forgetting idle ones when there are too many.
func (p *pacer) queue(key string, ws []window, now time.Time) *paceQueue {
	q := p.queues[key]
	if q != nil {
		return q
	}
	if len(p.queues) >= maxPacedKeys {
		for k, old := range p.queues {
			if old.idle(now) {
				delete(p.queues, k)
			}
		}
	}
	q = &paceQueue{windows: ws}
	p.queues[key] = q
	return q
}

// next is the earliest time at or after from when one more operation stays
// within every window.
func (q *paceQueue) next(from time.Time) time.Time {
	at := from
	if n := len(q.times); n > 0 && q.times[n-1].After(at) {
		at = q.times[n-1] // the queue is served in order
	}
	for _, w := range q.windows {
		if n := len(q.times); n >= w.n {
			if t := q.times[n-w.n].Add(w.d); t.After(at) {
				at = t
			}
		}
	}
	return at
}

// take records an operation at t, dropping times no window counts any more.
func (q *paceQueue) take(t time.Time) {
	longest := q.windows[len(q.windows)-1].d
	drop := 0
	for drop < len(q.times) && !q.times[drop].After(t.Add(-longest)) {
		drop++
	}
	q.times = append(q.times[drop:], t)
}

// idle reports whether no window counts any of the queue's times at now.
func (q *paceQueue) idle(now time.Time) bool {
	n := len(q.times)
	return n == 0 || !q.times[n-1].After(now.Add(-q.windows[len(q.windows)-1].d))
}

// tenantKey carries, in a send's context, the tenant whose conversation it
// goes to, for the per-tenant limit.
type tenantKey struct{}

// withTenant marks ctx's sends as going to tenant's conversations.
func withTenant(ctx context.Context, tenant string) context.Context {
	if tenant == "" {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, tenant)
}

// errPaceBusy is a send given up because its place under the rate limits
// would come later than its patience allows (withPatience).
var errPaceBusy = errors.New("bot: the conversation's or the tenant's sends are queued past this send's patience")

// patienceKey carries, in a send's context, how long the send may wait
// for its place under the rate limits.
type patienceKey struct{}

// withPatience marks ctx's sends as worth sending only if their place
// under the rate limits comes within d: a stream's update, which the next
// one replaces, must not queue before the answers of other turns of the
// tenant.
func withPatience(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, patienceKey{}, d)
}

// tenantOf is the tenant withTenant named, or "".
func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}
