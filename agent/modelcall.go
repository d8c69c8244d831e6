package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/textclip"
)

// The model's tool calls: the catalogue it is offered, the names it
// gives resolved to a server's tool, and each call run through the
// governed path.

// catalogue is the set of tools offered to the model in one run.
type catalogue struct {
	specs []ToolSpec
}

// catalogue builds what the model is offered from each server's cached
// tool list, and notes each tool left out and each server not reachable.
func (a *agentRuntime) catalogue(ctx context.Context, r *runState) catalogue {
	var cat catalogue
	for _, c := range a.servers {
		tl, reconnected, err := c.listFor(ctx)
		if reconnected {
			r.note("server %s had stopped; it was reconnected", c.name)
		}
		if errors.Is(err, ErrStarting) {
			r.noteProblem(err, "the %s server is still starting, so its tools were not offered", c.name)
			continue
		}
		if words, ok := authFailure(c.name, err); ok {
			r.note("%s, so its tools were not offered", words)
			continue
		}
		if errors.Is(err, errNoSession) {
			r.noteProblem(err, "the %s server is unavailable, so its tools were not offered", c.name)
			continue
		}
		if err != nil {
			r.noteProblem(err, "the %s server did not list its tools, so they were not offered", c.name)
			continue
		}
		specs := tl.specs
		if !r.apps {
			// MCP Apps are off for the tenant: every tool, as without the
			// extension, and no notes about visibility.
			specs = tl.all
		} else {
			r.answer.Notes = append(r.answer.Notes, tl.notes...)
		}
		if len(a.servers) == 1 {
			cat.specs = specs // read-only, shared with other runs
		} else {
			cat.specs = append(cat.specs, specs...)
		}
	}
	return cat
}

// resolve finds the server and tool a model names: "server/tool", or a bare
// tool name that exactly one server has. When it finds none, missing says
// why, in words for the person and the model (names only, no error text).
func (a *agentRuntime) resolve(ctx context.Context, name string) (c *serverConn, tool, missing string) {
	if server, tool, ok := strings.Cut(name, "/"); ok {
		c := a.byName[server]
		if c == nil {
			return nil, "", fmt.Sprintf("no server %.64q", server)
		}
		return c, tool, ""
	}
	var found []*serverConn
	for _, c := range a.servers {
		if tl, _, err := c.listFor(ctx); err == nil && tl.byName[name] != nil {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, "", fmt.Sprintf("no tool %.128q", name)
	case 1:
		return found[0], name, ""
	default:
		return nil, "", fmt.Sprintf("tool %.128q is on several servers; name it as server/tool", name)
	}
}

// callForModel runs one tool call the model asked for and returns the tool
// message the model reads next. Calls of tools not offered to the model are
// refused here, whatever the model asked.
func (r *runState) callForModel(ctx context.Context, call ToolCall) Message {
	msg := Message{Role: RoleTool, ToolCallID: call.ID, ToolName: call.Name}
	svc := r.svc
	server, tool := "", textclip.Clip(call.Name, maxToolNameBytes)
	// refuse ends a call that gave no result: the audit record's why has
	// the reason, the person and the model read said (the same, or the
	// person's words and a reference when the reason is an error's text).
	refuse := func(result, reason, said string, d decision, ref string) Message {
		a := r.modelCallAudit(server, tool, result, textclip.Clip(reason, maxReasonBytes))
		a.decision, a.ref = d, ref
		r.audit = append(r.audit, a.record(svc.now()))
		r.answer.ToolErrors = append(r.answer.ToolErrors, ToolError{Server: server, Tool: tool, Message: said})
		msg.Text, msg.IsError = said, true
		return msg
	}
	// fail ends a call that failed with err: the detail goes to the
	// operators under a reference, which the audit record names too.
	fail := func(result string, err error, d decision) Message {
		said, ref := r.problem(err, "%s", callFailure(server, tool, err))
		return refuse(result, err.Error(), said, d, ref)
	}

	c, name, found := r.agent.resolve(ctx, call.Name)
	if found != "" {
		// Empty labels: a model's made-up names must not grow the metrics.
		svc.metrics.call("", "", false, ResultRefused)
		r.note("the model asked for %.128q: %s", call.Name, found)
		return refuse(ResultRefused, found, found, decision{}, "")
	}
	// Until the tool is found in the server's list, its name is the
	// model's and goes into the metrics as "", like a made-up server.
	server, tool = c.name, textclip.Clip(name, maxToolNameBytes)
	cs, reconnected, err := c.sessionFor(ctx, false)
	if reconnected {
		r.note("server %s had stopped; it was reconnected", c.name)
	}
	if err != nil {
		svc.metrics.call(server, "", false, ResultError)
		return fail(ResultError, err, decision{})
	}
	tl, err := c.toolList(ctx, cs)
	if err != nil {
		svc.metrics.call(server, "", false, ResultError)
		return fail(ResultError, err, decision{})
	}
	e := tl.byName[name]
	if e == nil {
		svc.metrics.call(server, "", false, ResultRefused)
		reason := fmt.Sprintf("server %s has no tool %q", server, tool)
		return refuse(ResultRefused, reason, reason, decision{}, "")
	}
	if !e.toModel && r.apps {
		svc.metrics.call(server, tool, false, ResultRefused)
		reason := fmt.Sprintf("tool %s/%s is not offered to the model: %s", server, tool, e.notOffered)
		r.note("refused the model's call: %s", reason)
		return refuse(ResultRefused, reason, reason, decision{}, "")
	}

	if r.progress != nil {
		r.progress(Step{Server: server, Tool: tool})
	}
	res, d, err := svc.govern(ctx, governedCall{agent: r.agent, conn: c, session: cs, args: call.Arguments, run: r.id, call: toolCall{
		person: r.person, agentID: r.agent.cfg.ID, tenantID: r.person.TenantID, server: server, tool: tool,
	}})
	for _, n := range r.elicited.take() {
		r.note("%s", n)
	}
	result := outcome(res, err)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			r.note("server %s stopped during the call; it will be reconnected on next use", server)
		}
		return fail(result, err, d)
	}
	a := r.modelCallAudit(server, tool, result, why(res, nil))
	a.decision = d
	r.audit = append(r.audit, a.record(svc.now()))
	msg.Text = modelText(res)
	if res.IsError {
		msg.IsError = true
		r.answer.ToolErrors = append(r.answer.ToolErrors, ToolError{Server: server, Tool: tool, Message: textclip.Clip(resultText(res), 500)})
	}
	// A view is made for a failed call too: MCP App views show error
	// results (isError) themselves.
	viewsBefore := len(r.answer.Views)
	if r.apps && e.ui.ResourceURI != "" {
		r.makeView(ctx, c, cs, e, call.Arguments, res)
	}
	if !res.IsError {
		viewID := ""
		if len(r.answer.Views) > viewsBefore {
			viewID = r.answer.Views[len(r.answer.Views)-1].ID
		}
		r.addSource(Source{Server: server, Tool: tool, ViewID: viewID})
	}
	return msg
}

