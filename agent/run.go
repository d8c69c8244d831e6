package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/offstack"
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
	var ans Answer
	err := s.RunRequest(ctx, &req, &ans)
	return ans, err
}

// RunRequest is Run for a request given by its address, which the caller
// keeps unchanged until it returns, with the answer written to ans.
func (s *Service) RunRequest(ctx context.Context, req *Request, ans *Answer) error {
	done := make(chan error, 1)
	s.RunThen(ctx, req, ans, func(err error) { done <- err })
	return <-done
}

// RunThen is RunRequest without its caller waiting for the run: it
// returns once the run is under way, and then is called once the run is
// over, with RunRequest's error and ans written; req stays unchanged
// until then. then runs on the goroutine that ends the run: the caller's
// when no model was asked without waiting (an error, the built-in model),
// else the one that read the model's last reply.
//
// A Teams turn may wait minutes for a model that streams, and thousands
// wait at once: a model that answers without its caller waiting (asker)
// reads its answer on a goroutine of its own, which then goes on with
// the run, and no other goroutine, with its frames and its stack, waits
// for it. The deep work before the model is asked (begin, the
// conversation's memory, the tool calls) is done off the stack of the
// goroutine that goes on (offstack), so that its stack stays small.
func (s *Service) RunThen(ctx context.Context, req *Request, ans *Answer, then func(error)) {
	var r *runState
	var err error
	offstack.Run(func() { r, ctx, err = s.begin(ctx, req) })
	if err != nil {
		then(err)
		return
	}
	c := &conversation{r: r, ctx: ctx, req: req, end: func(msgs []Message, runErr error) {
		then(s.finish(ctx, r, req, msgs, runErr, ans))
	}}
	offstack.Run(func() { c.msgs = r.opening(ctx, req) })
	c.first = len(c.msgs) - 1 // this turn's messages start with the question
	c.ask()
}

