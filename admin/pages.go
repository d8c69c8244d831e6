package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/guid"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// The console's page sizes.
const (
	viewsPerPage = 50
	runsPerPage  = 50
	auditPerPage = 50
)

// accessPage is /admin: role bindings, the tenant default, MCP Apps, the
// memory of runs without a person, the permissions of views, the
// servers that may ask people for input, the data rules.
type accessPage struct {
	pageData
	Bindings   []store.Binding
	Agents     []string
	Settings   access.Settings
	AppsGlobal bool
	Rules      []Rules
	// TenantRules is the rules form: the saved rules, or the admin's
	// refused edit, kept so that nothing typed is lost.
	TenantRules  rulesForm
	RulesVersion uint64
	// Servers are the permissions form, a row per configured server.
	Servers []serverPermissions
	// Elicitation are the elicitation forms, one per configured server.
	Elicitation []serverElicitation
}

// serverElicitation is one server's elicitation switch: whether the
// server may ask the tenant's people for input during a tool call.
type serverElicitation struct {
	Name, ID string
	On       bool
}

func (h *Handler) elicitationRows(s access.Settings) []serverElicitation {
	rows := make([]serverElicitation, 0, len(h.opts.Servers))
	for i, srv := range h.opts.Servers {
		rows = append(rows, serverElicitation{Name: srv.Name, ID: fmt.Sprintf("e-%d", i), On: !slices.Contains(s.ElicitationOff, srv.Name)})
	}
	return rows
}

// configured reports whether server is the name of a configured MCP
// server: the tenant settings by server name take no other.
func (h *Handler) configured(server string) bool {
	return slices.ContainsFunc(h.opts.Servers, func(s Server) bool { return s.Name == server })
}

