package bot

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/cards"
)

// streamParts is what a streaming activity carries, as Microsoft's "Stream
// bot messages" (REST API) defines it.
type streamParts struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	ReplyToID   string `json:"replyToId"`
	Attachments []any  `json:"attachments"`
	Entities    []struct {
		Type           string   `json:"type"`
		StreamID       string   `json:"streamId"`
		StreamType     string   `json:"streamType"`
		StreamSequence *int     `json:"streamSequence"`
		AdditionalType []string `json:"additionalType"`
	} `json:"entities"`
}

// In a personal chat a slow run is a Teams streaming message: informative
// updates that say what the run does (the question, then the tool it
// calls), numbered 1, 2, … with the stream's id after the first, then the
// answer card as the stream's final message (streamType final, no
// sequence, with the AI label), sent to the conversation. No working card
// is posted, and none is deleted.
func TestSlowRunInAPersonalChatIsAStreamingMessage(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{workingAfter: time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
	if s, b := h.send(h.message("personal", "a:stream", "st-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	// Hold the run long enough for the stream to start and show the call.
	h.conn.waitFor(t, "the tool call in the stream", func(c []received) bool {
		for _, x := range c {
			if x.Activity.Type == "typing" && strings.Contains(x.Activity.Text, "Calling wait_for_release on slow") {
				return true
			}
		}
		return false
	})
	close(release)
	h.conn.waitFor(t, "the final message", func(c []received) bool {
		for _, x := range c {
			if x.Activity.Type == "message" && strings.Contains(string(x.Raw), `"streamType":"final"`) {
				return true
			}
		}
		return false
	})
	h.shutdown()

	var streamID string
	seq := 0
	var final *streamParts
	for _, c := range h.conn.snapshot() {
		var p streamParts
		if err := json.Unmarshal(c.Raw, &p); err != nil {
			continue
		}
		var info *struct {
			Type           string   `json:"type"`
			StreamID       string   `json:"streamId"`
			StreamType     string   `json:"streamType"`
			StreamSequence *int     `json:"streamSequence"`
			AdditionalType []string `json:"additionalType"`
		}
		for i := range p.Entities {
			if p.Entities[i].Type == "streaminfo" {
				info = &p.Entities[i]
			}
		}
		switch {
		case c.Method != http.MethodPost:
			t.Errorf("a %s during a stream: %s", c.Method, c.Raw)
		case info == nil && p.Type == "message":
			t.Errorf("a message outside the stream (a working card?): %s", c.Raw)
		case info == nil:
			continue // the typing indicator at the start
		case p.Type == "typing":
			seq++
			if info.StreamType != "informative" || info.StreamSequence == nil || *info.StreamSequence != seq || p.Text == "" {
				t.Errorf("update %d: %s", seq, c.Raw)
			}
			if seq == 1 {
				streamID = c.AssignedID
				if info.StreamID != "" {
					t.Errorf("the first update names a stream id: %s", c.Raw)
				}
			} else if info.StreamID != streamID {
				t.Errorf("update %d names stream %q, want %q", seq, info.StreamID, streamID)
			}
		default:
			final = &p
			if info.StreamType != "final" || info.StreamSequence != nil || info.StreamID != streamID || c.ActivityID != "" {
				t.Errorf("final message: %s (sent as a reply to %q)", c.Raw, c.ActivityID)
			}
		}
	}
	if seq == 0 || final == nil {
		t.Fatalf("%d updates, final %v", seq, final)
	}
	if len(final.Attachments) != 1 || !strings.Contains(mustJSON(t, final.Attachments), "done waiting") {
		t.Errorf("the final message does not carry the answer card: %+v", final)
	}
	labelled := false
	for _, e := range final.Entities {
		if len(e.AdditionalType) == 1 && e.AdditionalType[0] == "AIGeneratedContent" {
			labelled = true
		}
	}
	if !labelled {
		t.Error("the final message has no AI label")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A stream that has nothing new to say repeats its update once it has been
// quiet for streamQuiet (30 s; Microsoft 365 Copilot ends a stream after
// 45 s without an update), numbered on, until the answer comes; a run that
// says something new in the meantime is shown at once.
func TestQuietStreamRepeatsItsUpdate(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{workingAfter: time.Millisecond, streamQuiet: 1200 * time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
	if s, b := h.send(h.copilotMessage("", "a:quiet", "q-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	calling := func(c []received) int {
		n := 0
		for _, x := range c {
			if x.Activity.Type == "typing" && strings.Contains(x.Activity.Text, "Calling wait_for_release on slow") {
				n++
			}
		}
		return n
	}
	h.conn.waitFor(t, "the tool call's update, repeated", func(c []received) bool { return calling(c) >= 3 })
	close(release)
	h.conn.waitFor(t, "the final message", func(c []received) bool {
		for _, x := range c {
			if strings.Contains(string(x.Raw), `"streamType":"final"`) {
				return true
			}
		}
		return false
	})
	h.shutdown()
	var seqs []int
	var times []time.Time
	for _, c := range h.conn.snapshot() {
		var p streamParts
		if json.Unmarshal(c.Raw, &p) != nil || p.Type != "typing" {
			continue
		}
		for _, e := range p.Entities {
			if e.Type == "streaminfo" && e.StreamSequence != nil {
				seqs = append(seqs, *e.StreamSequence)
				times = append(times, c.At)
			}
		}
	}
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("updates numbered %v, want 1, 2, 3, …", seqs)
		}
	}
	// The repeats come no sooner than the quiet time after the update
	// before them.
	for i := 2; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < time.Second {
			t.Errorf("update %d came %v after the one before, sooner than the quiet time", i+1, gap)
		}
	}
}

// A run that outlasts the stream's time closes the stream itself, with a
// final message that says the answer will follow, sent once the update on
// its way (if any) is done; no update follows it, and the answer comes as
// a new message of its own.
func TestStreamThatOutlivesItsTimeClosesItself(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	h := newHarness(t, setup{workingAfter: time.Millisecond, streamMax: 2500 * time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
	if s, b := h.send(h.copilotMessage("", "a:outlived", "q-1", "/wait_for_release {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	<-started
	closing := func(c received) bool {
		return c.Activity.Type == "message" && strings.Contains(string(c.Raw), `"streamType":"final"`) &&
			c.Activity.Text == cards.StreamTakingAWhile
	}
	h.conn.waitFor(t, "the stream closed by the bot", func(c []received) bool { return slices.ContainsFunc(c, closing) })
	close(release)
	h.conn.waitFor(t, "the answer as a new message", func(c []received) bool {
		return slices.ContainsFunc(c, func(x received) bool {
			return x.Activity.Type == "message" && len(x.Activity.Attachments) > 0 && !strings.Contains(string(x.Raw), "streaminfo")
		})
	})
	h.shutdown()
	calls := h.conn.snapshot()
	i := slices.IndexFunc(calls, closing)
	for _, c := range calls[i+1:] {
		if strings.Contains(string(c.Raw), "streaminfo") {
			t.Errorf("a stream activity after the stream closed: %s", c.Raw)
		}
	}
	if n := len(slices.DeleteFunc(slices.Clone(calls), func(c received) bool { return !closing(c) })); n != 1 {
		t.Errorf("the stream was closed %d times, want once", n)
	}
}

// While a tenant's sends are queued past a second (seventy questions in
// as many group chats of the tenant at once, each with its typing
// indicator, working card and answer), a stream's updates are not sent but
// left for the next one, so that they take none of the places the answers
// need; the stream still ends in its final message with the whole answer,
// its updates numbered without a gap, and every other answer arrives.
func TestStreamUpdatesGiveWayWhenTheTenantIsBusy(t *testing.T) {
	pieces := []string{"The quarter ", "closed at ", "4.2 million, ", "up 12 percent ", "on the last one, ", "with ", "three new ", "customers."}
	h := newHarness(t, setup{realClock: true, streamAfter: time.Millisecond, model: pacedModel(t, pieces, 500*time.Millisecond, 0)})
	if s, b := h.send(h.message("personal", "a:streaming", "s-1", "how did the quarter go?")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the stream opened", func(c []received) bool {
		return slices.ContainsFunc(c, func(x received) bool {
			return x.ConversationID == "a:streaming" && strings.Contains(string(x.Raw), "streaminfo")
		})
	})
	for i := range 70 {
		if s, b := h.send(h.message("groupChat", fmt.Sprintf("19:busy-%d@thread.v2", i), fmt.Sprintf("b-%d", i), "how did the quarter go?")); s != http.StatusAccepted {
			t.Fatalf("%d %s", s, b)
		}
	}
	h.conn.waitFor(t, "the streamed answer", func(c []received) bool {
		_, f := streamed(h, "a:streaming")
		return f != nil
	})
	for i := range 70 {
		h.conn.waitFor(t, "the busy answers", hasReplyTo(fmt.Sprintf("b-%d", i)))
	}
	if got := counterValue(t, h.reg, "teamsbot_bot_stream_updates_skipped_total", nil); got < 1 {
		t.Errorf("teamsbot_bot_stream_updates_skipped_total = %v, want the updates that gave way counted", got)
	}
	updates, final := streamed(h, "a:streaming")
	if !strings.Contains(fmt.Sprint(final.Attachments), "three new customers") {
		t.Errorf("final message without the whole answer: %+v", final)
	}
	for i, u := range updates {
		if s := u.Entities[0].StreamSequence; s == nil || *s != i+1 {
			t.Fatalf("update %d numbered %v, want %d: updates numbered without a gap", i, s, i+1)
		}
	}
}
