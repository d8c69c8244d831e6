package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// Errors of triggered runs.
var (
	// ErrNoConversation means the app is not installed in the conversation
	// a triggered run names (no reference is stored for it). It wraps
	// store.ErrNotFound.
	ErrNoConversation = fmt.Errorf("bot: the app is not installed in that conversation: %w", store.ErrNotFound)
	// ErrConversationGone means the Bot Connector refused a send because
	// the app was removed from the conversation; the reference is
	// forgotten and the conversation's triggers are paused.
	ErrConversationGone = errors.New("bot: the app was removed from the conversation")
)

// AuditConversationRemoved is the audit action written when the app
// leaves a conversation: uninstalled there, or refused by the Bot
// Connector (403). Its fields name the conversation, why, and every
// trigger paused with it, before and after.
const AuditConversationRemoved = "bot.conversation.removed"

// Why a conversation was removed, in the bot.conversation.removed record.
const (
	RemovedUninstalled = "uninstalled"
	RemovedForbidden   = "forbidden"
)

// TriggeredRun asks for a run that no person asked for, answered into a
// conversation where the app is installed.
type TriggeredRun struct {
	TenantID, AgentID, Text string
	// ConversationID is the conversation as stored at install, the id the
	// admin console lists.
	ConversationID string
	// Trigger names what started the run, for the card.
	Trigger cards.Trigger
}

// TriggeredResult is what a triggered run did.
type TriggeredResult struct {
	RunID string
	// ViewIDs are the views the run made; they have no owner.
	ViewIDs []string
	// ActivityIDs are the messages posted, in card order.
	ActivityIDs []string
	// Failed reports that the agent failed and a failure card was posted.
	Failed bool
}

// RunTriggered runs the agent with no person (its views are for the
// tenant's agent readers) and posts the answer into the conversation
// proactively, through the same connector, token and retries as replies.
// It returns once the answer is posted. ErrNoConversation: the app is not
// installed there. ErrConversationGone: the Bot Connector answered 403;
// the conversation's reference is then forgotten, its triggers paused and
// an audit record written, so nothing is retried there. ErrClosed: the
// bot is shutting down.
func (b *Bot) RunTriggered(ctx context.Context, r TriggeredRun) (TriggeredResult, error) {
	if b.opts.Store == nil {
		return TriggeredResult{}, ErrNoStore
	}
	if !b.begin() {
		return TriggeredResult{}, ErrClosed
	}
	defer b.turns.Done()
	ctx, span := b.startTriggered(ctx, r.TenantID)
	defer span.End()
	// The run lives as long as the caller wants it, but not past the
	// bot's own shutdown or the turn time.
	ctx, cancel := context.WithTimeout(ctx, b.opts.TurnTimeout)
	defer cancel()
	stop := context.AfterFunc(b.ctx, cancel)
	defer stop()

	start := b.now()
	key := ConversationKey(r.TenantID, r.ConversationID)
	ref, err := b.opts.Store.Conversation(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return TriggeredResult{}, fmt.Errorf("%w: %.128s", ErrNoConversation, r.ConversationID)
	}
	if err != nil {
		return TriggeredResult{}, fmt.Errorf("bot: triggered run: %w", err)
	}
	if err := b.conn.ready(ctx, ref.ServiceURL); err != nil {
		return TriggeredResult{}, fmt.Errorf("bot: triggered run into %s: %w", r.ConversationID, err)
	}
	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		return TriggeredResult{}, fmt.Errorf("bot: triggered run waiting for a slot: %w", ctx.Err())
	}
	req := agent.Request{Person: agent.Person{TenantID: r.TenantID}, AgentID: r.AgentID, Text: r.Text}
	// A run without a person reads the conversation's memory, and adds
	// its turn, only where the tenant's admin allowed it: what people
	// said there was said to the agent, not to a script.
	if ts, err := b.opts.Store.TenantSettings(ctx, r.TenantID); err == nil && ts.HistoryForTriggers {
		req.Conversation, req.Shared = r.ConversationID, true
	}
	ans, runErr := b.opts.Agent.Run(ctx, req)
	<-b.sem

	res := TriggeredResult{RunID: ans.RunID}
	for _, v := range ans.Views {
		res.ViewIDs = append(res.ViewIDs, v.ID)
	}
	var answer []cards.Card
	var ai *aiAnswer
	switch {
	case runErr == nil || errors.Is(runErr, agent.ErrModel) && len(ans.Views) > 0:
		if runErr != nil {
			res.Failed = true
			b.logger.Error("triggered run failed after making views", "tenant", r.TenantID, "conversation", r.ConversationID, "run", ans.RunID, "err", runErr)
		}
		trig := r.Trigger
		answer = b.triggeredCards(ans, &trig)
		ai = b.aiMarks(ans)
	default:
		res.Failed = true
		reference := ans.RunID
		if reference == "" {
			reference = "trigger"
		}
		b.logger.Error("triggered run failed", "tenant", r.TenantID, "conversation", r.ConversationID, "reference", reference, "err", runErr)
		answer = []cards.Card{cards.RunFailed(reference)}
	}

	sendCtx := withTenant(ctx, r.TenantID)
	for i, c := range answer {
		bot := schema.ChannelAccount{ID: ref.BotID}
		conv := schema.ConversationAccount{ID: ref.ConversationID}
		out := withCard(&outActivity{Type: schema.Message, From: &bot, Conversation: &conv}, c)
		if ai != nil {
			// A model wrote it, though no person asked: labelled and cited
			// like any answer.
			ai.mark(out, i == 0)
		}
		id, err := b.conn.Send(sendCtx, ref.ServiceURL, ref.ConversationID, "", out)
		if err != nil {
			endTurn(ctx, "failed", ans.RunID)
		}
		if errors.Is(err, ErrNotInConversation) {
			b.metrics.turns.WithLabelValues("failed").Inc()
			if _, gerr := b.conversationGone(context.WithoutCancel(ctx), r.TenantID, r.ConversationID, RemovedForbidden); gerr != nil {
				b.logger.Error("the app was removed from a conversation, but its triggers could not be paused", "tenant", r.TenantID, "conversation", r.ConversationID, "err", gerr)
			}
			return res, fmt.Errorf("%w: %.128s: %w", ErrConversationGone, r.ConversationID, err)
		}
		if err != nil {
			b.metrics.turns.WithLabelValues("failed").Inc()
			return res, fmt.Errorf("bot: triggered run into %s: %w", r.ConversationID, err)
		}
		if id == "" {
			break
		}
		res.ActivityIDs = append(res.ActivityIDs, id)
	}
	outcome := "answered"
	if res.Failed {
		outcome = "failed"
	}
	endTurn(ctx, outcome, ans.RunID)
	b.metrics.turns.WithLabelValues(outcome).Inc()
	b.metrics.turnDuration.Observe(b.now().Sub(start).Seconds())
	if ans.RunID != "" && len(res.ActivityIDs) > 0 {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliveryWriteTimeout)
		defer cancel()
		if err := b.opts.Store.PutDelivery(wctx, store.Delivery{
			RunID: ans.RunID, ConversationKey: key, ConversationID: ref.ConversationID,
			ActivityIDs: res.ActivityIDs, SentAt: b.now(),
		}); err != nil {
			b.logger.Warn("triggered answer delivered but not recorded", "tenant", r.TenantID, "conversation", r.ConversationID, "run", ans.RunID, "err", err)
		}
	}
	return res, nil
}

