package bot

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/cards"
	"teamsbot/store"
)

// A message is a conversation reference too: a personal chat that has no
// stored reference gets one, and a reference whose serviceUrl changed (the
// Bot Connector moved the conversation) is rewritten, so that a later
// proactive send goes to the new address.
func TestMessagesKeepTheConversationReferenceCurrent(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	key := ConversationKey(testTenant, "a:refs")
	if _, err := h.store.Conversation(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a reference before any activity: %v", err)
	}
	h.send(h.message("personal", "a:refs", "refs-1", "/tools"))
	h.conn.waitFor(t, "the answer", hasReplyTo("refs-1"))
	ref, err := h.store.Conversation(ctx, key)
	if err != nil || ref.ServiceURL != h.conn.srv.URL || ref.BotID != testBotMRI {
		t.Fatalf("reference after the first message: %+v, %v", ref, err)
	}

	// The conversation moves to another Bot Connector address.
	moved := newFakeConnector(t, h.tokens)
	m := h.message("personal", "a:refs", "refs-2", "/tools")
	m["serviceUrl"] = moved.srv.URL
	claims := h.claims()
	claims["serviceurl"] = moved.srv.URL
	if s, b := h.post(m, "Bearer "+h.token(claims)); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	moved.waitFor(t, "the answer at the new address", hasReplyTo("refs-2"))
	ref, err = h.store.Conversation(ctx, key)
	if err != nil || ref.ServiceURL != moved.srv.URL {
		t.Fatalf("reference after the move: %+v, %v; want the new service URL", ref, err)
	}
	var cr schema.ConversationReference
	if err := json.Unmarshal(ref.Reference, &cr); err != nil || cr.ServiceURL != moved.srv.URL {
		t.Errorf("the stored Bot Framework reference still names %q (%v)", cr.ServiceURL, err)
	}

	// A proactive send now goes to the new address.
	if _, err := h.bot.SendProactive(ctx, key, cards.Welcome(cards.Options{})); err != nil {
		t.Fatal(err)
	}
	h.shutdown()
	if n := len(moved.snapshot()); n < 2 {
		t.Errorf("the proactive card did not reach the new address (%d calls there)", n)
	}
}

// A team that is deleted or archived takes its reference along; restored,
// it is kept again, without a second welcome.
func TestTeamDeletedArchivedAndRestored(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	const team = "19:team-events@thread.tacv2"
	key := ConversationKey(testTenant, team)
	event := func(id, eventType string) {
		t.Helper()
		a := h.message("channel", team, id, "")
		delete(a, "text")
		delete(a, "entities")
		a["type"] = "conversationUpdate"
		cd := a["channelData"].(map[string]any)
		cd["eventType"] = eventType
		cd["team"] = map[string]any{"id": team}
		if eventType == "" {
			a["membersAdded"] = []any{map[string]any{"id": testBotMRI}}
		}
		if s, b := h.send(a); s != http.StatusOK {
			t.Fatalf("%s: %d %s", eventType, s, b)
		}
	}
	stored := func() bool {
		_, err := h.store.Conversation(ctx, key)
		return err == nil
	}
	event("ev-1", "")
	if !stored() {
		t.Fatal("adding the bot to the team stored no reference")
	}
	h.conn.waitFor(t, "the welcome card", func(c []received) bool { return len(c) >= 1 })
	for i, c := range []struct {
		event string
		kept  bool
	}{{"teamArchived", false}, {"teamUnarchived", true}, {"teamDeleted", false}, {"teamRestored", true}, {"teamRenamed", true}} {
		event("ev-"+c.event, c.event)
		if stored() != c.kept {
			t.Errorf("step %d, after %s: reference kept %v, want %v", i, c.event, stored(), c.kept)
		}
	}
	h.shutdown()
	welcomes := 0
	for _, c := range h.conn.snapshot() {
		if strings.Contains(string(c.Raw), "Hi, I'm") {
			welcomes++
		}
	}
	if welcomes != 1 {
		t.Errorf("%d welcome cards, want 1", welcomes)
	}
}

// The reference keeps the kind and names Teams sends with the
// conversation's activities (conversation.conversationType and name,
// channelData.team.name and channel.name), so that the console shows
// conversations by name: given at install, kept up to date by messages,
// and never cleared by an activity that does not carry them.
func TestTheReferenceKeepsTheConversationsNames(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	const team = "19:team@thread.tacv2"
	teamKey := ConversationKey(testTenant, team)

	add := h.message("channel", team, "names-1", "")
	delete(add, "text")
	delete(add, "entities")
	add["type"] = "conversationUpdate"
	add["membersAdded"] = []any{map[string]any{"id": testBotMRI}}
	cd := add["channelData"].(map[string]any)
	cd["team"] = map[string]any{"id": team, "name": "Sales"}
	cd["channel"] = map[string]any{"id": team, "name": "General"}
	if s, b := h.send(add); s != http.StatusOK {
		t.Fatalf("install: %d %s", s, b)
	}
	ref, err := h.store.Conversation(ctx, teamKey)
	if err != nil || ref.Kind != "channel" || ref.TeamName != "Sales" || ref.ChannelName != "General" {
		t.Fatalf("the team's reference after install: %+v, %v", ref, err)
	}

	// A message in a thread of another channel, after the team was
	// renamed: the team's name changes, not its channel's.
	m := h.message("channel", "19:channel@thread.tacv2;messageid=7", "names-2", "/tools")
	cd = m["channelData"].(map[string]any)
	cd["team"] = map[string]any{"id": team, "name": "Sales EMEA"}
	cd["channel"] = map[string]any{"id": "19:channel@thread.tacv2", "name": "Forecasts"}
	h.send(m)
	h.conn.waitFor(t, "the answer", hasReplyTo("names-2"))
	if ref, err = h.store.Conversation(ctx, teamKey); err != nil || ref.TeamName != "Sales EMEA" || ref.ChannelName != "General" {
		t.Errorf("the team's reference after a message of the renamed team: %+v, %v", ref, err)
	}

	// A group chat's name is its conversation's; a message without one
	// keeps the name.
	g := h.message("groupChat", "19:chat@thread.v2", "names-3", "/tools")
	g["conversation"].(map[string]any)["name"] = "Q4 planning"
	h.send(g)
	h.conn.waitFor(t, "the answer", hasReplyTo("names-3"))
	chatKey := ConversationKey(testTenant, "19:chat@thread.v2")
	if ref, err = h.store.Conversation(ctx, chatKey); err != nil || ref.Kind != "groupChat" || ref.Title != "Q4 planning" {
		t.Fatalf("the group chat's reference: %+v, %v", ref, err)
	}
	h.send(h.message("groupChat", "19:chat@thread.v2", "names-4", "/tools"))
	h.conn.waitFor(t, "the answer", hasReplyTo("names-4"))
	if ref, err = h.store.Conversation(ctx, chatKey); err != nil || ref.Title != "Q4 planning" {
		t.Errorf("a message without the chat's name cleared it: %+v, %v", ref, err)
	}
}
