package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"teamsbot/agent"
	"testing"

	"teamsbot/store"
)

// turnsOf reads the memory the agent keeps of a conversation.
func turnsOf(t *testing.T, h *harness, convID string) []store.HistoryTurn {
	t.Helper()
	hs, err := h.store.History(context.Background(), testTenant, convID, "default", 100, 1_000_000)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// ask sends text into a conversation and waits for its answer.
func ask(t *testing.T, h *harness, convType, convID, id, text string, edit func(map[string]any)) received {
	t.Helper()
	m := h.message(convType, convID, id, text)
	if edit != nil {
		edit(m)
	}
	if status, body := h.send(m); status != http.StatusAccepted {
		t.Fatalf("POST = %d %s", status, body)
	}
	calls := h.conn.waitFor(t, "the answer to "+id, hasReplyTo(id))
	r, _ := replyTo(calls, id)
	return r
}

// Each conversation keeps its own memory: a personal chat's turns, with
// the tool calls and the ordinary results the model read, and never a
// view's HTML; another conversation reads none of it; in a group chat
// each message says who wrote it; /new forgets, and says so.
func TestConversationMemory(t *testing.T) {
	h := newHarness(t, setup{})
	ask(t, h, "personal", "a:personal-ada", "1700000000101", "/sales_report {}", nil)
	ask(t, h, "personal", "a:personal-ada", "1700000000102", "/tools", nil)
	hs := turnsOf(t, h, "a:personal-ada")
	if len(hs) != 2 {
		t.Fatalf("%d turns kept, want 2", len(hs))
	}
	var first []map[string]any
	if err := json.Unmarshal(hs[0].Messages, &first); err != nil {
		t.Fatal(err)
	}
	raw := string(hs[0].Messages)
	if first[0]["role"] != "user" || first[0]["text"] != "/sales_report {}" || !strings.Contains(raw, `"toolCalls"`) || !strings.Contains(raw, `"role":"tool"`) {
		t.Errorf("the first turn: %s", raw)
	}
	if strings.Contains(raw, "<html") || strings.Contains(raw, "<!doctype") || strings.Contains(strings.ToLower(raw), "<script") {
		t.Errorf("a view's HTML reached the memory: %s", raw)
	}
	if hs[0].UserID != testUserOID || hs[0].RunID == "" {
		t.Errorf("turn kept as %+v", hs[0])
	}
	if other := turnsOf(t, h, "a:personal-someone-else"); len(other) != 0 {
		t.Errorf("another conversation has %d turns", len(other))
	}

	// A group chat's turns say who wrote them.
	ask(t, h, "groupChat", "19:group@thread.v2", "1700000000103", "/tools", nil)
	ask(t, h, "groupChat", "19:group@thread.v2", "1700000000104", "/tools", func(m map[string]any) {
		m["from"] = map[string]any{"id": "29:grace", "name": "Grace Hopper", "aadObjectId": "22222222-0000-4000-8000-000000000002"}
	})
	hs = turnsOf(t, h, "19:group@thread.v2")
	if len(hs) != 2 || !strings.Contains(string(hs[0].Messages), `"from":"Ada Lovelace"`) || !strings.Contains(string(hs[1].Messages), `"from":"Grace Hopper"`) {
		t.Errorf("group chat turns: %d %v", len(hs), hs)
	}

	// /new forgets this conversation only.
	r := ask(t, h, "personal", "a:personal-ada", "1700000000105", "/new", nil)
	if !strings.Contains(string(r.Raw), "no longer remember") {
		t.Errorf("/new answered %s", r.Raw)
	}
	if n := len(turnsOf(t, h, "a:personal-ada")); n != 0 {
		t.Errorf("%d turns left after /new", n)
	}
	if n := len(turnsOf(t, h, "19:group@thread.v2")); n != 2 {
		t.Errorf("/new in one chat forgot another's turns: %d left", n)
	}
	recs, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: "bot.history.cleared"})
	if err != nil || len(recs) != 1 {
		t.Errorf("/new audited %d times, %v", len(recs), err)
	}
}

