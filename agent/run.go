package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/telemetry"
	"teamsbot/internal/textclip"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// A run: the model asked, the tools it calls run through the governed
// path, and what the run made written with one store.SaveRun at its end.

// MaxToolCallsPerRound bounds the tool calls run for one reply of the
// model, so that a model (or a tool result that steers it) cannot make one
// run call tools, and keep views, without end; the rounds are bounded by
// ModelConfig.MaxToolRounds.
const MaxToolCallsPerRound = 16

// runState gathers what one run makes until it is saved.
type runState struct {
	svc    *Service
	agent  *agentRuntime
	person Person
	apps   bool // MCP Apps on for this run: globally and for the tenant
	id     string
	// progress hears of each tool call; nil when nobody listens.
	progress func(Step)
	start    time.Time

	answer Answer
	views  []store.NewView
	audit  []store.AuditRecord
	cat    catalogue
	// problems are what went wrong, with the detail for operators; the
	// person reads only their references (see problem).
	problems []store.RunProblem
	// elicited gathers the notes of servers' requests for the person's
	// input during the run's calls.
	elicited *elicitNotes
}

// note adds a run note: one line, at most maxNoteBytes, whatever a server
// or the model put into the arguments. Its arguments are names and counts,
// never an error's text: a note about a failure is noteProblem's.
func (r *runState) note(format string, args ...any) {
	r.answer.Notes = append(r.answer.Notes, oneLine(textclip.Clip(fmt.Sprintf(format, args...), maxNoteBytes)))
}

// Run runs an agent for a person and stores what it made. When the model
// fails, the run is still stored and the error wraps ErrModel; the Answer
// then holds what was made before the failure and a Text that says so. A
// ctx that ends during the run stops it the same way (the error wraps
// ctx's cause), and what the run did is still stored and audited.
func (s *Service) Run(ctx context.Context, req Request) (Answer, error) {
	a, err := s.agent(req.AgentID)
	if err != nil {
		return Answer{}, err
	}
	if req.Person.TenantID == "" {
		return Answer{}, fmt.Errorf("%w: a run needs a tenant", ErrBadRequest)
	}
	r := &runState{svc: s, agent: a, person: req.Person, id: newID(), start: s.now(), apps: s.opts.AppsEnabled, progress: req.Progress}
	// The servers reached as each person are reached as this one; the
	// person may be asked to connect one (and a call waits) only when
	// the run has someone to ask.
	ctx = withPerson(ctx, req.Person)
	if req.Connect != nil && req.Person.UserID != "" {
		ctx = mcpauth.WithWaiter(ctx, mcpauth.Waiter{Prompter: req.Connect, RunID: r.id})
	}
	r.elicited = &elicitNotes{}
	ctx = context.WithValue(ctx, notesKey{}, r.elicited)
	if req.Elicit != nil && req.Person.UserID != "" {
		ctx = WithElicitor(ctx, req.Elicit)
	}
	if r.apps && s.opts.Access != nil && !s.opts.Access.AppsEnabled(ctx, req.Person.TenantID) {
		r.apps = false
		r.note("MCP Apps are turned off for this tenant: every tool is offered and no views are made")
	}
	r.answer.RunID = r.id
	r.answer.AgentID = a.cfg.ID
	r.cat = a.catalogue(ctx, r)

	asked := Message{Role: RoleUser, Text: req.Text}
	if req.Shared {
		asked.From = req.Person.Name
	}
	earlier := r.history(ctx, req.Conversation)
	msgs := append(earlier, asked)
	first := len(earlier) // this turn's messages start here
	var runErr error
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			// Whatever the model would say now, the calls it made were
			// cut short: the run stops and says so.
			runErr = fmt.Errorf("agent %s: the run was stopped: %w", a.cfg.ID, context.Cause(ctx))
			r.noteProblem(context.Cause(ctx), "the run was stopped before it finished")
			r.answer.Text = "Sorry, the run was stopped before it finished."
			break
		}
		turn := Turn{AgentName: a.cfg.DisplayName(), Tools: r.cat.specs, Messages: msgs, Stream: req.Stream}
		last := round >= a.maxRounds
		turn.Final = last
		reply, err := r.askModel(ctx, turn, round)
		if err != nil {
			runErr = fmt.Errorf("agent %s: %w", a.cfg.ID, err)
			r.noteProblem(err, "the model could not answer")
			r.answer.Text = "Sorry, the model could not answer this time."
			break
		}
		reply.Role = RoleAssistant
		msgs = append(msgs, reply)
		if len(reply.ToolCalls) == 0 || last {
			if last && len(reply.ToolCalls) > 0 {
				r.note("stopped after %d rounds of tool calls", a.maxRounds)
			}
			r.answer.Text = reply.Text
			break
		}
		for i, call := range reply.ToolCalls {
			if i >= MaxToolCallsPerRound {
				// Every call still gets its tool message: the Chat
				// Completions API wants an answer to each call id.
				msgs = append(msgs, Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name, IsError: true,
					Text: fmt.Sprintf("not run: at most %d tool calls are run per round", MaxToolCallsPerRound)})
				continue
			}
			msgs = append(msgs, r.callForModel(ctx, call))
		}
		if n := len(reply.ToolCalls); n > MaxToolCallsPerRound {
			r.note("the model asked for %d tool calls at once; only the first %d were run", n, MaxToolCallsPerRound)
		}
	}

	// A turn that failed is not remembered: the next question starts
	// from what was answered.
	var turn *store.HistoryTurn
	if runErr == nil {
		var err error
		if turn, err = r.turnToKeep(context.WithoutCancel(ctx), req.Conversation, msgs[first:]); err != nil {
			s.log.WarnContext(ctx, "turn not kept in the conversation's memory", "run", r.id, "err", err)
		}
	}
	// The run is recorded even when ctx ended during it: the tool calls it
	// made happened, and the audit log must say so.
	if err := s.save(context.WithoutCancel(ctx), r, turn); err != nil {
		return r.answer, errors.Join(runErr, err)
	}
	return r.answer, runErr
}

