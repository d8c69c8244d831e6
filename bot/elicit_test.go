package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// refundSchema asks for one property of every kind, with defaults.
var refundSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "amount":  {"type": "number", "title": "Amount", "minimum": 1, "maximum": 500, "default": 20},
    "reason":  {"type": "string", "title": "Reason", "minLength": 3},
    "email":   {"type": "string", "format": "email", "title": "Receipt to"},
    "day":     {"type": "string", "format": "date"},
    "items":   {"type": "integer", "minimum": 1, "maximum": 9},
    "confirm": {"type": "boolean", "title": "I confirm the refund", "default": false},
    "account": {"type": "string", "oneOf": [{"const": "chk", "title": "Checking"}, {"const": "sav", "title": "Savings"}], "default": "chk"},
    "tags":    {"type": "array", "items": {"type": "string", "enum": ["late", "broken", "other"]}}
  },
  "required": ["amount", "reason", "confirm"]
}`)

// shop is an MCP server over Streamable HTTP whose tools ask the person
// during their call: refund (a form of every kind), visit (an https
// address to open, then the completion notification), sample (the
// model, which the agent never lends). Each tool answers with what it
// got.
type shop struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
	// complete is closed by the test when the visit is done.
	complete chan struct{}
	visitURL string
	// protocol is the one version the server speaks; empty: go-sdk's
	// latest.
	protocol string
}

func newShop(t *testing.T, protocol string) *shop {
	s := &shop{complete: make(chan struct{}), visitURL: "https://pay.example.com/confirm?order=42", protocol: protocol}
	var opts *mcp.ServerOptions
	if protocol != "" {
		opts = &mcp.ServerOptions{SupportedProtocolVersions: []string{protocol}}
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "shop", Version: "1.0.0"}, opts)
	answer := func(text string) *mcp.CallToolResult {
		s.mu.Lock()
		s.got = append(s.got, text)
		s.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	}
	mcp.AddTool(server, &mcp.Tool{Name: "refund", Description: "refunds an order, asking the person for the details"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Which refund should I make for order 42?", RequestedSchema: refundSchema})
			if err != nil {
				return answer("elicitation failed: " + err.Error()), nil, nil
			}
			content, _ := json.Marshal(res.Content)
			return answer(fmt.Sprintf("refund %s %s", res.Action, content)), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "visit", Description: "asks the person to confirm at the payment provider"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Confirm the payment at the provider.", URL: s.visitURL, ElicitationID: "visit-42"})
			if err != nil {
				return answer("elicitation failed: " + err.Error()), nil, nil
			}
			if res.Action == "accept" && s.protocol == "" {
				// Protocol 2026-07-28 has no stream outside a request: the
				// tool waits for the visit and says so during its call.
				select {
				case <-s.complete:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
				if err := req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "visit-42"}); err != nil {
					t.Errorf("completion not sent: %v", err)
				}
			} else if res.Action == "accept" {
				// Earlier protocols: the completion comes later, on the
				// session's own stream.
				go func() {
					<-s.complete
					if err := req.Session.NotifyElicitationComplete(context.Background(), &mcp.ElicitationCompleteParams{ElicitationID: "visit-42"}); err != nil {
						t.Errorf("completion not sent: %v", err)
					}
				}()
			}
			return answer("visit " + res.Action), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "sample", Description: "asks for the client's model"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			_, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return answer("sampling refused: " + err.Error()), nil, nil
			}
			return answer("sampling allowed"), nil, nil
		})
	s.srv = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shop) results() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// questionCard waits for the question card replying to activityID and
// returns the call and the question's id (from its buttons' data).
func questionCard(t *testing.T, h *harness, activityID string) (received, string) {
	t.Helper()
	var card received
	h.conn.waitFor(t, "the question card", func(cs []received) bool {
		for _, c := range cs {
			if c.Method == "POST" && c.ActivityID == activityID && len(c.Activity.Attachments) > 0 &&
				strings.Contains(string(c.Activity.Attachments[0].Content), `"elicitation"`) {
				card = c
				return true
			}
		}
		return false
	})
	var body struct {
		Body []json.RawMessage `json:"body"`
	}
	_ = json.Unmarshal(card.Activity.Attachments[0].Content, &body)
	i := strings.Index(string(card.Activity.Attachments[0].Content), `"elicitation":"`)
	rest := string(card.Activity.Attachments[0].Content)[i+len(`"elicitation":"`):]
	return card, rest[:strings.Index(rest, `"`)]
}

