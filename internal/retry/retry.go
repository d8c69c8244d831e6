// Package retry is the one way the service tries an HTTP call again: after
// the wait the server asked for in Retry-After (seconds or an HTTP date),
// or else after an exponential backoff with jitter, never past the caller's
// deadline, and never for a request that may already have been applied
// unless the caller says it is idempotent.
//
// It is ours rather than a library's because the rules are few and each
// caller already owns its request loop: the Bot Connector client takes a
// turn in its pacer before every attempt and renews a refused token, Graph
// sends through the SDK's request adapter, the token source through
// golang.org/x/oauth2. A [Retrier] fits between their attempts; [Policy.Again]
// says whether an attempt that failed may be made again.
//
// Microsoft's pages it follows: "Optimize your bot with rate limiting in
// Teams" (retry 429, and 412, 502 and 504, with exponential backoff and a
// random jitter), "Microsoft Graph throttling guidance" (wait what
// Retry-After says) and "Microsoft identity platform and the OAuth 2.0
// client credentials flow" (temporarily_unavailable: retry the request).
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy bounds the attempts at one call. The zero Policy makes one attempt
// and never waits.
type Policy struct {
	// Attempts is the most attempts in all, the first one included.
	Attempts int
	// First is the backoff before the second attempt when the server
	// gives no Retry-After; it doubles for each later one. The wait is
	// drawn at random between half of it and all of it, so that callers
	// that failed together do not come back together.
	First time.Duration
	// Max caps one wait, Retry-After included; zero means no cap but
	// the deadline.
	Max time.Duration
	// Budget bounds the total waiting of a call whose context has no
	// deadline; zero means no bound but Attempts.
	Budget time.Duration
	// Statuses are the answers the server asks to be sent again: it did
	// not apply the request (429 and 503 everywhere; 412, 502 and 504 for
	// the Bot Connector, as Microsoft asks). They are retried whatever the
	// method.
	Statuses []int
	// Sleep waits d or until ctx ends; nil sleeps for real. Tests record
	// the waits instead.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Errors of giving up. Each is wrapped with the wait and the reason, and
// says why no further attempt was made.
var (
	// ErrAttempts means Policy.Attempts were made.
	ErrAttempts = errors.New("retry: no attempts left")
	// ErrDeadline means the next wait would end after the caller's
	// deadline: failing now frees the caller instead of holding it until
	// a retry it could never see.
	ErrDeadline = errors.New("retry: the wait would end after the call's deadline")
	// ErrBudget means the next wait would pass Policy.Budget.
	ErrBudget = errors.New("retry: the wait would pass the call's budget of waiting")
)

// Retrier counts the attempts of one call and waits between them. It is
// not safe for concurrent use: each call makes its own with [Policy.Start].
type Retrier struct {
	p      Policy
	made   int // attempts made, as Wait counts them
	waited time.Duration
}

// Start returns a Retrier for one call; the first attempt is made at once.
func (p Policy) Start() *Retrier { return &Retrier{p: p, made: 1} }

// Attempt is the number of the attempt about to be made or just made: 1
// for the first.
func (r *Retrier) Attempt() int { return r.made }

// Next returns the wait before the next attempt without waiting: what
// retryAfter (a Retry-After header's value, or "") asks, or else the
// backoff, capped at Policy.Max. It returns an error wrapping
// ErrAttempts, ErrDeadline or ErrBudget when there should be no next
// attempt.
func (r *Retrier) Next(ctx context.Context, retryAfter string) (time.Duration, error) {
	if r.made >= r.p.Attempts {
		return 0, fmt.Errorf("%w: %d made", ErrAttempts, r.made)
	}
	wait, told := After(retryAfter, time.Now())
	source := "Retry-After"
	if !told {
		wait, source = r.backoff(), "backoff"
	}
	if r.p.Max > 0 && wait > r.p.Max {
		wait = r.p.Max
	}
	if dl, ok := ctx.Deadline(); ok {
		if time.Until(dl) < wait {
			return wait, fmt.Errorf("%w: its %s of %v", ErrDeadline, source, wait)
		}
	} else if r.p.Budget > 0 && r.waited+wait > r.p.Budget {
		return wait, fmt.Errorf("%w: its %s of %v after %v of waiting, with %v allowed", ErrBudget, source, wait, r.waited, r.p.Budget)
	}
	return wait, nil
}

// Wait waits before the next attempt as Next says, and counts it. It
// returns Next's error without waiting, or ctx's error when ctx ends while
// it waits.
func (r *Retrier) Wait(ctx context.Context, retryAfter string) (time.Duration, error) {
	wait, err := r.Next(ctx, retryAfter)
	if err != nil {
		return wait, err
	}
	return wait, r.Sleep(ctx, wait)
}

// Sleep waits d, a wait Next returned, and counts the attempt it comes
// before; it returns ctx's error when ctx ends first. Next and Sleep apart
// let a caller log the wait before it begins.
func (r *Retrier) Sleep(ctx context.Context, d time.Duration) error {
	sleep := r.p.Sleep
	if sleep == nil {
		sleep = Sleep
	}
	if err := sleep(ctx, d); err != nil {
		return err
	}
	r.waited += d
	r.made++
	return nil
}

// backoff is First doubled for each attempt made after the first, with
// the jitter: between half of it and all of it.
func (r *Retrier) backoff() time.Duration {
	d := r.p.First << (r.made - 1)
	if d <= 0 || r.p.Max > 0 && d > r.p.Max {
		d = r.p.Max // overflowed, or past the cap
	}
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// Again reports whether a request that ended with an answer of status
// (0 when none came) or the transport error err may be sent again.
//
// An answer is sent again when its status is one of Policy.Statuses. A
// request that got no answer may have reached the server and been applied
// before the connection failed: it is sent again only when idempotent (the
// caller knows: a GET, a PUT of the same content, a read-only POST such as
// Graph's checkMemberGroups, a token request) or when it never left this
// machine (see [NotSent]). A request ended by its own context is never
// sent again.
func (p Policy) Again(idempotent bool, status int, err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if status != 0 {
		return slices.Contains(p.Statuses, status)
	}
	if err == nil {
		return false
	}
	return idempotent || NotSent(err)
}

// NotSent reports whether err says that no byte of the request was sent:
// the connection could not be made (refused, no route, a name that does
// not resolve), so the server cannot have applied it.
func NotSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// After reads a Retry-After header's value, whole seconds or an HTTP date,
// as a wait from now; told is false when h is empty or unreadable. A date
// in the past is no wait.
func After(h string, now time.Time) (wait time.Duration, told bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(h); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Sleep waits d, or until ctx ends, and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
