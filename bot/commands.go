package bot

import (
	"context"
	"strings"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/mcpauth"
)

// The chat commands about the person's connections, answered by the bot
// itself, without a run:
//
//	/connections          the servers the person connected, and a link to manage them
//	/disconnect <server>  end the person's connection to a server

// command answers a's text when it is one of the commands, and reports
// whether it was.
func (b *Bot) command(ctx context.Context, a *schema.Activity, p agent.Person) bool {
	if b.opts.Auth == nil {
		return false
	}
	fields := strings.Fields(a.Text)
	if len(fields) == 0 {
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
