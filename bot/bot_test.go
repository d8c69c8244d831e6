package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/labstack/echo/v4"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// The typing indicator is sent only for a run that takes longer than
// TypingAfter, and then before the answer: a quick answer needs no sign
// that the bot heard, and each indicator costs a call from Teams' rate
// limits.
func TestTypingIndicatorOnlyForSlowRuns(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{realClock: true, typingAfter: 150 * time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
	typingIn := func(conv string) []int {
		var at []int
		for i, c := range h.conn.snapshot() {
			if c.Activity.Type == "typing" && c.ConversationID == conv {
				at = append(at, i)
			}
		}
		return at
	}

	// Quick: the demo tool answers within milliseconds.
	if s, b := h.send(h.message("personal", "a:quick", "q-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the quick answer", hasReplyTo("q-1"))
	time.Sleep(300 * time.Millisecond) // past TypingAfter: nothing may follow the answer
	if at := typingIn("a:quick"); len(at) != 0 {
		t.Errorf("a quick answer came with %d typing indicators, want none", len(at))
	}

	// Slow: the indicator goes out while the run is held, before the answer.
	if s, b := h.send(h.message("personal", "a:slow", "s-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	h.conn.waitFor(t, "the typing indicator of the slow run", func([]received) bool { return len(typingIn("a:slow")) > 0 })
	close(release)
	calls := h.conn.waitFor(t, "the slow answer", hasReplyTo("s-1"))
	reply, _ := replyTo(calls, "s-1")
	replyAt := -1
	for i, c := range h.conn.snapshot() {
		if c.AssignedID == reply.AssignedID {
			replyAt = i
		}
	}
	if at := typingIn("a:slow"); len(at) != 1 || at[0] > replyAt {
		t.Errorf("the slow run's typing indicators at calls %v, the answer at %d: want one, before the answer", at, replyAt)
	}
}

// A typing indicator that would wait past its patience for a place under
// the tenant's rate limit is not sent: with seventy answers queued for the
// tenant, a slow run's indicator would come seconds late and take a place
// an answer needs. The run's answer still comes.
func TestTypingIndicatorSkippedWhenTheTenantIsBusy(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{realClock: true, typingAfter: 150 * time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
	for i := range 70 {
		if s, b := h.send(h.message("personal", fmt.Sprintf("a:busy-%d", i), fmt.Sprintf("b-%d", i), "/sales_report {}")); s != http.StatusAccepted {
			t.Fatalf("%d %s", s, b)
		}
	}
	h.conn.waitFor(t, "the first answers", hasReplyTo("b-0"))
	if s, b := h.send(h.message("personal", "a:slow-busy", "s-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	time.Sleep(typingPatience + 500*time.Millisecond) // past TypingAfter and the patience
	close(release)
	h.conn.waitFor(t, "the slow answer", hasReplyTo("s-1"))
	for _, c := range h.conn.snapshot() {
		if c.Activity.Type == "typing" && c.ConversationID == "a:slow-busy" {
			t.Errorf("a typing indicator went out %v into a busy tenant's queue", c.At)
		}
	}
	h.conn.waitFor(t, "the last busy answer", hasReplyTo("b-69"))
}

// A person writes "/sales_report {}" in each kind of Teams conversation; the
// built-in model calls the demo server's tool, which makes a view; the
// answer card reaches the Bot Connector as a reply to the message, with an
// Open button to the view when the public base URL is https and none when it
// is http.
func TestMessageInEachConversationType(t *testing.T) {
	for _, base := range []string{httpsBaseURL, "http://localhost:3978"} {
		t.Run(strings.Split(base, ":")[0], func(t *testing.T) {
			h := newHarness(t, setup{publicBase: base})
			for i, convType := range []string{"personal", "groupChat", "channel"} {
				t.Run(convType, func(t *testing.T) {
					convID := fmt.Sprintf("a:conv-%s-%d", convType, i)
					if convType == "channel" {
						convID = "19:channel@thread.tacv2;messageid=1700000000000"
					}
					actID := fmt.Sprintf("1700000000%03d", i)
					status, body := h.send(h.message(convType, convID, actID, "/sales_report {}"))
					if status != http.StatusAccepted {
						t.Fatalf("POST %s = %d %s, want 202", Path, status, body)
					}
					calls := h.conn.waitFor(t, "the answer", hasReplyTo(actID))
					reply, _ := replyTo(calls, actID)

					if reply.ConversationID != convID {
						t.Errorf("answer went to conversation %q, want %q", reply.ConversationID, convID)
					}
					if !strings.HasPrefix(reply.Auth, "Bearer bot-token-") {
						t.Errorf("answer sent with Authorization %q, want the bot token", reply.Auth)
					}
					typing := false
					for _, c := range calls {
						if c.Activity.Type == "typing" && c.ConversationID == convID {
							typing = true
						}
					}
					if !typing {
						t.Error("no typing indicator was sent")
					}
					// The typing indicator comes first: the answer waits for it.
					typingAt, replyAt := -1, -1
					for i, c := range calls {
						if c.Activity.Type == "typing" && c.ConversationID == convID && typingAt < 0 {
							typingAt = i
						}
						if c.AssignedID == reply.AssignedID {
							replyAt = i
						}
					}
					if typingAt > replyAt {
						t.Errorf("the typing indicator (call %d) arrived after the answer (call %d)", typingAt, replyAt)
					}
					if reply.Activity.Summary == "" {
						t.Errorf("the answer has no summary for notifications: %s", reply.Raw)
					}
					if len(reply.Activity.Attachments) == 0 || reply.Activity.Attachments[0].ContentType != "application/vnd.microsoft.card.adaptive" {
						t.Fatalf("answer has no Adaptive Card: %s", reply.Raw)
					}
					var urls []string
					for _, a := range reply.Activity.Attachments {
						urls = append(urls, openURLs(t, a.Content)...)
					}
					if base == httpsBaseURL {
						if len(urls) != 1 || !strings.HasPrefix(urls[0], httpsBaseURL+"/mcp-apps/") {
							t.Fatalf("Open buttons %q, want one to %s/mcp-apps/{id}", urls, httpsBaseURL)
						}
						// The button opens a view that exists and belongs to the writer.
						id := strings.TrimPrefix(urls[0], httpsBaseURL+"/mcp-apps/")
						v, err := h.store.View(context.Background(), id)
						if err != nil {
							t.Fatalf("view %s behind the Open button: %v", id, err)
						}
						if v.UserID != testUserOID || v.TenantID != testTenant || v.Tool != "sales_report" {
							t.Errorf("view is for %s/%s tool %s, want %s/%s sales_report", v.TenantID, v.UserID, v.Tool, testTenant, testUserOID)
						}
					} else if len(urls) != 0 {
						t.Errorf("Open buttons %q with an http public base URL, want none", urls)
					}
					// The agent reads the question without the bot's @mention:
					// "/tools" is only a command at the start of the text.
					toolsID := actID + "-tools"
					if status, body := h.send(h.message(convType, convID, toolsID, "/tools")); status != http.StatusAccepted {
						t.Fatalf("POST /tools = %d %s", status, body)
					}
					toolsReply, _ := replyTo(h.conn.waitFor(t, "the tools list", hasReplyTo(toolsID)), toolsID)
					if !strings.Contains(string(toolsReply.Raw), "Tools I can use") {
						t.Errorf("the agent did not get /tools as a command (mention not stripped?): %s", toolsReply.Raw)
					}

					// The card names the view and its tool, and carries the answer text.
					if !containsAll(string(reply.Raw), `"text":"Sales report"`, `"text":"sales_report"`, "total USD") {
						t.Errorf("answer card does not name the view or lacks the answer: %s", reply.Raw)
					}
				})
			}
		})
	}
}

// Forged, broken and misaddressed tokens are refused with 401 or 403 and a
// log line naming the reason; nothing panics, no agent runs, nothing is
// sent.
func TestForgedTokensRejected(t *testing.T) {
	h := newHarness(t, setup{})
	h.bf.addKey(t, "key-emulator-only", "emulator")
	stranger := newFakeBotFramework(t).addKey(t, "key-1", "msteams") // same kid, unpublished key

	good := func(mut func(jwt.MapClaims)) jwt.MapClaims {
		c := h.claims()
		if mut != nil {
			mut(c)
		}
		return c
	}
	pubDER := h.bf.key("key-1").PublicKey
	cases := []struct {
		name   string
		auth   func() string
		status int
		reason string
	}{
		{"no token", func() string { return "" }, 401, ReasonMissingToken},
		{"not a bearer token", func() string { return "Basic dXNlcjpwYXNz" }, 401, ReasonMissingToken},
		{"malformed JWT", func() string { return "Bearer not.a-jwt" }, 401, ReasonMalformed},
		{"garbage segments", func() string { return "Bearer ###.###.###" }, 401, ReasonMalformed},
		{"alg none", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodNone, "key-1", jwt.UnsafeAllowNoneSignatureType, good(nil))
		}, 401, ReasonAlgorithm},
		{"HS256 keyed with the public key", func() string {
			n := pubDER.N.Bytes()
			return "Bearer " + sign(t, jwt.SigningMethodHS256, "key-1", n, good(nil))
		}, 401, ReasonAlgorithm},
		{"RS512 instead of RS256", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodRS512, "key-1", h.bf.key("key-1"), good(nil))
		}, 401, ReasonAlgorithm},
		{"wrong issuer", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["iss"] = "https://sts.windows.net/" + testTenant + "/" }))
		}, 401, ReasonIssuer},
		{"wrong audience", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["aud"] = "some-other-bot" }))
		}, 401, ReasonAudience},
		{"aud array without app id", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["aud"] = []string{"a", "b"} }))
		}, 401, ReasonAudience},
		{"expired beyond skew", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["exp"] = h.now().Add(-6 * time.Minute).Unix() }))
		}, 401, ReasonExpired},
		{"nbf in the future beyond skew", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["nbf"] = h.now().Add(10 * time.Minute).Unix() }))
		}, 401, ReasonNotYetValid},
		{"missing exp", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { delete(c, "exp") }))
		}, 401, ReasonMissingExpiry},
		{"exp not a number", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }))
		}, 401, ReasonMalformed},
		{"unknown kid", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodRS256, "key-nobody-published", h.bf.key("key-1"), good(nil))
		}, 401, ReasonUnknownKey},
		{"no kid", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodRS256, "", h.bf.key("key-1"), good(nil))
		}, 401, ReasonUnknownKey},
		{"bad signature (another key, published kid)", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodRS256, "key-1", stranger, good(nil))
		}, 401, ReasonSignature},
		{"tampered payload", func() string {
			tok := h.token(good(nil))
			parts := strings.Split(tok, ".")
			forged := h.token(good(func(c jwt.MapClaims) { c["aud"] = []string{testAppID, "x"} }))
			return "Bearer " + parts[0] + "." + strings.Split(forged, ".")[1] + "." + parts[2]
		}, 401, ReasonSignature},
		{"serviceurl mismatch", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["serviceurl"] = "https://evil.example.com/" }))
		}, 401, ReasonServiceURL},
		{"missing serviceurl", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { delete(c, "serviceurl") }))
		}, 401, ReasonServiceURL},
		{"serviceurl not a string", func() string {
			return "Bearer " + h.token(good(func(c jwt.MapClaims) { c["serviceurl"] = 42 }))
		}, 401, ReasonMalformed},
		{"endorsement lacking channelId", func() string {
			return "Bearer " + sign(t, jwt.SigningMethodRS256, "key-emulator-only", h.bf.key("key-emulator-only"), good(nil))
		}, 403, ReasonEndorsement},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := counterValue(t, h.reg, "teamsbot_bot_auth_failures_total", map[string]string{"reason": tc.reason})
			status, body := h.post(h.message("personal", "a:forged", fmt.Sprintf("forged-%d", i), "/sales_report {}"), tc.auth())
			if status != tc.status {
				t.Fatalf("status %d (%s), want %d", status, body, tc.status)
			}
			// Whoever sent it (the Emulator, curl, a misconfigured
			// connector) reads what was wrong with the token in words;
			// the reason code and its detail are the log's.
			if msg := testenv.AnswerWords("application/json", []byte(body)); !strings.Contains(msg, "token") || strings.Contains(msg, "unauthorized") ||
				strings.Contains(msg, "_") || len(testenv.Leaks(msg)) > 0 {
				t.Errorf("the answer does not say what was wrong with the token in words: %s", body)
			}
			if after := counterValue(t, h.reg, "teamsbot_bot_auth_failures_total", map[string]string{"reason": tc.reason}); after != before+1 {
				t.Errorf("auth failures{reason=%s} went from %v to %v, want +1", tc.reason, before, after)
			}
			if !strings.Contains(h.logs.String(), "reason="+tc.reason) {
				t.Errorf("no log line with reason=%s", tc.reason)
			}
		})
	}
	h.shutdown()
	if calls := h.conn.snapshot(); len(calls) != 0 {
		t.Fatalf("forged requests made the bot send %d activities", len(calls))
	}
	if strings.Contains(h.logs.String(), "eyJ") {
		t.Error("a token appears in the logs")
	}
}

