package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/agent"
)

// fakeChat is a Chat Completions server on loopback that answers in one
// piece or streams, as OpenAI's API reference describes the wire ("Create
// chat completion" with stream: true, "The chat completion chunk object",
// and the "Streaming API responses" guide; the same shapes are the
// ChatCompletionChunk types of openai-go): Content-Type text/event-stream,
// each chunk one event `data: {json}` ended by a blank line, holding
// choices[0].delta with content, or tool_calls[i] (index always; id, type
// and function.name in a call's first delta; function.arguments in
// pieces), finish_reason null until the last chunk, which gives "stop" or
// "tool_calls"; then `data: [DONE]`. Errors are an HTTP error status with
// {"error": {"message", "type", "code"}}.
type fakeChat struct {
	t    *testing.T
	path string // the route; "/v1/chat/completions" when empty
	// handle answers the n-th request (from 0).
	handle func(w http.ResponseWriter, r *http.Request, n int, body map[string]any)

	mu   sync.Mutex
	reqs []fakeRequest
}

// fakeRequest is what fakeChat saw of one request.
type fakeRequest struct {
	at     time.Time
	body   map[string]any
	header http.Header
	query  string
}

func (f *fakeChat) start() *httptest.Server {
	path := f.path
	if path == "" {
		path = "/v1/chat/completions"
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			writeChatJSON(w, http.StatusNotFound, chatError("no such route", "invalid_request_error", "not_found"))
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			f.t.Errorf("request body is not JSON: %v", err)
		}
		f.mu.Lock()
		n := len(f.reqs)
		f.reqs = append(f.reqs, fakeRequest{at: time.Now(), body: body, header: r.Header.Clone(), query: r.URL.RawQuery})
		f.mu.Unlock()
		f.handle(w, r, n, body)
	}))
	f.t.Cleanup(srv.Close)
	return srv
}

func (f *fakeChat) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.reqs...)
}

func writeChatJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func chatError(message, typ, code string) map[string]any {
	return map[string]any{"error": map[string]any{"message": message, "type": typ, "code": code}}
}

// answer is a whole (not streamed) answer with text.
func answer(text string) map[string]any {
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}}}
}

// chunk is one chat.completion.chunk with choices[0].delta and its
// finish_reason ("" for null).
func chunk(delta map[string]any, finish string) map[string]any {
	var reason any
	if finish != "" {
		reason = finish
	}
	return map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": reason}}}
}

// textChunks is a streamed answer: the role, each piece of content, then
// the chunk that finishes it.
func textChunks(pieces ...string) []map[string]any {
	out := []map[string]any{chunk(map[string]any{"role": "assistant", "content": ""}, "")}
	for _, p := range pieces {
		out = append(out, chunk(map[string]any{"content": p}, ""))
	}
	return append(out, chunk(map[string]any{}, "stop"))
}

// toolDelta is a delta of the tool call at index: id and name in its
// first delta, a piece of its arguments in each.
func toolDelta(index int, id, name, args string) map[string]any {
	tc := map[string]any{"index": index, "function": map[string]any{"arguments": args}}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
		tc["function"].(map[string]any)["name"] = name
	}
	return chunk(map[string]any{"tool_calls": []any{tc}}, "")
}

