package store

import (
	"bytes"
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
// UpdatedAt is set from the store's clock. Its TenantID, a part of the
// conversations_by_tenant key, must be valid UTF-8 without NUL bytes.
func (s *boltStore) PutConversation(ctx context.Context, ref ConversationRef) error {
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
	key := []byte(ref.Key)
	value, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		if err := unindexConversation(tx, key); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketConvsByTenant)).Put(indexKey(key, ref.TenantID), []byte{}); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketConversations)).Put(key, value)
	})
	if err != nil {
		return fmt.Errorf("store: put conversation %s: %w", ref.Key, err)
	}
	return nil
}

// Conversation returns a conversation reference.
func (s *boltStore) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	return getJSON[ConversationRef](ctx, s, bucketConversations, "conversation", key)
}

// DeleteConversation removes a conversation reference; unknown keys are not an error.
func (s *boltStore) DeleteConversation(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", key); err != nil {
		return err
	}
	k := []byte(key)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		if err := unindexConversation(tx, k); err != nil {
			return err
		}
		return tx.Bucket([]byte(bucketConversations)).Delete(k)
	})
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", key, err)
	}
	return nil
}

// unindexConversation deletes the conversations_by_tenant entry of the
// stored reference key, if there is one.
func unindexConversation(tx *bbolt.Tx, key []byte) error {
	old := tx.Bucket([]byte(bucketConversations)).Get(key)
	if old == nil {
		return nil
	}
	var hdr struct {
		TenantID string `json:"tenantId"`
	}
	if err := json.Unmarshal(old, &hdr); err != nil {
		return fmt.Errorf("conversation %q: stored record: %w", key, err)
	}
	return tx.Bucket([]byte(bucketConvsByTenant)).Delete(indexKey(key, hdr.TenantID))
}

// Conversations returns the conversation references of tenant, ordered by
// key. It reads only the tenant's, through conversations_by_tenant; a
// tenant with none has none, and no error.
func (s *boltStore) Conversations(ctx context.Context, tenant string) ([]ConversationRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("conversations tenant", tenant); err != nil {
		return nil, err
	}
	prefix := indexKey(nil, tenant)
	var out []ConversationRef
	err := s.read(func(tx *bbolt.Tx) error {
		convs := tx.Bucket([]byte(bucketConversations))
		c := tx.Bucket([]byte(bucketConvsByTenant)).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			key := k[len(prefix):]
			data := convs.Get(key)
			if data == nil {
				return fmt.Errorf("conversations_by_tenant: no conversation %q", key)
			}
			var ref ConversationRef
			if err := json.Unmarshal(data, &ref); err != nil {
				return fmt.Errorf("conversation %q: %w", key, err)
			}
			out = append(out, ref)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: conversations of tenant %s: %w", tenant, err)
	}
	return out, nil
}
