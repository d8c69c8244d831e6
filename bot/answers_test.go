package bot

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/netaddr"
	"teamsbot/store"
)

// idle waits until every turn and send the bot has started is done. Every
// turn is registered before its POST is answered, so none can start
// behind this wait's back.
func (h *harness) idle() {
	h.bot.turns.Wait()
}

// onlyRun returns the id of the one agent run the audit log knows (every
// test turn here calls one tool, which is audited with its run).
func (h *harness) onlyRun(t *testing.T) string {
	t.Helper()
	recs, err := h.store.Audit(context.Background(), store.AuditQuery{Action: agent.AuditToolCall})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]bool{}
	for _, r := range recs {
		if id, _ := r.Fields["run"].(string); id != "" {
			runs[id] = true
		}
	}
	if len(runs) != 1 {
		t.Fatalf("the audit log names %d runs, want 1: %v", len(runs), runs)
	}
	for id := range runs {
		return id
	}
	return ""
}

// answerIDs lists the ids the connector gave the bot's messages that reply
// to activityID (the answer's cards, typing indicators left out), in the
// order they arrived.
func answerIDs(calls []received, activityID string) []string {
	var ids []string
	for _, c := range calls {
		if c.Method == http.MethodPost && c.ActivityID == activityID && c.Activity.Type == "message" {
			ids = append(ids, c.AssignedID)
		}
	}
	return ids
}

// After a turn the store says where its answer went: the conversation, the
// reference that reaches it (a channel's is its team's) and exactly the
// ids the Bot Connector gave the answer's cards.
func TestAnswerDeliveryIsKept(t *testing.T) {
	for _, tc := range []struct {
		convType, convID, refConvID string
	}{
		{"personal", "a:kept-personal", "a:kept-personal"},
		{"groupChat", "19:kept-group@thread.v2", "19:kept-group@thread.v2"},
		{"channel", "19:channel@thread.tacv2;messageid=1700000000000", "19:team@thread.tacv2"},
	} {
		t.Run(tc.convType, func(t *testing.T) {
			h := newHarness(t, setup{})
			if s, b := h.send(h.message(tc.convType, tc.convID, "k-1", "/sales_report {}")); s != http.StatusAccepted {
				t.Fatalf("%d %s", s, b)
			}
			h.conn.waitFor(t, "the answer", hasReplyTo("k-1"))
			h.idle()
			want := answerIDs(h.conn.snapshot(), "k-1")
			if len(want) == 0 {
				t.Fatal("no answer card was sent")
			}
			run := h.onlyRun(t)
			d, err := h.store.Delivery(context.Background(), run)
			if err != nil {
				t.Fatalf("delivery of run %s: %v", run, err)
			}
			if !slices.Equal(d.ActivityIDs, want) {
				t.Errorf("kept ids %q, want the connector's %q", d.ActivityIDs, want)
			}
			if d.ConversationID != tc.convID {
				t.Errorf("kept conversation %q, want %q", d.ConversationID, tc.convID)
			}
			if key := ConversationKey(testTenant, tc.refConvID); d.ConversationKey != key {
				t.Errorf("kept reference key %q, want %q", d.ConversationKey, key)
			}
			if !d.SentAt.Equal(h.now()) {
				t.Errorf("SentAt %v, want the bot's clock %v", d.SentAt, h.now())
			}
		})
	}
}

