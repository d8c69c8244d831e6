package bot

import (
	"context"
	"slices"
	"strings"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// The chat commands answered by the bot itself, without a run:
//
//	/new                  forget the conversation's earlier messages
//	                      (also "start over", "start again", "new
//	                      conversation", "new chat", alone in a message)
//
//	/connections          the servers the person connected, and a link to manage them
//	/disconnect <server>  end the person's connection to a server

// command answers a's text when it is one of the commands, and reports
// whether it was.
func (b *Bot) command(ctx context.Context, a *schema.Activity, p agent.Person) bool {
	fields := strings.Fields(a.Text)
	if len(fields) == 0 {
		return false
	}
	if (strings.ToLower(fields[0]) == "/new" && len(fields) == 1 || startsOver(a.Text)) && b.opts.Store != nil {
		b.forget(ctx, a, p)
		return true
	}
	if b.opts.Auth == nil {
		return false
	}
	switch strings.ToLower(fields[0]) {
	case "/connections":
		list, err := b.opts.Auth.Connections(ctx, p.TenantID, p.UserID)
		if err != nil {
			b.logger.Error("connections not listed", "err", err)
			b.sendCard(a, cards.RunFailed(""))
			return true
		}
		items := make([]cards.ConnectionItem, 0, len(list))
		for _, c := range list {
			items = append(items, cards.ConnectionItem{Agent: c.AgentID, Server: c.Server, ConnectedAt: c.ConnectedAt, LastUsedAt: c.LastUsedAt})
		}
		page := ""
		if o := b.cardOptions(); o.PublicBaseURL.HTTPS() {
			page = o.PublicBaseURL.URL(mcpauth.ConnectionsPath)
		}
		b.sendCard(a, cards.Connections(items, page, b.personalOptions(a)))
		return true
	case "/disconnect":
		if len(fields) != 2 {
			b.sendCard(a, cards.Disconnected("", false))
			return true
		}
		n, err := b.opts.Auth.Disconnect(ctx, mcpauth.Person{TenantID: p.TenantID, UserID: p.UserID, Name: p.Name}, b.opts.AgentID, fields[1])
		if err != nil {
			b.logger.Error("connection not ended", "err", err)
			b.sendCard(a, cards.RunFailed(""))
			return true
		}
		b.sendCard(a, cards.Disconnected(fields[1], n > 0))
		return true
	}
	return false
}

// startsOver reports whether text, alone in its message, asks for a new
// conversation (cards.StartOverWords): its words, in any case, with
// trailing punctuation. The manifest offers /new in the command menu; these
// words are how people say it.
func startsOver(text string) bool {
	t := strings.Join(strings.Fields(strings.ToLower(strings.TrimRight(strings.TrimSpace(text), ".!?"))), " ")
	return slices.Contains(cards.StartOverWords, t)
}

// forget is /new: the agent no longer remembers this conversation's
// earlier messages (in a channel, every thread of it is the thread's
// own: only this one is forgotten), audited.
func (b *Bot) forget(ctx context.Context, a *schema.Activity, p agent.Person) {
	n, err := b.opts.Store.ClearHistory(ctx, p.TenantID, a.Conversation.ID, store.AuditRecord{
		Time: b.now(), TenantID: p.TenantID, Action: "bot.history.cleared", Actor: p.UserID,
		Fields: map[string]any{"conversation": a.Conversation.ID},
	})
	if err != nil {
		b.logger.Error("conversation's memory not cleared", "conversation", a.Conversation.ID, "err", err)
		b.sendCard(a, cards.RunFailed(""))
		return
	}
	b.sendCard(a, cards.Forgotten(n > 0))
}
