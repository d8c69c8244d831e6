package viewpage_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/mcpapps"
	"teamsbot/viewpage"
)

const (
	askViewURI = "ui://asker/view.html"
	// askMessage is what the ask tool's server asks.
	askMessage = "Which colour should the report use?\nSay who asks, too."
	askURL     = "https://login.example.com/connect?step=1"
)

// askSchema is the form the ask tool asks for, in the order written.
const askSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "title": "Your name", "minLength": 1},
	"count": {"type": "integer", "title": "How many", "minimum": 1, "maximum": 10, "default": 2},
	"urgent": {"type": "boolean", "title": "Urgent"},
	"colour": {"type": "string", "title": "Colour", "enum": ["red", "green", "blue"]}
}, "required": ["name", "count"]}`

// askServer is an MCP server of the test's own, served over Streamable
// HTTP on loopback: ask_view makes a view (testdata/ask-view.html); ask
// and ask_url, visible to views only, ask the person (a form, an address
// to open) and return what they got as JSON text. It returns the
// server's URL.
func askServer(t testing.TB) string {
	html, err := os.ReadFile("testdata/ask-view.html")
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1.0.0"}, nil)
	appOnly := mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}
	object := map[string]any{"type": "object"}
	srv.AddTool(&mcp.Tool{Name: "ask_view", InputSchema: object, Meta: mcp.Meta{"ui": map[string]any{"resourceUri": askViewURI}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ready to ask"}}}, nil
		})
	returnWhatCame := func(res *mcp.ElicitResult, err error) (*mcp.CallToolResult, error) {
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "elicitation failed: " + err.Error()}}}, nil
		}
		b, err := json.Marshal(map[string]any{"action": res.Action, "content": res.Content})
		if err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
	}
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: object, Meta: appOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return returnWhatCame(req.Session.Elicit(ctx, &mcp.ElicitParams{Message: askMessage, RequestedSchema: json.RawMessage(askSchema)}))
		})
	srv.AddTool(&mcp.Tool{Name: "ask_url", InputSchema: object, Meta: appOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return returnWhatCame(req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Connect your account.", URL: askURL, ElicitationID: "connect-1"}))
		})
	// ask_url_done's server says the interaction at the address is
	// complete a moment after it asks, before anyone answers.
	srv.AddTool(&mcp.Tool{Name: "ask_url_done", InputSchema: object, Meta: appOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			go func() {
				time.Sleep(300 * time.Millisecond)
				_ = req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: "connect-2"})
			}()
			return returnWhatCame(req.Session.Elicit(ctx, &mcp.ElicitParams{Mode: "url", Message: "Connect your account.", URL: askURL, ElicitationID: "connect-2"}))
		})
	srv.AddResource(&mcp.Resource{URI: askViewURI, Name: "ask view", MIMEType: mcpapps.MIMEType},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: askViewURI, MIMEType: mcpapps.MIMEType, Text: string(html)}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// newAskEnv is an env whose agent also has the asker server, reached
// over Streamable HTTP as a configured url server.
func newAskEnv(t testing.TB, o envOptions) *env {
	o.servers = append(o.servers, agent.ServerConfig{Name: "asker", URL: askServer(t), Timeout: "20s"})
	return newEnv(t, o)
}

// askCall is a view's tools/call under way, made as the page makes it.
type askCall struct {
	done chan response
}

// startCall posts a view's tools/call of tool as c, saying that the page
// shows the questions when page is set.
func (e *env) startCall(c *http.Client, viewID, tool string, page bool) askCall {
	e.t.Helper()
	h := map[string]string{"Content-Type": "application/json"}
	if page {
		h[viewpage.QuestionsHeader] = "page"
	}
	ac := askCall{done: make(chan response, 1)}
	go func() {
		req, _ := http.NewRequest(http.MethodPost, e.base+"/api/mcp-apps/"+viewID+"/call", strings.NewReader(`{"name": "`+tool+`", "arguments": {}}`))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			ac.done <- response{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			ac.done <- response{status: -1, body: "reading the answer: " + err.Error()}
			return
		}
		ac.done <- response{resp.StatusCode, resp.Header, string(b)}
	}()
	return ac
}

// got waits for the call's answer and returns what the server said it
// got: the text of the tool's result, decoded.
func (ac askCall) got(t *testing.T) (action string, content map[string]any) {
	t.Helper()
	var r response
	select {
	case r = <-ac.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the view's call did not end")
	}
	if r.status != http.StatusOK {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	var res struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(r.body), &res); err != nil || len(res.Content) != 1 || res.IsError {
		t.Fatalf("call result %s (%v)", r.body, err)
	}
	var out struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		t.Fatalf("the tool's text %q: %v", res.Content[0].Text, err)
	}
	return out.Action, out.Content
}

// questions lists the questions of view id waiting for c's person, at once.
func (e *env) questions(c *http.Client, viewID string) (int, []viewpage.Question) {
	e.t.Helper()
	r := do(e.t, c, http.MethodGet, e.base+"/api/mcp-apps/"+viewID+"/questions", nil, "")
	if r.status != http.StatusOK {
		return r.status, nil
	}
	var l viewpage.QuestionList
	if err := json.Unmarshal([]byte(r.body), &l); err != nil {
		e.t.Fatalf("questions %s: %v", r.body, err)
	}
	return r.status, l.Questions
}

// nextQuestion waits, as the page does, until a question of view id
// waits for c's person, and returns it.
func (e *env) nextQuestion(c *http.Client, viewID string) viewpage.Question {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		r := do(e.t, c, http.MethodGet, e.base+"/api/mcp-apps/"+viewID+"/questions?known=", nil, "")
		if r.status != http.StatusOK {
			e.t.Fatalf("questions: %d %s", r.status, r.body)
		}
		var l viewpage.QuestionList
		if err := json.Unmarshal([]byte(r.body), &l); err != nil {
			e.t.Fatal(err)
		}
		if len(l.Questions) > 0 {
			return l.Questions[0]
		}
	}
	e.t.Fatal("no question came")
	return viewpage.Question{}
}

// answer posts an answer to question qid of view id as c.
func (e *env) answer(c *http.Client, viewID, qid, body string) response {
	e.t.Helper()
	return do(e.t, c, http.MethodPost, e.base+"/api/mcp-apps/"+viewID+"/questions/"+qid, map[string]string{"Content-Type": "application/json"}, body)
}

// A server's question during a view's tools/call reaches the person who
// made the call, on the page's own API, with everything the page needs to
// show it; their answer goes back to the server, checked against the
// form, and the view gets the tool's result. A wrong answer is answered
// 422 with what to correct, field by field; decline, cancel and a URL
// question's continue reach the server as such.
func TestQuestionDuringViewCall(t *testing.T) {
	e := newAskEnv(t, envOptions{})
	v := e.run(alice(), "/ask_view {}")
	if v.Server != "asker" {
		t.Fatalf("view of server %q", v.Server)
	}
	ac := e.client(alice())

	t.Run("accept", func(t *testing.T) {
		call := e.startCall(ac, v.ID, "ask", true)
		q := e.nextQuestion(ac, v.ID)
		if q.Server != "asker" || q.Tool != "ask" || q.Mode != "form" || q.Message != askMessage || q.URL != "" || q.Agent != "Assistant" {
			t.Errorf("question %+v", q)
		}
		if q.Form == nil {
			t.Fatal("a form question without its form")
		}
		var names []string
		for _, f := range q.Form.Fields {
			names = append(names, f.Name+":"+f.Kind)
		}
		if want := []string{"name:text", "count:integer", "urgent:boolean", "colour:choice"}; !slices.Equal(names, want) {
			t.Errorf("fields %v, want %v in the server's order", names, want)
		}
		if f := q.Form.Fields[1]; !f.Required || f.Default != float64(2) || f.Minimum == nil || *f.Minimum != 1 || f.Maximum == nil || *f.Maximum != 10 {
			t.Errorf("count field %+v", f)
		}
		if wait := time.Until(q.Deadline); wait < 4*time.Minute || wait > 5*time.Minute+time.Second {
			t.Errorf("deadline %v from now, want the agent's 5 minutes", wait)
		}
		r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"name": "Ada", "count": "3", "urgent": true, "colour": "green"}}`)
		if r.status != http.StatusNoContent {
			t.Fatalf("answer: %d %s", r.status, r.body)
		}
		action, content := call.got(t)
		want := map[string]any{"name": "Ada", "count": float64(3), "urgent": true, "colour": "green"}
		if action != "accept" || !mapsEqual(content, want) {
			t.Errorf("the server got %s %v, want accept %v", action, content, want)
		}
		if _, qs := e.questions(ac, v.ID); len(qs) != 0 {
			t.Errorf("questions still waiting: %+v", qs)
		}
		if r := e.answer(ac, v.ID, q.ID, `{"action": "decline"}`); r.status != http.StatusNotFound || !strings.Contains(r.body, "no longer waits") {
			t.Errorf("a second answer: %d %s, want 404 saying the question no longer waits", r.status, r.body)
		}
	})

	t.Run("a wrong answer, then a right one", func(t *testing.T) {
		call := e.startCall(ac, v.ID, "ask", true)
		q := e.nextQuestion(ac, v.ID)
		r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"name": "", "count": 20, "colour": "purple"}}`)
		if r.status != http.StatusUnprocessableEntity {
			t.Fatalf("a wrong answer: %d %s, want 422", r.status, r.body)
		}
		var p viewpage.AnswerProblems
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, pr := range p.Problems {
			got[pr.Field] = pr.Message
		}
		if got["name"] != "Your name is required." || got["count"] != "How many: at most 10." || got["colour"] != "Colour: choose one of the choices given." || len(got) != 3 {
			t.Errorf("problems %v", got)
		}
		if p.Error == "" {
			t.Error("the 422 says nothing to the person")
		}
		// Still waiting: the person corrects and sends again.
		if _, qs := e.questions(ac, v.ID); len(qs) != 1 || qs[0].ID != q.ID {
			t.Fatalf("after a wrong answer the question is gone: %+v", qs)
		}
		if r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"name": "Bo", "count": 10}}`); r.status != http.StatusNoContent {
			t.Fatalf("the corrected answer: %d %s", r.status, r.body)
		}
		action, content := call.got(t)
		if want := map[string]any{"name": "Bo", "count": float64(10)}; action != "accept" || !mapsEqual(content, want) {
			t.Errorf("the server got %s %v, want accept %v", action, content, want)
		}
	})

	for _, action := range []string{"decline", "cancel"} {
		t.Run(action, func(t *testing.T) {
			call := e.startCall(ac, v.ID, "ask", true)
			q := e.nextQuestion(ac, v.ID)
			if r := e.answer(ac, v.ID, q.ID, `{"action": "`+action+`", "values": {"name": "ignored"}}`); r.status != http.StatusNoContent {
				t.Fatalf("answer: %d %s", r.status, r.body)
			}
			if got, content := call.got(t); got != action || content != nil {
				t.Errorf("the server got %s %v, want %s and no content", got, content, action)
			}
		})
	}

	t.Run("URL mode", func(t *testing.T) {
		call := e.startCall(ac, v.ID, "ask_url", true)
		q := e.nextQuestion(ac, v.ID)
		if q.Mode != "url" || q.URL != askURL || q.Form != nil || q.Tool != "ask_url" {
			t.Errorf("question %+v", q)
		}
		if r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"x": "1"}}`); r.status != http.StatusBadRequest || !strings.Contains(r.body, "not to fill in a form") {
			t.Errorf("values for a URL question: %d %s", r.status, r.body)
		}
		if r := e.answer(ac, v.ID, q.ID, `{"action": "accept"}`); r.status != http.StatusNoContent {
			t.Fatalf("continue: %d %s", r.status, r.body)
		}
		if got, _ := call.got(t); got != "accept" {
			t.Errorf("the server got %s, want accept", got)
		}
	})

	// The server's word that the interaction at the address is complete
	// ends the question as Continue would, with no answer from the page.
	t.Run("URL mode completed by the server", func(t *testing.T) {
		call := e.startCall(ac, v.ID, "ask_url_done", true)
		if got, _ := call.got(t); got != "accept" {
			t.Errorf("the server got %s, want accept", got)
		}
		if _, qs := e.questions(ac, v.ID); len(qs) != 0 {
			t.Errorf("questions still waiting: %+v", qs)
		}
	})

	t.Run("answers that are not answers", func(t *testing.T) {
		call := e.startCall(ac, v.ID, "ask", true)
		q := e.nextQuestion(ac, v.ID)
		for _, c := range []struct {
			body   string
			status int
			says   string
		}{
			{`{"action": "maybe"}`, http.StatusBadRequest, "none of accept, decline, cancel"},
			{`{"action": "accept", "extra": 1}`, http.StatusBadRequest, "extra"},
			{`{"action": "accept", "values": {"name": "` + strings.Repeat("x", viewpage.MaxAnswerBodyBytes) + `"}}`, http.StatusRequestEntityTooLarge, ""},
		} {
			r := e.answer(ac, v.ID, q.ID, c.body)
			if r.status != c.status || !strings.Contains(r.body, c.says) {
				t.Errorf("%.60s: %d %s, want %d saying %q", c.body, r.status, r.body, c.status, c.says)
			}
		}
		r := do(t, ac, http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/questions/"+q.ID, map[string]string{"Content-Type": "text/plain"}, `{"action": "cancel"}`)
		if r.status != http.StatusUnsupportedMediaType {
			t.Errorf("text/plain answer: %d", r.status)
		}
		r = do(t, ac, http.MethodPost, e.base+"/api/mcp-apps/"+v.ID+"/questions/"+q.ID, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, `{"action": "cancel"}`)
		if r.status != http.StatusForbidden {
			t.Errorf("cross-site answer: %d", r.status)
		}
		// The view's frames are cross-site to the page: they cannot read
		// the questions either, even with the person's cookie.
		r = do(t, ac, http.MethodGet, e.base+"/api/mcp-apps/"+v.ID+"/questions", map[string]string{"Sec-Fetch-Site": "cross-site"}, "")
		if r.status != http.StatusForbidden || strings.Contains(r.body, q.ID) {
			t.Errorf("cross-site list: %d %s", r.status, r.body)
		}
		if r := e.answer(ac, v.ID, q.ID, `{"action": "cancel"}`); r.status != http.StatusNoContent {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
		if got, _ := call.got(t); got != "cancel" {
			t.Errorf("the server got %s, want cancel", got)
		}
	})

	// A page that does not show questions (the playground's) does not
	// say so: its call's question is declined at once, as before.
	t.Run("a call without the page's questions is declined", func(t *testing.T) {
		if got, _ := e.startCall(ac, v.ID, "ask", false).got(t); got != "decline" {
			t.Errorf("the server got %s, want decline", got)
		}
	})
}

// Only the person whose call asked sees and answers the question: on a
// view that Alice and Bob may both use (a run without a person), Bob's
// list is empty and his answer to Alice's question is 404, as for an
// unknown id; another tenant is told there is no such view; on Alice's own
// view Bob is refused outright.
func TestQuestionIsTheCallersOnly(t *testing.T) {
	e := newAskEnv(t, envOptions{})
	shared := e.run(nil, "/ask_view {}")
	own := e.run(alice(), "/ask_view {}")
	ac, bc, mc := e.client(alice()), e.client(bob()), e.client(mallory())

	call := e.startCall(ac, shared.ID, "ask", true)
	q := e.nextQuestion(ac, shared.ID)
	if status, qs := e.questions(bc, shared.ID); status != http.StatusOK || len(qs) != 0 {
		t.Errorf("Bob's list: %d %+v, want 200 and none", status, qs)
	}
	unknown := e.answer(bc, shared.ID, "NOSUCHQUESTION", `{"action": "accept", "values": {"name": "Bob", "count": 1}}`)
	r := e.answer(bc, shared.ID, q.ID, `{"action": "accept", "values": {"name": "Bob", "count": 1}}`)
	if r.status != http.StatusNotFound || r.body != unknown.body {
		t.Errorf("Bob's answer: %d %s, want what an unknown id gets: %d %s", r.status, r.body, unknown.status, unknown.body)
	}
	// Alice's question on another view is not found on this one.
	if r := e.answer(ac, own.ID, q.ID, `{"action": "decline"}`); r.status != http.StatusNotFound {
		t.Errorf("Alice's answer on another view: %d %s", r.status, r.body)
	}
	if status, _ := e.questions(mc, shared.ID); status != http.StatusNotFound {
		t.Errorf("another tenant's list: %d, want 404", status)
	}
	if r := e.answer(mc, shared.ID, q.ID, `{"action": "decline"}`); r.status != http.StatusNotFound || strings.Contains(r.body, "question") {
		t.Errorf("another tenant's answer: %d %s, want 404 for the view", r.status, r.body)
	}
	if status, _ := e.questions(e.client(nil), shared.ID); status != http.StatusUnauthorized {
		t.Errorf("not signed in: %d, want 401", status)
	}
	if status, _ := e.questions(bc, own.ID); status != http.StatusForbidden {
		t.Errorf("Bob on Alice's own view: %d, want 403", status)
	}
	// Alice's question is still hers to answer.
	if _, qs := e.questions(ac, shared.ID); len(qs) != 1 || qs[0].ID != q.ID {
		t.Fatalf("Alice's list: %+v", qs)
	}
	if r := e.answer(ac, shared.ID, q.ID, `{"action": "accept", "values": {"name": "Alice", "count": 4}}`); r.status != http.StatusNoContent {
		t.Fatalf("Alice's answer: %d %s", r.status, r.body)
	}
	if action, content := call.got(t); action != "accept" || content["name"] != "Alice" {
		t.Errorf("the server got %s %v", action, content)
	}
}

// A question nobody answers ends at the agent's time limit as a cancel:
// the call returns, the question is gone from the list, and an answer
// after it is 404.
func TestQuestionTimeLimit(t *testing.T) {
	e := newAskEnv(t, envOptions{elicitWait: time.Second})
	v := e.run(alice(), "/ask_view {}")
	ac := e.client(alice())
	call := e.startCall(ac, v.ID, "ask", true)
	q := e.nextQuestion(ac, v.ID)
	if wait := time.Until(q.Deadline); wait > 2*time.Second {
		t.Errorf("deadline %v from now, want about a second", wait)
	}
	if action, _ := call.got(t); action != "cancel" {
		t.Errorf("the server got %s, want cancel", action)
	}
	if _, qs := e.questions(ac, v.ID); len(qs) != 0 {
		t.Errorf("questions after the time limit: %+v", qs)
	}
	if r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"name": "Late", "count": 1}}`); r.status != http.StatusNotFound {
		t.Errorf("a late answer: %d %s", r.status, r.body)
	}
}

