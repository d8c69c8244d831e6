package bot

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"teamsbot/internal/dialgate"
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

// scriptedConnector answers the Bot Connector's send-to-conversation route
// with the statuses and Retry-After headers it is given, in order, then 201
// with a ResourceResponse ("Bot Framework REST API reference:
// Conversations"); the last entry repeats when the script runs out.
type scriptedConnector struct {
	srv    *httptest.Server
	mu     sync.Mutex
	script []scripted
	calls  int
}

type scripted struct {
	status     int
	retryAfter string
}

func newScriptedConnector(t *testing.T, script ...scripted) *scriptedConnector {
	s := &scriptedConnector{script: script}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		step := scripted{status: http.StatusCreated}
		if len(s.script) > 0 {
			step = s.script[min(s.calls, len(s.script)-1)]
		}
		s.calls++
		s.mu.Unlock()
		if step.retryAfter != "" {
			w.Header().Set("Retry-After", step.retryAfter)
		}
		if step.status == http.StatusCreated {
			writeJSON(w, step.status, map[string]any{"id": "1:sent"})
			return
		}
		writeJSON(w, step.status, map[string]any{"error": map[string]any{"code": "ServiceError", "message": "try later"}})
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedConnector) callCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// testConnector is the bot's connector client in local mode (no token),
// with its waits recorded instead of slept.
func testConnector(t *testing.T) (*connector, *[]time.Duration) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	var waits []time.Duration
	c := &connector{
		client: newHTTPClient(), allowLoopback: true, metrics: m,
		logger: slog.New(slog.DiscardHandler), retry: connectorRetry(),
	}
	c.retry.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return c, &waits
}

func sendOne(c *connector, ctx context.Context, serviceURL string) (string, error) {
	return c.Send(ctx, serviceURL, "a:conv", "", &outActivity{Type: "message", Text: "hi"})
}

// The answers Microsoft asks bots to retry (429, 412, 502, 504, and 503)
// are retried after the Retry-After the connector gives, in seconds or as a
// date, or else after an exponential backoff with jitter.
func TestConnectorRetriesServerErrors(t *testing.T) {
	s := newScriptedConnector(t,
		scripted{status: 503},
		scripted{status: 412, retryAfter: "2"},
		scripted{status: 502, retryAfter: time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)},
		scripted{status: 429},
		scripted{status: http.StatusCreated},
	)
	c, waits := testConnector(t)
	id, err := sendOne(c, context.Background(), s.srv.URL)
	if err != nil || id != "1:sent" {
		t.Fatalf("Send = %q, %v; want 1:sent", id, err)
	}
	if n := s.callCount(); n != 5 {
		t.Errorf("%d calls, want 5", n)
	}
	w := *waits
	if len(w) != 4 {
		t.Fatalf("waits %v, want 4", w)
	}
	if w[0] < firstBackoff/2 || w[0] > firstBackoff {
		t.Errorf("first backoff %v, want within [%v, %v]", w[0], firstBackoff/2, firstBackoff)
	}
	if w[1] != 2*time.Second {
		t.Errorf("wait after Retry-After: 2 is %v", w[1])
	}
	if w[2] != maxRetryWait {
		t.Errorf("wait after a Retry-After an hour ahead is %v, want the cap %v", w[2], maxRetryWait)
	}
	if d := firstBackoff << 3; w[3] < d/2 || w[3] > d {
		t.Errorf("fourth backoff %v, want within [%v, %v]", w[3], d/2, d)
	}
}

// A connector that keeps failing is given up on after maxRetries retries;
// a 4xx other than 429 is not retried at all.
func TestConnectorRetriesAreBounded(t *testing.T) {
	s := newScriptedConnector(t, scripted{status: 503})
	c, waits := testConnector(t)
	if _, err := sendOne(c, context.Background(), s.srv.URL); !errors.Is(err, ErrConnector) || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("Send = %v, want ErrConnector with status 503", err)
	}
	if n := s.callCount(); n != maxRetries+1 {
		t.Errorf("%d calls, want %d", n, maxRetries+1)
	}
	if len(*waits) != maxRetries {
		t.Errorf("waits %v, want %d", *waits, maxRetries)
	}

	// A 400, a 403 (the bot was removed or blocked: final) and a 500 (the
	// activity may have been taken: a second post could show it twice)
	// are not retried; 504 is, like 412 and 502.
	for _, status := range []int{http.StatusBadRequest, http.StatusForbidden, http.StatusInternalServerError} {
		bad := newScriptedConnector(t, scripted{status: status})
		c, waits = testConnector(t)
		if _, err := sendOne(c, context.Background(), bad.srv.URL); !errors.Is(err, ErrConnector) {
			t.Fatalf("%d: Send = %v, want ErrConnector", status, err)
		}
		if n := bad.callCount(); n != 1 || len(*waits) != 0 {
			t.Errorf("%d: %d calls, waits %v; want 1 call, no wait", status, n, *waits)
		}
	}
	gw := newScriptedConnector(t, scripted{status: http.StatusGatewayTimeout}, scripted{status: http.StatusCreated})
	c, _ = testConnector(t)
	if _, err := sendOne(c, context.Background(), gw.srv.URL); err != nil || gw.callCount() != 2 {
		t.Errorf("504 then 201: %v after %d calls; want success after a retry", err, gw.callCount())
	}
}

