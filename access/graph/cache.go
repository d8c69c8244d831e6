package graph

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
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

// flight runs one call per key at a time; callers that ask for a key while
// its call runs wait for that call's result instead of starting their own.
type flight[V any] struct {
	mu    sync.Mutex
	calls map[string]*flightCall[V]
}

type flightCall[V any] struct {
	done        chan struct{}
	val         V
	err         error
	deadline    time.Time // the leader's
	hasDeadline bool
}

// do returns fn's result for key, running fn with ctx unless a call for key
// is already running, in which case it waits for that one (or for ctx).
// When the running call failed only because of its caller's context
// (cancelled, or a deadline too near to wait for Graph) and ctx allows
// more, do tries again rather than share that failure.
func (f *flight[V]) do(ctx context.Context, key string, fn func(ctx context.Context) (V, error)) (V, error) {
	for {
		f.mu.Lock()
		if f.calls == nil {
			f.calls = map[string]*flightCall[V]{}
		}
		if fc, ok := f.calls[key]; ok {
			f.mu.Unlock()
			select {
			case <-fc.done:
			case <-ctx.Done():
				var zero V
				return zero, callerErr(ctx, "")
			}
			if fc.err != nil && errors.Is(fc.err, errCallerBound) && outlives(ctx, fc) {
				continue
			}
			return fc.val, fc.err
		}
		// The error stands if fn panics, so that no waiter takes the zero
		// value for an answer.
		fc := &flightCall[V]{done: make(chan struct{}), err: errors.New("graph: lookup did not finish")}
		fc.deadline, fc.hasDeadline = ctx.Deadline()
		f.calls[key] = fc
		f.mu.Unlock()
		func() {
			defer func() {
				f.mu.Lock()
				delete(f.calls, key)
				f.mu.Unlock()
				close(fc.done)
			}()
			fc.val, fc.err = fn(ctx)
		}()
		return fc.val, fc.err
	}
}

// outlives reports whether ctx may get further than the leader of fc did:
// the leader was cancelled, or ctx's deadline is later.
func outlives[V any](ctx context.Context, fc *flightCall[V]) bool {
	dl, has := fc.deadline, fc.hasDeadline
	if errors.Is(fc.err, context.Canceled) {
		return ctx.Err() == nil
	}
	mine, ok := ctx.Deadline()
	switch {
	case ctx.Err() != nil:
		return false
	case !has:
		return false // the leader had no deadline, and still gave up
	case !ok:
		return true
	default:
		return mine.After(dl)
	}
}
