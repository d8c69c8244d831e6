package bot

import (
	"net/http"
	"strings"
	"testing"
)

// With StageView (TICKETIQ_TEAMS_TAB) the answer's card opens its view in
// Stage View, with the browser button beside it. Teams answers the Stage
// View action itself; an invoke that still reaches the bot with its value
// is answered 200 {} and makes no run and no message.
func TestStageViewCardsAndInvoke(t *testing.T) {
	h := newHarness(t, setup{stageView: true})
	status, body := h.send(h.message("personal", "a:stage", "1700000000100", "/sales_report {}"))
	if status != http.StatusAccepted {
		t.Fatalf("POST %s = %d %s", Path, status, body)
	}
	calls := h.conn.waitFor(t, "the answer", hasReplyTo("1700000000100"))
	reply, _ := replyTo(calls, "1700000000100")
	raw := string(reply.Raw)
	if !strings.Contains(raw, `"tab/tabInfoAction"`) || !strings.Contains(raw, `"contentUrl":"`+httpsBaseURL+`/mcp-apps/`) ||
		!strings.Contains(raw, `"Action.OpenUrl"`) {
		t.Fatalf("the answer card has no Stage View action with a browser button: %s", raw)
	}
	before := len(h.conn.snapshot())

	inv := h.message("personal", "a:stage", "1700000000101", "")
	inv["type"] = "invoke"
	inv["value"] = map[string]any{"type": "tab/tabInfoAction", "tabInfo": map[string]any{
		"contentUrl": httpsBaseURL + "/mcp-apps/x", "websiteUrl": httpsBaseURL + "/mcp-apps/x", "name": "x", "entityId": "view-x"}}
	status, body = h.send(inv)
	if status != http.StatusOK || strings.TrimSpace(body) != "{}" {
		t.Errorf("Stage View invoke: %d %q, want 200 and {}", status, body)
	}
	h.shutdown()
	if n := len(h.conn.snapshot()); n != before {
		t.Errorf("the Stage View invoke made the bot send %d activities", n-before)
	}
}
