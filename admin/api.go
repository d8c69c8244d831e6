package admin

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/guid"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// maxAPIBody bounds an admin API request body: a policy text is at most
// 256 KiB.
const maxAPIBody = 512 << 10

// readJSON decodes a request body of at most maxAPIBody bytes: one JSON
// object of the fields v takes, refused in plain words otherwise.
func readJSON(c echo.Context, v any) error {
	return web.ReadJSON(c, v, maxAPIBody)
}

// apiError answers a refused change with its words, under the same rules
// as the console.
func apiError(err error) error {
	if msg, ok := problemOf(err); ok {
		status := http.StatusBadRequest
		switch {
		case errors.Is(err, store.ErrConflict):
			status = http.StatusConflict
		case errors.Is(err, store.ErrNotFound):
			status = http.StatusNotFound
		case errors.Is(err, access.ErrDenied):
			status = http.StatusForbidden
		}
		return web.NewError(status, msg).Wrap(err)
	}
	return err
}

// binding is a binding as the API takes and gives it.
type binding struct {
	Agent       string    `json:"agent"`
	Kind        string    `json:"kind"`
	Subject     string    `json:"subject"`
	Role        string    `json:"role"`
	DisplayName string    `json:"displayName,omitempty"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	CreatedAt   time.Time `json:"createdAt,omitzero"`
}

// JSONFields are the fields a binding's call takes; the others are the
// answer's (and are taken back without complaint).
func (*binding) JSONFields() []string { return []string{"agent", "kind", "subject", "role"} }

func (h *Handler) apiBindings(c echo.Context, p access.Person) error {
	bs, err := h.opts.Access.Bindings(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := make([]binding, 0, len(bs))
	for _, b := range bs {
		out = append(out, binding{Agent: b.AgentID, Kind: b.Kind, Subject: b.Subject, Role: b.Role, DisplayName: b.DisplayName, CreatedBy: b.CreatedBy, CreatedAt: b.CreatedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"bindings": out})
}

func (h *Handler) apiAddBinding(c echo.Context, p access.Person) error {
	var in binding
	if err := readJSON(c, &in); err != nil {
		return err
	}
	b, err := h.bindingFrom(c.Request().Context(), p, in.Agent, in.Kind, in.Subject, in.Role)
	if err == nil {
		err = h.opts.Access.AddBinding(c.Request().Context(), p, b)
	}
	if err != nil {
		return apiError(err)
	}
	return c.JSON(http.StatusCreated, binding{Agent: b.AgentID, Kind: b.Kind, Subject: b.Subject, Role: b.Role, DisplayName: b.DisplayName})
}

func (h *Handler) apiRemoveBinding(c echo.Context, p access.Person) error {
	var in binding
	if err := readJSON(c, &in); err != nil {
		return err
	}
	if err := h.opts.Access.RemoveBinding(c.Request().Context(), p, in.Agent, in.Kind, strings.ToLower(in.Subject), in.Role); err != nil {
		return apiError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// settings are the tenant settings as the API takes and gives them.
type settings struct {
	DefaultRunner bool   `json:"defaultRunner"`
	DefaultGroup  string `json:"defaultGroup"`
	AppsEnabled   bool   `json:"appsEnabled"`
	// HistoryForTriggers lets runs without a person (schedules, the runs
	// API) read and add to the memory of the conversation they post into.
	// Absent in a PUT: left as it is, so that a script written before it
	// existed does not turn it off.
	HistoryForTriggers *bool `json:"historyForTriggers"`
	// AppPermissions are, by server, the permissions the tenant allows
	// that server's views. Absent in a PUT: left as they are.
	AppPermissions map[string][]string `json:"appPermissions"`
	// ElicitationOff are the servers that may not ask the tenant's people
	// for input during a tool call (MCP elicitation); every other server
	// may. Absent in a PUT: left as it is.
	ElicitationOff []string `json:"elicitationOff"`
}

func (h *Handler) apiSettings(c echo.Context, p access.Person) error {
	s, err := h.opts.Access.TenantSettings(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	perms := s.AppPermissions
	if perms == nil {
		perms = map[string][]string{}
	}
	off := s.ElicitationOff
	if off == nil {
		off = []string{}
	}
	return c.JSON(http.StatusOK, settings{DefaultRunner: s.Default.Runner, DefaultGroup: s.Default.Group, AppsEnabled: s.AppsEnabled,
		HistoryForTriggers: &s.HistoryForTriggers, AppPermissions: perms, ElicitationOff: off})
}

func (h *Handler) apiPutSettings(c echo.Context, p access.Person) error {
	var in settings
	if err := readJSON(c, &in); err != nil {
		return err
	}
	in.DefaultGroup = strings.ToLower(strings.TrimSpace(in.DefaultGroup))
	if in.DefaultGroup != "" && !guid.Valid(in.DefaultGroup) {
		return web.NewError(http.StatusBadRequest, "defaultGroup must be an Entra object id (a GUID), or empty.")
	}
	ctx := c.Request().Context()
	cur, err := h.opts.Access.TenantSettings(ctx, p.TenantID)
	if err != nil {
		return err
	}
	if cur.Default != (access.Default{Runner: in.DefaultRunner, Group: in.DefaultGroup}) {
		if err := h.opts.Access.SetDefault(ctx, p, access.Default{Runner: in.DefaultRunner, Group: in.DefaultGroup}); err != nil {
			return apiError(err)
		}
	}
	if cur.AppsEnabled != in.AppsEnabled {
		if err := h.opts.Access.SetAppsEnabled(ctx, p, in.AppsEnabled); err != nil {
			return apiError(err)
		}
	}
	if in.HistoryForTriggers != nil && cur.HistoryForTriggers != *in.HistoryForTriggers {
		if err := h.opts.Access.SetHistoryForTriggers(ctx, p, *in.HistoryForTriggers); err != nil {
			return apiError(err)
		}
	}
	if in.AppPermissions != nil {
		for server := range in.AppPermissions {
			if !h.configured(server) {
				return web.NewError(http.StatusBadRequest, fmt.Sprintf("appPermissions: no MCP server of the configuration is named %.64q; the configured servers are %s.", server, h.serverNames()))
			}
		}
		// Every configured server: one left out of the map is allowed nothing.
		for _, srv := range h.opts.Servers {
			want := in.AppPermissions[srv.Name]
			if slices.Equal(slices.Sorted(slices.Values(want)), cur.AppPermissions[srv.Name]) {
				continue
			}
			if err := h.opts.Access.SetAppPermissions(ctx, p, srv.Name, want); err != nil {
				if errors.Is(err, store.ErrInvalid) {
					return web.NewError(http.StatusBadRequest, "appPermissions: only camera, microphone, geolocation and clipboardWrite can be allowed.")
				}
				return apiError(err)
			}
		}
	}
	if in.ElicitationOff != nil {
		if err := h.putElicitation(c, p, cur.ElicitationOff, in.ElicitationOff); err != nil {
			return err
		}
	}
	return h.apiSettings(c, p)
}

// putElicitation makes the servers that may not ask people for input
// those of want, and cur (the stored list) the others, one audited change
// per server that changes. A name in want must be a configured server,
// or one already in cur, so that what a GET gave can be put back after a
// server left the configuration.
func (h *Handler) putElicitation(c echo.Context, p access.Person, cur, want []string) error {
	for _, server := range want {
		if !h.configured(server) && !slices.Contains(cur, server) {
			return web.NewError(http.StatusBadRequest, fmt.Sprintf("elicitationOff: no MCP server of the configuration is named %.64q; the configured servers are %s.", server, h.serverNames()))
		}
	}
	servers := slices.Clone(cur)
	for _, s := range h.opts.Servers {
		if !slices.Contains(servers, s.Name) {
			servers = append(servers, s.Name)
		}
	}
	for _, server := range servers {
		off := slices.Contains(want, server)
		if off == slices.Contains(cur, server) {
			continue
		}
		if err := h.opts.Access.SetElicitation(c.Request().Context(), p, server, !off); err != nil {
			return apiError(err)
		}
	}
	return nil
}

// dataRules are the tenant's own data rules as the API takes and gives
// them; Configured, in answers only, are the agents' rules from the
// service's configuration file, which apply as well.
type dataRules struct {
	DenyTools  []string     `json:"denyTools"`
	Redact     []string     `json:"redact"`
	Version    uint64       `json:"version"`
	Configured []agentRules `json:"configured,omitempty"`
}

// JSONFields are the fields a PUT takes: the configured rules are the
// answer's only.
func (*dataRules) JSONFields() []string { return []string{"denyTools", "redact", "version"} }

// agentRules are one agent's configured data rules.
type agentRules struct {
	Agent     string   `json:"agent"`
	DenyTools []string `json:"denyTools"`
	Redact    []string `json:"redact"`
}

func (h *Handler) apiDataRules(c echo.Context, p access.Person) error {
	r, version, err := h.opts.Access.TenantDataRules(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	out := dataRules{DenyTools: nonNil(r.DenyTools), Redact: nonNil(r.Redact), Version: version, Configured: []agentRules{}}
	for _, a := range h.opts.Rules {
		out.Configured = append(out.Configured, agentRules{Agent: a.Agent, DenyTools: nonNil(a.Deny), Redact: nonNil(a.Redact)})
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handler) apiPutDataRules(c echo.Context, p access.Person) error {
	var in dataRules
	if err := readJSON(c, &in); err != nil {
		return err
	}
	if in.Configured != nil {
		return web.NewError(http.StatusBadRequest, "configured rules come from the service's configuration file; send denyTools, redact and version only.")
	}
	err := h.opts.Access.SetDataRules(c.Request().Context(), p, access.DataRules{DenyTools: in.DenyTools, Redact: in.Redact}, in.Version)
	if err != nil {
		var re *access.RulesError
		if errors.As(err, &re) {
			return c.JSON(http.StatusBadRequest, map[string]any{"error": "The data rules were not saved.", "problems": re.Problems})
		}
		return apiError(err)
	}
	return h.apiDataRules(c, p)
}

// policies are the policy set as the API takes and gives it.
type policies struct {
	Text    string `json:"text"`
	Version uint64 `json:"version"`
}

func (h *Handler) apiPolicies(c echo.Context, p access.Person) error {
	text, version, err := h.opts.Access.PolicyText(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, policies{Text: text, Version: version})
}

func (h *Handler) apiPutPolicies(c echo.Context, p access.Person) error {
	var in policies
	if err := readJSON(c, &in); err != nil {
		return err
	}
	v, err := h.opts.Access.SetPolicies(c.Request().Context(), p, in.Text, in.Version)
	if err != nil {
		var pe *access.PolicyError
		if errors.As(err, &pe) {
			return c.JSON(http.StatusBadRequest, map[string]any{"error": "The policies were not saved: " + pe.Error(),
				"problems": []string{pe.Error()}, "line": pe.Line, "column": pe.Column})
		}
		return apiError(err)
	}
	return c.JSON(http.StatusOK, policies{Text: in.Text, Version: v})
}

// policyTest is the tester's request: text empty tests the saved policies.
type policyTest struct {
	Text   string `json:"text"`
	User   string `json:"user"`
	Agent  string `json:"agent"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Caller string `json:"caller"`
}