// A token signed with a key published after the bot cached the keys (a key
// rollover) is accepted after one refresh; further unknown key ids do not
// refresh again within the hour, and do once the hour has passed.
func TestKeyRolloverRefreshesAtMostHourly(t *testing.T) {
	h := newHarness(t, setup{})
	ping := func(kid string) int {
		t.Helper()
		a := h.message("personal", "a:rollover", "r-"+kid, "")
		a["type"] = "messageReaction" // acknowledged without a turn
		status, _ := h.post(a, "Bearer "+sign(t, jwt.SigningMethodRS256, kid, h.bf.key(kid), h.claims()))
		return status
	}
	if s := ping("key-1"); s != http.StatusOK {
		t.Fatalf("first activity: %d", s)
	}
	if n := h.bf.fetchCount(); n != 1 {
		t.Fatalf("%d JWKS fetches after the first activity, want 1", n)
	}
	if s := ping("key-1"); s != http.StatusOK || h.bf.fetchCount() != 1 {
		t.Fatalf("second activity: status %d, %d fetches; keys should be cached", s, h.bf.fetchCount())
	}

	h.bf.addKey(t, "key-2", "msteams")
	if s := ping("key-2"); s != http.StatusOK {
		t.Fatalf("token from the rolled-over key: %d, want 200", s)
	}
	if n := h.bf.fetchCount(); n != 2 {
		t.Fatalf("%d JWKS fetches after the rollover, want 2", n)
	}

	h.bf.addKey(t, "key-3", "msteams")
	if s := ping("key-3"); s != http.StatusUnauthorized {
		t.Fatalf("second unknown kid within the hour: %d, want 401", s)
	}
	if n := h.bf.fetchCount(); n != 2 {
		t.Fatalf("%d JWKS fetches, want still 2 within the hour", n)
	}

	h.clock.Advance(61 * time.Minute)
	if s := ping("key-3"); s != http.StatusOK {
		t.Fatalf("unknown kid after an hour: %d, want 200 after a refresh", s)
	}
	if n := h.bf.fetchCount(); n != 3 {
		t.Fatalf("%d JWKS fetches, want 3", n)
	}

	// Keys older than a day are refreshed even when the kid is known.
	h.clock.Advance(25 * time.Hour)
	if s := ping("key-1"); s != http.StatusOK || h.bf.fetchCount() != 4 {
		t.Fatalf("after a day: status %d, %d fetches, want 200 and 4", s, h.bf.fetchCount())
	}
}