// The person's time to answer does not count against the server's write
// timeout: with a WriteTimeout of one second, an answer given after
// longer still reaches the view.
func TestQuestionOutlastsWriteTimeout(t *testing.T) {
	e := newAskEnv(t, envOptions{writeTimeout: time.Second})
	v := e.run(alice(), "/ask_view {}")
	ac := e.client(alice())
	call := e.startCall(ac, v.ID, "ask", true)
	q := e.nextQuestion(ac, v.ID)
	time.Sleep(1500 * time.Millisecond)
	if r := e.answer(ac, v.ID, q.ID, `{"action": "accept", "values": {"name": "Slow", "count": 1}}`); r.status != http.StatusNoContent {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	if action, content := call.got(t); action != "accept" || content["name"] != "Slow" {
		t.Errorf("the server got %s %v", action, content)
	}
}

// At most MaxPendingQuestions questions wait for one person: the server
// that asks more during calls still under way gets a cancel for the
// extra one at once.
func TestQuestionsPerPersonBounded(t *testing.T) {
	e := newAskEnv(t, envOptions{})
	v := e.run(alice(), "/ask_view {}")
	ac := e.client(alice())
	var calls []askCall
	for range viewpage.MaxPendingQuestions {
		calls = append(calls, e.startCall(ac, v.ID, "ask", true))
	}
	deadline := time.Now().Add(30 * time.Second)
	var qs []viewpage.Question
	for len(qs) < viewpage.MaxPendingQuestions && time.Now().Before(deadline) {
		_, qs = e.questions(ac, v.ID)
		time.Sleep(20 * time.Millisecond)
	}
	if len(qs) != viewpage.MaxPendingQuestions {
		t.Fatalf("%d questions wait, want %d", len(qs), viewpage.MaxPendingQuestions)
	}
	if action, _ := e.startCall(ac, v.ID, "ask", true).got(t); action != "cancel" {
		t.Errorf("the extra question: the server got %s, want cancel", action)
	}
	if !strings.Contains(e.logText(), "too many questions wait") {
		t.Errorf("the refusal is not logged:\n%s", e.logText())
	}
	var wg sync.WaitGroup
	for _, q := range qs {
		wg.Go(func() {
			if r := e.answer(ac, v.ID, q.ID, `{"action": "decline"}`); r.status != http.StatusNoContent {
				t.Errorf("decline %s: %d %s", q.ID, r.status, r.body)
			}
		})
	}
	wg.Wait()
	for _, c := range calls {
		if action, _ := c.got(t); action != "decline" {
			t.Errorf("the server got %s, want decline", action)
		}
	}
}

// mapsEqual compares two decoded JSON objects.
func mapsEqual(a, b map[string]any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
