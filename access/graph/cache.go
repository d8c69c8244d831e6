package graph

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// answerCache keeps successful membership answers for a TTL, at most max of
// them; when full, the oldest goes first. Because every entry lives for the
// same TTL, the oldest is also the first to expire.
type answerCache struct {
	ttl time.Duration
	max int
	now func() time.Time

	mu    sync.Mutex
	byKey map[string]*list.Element // of *answer
	order *list.List               // oldest first
}

type answer struct {
	key     string
	members []string // read-only once stored
	expires time.Time
}

func newAnswerCache(ttl time.Duration, max int, now func() time.Time) *answerCache {
	return &answerCache{ttl: ttl, max: max, now: now, byKey: map[string]*list.Element{}, order: list.New()}
}

func (c *answerCache) get(key string) ([]string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	a := e.Value.(*answer)
	if !c.now().Before(a.expires) {
		c.order.Remove(e)
		delete(c.byKey, key)
		return nil, false
	}
	return a.members, true
}

func (c *answerCache) put(key string, members []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.Remove(e)
	}
	c.byKey[key] = c.order.PushBack(&answer{key: key, members: members, expires: c.now().Add(c.ttl)})
	for c.order.Len() > c.max {
		oldest := c.order.Front()
		c.order.Remove(oldest)
		delete(c.byKey, oldest.Value.(*answer).key)
	}
}

// len returns how many answers are kept, expired or not.
func (c *answerCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// lookup is what a shared membership lookup returns: the members, and the
// deadline of the caller whose context it ran with.
type lookup struct {
	members     []string
	deadline    time.Time
	hasDeadline bool
}

// shared returns fn's result for key, running fn with ctx unless a call
// for key is already running (golang.org/x/sync/singleflight), in which
// case it waits for that one (or for ctx). When the running call failed
// only because of its caller's context (cancelled, or a deadline too near
// to wait for Graph) and ctx allows more, it runs again rather than share
// that failure. What outlives a call, the answers' TTL, is answerCache's.
func (c *Client) shared(ctx context.Context, key string, fn func(ctx context.Context) ([]string, error)) ([]string, error) {
	for {
		ch := c.lookups.DoChan(key, func() (any, error) {
			l := lookup{}
			l.deadline, l.hasDeadline = ctx.Deadline()
			var err error
			l.members, err = fn(ctx)
			return l, err
		})
		var r singleflight.Result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, callerErr(ctx, "")
		}
		l := r.Val.(lookup)
		if r.Err != nil && errors.Is(r.Err, errCallerBound) && outlives(ctx, l, r.Err) {
			continue
		}
		return l.members, r.Err
	}
}

// outlives reports whether ctx may get further than the caller whose
// context the lookup l ran with, and which failed with err, did: that
// caller was cancelled, or ctx's deadline is later.
func outlives(ctx context.Context, l lookup, err error) bool {
	if errors.Is(err, context.Canceled) {
		return ctx.Err() == nil
	}
	mine, ok := ctx.Deadline()
	switch {
	case ctx.Err() != nil:
		return false
	case !l.hasDeadline:
		return false // that caller had no deadline, and still gave up
	case !ok:
		return true
	default:
		return mine.After(l.deadline)
	}
}
