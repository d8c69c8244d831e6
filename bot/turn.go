package bot

import (
	"context"
	"errors"
	"sync"
	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/offstack"
	"time"

	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/infracloudio/msbotbuilder-go/schema"
)

// onMessage accepts a message: it filters retries, refuses messages
// without a person, and starts the turn in the background, in the trace
// of the request (reqCtx).
func (b *Bot) onMessage(reqCtx context.Context, t *activity.TurnContext) (schema.Activity, error) {
	a := t.Activity
	dedupKey := ""
	if a.ID != "" {
		dedupKey = a.Conversation.ID + "\x00" + a.ID
		if !b.firstArrival(dedupKey) {
			b.metrics.turns.WithLabelValues("duplicate").Inc()
			b.logger.Info("retried activity ignored", "conversation", a.Conversation.ID, "activity", a.ID)
			return schema.Activity{}, nil
		}
	}
	p := personOf(&a)
	if isAnswer(&a) {
		// A question card's button: the run waiting for it goes on.
		if !b.begin() {
			b.forgetArrival(dedupKey)
			return schema.Activity{}, ErrClosed
		}
		b.recordArrival(dedupKey)
		go func() {
			defer b.turns.Done()
			ctx, cancel := context.WithTimeout(withTenant(b.ctx, p.TenantID), sendTimeout)
			defer cancel()
			b.answer(ctx, &a, p)
		}()
		return schema.Activity{}, nil
	}
	if !b.begin() {
		b.forgetArrival(dedupKey)
		return schema.Activity{}, ErrClosed
	}
	if b.pending.Add(1) > int64(b.opts.MaxPendingTurns) {
		b.pending.Add(-1)
		b.turns.Done()
		b.forgetArrival(dedupKey)
		b.metrics.turns.WithLabelValues("busy").Inc()
		b.logger.Warn("too many turns in flight; asking Teams to retry", "pending", b.opts.MaxPendingTurns)
		return schema.Activity{}, ErrBusy
	}
	// Accepted: from here on a retry of it is a duplicate, also after a
	// restart.
	b.recordArrival(dedupKey)
	go func() {
		tctx, span := b.startTurn(reqCtx, &a, p)
		over := func() {
			span.End()
			b.pending.Add(-1)
			b.turns.Done()
		}
		var run bool
		offstack.Run(func() { run = b.screen(tctx, &a, p) })
		if !run {
			over()
			return
		}
		b.runTurn(tctx, &a, p, over)
	}()
	return schema.Activity{}, nil
}

// screen decides whether a message is run: it passes the gate, and is not
// a command (which it answers). The turn's goroutine runs it off its own
// stack (offstack), which stays small while the run waits for its model.
func (b *Bot) screen(tctx context.Context, a *schema.Activity, p agent.Person) bool {
	ctx, cancel := context.WithTimeout(tctx, sendTimeout)
	defer cancel()
	if r := b.gate(ctx, a, p); r != nil {
		endTurn(tctx, "refused", "")
		b.refuseMessage(ctx, a, p, r)
		return false
	}
	b.refreshReference(ctx, a)
	if b.command(ctx, a, p) {
		endTurn(tctx, "command", "")
		return false
	}
	return true
}

// firstArrival reports whether the activity key arrives for the first time
// within dedupTTL: in memory first (a retry racing its original costs
// nothing, and only one of them gets past), then in the store, which
// remembers arrivals across a restart (recordArrival). When the store
// cannot answer, the message is run: a rare duplicate answer beats a lost
// question.
func (b *Bot) firstArrival(key string) bool {
	if !b.seen.firstTime(key, b.now()) {
		return false
	}
	if b.opts.Store == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(b.ctx, sendTimeout)
	defer cancel()
	seen, err := b.opts.Store.Seen(ctx, key)
	if err != nil {
		b.logger.Warn("activity arrival not checked; a retry of it may run again", "err", err)
		return true
	}
	return !seen
}

// recordArrival keeps an accepted activity's arrival in the store, in the
// background and in the commit of the run it starts, so that accepting a
// message waits for no disk write. Should the service stop before that
// commit, the run was not kept either, and Teams' retry rightly runs it.
func (b *Bot) recordArrival(key string) {
	if key == "" || b.opts.Store == nil {
		return
	}
	// No goroutine waits for the commit: thousands of messages arriving
	// at once each held one.
	b.records.Add(1)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), sendTimeout)
	b.opts.Store.RecordArrivalLater(ctx, key, dedupTTL, func(err error) {
		defer b.records.Done()
		cancel()
		if err != nil {
			b.logger.Warn("activity arrival not recorded; a retry of it after a restart may run again", "err", err)
		}
	})
}

