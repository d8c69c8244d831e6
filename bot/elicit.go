package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/elicit"
	"teamsbot/store"
)

// What a server asks the person during a run's tool call (elicitation)
// is a card in the conversation of the question: the form, or the
// address to open, with Submit (Continue), Decline and Cancel. Its
// buttons come back as a message whose value names the question; only
// the run's person may answer (anyone else is told so, politely), a
// wrong answer shows the card again with what to correct, and once the
// question has ended the same card says how, without the values.
//
// The question is kept in the store while it waits (store.Question): with
// several replicas, Teams may bring the button's message to another
// replica than the one whose run waits. Whichever replica takes the
// message checks it and records the answer; the waiting one reads it
// (at once when it is the same replica, else within questionPoll). The
// store's record is the one place that decides how a question ended:
// an answer and the time limit cannot both win.

// questionPoll is how often a waiting run reads its question's record.
const questionPoll = 500 * time.Millisecond

// errNotWaiting: the question has been answered or has ended.
var errNotWaiting = errors.New("bot: the question is no longer waiting")

// questionLedger keeps the questions waiting: the store's records, or
// without a store this replica's memory.
type questionLedger interface {
	put(ctx context.Context, q store.Question) error
	get(ctx context.Context, id string) (store.Question, error)
	update(ctx context.Context, id string, change func(*store.Question) error) (store.Question, error)
	remove(ctx context.Context, id string)
}

type storeLedger struct{ s *store.Store }

func (l storeLedger) put(ctx context.Context, q store.Question) error { return l.s.PutQuestion(ctx, q) }
func (l storeLedger) get(ctx context.Context, id string) (store.Question, error) {
	return l.s.Question(ctx, id)
}
func (l storeLedger) update(ctx context.Context, id string, change func(*store.Question) error) (store.Question, error) {
	return l.s.UpdateQuestion(ctx, id, change, nil)
}
func (l storeLedger) remove(ctx context.Context, id string) { _ = l.s.DeleteQuestion(ctx, id) }

// memLedger is the ledger of a bot without a store.
type memLedger struct {
	mu sync.Mutex
	m  map[string]store.Question
}

func (l *memLedger) put(_ context.Context, q store.Question) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]store.Question{}
	}
	l.m[q.ID] = q
	return nil
}

func (l *memLedger) get(_ context.Context, id string) (store.Question, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.m[id]
	if !ok {
		return store.Question{}, store.ErrNotFound
	}
	return q, nil
}

func (l *memLedger) update(_ context.Context, id string, change func(*store.Question) error) (store.Question, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q, ok := l.m[id]
	if !ok {
		return store.Question{}, store.ErrNotFound
	}
	if err := change(&q); err != nil {
		return store.Question{}, err
	}
	q.Version++
	l.m[id] = q
	return q, nil
}

func (l *memLedger) remove(_ context.Context, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, id)
}

// waiters wake this replica's runs whose question was answered here.
type waiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
}

func (w *waiters) add(id string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	w.m[id] = ch
	return ch
}

func (w *waiters) remove(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, id)
}

func (w *waiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.m[id] <- struct{}{}:
	default:
	}
}

// answered is a reply as the question's record keeps it.
type answered struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// elicitAsker asks the person of one turn (agent.Elicitor).
type elicitAsker struct {
	b *Bot
	a *schema.Activity
	p agent.Person
	o cards.Options
	// prog, when set, is the turn's progress: a streaming message says
	// the person is asked.
	prog *progress
}