// startEvents begins a stream of server-sent events.
func startEvents(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// writeEvent writes one chunk as its event and sends it at once.
func writeEvent(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// writeStream writes a whole stream: its chunks, then data: [DONE].
func writeStream(w http.ResponseWriter, chunks []map[string]any) {
	startEvents(w)
	for _, c := range chunks {
		writeEvent(w, c)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// demoTools are the tools offered in these tests, as the catalogue gives them.
var demoTools = []agent.ToolSpec{
	{Name: "demo/lookup_customer", Server: "demo", Tool: "lookup_customer", Title: "Look up a customer",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"customer": map[string]any{"type": "string"}}, "required": []any{"customer"}}},
	{Name: "demo/sales_report", Server: "demo", Tool: "sales_report", Title: "Sales report"},
}

func newOpenAIModel(t testing.TB, baseURL string, cfg agent.ModelConfig, o agent.OpenAIOptions) *agent.OpenAIModel {
	t.Helper()
	cfg.Kind = agent.ModelOpenAI
	if cfg.BaseURL == "" {
		cfg.BaseURL = baseURL + "/v1"
	}
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	m, err := agent.NewOpenAIModel(cfg, o)
	if err != nil {
		t.Fatalf("NewOpenAIModel: %v", err)
	}
	return m
}

func ask(text string) agent.Turn {
	return agent.Turn{AgentName: "Assistant", Tools: demoTools, Messages: []agent.Message{{Role: agent.RoleUser, Text: text}}}
}

// The streamed answer is heard piece by piece as the server writes it (the
// server holds the rest back until the first piece has been heard), in
// order; the pieces join into the Message's Text, and the request asked
// for a stream.
func TestOpenAIModelStreamsTheAnswer(t *testing.T) {
	pieces := []string{"Contoso", " Ltd is", " an Enterprise", " customer;", " é ünïcode", " and more."}
	firstHeard := make(chan struct{})
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		chunks := textChunks(pieces...)
		startEvents(w)
		writeEvent(w, chunks[0])
		writeEvent(w, chunks[1])
		select {
		case <-firstHeard:
		case <-time.After(10 * time.Second):
			t.Errorf("the first piece was not heard before the rest of the stream was written")
		}
		for _, c := range chunks[2:] {
			writeEvent(w, c)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}}
	srv := f.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{Key: "sk-test"})

	var heard []string
	turn := ask("Tell me about Contoso")
	turn.Stream = func(d string) {
		if len(heard) == 0 {
			close(firstHeard)
		}
		heard = append(heard, d)
	}
	msg, err := m.Next(context.Background(), turn)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if !slicesEqual(heard, pieces) {
		t.Errorf("heard %q, want %q", heard, pieces)
	}
	if msg.Text != strings.Join(heard, "") || len(msg.ToolCalls) != 0 {
		t.Errorf("message %+v; the pieces join into %q", msg, strings.Join(heard, ""))
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].body["stream"] != true || reqs[0].header.Get("Authorization") != "Bearer sk-test" {
		t.Errorf("requests: %d, stream %v, Authorization %q", len(reqs), reqs[0].body["stream"], reqs[0].header.Get("Authorization"))
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Streamed tool calls are assembled by their index, their arguments
// concatenated in order, even when the deltas of two calls interleave;
// they come back as several ToolCalls named as offered, in index order,
// and nothing of them is heard.
func TestOpenAIModelStreamedToolCallsAssemble(t *testing.T) {
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, body map[string]any) {
		if _, set := body["parallel_tool_calls"]; set {
			t.Errorf("parallel_tool_calls was set: %v", body["parallel_tool_calls"])
		}
		writeStream(w, []map[string]any{
			chunk(map[string]any{"role": "assistant", "content": nil}, ""),
			toolDelta(0, "call_1", "demo__lookup_customer", ""),
			toolDelta(0, "", "", `{"cust`),
			toolDelta(1, "call_2", "demo__sales_report", ""),
			toolDelta(0, "", "", `omer": "Cont`),
			toolDelta(1, "", "", `{}`),
			toolDelta(0, "", "", `oso"}`),
			chunk(map[string]any{}, "tool_calls"),
		})
	}}
	srv := f.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
	turn := ask("Tell me about Contoso and show the sales")
	var heard []string
	turn.Stream = func(d string) { heard = append(heard, d) }
	msg, err := m.Next(context.Background(), turn)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if len(heard) != 0 || msg.Text != "" {
		t.Errorf("heard %q, text %q: a reply of tool calls has no answer to hear", heard, msg.Text)
	}
	want := []agent.ToolCall{
		{ID: "call_1", Name: "demo/lookup_customer", Arguments: json.RawMessage(`{"customer": "Contoso"}`)},
		{ID: "call_2", Name: "demo/sales_report", Arguments: json.RawMessage(`{}`)},
	}
	if len(msg.ToolCalls) != len(want) {
		t.Fatalf("tool calls %+v, want %+v", msg.ToolCalls, want)
	}
	for i, c := range msg.ToolCalls {
		if c.ID != want[i].ID || c.Name != want[i].Name || string(c.Arguments) != string(want[i].Arguments) {
			t.Errorf("tool call %d = {%s %s %s}, want {%s %s %s}", i, c.ID, c.Name, c.Arguments, want[i].ID, want[i].Name, want[i].Arguments)
		}
	}
}