// Many requests arriving before any key is cached share one fetch.
func TestConcurrentFirstRequestsShareOneKeyFetch(t *testing.T) {
	h := newHarness(t, setup{})
	release := make(chan struct{})
	h.bf.mu.Lock()
	h.bf.metaDelay = release
	h.bf.mu.Unlock()
	var wg sync.WaitGroup
	statuses := make([]int, 20)
	for i := range statuses {
		wg.Go(func() {
			a := h.message("personal", "a:burst", fmt.Sprintf("b-%d", i), "")
			a["type"] = "event"
			statuses[i], _ = h.send(a)
		})
	}
	// Hold the metadata endpoint until every request waits for the keys:
	// coalesced, they all wait for one fetch; if they were not, each would
	// have started its own by then, and the count below would show it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := h.bot.validator
		v.mu.Lock()
		n := v.waiting
		v.mu.Unlock()
		if n == len(statuses) {
			break
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of %d requests reached the key lookup", n, len(statuses))
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, s := range statuses {
		if s != http.StatusOK {
			t.Errorf("request %d: %d", i, s)
		}
	}
	if n := h.bf.fetchCount(); n != 1 {
		t.Errorf("%d JWKS fetches for 20 concurrent first requests, want 1", n)
	}
}

// Teams retries an activity it gave up on; the retry is acknowledged but
// the agent runs once and one answer is sent.
func TestRetryIsDeduplicated(t *testing.T) {
	h := newHarness(t, setup{})
	msg := h.message("personal", "a:retry", "1700000000999", "/sales_report {}")
	if s, b := h.send(msg); s != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("1700000000999"))
	for range 3 {
		if s, b := h.send(msg); s != http.StatusOK && s != http.StatusAccepted {
			t.Fatalf("retry: %d %s", s, b)
		}
	}
	// The same activity id in another conversation is another message.
	other := h.message("personal", "a:retry-2", "1700000000999", "/sales_report {}")
	if s, _ := h.send(other); s != http.StatusAccepted {
		t.Fatalf("same id, other conversation: %d", s)
	}
	h.shutdown()
	answers, runs := 0, 0
	for _, c := range h.conn.snapshot() {
		if c.Activity.Type == "message" && c.ConversationID == "a:retry" {
			answers++
		}
		if c.Activity.Type == "message" {
			runs++
		}
	}
	if answers != 1 {
		t.Errorf("%d answers in the retried conversation, want 1", answers)
	}
	if runs != 2 {
		t.Errorf("%d answers in all, want 2 (one per conversation)", runs)
	}
	audit, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: "agent.mcp_app.view"})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != 2 {
		t.Errorf("%d views made, want 2: the agent ran more than once per message", len(audit))
	}
	if d := counterValue(t, h.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "duplicate"}); d != 3 {
		t.Errorf("turns{outcome=duplicate} = %v, want 3", d)
	}
}

// Teams retries an activity after the service restarted: the store
// remembers it, and the retry runs nothing.
func TestRetryAfterRestartIsDeduplicated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	h := newHarness(t, setup{storePath: path})
	msg := h.message("personal", "a:restart", "1700000001234", "/sales_report {}")
	if s, b := h.send(msg); s != http.StatusAccepted {
		t.Fatalf("first delivery: %d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("1700000001234"))
	h.shutdown()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}

	again := newHarness(t, setup{storePath: path})
	retry := again.message("personal", "a:restart", "1700000001234", "/sales_report {}")
	if s, b := again.send(retry); s != http.StatusOK && s != http.StatusAccepted {
		t.Fatalf("retry after the restart: %d %s", s, b)
	}
	other := again.message("personal", "a:restart", "1700000001235", "/tools")
	again.send(other)
	again.conn.waitFor(t, "the answer to a new message", hasReplyTo("1700000001235"))
	again.shutdown()
	for _, c := range again.conn.snapshot() {
		if c.ActivityID == "1700000001234" {
			t.Errorf("the retry after a restart was answered again: %s", c.Raw)
		}
	}
	if d := counterValue(t, again.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "duplicate"}); d != 1 {
		t.Errorf("turns{outcome=duplicate} = %v, want 1", d)
	}
}

// The Bot Connector throttles the answer with 429 and Retry-After; the bot
// waits as told and the answer goes through.
func TestConnectorThrottledThenSucceeds(t *testing.T) {
	h := newHarness(t, setup{})
	var mu sync.Mutex
	var waits []time.Duration
	h.bot.conn.retry.Sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	}
	h.conn.mu.Lock()
	h.conn.throttle = 1
	h.conn.mu.Unlock()
	if s, b := h.send(h.message("personal", "a:throttled", "t-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer after a 429", hasReplyTo("t-1"))
	h.shutdown()
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 1 || waits[0] != time.Second {
		t.Errorf("waits before retrying %v, want [1s] from Retry-After", waits)
	}
	if r := counterValue(t, h.reg, "teamsbot_bot_connector_retries_total", nil); r != 1 {
		t.Errorf("connector retries = %v, want 1", r)
	}
	if n := h.tokens.callCount(); n != 1 {
		t.Errorf("%d token fetches, want 1 (cached across calls)", n)
	}
}

