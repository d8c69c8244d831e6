package bot

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The bot token is cached until five minutes before it expires, then
// renewed: the fake endpoint issues tokens for 3599 seconds.
func TestBotTokenCachedUntilShortlyBeforeExpiry(t *testing.T) {
	h := newHarness(t, setup{})
	ts := h.bot.conn.tokens
	ctx := context.Background()
	first, err := ts.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(54 * time.Minute)
	if tok, err := ts.Token(ctx); err != nil || tok != first || h.tokens.callCount() != 1 {
		t.Fatalf("after 54 minutes: %q, %v, %d fetches; want the cached %q and 1 fetch", tok, err, h.tokens.callCount(), first)
	}
	h.clock.Advance(time.Minute) // 55 minutes: less than 5 left
	tok, err := ts.Token(ctx)
	if err != nil || tok == first || h.tokens.callCount() != 2 {
		t.Fatalf("after 55 minutes: %q, %v, %d fetches; want a new token from a second fetch", tok, err, h.tokens.callCount())
	}
}

// Callers that ask for the bot token while a fetch is under way wait for
// that fetch instead of starting their own.
func TestBotTokenFetchedOnceForConcurrentCallers(t *testing.T) {
	h := newHarness(t, setup{})
	gate := make(chan struct{})
	h.tokens.mu.Lock()
	h.tokens.gate = gate
	h.tokens.mu.Unlock()
	const callers = 20
	var started, done sync.WaitGroup
	toks := make([]string, callers)
	for i := range callers {
		started.Add(1)
		done.Go(func() {
			started.Done()
			toks[i], _ = h.bot.conn.tokens.Token(context.Background())
		})
	}
	started.Wait()
	for h.tokens.callCount() == 0 {
		runtime.Gosched()
	}
	// Give the other callers every chance to reach the endpoint themselves
	// while the first fetch is held.
	for range 100 {
		runtime.Gosched()
	}
	close(gate)
	done.Wait()
	if n := h.tokens.callCount(); n != 1 {
		t.Errorf("%d token fetches for %d concurrent callers, want 1", n, callers)
	}
	for i, tok := range toks {
		if tok != toks[0] || tok == "" {
			t.Errorf("caller %d got %q, caller 0 %q", i, tok, toks[0])
		}
	}
}

// When the connector refuses the cached token (401: a secret rotated, a
// token revoked), the bot gets a new one once and the answer goes through.
func TestRevokedBotTokenRenewedOnce(t *testing.T) {
	h := newHarness(t, setup{})
	if s, b := h.send(h.message("personal", "a:revoked", "rv-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the first answer", hasReplyTo("rv-1"))
	h.tokens.revoke()
	if s, b := h.send(h.message("personal", "a:revoked", "rv-2", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the answer after the token was revoked", hasReplyTo("rv-2"))
	h.shutdown()
	reply, _ := replyTo(calls, "rv-2")
	if reply.Auth != "Bearer bot-token-2" {
		t.Errorf("answer sent with %q, want the renewed bot-token-2", reply.Auth)
	}
	if n := h.tokens.callCount(); n != 2 {
		t.Errorf("%d token fetches, want 2", n)
	}
	if strings.Contains(h.logs.String(), "bot-token-") {
		t.Error("a bot token appears in the logs")
	}
}
