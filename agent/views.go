package agent

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/textclip"
	"teamsbot/mcpapps"
	"teamsbot/store"
)

// Views: the ui:// resource of a called tool read and checked, and a
// view of the call kept, or refused.

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
