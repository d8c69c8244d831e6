package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"teamsbot/internal/retry"
	"time"

	"github.com/microsoftgraph/msgraph-sdk-go/models/odataerrors"
)

// graphRetry says how often and how long to wait between attempts at one
// Graph call: Graph throttling (429) and brief unavailability (503, 504),
// as "Microsoft Graph throttling guidance" asks, after Retry-After or a
// backoff from a second, 30 s of waiting at most when the caller's context
// has no deadline. Every call here reads (checkMemberGroups is a POST that
// changes nothing), so a connection that failed is retried too.
func graphRetry() retry.Policy {
	return retry.Policy{
		Attempts: 4, First: time.Second, Budget: 30 * time.Second,
		Statuses: []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout},
	}
}

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
// never past ctx's deadline (package internal/retry). It turns the final
// error into one that wraps ErrUnavailable or ErrNotFound where that
// applies, and logs it.
func (c *Client) withRetries(ctx context.Context, tenant, op string, call func(ctx context.Context) error) error {
	r := c.retry.Start()
	for {
		x := &exchange{}
		err := call(context.WithValue(ctx, exchangeKey{}, x))
		if err == nil {
			return nil
		}
		status := x.status
		var te *tokenError
		if errors.As(err, &te) {
			status = te.err.Status
		}
		final := c.classify(ctx, err, x)
		var wait time.Duration
		if final == nil {
			var werr error
			wait, werr = r.Next(ctx, x.retryAfter)
			switch {
			case errors.Is(werr, retry.ErrAttempts):
				final = fmt.Errorf("%w: status %d after %d attempts: %s", ErrUnavailable, x.status, r.Attempt(), describe(err))
			case errors.Is(werr, retry.ErrDeadline):
				final = callerErr(ctx, fmt.Sprintf("%s after status %d: waiting %v would pass the deadline", op, status, wait))
			case werr != nil:
				final = fmt.Errorf("%w: %s after status %d: %w", ErrUnavailable, op, status, werr)
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
		if r.Sleep(ctx, wait) != nil {
			final := callerErr(ctx, "")
			c.log.Warn("graph: "+op+" failed", "tenant", tenant, "status", status, "err", final)
			return final
		}
	}
}

// classify returns the error to give up with, or nil when the attempt may
// be made again.
func (c *Client) classify(ctx context.Context, err error, x *exchange) error {
	if ctx.Err() != nil {
		return callerErr(ctx, "")
	}
	if errors.Is(err, ErrUnavailable) { // the token endpoint, already final
		return err
	}
	switch s := x.status; {
	case s == http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, describe(err))
	case s != 0 && c.retry.Again(true, s, nil):
		return nil
	case s >= 500, s == http.StatusUnauthorized, s == http.StatusForbidden:
		// Graph failing, or refusing our token or permissions: Graph
		// cannot answer for this app until someone fixes it.
		return fmt.Errorf("%w: status %d: %s", ErrUnavailable, s, describe(err))
	case s == 0:
		// No answer: retry when the connection failed, not when the
		// request could not even be made.
		var ue *url.Error
		if !errors.As(err, &ue) || !c.retry.Again(true, 0, err) {
			return fmt.Errorf("graph: %w", err)
		}
		return nil
	default:
		return fmt.Errorf("graph: status %d: %s", s, describe(err))
	}
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