// A bot whose token endpoint cannot be reached logs why, sends nothing,
// runs no agent and keeps serving.
func TestTokenEndpointUnreachable(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/" + testTenant + "/oauth2/v2.0/token"
	dead.Close()
	h := newHarness(t, setup{tokenURL: deadURL})
	for i := range 2 {
		if s, b := h.send(h.message("personal", "a:no-token", fmt.Sprintf("nt-%d", i), "/sales_report {}")); s != http.StatusAccepted {
			t.Fatalf("%d %s", s, b)
		}
	}
	h.shutdown()
	logs := h.logs.String()
	if !containsAll(logs, "token endpoint", "unreachable", "turn failed") {
		t.Errorf("logs do not say the token endpoint is unreachable:\n%s", logs)
	}
	if calls := h.conn.snapshot(); len(calls) != 0 {
		t.Errorf("%d activities reached the connector without a token", len(calls))
	}
	if f := counterValue(t, h.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "failed"}); f != 2 {
		t.Errorf("turns{outcome=failed} = %v, want 2", f)
	}
	audit, _ := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant})
	if len(audit) != 0 {
		t.Errorf("the agent ran (%d audit records) though no answer could be sent", len(audit))
	}
}

// Installing the app stores the conversation reference and welcomes once;
// uninstalling (or removing the bot) removes the reference.
func TestInstallAndUninstall(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	key := ConversationKey(testTenant, "a:install")

	install := h.message("personal", "a:install", "", "")
	delete(install, "text")
	install["type"] = "installationUpdate"
	install["action"] = "add"
	if s, b := h.send(install); s != http.StatusOK {
		t.Fatalf("installationUpdate add: %d %s", s, b)
	}
	ref, err := h.store.Conversation(ctx, key)
	if err != nil {
		t.Fatalf("reference after install: %v", err)
	}
	if ref.ServiceURL != h.conn.srv.URL || ref.ChannelID != "msteams" || ref.BotID != testBotMRI || ref.TenantID != testTenant {
		t.Errorf("stored reference %+v", ref)
	}
	var cr struct {
		ServiceURL   string `json:"serviceUrl"`
		Conversation struct {
			ID string `json:"id"`
		} `json:"conversation"`
		Bot struct {
			ID string `json:"id"`
		} `json:"bot"`
	}
	if err := json.Unmarshal(ref.Reference, &cr); err != nil || cr.Conversation.ID != "a:install" || cr.Bot.ID != testBotMRI {
		t.Errorf("ConversationReference JSON %s (%v)", ref.Reference, err)
	}

	// The stored reference is enough to write to the conversation later.
	id, err := h.bot.SendProactive(ctx, key, cards.Welcome(cards.Options{}))
	if err != nil || id == "" {
		t.Fatalf("proactive send: %q, %v", id, err)
	}
	proactive := h.conn.waitFor(t, "the proactive message", func(c []received) bool {
		for _, x := range c {
			if x.AssignedID == id {
				return true
			}
		}
		return false
	})
	for _, x := range proactive {
		if x.AssignedID == id && (x.ConversationID != "a:install" || x.ActivityID != "" || !strings.HasPrefix(x.Auth, "Bearer ")) {
			t.Errorf("proactive message went to %q (reply to %q, auth %q)", x.ConversationID, x.ActivityID, x.Auth)
		}
	}
	// And the id it returned is enough to update that card later.
	if err := h.bot.UpdateProactive(ctx, key, id, cards.RunFailed("ref-1")); err != nil {
		t.Fatalf("proactive update: %v", err)
	}
	h.conn.waitFor(t, "the proactive update", func(c []received) bool {
		for _, x := range c {
			if x.Method == http.MethodPut && x.ActivityID == id && x.ConversationID == "a:install" && strings.Contains(string(x.Raw), "ref-1") {
				return true
			}
		}
		return false
	})

	// Teams also sends conversationUpdate with the bot among membersAdded.
	added := h.message("personal", "a:install", "", "")
	delete(added, "text")
	added["type"] = "conversationUpdate"
	added["membersAdded"] = []any{map[string]any{"id": testBotMRI}}
	if s, b := h.send(added); s != http.StatusOK {
		t.Fatalf("conversationUpdate: %d %s", s, b)
	}
	h.conn.waitFor(t, "the welcome card", func(c []received) bool { return len(c) >= 1 })

	// A person joining a group chat is no reason to store anything.
	joined := h.message("groupChat", "a:group", "", "")
	joined["type"] = "conversationUpdate"
	joined["membersAdded"] = []any{map[string]any{"id": "29:someone"}}
	if s, _ := h.send(joined); s != http.StatusOK {
		t.Fatalf("member joined: %d", s)
	}
	if _, err := h.store.Conversation(ctx, ConversationKey(testTenant, "a:group")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a person joining stored a reference: %v", err)
	}

	uninstall := h.message("personal", "a:install", "", "")
	uninstall["type"] = "installationUpdate"
	uninstall["action"] = "remove"
	if s, b := h.send(uninstall); s != http.StatusOK {
		t.Fatalf("installationUpdate remove: %d %s", s, b)
	}
	if _, err := h.store.Conversation(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reference after uninstall: %v, want ErrNotFound", err)
	}
	if _, err := h.bot.SendProactive(ctx, key, cards.Welcome(cards.Options{})); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("proactive send after uninstall: %v, want store.ErrNotFound", err)
	}

	// The bot added to a channel, then removed from it.
	chAdd := h.message("channel", "19:general@thread.tacv2", "", "")
	chAdd["type"] = "conversationUpdate"
	chAdd["membersAdded"] = []any{map[string]any{"id": testBotMRI}}
	h.send(chAdd)
	chKey := ConversationKey(testTenant, "19:general@thread.tacv2")
	if _, err := h.store.Conversation(ctx, chKey); err != nil {
		t.Fatalf("channel reference: %v", err)
	}
	chRm := h.message("channel", "19:general@thread.tacv2", "", "")
	chRm["type"] = "conversationUpdate"
	chRm["membersRemoved"] = []any{map[string]any{"id": testBotMRI}}
	h.send(chRm)
	if _, err := h.store.Conversation(ctx, chKey); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("channel reference after removal: %v", err)
	}

	h.shutdown()
	welcomes := map[string]int{}
	for _, c := range h.conn.snapshot() {
		if c.Method == http.MethodPost && c.Activity.Type == "message" && len(c.Activity.Attachments) > 0 {
			if !strings.Contains(string(c.Raw), "Hi, I'm Assistant.") || !strings.Contains(string(c.Raw), "/tools") {
				t.Errorf("a card sent to %s is not the welcome card: %s", c.ConversationID, c.Raw)
			}
			welcomes[c.ConversationID]++
		}
	}
	if welcomes["a:install"] != 2 || welcomes["19:general@thread.tacv2"] != 1 || len(welcomes) != 2 {
		t.Errorf("cards per conversation %v, want the install's welcome and the proactive card, and the channel's welcome", welcomes)
	}
}

