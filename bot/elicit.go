package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/elicit"
)

// What a server asks the person during a run's tool call (elicitation)
// is a card in the conversation of the question: the form, or the
// address to open, with Submit (Continue), Decline and Cancel. Its
// buttons come back as a message whose value names the question; only
// the run's person may answer (anyone else is told so, politely), a
// wrong answer shows the card again with what to correct, and once the
// question has ended the same card says how, without the values. The
// questions waiting are this replica's: the run waits here.

// questions are the questions waiting for their person, by id.
type questions struct {
	mu sync.Mutex
	m  map[string]*question
}

func (qs *questions) add(q *question) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.m == nil {
		qs.m = map[string]*question{}
	}
	qs.m[q.q.ID] = q
}

func (qs *questions) remove(id string) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	delete(qs.m, id)
}

func (qs *questions) get(id string) *question {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.m[id]
}

// question is one question shown, waiting.
type question struct {
	q agent.Question
	// a is the activity of the turn: the conversation the card is in.
	a *schema.Activity
	o cards.Options

	// posted is closed once the card's send has returned (cardID set,
	// or the send failed): an answer can come before that.
	posted chan struct{}
	mu     sync.Mutex
	cardID string
	card   cards.Elicitation
	ended  bool
	reply  chan agent.Reply // buffered: one reply
}

// elicitAsker asks the person of one turn (agent.Elicitor).
type elicitAsker struct {
	b *Bot
	a *schema.Activity
	p agent.Person
	o cards.Options
}

// Elicit posts the question's card and waits for its answer.
func (e *elicitAsker) Elicit(ctx context.Context, q agent.Question) (agent.Reply, error) {
	b := e.b
	card := cards.Elicitation{ID: q.ID, Server: q.Server, Tool: q.Tool, AgentName: q.AgentName, PersonName: e.p.Name,
		Mode: q.Mode, Message: q.Message, Form: q.Form, URL: q.URL, Wait: q.Wait, Deadline: q.Deadline}
	qu := &question{q: q, a: e.a, o: e.o, card: card, reply: make(chan agent.Reply, 1), posted: make(chan struct{})}
	// Known before it is shown: a quick answer must find it.
	b.questions.add(qu)
	defer b.questions.remove(q.ID)
	id, err := b.conn.Send(ctx, e.a.ServiceURL, e.a.Conversation.ID, e.a.ID, withCard(b.outgoing(e.a, schema.Message), cards.ElicitationCard(card, e.o)))
	qu.mu.Lock()
	qu.cardID = id
	qu.mu.Unlock()
	close(qu.posted)
	if err != nil {
		return agent.Reply{}, err
	}
	select {
	case r := <-qu.reply:
		if q.Mode == elicit.ModeURL && r.Action == elicit.Accept {
			// The card shows the Open button until the server says it
			// is done, or the question's time is up.
			b.records.Go(func() { qu.awaitCompletion(b) })
		}
		return r, nil
	case <-ctx.Done():
		state := cards.ElicitUnanswerable
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			state = cards.ElicitTimedOut
		}
		qu.end(ctx, b, state)
		return agent.Reply{}, ctx.Err()
	}
}

// awaitCompletion updates a URL mode card once its server says the
// interaction is complete.
func (qu *question) awaitCompletion(b *Bot) {
	t := time.NewTimer(time.Until(qu.q.Deadline))
	defer t.Stop()
	select {
	case <-qu.q.Completed:
		qu.show(b.ctx, b, cards.ElicitCompleted)
	case <-t.C:
	case <-b.ctx.Done():
	}
}

// end marks the question ended in state, when it has not ended, and shows
// it on the card.
func (qu *question) end(ctx context.Context, b *Bot, state cards.ElicitState) bool {
	qu.mu.Lock()
	if qu.ended {
		qu.mu.Unlock()
		return false
	}
	qu.ended = true
	qu.mu.Unlock()
	qu.show(ctx, b, state)
	return true
}

// show updates the card to state, without the values entered.
func (qu *question) show(ctx context.Context, b *Bot, state cards.ElicitState) {
	qu.mu.Lock()
	c := qu.card
	c.State, c.Values, c.Problems = state, nil, nil
	qu.card = c
	id := qu.cardID
	qu.mu.Unlock()
	qu.update(ctx, b, c, id)
}

func (qu *question) update(ctx context.Context, b *Bot, c cards.Elicitation, id string) {
	if id == "" {
		// The card's send has not returned yet: its id comes with it.
		select {
		case <-qu.posted:
		case <-ctx.Done():
			return
		}
		qu.mu.Lock()
		id = qu.cardID
		qu.mu.Unlock()
		if id == "" {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	defer cancel()
	a := qu.a
	if err := b.conn.Update(ctx, a.ServiceURL, a.Conversation.ID, id, withCard(b.outgoing(a, schema.Message), cards.ElicitationCard(c, qu.o))); err != nil {
		b.logger.Warn("question card not updated", "conversation", a.Conversation.ID, "err", err)
	}
}

// isAnswer reports whether a message is a question card's button.
func isAnswer(a *schema.Activity) bool {
	kind, _ := a.Value[cards.ElicitKey].(string)
	return kind == cards.ElicitKind
}

// answer takes a question card's button: it checks who pressed it and
// what they entered, hands the reply to the waiting call, and shows the
// outcome; a wrong answer shows the card again with what to correct.
func (b *Bot) answer(ctx context.Context, a *schema.Activity, p agent.Person) {
	id, _ := a.Value[cards.ElicitIDKey].(string)
	action, _ := a.Value[cards.ElicitActionKey].(string)
	qu := b.questions.get(id)
	if qu != nil && qu.a.Conversation.ID != a.Conversation.ID {
		qu = nil // a question of another conversation is not this one's
	}
	say := func(words string) {
		out := b.outgoing(a, schema.Message)
		out.Text = words
		if _, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, out); err != nil {
			b.logger.Warn("reply to a question's button not sent", "conversation", a.Conversation.ID, "err", err)
		}
	}
	if qu == nil {
		say(cards.ElicitGone)
		return
	}
	if p.UserID == "" || p.UserID != qu.q.Person.UserID || p.TenantID != qu.q.Person.TenantID {
		b.logger.Info("a question answered by someone else was refused", "conversation", a.Conversation.ID, "server", qu.q.Server)
		say(cards.ElicitNotYours)
		return
	}
	var r agent.Reply
	state := cards.ElicitCancelled
	switch action {
	case elicit.Accept:
		r.Action, state = elicit.Accept, cards.ElicitAccepted
		if qu.q.Mode == elicit.ModeForm {
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
			content, problems := qu.q.Form.Check(values)
			if problems != nil {
				qu.mu.Lock()
				ended := qu.ended
				c := qu.card
				c.Values, c.Problems = entered, problems
				id := qu.cardID
				qu.mu.Unlock()
				if !ended {
					qu.update(ctx, b, c, id)
				}
				return
			}
			r.Content = content
		}
	case elicit.Decline:
		r.Action, state = elicit.Decline, cards.ElicitDeclined
	default:
		r.Action = elicit.Cancel
	}
	qu.mu.Lock()
	if qu.ended {
		qu.mu.Unlock()
		say(cards.ElicitGone)
		return
	}
	qu.ended = true
	qu.mu.Unlock()
	qu.reply <- r
	qu.show(ctx, b, state)
}