// press posts what Teams posts when a person presses a question card's
// button: a message with no text whose value holds the button's data and
// every input's value.
func press(h *harness, convType, convID, id, from, question, action string, values map[string]string) {
	m := h.message(convType, convID, id, "")
	m["text"] = ""
	delete(m, "entities")
	v := map[string]any{cards.ElicitKey: cards.ElicitKind, cards.ElicitIDKey: question, cards.ElicitActionKey: action}
	for k, x := range values {
		v[cards.ElicitFieldPrefix+k] = x
	}
	m["value"] = v
	if from != "" {
		m["from"] = map[string]any{"id": "29:other", "name": "Grace Hopper", "aadObjectId": from}
	}
	if code, body := h.send(m); code/100 != 2 {
		h.t.Fatalf("pressing %s: %d %s", action, code, body)
	}
}

// updatesOf are the PUTs of the card with the given id, in order.
func updatesOf(calls []received, id string) []string {
	var out []string
	for _, c := range calls {
		if c.Method == "PUT" && c.ActivityID == id && len(c.Activity.Attachments) > 0 {
			out = append(out, string(c.Activity.Attachments[0].Content))
		}
	}
	return out
}

// answerOf is the text of the final answer replying to activityID.
func answerOf(t *testing.T, h *harness, activityID, want string) string {
	t.Helper()
	var text string
	h.conn.waitFor(t, "the answer saying "+want, func(cs []received) bool {
		for _, c := range cs {
			if c.Method == "POST" && c.ActivityID == activityID && len(c.Activity.Attachments) > 0 {
				if s := string(c.Activity.Attachments[0].Content); strings.Contains(s, want) {
					text = s
					return true
				}
			}
		}
		return false
	})
	return text
}

func elicitHarness(t *testing.T, s setup) (*harness, *shop) {
	return elicitHarnessSpeaking(t, s, "")
}

func elicitHarnessSpeaking(t *testing.T, s setup, protocol string) (*harness, *shop) {
	sh := newShop(t, protocol)
	s.servers = append(s.servers, agent.ServerConfig{Name: "shop", URL: sh.srv.URL})
	return newHarness(t, s), sh
}