// triggeredCards renders a triggered run's answer.
func (b *Bot) triggeredCards(ans agent.Answer, t *cards.Trigger) []cards.Card {
	ca := b.cardAnswer(ans)
	ca.Trigger = t
	return cards.AnswerCards(ca, b.cardOptions())
}

// conversationGone forgets a conversation the app has left and pauses
// the triggers that post there, with one audit record for the tenant's
// admins, all in one commit. A conversation already forgotten is left as
// it is: one removal, one record, however many paths report it.
func (b *Bot) conversationGone(ctx context.Context, tenant, conversationID, why string) ([]store.Trigger, error) {
	reason := "The app was removed from this conversation."
	if why == RemovedForbidden {
		reason = "Teams refused to post into this conversation (403): the app is no longer in it."
	}
	at := b.now()
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	paused, err := b.opts.Store.RemoveConversation(ctx, ConversationKey(tenant, conversationID), tenant, conversationID, reason,
		func(pairs [][2]store.Trigger) []store.AuditRecord {
			list := make([]map[string]any, 0, len(pairs))
			for _, p := range pairs {
				list = append(list, map[string]any{
					"trigger": p[0].ID, "name": textclip.Clip(p[0].Name, 256),
					"before": map[string]any{"paused": p[0].Paused},
					"after":  map[string]any{"paused": p[1].Paused, "reason": p[1].PausedReason},
				})
			}
			return []store.AuditRecord{{TenantID: tenant, Time: at, Action: AuditConversationRemoved, Fields: map[string]any{
				"conversation": clipID(conversationID), "why": why, "paused": list,
			}}}
		})
	b.seen.forget("welcome\x00" + conversationID)
	b.refs.forget(ConversationKey(tenant, conversationID))
	if errors.Is(err, store.ErrNotFound) {
		// Another path (the other of Teams' two announcements of one
		// uninstall, or a refused send) removed it first and wrote the
		// one record of it.
		b.logger.Debug("removal already recorded", "tenant", tenant, "conversation", conversationID, "why", why)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bot: removing conversation %s: %w", conversationID, err)
	}
	b.logger.Info("removed from conversation", "tenant", tenant, "conversation", conversationID, "why", why, "triggers_paused", len(paused))
	return paused, nil
}
