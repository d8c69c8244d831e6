package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/internal/textclip"
	"teamsbot/mcpapps"
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

// dataRules are compiled data rules: an agent's, and with the tenant's
// own added for one call.
type dataRules struct {
	deny   []string
	redact []*regexp.Regexp
}

func compileRules(rc RulesConfig) dataRules {
	r := dataRules{deny: rc.DenyTools}
	for _, p := range rc.Redact {
		r.redact = append(r.redact, regexp.MustCompile(p)) // validated in New
	}
	return r
}

// with returns the rules and the tenant's own together; neither is
// changed, since the agent's are shared by every call.
func (r dataRules) with(t access.Rules) dataRules {
	if len(t.Deny) == 0 && len(t.Redact) == 0 {
		return r
	}
	return dataRules{deny: slices.Concat(r.deny, t.Deny), redact: slices.Concat(r.redact, t.Redact)}
}

// denies reports the deny rule matching server/tool, if any.
func (r dataRules) denies(server, tool string) (string, bool) {
	for _, d := range r.deny {
		if d == tool || d == server+"/"+tool || d == server+"/*" {
			return d, true
		}
	}
	return "", false
}

const redacted = "[redacted]"

func (r dataRules) redactString(s string) string {
	for _, re := range r.redact {
		s = re.ReplaceAllLiteralString(s, redacted)
	}
	return s
}

// redactResult replaces matching text in every string of a result that
// the model or a view may see, in place: text, every part of a resource
// link and an embedded resource, image and audio metadata, annotations,
// icons, structuredContent (keys included) and every _meta. Only binary
// data (an image's bytes, a resource's blob) is left as it is: a pattern
// of text cannot match it meaningfully. A content type the rules cannot
// walk is withheld rather than passed through. The result is fresh from
// the wire and nobody else holds it.
func (r dataRules) redactResult(res *mcp.CallToolResult) {
	if len(r.redact) == 0 || res == nil {
		return
	}
	res.Meta = r.redactMeta(res.Meta)
	for i, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = r.redactString(c.Text)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.ImageContent:
			c.MIMEType = r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.AudioContent:
			c.MIMEType = r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		case *mcp.ResourceLink:
			c.URI, c.Name, c.Title = r.redactString(c.URI), r.redactString(c.Name), r.redactString(c.Title)
			c.Description, c.MIMEType = r.redactString(c.Description), r.redactString(c.MIMEType)
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
			for j := range c.Icons {
				ic := &c.Icons[j]
				ic.Source, ic.MIMEType = r.redactString(ic.Source), r.redactString(ic.MIMEType)
				ic.Theme = mcp.IconTheme(r.redactString(string(ic.Theme)))
				for k := range ic.Sizes {
					ic.Sizes[k] = r.redactString(ic.Sizes[k])
				}
			}
		case *mcp.EmbeddedResource:
			if rc := c.Resource; rc != nil {
				rc.URI, rc.MIMEType, rc.Text = r.redactString(rc.URI), r.redactString(rc.MIMEType), r.redactString(rc.Text)
				rc.Meta = r.redactMeta(rc.Meta)
			}
			c.Meta, c.Annotations = r.redactMeta(c.Meta), r.redactAnnotations(c.Annotations)
		default:
			res.Content[i] = &mcp.TextContent{Text: fmt.Sprintf("[a %T part was withheld: the data rules cannot redact it]", c)}
		}
	}
	res.StructuredContent = r.redactValue(res.StructuredContent)
}

// redactMeta redacts a _meta map; nil stays nil so that it is still left
// out on the wire.
func (r dataRules) redactMeta(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	out, _ := r.redactValue(map[string]any(m)).(map[string]any)
	return mcp.Meta(out)
}

func (r dataRules) redactAnnotations(a *mcp.Annotations) *mcp.Annotations {
	if a == nil {
		return nil
	}
	a.LastModified = r.redactString(a.LastModified)
	for i := range a.Audience {
		a.Audience[i] = mcp.Role(r.redactString(string(a.Audience[i])))
	}
	return a
}

func (r dataRules) redactValue(v any) any {
	switch v := v.(type) {
	case string:
		return r.redactString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[r.redactString(k)] = r.redactValue(x)
		}
		return out
	case []any:
		for i, x := range v {
			v[i] = r.redactValue(x)
		}
		return v
	case json.RawMessage:
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return v
		}
		return r.redactValue(x)
	default:
		return v
	}
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