func TestQuestionAnsweredInTeams(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	const conv = "a:personal-elicit"
	if code, body := h.send(h.message("personal", conv, "m1", "/refund {}")); code/100 != 2 {
		t.Fatalf("%d %s", code, body)
	}
	card, q := questionCard(t, h, "m1")
	content := string(card.Activity.Attachments[0].Content)
	for _, want := range []string{"shop asks for your input", "Which refund should I make for order 42?", `"Input.Number"`, `"Input.Toggle"`, `"Input.ChoiceSet"`, `"Input.Date"`, `"Email"`, `"field:amount"`} {
		if !strings.Contains(content, want) {
			t.Errorf("the question card lacks %s: %s", want, content)
		}
	}

	// A wrong answer: the card comes back with what to correct, and the
	// tool still waits.
	press(h, "personal", conv, "m2", "", q, "accept", map[string]string{"amount": "900", "reason": "no", "confirm": "true", "account": "chk"})
	calls := h.conn.waitFor(t, "the card with what to correct", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
	again := updatesOf(calls, card.AssignedID)[0]
	for _, want := range []string{"Amount: at most 500.", "Reason: at least 3 characters.", `"value":900`} {
		if !strings.Contains(again, want) {
			t.Errorf("the card after a wrong answer lacks %s: %s", want, again)
		}
	}
	if got := sh.results(); len(got) != 0 {
		t.Fatalf("the tool went on after a wrong answer: %v", got)
	}

	press(h, "personal", conv, "m3", "", q, "accept", map[string]string{"amount": "42.5", "reason": "arrived broken", "email": "", "confirm": "true", "account": "sav", "tags": "broken,late", "items": "2", "day": ""})
	answer := answerOf(t, h, "m1", "refund accept")
	want := `refund accept {"account":"sav","amount":42.5,"confirm":true,"items":2,"reason":"arrived broken","tags":["broken","late"]}`
	if got := sh.results(); len(got) != 1 || got[0] != want {
		t.Errorf("the tool got %q, want %q", got, want)
	}
	if !strings.Contains(answer, "refund accept") {
		t.Errorf("answer %s", answer)
	}
	calls = h.conn.waitFor(t, "the card saying it was sent", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 2 })
	sent := updatesOf(calls, card.AssignedID)[1]
	if !strings.Contains(sent, "Your answer was sent to shop") || strings.Contains(sent, "arrived broken") || strings.Contains(sent, "Input.") || strings.Contains(sent, "Action.Submit") {
		t.Errorf("the answered card: %s", sent)
	}

	// The audit log names the request and its outcome, the fields but
	// never the values.
	recs, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, r := range recs {
		if !strings.HasPrefix(r.Action, "agent.elicitation") {
			continue
		}
		raw, _ := json.Marshal(r.Fields)
		seen = append(seen, r.Action+" "+fmt.Sprint(r.Fields["outcome"]))
		for _, secret := range []string{"arrived broken", "42.5", "sav"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("audit record %s holds the value %q: %s", r.Action, secret, raw)
			}
		}
		if r.Action == agent.AuditElicitation && !strings.Contains(string(raw), `"fields":["amount","reason","email","day","items","confirm","account","tags"]`) {
			t.Errorf("the request's record does not name the fields in the server's order: %s", raw)
		}
		if r.Actor != testUserOID || r.Fields["server"] != "shop" || r.Fields["tool"] != "refund" {
			t.Errorf("record %s: actor %s fields %v", r.Action, r.Actor, r.Fields)
		}
	}
	if strings.Join(seen, ",") != "agent.elicitation.request <nil>,agent.elicitation.outcome accept" && strings.Join(seen, ",") != "agent.elicitation.outcome accept,agent.elicitation.request <nil>" {
		t.Errorf("elicitation audit records %v", seen)
	}
}

