package store

import (
	"context"
	"fmt"
	"time"
)

// ConversationRef is what a proactive send needs, kept per conversation.
type ConversationRef struct {
	Key            string    `json:"key"` // tenant + conversation id
	TenantID       string    `json:"tenantId"`
	ConversationID string    `json:"conversationId"`
	ServiceURL     string    `json:"serviceUrl"`
	ChannelID      string    `json:"channelId"`
	BotID          string    `json:"botId"`
	Reference      []byte    `json:"reference"` // the Bot Framework ConversationReference JSON
	UpdatedAt      time.Time `json:"updatedAt"`
	// Kind is Teams' conversation.conversationType: "personal",
	// "groupChat" or "channel" ("" in references of earlier versions).
	Kind string `json:"kind,omitempty"`
	// Title is a group chat's name (conversation.name), TeamName and
	// ChannelName a channel's team and channel (channelData.team.name,
	// channelData.channel.name), as the bot last saw them: for the
	// console, which shows conversations by name. Each is "" when Teams
	// did not say.
	Title       string `json:"title,omitempty"`
	TeamName    string `json:"teamName,omitempty"`
	ChannelName string `json:"channelName,omitempty"`
}

// maxConversationName bounds the names kept with a reference.
const maxConversationName = 256

// PutConversation stores or replaces a conversation reference. A zero
// UpdatedAt is set from the store's clock. Its TenantID, by which the
// references are listed, must be valid UTF-8 without NUL bytes.
func (s *Store) PutConversation(ctx context.Context, ref ConversationRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", ref.Key); err != nil {
		return err
	}
	if err := checkText("conversation tenant", ref.TenantID, maxIDLen); err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	if ref.UpdatedAt.IsZero() {
		ref.UpdatedAt = s.now()
	}
	// Names come from the activities of Teams: kept fitting, never refused.
	ref.Kind = cutText(ref.Kind, 32)
	ref.Title, ref.TeamName, ref.ChannelName = cutText(ref.Title, maxConversationName), cutText(ref.TeamName, maxConversationName), cutText(ref.ChannelName, maxConversationName)
	enc, err := encode(ref)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	if err := s.write(ctx, false, func(w writer) error { return w.putConversation(enc) }); err != nil {
		return fmt.Errorf("store: put conversation %s: %w", ref.Key, err)
	}
	return nil
}

// Conversation returns a conversation reference.
func (s *Store) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	return get(ctx, s, "conversation", key, reader.conversation)
}

// DeleteConversation removes a conversation reference; unknown keys are not an error.
func (s *Store) DeleteConversation(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", key); err != nil {
		return err
	}
	if err := s.write(ctx, false, func(w writer) error { return w.deleteConversation(key) }); err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", key, err)
	}
	return nil
}

// Conversations returns the conversation references of tenant, ordered by
// key. It reads only the tenant's; a tenant with none has none, and no
// error.
func (s *Store) Conversations(ctx context.Context, tenant string) ([]ConversationRef, error) {
	return list(ctx, s, "conversations", tenant, func(r reader) ([]ConversationRef, error) { return r.conversations(tenant) })
}
