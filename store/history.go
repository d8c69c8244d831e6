package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The history of conversations: each turn of a conversation as the model
// read it (the person's message, the answer, the tool calls and their
// ordinary results), so that the next run of the conversation sees the
// earlier turns. The agent encodes the messages, already redacted by the
// data rules; the store checks once that they are JSON, keeps them as
// given, and never parses them again.

// Bounds of the history.
const (
	// MaxTurnMessages bounds a turn's Messages.
	MaxTurnMessages = 256 << 10
	// MaxHistoryTurns bounds how many turns one History read returns: a
	// larger maxTurns is lowered to it, as no model reads more.
	MaxHistoryTurns = 1000
)

// threadMark is what follows a channel's conversation id in the ids of
// its threads: "19:…@thread.tacv2;messageid=1700000000000".
const threadMark = ";messageid="

// HistoryTurn is one turn of a conversation as the model read it. The
// store keeps Messages as given (the agent encodes them, already redacted
// by the data rules) and never reads them.
type HistoryTurn struct {
	TenantID string `json:"tenantId"`
	// ConversationID is the activity's conversation id: a personal chat's,
	// a group chat's, or a channel thread's ("19:...@thread.tacv2;messageid=...").
	ConversationID string `json:"conversationId"`
	// Seq is set by the store: increasing within the conversation. The
	// store numbers every turn from one sequence: a turn appended after
	// another was stored has a larger Seq, whatever their conversations,
	// and two appended at once have two.
	Seq      uint64    `json:"seq"`
	RunID    string    `json:"runId"`
	AgentID  string    `json:"agentId"`
	UserID   string    `json:"userId,omitempty"` // who asked; empty for a run without a person
	UserName string    `json:"userName,omitempty"`
	At       time.Time `json:"at"`
	// Messages are the turn's messages as JSON, at most MaxTurnMessages
	// bytes, kept byte for byte.
	Messages json.RawMessage `json:"messages"`
	// Tokens is the agent's estimate of Messages in model tokens (>= 0).
	Tokens int `json:"tokens"`
}

// check checks a turn before it is stored.
func (t HistoryTurn) check() error {
	if err := checkKeyParts("the tenant id", t.TenantID, "the conversation id", t.ConversationID,
		"the agent id", t.AgentID, "the run id", t.RunID); err != nil {
		return err
	}
	if err := checkText("the user id", t.UserID, maxIDLen); err != nil {
		return err
	}
	if err := checkText("the user name", t.UserName, maxDisplayName); err != nil {
		return err
	}
	switch {
	case len(t.Messages) == 0:
		return invalid("the turn has no messages")
	case len(t.Messages) > MaxTurnMessages:
		return invalid("the messages are %d bytes long, at most %d", len(t.Messages), MaxTurnMessages)
	case !json.Valid(t.Messages):
		return invalid("the messages are not valid JSON")
	}
	if t.Tokens < 0 {
		return invalid("the token count is %d, below zero", t.Tokens)
	}
	return nil
}

// encodeTurn encodes a turn as the store keeps it: its record's JSON
// without its messages ("messages": null), and beside it the messages as
// they were given, which are neither encoded again nor decoded when read.
func encodeTurn(t HistoryTurn) (encoded[HistoryTurn], error) {
	rec := t
	rec.Messages = nil
	b, err := json.Marshal(rec)
	return encoded[HistoryTurn]{rec: t, json: b}, err
}

// decodeTurn decodes a stored turn from its record's JSON, its Seq and
// its messages (which it keeps, not copies).
func decodeTurn(record []byte, seq uint64, messages []byte) (HistoryTurn, error) {
	var t HistoryTurn
	if err := json.Unmarshal(record, &t); err != nil {
		return t, err
	}
	t.Seq, t.Messages = seq, messages
	return t, nil
}

// turnMemo remembers the turns' records it decoded, by Seq, with the
// bytes they were decoded from: a conversation's every run reads its
// earlier turns again, and decoding their records was most of what
// reading them cost. A record is taken from it only when its bytes are
// the same, so that it is decoding remembered, never a record that might
// have changed; the oldest entries go first past max.
type turnMemo struct {
	max int

	mu    sync.Mutex
	bySeq map[uint64]memoTurn
	order []uint64 // ring of the Seqs in bySeq, oldest at next
	next  int
}

type memoTurn struct {
	record []byte
	turn   HistoryTurn // without its messages
}

// turnMemoMax is how many turns' records the memo keeps: some 5 MB.
const turnMemoMax = 20_000

func newTurnMemo(max int) *turnMemo {
	return &turnMemo{max: max, bySeq: make(map[uint64]memoTurn)}
}