// forgetArrival undoes firstArrival for an activity the bot turned away
// (nothing of it is in the store yet), so that Teams' retry of it runs.
func (b *Bot) forgetArrival(key string) {
	if key != "" {
		b.seen.forget(key)
	}
}

// typingIndicator is a turn's typing indicator, sent once the run has
// taken TypingAfter, and only then.
type typingIndicator struct {
	timer *time.Timer
	mu    sync.Mutex
	// over is set once the indicator is out or will never be; after are
	// called then.
	over  bool
	after []func()
}

// typingPatience is how long a typing indicator may wait for its place
// under Teams' rate limits. One that would wait longer is not sent: the
// streaming message or the working card comes about then, and the
// indicator would only take a place in the conversation's and the
// tenant's queues that an answer needs (with a hundred turns at once in a
// tenant, the indicators alone filled four seconds of its 30 calls a
// second).
const typingPatience = time.Second

// startTyping arms the turn's typing indicator. It waits for its place
// under the rate limits without a goroutine (SendLater).
func (b *Bot) startTyping(ctx context.Context, a *schema.Activity) *typingIndicator {
	t := &typingIndicator{}
	t.timer = time.AfterFunc(b.opts.TypingAfter, func() {
		sendCtx, cancel := context.WithTimeout(ctx, typingPatience)
		b.conn.SendLater(sendCtx, a.ServiceURL, a.Conversation.ID, b.outgoing(a, schema.Typing), func(_ string, err error) {
			cancel()
			switch {
			case err == nil:
			case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
				b.logger.Debug("typing indicator not sent: the conversation's or the tenant's sends are queued past its patience", "conversation", a.Conversation.ID)
			default:
				b.logger.Warn("typing indicator not sent", "conversation", a.Conversation.ID, "err", err)
			}
			t.end()
		})
	})
	return t
}

