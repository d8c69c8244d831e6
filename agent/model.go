package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"teamsbot/internal/telemetry"
)

// Message roles.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one message of a run's conversation with the model.
type Message struct {
	Role string
	// Text is what the person wrote, the model's answer, or (RoleTool) the
	// ordinary tool result as text: never a view's HTML.
	Text string
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall
	// From names who wrote a RoleUser message in a conversation several
	// people share (a group chat, a channel): the model is told who said
	// what. Empty in a personal chat.
	From string
	// ToolCallID and ToolName say which call a RoleTool message answers.
	ToolCallID string
	ToolName   string
	// IsError marks a RoleTool message of a call that failed or was refused.
	IsError bool
}

// ToolCall is a call the model asks for. Name is "server/tool" as offered
// (a bare tool name is accepted when only one server has it).
type ToolCall struct {
	ID        string
	Name      string
	Arguments json.RawMessage
}

// ToolSpec is a tool offered to the model.
type ToolSpec struct {
	// Name is "server/tool", unique in a run.
	Name        string
	Server      string
	Tool        string
	Title       string
	Description string
	// InputSchema is the tool's JSON Schema as the server sent it.
	InputSchema any
}

// Turn is what the model is given to take its next step.
type Turn struct {
	AgentName string
	// Tools are the tools offered.
	Tools    []ToolSpec
	Messages []Message
	// Final says the rounds of tool calls are used up: the model must
	// answer now, without calling tools.
	Final bool
	// Stream, when set, hears the final answer's text as the model writes
	// it: deltas, in order, quickly, on the goroutine that reads the answer
	// (the run's, or an asker's). Never tool calls. Nil: the model answers
	// in one piece.
	Stream func(delta string)
}

// Model picks tools and writes the answer. Next returns either tool calls
// or, with none, the final answer in Text; the Message carries the whole
// Text whether or not Turn.Stream heard it in pieces.
type Model interface {
	Next(ctx context.Context, t Turn) (Message, error)
}

// asker is a Model that answers without its caller waiting: Ask returns
// at once and calls done once, on a goroutine of its own, with what Next
// would have returned; t.Stream hears the answer on that goroutine. A run
// whose model streams for minutes then has no goroutine waiting for it
// but the one reading the answer, which goes on with the run (RunThen).
type asker interface {
	Model
	Ask(ctx context.Context, t Turn, done func(Message, error))
}

// newModel makes an agent's model from its configuration.
func (s *Service) newModel(ac AgentConfig) (Model, int, error) {
	m := ac.Model
	rounds := m.MaxToolRounds
	if rounds == 0 {
		rounds = DefaultMaxToolRounds
	}
	switch m.Kind {
	case "", ModelBuiltin:
		return NewBuiltinModel(), rounds, nil
	case ModelOpenAI:
		var o OpenAIOptions
		switch {
		case m.Entra:
			if s.opts.ModelToken == nil {
				return nil, 0, errors.New("the model is set to sign in with Entra ID (entra: true), but the service has no credential for it")
			}
			o.Token = s.opts.ModelToken
		case m.APIKeyEnv != "":
			o.Key = s.getenv(m.APIKeyEnv)
			if o.Key == "" {
				s.log.Warn("model key variable is empty; sending no key", "agent", ac.ID, "variable", m.APIKeyEnv)
			}
		}
		if s.opts.HTTPClient != nil {
			o.Transport = s.opts.HTTPClient.Transport
		}
		// The model's server may join its spans to the call's.
		o.Transport = telemetry.Transport(o.Transport, s.opts.Propagator)
		om, err := NewOpenAIModel(m, o)
		if err != nil {
			return nil, 0, err
		}
		return om, rounds, nil
	default:
		return nil, 0, fmt.Errorf("unknown model kind %q", m.Kind)
	}
}