// In a group chat (or a channel), a run slower than WorkingAfter first
// shows a "working on it" card. The
// answer then arrives as a new message, which Teams notifies people of (an
// edit would arrive silently), and the working card is deleted.
func TestSlowRunAnswersAsANewMessageAndDeletesTheWorkingCard(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, setup{workingAfter: time.Millisecond}.withTool("slow", "wait_for_release", held(nil, release, "done waiting")))
	if s, b := h.send(h.message("groupChat", "a:slow", "s-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the working card", hasReplyTo("s-1"))
	working, _ := replyTo(calls, "s-1")
	if !strings.Contains(string(working.Raw), "Working on") || !strings.Contains(string(working.Raw), "wait_for_release") {
		t.Errorf("the working card does not say it works on the question: %s", working.Raw)
	}
	close(release)
	calls = h.conn.waitFor(t, "the working card deleted", func(c []received) bool {
		for _, x := range c {
			if x.Method == http.MethodDelete {
				return true
			}
		}
		return false
	})
	h.shutdown()
	var answers, updates, deletes []received
	for _, c := range h.conn.snapshot() {
		switch {
		case c.Method == http.MethodPost && c.Activity.Type == "message" && c.AssignedID != working.AssignedID:
			answers = append(answers, c)
		case c.Method == http.MethodPut:
			updates = append(updates, c)
		case c.Method == http.MethodDelete:
			deletes = append(deletes, c)
		}
	}
	if len(answers) != 1 || !strings.Contains(string(answers[0].Raw), "done waiting") || answers[0].ActivityID != "s-1" {
		t.Fatalf("answers posted: %d, want one new reply with the answer: %+v", len(answers), answers)
	}
	if len(updates) != 0 {
		t.Errorf("the working card was edited %d times; the answer must be a new message", len(updates))
	}
	if len(deletes) != 1 || deletes[0].ActivityID != working.AssignedID || !deletes[0].At.After(answers[0].At) {
		t.Errorf("deletes %+v, want the working card %q deleted after the answer arrived", deletes, working.AssignedID)
	}
}

// When the answer cannot be sent, the working card does not go on saying
// the bot works on it: it becomes the failure card, with the run's
// reference.
func TestFailedAnswerTurnsTheWorkingCardIntoTheFailureCard(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, setup{workingAfter: time.Millisecond}.withTool("slow", "wait_for_release", held(nil, release, "done waiting")))
	h.send(h.message("groupChat", "a:slowfail", "sf-1", "/wait_for_release {}"))
	working, _ := replyTo(h.conn.waitFor(t, "the working card", hasReplyTo("sf-1")), "sf-1")
	h.conn.mu.Lock()
	h.conn.refuse = 1
	h.conn.mu.Unlock()
	close(release)
	calls := h.conn.waitFor(t, "the working card updated", func(c []received) bool {
		for _, x := range c {
			if x.Method == http.MethodPut {
				return true
			}
		}
		return false
	})
	h.shutdown()
	var update received
	for _, c := range calls {
		if c.Method == http.MethodPut {
			update = c
		}
	}
	if update.ActivityID != working.AssignedID || !strings.Contains(string(update.Raw), "Sorry, something went wrong") || !strings.Contains(string(update.Raw), "this reference: ") {
		t.Errorf("the working card became %s, want the failure card with the run's reference", update.Raw)
	}
}

// A message without a tenant or a user object id gets a polite refusal
// card and no run.
func TestMessageWithoutPersonIsRefused(t *testing.T) {
	h := newHarness(t, setup{})
	noUser := h.message("personal", "a:anon", "anon-1", "/sales_report {}")
	noUser["from"] = map[string]any{"id": "29:guest", "name": "Guest"}
	noTenant := h.message("personal", "a:anon", "anon-2", "/sales_report {}")
	noTenant["channelData"] = map[string]any{}
	for _, m := range []map[string]any{noUser, noTenant} {
		if s, b := h.send(m); s != http.StatusAccepted {
			t.Fatalf("%d %s", s, b)
		}
	}
	h.shutdown()
	calls := h.conn.snapshot()
	for _, id := range []string{"anon-1", "anon-2"} {
		c, ok := replyTo(calls, id)
		if !ok {
			t.Fatalf("no refusal card for %s", id)
		}
		if len(c.Activity.Attachments) != 1 || len(openURLs(t, c.Activity.Attachments[0].Content)) != 0 ||
			!strings.Contains(string(c.Raw), "Sorry, I can't answer this message") || !strings.Contains(string(c.Raw), "work or school account") {
			t.Errorf("refusal for %s is not the polite refusal card: %s", id, c.Raw)
		}
	}
	audit, _ := h.store.Audit(context.Background(), store.AuditQuery{})
	refused := 0
	for _, rec := range audit {
		if rec.Action != AuditRefused || rec.Fields["reason"] != RefusedIdentity {
			t.Errorf("the agent ran for a message without a person: %+v", rec)
			continue
		}
		refused++
	}
	if refused != 2 {
		t.Errorf("%d bot.refused records, want one per message", refused)
	}
}

// Malformed requests get 400 (or 413) with a clear message, never a panic.
func TestMalformedActivities(t *testing.T) {
	h := newHarness(t, setup{})
	huge := `{"type":"message","text":"` + strings.Repeat("x", DefaultMaxBodyBytes) + `"}`
	noService := h.message("personal", "a:x", "m-1", "hi")
	delete(noService, "serviceUrl")
	noConv := h.message("personal", "a:x", "m-2", "hi")
	delete(noConv, "conversation")
	noType := h.message("personal", "a:x", "m-3", "hi")
	delete(noType, "type")
	wrongType := h.message("personal", "a:x", "m-4", "hi")
	wrongType["from"] = "not an object"
	cases := []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"not JSON", "{this is not json", 400, "The body is not valid JSON (at byte 2)."},
		{"empty body", "", 400, "The body is empty: send a JSON object."},
		{"JSON array", "[1,2,3]", 400, "The body must be a JSON object, not a list."},
		{"from is a string", wrongType, 400, "`from` must be an object, not a string."},
		{"no serviceUrl", noService, 400, "The activity lacks serviceUrl, which every activity"},
		{"no conversation", noConv, 400, "The activity lacks conversation.id, which"},
		{"no type", noType, 400, "The activity lacks type, which"},
		{"too large", huge, 413, "The activity is larger than 256 KiB, the most the bot takes."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, b := h.send(tc.body)
			if s != tc.status || !strings.Contains(b, tc.want) {
				t.Fatalf("%d %s, want %d with %q", s, b, tc.status, tc.want)
			}
			if l := testenv.Leaks(testenv.AnswerWords("application/json", []byte(b))); len(l) > 0 {
				t.Errorf("the answer holds %q: %s", l, b)
			}
		})
	}
	h.shutdown()
	if n := len(h.conn.snapshot()); n != 0 {
		t.Errorf("malformed activities made the bot send %d activities", n)
	}
}

// Invokes are answered in the HTTP response; other activity types are
// acknowledged with 200 and ignored.
func TestInvokeAndOtherTypes(t *testing.T) {
	h := newHarness(t, setup{})
	inv := h.message("personal", "a:inv", "inv-1", "")
	inv["type"] = "invoke"
	inv["name"] = "adaptiveCard/action"
	inv["value"] = map[string]any{"action": map[string]any{"type": "Action.Execute", "verb": "refresh"}, "trigger": "manual"}
	s, b := h.send(inv)
	if s != http.StatusOK {
		t.Fatalf("invoke: %d %s", s, b)
	}
	var body struct {
		StatusCode int    `json:"statusCode"`
		Type       string `json:"type"`
		Value      string `json:"value"`
	}
	if err := json.Unmarshal([]byte(b), &body); err != nil || body.StatusCode != 200 || body.Type != "application/vnd.microsoft.activity.message" || body.Value == "" {
		t.Errorf("invoke response body %s (%v)", b, err)
	}
	for _, typ := range []string{"typing", "messageReaction", "event", "endOfConversation", "somethingNew"} {
		a := h.message("personal", "a:other", "o-"+typ, "")
		a["type"] = typ
		a["value"] = "a string value is fine here"
		if s, b := h.send(a); s != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", typ, s, b)
		}
	}
	h.shutdown()
	if n := len(h.conn.snapshot()); n != 0 {
		t.Errorf("%d activities sent for activities that need no answer", n)
	}
}

