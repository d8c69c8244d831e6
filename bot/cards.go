package bot

import (
	"sync"
	"time"
	// Teams names the person's zone; the service knows every zone even
	// where the system has no time zone database.
	_ "time/tzdata"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
)

// The bot only converts: layout belongs to package cards.

// cardOptions are what the cards need to know of the service now.
func (b *Bot) cardOptions() cards.Options {
	return cards.Options{PublicBaseURL: b.opts.PublicBaseURL, Now: b.now(), AgentName: b.agentName, StageView: b.opts.StageView, Local: b.local}
}

// personalOptions are cardOptions in the time zone and locale that Teams
// sent with a (its localTimezone, an IANA name, and locale; UTC when it
// sent no zone or one this service does not know), naming the writer as
// the one who may open the views when others read the answer too (a group
// chat or a channel).
func (b *Bot) personalOptions(a *schema.Activity) cards.Options {
	o := b.cardOptions()
	o.Locale = a.Locale
	o.Shared = a.Conversation.ConversationType != "" && a.Conversation.ConversationType != "personal"
	o.Owner = a.From.Name
	if a.LocalTimezone != "" {
		o.Location = b.zones.load(a.LocalTimezone)
	}
	return o
}

// answerCards renders an answer as the cards to send, one per message, in
// the time zone and locale of o.
func (b *Bot) answerCards(ans agent.Answer, o cards.Options) []cards.Card {
	return cards.AnswerCards(b.cardAnswer(ans), o)
}

// cardAnswer is an answer as the cards take it.
func (b *Bot) cardAnswer(ans agent.Answer) cards.Answer {
	ca := cards.Answer{Text: ans.Text, Notes: ans.Notes}
	for _, v := range ans.Views {
		ca.Views = append(ca.Views, cards.View{ID: v.ID, Title: v.ToolTitle, Tool: v.Tool, Server: v.Server, ExpiresAt: v.ExpiresAt})
	}
	for _, r := range ans.Refusals {
		ca.Refusals = append(ca.Refusals, cards.Refusal(r))
	}
	for _, e := range ans.ToolErrors {
		ca.ToolErrors = append(ca.ToolErrors, cards.ToolError(e))
	}
	return ca
}

// withCard puts one card in a message activity, with the card's summary as
// the activity's, which Teams shows in notifications and the chat list.
func withCard(out *outActivity, c cards.Card) *outActivity {
	out.Summary = c.Summary
	out.Attachments = []schema.Attachment{{ContentType: cards.ContentType, Content: c}}
	return out
}

// maxZones bounds the time zones the bot keeps loaded; Teams sends a few
// dozen in practice, but the name comes from the client.
const maxZones = 1000

// zones keeps the time zones the bot has loaded by name: Teams sends the
// person's zone with every message, and loading one costs tens of
// microseconds and a few kilobytes each time.
type zones struct {
	mu     sync.Mutex
	byName map[string]*time.Location // nil: a name that is no zone
}

// load returns the zone of name, or nil when there is none of that name.
func (z *zones) load(name string) *time.Location {
	z.mu.Lock()
	loc, ok := z.byName[name]
	z.mu.Unlock()
	if ok {
		return loc
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = nil
	}
	z.mu.Lock()
	if z.byName == nil || len(z.byName) >= maxZones {
		z.byName = map[string]*time.Location{}
	}
	z.byName[name] = loc
	z.mu.Unlock()
	return loc
}
