package bot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
)

// pacedModel is an OpenAI-compatible model that streams its answer (the
// Chat Completions API's stream: "data: {chunk}" server-sent events, then
// "data: [DONE]", as "Create chat completion" with stream: true describes
// them) one piece every pace; cut, when set, breaks the connection after
// that many pieces instead of finishing.
func pacedModel(t testing.TB, pieces []string, pace time.Duration, cut int) *agent.ModelConfig {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			// Asked for the whole answer: one JSON body.
			writeJSON(w, http.StatusOK, map[string]any{"choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": strings.Join(pieces, "")},
			}}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "model": "test-model",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
			fl.Flush()
		}
		chunk(map[string]any{"role": "assistant", "content": ""}, nil)
		for i, p := range pieces {
			if cut > 0 && i == cut {
				// Break the connection mid-answer.
				hj, _ := w.(http.Hijacker)
				conn, _, err := hj.Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			time.Sleep(pace)
			chunk(map[string]any{"content": p}, nil)
		}
		chunk(map[string]any{}, "stop")
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
	}))
	t.Cleanup(srv.Close)
	return &agent.ModelConfig{Kind: agent.ModelOpenAI, BaseURL: srv.URL + "/v1", Model: "test-model"}
}

// streamed are a conversation's streaming updates and its final message,
// in the order the connector got them.
func streamed(h *harness, conv string) (updates []streamParts, final *streamParts) {
	for _, c := range h.conn.snapshot() {
		if c.ConversationID != conv {
			continue
		}
		var p streamParts
		if json.Unmarshal(c.Raw, &p) != nil {
			continue
		}
		for _, e := range p.Entities {
			if e.Type != "streaminfo" {
				continue
			}
			if e.StreamType == "final" {
				f := p
				final = &f
			} else {
				updates = append(updates, p)
			}
		}
	}
	return updates, final
}

// In a personal chat the answer's words are shown as the model writes
// them: streaming updates, each the whole text so far, in order, at most
// one a second, then the final message with the card. A group chat, where
// Teams does not stream, gets the answer as one message.
func TestAnswerWordsAreStreamed(t *testing.T) {
	pieces := []string{"The quarter ", "closed at ", "4.2 million, ", "up 12 percent ", "on the last one."}
	h := newHarness(t, setup{realClock: true, streamAfter: time.Millisecond, model: pacedModel(t, pieces, 600*time.Millisecond, 0)})
	if s, b := h.send(h.message("personal", "a:words", "w-1", "how did the quarter go?")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the final message", func(c []received) bool {
		_, f := streamed(h, "a:words")
		return f != nil
	})
	updates, final := streamed(h, "a:words")
	whole := strings.Join(pieces, "")
	var words []streamParts
	for _, u := range updates {
		if u.Entities[0].StreamType == "streaming" {
			words = append(words, u)
		}
	}
	if len(words) < 2 {
		t.Fatalf("%d streaming updates of words, want the answer shown as it came (updates %+v)", len(words), updates)
	}
	prev, seq := "", 0
	for _, u := range words {
		if !strings.HasPrefix(whole, u.Text) || len(u.Text) <= len(prev) {
			t.Errorf("update %q does not grow the answer %q from %q", u.Text, whole, prev)
		}
		if s := u.Entities[0].StreamSequence; s == nil || *s <= seq {
			t.Errorf("sequence %v after %d", s, seq)
		} else {
			seq = *s
		}
		prev = u.Text
	}
	if final.ReplyToID != "" || len(final.Attachments) == 0 || !strings.Contains(fmt.Sprint(final.Attachments), "4.2 million") {
		t.Errorf("final message: %+v", final)
	}
	// Teams' pace: no two updates within a second.
	var at []time.Time
	for _, c := range h.conn.snapshot() {
		if c.ConversationID == "a:words" && c.Activity.Type == "typing" && strings.Contains(string(c.Raw), "streaminfo") {
			at = append(at, c.At)
		}
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < 950*time.Millisecond {
			t.Errorf("updates %d and %d only %v apart", i-1, i, d)
		}
	}

	// A group chat: no stream, one answer.
	if s, b := h.send(h.message("groupChat", "19:words@thread.v2", "w-2", "how did the quarter go?")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	calls := h.conn.waitFor(t, "the group chat's answer", hasReplyTo("w-2"))
	if u, f := streamed(h, "19:words@thread.v2"); len(u) != 0 || f != nil {
		t.Errorf("a group chat was streamed: %d updates", len(u))
	}
	if r, _ := replyTo(calls, "w-2"); !strings.Contains(string(r.Raw), "4.2 million") {
		t.Errorf("group chat answer: %s", r.Raw)
	}
}

// A model whose stream breaks off mid-answer ends the stream with the
// failure card, not with half an answer.
func TestStreamCutEndsInTheFailureCard(t *testing.T) {
	pieces := []string{"The quarter ", "closed at ", "4.2 million."}
	h := newHarness(t, setup{realClock: true, streamAfter: time.Millisecond, model: pacedModel(t, pieces, 700*time.Millisecond, 2)})
	if s, b := h.send(h.message("personal", "a:cut", "c-1", "how did the quarter go?")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the final message", func(c []received) bool {
		_, f := streamed(h, "a:cut")
		return f != nil
	})
	updates, final := streamed(h, "a:cut")
	if len(updates) == 0 {
		t.Fatal("no stream was opened")
	}
	if text := fmt.Sprint(final.Attachments); strings.Contains(text, "4.2 million") || !strings.Contains(strings.ToLower(text), "could not") {
		t.Errorf("the stream ended with %s", text)
	}
}