// Without an app id the bot takes unauthenticated activities from loopback
// and answers without a token; a request from another address is refused
// by its TCP peer address, whatever its headers say.
func TestLocalModeLoopbackOnly(t *testing.T) {
	h := newHarness(t, setup{local: true})
	if !h.bot.LocalMode() || !strings.Contains(h.logs.String(), "local mode") {
		t.Fatal("local mode not reported at start")
	}
	if s, b := h.post(h.message("personal", "a:local", "l-1", "/sales_report {}"), ""); s != http.StatusAccepted {
		t.Fatalf("loopback activity: %d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the answer", hasReplyTo("l-1"))
	c, _ := replyTo(calls, "l-1")
	if c.Auth != "" {
		t.Errorf("local mode sent Authorization %q", c.Auth)
	}

	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	h.bot.Register(e)
	data, _ := json.Marshal(h.message("personal", "a:local", "l-2", "/sales_report {}"))
	req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(string(data)))
	req.RemoteAddr = "203.0.113.7:51234"
	req.Header.Set("X-Forwarded-For", "127.0.0.1")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("non-loopback peer in local mode: %d %s, want 403", rec.Code, rec.Body)
	}

	// A web page in the person's browser reaches loopback too: a plain
	// cross-site POST, or a page on a name rebound to 127.0.0.1. Each is
	// refused, and the agent does not run.
	for name, mod := range map[string]func(*http.Request){
		"cross-site form post": func(r *http.Request) {
			r.Header.Set("Origin", "https://evil.example")
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Content-Type", "text/plain")
		},
		"fetch without Origin": func(r *http.Request) { r.Header.Set("Sec-Fetch-Mode", "no-cors") },
		"rebound host name":    func(r *http.Request) { r.Host = "evil.example:3978" },
	} {
		data, _ := json.Marshal(h.message("personal", "a:local", "l-"+name, "/sales_report {}"))
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(string(data)))
		req.RemoteAddr = "127.0.0.1:51234"
		req.Host = "127.0.0.1:3978"
		req.Header.Set("Content-Type", "application/json")
		mod(req)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusForbidden {
			t.Errorf("%s in local mode: %d %s, want 403", name, rec.Code, rec.Body)
		}
	}
	// The same request from a local tool addressing localhost is taken.
	data, _ = json.Marshal(h.message("personal", "a:local", "l-3", "/sales_report {}"))
	req = httptest.NewRequest(http.MethodPost, Path, strings.NewReader(string(data)))
	req.RemoteAddr = "[::1]:51234"
	req.Host = "localhost:3978"
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Errorf("local tool on localhost: %d %s, want 202", rec.Code, rec.Body)
	}
}

// serviceUrl checks: the bot token only goes to https, or to loopback http
// when allowed.
func TestServiceURLRules(t *testing.T) {
	c := &connector{}
	for _, u := range []string{"http://127.0.0.1:8080/", "ftp://x/", "https://user:pw@smba.trafficmanager.net/", "https://smba.trafficmanager.net/?x=1", "not a url", "/relative"} {
		if _, err := c.checkServiceURL(u); !errors.Is(err, ErrServiceURL) {
			t.Errorf("%q accepted", u)
		}
	}
	if _, err := c.checkServiceURL("https://smba.trafficmanager.net/amer/"); err != nil {
		t.Error(err)
	}
	c.allowLoopback = true
	for _, u := range []string{"http://127.0.0.1:8080/", "http://localhost:1/", "http://[::1]:2/"} {
		if _, err := c.checkServiceURL(u); err != nil {
			t.Errorf("%q refused with loopback allowed: %v", u, err)
		}
	}
	if _, err := c.checkServiceURL("http://10.0.0.1/"); err == nil {
		t.Error("non-loopback http accepted")
	}
}

// Each TICKETIQ_BOT_CLOUD name gives Microsoft's endpoints of that cloud,
// as the Teams SDK's cloud environments and Bot Service's "Configure Bot
// Framework bots for US Government customers" list them.
func TestCloudsGiveTheirDocumentedEndpoints(t *testing.T) {
	for name, want := range map[string][5]string{ // issuer, metadata, scope, multi-tenant token URL, Graph
		"": {"https://api.botframework.com", "https://login.botframework.com/v1/.well-known/openidconfiguration", "https://api.botframework.com/.default",
			"https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token", "https://graph.microsoft.com/v1.0"},
		"Public": {"https://api.botframework.com", "https://login.botframework.com/v1/.well-known/openidconfiguration", "https://api.botframework.com/.default",
			"https://login.microsoftonline.com/botframework.com/oauth2/v2.0/token", "https://graph.microsoft.com/v1.0"},
		"usgov": {"https://api.botframework.us", "https://login.botframework.azure.us/v1/.well-known/openidconfiguration", "https://api.botframework.us/.default",
			"https://login.microsoftonline.us/MicrosoftServices.onmicrosoft.us/oauth2/v2.0/token", "https://graph.microsoft.us/v1.0"},
		"USGovDoD": {"https://api.botframework.us", "https://login.botframework.azure.us/v1/.well-known/openidconfiguration", "https://api.botframework.us/.default",
			"https://login.microsoftonline.us/MicrosoftServices.onmicrosoft.us/oauth2/v2.0/token", "https://dod-graph.microsoft.us/v1.0"},
		"china": {"https://api.botframework.azure.cn", "https://login.botframework.azure.cn/v1/.well-known/openidconfiguration", "https://api.botframework.azure.cn/.default",
			"https://login.partner.microsoftonline.cn/microsoftservices.partner.onmschina.cn/oauth2/v2.0/token", "https://microsoftgraph.chinacloudapi.cn/v1.0"},
	} {
		c, err := CloudNamed(name)
		if err != nil {
			t.Fatalf("CloudNamed(%q): %v", name, err)
		}
		if got := [5]string{c.Issuer, c.OpenIDMetadataURL, c.Scope, c.TokenURL(""), c.GraphBaseURL}; got != want {
			t.Errorf("cloud %q:\n got %q\nwant %q", name, got, want)
		}
		if got, want := c.TokenURL(testTenant), strings.TrimSuffix(want[3], c.LoginTenant+"/oauth2/v2.0/token")+testTenant+"/oauth2/v2.0/token"; got != want {
			t.Errorf("cloud %q single-tenant token URL %q, want %q", name, got, want)
		}
	}
	if _, err := CloudNamed("gcc"); err == nil || !strings.Contains(err.Error(), "public, usgov, usgovdod, china") {
		t.Errorf("an unknown cloud: %v", err)
	}
}

