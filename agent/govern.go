package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// Audit actions written by this package.
const (
	// AuditToolCall is a tool call by the model.
	AuditToolCall = "agent.tool.call"
	// AuditView is a view made.
	AuditView = "agent.mcp_app.view"
	// AuditRefused is a view refused: its resource is not a valid MCP App.
	AuditRefused = "agent.mcp_app.refused"
	// AuditAppCall is a tool call by a view.
	AuditAppCall = "agent.mcp_app.call"
	// AuditBlocked is a way out of its sandbox that a view tried and the
	// browser or the view's guard closed (RecordBlocked).
	AuditBlocked = "agent.mcp_app.blocked"
	// AuditOpened is a view opened by a person (RecordOpened).
	AuditOpened = "agent.mcp_app.open"
)

// Results of a tool call in audit records and metrics.
const (
	ResultOK      = "ok"
	ResultError   = "error"
	ResultRefused = "refused"
)

// Bounds on text from outside (a server's error message, a URI it
// declared, a tool name the model or a view made up) on its way into run
// notes, answers, errors and audit records: no server, model or view may
// make those arbitrarily large.
const (
	maxReasonBytes = 512
	maxNoteBytes   = 1024
	// maxURIBytes is mcpapps' own bound on a ui:// URI: a longer one is
	// refused, and shown only this far.
	maxURIBytes = 2048
)

// oneLine replaces control characters (line breaks, escapes) with spaces,
// so that a server's text cannot forge further lines or terminal escapes
// in a note.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// objectArgs checks that tool arguments are a JSON object; empty means {}.
func objectArgs(args json.RawMessage) (json.RawMessage, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		return json.RawMessage("{}"), nil
	}
	if args[0] != '{' || !json.Valid(args) {
		return nil, fmt.Errorf("%w: tool arguments must be a JSON object", ErrBadRequest)
	}
	return args, nil
}

// governedCall is one call on the governed path: the agent and server it
// goes to, the session it is sent on, its arguments, and who makes it.
type governedCall struct {
	agent   *agentRuntime
	conn    *serverConn
	session *mcp.ClientSession
	args    json.RawMessage
	call    toolCall
	// run is the model's run; empty for a view's call.
	run string
}

// govern is the one path every tool call takes, the model's and a view's:
// data rules, the policy, the server's timeout, and redaction of the
// result. It counts the call in the metrics, makes its span, and returns
// the access decision for the audit record, which the caller writes. A
// tool's own failure comes back as a result with IsError; a denial wraps
// ErrDenied; a transport failure is a Go error.
func (s *Service) govern(ctx context.Context, g governedCall) (*mcp.CallToolResult, decision, error) {
	ctx, span := s.startToolCall(ctx, g)
	res, d, err := s.governCall(ctx, g)
	result := outcome(res, err)
	s.metrics.call(g.conn.name, g.call.tool, g.call.fromView, result)
	endToolCall(span, d, result, res, err)
	return res, d, err
}

// governCall runs one call and returns its access decision (none asked
// when there is no Access or a data rule refused the call first).
func (s *Service) governCall(ctx context.Context, g governedCall) (*mcp.CallToolResult, decision, error) {
	c, k := g.conn, g.call
	tool := k.tool
	rules := g.agent.rules
	if s.opts.Access != nil {
		tenant, err := s.opts.Access.TenantRules(ctx, k.tenantID)
		if err != nil {
			return nil, decision{}, fmt.Errorf("%w: the tenant's data rules cannot be read: %w", ErrUnavailable, err)
		}
		rules = rules.with(tenant)
	}
	if rule, ok := rules.denies(c.name, tool); ok {
		return nil, decision{}, fmt.Errorf("%w: data rule denyTools %q", ErrDenied, rule)
	}
	var d decision
	if s.opts.Access != nil {
		var err error
		if d, err = s.decide(ctx, k); err != nil {
			return nil, d, err
		}
	}
	args, err := objectArgs(g.args)
	if err != nil {
		return nil, d, err
	}
	// The server's time to answer; the time a person takes to connect
	// it (a step-up) is not counted.
	cctx, cancel, pause, resume := pausableTimeout(ctx, c.timeout)
	defer cancel()
	// What the server asks the person during the call finds its way here.
	cctx, done := c.startElicitable(cctx, g, pause, resume)
	defer done()
	res, err := g.session.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		err = c.scrub(err)
		if sessionBroken(err) {
			c.markDead(g.session)
			return nil, d, fmt.Errorf("%w: %s: the connection broke during %s: %w", ErrUnavailable, c.name, tool, err)
		}
		if cctx.Err() != nil && ctx.Err() == nil {
			// The call's own clock (pausableTimeout) ends it with
			// context.DeadlineExceeded as the cause.
			return nil, d, fmt.Errorf("%s/%s: timed out after %s: %w", c.name, tool, c.timeout, context.Cause(cctx))
		}
		return nil, d, fmt.Errorf("%s/%s: %w", c.name, tool, err)
	}
	rules.redactResult(res)
	return res, d, nil
}

// decision is the Cedar decision on one call, as its audit record shows
// it. The zero decision is none asked.
type decision struct {
	// outcome is decisionAllow, decisionDeny, or decisionNone when no
	// decision could be made.
	outcome string
	// policies are the policies that decided, with allow or deny.
	policies []string
}

