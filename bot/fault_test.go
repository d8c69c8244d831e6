package bot

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// The Bot Connector answers 429, 503 and 412 for a while (as many times
// as the bot retries, in every conversation at once): each answer is
// delivered exactly once, none lost and none twice.
func TestConnectorFaultsEachAnswerDeliveredOnce(t *testing.T) {
	h := newHarness(t, setup{})
	h.bot.conn.retry.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	const n = 6
	h.conn.mu.Lock()
	h.conn.faults = map[string][]int{}
	for i := range n {
		h.conn.faults[fmt.Sprintf("19:faults-%d@thread.tacv2", i)] = []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusPreconditionFailed, http.StatusServiceUnavailable}
	}
	h.conn.mu.Unlock()
	for i := range n {
		act := h.message("channel", fmt.Sprintf("19:faults-%d@thread.tacv2", i), fmt.Sprintf("f-%d", i), "/sales_report {}")
		if s, b := h.send(act); s != http.StatusAccepted && s != http.StatusOK {
			t.Fatalf("message %d: %d %s", i, s, b)
		}
	}
	calls := h.conn.waitFor(t, "every answer", func(calls []received) bool {
		for i := range n {
			if !hasReplyTo(fmt.Sprintf("f-%d", i))(calls) {
				return false
			}
		}
		return true
	})
	h.shutdown()
	h.conn.mu.Lock()
	calls = append(calls[:0:0], h.conn.calls...)
	left := h.conn.faults
	h.conn.mu.Unlock()
	for i := range n {
		id := fmt.Sprintf("f-%d", i)
		got := 0
		for _, c := range calls {
			if c.Method == http.MethodPost && c.ActivityID == id && c.Activity.Type == "message" {
				got++
			}
		}
		if got != 1 {
			t.Errorf("answer to %s delivered %d times, want once", id, got)
		}
	}
	for conv, q := range left {
		if len(q) > 0 {
			t.Errorf("conversation %s: faults never met %v", conv, q)
		}
	}
}