// A bot in GCC High takes only tokens of that cloud's Bot Connector and
// asks that cloud's scope for its own token: a public-cloud token is
// refused, an answer goes out with the GCC High token.
func TestGovernmentCloudBotOnTheWire(t *testing.T) {
	h := newHarness(t, setup{cloud: CloudUSGov})
	claims := h.claims()
	claims["iss"] = "https://api.botframework.com"
	if status, _ := h.post(h.message("personal", "a:gov", "gov-0", "/tools"), "Bearer "+h.token(claims)); status != http.StatusUnauthorized {
		t.Errorf("a public-cloud token in GCC High: %d, want 401", status)
	}
	if status, body := h.send(h.message("personal", "a:gov", "gov-1", "/tools")); status != http.StatusAccepted {
		t.Fatalf("a GCC High token: %d %s", status, body)
	}
	reply, _ := replyTo(h.conn.waitFor(t, "the answer", hasReplyTo("gov-1")), "gov-1")
	if !strings.HasPrefix(reply.Auth, "Bearer bot-token-") {
		t.Errorf("the answer went out with %q: the token endpoint refused the GCC High scope?", reply.Auth)
	}
}

// Teams may send the bot's mention entity with no text: the message still
// reaches the agent without "<at>Name</at>", whatever the tag's case.
func TestMentionWithoutTextIsStrippedOnTheWire(t *testing.T) {
	h := newHarness(t, setup{})
	for i, tag := range []string{"<at>Assistant</at>", "<at>ASSISTANT</at>"} {
		id := fmt.Sprintf("act-mention-%d", i)
		a := h.message("groupChat", "19:group-mention@thread.v2", id, "/tools")
		a["text"] = tag + " /tools"
		a["entities"] = []any{map[string]any{"type": "mention", "mentioned": map[string]any{"id": testBotMRI, "name": "Assistant"}}}
		if status, body := h.send(a); status != http.StatusAccepted {
			t.Fatalf("POST = %d %s", status, body)
		}
		reply, _ := replyTo(h.conn.waitFor(t, "the tools list", hasReplyTo(id)), id)
		if !strings.Contains(string(reply.Raw), "Tools I can use") {
			t.Errorf("%s /tools did not reach the agent as the /tools command: %s", tag, reply.Raw)
		}
	}
}

func TestStripMentions(t *testing.T) {
	ents := []entity{
		{Type: "mention", Text: "<at>TicketIQ</at>"},
		{Type: "mention", Text: "<at>Grace</at>"},
	}
	ents[0].Mentioned.ID = testBotMRI
	ents[1].Mentioned.ID = "29:grace"
	for in, want := range map[string]string{
		"<at>TicketIQ</at>  ask <at>Grace</at>\n about sales ":             "ask <at>Grace</at>\n about sales",
		"ask <at>TicketIQ</at> about sales":                                "ask about sales",
		"<at>TicketIQ</at> first line\nsecond line":                        "first line\nsecond line",
		"<at>TicketIQ</at> /lookup_customer {\"name\": \"Ada  Lovelace\"}": "/lookup_customer {\"name\": \"Ada  Lovelace\"}",
		"no mention\n\n  indented":                                         "no mention\n\n  indented",
		"<at>TicketIQ</at>":                                                "",
	} {
		if got := stripMentions(in, ents, testBotMRI, "TicketIQ"); got != want {
			t.Errorf("stripMentions(%q) = %q, want %q", in, got, want)
		}
	}

	// An entity without text: the <at> tag of the mentioned name goes,
	// in any case, and another person's mention stays.
	noText := []entity{{Type: "mention"}, {Type: "mention", Text: "<at>Grace</at>"}}
	noText[0].Mentioned.ID, noText[0].Mentioned.Name = testBotMRI, "Assistant"
	noText[1].Mentioned.ID = "29:grace"
	for in, want := range map[string]string{
		"<at>Assistant</at> /tools":                             "/tools",
		"<at>assistant</at> /tools":                             "/tools",
		"<AT> ASSISTANT </AT> ask <at>Grace</at> too":           "ask <at>Grace</at> too",
		"ask <at>Assistant</at> about <at>Assistant</at> sales": "ask about sales",
		"<at>Assistant Two</at> /tools":                         "<at>Assistant Two</at> /tools",
	} {
		if got := stripMentions(in, noText, testBotMRI, "TicketIQ"); got != want {
			t.Errorf("stripMentions(%q) without entity text = %q, want %q", in, got, want)
		}
	}
	// Neither text nor name in the entity: the bot's own name is used.
	unnamed := []entity{{Type: "mention"}}
	unnamed[0].Mentioned.ID = testBotMRI
	if got := stripMentions("<at>TicketIQ</at> /tools", unnamed, testBotMRI, "TicketIQ"); got != "/tools" {
		t.Errorf("stripMentions with an unnamed entity = %q, want /tools", got)
	}
}

// While the OpenID metadata cannot be fetched, activities are refused with
// 503 and a clear log line, the endpoint is not asked again on every
// request, and service resumes once it answers.
func TestOpenIDMetadataUnavailable(t *testing.T) {
	h := newHarness(t, setup{})
	h.bf.mu.Lock()
	h.bf.failMeta = true
	h.bf.mu.Unlock()
	ev := func(id string) int {
		a := h.message("personal", "a:meta", id, "")
		a["type"] = "event"
		s, _ := h.send(a)
		return s
	}
	for i := range 3 {
		if s := ev(fmt.Sprint("m-", i)); s != http.StatusServiceUnavailable {
			t.Fatalf("request %d with the metadata down: %d, want 503", i, s)
		}
	}
	h.bf.mu.Lock()
	gets := h.bf.metaGets
	h.bf.failMeta = false
	h.bf.mu.Unlock()
	if gets != 1 {
		t.Errorf("%d metadata fetches for 3 requests in a row, want 1", gets)
	}
	if !containsAll(h.logs.String(), "fetching Bot Framework signing keys failed", "status 503") {
		t.Errorf("no clear log line:\n%s", h.logs.String())
	}
	h.clock.Advance(11 * time.Second)
	if s := ev("m-ok"); s != http.StatusOK {
		t.Fatalf("after the metadata came back: %d, want 200", s)
	}
}

// A bot token is fetched once and shared by concurrent turns.
func TestBotTokenSharedByConcurrentTurns(t *testing.T) {
	h := newHarness(t, setup{})
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			h.send(h.message("personal", "a:tok", fmt.Sprint("tok-", i), "/sales_report {}"))
		})
	}
	wg.Wait()
	h.shutdown()
	if n := h.tokens.callCount(); n != 1 {
		t.Errorf("%d token fetches for 10 concurrent turns, want 1", n)
	}
	answers := 0
	for _, c := range h.conn.snapshot() {
		if c.Activity.Type == "message" {
			answers++
		}
	}
	if answers != 10 {
		t.Errorf("%d answers, want 10", answers)
	}
}

