package agent

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"teamsbot/store"
)

// Memory: a run reads the earlier turns of its conversation (the person's
// messages, the agent's answers, and the tool calls and ordinary results
// the model read) and adds its own turn at its end. Never a view's HTML, a
// ui/message or anything a view sent: the model is told only what it read
// itself, as the product specification keeps views out of it. What is
// kept passes the data rules (redaction) first. A group chat's or a
// channel thread's memory is that conversation's messages to the bot,
// each with who said it; a personal chat's is its person's alone. Bounds
// per agent (MemoryConfig): a number of turns and a token budget, oldest
// dropped first, whole turns only.

// historyMessage is a Message as the store keeps it.
type historyMessage struct {
	Role       string     `json:"role"`
	Text       string     `json:"text,omitempty"`
	From       string     `json:"from,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	ToolName   string     `json:"toolName,omitempty"`
	IsError    bool       `json:"isError,omitempty"`
}

// maxTurnBytes bounds one kept turn (the store's limit is 256 KiB): a
// turn whose tool results are larger keeps their start.
const maxTurnBytes = 200 << 10

// tokensOf estimates the model tokens of text: about four bytes a token
// for English and JSON, which is what the budget needs, not an exact
// count.
func tokensOf(b []byte) int { return len(b)/4 + 1 }

// history reads the conversation's earlier turns for a run, oldest first,
// as messages for the model. Tool call ids are made unique per turn: a
// model may reuse its ids from one turn to the next.
func (r *runState) history(ctx context.Context, conversation string) []Message {
	s := r.svc
	turns, tokens := r.agent.cfg.Memory.bounds()
	if s.opts.Store == nil || conversation == "" || turns == 0 {
		return nil
	}
	hs, err := s.opts.Store.History(ctx, r.person.TenantID, conversation, r.agent.cfg.ID, turns, tokens)
	if err != nil {
		r.noteProblem(err, "the earlier messages of this conversation could not be read, so this answer does not know them")
		return nil
	}
	turnsMsgs := make([][]Message, len(hs))
	n := 0
	for i, h := range hs {
		ms, err := s.decoded.get(h)
		if err != nil {
			s.log.Warn("a kept turn does not decode; left out", "run", r.id, "turn", h.Seq, "err", err)
			continue
		}
		turnsMsgs[i] = ms
		n += len(ms)
	}
	// A slice of the run's own: the run appends to it, and the cached
	// messages are shared with other runs (read only). It has room for
	// the question and its answer: a run that calls tools grows it, and
	// thousands of runs waiting on their models would each hold the room
	// for as long as they wait.
	out := make([]Message, 0, n+2)
	for _, ms := range turnsMsgs {
		out = append(out, ms...)
	}
	return out
}

// decodeTurnMessages decodes a kept turn's messages for the model, its
// tool call ids made unique by the turn's Seq.
func decodeTurnMessages(h store.HistoryTurn) ([]Message, error) {
	var ms []historyMessage
	if err := json.Unmarshal(h.Messages, &ms); err != nil {
		return nil, err
	}
	prefix := "h" + strconv.FormatUint(h.Seq, 10) + "_"
	out := make([]Message, 0, len(ms))
	for _, m := range ms {
		msg := Message{Role: m.Role, Text: m.Text, From: m.From, ToolName: m.ToolName, IsError: m.IsError}
		if m.ToolCallID != "" {
			msg.ToolCallID = prefix + m.ToolCallID
		}
		for _, c := range m.ToolCalls {
			c.ID = prefix + c.ID
			msg.ToolCalls = append(msg.ToolCalls, c)
		}
		out = append(out, msg)
	}
	return out, nil
}

// decodedTurns keeps the decoded messages of the turns read lately, the
// least recently read dropped first once their JSON passes max bytes. A
// kept turn never changes (its Seq, from the store's one sequence, and its
// run id name it), and every run of a conversation reads the same earlier
// turns again: a conversation's next run decodes only its newest turn,
// which keeps memory from costing a run its speed (agent.BenchmarkMemoryCost).
// A turn the store no longer returns (cleared, swept) is simply not asked
// for again, and ages out; one is served decoded only when its JSON is the
// same bytes, so that it is decoding remembered, never a turn that might
// have changed.
type decodedTurns struct {
	max int

	mu    sync.Mutex
	size  int
	order *list.List // of *decodedTurn, most recently read first
	byKey map[decodedKey]*list.Element
}

type decodedKey struct {
	seq uint64
	run string
}

type decodedTurn struct {
	key  decodedKey
	json []byte    // what msgs were decoded from
	msgs []Message // shared by every run that reads the turn: read only
}

// decodedTurnsMax is the JSON of the turns kept decoded: 32 MiB, the
// last 20 turns of some 800 busy conversations at 2 KB a turn.
const decodedTurnsMax = 32 << 20

func newDecodedTurns(max int) *decodedTurns {
	return &decodedTurns{max: max, order: list.New(), byKey: map[decodedKey]*list.Element{}}
}

// get returns h's messages, decoded now or earlier.
func (d *decodedTurns) get(h store.HistoryTurn) ([]Message, error) {
	k := decodedKey{h.Seq, h.RunID}
	d.mu.Lock()
	if e, ok := d.byKey[k]; ok && bytes.Equal(e.Value.(*decodedTurn).json, h.Messages) {
		d.order.MoveToFront(e)
		msgs := e.Value.(*decodedTurn).msgs
		d.mu.Unlock()
		return msgs, nil
	}
	d.mu.Unlock()
	msgs, err := decodeTurnMessages(h)
	if err != nil || len(h.Messages) > d.max {
		return msgs, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.byKey[k]; ok { // decoded meanwhile, or from other bytes
		d.order.Remove(e)
		d.size -= len(e.Value.(*decodedTurn).json)
	}
	d.byKey[k] = d.order.PushFront(&decodedTurn{key: k, json: bytes.Clone(h.Messages), msgs: msgs})
	d.size += len(h.Messages)
	for d.size > d.max {
		old := d.order.Remove(d.order.Back()).(*decodedTurn)
		delete(d.byKey, old.key)
		d.size -= len(old.json)
	}
	return msgs, nil
}

// turnToKeep is the run's turn (its messages from the person's on) as the
// conversation's memory keeps it, through the data rules; nil when the
// run keeps none. The run's save writes it in the run's own commit.
func (r *runState) turnToKeep(ctx context.Context, conversation string, msgs []Message) (*store.HistoryTurn, error) {
	s := r.svc
	if turns, _ := r.agent.cfg.Memory.bounds(); s.opts.Store == nil || conversation == "" || turns == 0 || len(msgs) == 0 {
		return nil, nil
	}
	rules := r.agent.rules
	if s.opts.Access != nil {
		tenant, err := s.opts.Access.TenantRules(ctx, r.person.TenantID)
		if err != nil {
			return nil, fmt.Errorf("agent: the tenant's data rules cannot be read, so the turn is not kept: %w", err)
		}
		rules = rules.with(tenant)
	}
	kept := make([]historyMessage, 0, len(msgs))
	size := 0
	for _, m := range msgs {
		text := rules.redactString(m.Text)
		if room := maxTurnBytes - size; len(text) > room {
			text = strings.ToValidUTF8(text[:max(room, 0)], "") + " [cut]"
		}
		size += len(text)
		h := historyMessage{Role: m.Role, Text: text, From: m.From, ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
		for _, c := range m.ToolCalls {
			c.Arguments = json.RawMessage(rules.redactString(string(c.Arguments)))
			if !json.Valid(c.Arguments) {
				c.Arguments = json.RawMessage(`{}`)
			}
			h.ToolCalls = append(h.ToolCalls, c)
		}
		kept = append(kept, h)
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return nil, fmt.Errorf("agent: encoding the turn: %w", err)
	}
	return &store.HistoryTurn{
		TenantID: r.person.TenantID, ConversationID: conversation, RunID: r.id, AgentID: r.agent.cfg.ID,
		UserID: r.person.UserID, UserName: r.person.Name, At: s.now(), Messages: b, Tokens: tokensOf(b),
	}, nil
}
