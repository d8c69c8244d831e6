package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"teamsbot/internal/telemetry"
	"teamsbot/internal/testenv"
)

// otlpReceiver is an OpenTelemetry collector's OTLP/HTTP receiver on
// loopback, as the OTLP specification describes it ("OTLP/HTTP": a POST
// of a protobuf ExportTraceServiceRequest to /v1/traces, answered with an
// ExportTraceServiceResponse). It keeps every body as it came, to search
// the raw bytes, and the spans decoded.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	raw      [][]byte
	headers  []http.Header
	spans    []*tracepb.Span
	resource []*commonpb.KeyValue
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "want a POST of application/x-protobuf to /v1/traces", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		data, err := io.ReadAll(body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(data, &req)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		rc.raw = append(rc.raw, data)
		rc.headers = append(rc.headers, r.Header.Clone())
		for _, rs := range req.GetResourceSpans() {
			rc.resource = rs.GetResource().GetAttributes()
			for _, ss := range rs.GetScopeSpans() {
				rc.spans = append(rc.spans, ss.GetSpans()...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// waitSpan waits up to 20 seconds for a span that match accepts.
func (rc *otlpReceiver) waitSpan(t *testing.T, what string, match func(*tracepb.Span) bool) *tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		rc.mu.Lock()
		i := slices.IndexFunc(rc.spans, match)
		rc.mu.Unlock()
		if i >= 0 {
			rc.mu.Lock()
			defer rc.mu.Unlock()
			return rc.spans[i]
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	t.Fatalf("no span %s reached the collector; it has:\n%s", what, names(rc.spans))
	return nil
}

// names lists spans, one a line, for a failure's message.
func names(spans []*tracepb.Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %s (parent %s) %v\n", hex.EncodeToString(s.SpanId), s.Name, hex.EncodeToString(s.ParentSpanId), attrs(s.Attributes))
	}
	return b.String()
}

// attrs is a span's attributes as strings, for comparing.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.GetBoolValue())
		default:
			m[kv.Key] = v.GetStringValue()
		}
	}
	return m
}

// traceparents records the W3C traceparent header of every request a
// server received.
type traceparents struct {
	mu   sync.Mutex
	seen []string
}

