package bot

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// copilotMessage is a message from Microsoft 365 Copilot's chat with the
// agent: a Teams message on the msteams channel that carries the
// ProductInfo entity with id COPILOT (the Microsoft 365 Agents SDK's
// Copilot sub-channel), here with the clientInfo entity Teams adds.
// convType is what conversation.conversationType says, "" for nothing.
func (h *harness) copilotMessage(convType, convID, id, text string) map[string]any {
	a := h.message("personal", convID, id, text)
	conv := a["conversation"].(map[string]any)
	if convType == "" {
		delete(conv, "conversationType")
	} else {
		conv["conversationType"] = convType
	}
	a["entities"] = []any{
		map[string]any{"type": "ProductInfo", "id": "COPILOT"},
		map[string]any{"type": "clientInfo", "locale": "en-US", "platform": "Web"},
	}
	return a
}

// A message from Microsoft 365 Copilot is answered as a personal chat,
// whether or not its conversation says personal: a slow run is a
// streaming message (Copilot wants a first answer within 15 seconds, and
// streams as Teams' personal chats do), the answer is its final message
// with the AI label and the feedback buttons, to the same conversation,
// and no working card is posted. A view's card has its Open button and is
// not shared (no "only ... can open").
func TestMessageFromMicrosoft365CopilotIsAPersonalChat(t *testing.T) {
	for _, convType := range []string{"", "personal"} {
		t.Run("conversationType="+convType, func(t *testing.T) {
			release := make(chan struct{})
			started := make(chan struct{}, 1)
			h := newHarness(t, setup{publicBase: httpsBaseURL, workingAfter: time.Millisecond}.withTool("slow", "wait_for_release", held(started, release, "done waiting")))
			convID := "a:copilot-chat-" + convType
			if s, b := h.send(h.copilotMessage(convType, convID, "cp-1", "/wait_for_release {}")); s != http.StatusAccepted {
				t.Fatalf("%d %s", s, b)
			}
			<-started
			h.conn.waitFor(t, "the stream's update", func(c []received) bool {
				for _, x := range c {
					if x.Activity.Type == "typing" && strings.Contains(string(x.Raw), `"streamType":"informative"`) {
						return true
					}
				}
				return false
			})
			close(release)
			calls := h.conn.waitFor(t, "the final message", func(c []received) bool {
				for _, x := range c {
					if x.Activity.Type == "message" && strings.Contains(string(x.Raw), `"streamType":"final"`) {
						return true
					}
				}
				return false
			})
			for _, c := range calls {
				if c.ConversationID != convID {
					t.Errorf("sent to conversation %q, want %q: %s", c.ConversationID, convID, c.Raw)
				}
				if c.Activity.Type != "message" {
					continue
				}
				var p streamParts
				if err := json.Unmarshal(c.Raw, &p); err != nil {
					t.Fatal(err)
				}
				labelled, final := false, false
				for _, e := range p.Entities {
					labelled = labelled || len(e.AdditionalType) == 1 && e.AdditionalType[0] == "AIGeneratedContent"
					final = final || e.Type == "streaminfo" && e.StreamType == "final"
				}
				if !final {
					t.Errorf("a message outside the stream (a working card?): %s", c.Raw)
				}
				if !labelled || !strings.Contains(string(c.Raw), "done waiting") || !strings.Contains(string(c.Raw), `"feedbackLoop":{"type":"default"}`) {
					t.Errorf("the final message lacks the answer, its AI label or its feedback buttons: %s", c.Raw)
				}
			}

			// A view's card: its Open button, not shared.
			if s, b := h.send(h.copilotMessage(convType, convID, "cp-2", "/sales_report {}")); s != http.StatusAccepted {
				t.Fatalf("%d %s", s, b)
			}
			var reply received
			h.conn.waitFor(t, "the view's card", func(c []received) bool {
				for _, x := range c {
					if x.Activity.Type == "message" && strings.Contains(string(x.Raw), `"text":"Sales report"`) {
						reply = x
						return true
					}
				}
				return false
			})
			if len(reply.Activity.Attachments) == 0 || len(openURLs(t, reply.Activity.Attachments[0].Content)) != 1 {
				t.Errorf("the answer has no card with an Open button: %s", reply.Raw)
			}
			if strings.Contains(string(reply.Raw), "can open") {
				t.Errorf("the answer in the person's own chat says who may open the view: %s", reply.Raw)
			}
			h.shutdown()
		})
	}
}