// A 429 with Retry-After: 1 is tried again after that second, and the run
// gets the answer of the second attempt.
func TestOpenAIModelRetriesAfterRetryAfter(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, n int, _ map[string]any) {
				if n == 0 {
					w.Header().Set("Retry-After", "1")
					writeChatJSON(w, http.StatusTooManyRequests, chatError("Rate limit reached for requests", "requests", "rate_limit_exceeded"))
					return
				}
				if stream {
					writeStream(w, textChunks("after", " the wait"))
					return
				}
				writeChatJSON(w, http.StatusOK, answer("after the wait"))
			}}
			srv := f.start()
			m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			turn := ask("hi")
			var heard strings.Builder
			if stream {
				turn.Stream = func(d string) { heard.WriteString(d) }
			}
			msg, err := m.Next(ctx, turn)
			if err != nil || msg.Text != "after the wait" {
				t.Fatalf("Next: %q, %v", msg.Text, err)
			}
			if stream && heard.String() != "after the wait" {
				t.Errorf("heard %q", heard.String())
			}
			reqs := f.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			if gap := reqs[1].at.Sub(reqs[0].at); gap < 900*time.Millisecond {
				t.Errorf("tried again after %v, before the second Retry-After asked for", gap)
			}
			// The body is let go of once an attempt has its answer; the
			// attempt after it is sent the whole body again.
			if reqs[1].body == nil || fmt.Sprint(reqs[1].body) != fmt.Sprint(reqs[0].body) {
				t.Errorf("the retry's body %v, want the first attempt's %v", reqs[1].body, reqs[0].body)
			}
			if got, want := reqs[0].body["stream"], any(stream); stream && got != want || !stream && got != nil {
				t.Errorf("stream = %v, want %v", got, stream)
			}
		})
	}
}

// A retry whose wait would pass the run's deadline is not waited for: the
// run ends at once with the answer that asked for it (its status and
// message), not with the deadline; and an error answer tried twice in
// vain is the error after three attempts.
func TestOpenAIModelDoesNotWaitPastTheDeadline(t *testing.T) {
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		w.Header().Set("Retry-After", "30")
		writeChatJSON(w, http.StatusTooManyRequests, chatError("Rate limit reached for requests", "requests", "rate_limit_exceeded"))
	}}
	srv := f.start()
	st := openStore(t)
	s := newService(t, openaiConfig(srv.URL, agent.ModelConfig{}), agent.Options{Store: st, AppsEnabled: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := s.Run(ctx, agent.Request{Person: alice, Text: "hi"})
	if !errors.Is(err, agent.ErrModel) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrModel and not the deadline", err)
	}
	for _, part := range []string{"HTTP 429", "Rate limit reached", "rate_limit_exceeded", "after the run's deadline"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error %q lacks %q", err, part)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// Without a deadline near, a 503 is tried twice more, then is the error.
	g := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		w.Header().Set("Retry-After-Ms", "10")
		writeChatJSON(w, http.StatusServiceUnavailable, chatError("The engine is currently overloaded", "server_error", "overloaded"))
	}}
	srv = g.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
	_, err = m.Next(context.Background(), ask("hi"))
	if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "currently overloaded") {
		t.Errorf("err = %v", err)
	}
	if n := len(g.requests()); n != 3 {
		t.Errorf("%d requests, want 3 (two retries)", n)
	}
}