func (tp *traceparents) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.Header.Get("traceparent"); v != "" {
			tp.mu.Lock()
			tp.seen = append(tp.seen, v)
			tp.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// has reports whether a request carried the traceparent of span s (W3C
// Trace Context: version 00, the trace id, the caller's span id, sampled).
func (tp *traceparents) has(s *tracepb.Span) bool {
	want := "00-" + hex.EncodeToString(s.TraceId) + "-" + hex.EncodeToString(s.SpanId) + "-01"
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return slices.Contains(tp.seen, want)
}

// What the person asks, what the model passes the tool, what the tool
// answers and what the model answers: none of them may reach a span. The
// same for every secret the service holds.
const (
	traceQuestion   = "QUESTION-Numbat-6620: how is the account doing?"
	traceArgument   = "ARGUMENT-Quokka-4417"
	traceResult     = "RESULT-Platypus-2231"
	traceAnswer     = "ANSWER-Wombat-9902"
	traceModelKey   = "sk-model-Emu-7781"
	traceMCPToken   = "mcp-token-Kiwi-5501"
	traceCollector  = "collector-Secret-3390"
	tracePersonName = "Ada Lovelace"
)

// traceModel is an OpenAI-compatible model ("Create chat completion",
// POST {base}/chat/completions) that first calls the crm server's
// account_status tool with traceArgument and the demo's sales_report, and
// once it has their results answers traceAnswer; it counts its tokens.
func traceModel(t *testing.T, seen *traceparents) string {
	srv := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		usage := map[string]any{"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366}
		w.Header().Set("Content-Type", "application/json")
		if slices.ContainsFunc(req.Messages, func(m struct {
			Role string `json:"role"`
		}) bool {
			return m.Role == "tool"
		}) {
			json.NewEncoder(w).Encode(map[string]any{"usage": usage, "choices": []any{map[string]any{
				"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": traceAnswer}}}})
			return
		}
		var calls []any
		for _, tl := range req.Tools {
			switch {
			case strings.HasSuffix(tl.Function.Name, "account_status"):
				calls = append(calls, map[string]any{"id": "call_1", "type": "function",
					"function": map[string]any{"name": tl.Function.Name, "arguments": `{"account":"` + traceArgument + `"}`}})
			case strings.HasSuffix(tl.Function.Name, "sales_report"):
				calls = append(calls, map[string]any{"id": "call_2", "type": "function",
					"function": map[string]any{"name": tl.Function.Name, "arguments": "{}"}})
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"usage": usage, "choices": []any{map[string]any{
			"finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}}}})
	})))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// traceMCPServer is an MCP server over Streamable HTTP (go-sdk's own
// handler) with one tool, account_status, whose result is traceResult.
func traceMCPServer(t *testing.T, seen *traceparents, auth *[]string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1.0.0"}, nil)
	type in struct {
		Account string `json:"account"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "account_status", Description: "The status of a customer account."},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: traceResult}}}, nil, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var mu sync.Mutex
	srv := httptest.NewServer(seen.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		*auth = append(*auth, r.Header.Get("Authorization"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestTracesOfOneTurnAndOneViewCall runs the real service with its traces
// exported over OTLP/HTTP to a receiver on loopback, an OpenAI-compatible
// model and an MCP server over Streamable HTTP. One Teams message makes a
// turn whose model calls a tool of each server; the person then opens the
// view, reads it through the view API, and the view calls its app-only
// tool. The spans must form the tree an operator reads (the request, the
// turn, its model calls, tool calls, store commits and Bot Connector
// sends; each view request with its tool call), carry the attributes
// docs/operations.md lists, and hold none of the question, the tool's
// arguments or result, the answer, the person's name, a key or a token:
// the raw bytes the collector received are searched for each. The model
// and the MCP server each received the traceparent of the span that called
// them, and the turn's log lines name its trace.
func TestTracesOfOneTurnAndOneViewCall(t *testing.T) {
	rc := newOTLPReceiver(t)
	connector := newRecordingConnector(t)
	var modelSeen, mcpSeen traceparents
	var mcpAuth []string
	modelURL := traceModel(t, &modelSeen)
	mcpURL := traceMCPServer(t, &mcpSeen, &mcpAuth)
	cfgPath := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(cfgPath, []byte(`agents:
  - id: default
    name: Assistant
    model: {kind: openai, baseURL: "`+modelURL+`", model: test-model, apiKeyEnv: MODEL_KEY}
    servers:
      - name: demo
        builtin: demo
      - name: crm
        url: "`+mcpURL+`"
        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
`), 0o600); err != nil {
		t.Fatal(err)
	}

	const publicBase = "https://teams.example.test"
	m := testenv.StartMockOIDC(t)
	base, logs, stop := startService(t, map[string]string{
		"TICKETIQ_CONFIG":             cfgPath,
		"TICKETIQ_PUBLIC_BASE_URL":    publicBase,
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
		"TICKETIQ_LOG_LEVEL":          "debug",
		"MODEL_KEY":                   traceModelKey,
		"CRM_TOKEN":                   traceMCPToken,
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":  "x-collector-key=" + traceCollector,
		"OTEL_SERVICE_NAME":           "teamsbot-test",
		"OTEL_RESOURCE_ATTRIBUTES":    "deployment.environment.name=test",
		"OTEL_BSP_SCHEDULE_DELAY":     "50",
	})

	viewID := askForView(t, base, connector, publicBase, map[string]any{
		"type":         "message",
		"id":           "act-traced",
		"serviceUrl":   connector.URL,
		"channelId":    "msteams",
		"from":         map[string]any{"id": "29:user", "name": tracePersonName, "aadObjectId": "user-oid-1"},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:personal-traced", "conversationType": "personal", "tenantId": "tenant-1"},
		"channelData":  map[string]any{"tenant": map[string]any{"id": "tenant-1"}},
		"text":         traceQuestion,
	})
	if viewID == "" {
		t.Fatalf("no answer card with an Open button reached the connector; sent %d activities\n%s", connector.count(), logs)
	}
	turn := rc.waitSpan(t, "turn with its outcome", func(s *tracepb.Span) bool {
		return s.Name == "turn" && attrs(s.Attributes)["teamsbot.turn.outcome"] != ""
	})

	// The person opens the view, reads it through the view API, and the
	// view calls its app-only tool.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: publicHost{publicBase, base}}
	m.QueueUser(&testenv.EntraUser{TID: "tenant-1", OID: "user-oid-1", Name: tracePersonName})
	if code, _ := get(t, browser, publicBase+"/mcp-apps/"+viewID); code != http.StatusOK {
		t.Fatalf("view page: %d", code)
	}
	if code, body := get(t, browser, publicBase+"/api/mcp-apps/"+viewID); code != http.StatusOK {
		t.Fatalf("view API: %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, publicBase+"/api/mcp-apps/"+viewID+"/call", strings.NewReader(`{"name":"refresh_sales","arguments":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", publicBase)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	callBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("view call: %d %s", resp.StatusCode, callBody)
	}
	rc.waitSpan(t, "of the view's call", func(s *tracepb.Span) bool { return s.Name == "POST /api/mcp-apps/:id/call" })

	// An orderly stop exports what is left.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	spans, raw, headers, resource := rc.spans, rc.raw, rc.headers, rc.resource
	rc.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[string(s.SpanId)] = s
	}
	children := func(parent *tracepb.Span, name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if bytes.Equal(s.ParentSpanId, parent.SpanId) && bytes.Equal(s.TraceId, parent.TraceId) && strings.HasPrefix(s.Name, name) {
				out = append(out, s)
			}
		}
		return out
	}
	named := func(name string) []*tracepb.Span {
		var out []*tracepb.Span
		for _, s := range spans {
			if s.Name == name {
				out = append(out, s)
			}
		}
		return out
	}
	expect := func(what string, s *tracepb.Span, want map[string]string) {
		t.Helper()
		got := attrs(s.Attributes)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q (all: %v)", what, k, got[k], v, got)
			}
		}
	}

	// The resource: who made the spans.
	res := attrs(resource)
	if res["service.name"] != "teamsbot-test" || res["deployment.environment.name"] != "test" || res["service.version"] != version {
		t.Errorf("resource: %v", res)
	}
	for _, h := range headers {
		if h.Get("X-Collector-Key") != traceCollector {
			t.Errorf("an export came without OTEL_EXPORTER_OTLP_HEADERS' header")
		}
	}

	// The request that brought the message, then its turn.
	request := byID[string(turn.ParentSpanId)]
	if request == nil || request.Name != "POST /api/messages" || request.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Fatalf("the turn's parent is %v, want the request POST /api/messages\n%s", request, names(spans))
	}
	expect("the request", request, map[string]string{"http.request.method": "POST", "http.route": "/api/messages", "http.response.status_code": "202"})
	expect("the turn", turn, map[string]string{
		"teamsbot.activity.type": "message", "teamsbot.conversation.kind": "personal", "teamsbot.tenant.id": "tenant-1",
		"teamsbot.turn.outcome": "answered",
	})
	if attrs(turn.Attributes)["teamsbot.run.id"] == "" {
		t.Errorf("the turn names no run")
	}

	// The model, twice: the tool calls, then the answer.
	models := children(turn, "chat")
	if len(models) != 2 {
		t.Fatalf("%d model calls under the turn, want 2\n%s", len(models), names(spans))
	}
	for i, mc := range models {
		expect("a model call", mc, map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.request.model": "test-model", "teamsbot.model.kind": "openai",
			"teamsbot.model.streamed": "true", "gen_ai.usage.input_tokens": "321", "gen_ai.usage.output_tokens": "45",
		})
		if mc.Name != "chat test-model" || mc.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("model call %d: %q kind %v", i, mc.Name, mc.Kind)
		}
		if !modelSeen.has(mc) {
			t.Errorf("the model did not receive the traceparent of its call %q; it saw %q", hex.EncodeToString(mc.SpanId), modelSeen.seen)
		}
	}
	slices.SortFunc(models, func(a, b *tracepb.Span) int { return int(a.StartTimeUnixNano - b.StartTimeUnixNano) })
	expect("the first model call", models[0], map[string]string{"teamsbot.model.round": "0", "teamsbot.model.tool_calls": "2"})
	expect("the second model call", models[1], map[string]string{"teamsbot.model.round": "1", "teamsbot.model.tool_calls": "0"})

	// Each tool call through the governed path, allowed.
	tools := children(turn, "execute_tool")
	if len(tools) != 2 {
		t.Fatalf("%d tool calls under the turn, want 2\n%s", len(tools), names(spans))
	}
	for _, tc := range tools {
		want := map[string]string{"gen_ai.operation.name": "execute_tool", "mcp.method.name": "tools/call", "teamsbot.tool.caller": "model",
			"teamsbot.tool.decision": "allow", "teamsbot.tool.result": "ok"}
		switch tc.Name {
		case "execute_tool account_status":
			want["teamsbot.mcp.server"], want["gen_ai.tool.name"] = "crm", "account_status"
			if !mcpSeen.has(tc) {
				t.Errorf("the MCP server did not receive the traceparent of the call %q; it saw %q", hex.EncodeToString(tc.SpanId), mcpSeen.seen)
			}
		case "execute_tool sales_report":
			want["teamsbot.mcp.server"], want["gen_ai.tool.name"] = "demo", "sales_report"
		default:
			t.Errorf("a tool call %q", tc.Name)
		}
		expect(tc.Name, tc, want)
	}

	// The run's commit, and the commit of where the answer went.
	if c := children(turn, "store SaveRun"); len(c) != 1 {
		t.Errorf("%d commits of the run under the turn, want 1\n%s", len(c), names(spans))
	} else if op := attrs(c[0].Attributes)["teamsbot.store.operation"]; op != "SaveRun" && op != "SaveRunWithTurn" {
		t.Errorf("the run's commit: operation %q", op)
	}
	if c := children(turn, "store PutDelivery"); len(c) != 1 {
		t.Errorf("%d commits of the delivery under the turn, want 1", len(c))
	}

	// Each call to the Bot Connector that carried an activity (a send or
	// an update; a slow turn's working card is deleted too), the answer's
	// among them, with its status.
	var carried int
	answered := false
	for _, s := range children(turn, "bot connector ") {
		a := attrs(s.Attributes)
		if a["teamsbot.connector.operation"] != "delete" {
			carried++
		}
		answered = answered || a["teamsbot.connector.operation"] == "send" && a["teamsbot.activity.type"] == "message" &&
			a["http.response.status_code"] == "200" && a["teamsbot.connector.retries"] == "0" && a["http.request.method"] == "POST"
	}
	if !answered || carried != connector.count() {
		t.Errorf("%d Bot Connector calls with an activity under the turn for %d activities sent, the answer's among them: %v\n%s", carried, connector.count(), answered, names(spans))
	}

	// The view's requests: each its own trace, by route, never by path.
	for _, route := range []string{"/mcp-apps/:id", "/api/mcp-apps/:id"} {
		got := named("GET " + route)
		if len(got) == 0 {
			t.Errorf("no span of GET %s\n%s", route, names(spans))
			continue
		}
		last := got[len(got)-1]
		expect("GET "+route, last, map[string]string{"http.route": route, "http.response.status_code": "200", "http.request.method": "GET"})
		if len(last.ParentSpanId) != 0 || last.Kind != tracepb.Span_SPAN_KIND_SERVER {
			t.Errorf("GET %s: a parent %x, kind %v; want a root server span", route, last.ParentSpanId, last.Kind)
		}
	}
	call := named("POST /api/mcp-apps/:id/call")
	if len(call) != 1 {
		t.Fatalf("%d spans of the view's call", len(call))
	}
	expect("the view's call", call[0], map[string]string{"http.response.status_code": "200"})
	if vc := children(call[0], "execute_tool refresh_sales"); len(vc) != 1 {
		t.Errorf("the view's call has %d tool calls under it, want 1\n%s", len(vc), names(spans))
	} else {
		expect("the view's tool call", vc[0], map[string]string{"teamsbot.tool.caller": "view", "teamsbot.mcp.server": "demo",
			"teamsbot.tool.decision": "allow", "teamsbot.tool.result": "ok"})
	}

	// Nothing of what was said or done, and no secret, in any export.
	all := bytes.Join(raw, nil)
	for what, s := range map[string]string{
		"the question": "QUESTION-Numbat", "the tool's argument": traceArgument, "the tool's result": traceResult,
		"the answer": traceAnswer, "the model's key": traceModelKey, "the MCP server's token": traceMCPToken,
		"the collector's header": traceCollector, "the person's name": tracePersonName, "the view's id": viewID,
		"the OIDC client secret": m.ClientSecret, "the person's id": "user-oid-1", "the conversation's id": "a:personal-traced",
	} {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("%s (%q) is in the exported spans", what, s)
		}
	}
	// The MCP server got its token: the test would prove nothing otherwise.
	if !slices.Contains(mcpAuth, "Bearer "+traceMCPToken) {
		t.Errorf("the MCP server never received its token: %q", mcpAuth)
	}

	// The turn's log lines name its trace and span.
	tid, sid := hex.EncodeToString(turn.TraceId), hex.EncodeToString(turn.SpanId)
	var done map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] == "turn done" {
			done = l
		}
	}
	if done == nil || done["trace_id"] != tid || done["span_id"] != sid {
		t.Errorf("the turn's last log line %v does not name its trace %s and span %s", done, tid, sid)
	}
	if strings.Contains(logs.String(), traceCollector) {
		t.Errorf("the collector's header is in the logs")
	}
}

