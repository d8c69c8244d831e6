package bot

import (
	"context"
	"errors"
	"fmt"
	"teamsbot/cards"
	"teamsbot/store"

	"github.com/infracloudio/msbotbuilder-go/schema"
)

// ErrNoStore means the bot was built without a store, so it keeps no
// conversation references and cannot send proactively.
var ErrNoStore = errors.New("bot: no store configured")

// SendProactive posts a card, unprompted, to a conversation the bot was
// added to, using the reference stored at install (key is
// ConversationKey(tenant, conversation id)), and returns the id the Bot
// Connector gave the new activity, with which it can be updated later.
// store.ErrNotFound (wrapped) means the bot is not, or no longer, in that
// conversation.
func (b *Bot) SendProactive(ctx context.Context, key string, c cards.Card) (string, error) {
	ref, out, err := b.proactive(ctx, key, c)
	if err != nil {
		return "", fmt.Errorf("bot: proactive send to %s: %w", key, err)
	}
	id, err := b.conn.Send(withTenant(ctx, ref.TenantID), ref.ServiceURL, ref.ConversationID, "", out)
	if err != nil {
		return "", fmt.Errorf("bot: proactive send to %s: %w", key, err)
	}
	return id, nil
}

// UpdateProactive replaces an activity the bot sent to a conversation (its
// id as SendProactive returned it) with another card.
func (b *Bot) UpdateProactive(ctx context.Context, key, activityID string, c cards.Card) error {
	ref, out, err := b.proactive(ctx, key, c)
	if err == nil {
		err = b.conn.Update(withTenant(ctx, ref.TenantID), ref.ServiceURL, ref.ConversationID, activityID, out)
	}
	if err != nil {
		return fmt.Errorf("bot: proactive update in %s: %w", key, err)
	}
	return nil
}

// proactive reads a stored conversation reference and builds a message
// carrying c from the bot to that conversation.
func (b *Bot) proactive(ctx context.Context, key string, c cards.Card) (store.ConversationRef, *outActivity, error) {
	if b.opts.Store == nil {
		return store.ConversationRef{}, nil, ErrNoStore
	}
	ref, err := b.opts.Store.Conversation(ctx, key)
	if err != nil {
		return store.ConversationRef{}, nil, err
	}
	bot := schema.ChannelAccount{ID: ref.BotID}
	conv := schema.ConversationAccount{ID: ref.ConversationID}
	return ref, withCard(&outActivity{Type: schema.Message, From: &bot, Conversation: &conv}, c), nil
}