// A stream that breaks off, ends before a chunk finished it, or sends an
// error event ({"error": {...}} as data, which the official client reads
// as the stream's failure) is an error wrapping ErrModel, not a shorter
// answer.
func TestOpenAIModelStreamCutMidway(t *testing.T) {
	for _, c := range []struct {
		name, want string
		cut        func(w http.ResponseWriter)
	}{
		{"connection closed", "broke off", func(w http.ResponseWriter) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}},
		{"ended without finish_reason", "ended before it was complete", func(w http.ResponseWriter) {}},
		{"error event", "the stream from 127.0.0.1", func(w http.ResponseWriter) {
			writeEvent(w, chatError("The server had an error while processing your request.", "server_error", "server_error"))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
				startEvents(w)
				for _, ch := range textChunks("Contoso", " Ltd is")[:2] {
					writeEvent(w, ch)
				}
				c.cut(w)
			}}
			srv := f.start()
			m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
			turn := ask("hi")
			turn.Stream = func(string) {}
			msg, err := m.Next(context.Background(), turn)
			if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrModel saying %q", err, c.want)
			}
			if c.name == "error event" && !strings.Contains(err.Error(), "reported an error: The server had an error while processing your request. (server_error)") {
				t.Errorf("err = %v, want the event's own message", err)
			}
			if msg.Text != "" {
				t.Errorf("a cut stream gave the answer %q", msg.Text)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests: a stream cut after it began is not sent again", n)
			}
		})
	}
}

// What the model's server sends is bounded: a whole answer past 8 MiB, one
// server-sent event past 1 MiB (its data lines never ended by a blank
// line) and a stream past 32 MiB are each cut there, as an error wrapping
// ErrModel, not read on without end.
func TestOpenAIModelBoundsHugeAnswers(t *testing.T) {
	const line = 64 << 10
	pad := strings.Repeat("x", line)
	for _, c := range []struct {
		name, want string
		stream     bool
		write      func(w http.ResponseWriter)
	}{
		{"whole answer", "larger than 8 MiB", false, func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"`)
			for range (64 << 20) / line { // 64 MiB at most, or until the client hangs up
				if _, err := fmt.Fprint(w, pad); err != nil {
					return
				}
			}
		}},
		{"one event", "one event of the stream is larger than 1 MiB", true, func(w http.ResponseWriter) {
			startEvents(w)
			for range (64 << 20) / line {
				if _, err := fmt.Fprintf(w, "data: %s\n", pad); err != nil {
					return
				}
			}
		}},
		{"whole stream", "the stream is larger than 32 MiB", true, func(w http.ResponseWriter) {
			startEvents(w)
			ev, _ := json.Marshal(chunk(map[string]any{"content": pad}, ""))
			for range (64 << 20) / len(ev) {
				if _, err := fmt.Fprintf(w, "data: %s\n\n", ev); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) { c.write(w) }}
			srv := f.start()
			m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
			turn := ask("hi")
			if c.stream {
				turn.Stream = func(string) {}
			}
			_, err := m.Next(context.Background(), turn)
			if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want ErrModel saying %q", err, c.want)
			}
		})
	}
}

// Azure OpenAI streams too: the deployment's path, api-version on the
// query, the key in api-key and no Authorization.
func TestOpenAIModelAzureStreams(t *testing.T) {
	f := &fakeChat{t: t, path: "/openai/deployments/gpt4o/chat/completions", handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		writeStream(w, textChunks("hello", " from Azure"))
	}}
	srv := f.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{BaseURL: srv.URL + "/openai/deployments/gpt4o", Model: "gpt4o", APIVersion: "2024-10-21"},
		agent.OpenAIOptions{Key: "az-secret"})
	turn := ask("hi")
	var heard strings.Builder
	turn.Stream = func(d string) { heard.WriteString(d) }
	msg, err := m.Next(context.Background(), turn)
	if err != nil || msg.Text != "hello from Azure" || heard.String() != msg.Text {
		t.Fatalf("Next: %q (heard %q), %v", msg.Text, heard.String(), err)
	}
	r := f.requests()[0]
	if r.query != "api-version=2024-10-21" || r.header.Get("api-key") != "az-secret" || r.header.Get("Authorization") != "" {
		t.Errorf("query %q, api-key %q, Authorization %q", r.query, r.header.Get("api-key"), r.header.Get("Authorization"))
	}
}