// A mistake in an OTEL_ variable is one of the configuration's mistakes:
// reported with the others, by its variable's name, before the service
// starts, and never with a header's value. `teamsbot config` prints the
// variables with the headers redacted.
func TestTraceVariablesAreSettings(t *testing.T) {
	const key = "sk-collector-7812"
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"teamsbot"}, envOf(map[string]string{
		"TICKETIQ_ADDR":               "nowhere",
		"OTEL_TRACES_SAMPLER":         "sometimes",
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS":  "api-key " + key,
	}), io.Discard, &errOut)
	if err == nil || !strings.HasPrefix(err.Error(), "the configuration has 4 mistakes:") {
		t.Fatalf("want four mistakes together, got %v", err)
	}
	for _, want := range []string{"TICKETIQ_ADDR", "OTEL_TRACES_SAMPLER: \"sometimes\"", "OTEL_EXPORTER_OTLP_PROTOCOL: \"grpc\"", "OTEL_EXPORTER_OTLP_HEADERS: pair 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no %q in %v", want, err)
		}
	}
	if strings.Contains(err.Error(), key) {
		t.Errorf("the header's value is shown: %v", err)
	}

	var out bytes.Buffer
	if err := run(context.Background(), []string{"teamsbot", "config"}, envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com",
		"OTEL_EXPORTER_OTLP_HEADERS":  "api-key=" + key,
	}), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`OTEL_EXPORTER_OTLP_ENDPOINT="https://otlp.example.com"	(set)`,
		`OTEL_EXPORTER_OTLP_HEADERS="[redacted]"	(set)`,
		`OTEL_EXPORTER_OTLP_TRACES_HEADERS=""	(unset: OTEL_EXPORTER_OTLP_HEADERS applies)`,
		`OTEL_TRACES_SAMPLER="parentbased_always_on"	(default)`,
		`OTEL_SERVICE_NAME="teamsbot"	(default)`,
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("`teamsbot config` does not print %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), key) {
		t.Errorf("`teamsbot config` prints the header's value")
	}
}