func TestQuestionDeclinedAndCancelled(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	for i, action := range []string{"decline", "cancel"} {
		conv := "a:personal-" + action
		id := fmt.Sprintf("d%d", i)
		h.send(h.message("personal", conv, id, "/refund {}"))
		card, q := questionCard(t, h, id)
		// The values of a form declined are not checked, nor sent.
		press(h, "personal", conv, id+"-b", "", q, action, map[string]string{"amount": "900"})
		answerOf(t, h, id, "refund "+action)
		calls := h.conn.waitFor(t, "the card updated", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
		if u := updatesOf(calls, card.AssignedID)[0]; strings.Contains(u, "Action.Submit") || !strings.Contains(u, "shop was told so") {
			t.Errorf("%s: card %s", action, u)
		}
	}
	if got := sh.results(); len(got) != 2 || got[0] != "refund decline null" || got[1] != "refund cancel null" {
		t.Errorf("tool results %q", got)
	}
}

// In a group chat anyone sees the card; only the person who asked can
// answer it, and anyone else is told so.
func TestOnlyThePersonAskedCanAnswer(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	const conv = "19:group-elicit@thread.v2"
	h.send(h.message("groupChat", conv, "g1", "/refund {}"))
	card, q := questionCard(t, h, "g1")
	if !strings.Contains(string(card.Activity.Attachments[0].Content), "Only Ada Lovelace can answer this.") {
		t.Errorf("the group chat's card does not say whose question it is: %s", card.Activity.Attachments[0].Content)
	}
	press(h, "groupChat", conv, "g2", "0b5e0a7e-0000-4000-8000-0000000000ff", q, "accept", map[string]string{"amount": "10", "reason": "mine now", "confirm": "true"})
	h.conn.waitFor(t, "the polite refusal", func(cs []received) bool {
		for _, c := range cs {
			if c.ActivityID == "g2" && c.Activity.Text == cards.ElicitNotYours {
				return true
			}
		}
		return false
	})
	if got := sh.results(); len(got) != 0 {
		t.Fatalf("another person's answer reached the tool: %v", got)
	}
	// A wrong answer in a group chat: the card says what to correct,
	// and shows nobody what was entered.
	press(h, "groupChat", conv, "g2b", "", q, "accept", map[string]string{"amount": "900", "reason": "a private reason", "confirm": "true"})
	calls := h.conn.waitFor(t, "the card with what to correct", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
	if u := updatesOf(calls, card.AssignedID)[0]; !strings.Contains(u, "Amount: at most 500.") || strings.Contains(u, "a private reason") || strings.Contains(u, `"value":900`) {
		t.Errorf("the group chat's card after a wrong answer: %s", u)
	}
	press(h, "groupChat", conv, "g3", "", q, "accept", map[string]string{"amount": "10", "reason": "ours", "confirm": "false"})
	answerOf(t, h, "g1", "refund accept")
	if got := sh.results(); len(got) != 1 || !strings.Contains(got[0], `"reason":"ours"`) {
		t.Errorf("tool results %q", got)
	}
	// A button pressed once the question has ended changes nothing.
	press(h, "groupChat", conv, "g4", "", q, "decline", nil)
	h.conn.waitFor(t, "the word that it is over", func(cs []received) bool {
		for _, c := range cs {
			if c.ActivityID == "g4" && c.Activity.Text == cards.ElicitGone {
				return true
			}
		}
		return false
	})
}

func TestUnansweredQuestionIsCancelledInTime(t *testing.T) {
	h, sh := elicitHarness(t, setup{elicitWait: 300 * time.Millisecond, realClock: true})
	h.send(h.message("personal", "a:personal-late", "t1", "/refund {}"))
	card, _ := questionCard(t, h, "t1")
	answer := answerOf(t, h, "t1", "refund cancel")
	calls := h.conn.waitFor(t, "the card saying no answer came", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
	if u := updatesOf(calls, card.AssignedID)[0]; !strings.Contains(u, "No answer came") || strings.Contains(u, "Action.Submit") {
		t.Errorf("card after the time limit: %s", u)
	}
	if got := sh.results(); len(got) != 1 || got[0] != "refund cancel null" {
		t.Errorf("tool results %q", got)
	}
	if !strings.Contains(answer, "no answer came within") {
		t.Errorf("the answer's notes do not say the question went unanswered: %s", answer)
	}
}

// A URL mode question: the card shows the address, the Open button once
// the person goes on, and says when the server is done, whether the
// server says so during its call (protocol 2026-07-28) or later on the
// session's own stream (2025-11-25).
func TestURLQuestionOpensOnlyHTTPSAndHearsCompletion(t *testing.T) {
	for _, protocol := range []string{"", "2025-11-25"} {
		t.Run("protocol "+cmp.Or(protocol, "latest"), func(t *testing.T) {
			h, sh := elicitHarnessSpeaking(t, setup{}, protocol)
			h.send(h.message("personal", "a:personal-url", "u1", "/visit {}"))
			card, q := questionCard(t, h, "u1")
			// The address is shown in full, with the zero-width space
			// that keeps Teams from making a link of it.
			content := strings.ReplaceAll(string(card.Activity.Attachments[0].Content), "\u200b", "")
			if !strings.Contains(content, sh.visitURL) || len(openURLs(t, card.Activity.Attachments[0].Content)) != 0 {
				t.Errorf("the asking card should show the address and no Open button before the person goes on: %s", content)
			}
			press(h, "personal", "a:personal-url", "u2", "", q, "accept", nil)
			calls := h.conn.waitFor(t, "the card with its Open button", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
			var opened received
			for _, c := range calls {
				if c.Method == "PUT" && c.ActivityID == card.AssignedID {
					opened = c
				}
			}
			if urls := openURLs(t, opened.Activity.Attachments[0].Content); len(urls) != 1 || urls[0] != sh.visitURL {
				t.Errorf("Open buttons %v, want %s", urls, sh.visitURL)
			}
			close(sh.complete)
			calls = h.conn.waitFor(t, "the card saying the server is done", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 2 })
			if u := updatesOf(calls, card.AssignedID)[1]; !strings.Contains(u, "shop says it is done") {
				t.Errorf("card after completion: %s", u)
			}
			answerOf(t, h, "u1", "visit accept")
		})
	}
}

func TestNonHTTPSAddressIsDeclinedUnshown(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	sh.visitURL = "javascript:alert(1)"
	h.send(h.message("personal", "a:personal-js", "j1", "/visit {}"))
	answerOf(t, h, "j1", "visit decline")
	for _, c := range h.conn.snapshot() {
		for _, a := range c.Activity.Attachments {
			if strings.Contains(string(a.Content), "javascript:") {
				t.Errorf("a card carries the address: %s", a.Content)
			}
		}
	}
}

func TestSamplingIsRefusedAndAudited(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	h.send(h.message("personal", "a:personal-sample", "s1", "/sample {}"))
	answerOf(t, h, "s1", "sample")
	h.conn.waitFor(t, "the answer", hasReplyTo("s1"))
	if got := sh.results(); len(got) != 1 || !strings.HasPrefix(got[0], "sampling refused") {
		t.Errorf("tool results %q", got)
	}
	recs, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: agent.AuditSamplingRefused})
	if err != nil || len(recs) != 1 || recs[0].Fields["tool"] != "sample" || recs[0].Actor != testUserOID {
		t.Errorf("sampling audit records %v, %v", recs, err)
	}
}

// A tenant's admin who turned a server's questions off: the server is
// told decline at once, nobody is asked.
func TestTenantTurnedQuestionsOff(t *testing.T) {
	h, sh := elicitHarness(t, setup{agentAccess: true})
	ts, err := h.store.TenantSettings(context.Background(), testTenant)
	if err != nil {
		t.Fatal(err)
	}
	ts.TenantID, ts.ElicitationOff = testTenant, []string{"shop"}
	if _, err := h.store.PutTenantSettings(context.Background(), ts, ts.Version); err != nil {
		t.Fatal(err)
	}
	h.send(h.message("personal", "a:personal-off", "o1", "/refund {}"))
	answer := answerOf(t, h, "o1", "refund decline")
	if !strings.Contains(answer, "turned that off") {
		t.Errorf("the answer's notes do not say why: %s", answer)
	}
	for _, c := range h.conn.snapshot() {
		for _, a := range c.Activity.Attachments {
			if strings.Contains(string(a.Content), `"elicitation"`) {
				t.Errorf("a question card was posted: %s", a.Content)
			}
		}
	}
	if got := sh.results(); len(got) != 1 {
		t.Errorf("tool results %q", got)
	}
}

// A run without a person (a schedule, the runs API) has nobody to ask:
// the server is told decline at once, and the run's notes say so.
func TestRunWithoutAPersonDeclinesAtOnce(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	h.install("a:team-elicit")
	res, err := h.bot.RunTriggered(context.Background(), TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "/refund {}",
		ConversationID: "a:team-elicit", Trigger: cards.Trigger{Name: "Nightly refunds", Scheduled: true}})
	if err != nil || res.Failed {
		t.Fatalf("RunTriggered: %+v %v", res, err)
	}
	if got := sh.results(); len(got) != 1 || got[0] != "refund decline null" {
		t.Errorf("tool results %q", got)
	}
	run, err := h.store.GetRun(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(run.Notes, func(n string) bool { return strings.Contains(n, "a run without a person cannot answer") }) {
		t.Errorf("the run's notes do not say why: %q", run.Notes)
	}
	for _, c := range h.conn.snapshot() {
		for _, a := range c.Activity.Attachments {
			if strings.Contains(string(a.Content), `"elicitation"`) {
				t.Errorf("a question card was posted: %s", a.Content)
			}
		}
	}
	recs, _ := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: agent.AuditElicitationOutcome})
	if len(recs) != 1 || recs[0].Fields["outcome"] != "decline" || recs[0].Fields["why"] != "no person to ask" {
		t.Errorf("outcome records %+v", recs)
	}
}