func (h *Handler) apiTestPolicies(c echo.Context, p access.Person) error {
	var in policyTest
	if err := readJSON(c, &in); err != nil {
		return err
	}
	if !guid.Valid(strings.ToLower(in.User)) {
		return web.NewError(http.StatusBadRequest, "user must be an Entra object id (a GUID).")
	}
	d, err := h.explain(c.Request().Context(), p, in.Text, testForm{User: strings.ToLower(in.User), Agent: in.Agent, Server: in.Server, Tool: in.Tool, Caller: in.Caller})
	if err != nil {
		var pe *access.PolicyError
		if msg, ok := testProblem(in.Text, err); ok && errors.As(err, &pe) {
			return c.JSON(http.StatusBadRequest, map[string]any{"error": msg, "problems": []string{pe.Error()}, "line": pe.Line, "column": pe.Column})
		}
		return apiError(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"allowed": d.Allowed, "policies": nonNil(d.Policies), "errors": nonNil(d.Errors)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (h *Handler) apiViews(c echo.Context, p access.Person) error {
	views, next, err := h.activeViews(c, p)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(views))
	for _, v := range views {
		out = append(out, map[string]any{"id": v.ID, "owner": v.UserID, "ownerName": v.UserName, "server": v.Server, "tool": v.Tool, "createdAt": v.CreatedAt, "expiresAt": v.ExpiresAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"views": out, "next": next})
}

func (h *Handler) apiRevokeView(c echo.Context, p access.Person) error {
	if err := h.revoke(c.Request().Context(), p, c.Param("id")); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errNoView
		}
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handler) apiRuns(c echo.Context, p access.Person) error {
	runs, err := h.opts.Store.RecentRuns(c.Request().Context(), p.TenantID, runsPerPage)
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []store.Run{}
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": runs})
}

func (h *Handler) apiConversations(c echo.Context, p access.Person) error {
	convs, err := h.opts.Store.Conversations(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	out := make([]map[string]any, 0, len(convs))
	for _, cv := range convs {
		out = append(out, map[string]any{"key": cv.Key, "conversation": cv.ConversationID, "channel": cv.ChannelID, "updatedAt": cv.UpdatedAt})
	}
	return c.JSON(http.StatusOK, map[string]any{"conversations": out})
}

func (h *Handler) apiAudit(c echo.Context, p access.Person) error {
	_, _, _, recs, next, err := h.auditRecords(c, p)
	if err != nil {
		return err
	}
	if recs == nil {
		recs = []store.AuditRecord{}
	}
	return c.JSON(http.StatusOK, map[string]any{"records": recs, "next": next})
}

func (h *Handler) apiExport(c echo.Context, p access.Person) error {
	switch c.QueryParam("format") {
	case "csv":
		return h.exportCSV(c, p)
	case "", "jsonl":
		return h.exportJSONL(c, p)
	}
	return web.NewError(http.StatusBadRequest, "format is jsonl or csv.")
}

// exportJSONL streams the filtered audit records as JSON Lines, newest
// first, never holding the set in memory.
func (h *Handler) exportJSONL(c echo.Context, p access.Person) error {
	return h.export(c, p, "application/x-ndjson", "audit.jsonl", func(w *bufio.Writer) func(store.AuditRecord) error {
		enc := json.NewEncoder(w)
		return func(r store.AuditRecord) error { return enc.Encode(r) }
	})
}

// exportCSV streams the filtered audit records as CSV: time, tenant,
// action, person, and the fields as JSON.
func (h *Handler) exportCSV(c echo.Context, p access.Person) error {
	return h.export(c, p, "text/csv; charset=utf-8", "audit.csv", func(w *bufio.Writer) func(store.AuditRecord) error {
		cw := csv.NewWriter(w)
		header := false
		return func(r store.AuditRecord) error {
			if !header {
				header = true
				if err := cw.Write([]string{"time", "tenant", "action", "actor", "fields"}); err != nil {
					return err
				}
			}
			fields := fieldsText(r.Fields)
			if err := cw.Write([]string{r.Time.UTC().Format(time.RFC3339Nano), r.TenantID, r.Action, csvSafe(r.Actor), csvSafe(fields)}); err != nil {
				return err
			}
			cw.Flush()
			return cw.Error()
		}
	})
}

// csvSafe keeps a spreadsheet from reading a value as a formula.
func csvSafe(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// export writes the response head, then every record through the
// writer's encoder as the store reads them. An error after the first byte
// cannot change the status any more: it is logged and the body ends.
func (h *Handler) export(c echo.Context, p access.Person, contentType, name string, encoder func(*bufio.Writer) func(store.AuditRecord) error) error {
	f, _, _, err := filterFrom(c, p, h.now())
	if err != nil {
		return err
	}
	res := c.Response()
	res.Header().Set("Content-Type", contentType)
	res.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	res.WriteHeader(http.StatusOK)
	w := bufio.NewWriterSize(res, 64<<10)
	enc := encoder(w)
	n := 0
	err = h.opts.Store.ExportAudit(c.Request().Context(), f, func(r store.AuditRecord) error {
		if err := enc(r); err != nil {
			return err
		}
		if n++; n%1000 == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
			res.Flush()
		}
		return nil
	})
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		h.log.Warn("audit export ended early", "tenant", p.TenantID, "records", n, "err", err)
	}
	return nil
}