// Traces are off by default: the service starts, says so, and no span
// leaves it; a variable of another program is named as doing nothing.
func TestTracesOffByDefault(t *testing.T) {
	_, logs, stop := startService(t, map[string]string{"OTEL_METRICS_EXPORTER": "prometheus"})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	l := logs.logLine("starting")
	if l == nil || !strings.HasPrefix(fmt.Sprint(l["traces"]), "off: no OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("the start-up line says traces are %v", l["traces"])
	}
	if l := logs.logLine("these OpenTelemetry variables are not read by the service, and do nothing here"); l == nil || fmt.Sprint(l["variables"]) != "[OTEL_METRICS_EXPORTER]" {
		t.Errorf("the unread variable is not named: %v", l)
	}
}

// The OpenTelemetry table of docs/configuration.md is the code's: a row
// for each variable (or pair) in order, with its default.
func TestTraceVariablesTableInDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("| OpenTelemetry variable | meaning | default |"))
	if i < 0 {
		t.Fatal("docs/configuration.md has no table of the OpenTelemetry variables")
	}
	var rows [][]string
	for _, line := range strings.Split(string(doc[i:]), "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		rows = append(rows, splitRow(line))
	}
	vars := telemetry.Variables()
	if len(rows) != len(vars) {
		t.Errorf("%d rows for %d variables", len(rows), len(vars))
	}
	for j, v := range vars {
		if j >= len(rows) {
			break
		}
		var names []string
		for _, m := range regexp.MustCompile("`(OTEL_[A-Z_]+)`").FindAllStringSubmatch(rows[j][0], -1) {
			names = append(names, m[1])
		}
		cell := rows[j][2]
		switch {
		case !slices.Equal(names, v.Names):
			t.Errorf("row %d names %v, the code %v", j+1, names, v.Names)
		case v.Default != "" && !strings.HasPrefix(cell, "`"+v.Default+"`"):
			t.Errorf("%s: the default %q, the code `%s`", v.Name(), cell, v.Default)
		case v.Default == "" && v.Unset != "" && !strings.HasPrefix(cell, v.Unset):
			t.Errorf("%s: the default %q, the code says %q", v.Name(), cell, v.Unset)
		case v.Default == "" && v.Unset == "" && !strings.HasPrefix(cell, "empty"):
			t.Errorf("%s: the default %q; the code has none", v.Name(), cell)
		}
	}
}