// entra: true sends the token Options.ModelToken gives for Azure OpenAI's
// scope as Authorization: Bearer, no key, on each request; neither the
// error nor the logs ever show it, when the endpoint refuses it too.
func TestOpenAIModelEntraToken(t *testing.T) {
	const token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.entra-token-secret"
	f := &fakeChat{t: t, path: "/openai/deployments/gpt4o/chat/completions", handle: func(w http.ResponseWriter, r *http.Request, n int, _ map[string]any) {
		if n == 0 {
			writeChatJSON(w, http.StatusOK, answer("signed in"))
			return
		}
		writeChatJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "PermissionDenied",
			"message": "The principal lacks the required data action Microsoft.CognitiveServices/accounts/OpenAI/deployments/chat/completions/action."}})
	}}
	srv := f.start()
	var mu sync.Mutex
	var scopes []string
	var logs bytes.Buffer
	cfg := openaiConfig(srv.URL, agent.ModelConfig{Model: "gpt4o", APIVersion: "2024-10-21", Entra: true})
	cfg.Agents[0].Model.BaseURL = srv.URL + "/openai/deployments/gpt4o"
	s := newService(t, cfg, agent.Options{Store: openStore(t), AppsEnabled: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Getenv: getenv(map[string]string{"OPENAI_API_KEY": "sk-from-the-environment"}),
		ModelToken: func(ctx context.Context, scope string) (string, error) {
			mu.Lock()
			scopes = append(scopes, scope)
			mu.Unlock()
			return token, nil
		}})
	if ans := run(t, s, "hi"); ans.Text != "signed in" {
		t.Errorf("answer = %q", ans.Text)
	}
	_, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "again"})
	if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "PermissionDenied") {
		t.Errorf("err = %v, want ErrModel with the 401", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.header.Get("Authorization") != "Bearer "+token || r.header.Get("api-key") != "" || r.query != "api-version=2024-10-21" {
			t.Errorf("request %d: Authorization %q, api-key %q, query %q", i, r.header.Get("Authorization"), r.header.Get("api-key"), r.query)
		}
	}
	if len(scopes) != 2 || scopes[0] != agent.CognitiveServicesScope || agent.CognitiveServicesScope != "https://cognitiveservices.azure.com/.default" {
		t.Errorf("tokens asked for %q", scopes)
	}
	if strings.Contains(err.Error(), "entra-token-secret") || strings.Contains(logs.String(), "entra-token-secret") {
		t.Errorf("the token shows in the error or the logs:\n%v\n%s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "PermissionDenied") {
		t.Errorf("the logs lack the failure itself, so the check above proves nothing:\n%s", logs.String())
	}
}

// A token that cannot be had fails the model before any request, with an
// error wrapping ErrModel and the credential's own.
func TestOpenAIModelEntraTokenFailure(t *testing.T) {
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		writeChatJSON(w, http.StatusOK, answer("unreachable"))
	}}
	srv := f.start()
	refused := errors.New("AADSTS7000215: Invalid client secret provided")
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{Entra: true}, agent.OpenAIOptions{
		Token: func(context.Context, string) (string, error) { return "", refused }})
	_, err := m.Next(context.Background(), ask("hi"))
	if !errors.Is(err, agent.ErrModel) || !errors.Is(err, refused) || !strings.Contains(err.Error(), "Entra ID token") {
		t.Errorf("err = %v", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent without a token", n)
	}
}