// A wait the connector asks for that would outlast the caller's deadline is
// not slept: the call fails at once and says why.
func TestConnectorBackoffBoundedByContext(t *testing.T) {
	s := newScriptedConnector(t, scripted{status: 429, retryAfter: "5"}, scripted{status: http.StatusCreated})
	c, waits := testConnector(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := sendOne(c, ctx, s.srv.URL)
	if !errors.Is(err, ErrConnector) || !strings.Contains(err.Error(), "Retry-After") {
		t.Fatalf("Send = %v, want ErrConnector saying the wait outlasts the deadline", err)
	}
	if len(*waits) != 0 || s.callCount() != 1 {
		t.Errorf("waits %v, %d calls; want no wait and 1 call", *waits, s.callCount())
	}
}

// Shutdown leaves nothing of the bot behind: a bot token fetch in flight is
// abandoned (the endpoint sees its caller go) and the bot's idle keep-alive
// connections to the Bot Connector are closed.
func TestShutdownEndsFetchesAndConnections(t *testing.T) {
	h := newHarness(t, setup{})
	if s, b := h.send(h.message("personal", "a:bye", "bye-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("bye-1"))

	// The next token fetch hangs at the endpoint.
	gone := make(chan struct{})
	h.tokens.mu.Lock()
	h.tokens.gate, h.tokens.gone = make(chan struct{}), gone
	h.tokens.mu.Unlock()
	h.clock.Advance(time.Hour) // the cached token is past renewal
	if s, b := h.send(h.message("personal", "a:bye", "bye-2", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	for h.tokens.callCount() < 2 {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // do not wait for the stuck turn
	if err := h.bot.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Shutdown = %v, want context.Canceled", err)
	}
	select {
	case <-gone:
	case <-time.After(10 * time.Second): // the fetch's own timeout is 20s
		t.Fatal("the token fetch in flight outlived Shutdown")
	}
	// The server sees a closed connection a moment after the client closes
	// it; idle connections would otherwise stay open for 90 seconds.
	for limit := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		h.conn.mu.Lock()
		open := h.conn.open
		h.conn.mu.Unlock()
		if open == 0 {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("%d connections to the Bot Connector still open after Shutdown", open)
		}
	}
}

// The bot token goes only to the serviceUrl: a connector that answers with
// a redirect (here to another port of the same host, where Go's client
// would forward the Authorization header) is not followed.
func TestBotTokenNotSentThroughRedirects(t *testing.T) {
	h := newHarness(t, setup{})
	var mu sync.Mutex
	var leaked []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Header.Get("Authorization"))
		mu.Unlock()
		writeJSON(w, http.StatusCreated, map[string]any{"id": "1:elsewhere"})
	}))
	defer elsewhere.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()

	_, err := h.bot.conn.Send(context.Background(), redirector.URL, "a:conv", "", &outActivity{Type: "message", Text: "hi"})
	if !errors.Is(err, ErrConnector) {
		t.Errorf("Send through a redirect = %v, want ErrConnector", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Errorf("the redirect was followed, with Authorization %q", leaked)
	}
}

// The client the bot makes for itself, used for the keys, the token
// endpoint and the Bot Connector, has a timeout at every step, so a peer
// that stops answering cannot hold a turn or a key fetch forever.
func TestDefaultClientHasTimeouts(t *testing.T) {
	h := newHarness(t, setup{defaultClient: true})
	for name, c := range map[string]*http.Client{
		"connector": h.bot.conn.client, "token": h.bot.conn.tokens.src.HTTPClient(), "keys": h.bot.validator.client,
	} {
		var tr *http.Transport
		switch rt := c.Transport.(type) {
		case *http.Transport:
			tr = rt
		case *dialgate.Transport:
			tr = rt.Base()
		}
		if tr == nil || c.Timeout <= 0 || tr.ResponseHeaderTimeout <= 0 || tr.TLSHandshakeTimeout <= 0 || tr.DialContext == nil {
			t.Errorf("%s client: timeout %v, transport %#v", name, c.Timeout, c.Transport)
		}
	}
}

// A connection dropped after the request reached the connector may have
// delivered it: a POST (a new message) is not sent again, as a second
// would show the person a duplicate, while a PUT (an update to the same
// content) is. A connection refused before anything was written is safe
// to retry for both.
func TestConnectorRetriesOnlyWhatCannotDuplicate(t *testing.T) {
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.Method]++
		n := calls[r.Method]
		mu.Unlock()
		if n == 1 {
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close() // the request was read; no answer comes
			}
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": "1:sent"})
	}))
	defer srv.Close()
	c, waits := testConnector(t)
	if _, err := sendOne(c, context.Background(), srv.URL); !errors.Is(err, ErrConnector) {
		t.Errorf("POST on a dropped connection: %v, want ErrConnector", err)
	}
	if err := c.Update(context.Background(), srv.URL, "a:conv", "1:sent", &outActivity{Type: "message", Text: "hi"}); err != nil {
		t.Errorf("PUT on a dropped connection, then answered: %v", err)
	}
	mu.Lock()
	if calls[http.MethodPost] != 1 || calls[http.MethodPut] != 2 || len(*waits) != 1 {
		t.Errorf("calls %v, waits %v; want 1 POST, 2 PUTs and one wait", calls, *waits)
	}
	mu.Unlock()

	// Nothing listens at first; the retry finds the connector.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, _ = testConnector(t)
	c.retry.Sleep = func(ctx context.Context, d time.Duration) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		late := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusCreated, map[string]any{"id": "1:late"})
		}))
		late.Listener = l
		late.Start()
		t.Cleanup(late.Close)
		return nil
	}
	if id, err := sendOne(c, context.Background(), "http://"+addr); err != nil || id != "1:late" {
		t.Errorf("POST after a refused connection: %q, %v; want it sent on the retry", id, err)
	}
}