// begin sets a run up: its agent, its person, who may be asked what, and
// the tools offered.
func (s *Service) begin(ctx context.Context, req *Request) (*runState, context.Context, error) {
	a, err := s.agent(req.AgentID)
	if err != nil {
		return nil, ctx, err
	}
	if req.Person.TenantID == "" {
		return nil, ctx, fmt.Errorf("%w: a run needs a tenant", ErrBadRequest)
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
	return r, ctx, nil
}

// conversation is a run's exchange with its model: the model is asked,
// the tools it calls are run and it is asked again, until it answers or
// the rounds run out. Its steps are methods rather than one loop, so that
// no goroutine waits for a reply: a model that answers without its
// caller waiting (asker) hands its reply to replied.
type conversation struct {
	r   *runState
	ctx context.Context
	req *Request
	// msgs are the earlier turns, then this turn's from first on.
	msgs  []Message
	first int
	round int
	// end is called once, with this turn's messages and the run's error.
	end func(msgs []Message, runErr error)
}

// ask asks the model, round after round while a model that is not an
// asker answers here; an asker's reply goes to replied.
func (c *conversation) ask() {
	for {
		if c.ctx.Err() != nil {
			c.end(c.msgs[c.first:], c.r.stopped(c.ctx))
			return
		}
		reply, answered, err := c.r.askModel(c.ctx, c.r.turn(c.req, c.msgs, c.last()), c.round, c.replied)
		if !answered || !c.take(reply, err) {
			return
		}
	}
}

// replied goes on with the conversation once an asker replied.
func (c *conversation) replied(reply Message, err error) {
	if c.take(reply, err) {
		c.ask()
	}
}

// last says whether this round is the last: the model must answer.
func (c *conversation) last() bool { return c.round >= c.r.agent.maxRounds }

// take takes the model's reply. It ends the conversation, or runs the
// tool calls the reply asks for and reports that the model is to be asked
// again.
func (c *conversation) take(reply Message, err error) (again bool) {
	if err != nil {
		c.end(c.msgs[c.first:], c.r.modelFailed(err))
		return false
	}
	reply.Role = RoleAssistant
	c.msgs = append(c.msgs, reply)
	if last := c.last(); len(reply.ToolCalls) == 0 || last {
		c.r.answered(&reply, last)
		c.end(c.msgs[c.first:], nil)
		return false
	}
	calls := reply.ToolCalls
	offstack.Run(func() { c.msgs = c.r.callTools(c.ctx, c.msgs, calls) })
	c.round++
	return true
}

// turn is what the model is asked in a round. (DisplayName copies the
// agent's configuration: here, not in the caller's frame.)
//
//go:noinline
func (r *runState) turn(req *Request, msgs []Message, last bool) Turn {
	return Turn{AgentName: r.agent.cfg.DisplayName(), Tools: r.cat.specs, Messages: msgs, Stream: req.Stream, Final: last}
}

// opening is what the model reads first: the conversation's earlier turns,
// then the question.
func (r *runState) opening(ctx context.Context, req *Request) []Message {
	asked := Message{Role: RoleUser, Text: req.Text}
	if req.Shared {
		asked.From = req.Person.Name
	}
	return append(r.history(ctx, req.Conversation), asked)
}

// stopped ends a run whose ctx ended: whatever the model would say now,
// the calls it made were cut short, and the run says so.
//
//go:noinline
func (r *runState) stopped(ctx context.Context) error {
	r.noteProblem(context.Cause(ctx), "the run was stopped before it finished")
	r.answer.Text = "Sorry, the run was stopped before it finished."
	return fmt.Errorf("agent %s: the run was stopped: %w", r.agent.cfg.ID, context.Cause(ctx))
}

// modelFailed ends a run whose model could not answer.
//
//go:noinline
func (r *runState) modelFailed(err error) error {
	r.noteProblem(err, "the model could not answer")
	r.answer.Text = "Sorry, the model could not answer this time."
	return fmt.Errorf("agent %s: %w", r.agent.cfg.ID, err)
}

// answered takes the model's last reply as the answer.
//
//go:noinline
func (r *runState) answered(reply *Message, last bool) {
	if last && len(reply.ToolCalls) > 0 {
		r.note("stopped after %d rounds of tool calls", r.agent.maxRounds)
	}
	r.answer.Text = reply.Text
}

// callTools runs a round's tool calls, and adds their results to msgs.
func (r *runState) callTools(ctx context.Context, msgs []Message, calls []ToolCall) []Message {
	for i, call := range calls {
		if i >= MaxToolCallsPerRound {
			// Every call still gets its tool message: the Chat
			// Completions API wants an answer to each call id.
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name, IsError: true,
				Text: fmt.Sprintf("not run: at most %d tool calls are run per round", MaxToolCallsPerRound)})
			continue
		}
		msgs = append(msgs, r.callForModel(ctx, call))
	}
	if n := len(calls); n > MaxToolCallsPerRound {
		r.note("the model asked for %d tool calls at once; only the first %d were run", n, MaxToolCallsPerRound)
	}
	return msgs
}

// finish keeps the run: its turn of the conversation's memory when it
// answered (msgs are this turn's messages), and the run, its views and
// its audit records, also when ctx ended during it (the tool calls it made
// happened, and the audit log must say so).
//
//go:noinline
func (s *Service) finish(ctx context.Context, r *runState, req *Request, msgs []Message, runErr error, ans *Answer) error {
	// A turn that failed is not remembered: the next question starts
	// from what was answered.
	var turn *store.HistoryTurn
	if runErr == nil {
		var err error
		if turn, err = r.turnToKeep(context.WithoutCancel(ctx), req.Conversation, msgs); err != nil {
			s.log.WarnContext(ctx, "turn not kept in the conversation's memory", "run", r.id, "err", err)
		}
	}
	*ans = r.answer
	if err := s.save(context.WithoutCancel(ctx), r, turn); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
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
