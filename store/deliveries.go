package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// maxDeliveryIDs bounds the activity ids of one delivery: an answer is a
// handful of cards, and a run that claims thousands is a bug.
const maxDeliveryIDs = 100

// Delivery says where a run's answer went in Teams, so that its cards can
// be replaced later (a view's button changed, a run corrected): the
// conversation, and the id the Bot Connector gave each card's activity.
type Delivery struct {
	RunID string `json:"runId"`
	// ConversationKey is the key of the conversation reference (see
	// Conversation) that says how to reach ConversationID: its own, or for
	// a channel thread the team's.
	ConversationKey string `json:"conversationKey"`
	// ConversationID is the conversation the cards were sent to, as the
	// Bot Connector names it (for a channel, the thread:
	// "19:…;messageid=…").
	ConversationID string `json:"conversationId"`
	// ActivityIDs are the ids of the answer's cards in the order they were
	// sent; the first card's id is the "working on it" card's when the
	// answer replaced it.
	ActivityIDs []string  `json:"activityIds"`
	SentAt      time.Time `json:"sentAt"`
}

// PutDelivery stores or replaces where a run's answer went. The run must
// be stored already (ErrNotFound otherwise), so that no delivery outlives
// the run it belongs to. A zero SentAt is set from the store's clock. Like
// SaveRun it goes through the shared writer, so concurrent turns record
// their deliveries in the same commits as each other's runs; and as the
// answer is already out when it is called, it is a lazy write: found alone
// by an idle writer it waits up to 5 ms for the next write (a next turn's
// run, most likely) to share a commit, rather than make that write wait.
func (s *boltStore) PutDelivery(ctx context.Context, d Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("delivery run", d.RunID); err != nil {
		return err
	}
	if err := checkID("delivery conversation key", d.ConversationKey); err != nil {
		return err
	}
	if err := checkID("delivery conversation", d.ConversationID); err != nil {
		return err
	}
	switch n := len(d.ActivityIDs); {
	case n == 0:
		return invalid("delivery of run %s: no activity ids", d.RunID)
	case n > maxDeliveryIDs:
		return invalid("delivery of run %s: %d activity ids, at most %d", d.RunID, n, maxDeliveryIDs)
	}
	for _, id := range d.ActivityIDs {
		if err := checkID("delivered activity", id); err != nil {
			return fmt.Errorf("delivery of run %s: %w", d.RunID, err)
		}
	}
	if d.SentAt.IsZero() {
		d.SentAt = s.now()
	}
	key := []byte(d.RunID)
	value, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("delivery of run %s: %w", d.RunID, err)
	}
	err = s.writeLazy(ctx, func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte(bucketRuns)).Get(key) == nil {
			return fmt.Errorf("run: %w", ErrNotFound)
		}
		return tx.Bucket([]byte(bucketDeliveries)).Put(key, value)
	})
	if err != nil {
		return fmt.Errorf("store: put delivery of run %.128s: %w", d.RunID, err)
	}
	return nil
}

// Delivery returns where a run's answer went; ErrNotFound when it was
// never recorded (the run failed before its answer was sent, or it ran
// before deliveries were kept).
func (s *boltStore) Delivery(ctx context.Context, runID string) (Delivery, error) {
	return getJSON[Delivery](ctx, s, bucketDeliveries, "delivery of run", runID)
}