// catalogue is the set of tools offered to the model in one run.
type catalogue struct {
	specs []ToolSpec
}

// catalogue builds what the model is offered from each server's cached
// tool list, and notes each tool left out and each server not reachable.
func (a *agentRuntime) catalogue(ctx context.Context, r *runState) catalogue {
	var cat catalogue
	for _, c := range a.servers {
		cs, reconnected, err := c.sessionFor(ctx, false)
		if reconnected {
			r.note("server %s had stopped; it was reconnected", c.name)
		}
		if errors.Is(err, ErrStarting) {
			r.noteProblem(err, "the %s server is still starting, so its tools were not offered", c.name)
			continue
		}
		if err != nil {
			r.noteProblem(err, "the %s server is unavailable, so its tools were not offered", c.name)
			continue
		}
		tl, err := c.toolList(ctx, cs)
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
		cs, _, err := c.sessionFor(ctx, false)
		if err != nil {
			continue // noted in the catalogue already
		}
		if tl, err := c.toolList(ctx, cs); err == nil && tl.byName[name] != nil {
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
	refuse := func(result, reason, said string, extra ...map[string]any) Message {
		reason = textclip.Clip(reason, maxReasonBytes)
		fields := map[string]any{"server": server, "tool": tool, "caller": "model", "result": result, "why": reason}
		for _, m := range extra {
			maps.Copy(fields, m)
		}
		r.audit = append(r.audit, r.auditRecord(AuditToolCall, fields))
		r.answer.ToolErrors = append(r.answer.ToolErrors, ToolError{Server: server, Tool: tool, Message: said})
		msg.Text, msg.IsError = said, true
		return msg
	}
	// fail ends a call that failed with err: the detail goes to the
	// operators under a reference, which the audit record names too.
	fail := func(result string, err error, extra ...map[string]any) Message {
		said, ref := r.problem(err, "%s", callFailure(server, tool, err))
		return refuse(result, err.Error(), said, append(extra, map[string]any{"ref": ref})...)
	}

	c, name, found := r.agent.resolve(ctx, call.Name)
	if found != "" {
		// Empty labels: a model's made-up names must not grow the metrics.
		svc.metrics.call("", "", false, ResultRefused)
		r.note("the model asked for %.128q: %s", call.Name, found)
		return refuse(ResultRefused, found, found)
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
		return fail(ResultError, err)
	}
	tl, err := c.toolList(ctx, cs)
	if err != nil {
		svc.metrics.call(server, "", false, ResultError)
		return fail(ResultError, err)
	}
	e := tl.byName[name]
	if e == nil {
		svc.metrics.call(server, "", false, ResultRefused)
		reason := fmt.Sprintf("server %s has no tool %q", server, tool)
		return refuse(ResultRefused, reason, reason)
	}
	if !e.toModel && r.apps {
		svc.metrics.call(server, tool, false, ResultRefused)
		reason := fmt.Sprintf("tool %s/%s is not offered to the model: %s", server, tool, e.notOffered)
		r.note("refused the model's call: %s", reason)
		return refuse(ResultRefused, reason, reason)
	}

	if r.progress != nil {
		r.progress(Step{Server: server, Tool: tool})
	}
	decided := map[string]any{}
	res, err := svc.govern(ctx, r.agent, c, cs, call.Arguments, toolCall{
		person: r.person, agentID: r.agent.cfg.ID, tenantID: r.person.TenantID, server: server, tool: tool,
	}, decided)
	result := outcome(res, err)
	if err != nil {
		if errors.Is(err, ErrUnavailable) {
			r.note("server %s stopped during the call; it will be reconnected on next use", server)
		}
		return fail(result, err, decided)
	}
	fields := map[string]any{"server": server, "tool": tool, "caller": "model", "result": result, "why": why(res, nil)}
	maps.Copy(fields, decided)
	r.audit = append(r.audit, r.auditRecord(AuditToolCall, fields))
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

// makeView reads and checks the tool's ui:// resource and makes a view of
// the call, or refuses it; either way the answer stands.
func (r *runState) makeView(ctx context.Context, c *serverConn, cs *mcp.ClientSession, e *toolEntry, args json.RawMessage, res *mcp.CallToolResult) {
	uri, tool := e.ui.ResourceURI, e.tool.Name
	entry := viewResource(ctx, c, cs, uri)
	refusal := entry.refusal
	var result json.RawMessage
	if refusal == nil {
		var err error
		if result, err = resultJSON(res); err != nil {
			r.noteProblem(err, "no view was made for %s/%s", c.name, tool)
			return
		}
		if args, err = objectArgs(args); err != nil {
			args = json.RawMessage("{}")
		}
		// The view keeps the arguments and the result for 7 days and
		// sends them to the browser: they are bounded like its HTML.
		if n, limit := len(args)+len(result), r.svc.maxResourceBytes(); n > limit {
			refusal = sizeRefusal("the tool's arguments and result are %d bytes, more than the limit of %d", n, limit)
		}
	}
	if refusal != nil {
		detail := textclip.Clip(refusal.Detail, maxReasonBytes)
		// The checker's detail may quote the server (its error when the
		// resource could not be read): it is for operators.
		said, ref := r.problem(errors.New(refusal.Reason+": "+detail), "no view was made for %s/%s", c.name, tool)
		rf := Refusal{Server: c.name, Tool: tool, ResourceURI: textclip.Clip(uri, maxURIBytes), Reason: refusal.Reason, Ref: ref}
		r.answer.Refusals = append(r.answer.Refusals, rf)
		r.audit = append(r.audit, r.auditRecord(AuditRefused, map[string]any{
			"server": c.name, "tool": tool, "uri": rf.ResourceURI, "reason": rf.Reason, "why": detail, "ref": ref,
		}))
		r.svc.metrics.refused(c.name, rf.Reason)
		r.answer.Notes = append(r.answer.Notes, said)
		return
	}
	asked := entry.ui.Permissions
	granted := asked.Grant(r.svc.allowedPermissions(ctx, c, r.person.TenantID))
	now := r.svc.now()
	v := store.View{
		ID:            newID(),
		RunID:         r.id,
		AgentID:       r.agent.cfg.ID,
		TenantID:      r.person.TenantID,
		UserID:        r.person.UserID,
		UserName:      r.person.Name,
		Server:        c.name,
		Tool:          tool,
		ToolTitle:     toolTitle(e.tool),
		ResourceURI:   uri,
		HTMLSHA256:    entry.sha,
		CSP:           entry.csp.Header,
		CSPDropped:    entry.csp.Dropped,
		Permissions:   asked,
		Granted:       granted,
		PrefersBorder: entry.ui.PrefersBorder,
		Arguments:     args,
		Result:        result,
		CreatedAt:     now,
		ExpiresAt:     now.Add(store.ViewLifetime),
	}
	r.answer.Views = append(r.answer.Views, v)
	r.views = append(r.views, store.NewView{View: v, HTML: entry.html})
	r.audit = append(r.audit, r.auditRecord(AuditView, map[string]any{
		"view": v.ID, "server": c.name, "tool": tool, "uri": uri,
		"sha256": entry.sha, "csp": entry.csp.Header, "cspDropped": entry.csp.Dropped,
		"permissionsAsked": orEmpty(asked.Names()), "permissionsGranted": orEmpty(granted.Names()),
	}))
	r.svc.metrics.view(c.name)
}

// allowedPermissions are the permissions the views of c may be granted in
// tenant: what the configuration file allows the server, and what the
// tenant's admin allows it.
func (s *Service) allowedPermissions(ctx context.Context, c *serverConn, tenant string) mcpapps.Permissions {
	allowed := c.allowed
	if s.opts.Access != nil {
		// Names were checked when the admin saved them; an unknown one
		// (from a newer version) allows nothing.
		if p, err := mcpapps.ParsePermissions(s.opts.Access.AppPermissions(ctx, tenant, c.name)); err == nil {
			allowed = allowed.Union(p)
		}
	}
	return allowed
}

// orEmpty makes a nil list an empty one, so that the audit record shows [].
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// viewResource returns the checked resource uri of a view, or its refusal.
// A URI that is not ui:// is refused before anything is read: a server
// cannot make the host fetch anything but a ui:// resource.
func viewResource(ctx context.Context, c *serverConn, cs *mcp.ClientSession, uri string) *resourceEntry {
	if err := mcpapps.CheckURI(uri); err != nil {
		var re *mcpapps.RefusedError
		if !errors.As(err, &re) {
			re = &mcpapps.RefusedError{Reason: mcpapps.ReasonScheme, Detail: err.Error()}
		}
		return &resourceEntry{refusal: re}
	}
	entry, err := c.resource(ctx, cs, uri)
	if err != nil {
		return &resourceEntry{refusal: &mcpapps.RefusedError{Reason: mcpapps.ReasonRead, Detail: err.Error()}}
	}
	return entry
}

// auditViewCall writes the agent.mcp_app.call record of one tool call by
// a view. It is recorded even when the caller went away during the call.
func (s *Service) auditViewCall(ctx context.Context, v store.View, caller Person, name, result, reason string, extra ...map[string]any) error {
	fields := map[string]any{
		"tool": textclip.Clip(name, maxToolNameBytes), "server": v.Server, "caller": caller.UserID, "result": result,
		"why": textclip.Clip(reason, maxReasonBytes), "view": v.ID, "agent": v.AgentID,
	}
	for _, m := range extra {
		maps.Copy(fields, m)
	}
	if caller.TenantID != v.TenantID {
		fields["caller_tenant"] = caller.TenantID
	}
	// In the caller's own tenant: a refused caller of another tenant must
	// not write into the view owner's log.
	return s.appendAudit(context.WithoutCancel(ctx), store.AuditRecord{
		Time:     s.now(),
		TenantID: caller.TenantID,
		Action:   AuditAppCall,
		Actor:    caller.UserID,
		Fields:   fields,
	})
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

// RefuseViewCall records a view's tool call that was refused before it
// reached the governed path, because the caller may not run the view's
// tools (why says so). The agent owns the record of every call a view
// makes, refused ones included, so that they all read alike.
func (s *Service) RefuseViewCall(ctx context.Context, v store.View, caller Person, name, why string) error {
	s.metrics.call(v.Server, "", true, ResultRefused)
	return s.auditViewCall(ctx, v, caller, name, ResultRefused, why)
}

// CallFromView calls a tool for a view through the governed path. Only a
// tool of the view's own server whose visibility includes "app" may be
// called; anything else is refused with ErrToolNotAllowed. Every call is
// audited (agent.mcp_app.call: tool, server, caller, result, why). A tool's
// own failure is a result with IsError, not an error.
func (s *Service) CallFromView(ctx context.Context, v store.View, caller Person, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	// name comes from the view: it is clipped wherever it is written, and
	// goes into the metrics only once it is found in the server's list.
	rec := func(result, reason string, extra ...map[string]any) error {
		return s.auditViewCall(ctx, v, caller, name, result, reason, extra...)
	}
	// refuse refuses the call; label is the tool's metrics label.
	refuse := func(sentinel error, label, reason string) (*mcp.CallToolResult, error) {
		s.metrics.call(v.Server, label, true, ResultRefused)
		reason = textclip.Clip(reason, maxReasonBytes)
		err := fmt.Errorf("%w: %s", sentinel, reason)
		if aerr := rec(ResultRefused, reason); aerr != nil {
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
	cs, _, err := c.sessionFor(ctx, false)
	if err != nil {
		s.metrics.call(v.Server, "", true, ResultError)
		return nil, errors.Join(err, rec(ResultError, err.Error()))
	}
	tl, err := c.toolList(ctx, cs)
	if err != nil {
		s.metrics.call(v.Server, "", true, ResultError)
		return nil, errors.Join(err, rec(ResultError, err.Error()))
	}
	e := tl.byName[name]
	if e == nil {
		return refuse(ErrToolNotAllowed, "", fmt.Sprintf("server %s has no tool %q", v.Server, name))
	}
	if !e.toApp {
		return refuse(ErrToolNotAllowed, name, fmt.Sprintf("tool %s/%s: its visibility %q lacks \"app\"", v.Server, name, e.ui.Visibility))
	}
	decided := map[string]any{}
	res, err := s.govern(ctx, a, c, cs, args, toolCall{
		person: caller, agentID: v.AgentID, tenantID: v.TenantID, fromView: true, viewID: v.ID, server: v.Server, tool: name,
	}, decided)
	if err == nil {
		res = s.boundForView(res, name)
	}
	if aerr := rec(outcome(res, err), why(res, err), decided); aerr != nil {
		return nil, errors.Join(err, aerr)
	}
	if err != nil {
		return nil, err
	}
	return res, nil
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

func (s *Service) appendAudit(ctx context.Context, rec store.AuditRecord) error {
	if s.opts.Store == nil {
		return nil
	}
	if err := s.opts.Store.Append(ctx, rec); err != nil {
		return fmt.Errorf("agent: audit: %w", err)
	}
	return nil
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
