package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
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
}

// PutConversation stores or replaces a conversation reference. A zero
// UpdatedAt is set from the store's clock.
func (s *Store) PutConversation(ctx context.Context, ref ConversationRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", ref.Key); err != nil {
		return err
	}
	if ref.UpdatedAt.IsZero() {
		ref.UpdatedAt = s.now()
	}
	key := []byte(ref.Key)
	value, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketConversations)).Put(key, value)
	})
	if err != nil {
		return fmt.Errorf("store: put conversation %s: %w", ref.Key, err)
	}
	return nil
}

// Conversation returns a conversation reference.
func (s *Store) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	return getJSON[ConversationRef](ctx, s, bucketConversations, "conversation", key)
}

// DeleteConversation removes a conversation reference; unknown keys are not an error.
func (s *Store) DeleteConversation(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", key); err != nil {
		return err
	}
	k := []byte(key)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketConversations)).Delete(k)
	})
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", key, err)
	}
	return nil
}