// addSource records a tool the answer relies on, once; a later call of
// the same tool only adds the view the first one lacked.
func (r *runState) addSource(src Source) {
	for i, have := range r.answer.Sources {
		if have.Server == src.Server && have.Tool == src.Tool {
			if have.ViewID == "" {
				r.answer.Sources[i].ViewID = src.ViewID
			}
			return
		}
	}
	r.answer.Sources = append(r.answer.Sources, src)
}

// resultText joins a result's text content.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// maxModelTextBytes bounds what the model reads of one result: a server's
// result may be of any size, and a request far beyond the model's context
// would fail the whole run rather than this one result.
const maxModelTextBytes = 256 << 10

// modelText is what the model reads of a result: its ordinary content, as
// text. Images and resources are named, never inlined, so no view HTML
// ever reaches the model; structuredContent is used only when there is no
// text. Beyond maxModelTextBytes the text is cut, and says so.
func modelText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if b.Len() > maxModelTextBytes {
			break
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			b.WriteString("[image " + c.MIMEType + "]")
		case *mcp.AudioContent:
			b.WriteString("[audio " + c.MIMEType + "]")
		case *mcp.ResourceLink:
			b.WriteString("[resource " + c.URI + "]")
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				b.WriteString("[resource " + c.Resource.URI + "]")
			}
		}
	}
	if b.Len() == 0 && res.StructuredContent != nil {
		if j, err := json.Marshal(res.StructuredContent); err == nil {
			b.Write(j)
		}
	}
	if b.Len() > maxModelTextBytes {
		return textclip.Clip(b.String(), maxModelTextBytes) + fmt.Sprintf(" [the result was cut here: only its first %d KiB are shown]", maxModelTextBytes>>10)
	}
	return b.String()
}

// errNoSession marks listFor's failure to get a session, as opposed to
// the session's failure to list.
var errNoSession = errors.New("no session")

// listFor returns the server's tool list: the cached one when there is
// one (for a server reached as each person, whoever's session read it, so
// that a person who has not connected it is asked only when the model
// calls one of its tools), else read through the session of ctx's person.
// A failure to get a session wraps errNoSession.
func (c *serverConn) listFor(ctx context.Context) (*toolList, bool, error) {
	if c.perPerson() {
		c.cmu.RLock()
		tl := c.tools
		c.cmu.RUnlock()
		if tl != nil {
			return tl, false, nil
		}
	}
	cs, reconnected, err := c.sessionFor(ctx, false)
	if err != nil {
		return nil, reconnected, fmt.Errorf("%w: %w", errNoSession, err)
	}
	tl, err := c.toolList(ctx, cs)
	return tl, reconnected, err
}
