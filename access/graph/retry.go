package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"
)

// retryPolicy says how often and how long to wait between attempts at one
// Graph call.
type retryPolicy struct {
	attempts int           // at most, the first one included
	backoff  time.Duration // first wait when Graph gives no Retry-After; doubles
	budget   time.Duration // total waiting when ctx has no deadline
}

var defaultRetryPolicy = retryPolicy{attempts: 4, backoff: time.Second, budget: 30 * time.Second}

// errCallerBound marks a failure caused by one caller's context (cancelled,
// or its deadline too near to wait for Graph), so that a caller sharing the
// lookup with a longer deadline tries again rather than take it.
var errCallerBound = errors.New("stopped for the caller's context")

// callerErr is the error for giving up because of ctx.
func callerErr(ctx context.Context, detail string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, errCallerBound, err)
	}
	return fmt.Errorf("%w: %w: %s", ErrUnavailable, errCallerBound, detail)
}

// exchange is what recorder saw of the last HTTP response of one attempt.
// The SDK turns error answers into errors that lose the status when the
// body is not Graph's JSON (an HTML 503 from a gateway), so the status is
// taken from the wire instead.
type exchange struct {
	status     int
	retryAfter string
}

type exchangeKey struct{}

// recorder is the innermost transport of Graph requests: it notes each
// response's status in the attempt's exchange.
type recorder struct{ next http.RoundTripper }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if x, ok := req.Context().Value(exchangeKey{}).(*exchange); ok && resp != nil {
		x.status = resp.StatusCode
		x.retryAfter = resp.Header.Get("Retry-After")
	}
	return resp, err
}

// withRetries runs call, a Graph request through the SDK, and retries it
// when Graph throttles (429) or is briefly unavailable (503, 504) or the
// connection fails, waiting what Retry-After asks, or backing off, but
// never past ctx's deadline. It turns the final error into one that wraps
// ErrUnavailable or ErrNotFound where that applies, and logs it.
func (c *Client) withRetries(ctx context.Context, tenant, op string, call func(ctx context.Context) error) error {
	var waited time.Duration
	for n := 1; ; n++ {
		x := &exchange{}
		err := call(context.WithValue(ctx, exchangeKey{}, x))
		if err == nil {
			return nil
		}
		status := x.status
		var te *tokenError
		if errors.As(err, &te) {
			status = te.status
		}
		final, wait := c.classify(ctx, err, x, n)
		if final == nil {
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
				final = callerErr(ctx, fmt.Sprintf("%s after status %d: waiting %v would pass the deadline", op, status, wait))
			} else if !ok && waited+wait > c.retry.budget {
				final = fmt.Errorf("%w: %s after status %d: waiting %v more would pass %v of waiting", ErrUnavailable, op, status, wait, c.retry.budget)
			}
		}
		if final != nil {
			level := slog.LevelWarn
			if errors.Is(final, ErrNotFound) {
				level = slog.LevelInfo
			}
			c.log.Log(ctx, level, "graph: "+op+" failed", "tenant", tenant, "status", status, "err", final)
			return final
		}
		c.log.Info("graph: "+op+" retrying", "tenant", tenant, "status", status, "err", describe(err), "wait", wait)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
			waited += wait
		case <-ctx.Done():
			t.Stop()
			final := callerErr(ctx, "")
			c.log.Warn("graph: "+op+" failed", "tenant", tenant, "status", status, "err", final)
			return final
		}
	}
}

// classify returns the error to give up with, or nil and how long to wait
// before attempt n+1 (zero meaning at once).
func (c *Client) classify(ctx context.Context, err error, x *exchange, n int) (final error, wait time.Duration) {
	if ctx.Err() != nil {
		return callerErr(ctx, ""), 0
	}
	if errors.Is(err, ErrUnavailable) { // the token endpoint, already final
		return err, 0
	}
	told := false // whether Graph said how long to wait
	switch s := x.status; {
	case s == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, describe(err)), 0
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable || s == http.StatusGatewayTimeout:
		wait, told = parseRetryAfter(x.retryAfter, time.Now())
	case s >= 500, s == http.StatusUnauthorized, s == http.StatusForbidden:
		// Graph failing, or refusing our token or permissions: Graph
		// cannot answer for this app until someone fixes it.
		return fmt.Errorf("%w: status %d: %s", ErrUnavailable, s, describe(err)), 0
	case s == 0:
		// No answer: retry when the connection failed, not when the
		// request could not even be made.
		var ue *url.Error
		if !errors.As(err, &ue) {
			return fmt.Errorf("graph: %w", err), 0
		}
	default:
		return fmt.Errorf("graph: status %d: %s", s, describe(err)), 0
	}
	if n >= c.retry.attempts {
		return fmt.Errorf("%w: status %d after %d attempts: %s", ErrUnavailable, x.status, n, describe(err)), 0
	}
	if !told {
		wait = c.retry.backoff << (n - 1)
	}
	return nil, wait
}

// parseRetryAfter reads Retry-After as seconds, or as an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(secs)*time.Second, 0), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// describe renders an SDK error without calling ODataError.Error, which
// panics when Graph's body has no error message.
func describe(err error) string {
	var oe *odataerrors.ODataError
	if errors.As(err, &oe) {
		code, msg := "", ""
		if main := oe.GetErrorEscaped(); main != nil {
			if p := main.GetCode(); p != nil {
				code = *p
			}
			if p := main.GetMessage(); p != nil {
				msg = *p
			}
		}
		return strings.TrimSpace(code + " " + msg)
	}
	return err.Error()
}