// end marks the indicator out, or never to be, and calls what waited
// for it.
func (t *typingIndicator) end() {
	t.mu.Lock()
	if t.over {
		t.mu.Unlock()
		return
	}
	t.over = true
	after := t.after
	t.after = nil
	t.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// then cancels the indicator if it has not gone out yet, and calls f once
// it is out or never will be: at once, or when it is sent. Any goroutine
// may call it, any number of times.
func (t *typingIndicator) then(f func()) {
	if t.timer.Stop() {
		t.end()
	}
	t.mu.Lock()
	if !t.over {
		t.after = append(t.after, f)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	f()
}

// settle is then, waiting: whatever the turn sends next comes after the
// indicator.
func (t *typingIndicator) settle() {
	done := make(chan struct{})
	t.then(func() { close(done) })
	<-done
}

// runTurn sends a typing indicator, starts the agent's run, and has the
// answer sent when the run is over: directly when the run is quick, or as
// an update of a "working on it" card posted once the run has taken
// WorkingAfter. It runs under tctx, which carries the turn's span and
// lives as long as the bot, and calls over once the turn is over.
//
// A turn may wait minutes for its model, and thousands wait at once: the
// turn's goroutine returns once the run is under way (agent's RunThen),
// and the goroutine that ends the run sends the answer (closeTurn), so
// that no goroutine, and no stack, waits for the model but the one that
// reads its answer.
func (b *Bot) runTurn(tctx context.Context, a *schema.Activity, p agent.Person, over func()) {
	// A turn may wait for the person to connect a server, and to answer
	// what a server asks, on top of its own time.
	ctx, cancel := context.WithTimeout(withTenant(tctx, p.TenantID), b.opts.TurnTimeout+b.opts.ConnectWait+b.opts.ElicitWait)
	var t *turnRun
	offstack.Run(func() { t = b.openTurn(ctx, a, p) })
	if t == nil {
		cancel()
		over()
		return
	}
	b.opts.Agent.RunThen(ctx, &t.req, &t.ans, func(runErr error) {
		// The answer is sent from a goroutine of its own: it may wait
		// seconds for its place under Teams' rate limits, and the run's
		// goroutine would wait with the frames of the run below.
		go func() {
			defer over()
			defer cancel()
			b.closeTurn(ctx, t, runErr)
		}()
	})
}

// turnRun is a turn whose run is under way: what it shows while the run
// works, and what the run was asked.
type turnRun struct {
	a      *schema.Activity
	p      agent.Person
	start  time.Time
	typing *typingIndicator
	req    agent.Request
	// timer opens the stream or posts the working card; workingDone is
	// closed once it has, and only then are workingID and st read.
	timer       *time.Timer
	workingDone chan struct{}
	workingID   string
	st          *stream
	// ans is the run's answer.
	ans agent.Answer
}

// openTurn starts a turn's run: the typing indicator, a slot among the
// runs, and the timer of the stream or the working card. It returns nil
// when the turn cannot go on (it has said why).
func (b *Bot) openTurn(ctx context.Context, a *schema.Activity, p agent.Person) *turnRun {
	t := &turnRun{a: a, p: p, start: b.now(), workingDone: make(chan struct{})}
	// Without a token or a usable serviceUrl nothing can reach the
	// person: fail now rather than run the agent for nobody.
	if err := b.conn.ready(ctx, a.ServiceURL); err != nil {
		b.metrics.turns.WithLabelValues("failed").Inc()
		endTurn(ctx, "failed", "")
		b.logger.ErrorContext(ctx, "turn failed: cannot send to the conversation", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "err", err)
		return nil
	}

	// The typing indicator goes out once the run has taken TypingAfter;
	// the answer waits for it so the two never arrive out of order.
	t.typing = b.startTyping(ctx, a)

	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		t.typing.settle()
		b.metrics.turns.WithLabelValues("failed").Inc()
		endTurn(ctx, "failed", "")
		b.logger.ErrorContext(ctx, "turn abandoned while waiting for a slot", "conversation", a.Conversation.ID, "activity", a.ID, "err", ctx.Err())
		return nil
	}
	// Once the run has taken WorkingAfter, a timer opens a streaming
	// message in a personal chat (Teams streams only there), or posts the
	// working card; the run itself stays in the turn's goroutine.
	prog := newProgress(a.Text)
	t.timer = time.AfterFunc(b.opts.WorkingAfter, func() {
		// Neither waits in a goroutine of its own for the typing
		// indicator, nor for the stream's place under the rate limits:
		// thousands of turns may wait at once.
		t.typing.then(func() {
			if a.Conversation.ConversationType == "personal" {
				b.openStream(ctx, a, prog, func(st *stream) {
					if st == nil {
						b.postWorking(ctx, t)
						return
					}
					t.st = st
					close(t.workingDone)
				})
				return
			}
			go b.postWorking(ctx, t)
		})
	})
	personal := a.Conversation.ConversationType == "personal"
	t.req = agent.Request{Person: p, AgentID: b.opts.AgentID, Text: a.Text, Progress: prog.step,
		Connect:      &connectPrompter{b: b, a: a, p: p, o: b.personalOptions(a)},
		Elicit:       &elicitAsker{b: b, a: a, p: p, o: b.personalOptions(a), prog: prog},
		Conversation: a.Conversation.ID, Shared: !personal}
	if personal {
		// The answer's words open the stream at once, rather than after
		// WorkingAfter: the person reads them as they come.
		t.req.Stream = prog.delta
		prog.first = func() {
			// Only a timer that has not fired yet: firing one again would
			// open a second stream.
			if t.timer.Stop() {
				t.timer.Reset(max(0, min(b.opts.StreamAfter, b.opts.WorkingAfter)-b.now().Sub(t.start)))
			}
		}
	}
	return t
}

// postWorking posts the working card of a turn whose run takes a while.
func (b *Bot) postWorking(ctx context.Context, t *turnRun) {
	defer close(t.workingDone)
	a := t.a
	w := withCard(b.outgoing(a, schema.Message), cards.Working(a.Text))
	id, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, w)
	if err != nil {
		b.logger.WarnContext(ctx, "working card not sent", "conversation", a.Conversation.ID, "err", err)
	}
	t.workingID = id
}

