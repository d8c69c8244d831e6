package store

import (
	"context"
	"errors"
	"fmt"
	"time"
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

// check checks a delivery before it is stored.
func (d Delivery) check() error {
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
	return nil
}

// PutDelivery stores or replaces where a run's answer went. The run must
// be stored already (ErrNotFound otherwise), so that no delivery outlives
// the run it belongs to: a sweep deletes it with its run. A zero SentAt is
// set from the store's clock. On bbolt, like SaveRun it goes through the
// shared writer, so concurrent turns record their deliveries in the same
// commits as each other's runs; and as the answer is already out when it
// is called, it is a lazy write: found alone by an idle writer it waits up
// to 5 ms for the next write (a next turn's run, most likely) to share a
// commit, rather than make that write wait.
func (s *Store) PutDelivery(ctx context.Context, d Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.check(); err != nil {
		return err
	}
	if d.SentAt.IsZero() {
		d.SentAt = s.now()
	}
	enc, err := encode(d)
	if err != nil {
		return fmt.Errorf("delivery of run %s: %w", d.RunID, err)
	}
	err = s.write(ctx, true, func(w writer) error {
		if _, err := w.run(d.RunID); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("run: %w", ErrNotFound)
		} else if err != nil {
			return err
		}
		return w.putDelivery(enc)
	})
	if err != nil {
		return fmt.Errorf("store: put delivery of run %.128s: %w", d.RunID, err)
	}
	return nil
}

// Delivery returns where a run's answer went; ErrNotFound when it was
// never recorded (the run failed before its answer was sent, or it ran
// before deliveries were kept).
func (s *Store) Delivery(ctx context.Context, runID string) (Delivery, error) {
	return get(ctx, s, "delivery of run", runID, reader.delivery)
}