// Elicit keeps the question, posts its card and waits for its answer.
func (e *elicitAsker) Elicit(ctx context.Context, q agent.Question) (agent.Reply, error) {
	b := e.b
	card := cards.Elicitation{ID: q.ID, Server: q.Server, Tool: q.Tool, AgentName: q.AgentName, PersonName: e.p.Name,
		Mode: q.Mode, Message: q.Message, Form: q.Form, URL: q.URL, Wait: q.Wait, Deadline: q.Deadline}
	shown, err := json.Marshal(card)
	if err != nil {
		return agent.Reply{}, fmt.Errorf("bot: question %s: %w", q.ID, err)
	}
	now := b.now()
	rec := store.Question{ID: q.ID, TenantID: e.p.TenantID, UserID: e.p.UserID, ConversationID: e.a.Conversation.ID,
		ServiceURL: e.a.ServiceURL, ReplyToID: e.a.ID, Shown: shown, Status: store.QuestionWaiting,
		CreatedAt: now, ExpiresAt: now.Add(q.Wait + time.Minute)}
	// Kept before it is shown: a quick answer must find it.
	if err := b.ledger.put(ctx, rec); err != nil {
		return agent.Reply{}, fmt.Errorf("bot: keep question %s: %w", q.ID, err)
	}
	wake := b.waiting.add(q.ID)
	defer b.waiting.remove(q.ID)
	forget := true
	defer func() {
		if forget {
			b.ledger.remove(context.WithoutCancel(ctx), q.ID)
		}
	}()
	cardID, err := b.conn.Send(ctx, e.a.ServiceURL, e.a.Conversation.ID, e.a.ID, withCard(b.outgoing(e.a, schema.Message), cards.ElicitationCard(card, e.o)))
	if err != nil {
		return agent.Reply{}, err
	}
	if e.prog != nil {
		e.prog.asking(q.Server)
	}
	if _, err := b.ledger.update(ctx, q.ID, func(r *store.Question) error { r.CardID = cardID; return nil }); err != nil {
		b.logger.Warn("question's card not kept; an answer to it can still be taken", "err", err)
	}
	shownCard := func(state cards.ElicitState) {
		c := card
		c.State = state
		b.updateQuestionCard(context.WithoutCancel(ctx), e.a, e.a.ServiceURL, cardID, c)
	}

	tick := time.NewTicker(questionPoll)
	defer tick.Stop()
	for {
		select {
		case <-wake:
		case <-tick.C:
		case <-ctx.Done():
			// The time is up, or the run stopped: the question ends
			// unless an answer was recorded first, which then wins.
			got, err := b.ledger.update(context.WithoutCancel(ctx), q.ID, func(r *store.Question) error {
				if r.Status != store.QuestionWaiting {
					return errNotWaiting
				}
				r.Status = store.QuestionEnded
				return nil
			})
			if errors.Is(err, errNotWaiting) {
				if got, err = b.ledger.get(context.WithoutCancel(ctx), q.ID); err == nil && got.Status == store.QuestionAnswered {
					return e.replied(ctx, q, got, shownCard)
				}
			}
			state := cards.ElicitUnanswerable
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				state = cards.ElicitTimedOut
			}
			shownCard(state)
			return agent.Reply{}, ctx.Err()
		}
		got, err := b.ledger.get(ctx, q.ID)
		switch {
		case err != nil && ctx.Err() == nil:
			b.logger.Warn("question not read; reading it again", "err", err)
		case err == nil && got.Status == store.QuestionAnswered:
			return e.replied(ctx, q, got, shownCard)
		}
	}
}

// replied turns an answered question's record into the reply; a URL
// mode card then shows its Open button until the server says it is done
// (the replica that took the answer showed the button already).
func (e *elicitAsker) replied(ctx context.Context, q agent.Question, rec store.Question, shownCard func(cards.ElicitState)) (agent.Reply, error) {
	var r answered
	if err := json.Unmarshal(rec.Answer, &r); err != nil {
		return agent.Reply{}, fmt.Errorf("bot: question %s: the answer does not decode: %w", q.ID, err)
	}
	if q.Mode == elicit.ModeURL && r.Action == elicit.Accept {
		e.b.records.Go(func() {
			t := time.NewTimer(time.Until(q.Deadline))
			defer t.Stop()
			select {
			case <-q.Completed:
				shownCard(cards.ElicitCompleted)
			case <-t.C:
			case <-e.b.ctx.Done():
			}
		})
	}
	return agent.Reply{Action: r.Action, Content: r.Content}, nil
}

// updateQuestionCard shows c on the card cardID of the conversation of a.
func (b *Bot) updateQuestionCard(ctx context.Context, a *schema.Activity, serviceURL, cardID string, c cards.Elicitation) {
	if cardID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	if err := b.conn.Update(ctx, serviceURL, a.Conversation.ID, cardID, withCard(b.outgoing(a, schema.Message), cards.ElicitationCard(c, b.personalOptions(a)))); err != nil {
		b.logger.Warn("question card not updated", "conversation", a.Conversation.ID, "err", err)
	}
}