// entra beside apiKeyEnv is a configuration mistake; entra without a
// credential to ask (Options.ModelToken) stops New with words that say so.
func TestOpenAIModelEntraConfiguration(t *testing.T) {
	_, err := agent.LoadConfig([]byte(`agents:
  - id: a
    model: {kind: openai, model: gpt4o, apiKeyEnv: AZURE_OPENAI_KEY, entra: true}
  - id: b
    model: {kind: builtin, entra: true}
`), nil)
	for _, want := range []string{
		"line 3, column 77: agents[0].model.entra: signs in with an Entra ID token instead of a key; remove apiKeyEnv (or entra)",
		"agents[1].model: baseURL, model, apiKeyEnv, apiVersion and entra are for kind openai",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("mistakes lack %q:\n%v", want, err)
		}
	}
	cfg := openaiConfig("http://127.0.0.1:9", agent.ModelConfig{Entra: true})
	_, err = agent.New(context.Background(), cfg, agent.Options{})
	if err == nil || !strings.Contains(err.Error(), "entra: true") || !strings.Contains(err.Error(), "no credential") {
		t.Errorf("New without ModelToken: %v", err)
	}
}

// ModelConfig.Timeout bounds each attempt, a stream's reading included: a
// server that stops answering is an ErrModel error that says how long was
// waited, and is not tried again.
func TestOpenAIModelTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
				if stream {
					startEvents(w)
					writeEvent(w, textChunks("one")[1])
				}
				select {
				case <-r.Context().Done():
				case <-time.After(10 * time.Second):
				}
			}}
			srv := f.start()
			m := newOpenAIModel(t, srv.URL, agent.ModelConfig{Timeout: "300ms"}, agent.OpenAIOptions{})
			turn := ask("hi")
			if stream {
				turn.Stream = func(string) {}
			}
			_, err := m.Next(context.Background(), turn)
			if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "no complete answer from "+strings.TrimPrefix(srv.URL, "http://")+" within 300ms") {
				t.Errorf("err = %v", err)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

// An error names the endpoint by its host only: a secret in the base
// URL's path never shows.
func TestOpenAIModelErrorsHideTheURL(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	base := closed.URL + "/v1/tenant-secret-path"
	closed.Close()
	m := newOpenAIModel(t, "", agent.ModelConfig{BaseURL: base}, agent.OpenAIOptions{Key: "sk-never-shown"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := m.Next(ctx, ask("hi"))
	if !errors.Is(err, agent.ErrModel) || strings.Contains(err.Error(), "tenant-secret-path") || strings.Contains(err.Error(), "sk-never-shown") {
		t.Errorf("err = %v", err)
	}
	if !strings.Contains(err.Error(), strings.TrimPrefix(closed.URL, "http://")) {
		t.Errorf("err = %v, want the host named", err)
	}
}

// A non-JSON error answer (a proxy's page) is quoted with its status.
func TestOpenAIModelPlainErrorAnswer(t *testing.T) {
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "upstream refused the request")
	}}
	srv := f.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
	_, err := m.Next(context.Background(), ask("hi"))
	if !errors.Is(err, agent.ErrModel) || !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "upstream refused the request") {
		t.Errorf("err = %v", err)
	}
}

// A server that answers a request for a stream in one piece (Content-Type
// application/json) is read as such: the whole text is heard at once.
func TestOpenAIModelStreamRequestAnsweredWhole(t *testing.T) {
	f := &fakeChat{t: t, handle: func(w http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		writeChatJSON(w, http.StatusOK, answer("all at once"))
	}}
	srv := f.start()
	m := newOpenAIModel(t, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
	turn := ask("hi")
	var heard []string
	turn.Stream = func(d string) { heard = append(heard, d) }
	msg, err := m.Next(context.Background(), turn)
	if err != nil || msg.Text != "all at once" || len(heard) != 1 || heard[0] != "all at once" {
		t.Errorf("Next: %q, %v; heard %q", msg.Text, err, heard)
	}
}

// A server that cannot be reached is tried again only while the wait
// before the next attempt ends before the run's deadline: with the
// deadline near, the run ends at once with the failure to connect, not
// with the deadline.
func TestOpenAIModelUnreachableNearTheDeadline(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	m := newOpenAIModel(t, closed.URL, agent.ModelConfig{}, agent.OpenAIOptions{})
	// 300 ms: nearer than the first wait, about half a second.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := m.Next(ctx, ask("hi"))
	if !errors.Is(err, agent.ErrModel) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want the failure to connect", err)
	}
}
