package bot

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/store"
)

// secretCommand is a stdio MCP server's command under a path nobody in a
// chat should read; it does not exist, so the server cannot start.
const secretCommand = "/opt/internal/secret-path/mcp-server"

// internals are what must never reach a chat: the path, the exec error,
// and the service's own error prefixes.
var internals = []string{"/opt/internal", "secret-path", "fork/exec", "no such file", "agent: ", "starting "}

// cardRef finds a reference shown in a card ("(ref 7KQ2M9XD)").
var cardRef = regexp.MustCompile(`\(ref ([0-9A-Z]{8})\)`)

// A stdio server that cannot start, in a group chat, a personal chat and a
// triggered run: every card says in a person's words that the crm server
// is unavailable and gives a reference; the path and the exec error are
// in the log line and the audit record under that reference, and in no
// card.
func TestCardsNeverShowInternals(t *testing.T) {
	h := newHarness(t, setup{servers: []agent.ServerConfig{{Name: "crm", Command: []string{secretCommand, "--stdio"}}}})
	ctx := context.Background()
	h.install("a:personal")

	var cardsSent []string
	for _, c := range []struct{ kind, conv, id string }{
		{"groupChat", "19:group@thread.v2", "g-1"},
		{"personal", "a:personal", "p-1"},
	} {
		if s, b := h.send(h.message(c.kind, c.conv, c.id, "/crm/sales_report {}")); s != http.StatusAccepted {
			t.Fatalf("%s: %d %s", c.kind, s, b)
		}
		reply, _ := replyTo(h.conn.waitFor(t, "the answer in the "+c.kind, hasReplyTo(c.id)), c.id)
		cardsSent = append(cardsSent, string(reply.Raw))
	}
	res, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "/crm/sales_report {}",
		ConversationID: "a:personal", Trigger: cards.Trigger{Name: "Weekly", Scheduled: true}})
	if err != nil || len(res.ActivityIDs) != 1 {
		t.Fatalf("RunTriggered: %+v %v", res, err)
	}
	for _, c := range h.conn.snapshot() {
		if c.AssignedID == res.ActivityIDs[0] {
			cardsSent = append(cardsSent, string(c.Raw))
		}
	}
	h.shutdown()
	if len(cardsSent) != 3 {
		t.Fatalf("%d cards, want the group chat's, the personal chat's and the triggered run's", len(cardsSent))
	}

	recs, err := h.store.Audit(ctx, store.AuditQuery{TenantID: testTenant, Action: agent.AuditToolCall})
	if err != nil || len(recs) != 3 {
		t.Fatalf("tool call audit records: %d, %v", len(recs), err)
	}
	byRef := map[string]store.AuditRecord{}
	for _, r := range recs {
		ref, _ := r.Fields["ref"].(string)
		byRef[ref] = r
	}
	for i, raw := range cardsSent {
		for _, bad := range internals {
			if strings.Contains(raw, bad) {
				t.Errorf("card %d holds %q:\n%s", i, bad, raw)
			}
		}
		if !containsAll(raw, "the crm server is unavailable, so its tools were not offered (ref ", "the crm server is unavailable (ref ") {
			t.Errorf("card %d does not say in a person's words that the crm server is unavailable:\n%s", i, raw)
		}
		refs := cardRef.FindAllStringSubmatch(raw, -1)
		if len(refs) < 2 {
			t.Fatalf("card %d gives %d references:\n%s", i, len(refs), raw)
		}
		for _, m := range refs {
			ref := m[1]
			if !logHas(h.logs.String(), "ref="+ref, secretCommand, "no such file") {
				t.Errorf("card %d: no log line holds the detail under %s", i, ref)
			}
		}
		// The tool error's reference is the one its audit record keeps.
		var found bool
		for _, m := range refs {
			if r, ok := byRef[m[1]]; ok {
				found = true
				if why, _ := r.Fields["why"].(string); !strings.Contains(why, secretCommand) {
					t.Errorf("card %d: the audit record under %s says %q", i, m[1], why)
				}
			}
		}
		if !found {
			t.Errorf("card %d: no reference of it is in the audit log (%v)", i, refs)
		}
	}
}

// logHas reports whether one line of logs holds every part.
func logHas(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		if containsAll(l, parts...) {
			return true
		}
	}
	return false
}

// A tool's text that holds an Adaptive Card text function and a link
// becomes the answer: the card sent to Teams holds both as text, broken
// the way names are (a zero-width space after the first brace and in the
// scheme), so that Teams neither evaluates the function nor links the
// address. The official renderer's view of the same is cards'
// TestRendererShowsOutsideFunctionsAsText.
func TestToolTextStaysTextInTheCard(t *testing.T) {
	const fn = "{{DATE(2026-01-01T00:00:00Z, SHORT)}}"
	h := newHarness(t, setup{}.withTool("notes", "due_date", func(context.Context) (string, error) {
		return "Due " + fn + ", see [the plan](https://evil.example/plan)", nil
	}))
	if s, b := h.send(h.message("groupChat", "19:group@thread.v2", "d-1", "/due_date {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	reply, _ := replyTo(h.conn.waitFor(t, "the answer", hasReplyTo("d-1")), "d-1")
	h.shutdown()
	raw := string(reply.Raw)
	if strings.Contains(raw, "{{DATE(2026-01-01") || strings.Contains(raw, "https://evil.example") || strings.Contains(raw, "](") {
		t.Errorf("the card sent to Teams holds a live function or link:\n%s", raw)
	}
	if !containsAll(raw, "Due {\u200b{DATE(2026-01-01T00:00:00Z, SHORT)}}", "the plan (https:\u200b//evil.example/plan)") {
		t.Errorf("the card does not show the tool's text as text:\n%s", raw)
	}
}