// serverNames lists the configured MCP servers' names, for a message
// that refuses another.
func (h *Handler) serverNames() string {
	names := make([]string, 0, len(h.opts.Servers))
	for _, s := range h.opts.Servers {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// serverPermissions is one server's row of the permissions form.
type serverPermissions struct {
	Name       string
	Configured string // what the configuration file allows, for every tenant
	Boxes      []permissionBox
}

// permissionBox is one checkbox of the permissions form.
type permissionBox struct {
	Name, ID string
	Checked  bool
}

// permissionNames are the permissions a tenant may allow a server's views
// (the store checks them against the extension's list).
func permissionNames() []string {
	return []string{"camera", "microphone", "geolocation", "clipboardWrite"}
}

func (h *Handler) permissionRows(s access.Settings) []serverPermissions {
	rows := make([]serverPermissions, 0, len(h.opts.Servers))
	for i, srv := range h.opts.Servers {
		row := serverPermissions{Name: srv.Name, Configured: strings.Join(srv.Configured, ", ")}
		for _, n := range permissionNames() {
			row.Boxes = append(row.Boxes, permissionBox{Name: n, ID: fmt.Sprintf("p-%d-%s", i, n),
				Checked: slices.Contains(s.AppPermissions[srv.Name], n)})
		}
		rows = append(rows, row)
	}
	return rows
}

// rulesForm is the tenant's data rules as the form shows them, one a line.
type rulesForm struct{ Deny, Redact string }

func (h *Handler) accessPage(c echo.Context, p access.Person) error {
	return h.renderAccess(c, http.StatusOK, p, "")
}

func (h *Handler) renderAccess(c echo.Context, status int, p access.Person, problem string) error {
	return h.renderAccessWith(c, status, p, nil, problem)
}

// renderAccessWith renders /admin; draft, when set, fills the rules form
// instead of the saved rules.
func (h *Handler) renderAccessWith(c echo.Context, status int, p access.Person, draft *rulesForm, problem string) error {
	ctx := c.Request().Context()
	bindings, err := h.opts.Access.Bindings(ctx, p)
	if err != nil {
		return err
	}
	settings, err := h.opts.Access.TenantSettings(ctx, p.TenantID)
	if err != nil {
		return err
	}
	rules, version, err := h.opts.Access.TenantDataRules(ctx, p.TenantID)
	if err != nil {
		return err
	}
	d := &accessPage{Bindings: bindings, Agents: h.opts.Agents, Settings: settings, AppsGlobal: h.opts.AppsEnabled, Rules: h.opts.Rules,
		TenantRules: rulesForm{Deny: strings.Join(rules.DenyTools, "\n"), Redact: strings.Join(rules.Redact, "\n")}, RulesVersion: version,
		Servers: h.permissionRows(settings), Elicitation: h.elicitationRows(settings)}
	if draft != nil {
		d.TenantRules = *draft
	}
	// The people the bindings name (users bound, and who made each
	// binding), by name; a group keeps the name Graph gave it when bound.
	known := map[string]string{p.UserID: p.Name}
	var ids []string
	for _, b := range bindings {
		if b.Kind == store.KindUser {
			ids = append(ids, b.Subject)
			if b.DisplayName != "" {
				known[b.Subject] = b.DisplayName
			}
		}
		ids = append(ids, b.CreatedBy)
	}
	d.Names = h.names(ctx, p, known, ids...)
	return h.render(c, status, "access", "Access", p, d, problem)
}

// saveRules saves the tenant's own data rules from the form: one rule a
// line, blank lines ignored.
func (h *Handler) saveRules(c echo.Context, p access.Person) error {
	// Browsers send a textarea's lines with CRLF; the form shows them back.
	nl := strings.NewReplacer("\r\n", "\n")
	draft := rulesForm{Deny: nl.Replace(c.FormValue("deny")), Redact: nl.Replace(c.FormValue("redact"))}
	version, err := strconv.ParseUint(c.FormValue("version"), 10, 64)
	if err != nil {
		return h.renderAccessWith(c, http.StatusBadRequest, p, &draft, "The form lost its version. Reload the page.")
	}
	rules := access.DataRules{DenyTools: lines(draft.Deny), Redact: lines(draft.Redact)}
	if err := h.opts.Access.SetDataRules(c.Request().Context(), p, rules, version); err != nil {
		if msg, ok := problemOf(err); ok {
			status := http.StatusBadRequest
			if errors.Is(err, store.ErrConflict) {
				status = http.StatusConflict
			}
			return h.renderAccessWith(c, status, p, &draft, msg)
		}
		return err
	}
	return done(c, "/admin", "rules-saved")
}

// lines splits a textarea into its non-blank lines, trimmed.
func lines(text string) []string {
	var out []string
	for l := range strings.Lines(text) {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// refused words a refused input: the reasons the refusing part gave for
// a person (web.Words), never its error text, which carries package
// prefixes and record keys for the log.
func refused(err error) string {
	words := web.Words(err)
	if words == "" {
		return "That was refused."
	}
	return web.Sentence("That was refused: " + words)
}

// badInput is input the console refuses before asking access or the
// store: Words says why, for the admin.
type badInput struct {
	words string
	cause error
}

func (e *badInput) Error() string {
	if e.cause != nil {
		return "admin: " + e.words + ": " + e.cause.Error()
	}
	return "admin: " + e.words
}

// Words is why the input was refused, in plain words.
func (e *badInput) Words() string { return e.words }

func (e *badInput) Unwrap() error { return e.cause }

// problemOf turns a refused change into words for the page, or returns
// the error when it is not the admin's to fix.
func problemOf(err error) (string, bool) {
	var de *access.DeniedError
	var pe *access.PolicyError
	var re *access.RulesError
	switch {
	case errors.As(err, &pe):
		return "The policies were not saved: " + pe.Error(), true
	case errors.As(err, &re):
		return "The data rules were not saved:\n" + strings.Join(re.Problems, "\n"), true
	case errors.Is(err, store.ErrConflict):
		return "Someone else saved a change in the meantime. Reload the page, then make your change again.", true
	case errors.Is(err, store.ErrInvalid), errors.As(err, new(*badInput)):
		return refused(err), true
	case errors.Is(err, store.ErrNotFound):
		return "There is no such record any more. Reload the page.", true
	case errors.As(err, &de):
		return de.Reason, true
	}
	return "", false
}

func (h *Handler) addBinding(c echo.Context, p access.Person) error {
	b, err := h.bindingFrom(c.Request().Context(), p, c.FormValue("agent"), c.FormValue("kind"), strings.TrimSpace(c.FormValue("subject")), c.FormValue("role"))
	if err == nil {
		err = h.opts.Access.AddBinding(c.Request().Context(), p, b)
	}
	if err != nil {
		if msg, ok := problemOf(err); ok {
			return h.renderAccess(c, http.StatusBadRequest, p, msg)
		}
		return err
	}
	return done(c, "/admin", "binding-added")
}

// bindingFrom builds a binding, with a group's display name looked up
// through Graph when it can be (a group that cannot be found is refused:
// its id is mistyped or of another tenant).
func (h *Handler) bindingFrom(ctx context.Context, p access.Person, agent, kind, subject, role string) (store.Binding, error) {
	if agent == "" {
		agent = store.AllAgents
	}
	b := store.Binding{TenantID: p.TenantID, AgentID: agent, Kind: kind, Subject: strings.ToLower(subject), Role: role}
	if !guid.Valid(b.Subject) {
		return b, &badInput{words: "the object id must be a GUID, as Entra shows it"}
	}
	if kind == store.KindGroup && h.opts.Groups != nil {
		name, err := h.opts.Groups.GroupName(ctx, p.TenantID, b.Subject)
		if err != nil {
			return b, &badInput{words: "the group could not be found in your directory", cause: err}
		}
		b.DisplayName = name
	}
	return b, nil
}

func (h *Handler) removeBinding(c echo.Context, p access.Person) error {
	bindings, err := h.opts.Access.Bindings(c.Request().Context(), p)
	if err != nil {
		return err
	}
	var q *confirmation
	for _, b := range bindings {
		if b.AgentID == c.FormValue("agent") && b.Kind == c.FormValue("kind") && b.Subject == c.FormValue("subject") && b.Role == c.FormValue("role") {
			q = new(bindingConfirmation(b))
		}
	}
	if !confirmed(c, q) {
		return h.ask(c, p, "access", q)
	}
	err = h.opts.Access.RemoveBinding(c.Request().Context(), p, c.FormValue("agent"), c.FormValue("kind"), c.FormValue("subject"), c.FormValue("role"))
	if err != nil {
		if msg, ok := problemOf(err); ok {
			return h.renderAccess(c, http.StatusBadRequest, p, msg)
		}
		return err
	}
	return done(c, "/admin", "binding-removed")
}

func (h *Handler) setDefault(c echo.Context, p access.Person) error {
	d := access.Default{Runner: c.FormValue("runner") == "on", Group: strings.ToLower(strings.TrimSpace(c.FormValue("group")))}
	if d.Group != "" && !guid.Valid(d.Group) {
		return h.renderAccess(c, http.StatusBadRequest, p, "The group must be an Entra object id (a GUID), or empty for everyone.")
	}
	if err := h.opts.Access.SetDefault(c.Request().Context(), p, d); err != nil {
		if msg, ok := problemOf(err); ok {
			return h.renderAccess(c, http.StatusBadRequest, p, msg)
		}
		return err
	}
	return done(c, "/admin", "default-saved")
}

func (h *Handler) setApps(c echo.Context, p access.Person) error {
	if err := h.opts.Access.SetAppsEnabled(c.Request().Context(), p, c.FormValue("on") == "on"); err != nil {
		return err
	}
	return done(c, "/admin", "apps-saved")
}

// setHistory saves whether runs without a person (schedules, the runs
// API) read and add to the memory of the conversation they post into.
func (h *Handler) setHistory(c echo.Context, p access.Person) error {
	if err := h.opts.Access.SetHistoryForTriggers(c.Request().Context(), p, c.FormValue("on") == "on"); err != nil {
		if msg, ok := problemOf(err); ok {
			status := http.StatusBadRequest
			if errors.Is(err, store.ErrConflict) {
				status = http.StatusConflict
			}
			return h.renderAccess(c, status, p, msg)
		}
		return err
	}
	return done(c, "/admin", "history-saved")
}

// setPermissions saves the permissions the tenant allows one server's
// views: the checked boxes.
func (h *Handler) setPermissions(c echo.Context, p access.Person) error {
	server := c.FormValue("server")
	if !h.configured(server) {
		return h.renderAccess(c, http.StatusBadRequest, p, "No MCP server of the configuration has that name.")
	}
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	if err := h.opts.Access.SetAppPermissions(c.Request().Context(), p, server, form["perm"]); err != nil {
		if errors.Is(err, store.ErrInvalid) {
			return h.renderAccess(c, http.StatusBadRequest, p, "Only camera, microphone, geolocation and clipboardWrite can be allowed.")
		}
		return err
	}
	return done(c, "/admin", "perms-saved")
}

// setElicitation saves whether one server may ask the tenant's people
// for input during a tool call: its switch.
func (h *Handler) setElicitation(c echo.Context, p access.Person) error {
	server := c.FormValue("server")
	if !h.configured(server) {
		return h.renderAccess(c, http.StatusBadRequest, p, "No MCP server of the configuration has that name.")
	}
	if err := h.opts.Access.SetElicitation(c.Request().Context(), p, server, c.FormValue("on") == "on"); err != nil {
		if msg, ok := problemOf(err); ok {
			status := http.StatusBadRequest
			if errors.Is(err, store.ErrConflict) {
				status = http.StatusConflict
			}
			return h.renderAccess(c, status, p, msg)
		}
		return err
	}
	return done(c, "/admin", "elicit-saved")
}

// policiesPage is /admin/policies: the text, saving it, and the tester.
type policiesPage struct {
	pageData
	Text    string
	Version uint64
	Agents  []string
	Test    testForm
	Result  *access.Decision
}

// testForm is the tester's input.
type testForm struct {
	User, Agent, Server, Tool, Caller string
}

func (h *Handler) policiesPage(c echo.Context, p access.Person) error {
	pe, err := h.opts.Access.SavedPoliciesRefused(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	problem := ""
	if pe != nil {
		problem, _ = testProblem("", pe)
	}
	return h.renderPolicies(c, http.StatusOK, p, nil, testForm{Caller: access.CallerView}, nil, problem)
}

func (h *Handler) renderPolicies(c echo.Context, status int, p access.Person, text *string, t testForm, res *access.Decision, problem string) error {
	saved, version, err := h.opts.Access.PolicyText(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	if text == nil {
		text = &saved
	}
	d := &policiesPage{Text: *text, Version: version, Agents: h.opts.Agents, Test: t, Result: res}
	return h.render(c, status, "policies", "Policies", p, d, problem)
}

func (h *Handler) savePolicies(c echo.Context, p access.Person) error {
	text := c.FormValue("text")
	version, err := strconv.ParseUint(c.FormValue("version"), 10, 64)
	if err != nil {
		return h.renderPolicies(c, http.StatusBadRequest, p, &text, testForm{}, nil, "The form lost its version. Reload the page.")
	}
	if _, err := h.opts.Access.SetPolicies(c.Request().Context(), p, text, version); err != nil {
		if msg, ok := problemOf(err); ok {
			status := http.StatusBadRequest
			if errors.Is(err, store.ErrConflict) {
				status = http.StatusConflict
			}
			return h.renderPolicies(c, status, p, &text, testForm{}, nil, msg)
		}
		return err
	}
	return done(c, "/admin/policies", "policies-saved")
}

func (h *Handler) testPolicies(c echo.Context, p access.Person) error {
	t := testForm{User: strings.ToLower(strings.TrimSpace(c.FormValue("user"))), Agent: c.FormValue("agent"),
		Server: strings.TrimSpace(c.FormValue("server")), Tool: strings.TrimSpace(c.FormValue("tool")), Caller: c.FormValue("caller")}
	text := c.FormValue("text")
	if !guid.Valid(t.User) {
		return h.renderPolicies(c, http.StatusBadRequest, p, &text, t, nil, "The person must be an Entra object id (a GUID).")
	}
	d, err := h.explain(c.Request().Context(), p, text, t)
	if err != nil {
		if msg, ok := testProblem(text, err); ok {
			return h.renderPolicies(c, http.StatusBadRequest, p, &text, t, nil, msg)
		}
		return err
	}
	return h.renderPolicies(c, http.StatusOK, p, &text, t, &d, "")
}

// testProblem is problemOf for the tester, which saves nothing: a refused
// text is the one being edited, or, when none was sent, the saved one.
func testProblem(text string, err error) (string, bool) {
	var pe *access.PolicyError
	switch {
	case errors.As(err, &pe) && text == "":
		return "The saved policies are refused, so every tool call is denied: " + pe.Error() + ". Correct them and save.", true
	case errors.As(err, &pe):
		return "The policies were not tested: " + pe.Error(), true
	}
	return problemOf(err)
}

// explain runs the tester; a view's call needs a view id, which the
// tester names for what it is.
func (h *Handler) explain(ctx context.Context, p access.Person, text string, t testForm) (access.Decision, error) {
	call := access.Call{AgentID: t.Agent, Server: t.Server, Tool: t.Tool, Caller: t.Caller}
	if t.Caller == access.CallerView {
		call.ViewID = "tester"
	}
	return h.opts.Access.Explain(ctx, p, text, t.User, call)
}

// activeViews reads the page of active views a request asks for.
func (h *Handler) activeViews(c echo.Context, p access.Person) ([]store.View, string, error) {
	views, next, err := h.opts.Store.ActiveViews(c.Request().Context(), p.TenantID, viewsPerPage, c.QueryParam("cursor"))
	if errors.Is(err, store.ErrInvalid) {
		err = errBadCursor
	}
	return views, next, err
}

// viewsPage is /admin/views.
type viewsPage struct {
	pageData
	Views []store.View
	Next  string
}

func (h *Handler) viewsPage(c echo.Context, p access.Person) error {
	views, next, err := h.activeViews(c, p)
	if err != nil {
		return err
	}
	d := &viewsPage{Views: views, Next: next}
	known, ids := map[string]string{}, []string{}
	for _, v := range views {
		known[v.UserID], ids = v.UserName, append(ids, v.UserID)
	}
	d.Names = h.names(c.Request().Context(), p, known, ids...)
	return h.render(c, http.StatusOK, "views", "Active views", p, d, "")
}

func (h *Handler) revokeView(c echo.Context, p access.Person) error {
	var q *confirmation
	// View answers an expired or revoked view with an error: the revoke
	// then says so itself.
	if v, err := h.opts.Store.View(c.Request().Context(), c.Param("id")); err == nil && v.TenantID == p.TenantID {
		q = new(viewConfirmation(v))
	}
	if !confirmed(c, q) {
		return h.ask(c, p, "views", q)
	}
	if err := h.revoke(c.Request().Context(), p, c.Param("id")); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errNoView
		}
		return err
	}
	return done(c, "/admin/views", "view-revoked")
}

// AuditViewRevoke is the audit action of a revoked view.
const AuditViewRevoke = "admin.view.revoke"

func (h *Handler) revoke(ctx context.Context, p access.Person, id string) error {
	rec := store.AuditRecord{TenantID: p.TenantID, Action: AuditViewRevoke, Actor: p.UserID, Fields: map[string]any{
		"view": id, "before": map[string]any{"revoked": false}, "after": map[string]any{"revoked": true},
	}}
	return h.opts.Store.RevokeView(ctx, p.TenantID, id, p.UserID, rec)
}

// runsPage is /admin/runs.
type runsPage struct {
	pageData
	Runs []store.Run
}

func (h *Handler) runsPage(c echo.Context, p access.Person) error {
	runs, err := h.opts.Store.RecentRuns(c.Request().Context(), p.TenantID, runsPerPage)
	if err != nil {
		return err
	}
	d := &runsPage{Runs: runs}
	known, ids := map[string]string{}, []string{}
	for _, r := range runs {
		known[r.UserID], ids = r.UserName, append(ids, r.UserID)
	}
	d.Names = h.names(c.Request().Context(), p, known, ids...)
	return h.render(c, http.StatusOK, "runs", "Recent runs", p, d, "")
}

// conversationsPage is /admin/conversations.
type conversationsPage struct {
	pageData
	Conversations []store.ConversationRef
}

func (h *Handler) conversationsPage(c echo.Context, p access.Person) error {
	convs, err := h.opts.Store.Conversations(c.Request().Context(), p.TenantID)
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "conversations", "Conversations", p, &conversationsPage{Conversations: convs}, "")
}

// auditPage is /admin/audit.
type auditPage struct {
	pageData
	Filter   store.AuditFilter
	From, To string // as the form shows them
	Range    string // the time preset chosen, "" for any time or custom
	Ranges   []struct {
		Value, Label string
		d            time.Duration
	}
	Results []string
	Records []store.AuditRecord
	Rows    []auditRow
	Next    string
	// Query is the filter as a query string, for the next page and the
	// exports: url.Values' encoding, kept as it is in the links.
	Query template.URL
}

// The console's errors of bad input.
var (
	errBadCursor = web.NewError(http.StatusBadRequest, "This page link is not valid any more. Start again from the first page.")
	errBadFilter = web.NewError(http.StatusBadRequest, "The time range is not valid: give dates and times as the form shows them.")
	errNoView    = web.NewError(http.StatusNotFound, "There is no such view in your tenant.")
	errBadPeriod = web.NewError(http.StatusBadRequest, "The period is not one the overview shows: choose 7, 30 or 90 days.")
)

// badFilter answers a filter or cursor the store refused: a cursor, when
// one was given, is the page link's; else the filter is, and the store's
// reason names the field.
func badFilter(err error, cursor string) error {
	if cursor != "" {
		return errBadCursor.Wrap(err)
	}
	return web.NewError(http.StatusBadRequest, web.Sentence("The filter is not valid: "+web.Words(err))).Wrap(err)
}

// localTime is how the form's datetime-local fields write a time (UTC).
const localTime = "2006-01-02T15:04"

// filterFrom reads the audit filter of a request; the tenant is always the
// admin's own.
func filterFrom(c echo.Context, p access.Person, now time.Time) (store.AuditFilter, string, string, error) {
	q := c.Request().URL.Query()
	f := store.AuditFilter{TenantID: p.TenantID, Action: q.Get("action"), Actor: q.Get("actor"), Tool: q.Get("tool"), Result: q.Get("result")}
	from, to := q.Get("from"), q.Get("to")
	// A time preset is made a range from now on, written into the
	// page's links, so that the next page and the exports read the same
	// records as the page.
	for _, r := range auditRanges {
		if q.Get("range") == r.Value {
			from, to = now.Add(-r.d).UTC().Format(time.RFC3339), ""
		}
	}
	for _, x := range []struct {
		s string
		t *time.Time
	}{{from, &f.From}, {to, &f.To}} {
		if x.s == "" {
			continue
		}
		t, err := time.Parse(localTime, x.s)
		if err != nil {
			if t, err = time.Parse(time.RFC3339, x.s); err != nil {
				return f, from, to, errBadFilter
			}
		}
		*x.t = t.UTC()
	}
	return f, from, to, nil
}

// filterQuery writes a filter back as a query string.
func filterQuery(f store.AuditFilter, from, to string) string {
	v := url.Values{}
	for k, s := range map[string]string{"action": f.Action, "actor": f.Actor, "tool": f.Tool, "result": f.Result, "from": from, "to": to} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// auditRecords reads the page of audit records a request asks for: the
// console's and the API's alike.
func (h *Handler) auditRecords(c echo.Context, p access.Person) (f store.AuditFilter, from, to string, recs []store.AuditRecord, next string, err error) {
	if f, from, to, err = filterFrom(c, p, h.now()); err != nil {
		return
	}
	recs, next, err = h.opts.Store.AuditPage(c.Request().Context(), f, c.QueryParam("cursor"), auditPerPage)
	if errors.Is(err, store.ErrInvalid) {
		err = badFilter(err, c.QueryParam("cursor"))
	}
	return
}

func (h *Handler) auditPage(c echo.Context, p access.Person) error {
	f, from, to, recs, next, err := h.auditRecords(c, p)
	if err != nil {
		return err
	}
	d := &auditPage{Filter: f, From: from, To: to, Range: c.QueryParam("range"), Ranges: auditRanges, Results: []string{"ok", "error", "refused"},
		Records: recs, Next: next, Query: template.URL(filterQuery(f, from, to))}
	if d.Range != "" {
		d.From = "" // the preset, not a custom range
	}
	known, ids := map[string]string{p.UserID: p.Name}, []string{}
	for _, r := range recs {
		ids = append(ids, r.Actor)
	}
	ctx := c.Request().Context()
	d.Names = h.names(ctx, p, known, ids...)
	if d.Convs, err = h.conversations(ctx, p.TenantID); err != nil {
		return err
	}
	for _, r := range recs {
		d.Rows = append(d.Rows, rowOf(r, d.Names, d.Convs))
	}
	return h.render(c, http.StatusOK, "audit", "Audit log", p, d, "")
}

// fieldsText shows a record's fields on one line.
func fieldsText(fields map[string]any) string {
	if len(fields) == 0 {
		return ""
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return ""
	}
	return string(b)
}
