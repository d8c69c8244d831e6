package bot

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/mcpauth"
)

// The Connect card goes into the conversation of the question, in reply
// to it, with the Connect link (https); the outcome updates the same card
// in place, without a button. Without an https address the card still
// says what happened, and the run goes on without waiting.
func TestConnectCardPostedAndUpdated(t *testing.T) {
	h := newHarness(t, setup{publicBase: httpsBaseURL})
	a := &schema.Activity{ID: "1700000000001", ServiceURL: h.conn.srv.URL, Conversation: schema.ConversationAccount{ID: "19:group@thread.v2", ConversationType: "groupChat"},
		From: schema.ChannelAccount{ID: "29:ada", Name: "Ada Lovelace"}, Recipient: schema.ChannelAccount{ID: "28:bot"}}
	cp := &connectPrompter{b: h.bot, a: a, p: agent.Person{TenantID: testTenant, UserID: "u1", Name: "Ada Lovelace"}, o: h.bot.personalOptions(a)}
	link := strings.TrimSuffix(httpsBaseURL, "/") + mcpauth.ConnectPath + "REQ1"
	asked, err := cp.Ask(context.Background(), mcpauth.Prompt{RequestID: "REQ1", URL: link, Server: "crm", PersonName: "Ada Lovelace", Wait: mcpauth.DefaultWait})
	if err != nil {
		t.Fatal(err)
	}
	calls := h.conn.waitFor(t, "the Connect card", hasReplyTo(a.ID))
	card, _ := replyTo(calls, a.ID)
	if urls := openURLs(t, card.Activity.Attachments[0].Content); len(urls) != 1 || urls[0] != link {
		t.Errorf("Connect card buttons %v, want %s", urls, link)
	}
	if text := string(card.Activity.Attachments[0].Content); !strings.Contains(text, "Ada Lovelace") {
		t.Errorf("the card in a group chat does not say whose sign-in it is: %s", text)
	}
	asked.Outcome(context.Background(), mcpauth.Connected)
	calls = h.conn.waitFor(t, "the card updated", func(cs []received) bool {
		for _, c := range cs {
			if c.Method == "PUT" && c.ActivityID == card.AssignedID {
				return true
			}
		}
		return false
	})
	for _, c := range calls {
		if c.Method == "PUT" && c.ActivityID == card.AssignedID {
			var raw map[string]any
			_ = json.Unmarshal(c.Activity.Attachments[0].Content, &raw)
			if urls := openURLs(t, c.Activity.Attachments[0].Content); len(urls) != 0 || !strings.Contains(string(c.Activity.Attachments[0].Content), "Connected") {
				t.Errorf("updated card: buttons %v, %s", urls, c.Activity.Attachments[0].Content)
			}
		}
	}
}

// Without an https address nobody can connect from Teams: the card says
// so and Ask reports it at once, so the run does not wait for nothing.
func TestConnectCardWithoutHTTPS(t *testing.T) {
	h := newHarness(t, setup{publicBase: "http://localhost:3978"})
	a := &schema.Activity{ID: "1700000000002", ServiceURL: h.conn.srv.URL, Conversation: schema.ConversationAccount{ID: "a:personal", ConversationType: "personal"},
		From: schema.ChannelAccount{ID: "29:ada", Name: "Ada Lovelace"}, Recipient: schema.ChannelAccount{ID: "28:bot"}}
	cp := &connectPrompter{b: h.bot, a: a, p: agent.Person{TenantID: testTenant, UserID: "u1"}, o: h.bot.cardOptions()}
	cp.o.Local = false
	if _, err := cp.Ask(context.Background(), mcpauth.Prompt{RequestID: "REQ2", Server: "crm"}); err == nil {
		t.Fatal("Ask without an https address: no error")
	}
	calls := h.conn.waitFor(t, "the Connect card", hasReplyTo(a.ID))
	card, _ := replyTo(calls, a.ID)
	if urls := openURLs(t, card.Activity.Attachments[0].Content); len(urls) != 0 {
		t.Errorf("buttons %v without https", urls)
	}
}