// isAnswer reports whether a message is a question card's button.
func isAnswer(a *schema.Activity) bool {
	kind, _ := a.Value[cards.ElicitKey].(string)
	return kind == cards.ElicitKind
}

// answer takes a question card's button, on whichever replica Teams
// brought it to: it checks who pressed it and what they entered, records
// the reply for the waiting call, and shows the outcome; a wrong answer
// shows the card again with what to correct.
func (b *Bot) answer(ctx context.Context, a *schema.Activity, p agent.Person) {
	id, _ := a.Value[cards.ElicitIDKey].(string)
	action, _ := a.Value[cards.ElicitActionKey].(string)
	say := func(words string) {
		out := b.outgoing(a, schema.Message)
		out.Text = words
		if _, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, out); err != nil {
			b.logger.Warn("reply to a question's button not sent", "conversation", a.Conversation.ID, "err", err)
		}
	}
	rec, err := b.questionOf(ctx, id)
	if err != nil || rec.ConversationID != a.Conversation.ID || rec.Status != store.QuestionWaiting {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			b.logger.Warn("question not read", "err", err)
		}
		say(cards.ElicitGone)
		return
	}
	if p.UserID == "" || p.UserID != rec.UserID || p.TenantID != rec.TenantID {
		b.logger.Info("a question answered by someone else was refused", "conversation", a.Conversation.ID)
		say(cards.ElicitNotYours)
		return
	}
	var card cards.Elicitation
	if err := json.Unmarshal(rec.Shown, &card); err != nil {
		b.logger.Warn("question's card does not decode", "err", err)
		say(cards.ElicitGone)
		return
	}
	var r answered
	state := cards.ElicitCancelled
	switch action {
	case elicit.Accept:
		r.Action, state = elicit.Accept, cards.ElicitAccepted
		if card.Mode != elicit.ModeURL {
			values := map[string]any{}
			entered := map[string]string{}
			for k, v := range a.Value {
				name, ok := strings.CutPrefix(k, cards.ElicitFieldPrefix)
				s, isText := v.(string)
				if !ok || !isText {
					continue
				}
				values[name], entered[name] = s, s
			}
			content, problems := card.Form.Check(values)
			if problems != nil {
				c := card
				c.Values, c.Problems = entered, problems
				if a.Conversation.ConversationType != "personal" {
					// Others read a group chat's or a channel's card:
					// what the person entered is not shown to them.
					c.Values = nil
				}
				b.updateQuestionCard(ctx, a, rec.ServiceURL, rec.CardID, c)
				return
			}
			r.Content = content
		}
	case elicit.Decline:
		r.Action, state = elicit.Decline, cards.ElicitDeclined
	default:
		r.Action = elicit.Cancel
	}
	raw, err := json.Marshal(r)
	if err != nil {
		b.logger.Warn("answer does not encode", "err", err)
		return
	}
	rec, err = b.ledger.update(ctx, id, func(q *store.Question) error {
		if q.Status != store.QuestionWaiting {
			return errNotWaiting
		}
		q.Status, q.Answer = store.QuestionAnswered, raw
		return nil
	})
	if err != nil {
		if !errors.Is(err, errNotWaiting) && !errors.Is(err, store.ErrNotFound) {
			b.logger.Warn("answer not recorded", "err", err)
		}
		say(cards.ElicitGone)
		return
	}
	b.waiting.wake(id)
	c := card
	c.State = state
	b.updateQuestionCard(ctx, a, rec.ServiceURL, rec.CardID, c)
}

// questionOf reads a question's record; one whose card's id is not kept
// yet (its send has not returned: the button came quickly) is read again
// for a moment, so that the card can be updated.
func (b *Bot) questionOf(ctx context.Context, id string) (store.Question, error) {
	for range 20 {
		rec, err := b.ledger.get(ctx, id)
		if err != nil || rec.CardID != "" || rec.Status != store.QuestionWaiting {
			return rec, err
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return rec, ctx.Err()
		}
	}
	return b.ledger.get(ctx, id)
}