// The retry filter forgets after its TTL and never holds more than its
// bound.
func TestSeenSetTTLAndBound(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	s := newSeenSet(time.Minute, 3)
	if !s.firstTime("a", now) || s.firstTime("a", now.Add(59*time.Second)) {
		t.Fatal("a retry within the TTL was not caught")
	}
	if !s.firstTime("a", now.Add(61*time.Second)) {
		t.Fatal("a key was remembered past its TTL")
	}
	for i := range 10 {
		s.firstTime(fmt.Sprint("k", i), now.Add(62*time.Second))
	}
	if len(s.at) > 3 || len(s.order) > 3 {
		t.Fatalf("holds %d keys (%d in order), bound is 3", len(s.at), len(s.order))
	}
	if s.firstTime("k9", now.Add(63*time.Second)) {
		t.Error("the newest key was forgotten")
	}
	if !s.firstTime("k0", now.Add(63*time.Second)) {
		t.Error("the oldest key was kept past the bound")
	}
}

// Shutdown waits for turns in flight; when its deadline passes first it
// cancels them and says so, and later messages get 503 so Teams retries
// them elsewhere.
func TestShutdownWaitsThenCancels(t *testing.T) {
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{}.withTool("stuck", "never_returns", held(started, nil, "")))
	if s, b := h.send(h.message("personal", "a:stuck", "st-1", "/never_returns {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := h.bot.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown with a turn stuck: %v, want the deadline", err)
	}
	if s, _ := h.send(h.message("personal", "a:stuck", "st-2", "/sales_report {}")); s != http.StatusServiceUnavailable {
		t.Errorf("message after shutdown: %d, want 503", s)
	}
	// Cancelled, the run either fails or ends with nothing deliverable,
	// depending on where the cancellation finds it; either way the turn
	// ends as failed, and says so, before Shutdown returns.
	if f := counterValue(t, h.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "failed"}); f != 1 {
		t.Errorf("turns{outcome=failed} = %v, want 1", f)
	}
	if logs := h.logs.String(); !strings.Contains(logs, "agent run failed") && !strings.Contains(logs, "answer not delivered") {
		t.Error("the cancelled turn was not logged as failed")
	}
}

// Past MaxPendingTurns a message is answered 503 with Retry-After, so Teams
// retries it; that retry is not taken for a duplicate once there is room.
func TestBusyAsksTeamsToRetry(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{maxPending: 1}.withTool("blocking", "hold", held(started, release, "released")))
	if s, b := h.send(h.message("personal", "a:busy", "busy-1", "/hold {}")); s != http.StatusAccepted {
		t.Fatalf("first message: %d %s", s, b)
	}
	<-started
	second := h.message("personal", "a:busy", "busy-2", "/sales_report {}")
	data, _ := json.Marshal(second)
	req, _ := http.NewRequest(http.MethodPost, h.url+Path, strings.NewReader(string(data)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token(h.claims()))
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second message with one turn pending: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if n := counterValue(t, h.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "busy"}); n != 1 {
		t.Errorf("turns{outcome=busy} = %v, want 1", n)
	}
	close(release)
	h.conn.waitFor(t, "the first answer", hasReplyTo("busy-1"))
	// Teams retries the refused message: now there is room, and it runs.
	for {
		s, _ := h.send(second)
		if s == http.StatusAccepted {
			break
		}
		if s != http.StatusServiceUnavailable {
			t.Fatalf("retry of the refused message: %d", s)
		}
		runtime.Gosched() // the first turn is still finishing
	}
	h.conn.waitFor(t, "the answer to the retried message", hasReplyTo("busy-2"))
}

// An answer far larger than one Teams message still reaches the person:
// the fake connector refuses a message over 28 KB in UTF-16 as Teams does,
// so the card must be shortened to fit. The tool's text is made of
// characters that JSON escapes to six each. Nothing of the question, the
// tool's result or the bot token is logged.
func TestLongAnswerFitsOneTeamsMessage(t *testing.T) {
	const piece = "<b>&amp;</b> "
	h := newHarness(t, setup{}.withTool("wide", "angle_report", func(context.Context) (string, error) {
		return strings.Repeat(piece, 5000), nil
	}))
	if s, b := h.send(h.message("groupChat", "a:long", "long-1", "/angle_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the long answer", hasReplyTo("long-1"))
	h.shutdown()
	reply, _ := replyTo(calls, "long-1")
	if !strings.Contains(string(reply.Raw), cards.Shortened) {
		t.Errorf("the answer was not marked as shortened")
	}
	if logs := h.logs.String(); strings.Contains(logs, "angle_report {}") || strings.Contains(logs, "&amp;") || strings.Contains(logs, "bot-token-") {
		t.Errorf("the logs carry the question, the tool's result or the bot token:\n%s", logs)
	}
}

// failingModel is an OpenAI-compatible model as the Chat Completions API
// reference ("Create chat completion", POST {base}/chat/completions)
// defines it: its first answer calls the demo server's sales_report tool,
// every later one fails with a 500 error object whose message must never
// reach the person.
func failingModel(t *testing.T) *agent.ModelConfig {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "not found"}})
			return
		}
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if !first {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{"message": "upstream overloaded, key sk-internal-detail", "type": "server_error"}})
			return
		}
		name := ""
		for _, tl := range req.Tools {
			if strings.HasSuffix(tl.Function.Name, "sales_report") {
				name = tl.Function.Name
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"choices": []any{map[string]any{
			"finish_reason": "tool_calls",
			"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": name, "arguments": "{}"},
			}}},
		}}})
	}))
	t.Cleanup(srv.Close)
	return &agent.ModelConfig{Kind: agent.ModelOpenAI, BaseURL: srv.URL + "/v1", Model: "test-model"}
}

// When the model fails after a tool made a view, the view is stored for the
// person, so the card still names it with its Open button; it says the
// model could not answer and shows nothing of the model's error.
func TestModelFailureStillShowsTheViewsMade(t *testing.T) {
	h := newHarness(t, setup{model: failingModel(t)})
	if s, b := h.send(h.message("personal", "a:model-down", "md-1", "show me the sales report")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the answer", hasReplyTo("md-1"))
	h.shutdown()
	reply, _ := replyTo(calls, "md-1")
	urls := openURLs(t, reply.Activity.Attachments[0].Content)
	if len(urls) != 1 || !strings.HasPrefix(urls[0], httpsBaseURL+"/mcp-apps/") {
		t.Fatalf("Open buttons %q, want the view the tool made: %s", urls, reply.Raw)
	}
	if _, err := h.store.View(context.Background(), strings.TrimPrefix(urls[0], httpsBaseURL+"/mcp-apps/")); err != nil {
		t.Errorf("the view behind the button: %v", err)
	}
	if !strings.Contains(string(reply.Raw), "could not answer") {
		t.Errorf("the card does not say the model could not answer: %s", reply.Raw)
	}
	if strings.Contains(string(reply.Raw), "sk-internal-detail") || strings.Contains(string(reply.Raw), "overloaded") {
		t.Errorf("the card shows the model's error: %s", reply.Raw)
	}
	if !strings.Contains(h.logs.String(), "agent run failed") {
		t.Error("the model failure was not logged")
	}
}
