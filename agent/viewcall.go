package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// A view's tool calls through the governed path, the calls refused
// before it, and the channels a view tried that its sandbox keeps closed.

// CallFromView calls a tool for a view through the governed path. Only a
// tool of the view's own server whose visibility includes "app" may be
// called; anything else is refused with ErrToolNotAllowed. Every call is
// audited (agent.mcp_app.call: tool, server, caller, result, why). A tool's
// own failure is a result with IsError, not an error.
func (s *Service) CallFromView(ctx context.Context, v store.View, caller Person, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	// name comes from the view: it is clipped wherever it is written, and
	// goes into the metrics only once it is found in the server's list.
	rec := func(result, reason string, d decision) error {
		a := viewCallAudit(v, caller, name, result, reason)
		a.decision = d
		return s.auditViewCall(ctx, a)
	}
	// refuse refuses the call; label is the tool's metrics label.
	refuse := func(sentinel error, label, reason string) (*mcp.CallToolResult, error) {
		s.metrics.call(v.Server, label, true, ResultRefused)
		reason = textclip.Clip(reason, maxReasonBytes)
		err := fmt.Errorf("%w: %s", sentinel, reason)
		if aerr := rec(ResultRefused, reason, decision{}); aerr != nil {
			return nil, errors.Join(err, aerr)
		}
		return nil, err
	}

	a, ok := s.byID[v.AgentID]
	if !ok {
		return refuse(ErrToolNotAllowed, "", fmt.Sprintf("the view's agent %q is no longer configured", v.AgentID))
	}
	c := a.byName[v.Server]
	if c == nil {
		return refuse(ErrToolNotAllowed, "", fmt.Sprintf("the view's server %q is no longer configured", v.Server))
	}
	if !s.opts.AppsEnabled {
		return refuse(ErrToolNotAllowed, "", "MCP Apps are turned off")
	}
	if s.opts.Access != nil && !s.opts.Access.AppsEnabled(ctx, v.TenantID) {
		return refuse(ErrToolNotAllowed, "", "MCP Apps are turned off for this tenant")
	}
	if strings.Contains(name, "/") {
		return refuse(ErrToolNotAllowed, "", fmt.Sprintf("a view calls tools of its own server (%s) by name", v.Server))
	}
	// A server reached as each person is reached as the view's owner,
	// the person of its run; nobody is asked to connect from a view: a
	// connection gone is an error the view can show.
	ctx = withPerson(ctx, Person{TenantID: v.TenantID, UserID: v.UserID, Name: v.UserName})
	cs, _, err := c.sessionFor(ctx, false)
	if err != nil {
		s.metrics.call(v.Server, "", true, ResultError)
		return nil, errors.Join(err, rec(ResultError, err.Error(), decision{}))
	}
	tl, err := c.toolList(ctx, cs)
	if err != nil {
		s.metrics.call(v.Server, "", true, ResultError)
		return nil, errors.Join(err, rec(ResultError, err.Error(), decision{}))
	}
	e := tl.byName[name]
	if e == nil {
		return refuse(ErrToolNotAllowed, "", fmt.Sprintf("server %s has no tool %q", v.Server, name))
	}
	if !e.toApp {
		return refuse(ErrToolNotAllowed, name, fmt.Sprintf("tool %s/%s: its visibility %q lacks \"app\"", v.Server, name, e.ui.Visibility))
	}
	res, d, err := s.govern(ctx, governedCall{agent: a, conn: c, session: cs, args: args, call: toolCall{
		person: caller, agentID: v.AgentID, tenantID: v.TenantID, fromView: true, viewID: v.ID, server: v.Server, tool: name,
	}})
	if err == nil {
		res = s.boundForView(res, name)
	}
	if aerr := rec(outcome(res, err), why(res, err), d); aerr != nil {
		return nil, errors.Join(err, aerr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// RefuseViewCall records a view's tool call that was refused before it
// reached the governed path, because the caller may not run the view's
// tools (why says so). The agent owns the record of every call a view
// makes, refused ones included, so that they all read alike.
func (s *Service) RefuseViewCall(ctx context.Context, v store.View, caller Person, name, why string) error {
	s.metrics.call(v.Server, "", true, ResultRefused)
	return s.auditViewCall(ctx, viewCallAudit(v, caller, name, ResultRefused, why))
}

// auditViewCall writes the agent.mcp_app.call record of one tool call by
// a view, in the caller's own tenant: a refused caller of another tenant
// must not write into the view owner's log. It is recorded even when the
// caller went away during the call.
func (s *Service) auditViewCall(ctx context.Context, a callAudit) error {
	return s.appendAudit(context.WithoutCancel(ctx), a.record(s.now()))
}

// boundForView replaces a result larger than the view limit by an error
// result that says so: the page hands the result to the browser whole, and
// the view cannot do more with a result than with its HTML.
func (s *Service) boundForView(res *mcp.CallToolResult, name string) *mcp.CallToolResult {
	raw, err := json.Marshal(res)
	if err != nil {
		return errorResult(fmt.Sprintf("the result of %s cannot be encoded: %v", name, err))
	}
	if limit := s.maxResourceBytes(); len(raw) > limit {
		return errorResult(fmt.Sprintf("the result of %s is %d bytes, more than the %d a view receives; %s sets the limit", name, len(raw), limit, MaxHTMLSetting))
	}
	return res
}

func errorResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// RecordBlocked records that a view tried a channel its sandbox keeps
// closed (channel: "webrtc", a CSP directive such as "connect-src", or
// "connection-allowlist"), as the page showing it to viewer was told by
// the view's guard (source "view") or by the sandbox proxy (source
// "proxy"). Only the channel's name is kept: never a URL, a host name or
// anything the view sent, which is what the view was trying to get out.
// The caller checks that the view is the viewer's to see and limits how
// often a view is recorded; the record is in the viewer's tenant.
func (s *Service) RecordBlocked(ctx context.Context, v store.View, viewer Person, channel, source string) error {
	return s.appendAudit(context.WithoutCancel(ctx), store.AuditRecord{
		Time:     s.now(),
		TenantID: viewer.TenantID,
		Action:   AuditBlocked,
		Actor:    viewer.UserID,
		Fields: map[string]any{
			"view": v.ID, "server": v.Server, "tool": v.Tool, "agent": v.AgentID,
			"channel": textclip.Clip(channel, 64), "source": textclip.Clip(source, 16),
		},
	})
}

// RecordOpened records that viewer opened view v (the view page asked for
// it), in the viewer's tenant: who saw which tool's data, and the
// overview's count of views opened.
func (s *Service) RecordOpened(ctx context.Context, v store.View, viewer Person) error {
	return s.appendAudit(context.WithoutCancel(ctx), store.AuditRecord{
		Time:     s.now(),
		TenantID: viewer.TenantID,
		Action:   AuditOpened,
		Actor:    viewer.UserID,
		Fields:   map[string]any{"view": v.ID, "server": v.Server, "tool": v.Tool, "agent": v.AgentID, "run": v.RunID},
	})
}
