package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/cards"
	"teamsbot/internal/telemetry"
	"teamsbot/store"
)

// ErrNoAnswer means a run has no answer in Teams that the bot can update:
// it was never delivered (the run is unknown, failed before anything was
// sent, or ran before deliveries were kept), or the bot has since left the
// conversation it went to. The error wraps store.ErrNotFound too.
var ErrNoAnswer = errors.New("bot: no delivered answer to update")

// deliveryWriteTimeout bounds recording a delivery after the answer is
// sent, even when the turn's own time is up.
const deliveryWriteTimeout = 10 * time.Second

// referenceKey is the key of the stored conversation reference that
// reaches a's conversation. A channel message comes in a thread
// ("19:…;messageid=…") of a team; the reference was stored when the bot
// was added to the team, under the team's id (its General channel's).
// Elsewhere the conversation is the one the bot was added to.
func referenceKey(a *schema.Activity) string {
	if team, _ := a.ChannelData["team"].(map[string]interface{}); team != nil {
		if id, _ := team["id"].(string); id != "" {
			return ConversationKey(conversationTenant(a), id)
		}
	}
	return ConversationKey(conversationTenant(a), a.Conversation.ID)
}

// recordDelivery keeps where a run's answer went, so that UpdateAnswer can
// replace its cards later. A failure is logged and does not fail the turn:
// the person has the answer; only a later update of it is lost.
func (b *Bot) recordDelivery(ctx context.Context, a *schema.Activity, runID string, ids []string) {
	if b.opts.Store == nil || runID == "" || len(ids) == 0 {
		return
	}
	// The answer is out: record it even when the turn was cancelled.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWriteTimeout)
	defer cancel()
	ctx, span := telemetry.StoreSpan(ctx, b.tracer, "PutDelivery")
	defer span.End()
	err := b.opts.Store.PutDelivery(ctx, store.Delivery{
		RunID:           runID,
		ConversationKey: referenceKey(a),
		ConversationID:  a.Conversation.ID,
		ActivityIDs:     ids,
		SentAt:          b.now(),
	})
	if err != nil {
		telemetry.Fail(span, "store", "the delivery was not recorded")
		b.logger.WarnContext(ctx, "answer delivered but not recorded; its cards cannot be updated later",
			"tenant", conversationTenant(a), "conversation", a.Conversation.ID, "run", runID, "cards", len(ids), "err", err)
	}
}

// UpdateAnswer replaces the cards of a run's answer in Teams with cs, for
// when what the answer shows has changed. Each card the answer had is
// updated in place (the Bot Connector's update activity, on the id kept
// when it was sent); cards beyond those are sent as new messages, and
// answer cards beyond len(cs) are deleted. The kept ids are then replaced
// by those of the answer as it now stands. The serviceUrl comes from the
// conversation reference stored when the bot was added, so an update
// follows a serviceUrl Teams has changed since.
//
// Calls for the same run must not overlap: each reads the kept ids and
// writes them back.
//
// It returns an error wrapping ErrNoAnswer (and store.ErrNotFound) when
// the run's answer was never recorded or the bot is no longer in its
// conversation. After a failed call to the Bot Connector, the ids of what
// was done are still kept, and the error says what failed.
func (b *Bot) UpdateAnswer(ctx context.Context, runID string, cs []cards.Card) error {
	if err := b.updateAnswer(ctx, runID, cs); err != nil {
		return fmt.Errorf("bot: update answer of run %.128s: %w", runID, err)
	}
	return nil
}

func (b *Bot) updateAnswer(ctx context.Context, runID string, cs []cards.Card) error {
	if len(cs) == 0 {
		return errors.New("no cards to show")
	}
	if b.opts.Store == nil {
		return ErrNoStore
	}
	d, err := b.opts.Store.Delivery(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no delivery recorded: %w", ErrNoAnswer, err)
	}
	if err != nil {
		return err
	}
	ref, err := b.opts.Store.Conversation(ctx, d.ConversationKey)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: the bot is no longer in conversation %s: %w", ErrNoAnswer, d.ConversationID, err)
	}
	if err != nil {
		return err
	}

	message := func(c cards.Card) *outActivity {
		bot := schema.ChannelAccount{ID: ref.BotID}
		conv := schema.ConversationAccount{ID: d.ConversationID}
		return withCard(&outActivity{Type: schema.Message, From: &bot, Conversation: &conv}, c)
	}
	// ids is the answer as it stands, built as the calls succeed; on a
	// failure the cards not reached yet keep their old ids.
	ids := make([]string, 0, max(len(cs), len(d.ActivityIDs)))
	var callErr error
	for i, c := range cs {
		if i < len(d.ActivityIDs) {
			if callErr = b.conn.Update(ctx, ref.ServiceURL, d.ConversationID, d.ActivityIDs[i], message(c)); callErr != nil {
				ids = append(ids, d.ActivityIDs[i:]...)
				break
			}
			ids = append(ids, d.ActivityIDs[i])
			continue
		}
		var id string
		if id, callErr = b.conn.Send(ctx, ref.ServiceURL, d.ConversationID, "", message(c)); callErr != nil {
			break
		}
		if id == "" {
			// As in a turn: without its id, the cards after this one
			// would have no place in the kept ids.
			callErr = fmt.Errorf("%w: no id for the new card %d; the cards after it were not sent", ErrConnector, i+1)
			break
		}
		ids = append(ids, id)
	}
	if callErr == nil {
		for i, id := range d.ActivityIDs[min(len(cs), len(d.ActivityIDs)):] {
			if callErr = b.conn.Remove(ctx, ref.ServiceURL, d.ConversationID, id); callErr != nil {
				ids = append(ids, d.ActivityIDs[len(cs)+i:]...)
				break
			}
		}
	}

	// ids is never empty: the first card's old id is always in it.
	var putErr error
	if !slices.Equal(ids, d.ActivityIDs) {
		d.ActivityIDs = ids
		d.SentAt = b.now()
		// What was sent is out: record it even if ctx has just ended.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWriteTimeout)
		defer cancel()
		if putErr = b.opts.Store.PutDelivery(wctx, d); putErr != nil {
			putErr = fmt.Errorf("recording the new card ids: %w", putErr)
		}
	}
	return errors.Join(callErr, putErr)
}
