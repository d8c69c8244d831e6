package bot

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// AuditRefused is the audit action of a message the bot did not run.
const AuditRefused = "bot.refused"

// Why a message was refused, in the bot.refused record and the metrics.
const (
	RefusedChannel     = "channel"     // not the msteams channel
	RefusedTenant      = "tenant"      // an organisation the bot does not serve
	RefusedIdentity    = "identity"    // no tenant or Entra user object id
	RefusedPermission  = "permission"  // the access rules say no
	RefusedUnavailable = "unavailable" // the access decision could not be made
)

// Channels whose messages make runs. With an app id only Teams' own: a
// token of the Bot Connector for another channel (Web Chat, Direct Line)
// proves nothing about the Teams tenant and user id its channelData
// claims. In local mode the Bot Framework Emulator too.
var (
	servedChannels      = []string{"msteams"}
	servedLocalChannels = []string{"msteams", "emulator"}
)

// refusal is a message the gate stopped: the card to send and the record.
type refusal struct {
	reason string
	card   cards.Card
	// tenant is whose audit log keeps the record: the person's for a
	// refusal inside a served tenant; none for a claim that cannot be
	// trusted (another channel, another tenant).
	tenant string
	detail string
}

// gate decides whether a message makes a run, in this order: the
// channel, the tenant, a person to run for, and the access rules
// (agents.run for the agent, from a binding, a group or the tenant
// default). Nothing of the agent runs, and nothing of its data is sent,
// for a refused message.
func (b *Bot) gate(ctx context.Context, a *schema.Activity, p agent.Person) *refusal {
	if r := b.gateIdentity(a, p); r != nil {
		return r
	}
	if b.opts.Access == nil {
		return nil
	}
	err := b.opts.Access.CanRun(ctx, access.Person{TenantID: p.TenantID, UserID: p.UserID, Name: p.Name}, b.agentID)
	var de *access.DeniedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return &refusal{reason: RefusedPermission, card: cards.NotAllowed(de.Reason), tenant: p.TenantID, detail: de.Reason}
	default:
		if !errors.Is(err, access.ErrUnavailable) {
			// Graph's own client has logged its failure already.
			b.logger.Warn("access decision failed; message refused", "tenant", p.TenantID, "conversation", a.Conversation.ID, "err", err)
		}
		return &refusal{reason: RefusedUnavailable, card: cards.AccessUnavailable(), tenant: p.TenantID, detail: "the access decision could not be made"}
	}
}

// gateIdentity is the first part of the gate, for every activity that a
// person sends: the channel, the tenant, and a person to act for.
func (b *Bot) gateIdentity(a *schema.Activity, p agent.Person) *refusal {
	channels := servedChannels
	if b.local {
		channels = servedLocalChannels
	}
	if !slices.Contains(channels, a.ChannelID) {
		return &refusal{reason: RefusedChannel, card: cards.NotServed(), detail: "channel " + clipID(a.ChannelID)}
	}
	convTenant := a.Conversation.TenantID
	if !b.local {
		switch {
		case p.TenantID == "":
		case convTenant != "" && !strings.EqualFold(convTenant, p.TenantID):
			return &refusal{reason: RefusedTenant, card: cards.NotServed(), detail: "channelData and conversation name different tenants"}
		case !b.serves(p.TenantID):
			return &refusal{reason: RefusedTenant, card: cards.NotServed(), detail: "tenant " + clipID(p.TenantID) + " is not served"}
		}
	}
	if p.TenantID == "" || p.UserID == "" {
		return &refusal{reason: RefusedIdentity, card: cards.MissingIdentity(), tenant: p.TenantID}
	}
	return nil
}

// serves reports whether messages of tenant make runs.
func (b *Bot) serves(tenant string) bool {
	return slices.ContainsFunc(b.opts.AllowedTenants, func(t string) bool { return strings.EqualFold(t, tenant) })
}

// refuseMessage records a refused message, counts it and sends its card.
func (b *Bot) refuseMessage(ctx context.Context, a *schema.Activity, p agent.Person, r *refusal) {
	b.metrics.turns.WithLabelValues("refused").Inc()
	b.logger.Info("message refused", "reason", r.reason, "tenant", clipID(p.TenantID), "conversation", a.Conversation.ID, "channel", clipID(a.ChannelID))
	b.audit(ctx, store.AuditRecord{
		TenantID: r.tenant,
		Action:   AuditRefused,
		Actor:    p.UserID,
		Fields: map[string]any{
			"reason": r.reason, "detail": r.detail, "channel": clipID(a.ChannelID),
			"claimed_tenant": clipID(p.TenantID), "conversation": clipID(a.Conversation.ID), "activity": clipID(a.ID),
		},
	})
	b.sendCard(a, r.card)
}

// audit appends a record of the bot; it never fails the turn.
func (b *Bot) audit(ctx context.Context, rec store.AuditRecord) {
	if b.opts.Store == nil {
		return
	}
	if err := b.opts.Store.Append(context.WithoutCancel(ctx), rec); err != nil {
		b.logger.Error("audit record not written", "action", rec.Action, "err", err)
	}
}

// clipID bounds an id a caller chose on its way into logs and records.
func clipID(s string) string { return textclip.Clip(s, 128) }