// closeTurn sends the answer of a turn's run, and records the turn.
//
//go:noinline
func (b *Bot) closeTurn(ctx context.Context, t *turnRun, runErr error) {
	a, p, ans := t.a, t.p, t.ans
	<-b.sem
	if !t.timer.Stop() {
		<-t.workingDone // workingID and st are read only after this
	}
	st := t.st
	if st != nil && !st.stop() {
		st = nil // it closed itself: the answer is an ordinary message
	}
	// Rendering the answer's cards goes deep: off this goroutine's
	// stack, which stays small while the answer waits for its place.
	var r reply
	offstack.Run(func() { r = b.chooseAnswer(ctx, a, p, ans, runErr) })
	outcome := r.outcome

	t.typing.settle()
	sent, err := b.deliver(ctx, a, t.workingID, st, r, ans.RunID)
	if err != nil {
		outcome = "failed"
		b.logger.ErrorContext(ctx, "answer not delivered", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "run", ans.RunID, "err", err)
	}
	b.metrics.turns.WithLabelValues(outcome).Inc()
	b.metrics.turnDuration.Observe(b.now().Sub(t.start).Seconds())
	endTurn(ctx, outcome, ans.RunID)
	// After the turn's duration is taken: the person has the answer, and
	// the store may hold this write back to share a commit.
	b.recordDelivery(ctx, a, ans.RunID, sent)
	b.logger.DebugContext(ctx, "turn done", "conversation", a.Conversation.ID, "activity", a.ID, "outcome", outcome, "run", ans.RunID, "views", len(ans.Views))
}

// reply is what a finished run sends: its cards, the AI label and
// citations when a model wrote it, and how to make the cards smaller should
// Teams refuse a message as too large.
type reply struct {
	outcome string // "answered" or "failed", for the metrics
	cards   []cards.Card
	ai      *aiAnswer
	// smaller renders the answer again in cards of at most maxSize UTF-16
	// code units; nil for a card of the service's own, which is small.
	smaller func(maxSize int) []cards.Card
}

// chooseAnswer decides what the person is sent for a finished run: the
// answer's cards, labelled as AI-generated with their sources, or a
// failure card with a reference (no label: the service wrote it).
func (b *Bot) chooseAnswer(ctx context.Context, a *schema.Activity, p agent.Person, ans agent.Answer, runErr error) reply {
	answer := func(outcome string, ans agent.Answer) reply {
		o := b.personalOptions(a)
		return reply{outcome: outcome, cards: b.answerCards(ans, o), ai: b.aiMarks(ans), smaller: func(maxSize int) []cards.Card {
			o.MaxSize = maxSize
			return b.answerCards(ans, o)
		}}
	}
	switch {
	case runErr == nil:
		return answer("answered", ans)
	case errors.Is(runErr, agent.ErrModel) && len(ans.Views) > 0:
		// The model failed after tools made views, which are stored and
		// the person's: the card names them beside the agent's own words
		// that the model could not answer. The run notes say so too, with
		// the reference of the model's error, never its text.
		b.logger.ErrorContext(ctx, "agent run failed after making views", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "reference", ans.RunID, "views", len(ans.Views), "err", runErr)
		return answer("failed", ans)
	default:
		// The card gives a reference, never the cause, which may carry
		// internal detail; the log line has both.
		ref := reference(ans.RunID, a)
		b.logger.ErrorContext(ctx, "agent run failed", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "reference", ref, "err", runErr)
		return reply{outcome: "failed", cards: []cards.Card{cards.RunFailed(ref)}}
	}
}