// decode decodes a stored turn's record (its messages left out), or
// returns what decoding the same bytes gave before.
func (m *turnMemo) decode(seq uint64, record []byte) (HistoryTurn, error) {
	m.mu.Lock()
	e, ok := m.bySeq[seq]
	m.mu.Unlock()
	if ok && bytes.Equal(e.record, record) {
		return e.turn, nil
	}
	t, err := decodeTurn(record, seq, nil)
	if err != nil {
		return t, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.bySeq[seq]; !ok {
		if len(m.order) < m.max {
			m.order = append(m.order, seq)
		} else {
			delete(m.bySeq, m.order[m.next])
			m.order[m.next] = seq
			m.next = (m.next + 1) % m.max
		}
	}
	m.bySeq[seq] = memoTurn{record: bytes.Clone(record), turn: t}
	return t, nil
}

// name names a turn in errors.
func (t HistoryTurn) name() string {
	return fmt.Sprintf("turn of run %.128s in conversation %.128s of tenant %.128s", t.RunID, t.ConversationID, t.TenantID)
}

// threadPrefix is the start of the ids of a channel's threads: ClearHistory
// of conversationID clears the conversations whose id is conversationID or
// starts with it.
func threadPrefix(conversationID string) string { return conversationID + threadMark }

// AppendTurn stores a turn of a conversation and returns it as stored:
// its Seq set (any Seq given is ignored), and a zero At set from the
// store's clock. Tenant, conversation, agent and run ids are required and
// checked as key parts; Messages must be valid JSON of at most
// MaxTurnMessages bytes and Tokens at least zero (ErrInvalid otherwise,
// and nothing is written). Concurrent appends, to one conversation or
// many, each get a Seq of their own.
func (s *Store) AppendTurn(ctx context.Context, t HistoryTurn) (HistoryTurn, error) {
	if err := ctx.Err(); err != nil {
		return HistoryTurn{}, err
	}
	t, enc, err := s.prepareTurn(t)
	if err != nil {
		return HistoryTurn{}, err
	}
	var seq uint64
	err = s.write(ctx, false, func(w writer) error {
		seq = 0
		return w.appendTurn(enc, func(n uint64) { seq = n })
	})
	if err != nil {
		return HistoryTurn{}, fmt.Errorf("store: append %s: %w", t.name(), err)
	}
	t.Seq = seq
	return t, nil
}

// prepareTurn checks and encodes a turn to append, outside the
// transaction: its Seq cleared (the store numbers it) and a zero At set
// from the store's clock.
func (s *Store) prepareTurn(t HistoryTurn) (HistoryTurn, encoded[HistoryTurn], error) {
	t.Seq = 0
	if t.At.IsZero() {
		t.At = s.now()
	}
	if err := t.check(); err != nil {
		return t, encoded[HistoryTurn]{}, err
	}
	enc, err := encodeTurn(t)
	if err != nil {
		return t, enc, fmt.Errorf("%s: %w", t.name(), err)
	}
	return t, enc, nil
}

// History returns the newest whole turns of a conversation of tenant
// made by agent, oldest first: at most maxTurns of them (and at most
// MaxHistoryTurns), whose Tokens add up to at most maxTokens. The turns
// are taken newest first, and a turn that would pass the token budget
// ends the list: no turn is cut, and none older than it is taken. A
// maxTurns or maxTokens of zero or less reads none. It reads that
// conversation's turns of that agent alone, from the newest.
func (s *Store) History(ctx context.Context, tenant, conversationID, agentID string, maxTurns, maxTokens int) ([]HistoryTurn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyParts("the tenant id", tenant, "the conversation id", conversationID, "the agent id", agentID); err != nil {
		return nil, err
	}
	if maxTurns <= 0 || maxTokens <= 0 {
		return nil, nil
	}
	maxTurns = min(maxTurns, MaxHistoryTurns)
	var out []HistoryTurn
	err := s.be.read(ctx, func(r reader) error {
		out = out[:0]
		used := 0
		err := r.turns(tenant, conversationID, agentID, maxTurns, func(seq uint64, record, messages []byte) (bool, error) {
			t, err := s.turnRecords.decode(seq, record)
			if err != nil {
				return false, fmt.Errorf("history turn %d: %w", seq, err)
			}
			if t.Tokens > maxTokens-used {
				return false, nil
			}
			used += t.Tokens
			t.Messages = bytes.Clone(messages)
			out = append(out, t)
			return true, nil
		})
		slices.Reverse(out)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: history of conversation %.128s of tenant %.128s: %w", conversationID, tenant, err)
	}
	return out, nil
}

// ClearHistory deletes the turns of a conversation of tenant, every
// agent's, and those of its threads when it is a channel's: the turns
// whose conversation id is conversationID or starts with conversationID
// followed by ";messageid=". A conversation whose id merely starts with
// conversationID is another one, and keeps its turns. It returns how many
// turns it deleted, and writes the audit records (their empty TenantID
// set to tenant) in the same commit, whether there were turns or not.
func (s *Store) ClearHistory(ctx context.Context, tenant, conversationID string, audit ...AuditRecord) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkKeyParts("the tenant id", tenant, "the conversation id", conversationID); err != nil {
		return 0, err
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.write(ctx, false, func(w writer) error {
		n = 0
		if err := w.deleteTurns(tenant, conversationID, threadPrefix(conversationID), func(d int) { n = d }); err != nil {
			return err
		}
		return w.appendAudit(prepared)
	})
	if err != nil {
		return 0, fmt.Errorf("store: clear the history of conversation %.128s of tenant %.128s: %w", conversationID, tenant, err)
	}
	return n, nil
}
