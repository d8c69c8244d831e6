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
	inTeam := key != ConversationKey(tenant, a.Conversation.ID)
	seen := namesSeen(a, inTeam)
	// What is known of the reference: its service URL and the names.
	known := a.ServiceURL + "\x00" + seen.Kind + "\x00" + seen.Title + "\x00" + seen.TeamName + "\x00" + seen.ChannelName
	if b.refs.current(key, known) {
		return
	}
	ref, err := b.opts.Store.Conversation(ctx, key)
	switch {
	case err == nil && ref.ServiceURL == a.ServiceURL && !seen.renames(ref):
		b.refs.remember(key, known)
		return
	case err == nil && ref.ServiceURL == a.ServiceURL:
		seen.apply(&ref)
		ref.UpdatedAt = b.now()
		b.logger.Info("conversation's names changed; reference updated", "tenant", tenant, "conversation", ref.ConversationID)
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
		seen.apply(&ref)
	case errors.Is(err, store.ErrNotFound) && !inTeam:
		raw, err := json.Marshal(activity.GetCoversationReference(*a))
		if err != nil {
			return
		}
		ref = store.ConversationRef{Key: key, TenantID: tenant, ConversationID: a.Conversation.ID, ServiceURL: a.ServiceURL,
			ChannelID: a.ChannelID, BotID: a.Recipient.ID, Reference: raw}
		seen.apply(&ref)
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
	b.refs.remember(key, known)
}

// conversationNames are the kind and names of a conversation that Teams
// sends with its activities (see "Conversation events in your Teams bot"
// in the Teams platform documentation: conversation.conversationType,
// conversation.name of a group chat, channelData.team.name and
// channelData.channel.name), which the console shows.
type conversationNames struct {
	Kind, Title, TeamName, ChannelName string
}

// namesSeen reads the names of a's conversation. A message in a
// channel's thread (inTeam) is kept under its team's reference: only
// the team's name is that reference's, not the channel the message was
// in.
func namesSeen(a *schema.Activity, inTeam bool) conversationNames {
	var n conversationNames
	n.Kind = a.Conversation.ConversationType
	if n.Kind == "groupChat" {
		n.Title = a.Conversation.Name
	}
	if team, _ := a.ChannelData["team"].(map[string]interface{}); team != nil {
		n.TeamName, _ = team["name"].(string)
	}
	if ch, _ := a.ChannelData["channel"].(map[string]interface{}); ch != nil && !inTeam {
		n.ChannelName, _ = ch["name"].(string)
	}
	return n
}

// renames reports whether n says something ref does not: names that
// Teams did not send leave the stored ones as they are.
func (n conversationNames) renames(ref store.ConversationRef) bool {
	c := ref
	n.apply(&c)
	return c.Kind != ref.Kind || c.Title != ref.Title || c.TeamName != ref.TeamName || c.ChannelName != ref.ChannelName
}

// apply puts the names n has into ref.
func (n conversationNames) apply(ref *store.ConversationRef) {
	for _, f := range []struct {
		to   *string
		from string
	}{{&ref.Kind, n.Kind}, {&ref.Title, n.Title}, {&ref.TeamName, n.TeamName}, {&ref.ChannelName, n.ChannelName}} {
		if f.from != "" {
			*f.to = f.from
		}
	}
}