// save writes the run, its views, its audit records and its turn of the
// conversation's memory (when it keeps one) in one commit.
func (s *Service) save(ctx context.Context, r *runState, turn *store.HistoryTurn) error {
	if s.opts.Store == nil {
		return nil
	}
	run := store.Run{
		ID:        r.id,
		AgentID:   r.agent.cfg.ID,
		TenantID:  r.person.TenantID,
		UserID:    r.person.UserID,
		UserName:  r.person.Name,
		Text:      r.answer.Text,
		Notes:     r.answer.Notes,
		Problems:  r.problems,
		CreatedAt: r.start,
	}
	for _, v := range r.answer.Views {
		run.ViewIDs = append(run.ViewIDs, v.ID)
	}
	if turn != nil {
		sctx, span := telemetry.StoreSpan(ctx, s.tracer, "SaveRunWithTurn")
		_, err := s.opts.Store.SaveRunWithTurn(sctx, run, r.views, r.audit, *turn)
		endStore(span, err)
		if !errors.Is(err, store.ErrInvalid) {
			if err != nil {
				return fmt.Errorf("agent: saving run %s: %w", r.id, err)
			}
			return nil
		}
		// A turn the store refuses is left out; the run is kept.
		s.log.Warn("turn not kept in the conversation's memory", "run", r.id, "err", err)
	}
	sctx, span := telemetry.StoreSpan(ctx, s.tracer, "SaveRun")
	err := s.opts.Store.SaveRun(sctx, run, r.views, r.audit)
	endStore(span, err)
	if err != nil {
		return fmt.Errorf("agent: saving run %s: %w", r.id, err)
	}
	return nil
}

// auditRecord builds one audit record of this run.
func (r *runState) auditRecord(action string, fields map[string]any) store.AuditRecord {
	fields["run"] = r.id
	fields["agent"] = r.agent.cfg.ID
	return store.AuditRecord{
		Time:     r.svc.now(),
		TenantID: r.person.TenantID,
		Action:   action,
		Actor:    r.person.UserID,
		Fields:   fields,
	}
}

// resultJSON encodes a tool result for a view.
func resultJSON(res *mcp.CallToolResult) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encoding tool result: %w", err)
	}
	return b, nil
}