// What the person answered reaches the model only through the tool's
// result, and the data rules redact that as any result.
func TestAnswerTheModelReadsIsRedacted(t *testing.T) {
	sh := newShop(t, "")
	h := newHarness(t, setup{servers: []agent.ServerConfig{{Name: "shop", URL: sh.srv.URL}}, redact: []string{`[a-z]+@example\.com`}})
	h.send(h.message("personal", "a:personal-redact", "r1", "/refund {}"))
	_, q := questionCard(t, h, "r1")
	press(h, "personal", "a:personal-redact", "r2", "", q, "accept", map[string]string{"amount": "20", "reason": "write to grace@example.com", "email": "grace@example.com", "confirm": "true"})
	answer := answerOf(t, h, "r1", "refund accept")
	if strings.Contains(answer, "grace@example.com") || !strings.Contains(answer, "[redacted]") {
		t.Errorf("the answer the model wrote from the result: %s", answer)
	}
	if got := sh.results(); len(got) != 1 || !strings.Contains(got[0], "grace@example.com") {
		t.Errorf("the server itself gets the answer as given: %q", got)
	}
}

// With several replicas, Teams may bring the button's message to another
// replica than the one whose run waits: that one checks it against the
// question kept in the store, records the answer and updates the card;
// the waiting run reads the answer from the store.
func TestQuestionAnsweredOnAnotherReplica(t *testing.T) {
	h, sh := elicitHarness(t, setup{})
	other, err := New(h.opts) // the same store, connector and agent: another replica
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	other.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = other.Shutdown(sctx)
		srv.Close()
	})

	const conv = "a:personal-replicas"
	h.send(h.message("personal", conv, "x1", "/refund {}"))
	card, q := questionCard(t, h, "x1")
	pressOn := func(url, id string, values map[string]string) {
		m := h.message("personal", conv, id, "")
		m["text"] = ""
		v := map[string]any{cards.ElicitKey: cards.ElicitKind, cards.ElicitIDKey: q, cards.ElicitActionKey: "accept"}
		for k, x := range values {
			v[cards.ElicitFieldPrefix+k] = x
		}
		m["value"] = v
		saved := h.url
		h.url = url
		defer func() { h.url = saved }()
		if code, body := h.send(m); code/100 != 2 {
			t.Fatalf("press on the other replica: %d %s", code, body)
		}
	}
	// A wrong answer on the other replica: it shows the card again.
	pressOn(srv.URL, "x2", map[string]string{"amount": "0", "reason": "broken", "confirm": "true"})
	h.conn.waitFor(t, "the card with what to correct", func(cs []received) bool {
		u := updatesOf(cs, card.AssignedID)
		return len(u) == 1 && strings.Contains(u[0], "Amount: at least 1.")
	})
	pressOn(srv.URL, "x3", map[string]string{"amount": "5", "reason": "broken", "confirm": "true"})
	answerOf(t, h, "x1", "refund accept")
	if got := sh.results(); len(got) != 1 || !strings.Contains(got[0], `"amount":5`) {
		t.Errorf("tool results %q", got)
	}
	calls := h.conn.waitFor(t, "the card saying it was sent", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 2 })
	if u := updatesOf(calls, card.AssignedID)[1]; !strings.Contains(u, "Your answer was sent") {
		t.Errorf("card %s", u)
	}
	if _, err := h.store.Question(context.Background(), q); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the answered question is still kept: %v", err)
	}
}

// A streaming message in a personal chat says, while the question waits,
// that the person is asked.
func TestStreamSaysThePersonIsAsked(t *testing.T) {
	h, _ := elicitHarness(t, setup{workingAfter: time.Millisecond})
	h.send(h.message("personal", "a:personal-streamed", "w1", "/refund {}"))
	_, q := questionCard(t, h, "w1")
	h.conn.waitFor(t, "the stream's update saying the person is asked", func(c []received) bool {
		for _, x := range c {
			if x.Activity.Type == "typing" && strings.Contains(x.Activity.Text, "shop asks you something: answer the card below.") {
				return true
			}
		}
		return false
	})
	press(h, "personal", "a:personal-streamed", "w2", "", q, "decline", nil)
	h.conn.waitFor(t, "the final message", func(c []received) bool {
		for _, x := range c {
			if x.Activity.Type == "message" && strings.Contains(string(x.Raw), `"streamType":"final"`) && strings.Contains(string(x.Raw), "refund decline") {
				return true
			}
		}
		return false
	})
}