// deliver sends the answer's cards in reply to a, each a new message, and
// returns the ids of the activities that carry the answer, in card order,
// kept so the cards can be updated later. Should the connector not name a
// card's activity, only the ids before it are kept: an id out of place
// would have a later update put a card where another one was. ai, when
// set, labels each message.
//
// Teams notifies people of new messages, not of edits ("Optimize your bot
// with rate limiting in Teams" and "Update and delete bot messages"), so
// the answer never replaces the working card: it arrives as new messages,
// then the working card is deleted (or, if that fails, collapsed to one
// line). When the answer cannot be sent, the working card becomes the
// failure card, with runID as its reference, rather than promise an answer
// that will not come. An open stream (personal chats) ends with the first
// card as its final message, or with the failure card.
//
// A first message that Teams refuses as too large (413, "Format your bot
// messages") is sent again without its citations, then as smaller cards
// (two thirds the size each time), before the answer counts as failed.
func (b *Bot) deliver(ctx context.Context, a *schema.Activity, workingID string, st *stream, r reply, runID string) ([]string, error) {
	answer, ai := r.cards, r.ai
	sent := make([]string, 0, len(answer))
	gap := false
	size := cards.MaxCardSize
	for i := 0; i < len(answer); i++ {
		c := answer[i]
		out := withCard(b.outgoing(a, schema.Message), c)
		if ai != nil {
			ai.mark(out, i == 0)
		}
		replyTo := a.ID
		if st != nil && i == 0 {
			// "Stream bot messages" sends the final message to the
			// conversation, like the stream's updates.
			st.final(out)
			replyTo = ""
		}
		id, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, replyTo, out)
		if errors.Is(err, ErrTooLarge) && i == 0 {
			switch {
			case ai != nil && len(ai.citations) > 0:
				b.logger.Warn("answer too large for Teams; sending it without its citations", "conversation", a.Conversation.ID)
				ai = &aiAnswer{}
				i--
				continue
			case r.smaller != nil && size > cards.MaxCardSize/8:
				size = size * 2 / 3
				b.logger.Warn("answer too large for Teams; sending it in smaller cards", "conversation", a.Conversation.ID, "card_size", size)
				answer = r.smaller(size)
				sent = sent[:0]
				i--
				continue
			}
		}
		if err != nil {
			if workingID != "" || (st != nil && i == 0) {
				b.failureInPlace(ctx, a, workingID, st, runID)
			}
			return sent, err
		}
		if st != nil && i == 0 && id == "" {
			// Teams answers a stream's final message 202 with no id: the
			// message is the stream's, whose id is the stream's id.
			id = st.id
		}
		gap = gap || id == ""
		if !gap {
			sent = append(sent, id)
		}
	}
	if workingID != "" {
		b.clearWorkingCard(ctx, a, workingID)
	}
	return sent, nil
}

// clearWorkingCard deletes the working card once the answer is below it,
// or collapses it when it cannot be deleted.
func (b *Bot) clearWorkingCard(ctx context.Context, a *schema.Activity, workingID string) {
	err := b.conn.Remove(ctx, a.ServiceURL, a.Conversation.ID, workingID)
	if err == nil {
		return
	}
	b.logger.Warn("deleting the working card failed; collapsing it", "conversation", a.Conversation.ID, "err", err)
	if err := b.conn.Update(ctx, a.ServiceURL, a.Conversation.ID, workingID, withCard(b.outgoing(a, schema.Message), cards.Answered())); err != nil {
		b.logger.Warn("collapsing the working card failed", "conversation", a.Conversation.ID, "err", err)
	}
}

// failureInPlace turns what promised an answer (the working card, or an
// open stream in a personal chat) into the failure card, so that it does
// not go on promising one. The turn's own context may be what ran out, so
// this gets a short one of its own.
func (b *Bot) failureInPlace(ctx context.Context, a *schema.Activity, workingID string, st *stream, runID string) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	out := withCard(b.outgoing(a, schema.Message), cards.RunFailed(reference(runID, a)))
	var err error
	if st != nil {
		st.final(out)
		_, err = b.conn.Send(fctx, a.ServiceURL, a.Conversation.ID, "", out)
	} else {
		err = b.conn.Update(fctx, a.ServiceURL, a.Conversation.ID, workingID, out)
	}
	if err != nil {
		b.logger.Warn("what promised the answer could not be turned into the failure card", "conversation", a.Conversation.ID, "err", err)
	}
}

// reference is what a failure card names for an operator to find in the
// logs: the run, or the activity when no run was made.
func reference(runID string, a *schema.Activity) string {
	if runID != "" {
		return runID
	}
	return a.ID
}

// outgoing starts an activity addressed back to the conversation of a.
func (b *Bot) outgoing(a *schema.Activity, typ schema.ActivityTypes) *outActivity {
	from, to := a.Recipient, a.From
	conv := schema.ConversationAccount{ID: a.Conversation.ID}
	return &outActivity{Type: typ, From: &from, Recipient: &to, Conversation: &conv}
}

// sendCard sends one card in reply to a, outside a turn.
func (b *Bot) sendCard(a *schema.Activity, c cards.Card) {
	ctx, cancel := context.WithTimeout(withTenant(b.ctx, channelTenant(a)), sendTimeout)
	defer cancel()
	out := withCard(b.outgoing(a, schema.Message), c)
	if _, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, out); err != nil {
		b.logger.Warn("card not sent", "conversation", a.Conversation.ID, "err", err)
	}
}