// A follow-up uses the earlier turns: the built-in model's /again makes the
// last tool call of the conversation again, and /history lists what was
// asked; after /new neither finds anything.
func TestFollowUpUsesTheConversation(t *testing.T) {
	h := newHarness(t, setup{})
	conv := "a:personal-follow-up"
	ask(t, h, "personal", conv, "1700000000201", "/sales_report {}", nil)
	r := ask(t, h, "personal", conv, "1700000000202", "/again", nil)
	if !strings.Contains(string(r.Raw), "mcp-apps") && !strings.Contains(string(r.Raw), "sales") {
		t.Errorf("/again did not make the sales report again: %s", r.Raw)
	}
	hs := turnsOf(t, h, conv)
	if len(hs) != 2 || !strings.Contains(string(hs[1].Messages), "sales_report") {
		t.Fatalf("the follow-up's turn: %d turns, %v", len(hs), hs)
	}
	r = ask(t, h, "personal", conv, "1700000000203", "/history", nil)
	if !strings.Contains(string(r.Raw), "1. /sales_report {}") || !strings.Contains(string(r.Raw), "2. /again") {
		t.Errorf("/history answered %s", r.Raw)
	}
	ask(t, h, "personal", conv, "1700000000204", "/new", nil)
	r = ask(t, h, "personal", conv, "1700000000205", "/again", nil)
	if !strings.Contains(string(r.Raw), "nothing earlier") {
		t.Errorf("/again after /new answered %s", r.Raw)
	}
}

// The model reads the conversation's earlier turns, who said what and what
// it answered, within the agent's bounds: with room for two earlier turns
// the oldest whole turn is dropped first.
func TestModelReadsEarlierTurnsWithinTheBounds(t *testing.T) {
	model, cfg := newAskedModel(t)
	h := newHarness(t, setup{model: cfg, memory: agent.MemoryConfig{Turns: 2}})
	for i, q := range []string{"first question", "second question", "third question", "and the same for last quarter?"} {
		ask(t, h, "personal", "a:bounded", fmt.Sprintf("17000000003%02d", i), q, nil)
	}
	got := model.last()
	want := []string{"second question", "third question", "and the same for last quarter?"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the model read %q, want %q", got, want)
	}
}

// Removing the app from a conversation erases its memory.
func TestRemovedAppErasesTheMemory(t *testing.T) {
	h := newHarness(t, setup{})
	const conv = "a:removed"
	install := h.message("personal", conv, "", "")
	delete(install, "text")
	install["type"], install["action"] = "installationUpdate", "add"
	if s, b := h.send(install); s != http.StatusOK {
		t.Fatalf("install: %d %s", s, b)
	}
	ask(t, h, "personal", conv, "1700000000401", "/tools", nil)
	if n := len(turnsOf(t, h, conv)); n != 1 {
		t.Fatalf("%d turns before the removal", n)
	}
	uninstall := h.message("personal", conv, "", "")
	delete(uninstall, "text")
	uninstall["type"], uninstall["action"] = "installationUpdate", "remove"
	if s, b := h.send(uninstall); s != http.StatusOK {
		t.Fatalf("uninstall: %d %s", s, b)
	}
	if n := len(turnsOf(t, h, conv)); n != 0 {
		t.Errorf("%d turns left after the app was removed", n)
	}
}

// "Start over" and the like, alone in a message, start a new conversation
// as /new does (Teams has no gesture of its own for it); the same words
// inside a question are a question.
func TestStartOverInWordsForgets(t *testing.T) {
	h := newHarness(t, setup{})
	conv := "a:personal-start-over"
	ask(t, h, "personal", conv, "1700000000601", "/sales_report {}", nil)
	r := ask(t, h, "personal", conv, "1700000000602", "how do I start over with the sales report?", nil)
	if n := len(turnsOf(t, h, conv)); n != 2 {
		t.Fatalf("a question with the words in it: %d turns kept, want 2 (it ran): %s", n, r.Raw)
	}
	for i, words := range []string{"Start over!", "  new   CONVERSATION. ", "start a new chat?"} {
		ask(t, h, "personal", conv, fmt.Sprint("17000000006", 10+i), "/sales_report {}", nil)
		r := ask(t, h, "personal", conv, fmt.Sprint("17000000006", 20+i), words, nil)
		if n := len(turnsOf(t, h, conv)); n != 0 || !strings.Contains(string(r.Raw), "no longer remember") {
			t.Errorf("%q: %d turns left, want none; answered %s", words, n, r.Raw)
		}
	}
	recs, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: "bot.history.cleared"})
	if err != nil || len(recs) != 3 {
		t.Errorf("the three starts over audited %d times, %v", len(recs), err)
	}
}
