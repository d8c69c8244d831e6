package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"teamsbot/agent"
)

// BenchmarkOpenAIModel is the OpenAI-compatible model against a fake Chat
// Completions server on loopback (the server's work is in the figures
// too): one tool-call round trip (the model asks for a tool, then answers
// from its result: two requests), an answer of 200 words in one piece, and
// the same answer streamed one word a chunk, as the API streams tokens.
func BenchmarkOpenAIModel(b *testing.B) {
	words := strings.Fields(strings.Repeat("Contoso Ltd is an Enterprise customer whose sales grew this quarter. ", 20))
	text := strings.Join(words, " ")
	toolReply, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "choices": []any{map[string]any{
		"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "demo__lookup_customer", "arguments": `{"customer":"Contoso"}`}},
		}}}}})
	textReply, _ := json.Marshal(answer(text))
	var stream strings.Builder
	for i, w := range words {
		if i > 0 {
			w = " " + w
		}
		c, _ := json.Marshal(chunk(map[string]any{"content": w}, ""))
		fmt.Fprintf(&stream, "data: %s\n\n", c)
	}
	end, _ := json.Marshal(chunk(map[string]any{}, "stop"))
	fmt.Fprintf(&stream, "data: %s\n\ndata: [DONE]\n\n", end)
	streamed := stream.String()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		body := string(data)
		switch {
		case strings.Contains(body, `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, streamed)
		case strings.Contains(body, `"role":"tool"`) || strings.Contains(body, `"just answer"`):
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(textReply)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(toolReply)
		}
	}))
	b.Cleanup(srv.Close)
	m := newOpenAIModel(b, srv.URL, agent.ModelConfig{}, agent.OpenAIOptions{Key: "sk-bench"})
	tools := []agent.ToolSpec{{Name: "demo/lookup_customer", Server: "demo", Tool: "lookup_customer", Description: "Looks a customer up",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"customer": map[string]any{"type": "string"}}}}}
	ctx := context.Background()

	b.Run("tool call round trip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			msgs := []agent.Message{{Role: agent.RoleUser, Text: "Tell me about Contoso"}}
			reply, err := m.Next(ctx, agent.Turn{AgentName: "Assistant", Tools: tools, Messages: msgs})
			if err != nil || len(reply.ToolCalls) != 1 {
				b.Fatalf("first reply %+v, %v", reply, err)
			}
			msgs = append(msgs, reply, agent.Message{Role: agent.RoleTool, ToolCallID: "call_1", ToolName: "demo/lookup_customer", Text: "Contoso Ltd: Enterprise"})
			reply, err = m.Next(ctx, agent.Turn{AgentName: "Assistant", Tools: tools, Messages: msgs})
			if err != nil || reply.Text != text {
				b.Fatalf("second reply %+v, %v", reply, err)
			}
		}
	})
	b.Run("answer in one piece", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reply, err := m.Next(ctx, agent.Turn{AgentName: "Assistant", Tools: tools, Messages: []agent.Message{{Role: agent.RoleUser, Text: "just answer"}}})
			if err != nil || reply.Text != text {
				b.Fatalf("reply %+v, %v", reply, err)
			}
		}
	})
	b.Run("answer streamed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			turn := agent.Turn{AgentName: "Assistant", Tools: tools, Messages: []agent.Message{{Role: agent.RoleUser, Text: "just answer"}},
				Stream: func(string) { n++ }}
			reply, err := m.Next(ctx, turn)
			if err != nil || reply.Text != text || n != len(words) {
				b.Fatalf("reply %q in %d pieces, %v", reply.Text, n, err)
			}
		}
	})
}