// The outcomes of a decision, as the audit record's "decision" says them.
const (
	decisionAllow = "allow"
	decisionDeny  = "deny"
	decisionNone  = "none"
)

// decide asks access for the Cedar decision on one call.
func (s *Service) decide(ctx context.Context, k toolCall) (decision, error) {
	caller, viewID := access.CallerModel, ""
	if k.fromView {
		caller, viewID = access.CallerView, k.viewID
	}
	d, err := s.opts.Access.Invoke(ctx, access.Person{TenantID: k.person.TenantID, UserID: k.person.UserID, Roles: k.person.Roles},
		access.Call{AgentID: k.agentID, AgentTenantID: k.tenantID, Server: k.server, Tool: k.tool, Caller: caller, ViewID: viewID})
	if err != nil {
		return decision{outcome: decisionNone}, fmt.Errorf("%w: no access decision could be made: %w", ErrDenied, err)
	}
	if !d.Allowed {
		why := "no policy permits it"
		switch {
		case len(d.Errors) > 0:
			why = strings.Join(d.Errors, "; ")
		case len(d.Policies) > 0:
			why = "forbidden by " + strings.Join(d.Policies, ", ")
		}
		return decision{outcome: decisionDeny, policies: d.Policies}, fmt.Errorf("%w: Cedar policy: %s", ErrDenied, why)
	}
	return decision{outcome: decisionAllow, policies: d.Policies}, nil
}

// callAudit is the audit record of one tool call: the model's
// (agent.tool.call) or a view's (agent.mcp_app.call), refused ones
// included. record is the one place it becomes the store's record; the
// field names are the audit log's, which docs/operations.md documents and the admin
// console shows.
type callAudit struct {
	// action is AuditToolCall or AuditAppCall.
	action string
	// tenant and actor are the record's: the run's person for the model,
	// the caller (in the caller's own tenant) for a view.
	tenant, actor string
	// server and tool are what was called, as far as it was found.
	server, tool string
	// caller is "model", or the user id of the person whose view called.
	caller string
	// result is ResultOK, ResultError or ResultRefused; why says why a
	// call did not succeed.
	result, why string
	// decision is the Cedar decision, when one was asked.
	decision decision
	// agent is the agent the call was made for.
	agent string
	// run is the model's run (agent.tool.call only); ref is the reference
	// a person was given for a call of the model that failed.
	run, ref string
	// view is the view that called (agent.mcp_app.call only); viewTenant
	// is its tenant, named as caller_tenant when the caller's differs.
	view, viewTenant string
}

// modelCallAudit is the record of a call of the model in run r.
func (r *runState) modelCallAudit(server, tool, result, why string) callAudit {
	return callAudit{action: AuditToolCall, tenant: r.person.TenantID, actor: r.person.UserID,
		server: server, tool: tool, caller: "model", result: result, why: why, agent: r.agent.cfg.ID, run: r.id}
}

// viewCallAudit is the record of a call of view v by caller: the tool name
// is the view's and clipped, and so is why.
func viewCallAudit(v store.View, caller Person, name, result, why string) callAudit {
	return callAudit{action: AuditAppCall, tenant: caller.TenantID, actor: caller.UserID,
		server: v.Server, tool: textclip.Clip(name, maxToolNameBytes), caller: caller.UserID,
		result: result, why: textclip.Clip(why, maxReasonBytes), agent: v.AgentID, view: v.ID, viewTenant: v.TenantID}
}

// record is the store's audit record of the call, at now.
func (a callAudit) record(now time.Time) store.AuditRecord {
	f := map[string]any{
		"server": a.server, "tool": a.tool, "caller": a.caller, "result": a.result, "why": a.why, "agent": a.agent,
	}
	switch a.action {
	case AuditToolCall:
		f["run"] = a.run
		if a.ref != "" {
			f["ref"] = a.ref
		}
	case AuditAppCall:
		f["view"] = a.view
		if a.tenant != a.viewTenant {
			f["caller_tenant"] = a.tenant
		}
	}
	if a.decision.outcome != "" {
		f["decision"] = a.decision.outcome
		if a.decision.outcome != decisionNone {
			f["policies"] = a.decision.policies
		}
	}
	return store.AuditRecord{Time: now, TenantID: a.tenant, Action: a.action, Actor: a.actor, Fields: f}
}

// outcome classifies a call for audit and metrics.
func outcome(res *mcp.CallToolResult, err error) string {
	switch {
	case errors.Is(err, ErrDenied), errors.Is(err, ErrBadRequest), errors.Is(err, ErrToolNotAllowed):
		return ResultRefused
	case err != nil, res == nil, res.IsError:
		return ResultError
	default:
		return ResultOK
	}
}

// why is the reason recorded for a call that did not succeed.
func why(res *mcp.CallToolResult, err error) string {
	if err != nil {
		return textclip.Clip(err.Error(), maxReasonBytes)
	}
	if res != nil && res.IsError {
		return "the tool reported an error: " + textclip.Clip(resultText(res), 200)
	}
	return ""
}

func (s *Service) appendAudit(ctx context.Context, rec store.AuditRecord) error {
	if s.opts.Store == nil {
		return nil
	}
	if err := s.opts.Store.Append(ctx, rec); err != nil {
		return fmt.Errorf("agent: audit: %w", err)
	}
	return nil
}