// When a slow run showed a "working on it" card, the answer is a new
// message and the working card is deleted: the kept id is the answer's,
// never the deleted card's.
func TestSlowRunDeliveryIsTheAnswerNotTheWorkingCard(t *testing.T) {
	release := make(chan struct{})
	h := newHarness(t, setup{workingAfter: time.Millisecond}.withTool("slow", "wait_for_release", held(nil, release, "done waiting")))
	if s, b := h.send(h.message("groupChat", "a:slow-kept", "sk-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	working, _ := replyTo(h.conn.waitFor(t, "the working card", hasReplyTo("sk-1")), "sk-1")
	close(release)
	h.conn.waitFor(t, "the working card deleted", func(c []received) bool {
		return slices.ContainsFunc(c, func(x received) bool { return x.Method == http.MethodDelete })
	})
	h.idle()
	posted := answerIDs(h.conn.snapshot(), "sk-1")
	if len(posted) != 2 || posted[0] != working.AssignedID {
		t.Fatalf("messages posted %q, want the working card %q and then the answer", posted, working.AssignedID)
	}
	d, err := h.store.Delivery(context.Background(), h.onlyRun(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.ActivityIDs, posted[1:]) {
		t.Errorf("kept ids %q, want the answer's %q", d.ActivityIDs, posted[1:])
	}
}

// An answer is updated in place later: the card of each kept id is
// replaced (PUT), an extra card becomes a new message, a card no longer
// needed is deleted, and the kept ids follow. A run without a delivery, or
// whose conversation the bot has left, gives ErrNoAnswer and sends nothing.
func TestUpdateAnswer(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	const conv = "a:update"
	install := h.message("personal", conv, "", "")
	delete(install, "text")
	install["type"] = "installationUpdate"
	install["action"] = "add"
	if s, b := h.send(install); s != http.StatusOK {
		t.Fatalf("install: %d %s", s, b)
	}
	if s, b := h.send(h.message("personal", conv, "u-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("u-1"))
	h.idle()
	run := h.onlyRun(t)
	before, err := h.store.Delivery(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	first := before.ActivityIDs[0]
	r, err := h.store.GetRun(ctx, run)
	if err != nil || len(r.ViewIDs) != 1 {
		t.Fatalf("run %s: %+v, %v", run, r, err)
	}
	view, err := h.store.View(ctx, r.ViewIDs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The answer as it reads once its view has expired: no Open button.
	expired := cards.AnswerCards(cards.Answer{Text: "Corrected: the report covers Q3 only.",
		Views: []cards.View{{ID: view.ID, Title: view.ToolTitle, Tool: view.Tool, Server: view.Server, ExpiresAt: view.ExpiresAt}}},
		cards.Options{PublicBaseURL: netaddr.MustParseOrigin(httpsBaseURL), Now: view.ExpiresAt.Add(time.Minute)})[0]
	extra := cards.RunFailed("extra-card")

	// since returns the calls after the first n.
	since := func(n int) []received { return h.conn.snapshot()[n:] }

	n := len(h.conn.snapshot())
	if err := h.bot.UpdateAnswer(ctx, run, []cards.Card{expired}); err != nil {
		t.Fatalf("UpdateAnswer: %v", err)
	}
	calls := since(n)
	if len(calls) != 1 || calls[0].Method != http.MethodPut || calls[0].ActivityID != first || calls[0].ConversationID != conv {
		t.Fatalf("update sent %+v, want one PUT of %s in %s", calls, first, conv)
	}
	if !strings.HasPrefix(calls[0].Auth, "Bearer bot-token-") {
		t.Errorf("update sent with Authorization %q, want the bot token", calls[0].Auth)
	}
	if raw := string(calls[0].Raw); !strings.Contains(raw, "Corrected: the report covers Q3 only.") || len(openURLs(t, calls[0].Activity.Attachments[0].Content)) != 0 {
		t.Errorf("the PUT does not carry the new card (corrected text, no Open button): %s", raw)
	}
	if d, err := h.store.Delivery(ctx, run); err != nil || !slices.Equal(d.ActivityIDs, before.ActivityIDs) {
		t.Errorf("after an update in place the kept ids are %+v, %v; want %q", d, err, before.ActivityIDs)
	}

	// Two cards: the first replaces the kept one, the second is new.
	n = len(h.conn.snapshot())
	if err := h.bot.UpdateAnswer(ctx, run, []cards.Card{expired, extra}); err != nil {
		t.Fatalf("UpdateAnswer with an extra card: %v", err)
	}
	calls = since(n)
	if len(calls) != 2 || calls[0].Method != http.MethodPut || calls[0].ActivityID != first ||
		calls[1].Method != http.MethodPost || calls[1].ConversationID != conv || !strings.Contains(string(calls[1].Raw), "extra-card") {
		t.Fatalf("update with an extra card sent %+v, want a PUT of %s then a new message", calls, first)
	}
	newID := calls[1].AssignedID
	if d, _ := h.store.Delivery(ctx, run); !slices.Equal(d.ActivityIDs, []string{first, newID}) {
		t.Errorf("kept ids %q, want %q", d.ActivityIDs, []string{first, newID})
	}

	// One card again: the second is deleted and forgotten.
	n = len(h.conn.snapshot())
	if err := h.bot.UpdateAnswer(ctx, run, []cards.Card{expired}); err != nil {
		t.Fatalf("UpdateAnswer with fewer cards: %v", err)
	}
	calls = since(n)
	if len(calls) != 2 || calls[0].Method != http.MethodPut || calls[0].ActivityID != first ||
		calls[1].Method != http.MethodDelete || calls[1].ActivityID != newID || calls[1].ConversationID != conv {
		t.Fatalf("update with fewer cards sent %+v, want a PUT of %s and a DELETE of %s", calls, first, newID)
	}
	if d, _ := h.store.Delivery(ctx, run); !slices.Equal(d.ActivityIDs, []string{first}) {
		t.Errorf("kept ids %q, want %q", d.ActivityIDs, []string{first})
	}

	// A run that was never delivered.
	n = len(h.conn.snapshot())
	err = h.bot.UpdateAnswer(ctx, "no-such-run", []cards.Card{extra})
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateAnswer of an unknown run = %v, want ErrNoAnswer and store.ErrNotFound", err)
	}
	// The bot removed from the conversation: nowhere to send.
	uninstall := h.message("personal", conv, "", "")
	uninstall["type"] = "installationUpdate"
	uninstall["action"] = "remove"
	if s, b := h.send(uninstall); s != http.StatusOK {
		t.Fatalf("uninstall: %d %s", s, b)
	}
	err = h.bot.UpdateAnswer(ctx, run, []cards.Card{extra})
	if !errors.Is(err, ErrNoAnswer) || !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "no longer in conversation") {
		t.Errorf("UpdateAnswer after uninstall = %v, want ErrNoAnswer saying the bot left", err)
	}
	if calls := since(n); len(calls) != 0 {
		t.Errorf("refused updates still called the connector: %+v", calls)
	}
}

// A delivery that cannot be recorded costs only later updates: the
// answer still reaches the person, and the log line says so without the
// question.
func TestDeliveryNotRecordedIsLogged(t *testing.T) {
	h := newHarness(t, setup{})
	// A first answer, while the store is open, leaves the tenant's access
	// rules in memory for the second.
	if s, b := h.send(h.message("personal", "a:no-store", "ns-0", "/lookup_customer {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the first answer", hasReplyTo("ns-0"))
	h.idle()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	if s, b := h.send(h.message("personal", "a:no-store", "ns-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("ns-1"))
	h.idle()
	logs := h.logs.String()
	if !strings.Contains(logs, "answer delivered but not recorded") {
		t.Errorf("no log line for the delivery that could not be recorded:\n%s", logs)
	}
	if strings.Contains(logs, "sales_report {}") {
		t.Errorf("the log carries the question:\n%s", logs)
	}
}
