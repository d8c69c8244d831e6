package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
)

// chatServer is an httptest server speaking the Chat Completions API as
// OpenAI's API reference ("Create chat completion", tool calling) describes
// it: POST {base}/chat/completions with model, messages and tools; the
// answer's choices[0].message holds content or tool_calls; errors are
// {"error": {"message", "type", "code"}} with an HTTP error status.
type chatServer struct {
	t       *testing.T
	mu      sync.Mutex
	bodies  []map[string]any
	headers []http.Header
	queries []string
	reply   func(body map[string]any) (int, any)
}

func (c *chatServer) start() *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"no such route"}}`, http.StatusNotFound)
			return
		}
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(data, &body); err != nil {
			c.t.Errorf("request body is not JSON: %v", err)
		}
		c.mu.Lock()
		c.bodies = append(c.bodies, body)
		c.headers = append(c.headers, r.Header.Clone())
		c.queries = append(c.queries, r.URL.RawQuery)
		c.mu.Unlock()
		status, out := c.reply(body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(out)
	}))
	c.t.Cleanup(srv.Close)
	return srv
}

func openaiConfig(baseURL string, model agent.ModelConfig) agent.Config {
	model.Kind = agent.ModelOpenAI
	model.BaseURL = baseURL + "/v1"
	if model.Model == "" {
		model.Model = "gpt-test"
	}
	cfg := agent.DefaultConfig()
	cfg.Agents[0].Model = model
	return cfg
}

func getenv(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

var openAIToolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func messages(body map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range body["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// One round trip: the model asks for two tools, gets their ordinary
// results as tool messages, and answers. Tool names on the wire match the
// API's pattern, app-only tools are not offered, and the view is made
// beside the answer.
func TestOpenAIModelToolCallRoundTrip(t *testing.T) {
	cs := &chatServer{t: t}
	cs.reply = func(body map[string]any) (int, any) {
		names := map[string]string{}
		for _, tl := range body["tools"].([]any) {
			name := tl.(map[string]any)["function"].(map[string]any)["name"].(string)
			if !openAIToolName.MatchString(name) {
				t.Errorf("tool name %q does not match the API's pattern", name)
			}
			for _, short := range []string{"lookup_customer", "sales_report", "refresh_sales", "submit_feedback"} {
				if strings.HasSuffix(name, short) {
					names[short] = name
				}
			}
		}
		if names["refresh_sales"] != "" || names["submit_feedback"] != "" {
			t.Errorf("app-only tools offered to the model: %v", names)
		}
		msgs := messages(body)
		last := msgs[len(msgs)-1]
		if last["role"] == "user" {
			return 200, map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion",
				"choices": []any{map[string]any{
					"index": 0, "finish_reason": "tool_calls",
					"message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
						map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": names["lookup_customer"], "arguments": `{"customer":"Contoso"}`}},
						map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": names["sales_report"], "arguments": `{}`}},
					}},
				}},
			}
		}
		// Second round: the assistant's calls and both tool messages are sent back.
		var tools []map[string]any
		for _, m := range msgs {
			if m["role"] == "tool" {
				tools = append(tools, m)
			}
		}
		if len(tools) != 2 || tools[0]["tool_call_id"] != "call_1" || tools[1]["tool_call_id"] != "call_2" {
			t.Errorf("tool messages = %v", tools)
		} else {
			if !strings.Contains(tools[0]["content"].(string), "Contoso Ltd") {
				t.Errorf("lookup result = %v", tools[0]["content"])
			}
			if c := tools[1]["content"].(string); strings.Contains(c, "<") || !strings.Contains(c, "Sales report") {
				t.Errorf("the model was sent %q for sales_report (HTML, or not the ordinary result)", c)
			}
		}
		return 200, map[string]any{"choices": []any{map[string]any{
			"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": "Contoso Ltd is an Enterprise customer; the chart shows the quarter."},
		}}}
	}
	srv := cs.start()
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{APIKeyEnv: "TEST_OPENAI_KEY"}),
		agent.Options{Store: openStore(t), AppsEnabled: true, Getenv: getenv(map[string]string{"TEST_OPENAI_KEY": "sk-test"})})

	ans := run(t, s, "Tell me about Contoso and show the sales")
	if ans.Text != "Contoso Ltd is an Enterprise customer; the chart shows the quarter." {
		t.Errorf("answer = %q", ans.Text)
	}
	if len(ans.Views) != 1 || ans.Views[0].Tool != "sales_report" {
		t.Errorf("views = %+v", ans.Views)
	}
	if len(cs.bodies) != 2 {
		t.Fatalf("requests = %d, want 2", len(cs.bodies))
	}
	if got := cs.headers[0].Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	// The client's platform headers are not sent; its retry count is.
	for name := range cs.headers[0] {
		if strings.HasPrefix(name, "X-Stainless-") && name != "X-Stainless-Retry-Count" && name != "X-Stainless-Timeout" {
			t.Errorf("header %s: %q was sent", name, cs.headers[0].Get(name))
		}
	}
	if cs.headers[0].Get("X-Stainless-Retry-Count") != "0" {
		t.Errorf("X-Stainless-Retry-Count = %q, want 0", cs.headers[0].Get("X-Stainless-Retry-Count"))
	}
	if cs.bodies[0]["model"] != "gpt-test" {
		t.Errorf("model = %v", cs.bodies[0]["model"])
	}
}

// Azure OpenAI: the key goes in api-key and api-version is on the query.
func TestOpenAIModelAzureHeaders(t *testing.T) {
	cs := &chatServer{t: t, reply: func(map[string]any) (int, any) {
		return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "hello"}}}}
	}}
	srv := cs.start()
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{APIKeyEnv: "AZ_KEY", APIVersion: "2024-10-21"}),
		agent.Options{Store: openStore(t), AppsEnabled: true, Getenv: getenv(map[string]string{"AZ_KEY": "az-secret"})})
	if ans := run(t, s, "hi"); ans.Text != "hello" {
		t.Errorf("answer = %q", ans.Text)
	}
	if h := cs.headers[0]; h.Get("api-key") != "az-secret" || h.Get("Authorization") != "" {
		t.Errorf("headers: api-key %q, Authorization %q", h.Get("api-key"), h.Get("Authorization"))
	}
	if cs.queries[0] != "api-version=2024-10-21" {
		t.Errorf("query = %q", cs.queries[0])
	}
}

// An HTTP error from the API is a clear run error wrapping ErrModel with the
// status and the API's message; the run is still stored.
func TestOpenAIModelHTTPErrors(t *testing.T) {
	for _, c := range []struct {
		status  int
		message string
		code    string
	}{
		{401, "Incorrect API key provided: sk-wrong.", "invalid_api_key"},
		{500, "The server had an error while processing your request.", "server_error"},
	} {
		cs := &chatServer{t: t, reply: func(map[string]any) (int, any) {
			return c.status, map[string]any{"error": map[string]any{"message": c.message, "type": "invalid_request_error", "code": c.code}}
		}}
		srv := cs.start()
		st := openStore(t)
		s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{}), agent.Options{Store: st, AppsEnabled: true})
		ans, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "hi"})
		if !errors.Is(err, agent.ErrModel) {
			t.Fatalf("HTTP %d: err = %v, want ErrModel", c.status, err)
		}
		for _, part := range []string{"HTTP " + strconv.Itoa(c.status), c.message, c.code} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("HTTP %d: error %q lacks %q", c.status, err, part)
			}
		}
		if ans.Text == "" || !hasNote(ans.Notes, "the model could not answer (ref ") || hasNote(ans.Notes, c.message) {
			t.Errorf("answer after the failure: %q, notes %q", ans.Text, ans.Notes)
		}
		for _, n := range ans.Notes {
			if ref := refIn(n); ref != "" && !strings.Contains(problem(t, st, ans.RunID, ref).Detail, c.message) {
				t.Errorf("HTTP %d: the detail under %s lacks the model's answer %q", c.status, ref, c.message)
			}
		}
		if _, err := st.GetRun(context.Background(), ans.RunID); err != nil {
			t.Errorf("the failed run was not stored: %v", err)
		}
	}
}

// The rounds of tool calls are bounded: after maxToolRounds the model is
// asked once more with tool_choice "none", and the notes say so.
func TestOpenAIModelToolRoundsAreBounded(t *testing.T) {
	cs := &chatServer{t: t}
	cs.reply = func(body map[string]any) (int, any) {
		if body["tool_choice"] == "none" {
			return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "enough"}}}}
		}
		return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
				"function": map[string]any{"name": "demo__lookup_customer", "arguments": `{"customer":"C-1002"}`}}},
		}}}}
	}
	srv := cs.start()
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{MaxToolRounds: 2}), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "loop forever")
	if ans.Text != "enough" || len(cs.bodies) != 3 {
		t.Errorf("answer %q after %d requests, want \"enough\" after 3", ans.Text, len(cs.bodies))
	}
	if cs.bodies[2]["tool_choice"] != "none" || cs.bodies[1]["tool_choice"] != "auto" {
		t.Errorf("tool_choice: %v, %v", cs.bodies[1]["tool_choice"], cs.bodies[2]["tool_choice"])
	}
}

// A run cancelled while the model is answering (the bot shutting down, the
// person gone) ends with an error that says both: the model failed, and
// the context was cancelled. What the run did before is still recorded:
// the tool call it made is in the audit log, and the run is stored.
func TestOpenAIModelCancelledRun(t *testing.T) {
	arrived := make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the server notices a closed connection only after the body
		if requests.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
				"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
					"function": map[string]any{"name": "demo__lookup_customer", "arguments": `{"customer":"C-1002"}`}}},
			}}}})
			return
		}
		close(arrived)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	st := openStore(t)
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{}), agent.Options{Store: st, AppsEnabled: true})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	ans, err := s.Run(ctx, agent.Request{Person: alice, Text: "hi"})
	if !errors.Is(err, agent.ErrModel) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want ErrModel and context.Canceled", err)
	}
	if _, err := st.GetRun(context.Background(), ans.RunID); err != nil {
		t.Errorf("the cancelled run was not stored: %v", err)
	}
	if recs := audit(t, st, agent.AuditToolCall); len(recs) != 1 || field(recs[0], "tool") != "lookup_customer" {
		t.Errorf("the tool call of the cancelled run is not audited: %+v", recs)
	}
}

// A reply asking for many tool calls at once runs only the first
// MaxToolCallsPerRound; every call still gets its tool message, as the API
// requires, and the notes say so.
func TestOpenAIModelToolCallsPerRoundAreBounded(t *testing.T) {
	const asked = agent.MaxToolCallsPerRound + 9
	cs := &chatServer{t: t}
	cs.reply = func(body map[string]any) (int, any) {
		msgs := messages(body)
		if msgs[len(msgs)-1]["role"] == "user" {
			var calls []any
			for i := range asked {
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": "demo__lookup_customer", "arguments": `{"customer":"C-1002"}`}})
			}
			return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "tool_calls": calls}}}}
		}
		answered := 0
		for _, m := range msgs {
			if m["role"] == "tool" {
				answered++
			}
		}
		if answered != asked {
			t.Errorf("%d tool messages for %d calls", answered, asked)
		}
		return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "done"}}}}
	}
	srv := cs.start()
	st := openStore(t)
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{}), agent.Options{Store: st, AppsEnabled: true})
	ans := run(t, s, "everything")
	if ans.Text != "done" || !hasNote(ans.Notes, "only the first") {
		t.Errorf("answer %q, notes %q", ans.Text, ans.Notes)
	}
	if n := len(audit(t, st, agent.AuditToolCall)); n != agent.MaxToolCallsPerRound {
		t.Errorf("%d tool calls run, want %d", n, agent.MaxToolCallsPerRound)
	}
}

// A result of megabytes reaches the model cut to a bounded size that says
// so, rather than making a request the model cannot take.
func TestOpenAIModelReadsABoundedResult(t *testing.T) {
	var toolMsg string
	cs := &chatServer{t: t}
	cs.reply = func(body map[string]any) (int, any) {
		msgs := messages(body)
		last := msgs[len(msgs)-1]
		if last["role"] == "user" {
			return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{
				"role": "assistant", "tool_calls": []any{map[string]any{"id": "c", "type": "function",
					"function": map[string]any{"name": "evil__huge_result", "arguments": `{}`}}},
			}}}}
		}
		toolMsg, _ = last["content"].(string)
		return 200, map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": "read"}}}}
	}
	srv := cs.start()
	cfg := hostileConfig()
	cfg.Agents[0].Model = agent.ModelConfig{Kind: agent.ModelOpenAI, BaseURL: srv.URL + "/v1", Model: "gpt-test"}
	none := func(context.Context, string, mcp.Request) (mcp.Result, bool) { return nil, false }
	s := newService(t, cfg, agent.Options{Store: openStore(t), AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": hostileServer(none)}})
	if ans := run(t, s, "go"); ans.Text != "read" {
		t.Fatalf("answer %q, notes %q", ans.Text, ans.Notes)
	}
	if !strings.HasPrefix(toolMsg, "start rrr") || len(toolMsg) > 300<<10 || !strings.Contains(toolMsg, "cut") {
		t.Errorf("the model read %d bytes: %.40q … %.80q", len(toolMsg), toolMsg, toolMsg[max(0, len(toolMsg)-80):])
	}
}
