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
	waiters []*placeWaiter
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
	delay, err := p.reserve(ctx, key, ws, kind)
	p.mu.Unlock()
	if err != nil || delay <= 0 {
		return err
	}
	err = p.sleep(ctx, delay)
	p.mu.Lock()
	p.waited()
	p.mu.Unlock()
	return err
}

// reserve takes, with p.mu held, the next place in key's queue and
// returns how long until its time (counted as waiting, until waited, when
// above zero), or refuses a place whose time would pass ctx's deadline or
// patience, taking none.
func (p *pacer) reserve(ctx context.Context, key string, ws []window, kind string) (time.Duration, error) {
	now := p.now()
	q := p.queue(key, ws, now)
	at := q.next(now)
	delay := at.Sub(now)
	if dl, ok := ctx.Deadline(); ok && delay > 0 && dl.Before(at) {
		return 0, context.DeadlineExceeded
	}
	if patience, ok := ctx.Value(patienceKey{}).(time.Duration); ok && delay > patience {
		return 0, errPaceBusy
	}
	q.take(at)
	if delay > 0 {
		p.waiting++
		p.onWait(p.waiting, kind)
	}
	return delay, nil
}

// waited counts, with p.mu held, the end of a wait reserve began.
func (p *pacer) waited() {
	p.waiting--
	p.onWait(p.waiting, "")
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
		wait := p.leaving(tenant, conversation)
		p.mu.Unlock()
		if wait <= 0 {
			return nil
		}
		if err := p.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// leaving is sending's look, with p.mu held: it records the send as
// leaving now and returns zero, or returns how long until it may.
func (p *pacer) leaving(tenant, conversation string) time.Duration {
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
	if at.After(now) {
		return at.Sub(now)
	}
	cq.take(now)
	if tq != nil {
		tq.take(now)
	}
	return 0
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

// placeWaiter is a send waiting for a place under way; leave hands it
// one by calling grant, with p.mu held.
type placeWaiter struct{ grant func() }

// enter takes one of key's max places under way, or waits in order for
// one until ctx ends (with its cause: errPaceBusy past a patience).
func (p *pacer) enter(ctx context.Context, key string, max int) error {
	turn := make(chan struct{})
	p.mu.Lock()
	w := &placeWaiter{grant: func() { close(turn) }}
	if p.takePlace(key, max, w) {
		p.mu.Unlock()
		return nil
	}
	p.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if p.dropWaiter(key, w) {
		p.mu.Unlock()
		return context.Cause(ctx)
	}
	p.mu.Unlock()
	// The place was handed over as ctx ended: hand it on.
	p.leave(key)
	return context.Cause(ctx)
}

// takePlace takes, with p.mu held, one of key's max places under way and
// reports true, or queues w for the next one free and reports false.
func (p *pacer) takePlace(key string, max int, w *placeWaiter) bool {
	u := p.underWay[key]
	if u == nil {
		u = &underWay{}
		p.underWay[key] = u
	}
	if u.n < max {
		u.n++
		return true
	}
	u.waiters = append(u.waiters, w)
	return false
}

// dropWaiter takes w out of key's queue, with p.mu held, and reports
// whether it was still there (not yet handed a place).
func (p *pacer) dropWaiter(key string, w *placeWaiter) bool {
	u := p.underWay[key]
	if u == nil {
		return false
	}
	i := slices.Index(u.waiters, w)
	if i < 0 {
		return false
	}
	u.waiters = slices.Delete(u.waiters, i, i+1)
	return true
}

// leave gives one of key's places back: to the first send waiting, or
// free.
func (p *pacer) leave(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.leaveLocked(key)
}

func (p *pacer) leaveLocked(key string) {
	u := p.underWay[key]
	if len(u.waiters) > 0 {
		w := u.waiters[0]
		u.waiters = slices.Delete(u.waiters, 0, 1)
		w.grant()
		return
	}
	u.n--
	if u.n == 0 {
		delete(p.underWay, key)
	}
}

// admit is wait, inFlight and sending in turn for a send that need not
// hold a goroutine while it waits: thousands of streams' updates and
// openings may wait at once for their conversations' and tenants' places,
// and each goroutine held its stack. It waits on timers and in the queues
// of places under way instead, and then calls then, in a goroutine of its
// own, with the function that gives the places back once the send is
// answered, or with the error that ended the wait (as the three would
// return it). The rules are theirs (reserve, takePlace, leaving); only the
// waiting differs.
func (p *pacer) admit(ctx context.Context, tenant, conversation string, then func(release func(), err error)) {
	a := &admission{p: p, ctx: ctx, tenant: tenant, conversation: conversation, then: then}
	a.patience, a.patient = ctx.Value(patienceKey{}).(time.Duration)
	p.mu.Lock()
	defer p.mu.Unlock()
	a.stopWatch = context.AfterFunc(ctx, func() { a.end(context.Cause(ctx)) })
	a.step()
}

// admission is a send admit holds while it waits. Its fields are p.mu's.
type admission struct {
	p                    *pacer
	ctx                  context.Context
	tenant, conversation string
	then                 func(release func(), err error)
	patience             time.Duration
	patient              bool // patience is set
	stage                int  // the next of: 0 the conversation's time, 1 the tenant's, 2 and 3 their places under way, 4 leaving
	held                 []string
	timer                *time.Timer // for a time
	timing               bool        // timer waits for a time counted as waiting
	impatience           *time.Timer // ends the wait for places under way past the patience
	waiter               *placeWaiter
	waiterKey            string
	stopWatch            func() bool
	ended                bool
}

// step goes on through the stages, with p.mu held, until one must wait.
func (a *admission) step() {
	p := a.p
	for !a.ended {
		switch a.stage {
		case 0, 1:
			key, ws, kind := "c\x00"+a.conversation, p.conversation, "conversation"
			if a.stage == 1 {
				if a.tenant == "" {
					a.stage = 2
					continue
				}
				key, ws, kind = "t\x00"+a.tenant, p.tenantLimits, "tenant"
			}
			a.stage++
			delay, err := p.reserve(a.ctx, key, ws, kind)
			if err != nil {
				a.fail(err)
				return
			}
			if delay > 0 {
				a.timing = true
				a.timer = time.AfterFunc(delay, a.resume)
				return
			}
		case 2, 3:
			key, max := "ic\x00"+a.conversation, conversationInFlight
			if a.stage == 3 {
				if a.tenant == "" {
					a.stage = 4
					continue
				}
				key, max = "it\x00"+a.tenant, tenantInFlight
			}
			if a.stage == 2 && a.patient {
				// As inFlight: the places under way are waited for no
				// longer than the patience.
				a.impatience = time.AfterFunc(a.patience, a.outOfPatience)
			}
			a.stage++
			w := &placeWaiter{}
			w.grant = func() {
				// leave, with p.mu held: the place is the send's now.
				a.held = append(a.held, key)
				a.waiter = nil
				go a.resume()
			}
			if !p.takePlace(key, max, w) {
				a.waiter, a.waiterKey = w, key
				return
			}
			a.held = append(a.held, key)
		case 4:
			if a.impatience != nil {
				a.impatience.Stop() // the places are taken
				a.impatience = nil
			}
			if wait := p.leaving(a.tenant, a.conversation); wait > 0 {
				a.timer = time.AfterFunc(wait, a.resume)
				return
			}
			held := a.held
			a.finish()
			go a.then(func() {
				p.mu.Lock()
				defer p.mu.Unlock()
				for _, key := range slices.Backward(held) {
					p.leaveLocked(key)
				}
			}, nil)
			return
		}
	}
}

// resume is a timer's or a handed place's: the admission goes on.
func (a *admission) resume() {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if a.ended {
		return
	}
	if a.timing {
		a.timing = false
		a.p.waited()
	}
	a.step()
}

// end gives the admission up on err, ctx's end.
func (a *admission) end(err error) {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if !a.ended {
		a.fail(err)
	}
}

// outOfPatience gives the admission up with errPaceBusy if it still waits
// for its places under way.
func (a *admission) outOfPatience() {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	if !a.ended && a.stage <= 4 && a.impatience != nil {
		a.fail(errPaceBusy)
	}
}

// fail gives the admission up on err, with p.mu held, handing on the
// places it held, and calls then with err.
func (a *admission) fail(err error) {
	if a.waiter != nil {
		a.p.dropWaiter(a.waiterKey, a.waiter)
		a.waiter = nil
	}
	for _, key := range slices.Backward(a.held) {
		a.p.leaveLocked(key)
	}
	a.held = nil
	a.finish()
	go a.then(nil, err)
}

// finish ends the admission, with p.mu held: its timers and its watch of
// ctx stop. The caller calls then.
func (a *admission) finish() {
	a.ended = true
	for _, t := range []*time.Timer{a.timer, a.impatience} {
		if t != nil {
			t.Stop()
		}
	}
	if a.timing {
		a.timing = false
		a.p.waited()
	}
	if a.stopWatch != nil {
		a.stopWatch()
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
