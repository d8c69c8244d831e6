package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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

// govern is the one path every tool call takes, the model's and a view's:
// data rules, the policy, the server's timeout, and redaction of the
// result. It counts the call in the metrics; the caller writes the audit
// record. A tool's own failure comes back as a result with IsError; a
// denial wraps ErrDenied; a transport failure is a Go error.
func (s *Service) govern(ctx context.Context, a *agentRuntime, c *serverConn, cs *mcp.ClientSession, args json.RawMessage, k toolCall, fields map[string]any) (*mcp.CallToolResult, error) {
	res, err := s.governCall(ctx, a, c, cs, args, k, fields)
	s.metrics.call(c.name, k.tool, k.fromView, outcome(res, err))
	return res, err
}

// governCall runs one call; it adds the access decision to fields, the
// call's audit record.
func (s *Service) governCall(ctx context.Context, a *agentRuntime, c *serverConn, cs *mcp.ClientSession, args json.RawMessage, k toolCall, fields map[string]any) (*mcp.CallToolResult, error) {
	tool := k.tool
	rules := a.rules
	if s.opts.Access != nil {
		tenant, err := s.opts.Access.TenantRules(ctx, k.tenantID)
		if err != nil {
			return nil, fmt.Errorf("%w: the tenant's data rules cannot be read: %w", ErrUnavailable, err)
		}
		rules = rules.with(tenant)
	}
	if rule, ok := rules.denies(c.name, tool); ok {
		return nil, fmt.Errorf("%w: data rule denyTools %q", ErrDenied, rule)
	}
	if s.opts.Access != nil {
		if err := s.decide(ctx, k, fields); err != nil {
			return nil, err
		}
	}
	args, err := objectArgs(args)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		err = c.scrub(err)
		if sessionBroken(err) {
			c.markDead(cs)
			return nil, fmt.Errorf("%w: %s: the connection broke during %s: %w", ErrUnavailable, c.name, tool, err)
		}
		if cctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("%s/%s: timed out after %s: %w", c.name, tool, c.timeout, cctx.Err())
		}
		return nil, fmt.Errorf("%s/%s: %w", c.name, tool, err)
	}
	rules.redactResult(res)
	return res, nil
}

// decide asks access for the Cedar decision on one call and records it
// (allow or deny, and the policies that decided) in fields.
func (s *Service) decide(ctx context.Context, k toolCall, fields map[string]any) error {
	caller, viewID := access.CallerModel, ""
	if k.fromView {
		caller, viewID = access.CallerView, k.viewID
	}
	d, err := s.opts.Access.Invoke(ctx, access.Person{TenantID: k.person.TenantID, UserID: k.person.UserID, Roles: k.person.Roles},
		access.Call{AgentID: k.agentID, AgentTenantID: k.tenantID, Server: k.server, Tool: k.tool, Caller: caller, ViewID: viewID})
	if err != nil {
		fields["decision"] = "none"
		return fmt.Errorf("%w: no access decision could be made: %w", ErrDenied, err)
	}
	fields["policies"] = d.Policies
	if !d.Allowed {
		fields["decision"] = "deny"
		why := "no policy permits it"
		switch {
		case len(d.Errors) > 0:
			why = strings.Join(d.Errors, "; ")
		case len(d.Policies) > 0:
			why = "forbidden by " + strings.Join(d.Policies, ", ")
		}
		return fmt.Errorf("%w: Cedar policy: %s", ErrDenied, why)
	}
	fields["decision"] = "allow"
	return nil
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
