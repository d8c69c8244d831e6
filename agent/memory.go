package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
	var out []Message
	for _, h := range hs {
		var ms []historyMessage
		if err := json.Unmarshal(h.Messages, &ms); err != nil {
			s.log.Warn("a kept turn does not decode; left out", "run", r.id, "turn", h.Seq, "err", err)
			continue
		}
		prefix := fmt.Sprintf("h%d_", h.Seq)
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
	}
	return out
}

// remember keeps the run's turn (its messages from the person's on) in
// the conversation's memory, through the data rules.
func (r *runState) remember(ctx context.Context, conversation string, msgs []Message) error {
	s := r.svc
	if turns, _ := r.agent.cfg.Memory.bounds(); s.opts.Store == nil || conversation == "" || turns == 0 || len(msgs) == 0 {
		return nil
	}
	rules := r.agent.rules
	if s.opts.Access != nil {
		tenant, err := s.opts.Access.TenantRules(ctx, r.person.TenantID)
		if err != nil {
			return fmt.Errorf("agent: the tenant's data rules cannot be read, so the turn is not kept: %w", err)
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
		return fmt.Errorf("agent: encoding the turn: %w", err)
	}
	_, err = s.opts.Store.AppendTurn(ctx, store.HistoryTurn{
		TenantID: r.person.TenantID, ConversationID: conversation, RunID: r.id, AgentID: r.agent.cfg.ID,
		UserID: r.person.UserID, UserName: r.person.Name, At: s.now(), Messages: b, Tokens: tokensOf(b),
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("agent: keeping the turn: %w", err)
	}
	return err
}
