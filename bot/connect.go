package bot

import (
	"context"
	"errors"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/mcpauth"
)

// A run that needs a server the person has not connected (auth: person)
// waits while the bot asks them: a Connect card in the conversation of
// the question, naming whose sign-in it is (in a group chat anyone sees
// it; the page it leads to goes on only for that person). When the wait
// ends, the same card says how: connected, not in time, or refused.

// connectPrompter asks the person of one turn.
type connectPrompter struct {
	b *Bot
	a *schema.Activity
	p agent.Person
	o cards.Options
}

// errNoAddress: Teams can open nothing of a service without an https
// address, so nobody can connect from there; the card says so and the
// run goes on without the server at once.
var errNoAddress = errors.New("the service has no https address, so the Connect link cannot be opened from Teams")

// Ask implements mcpauth.Prompter: it posts the Connect card.
func (cp *connectPrompter) Ask(ctx context.Context, pr mcpauth.Prompt) (mcpauth.Asked, error) {
	c := cards.Connect{Server: pr.Server, AgentName: cp.b.agentName, PersonName: cp.p.Name, RequestID: pr.RequestID, Wait: pr.Wait, State: cards.ConnectWaiting}
	id, err := cp.b.conn.Send(ctx, cp.a.ServiceURL, cp.a.Conversation.ID, cp.a.ID, withCard(cp.b.outgoing(cp.a, schema.Message), cards.ConnectCard(c, cp.o)))
	if err != nil {
		return nil, err
	}
	asked := &connectCard{cp: cp, card: c, id: id}
	if !cp.o.PublicBaseURL.HTTPS() && !(cp.o.Local && cp.o.PublicBaseURL.Loopback()) {
		return asked, errNoAddress
	}
	return asked, nil
}

// connectCard is a Connect card posted, to be updated with the outcome.
type connectCard struct {
	cp   *connectPrompter
	card cards.Connect
	id   string
}

// Outcome implements mcpauth.Asked: the card says how the request ended.
func (cc *connectCard) Outcome(ctx context.Context, o mcpauth.Outcome) {
	if cc.id == "" {
		return
	}
	switch o {
	case mcpauth.Connected:
		cc.card.State = cards.ConnectConnected
	case mcpauth.TimedOut:
		cc.card.State = cards.ConnectTimedOut
	default:
		cc.card.State = cards.ConnectRefused
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	cp := cc.cp
	if err := cp.b.conn.Update(ctx, cp.a.ServiceURL, cp.a.Conversation.ID, cc.id, withCard(cp.b.outgoing(cp.a, schema.Message), cards.ConnectCard(cc.card, cp.o))); err != nil {
		cp.b.logger.Warn("connect card not updated", "conversation", cp.a.Conversation.ID, "err", err)
	}
}
