package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"teamsbot/cards"
	"teamsbot/internal/web"
	"teamsbot/store"

	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/infracloudio/msbotbuilder-go/schema"
)

// ConversationKey is the store key of a conversation reference.
func ConversationKey(tenantID, conversationID string) string {
	return tenantID + "/" + conversationID
}

// onConversationUpdate stores the reference and welcomes when the bot was
// added to a conversation, and forgets it when the bot was removed.
//
// A team that is deleted or archived (channelData.eventType teamDeleted,
// teamArchived: "Conversation events in your Teams bot") takes its
// reference along; one restored or unarchived gets it back, without a
// second welcome.
func (b *Bot) onConversationUpdate(t *activity.TurnContext) (schema.Activity, error) {
	a := t.Activity
	botID := a.Recipient.ID
	ctx, cancel := context.WithTimeout(b.ctx, sendTimeout)
	defer cancel()
	switch event, _ := a.ChannelData["eventType"].(string); event {
	case "teamDeleted", "teamArchived":
		return schema.Activity{}, b.forgetConversation(ctx, &a)
	case "teamRestored", "teamUnarchived":
		return schema.Activity{}, b.installed(ctx, &a, false)
	}
	for _, m := range a.MembersRemoved {
		if m.ID == botID {
			return schema.Activity{}, b.forgetConversation(ctx, &a)
		}
	}
	for _, m := range a.MembersAdded {
		if m.ID == botID {
			return schema.Activity{}, b.installed(ctx, &a, true)
		}
	}
	return schema.Activity{}, nil
}

// onInstallationUpdate handles install and uninstall of the app.
func (b *Bot) onInstallationUpdate(reqCtx context.Context, a *schema.Activity) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), sendTimeout)
	defer cancel()
	var err error
	switch a.Action {
	case "add":
		err = b.installed(ctx, a, true)
	case "add-upgrade":
		// A new version of the app: keep the reference fresh, but the
		// person has been welcomed already.
		err = b.installed(ctx, a, false)
	case "remove", "remove-upgrade":
		err = b.forgetConversation(ctx, a)
	}
	if err != nil {
		b.logger.Error("installation update failed", "conversation", a.Conversation.ID, "err", err)
		we := web.NewError(http.StatusInternalServerError, "The bot could not keep this conversation; its log says why. Add the app again in a moment.").Wrap(err)
		we.Logged = true
		return we
	}
	return nil
}

func conversationTenant(a *schema.Activity) string {
	if t := channelTenant(a); t != "" {
		return t
	}
	return a.Conversation.TenantID
}

// installed stores the conversation reference for proactive sends and
// sends the welcome card once per conversation (Teams announces an install
// with both a conversationUpdate and an installationUpdate).
func (b *Bot) installed(ctx context.Context, a *schema.Activity, welcome bool) error {
	tenant := conversationTenant(a)
	if !b.local && (!slices.Contains(servedChannels, a.ChannelID) || tenant == "" || !b.serves(tenant)) {
		// Another organisation installed the app, or another channel
		// claims to be Teams: nothing is kept for it and nothing is sent.
		b.logger.Info("installation outside the served tenants ignored", "tenant", clipID(tenant), "channel", clipID(a.ChannelID), "conversation", a.Conversation.ID)
		b.audit(ctx, store.AuditRecord{Action: AuditRefused, Fields: map[string]any{
			"reason": RefusedTenant, "detail": "installation", "claimed_tenant": clipID(tenant), "channel": clipID(a.ChannelID), "conversation": clipID(a.Conversation.ID),
		}})
		return nil
	}
	if tenant == "" {
		b.logger.Warn("bot added to a conversation without a tenant; reference not stored", "conversation", a.Conversation.ID)
	} else if b.opts.Store != nil {
		ref, err := json.Marshal(activity.GetCoversationReference(*a))
		if err != nil {
			return fmt.Errorf("bot: conversation reference: %w", err)
		}
		conv := store.ConversationRef{
			Key:            ConversationKey(tenant, a.Conversation.ID),
			TenantID:       tenant,
			ConversationID: a.Conversation.ID,
			ServiceURL:     a.ServiceURL,
			ChannelID:      a.ChannelID,
			BotID:          a.Recipient.ID,
			Reference:      ref,
		}
		namesSeen(a, false).apply(&conv)
		err = b.opts.Store.PutConversation(ctx, conv)
		if err != nil {
			return fmt.Errorf("bot: storing conversation %s: %w", a.Conversation.ID, err)
		}
		b.logger.Info("added to conversation", "tenant", tenant, "conversation", a.Conversation.ID, "type", a.Conversation.ConversationType)
	}
	if welcome && b.seen.firstTime("welcome\x00"+a.Conversation.ID, b.now()) && b.begin() {
		act := *a
		go func() {
			defer b.turns.Done()
			b.sendCard(&act, cards.Welcome(b.cardOptions()))
		}()
	}
	return nil
}

// forgetConversation removes the reference when the bot leaves, and
// pauses the triggers that posted there (see conversationGone).
func (b *Bot) forgetConversation(ctx context.Context, a *schema.Activity) error {
	tenant := conversationTenant(a)
	if tenant == "" || b.opts.Store == nil || !b.local && !b.serves(tenant) {
		return nil
	}
	_, err := b.conversationGone(ctx, tenant, a.Conversation.ID, RemovedUninstalled)
	if err != nil {
		return err
	}
	// A person who removes the app from their own chat is done with the
	// assistant: what it kept to work as them on their servers goes too.
	if b.opts.Auth != nil && a.Conversation.ConversationType == "personal" && a.From.AadObjectID != "" {
		auditWhy := "the person removed the app from their chat"
		if _, err := b.opts.Auth.Revoke(ctx, store.MCPConnectionFilter{TenantID: tenant, UserID: a.From.AadObjectID}, "", auditWhy); err != nil {
			return err
		}
	}
	return nil
}
