package bot

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/store"
)

// A conversation reference can be taken from any activity, and its
// serviceUrl can change (Microsoft's "Send proactive messages": "store the
// conversation reference … the service URL can change"). The bot keeps the
// stored reference of every conversation it answers current, so that a
// later proactive send goes where Teams now expects it.

// maxKnownRefs bounds the references the bot remembers as current.
const maxKnownRefs = 10_000

// knownRefs remembers, per conversation, the serviceUrl last seen stored,
// so that an unchanged reference costs no store read or write per message.
type knownRefs struct {
	mu   sync.Mutex
	urls map[string]string
}

func (k *knownRefs) current(key, serviceURL string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.urls != nil && k.urls[key] == serviceURL
}

func (k *knownRefs) remember(key, serviceURL string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.urls == nil || len(k.urls) >= maxKnownRefs {
		k.urls = map[string]string{}
	}
	k.urls[key] = serviceURL
}

func (k *knownRefs) forget(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.urls, key)
}

// refreshReference keeps the stored reference of a's conversation current:
// a personal or group chat that has none gets one (the bot is evidently in
// it), and a reference whose serviceUrl changed is rewritten with the new
// one. A channel's reference belongs to its team and is made at install;
// it is only brought up to date here. A failure is logged, never fatal: the
// person's message is still answered.
func (b *Bot) refreshReference(ctx context.Context, a *schema.Activity) {
	tenant := conversationTenant(a)
	if b.opts.Store == nil || tenant == "" || a.ServiceURL == "" {
		return
	}
	key := referenceKey(a)
	if b.refs.current(key, a.ServiceURL) {
		return
	}
	inTeam := key != ConversationKey(tenant, a.Conversation.ID)
	ref, err := b.opts.Store.Conversation(ctx, key)
	switch {
	case err == nil && ref.ServiceURL == a.ServiceURL:
		b.refs.remember(key, a.ServiceURL)
		return
	case err == nil:
		var cr schema.ConversationReference
		if json.Unmarshal(ref.Reference, &cr) == nil {
			cr.ServiceURL = a.ServiceURL
			if raw, err := json.Marshal(cr); err == nil {
				ref.Reference = raw
			}
		}
		b.logger.Info("conversation's service URL changed; reference updated", "tenant", tenant, "conversation", ref.ConversationID)
		ref.ServiceURL, ref.UpdatedAt = a.ServiceURL, b.now()
	case errors.Is(err, store.ErrNotFound) && !inTeam:
		raw, err := json.Marshal(activity.GetCoversationReference(*a))
		if err != nil {
			return
		}
		ref = store.ConversationRef{Key: key, TenantID: tenant, ConversationID: a.Conversation.ID, ServiceURL: a.ServiceURL,
			ChannelID: a.ChannelID, BotID: a.Recipient.ID, Reference: raw}
		b.logger.Info("conversation reference taken from a message", "tenant", tenant, "conversation", a.Conversation.ID)
	case errors.Is(err, store.ErrNotFound):
		return
	default:
		b.logger.Warn("conversation reference not read", "tenant", tenant, "conversation", a.Conversation.ID, "err", err)
		return
	}
	if err := b.opts.Store.PutConversation(ctx, ref); err != nil {
		b.logger.Warn("conversation reference not stored", "tenant", tenant, "conversation", ref.ConversationID, "err", err)
		return
	}
	b.refs.remember(key, a.ServiceURL)
}
