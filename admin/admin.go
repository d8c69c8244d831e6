// Package admin is the tenant admins' console at /admin and the admin API
// under /api/admin/: role bindings, the tenant default, the Cedar policy
// set and its tester, MCP Apps on or off, whether runs without a person
// use the memory of the conversation they post into, the tenant's data
// rules, active
// views and their revoking, recent runs, the conversations where the app
// is installed, API keys and scheduled triggers, people's connections to
// the MCP servers the agent reaches as each of them and their revoking,
// and the audit log with its exports.
//
// It decides nothing itself: every page and call asks access whether the
// signed-in person is an admin of their own tenant (agents.admin), and
// every change goes through access, store, triggers or mcpauth, which
// audit it. It only
// ever shows the admin's own tenant. The pages are server-rendered HTML
// in Fluent 2 (internal/fluent), with no external asset and no script of
// its own, usable with the keyboard alone and with JavaScript off, under a
// strict CSP; state-changing requests are refused across origins, and a
// destructive one is done only once the admin confirmed it, told what
// will stop working.
package admin

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/fluent"
	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
	"teamsbot/mcpauth"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/triggers"
)

//go:embed assets
var assets embed.FS

// GroupNamer looks an Entra group's display name up, for the bindings
// table; access/graph implements it.
type GroupNamer interface {
	GroupName(ctx context.Context, tenantID, groupID string) (string, error)
}

// Rules are an agent's data rules, as the console shows them.
type Rules struct {
	Agent        string
	Deny, Redact []string
}

// Server is an MCP server of the configuration, as the console's
// permissions and elicitation forms show it.
type Server struct {
	Name string
	// Configured are the permissions the configuration file allows the
	// server's views in every tenant.
	Configured []string
}

// Options configures New.
type Options struct {
	Store  *store.Store    // required
	Access *access.Service // required
	SignIn *signin.Service // required
	// Groups looks group names up; nil shows a group by its id only.
	Groups GroupNamer
	// People looks people's display names up; nil shows people by the
	// names their records kept, the local people by theirs, and the
	// others by their ids.
	People PersonNamer
	// Agents are the agent ids bindings and the tester may name.
	Agents []string
	// Rules are the configured data rules of each agent.
	Rules []Rules
	// Servers are the configured MCP servers: those whose views the
	// tenant may allow permissions, each with what the configuration
	// file already allows, and those the tenant may let ask people for
	// input (elicitation) or not.
	Servers []Server
	// AppsEnabled is TICKETIQ_MCP_APPS_ENABLED: off, no tenant can turn
	// MCP Apps on.
	AppsEnabled bool
	// Triggers keeps API keys and scheduled triggers; nil leaves their
	// pages out.
	Triggers *triggers.Service
	// Connections keeps people's connections to the MCP servers reached
	// as each person (auth: person); nil leaves their page out.
	Connections *mcpauth.Broker
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler serves the console and the admin API.
type Handler struct {
	opts  Options
	log   *slog.Logger
	now   func() time.Time
	cop   *http.CrossOriginProtection
	pages map[string]*template.Template
	csp   string
	css   string
	// scripts are the pages with a script of their own, and their
	// policies, which allow that script alone.
	scripts map[string]pageScript
}

// pageScript is a page's own script and the policy that allows it.
type pageScript struct {
	js  template.JS
	csp string
}

// pageNames are the console's pages, each a template of its own.
var pageNames = []string{"overview", "access", "policies", "views", "runs", "conversations", "keys", "triggers", "connections", "audit", "confirm"}

// New builds the Handler.
func New(opts Options) (*Handler, error) {
	var errs []error
	if opts.Store == nil {
		errs = append(errs, errors.New("admin: Store is required"))
	}
	if opts.Access == nil {
		errs = append(errs, errors.New("admin: Access is required"))
	}
	if opts.SignIn == nil {
		errs = append(errs, errors.New("admin: SignIn is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := &Handler{opts: opts, log: opts.Logger, now: opts.Now, cop: http.NewCrossOriginProtection(), pages: map[string]*template.Template{}}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	css, err := assets.ReadFile("assets/admin.css")
	if err != nil {
		return nil, fmt.Errorf("admin: %w", err)
	}
	h.css = string(css)
	// Fluent's script and the two stylesheets, each by its hash; Trusted
	// Types for the script's templates; forms post only to this origin;
	// nobody may frame the console. The audit log's script shows times in
	// the browser's zone and the overview's draws its charts: each of
	// those pages allows its own script by hash beside Fluent's, and
	// nothing else.
	policy := func(scripts ...string) string {
		return csp.New().Add("default-src").Add("script-src", scripts...).Add("style-src", fluent.CSSHash(), csp.Hash(h.css)).
			Add("form-action", csp.Self).Add("base-uri").Add("object-src").
			Add("require-trusted-types-for", csp.Script).Add("trusted-types", fluent.TrustedTypesPolicy).
			Add("frame-ancestors").String()
	}
	h.csp = policy(fluent.ScriptHash())
	h.scripts = map[string]pageScript{}
	for name, js := range map[string]string{"audit": localTimeScript, "overview": overviewScript()} {
		h.scripts[name] = pageScript{js: template.JS(js), csp: policy(fluent.ScriptHash(), csp.Hash(js))}
	}
	funcs := template.FuncMap{"fields": fieldsText, "when": when, "person": person, "auditTime": auditTime, "conv": conversationHTML, "convName": conversationName,
		"triggersOn":    func() bool { return opts.Triggers != nil },
		"connectionsOn": func() bool { return opts.Connections != nil },
		"confirmKey":    keyConfirmation, "confirmTrigger": triggerConfirmation, "confirmBinding": bindingConfirmation,
		"confirmConnection": connectionConfirmation, "confirmServer": serverConfirmation, "confirmView": viewConfirmation}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("admin: page %s: %w", name, err)
		}
		h.pages[name] = t
	}
	return h, nil
}

// Register adds the console and the API to e.
func (h *Handler) Register(e *echo.Echo) {
	page := func(f func(echo.Context, access.Person) error) echo.HandlerFunc { return h.withAdmin(f, false) }
	api := func(f func(echo.Context, access.Person) error) echo.HandlerFunc { return h.withAdmin(f, true) }

	e.GET("/admin", page(h.accessPage))
	e.GET("/admin/overview", page(h.overviewPage))
	e.POST("/admin/bindings", page(h.addBinding))
	e.POST("/admin/bindings/remove", page(h.removeBinding))
	e.POST("/admin/default", page(h.setDefault))
	e.POST("/admin/apps", page(h.setApps))
	e.POST("/admin/history", page(h.setHistory))
	e.POST("/admin/permissions", page(h.setPermissions))
	e.POST("/admin/elicitation", page(h.setElicitation))
	e.POST("/admin/rules", page(h.saveRules))
	e.GET("/admin/policies", page(h.policiesPage))
	e.POST("/admin/policies", page(h.savePolicies))
	e.POST("/admin/policies/test", page(h.testPolicies))
	e.GET("/admin/views", page(h.viewsPage))
	e.POST("/admin/views/:id/revoke", page(h.revokeView))
	e.GET("/admin/runs", page(h.runsPage))
	e.GET("/admin/conversations", page(h.conversationsPage))
	e.GET("/admin/keys", page(h.keysPage))
	e.POST("/admin/keys", page(h.createKey))
	e.POST("/admin/keys/:id/revoke", page(h.revokeKey))
	e.GET("/admin/triggers", page(h.triggersPage))
	e.POST("/admin/triggers", page(h.createTrigger))
	e.POST("/admin/triggers/:id/pause", page(h.triggerAction("trigger-paused", pauseTrigger)))
	e.POST("/admin/triggers/:id/resume", page(h.triggerAction("trigger-resumed", resumeTrigger)))
	e.POST("/admin/triggers/:id/delete", page(h.deleteTriggerForm))
	e.GET("/admin/connections", page(h.connectionsPage))
	e.POST("/admin/connections/revoke", page(h.revokeForm))
	e.GET("/admin/audit", page(h.auditPage))
	e.GET("/admin/audit/export.jsonl", page(h.exportJSONL))
	e.GET("/admin/audit/export.csv", page(h.exportCSV))

	e.GET("/api/admin/bindings", api(h.apiBindings))
	e.POST("/api/admin/bindings", api(h.apiAddBinding))
	e.DELETE("/api/admin/bindings", api(h.apiRemoveBinding))
	e.GET("/api/admin/settings", api(h.apiSettings))
	e.PUT("/api/admin/settings", api(h.apiPutSettings))
	e.GET("/api/admin/datarules", api(h.apiDataRules))
	e.PUT("/api/admin/datarules", api(h.apiPutDataRules))
	e.GET("/api/admin/policies", api(h.apiPolicies))
	e.PUT("/api/admin/policies", api(h.apiPutPolicies))
	e.POST("/api/admin/policies/test", api(h.apiTestPolicies))
	e.GET("/api/admin/views", api(h.apiViews))
	e.POST("/api/admin/views/:id/revoke", api(h.apiRevokeView))
	e.GET("/api/admin/runs", api(h.apiRuns))
	e.GET("/api/admin/conversations", api(h.apiConversations))
	e.GET("/api/admin/keys", api(h.apiKeys))
	e.POST("/api/admin/keys", api(h.apiCreateKey))
	e.POST("/api/admin/keys/:id/revoke", api(h.apiRevokeKey))
	e.GET("/api/admin/triggers", api(h.apiTriggers))
	e.POST("/api/admin/triggers", api(h.apiCreateTrigger))
	e.POST("/api/admin/triggers/:id/pause", api(h.apiTriggerAction(pauseTrigger)))
	e.POST("/api/admin/triggers/:id/resume", api(h.apiTriggerAction(resumeTrigger)))
	e.DELETE("/api/admin/triggers/:id", api(h.apiTriggerAction(deleteTrigger)))
	e.GET("/api/admin/mcp-connections", api(h.apiConnections))
	e.DELETE("/api/admin/mcp-connections", api(h.apiRevokeConnections))
	e.GET("/api/admin/audit", api(h.apiAudit))
	e.GET("/api/admin/audit/export", api(h.apiExport))
}

// Errors of the console, for the server's error handler.
var (
	errNotAdmin  = web.NewError(http.StatusForbidden, "This is for the administrators of your organisation's Teams app: it needs the agents.admin role. Ask an administrator to give it to you.")
	errCrossSite = web.NewError(http.StatusForbidden, "Cross-site requests are not allowed.")
	errNoSession = web.NewError(http.StatusUnauthorized, "Sign in first.")
)

// withAdmin runs f for a signed-in admin of their own tenant: anyone else
// gets 403 (a page sends a person who is not signed in to sign-in and
// back). State-changing requests from another origin are refused first.
func (h *Handler) withAdmin(f func(echo.Context, access.Person) error, api bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if err := h.cop.Check(r); err != nil {
				return errCrossSite.Wrap(err)
			}
		}
		s, err := h.opts.SignIn.Session(r)
		if err != nil {
			if !api && r.Method == http.MethodGet {
				// The local sign-in has the local tenant admin selected.
				return c.Redirect(http.StatusSeeOther, h.opts.SignIn.SignInAsURL(r.URL.RequestURI(), signin.LocalAdmin().UserID))
			}
			return errNoSession.Wrap(err)
		}
		p := access.Person{TenantID: s.TenantID, UserID: s.UserID, Name: s.Name, Roles: s.Roles}
		if err := h.opts.Access.RequireAdmin(r.Context(), p); err != nil {
			if errors.Is(err, access.ErrDenied) {
				if !api && h.opts.SignIn.LocalRequest(r) {
					return h.localNotAdmin(r, s).Wrap(err)
				}
				return errNotAdmin.Wrap(err)
			}
			return err
		}
		hd := c.Response().Header()
		web.NoStore(hd)
		hd.Set("Referrer-Policy", "no-referrer")
		return f(c, p)
	}
}

// localNotAdmin is the console's refusal in local mode: it names the
// local tenant admin (whom the local sign-in lists for anyone to pick)
// and offers to sign in as someone else, back to the page asked for.
func (h *Handler) localNotAdmin(r *http.Request, s signin.Session) *web.Error {
	ret := "/admin"
	if r.Method == http.MethodGet {
		ret = r.URL.RequestURI()
	}
	a := signin.LocalAdmin()
	return &web.Error{
		Status: http.StatusForbidden,
		Message: "The admin console needs the agents.admin role in your tenant, and you are signed in as " + cmp.Or(s.Name, s.UserID) +
			" without it. Sign in as someone else: " + a.Name + ", the admin of the playground's tenant, is selected there for you.",
		Link: &web.Link{Href: h.opts.SignIn.SignInAsURL(ret, a.UserID), Text: "Sign in as someone else"},
	}
}

// pageData is what every page shows; each page's data embeds it.
type pageData struct {
	Title, Tenant, Admin string
	// Page is the section of the navigation the page is in.
	Page            string
	Notice, Problem string
	FluentCSS, CSS  template.CSS
	// Fluent is Fluent's script, on every page.
	Fluent template.JS
	// Names are the display names of the people the page shows, by id
	// (see names); Convs the tenant's conversations, by id, for the
	// pages that show conversations.
	Names map[string]string
	Convs map[string]store.ConversationRef
	// Script is the page's own script, if it has one.
	Script template.JS
}

func (d *pageData) base() *pageData { return d }

// page is a page's data.
type page interface{ base() *pageData }

// sectioned is a page that is in another section than its own name: the
// confirmation of a change is in the section of the change.
type sectioned interface{ sectionOf() string }

func (d *confirmPage) sectionOf() string { return d.section }

// notices are the words shown after a change, by the code the redirect
// carries: a link cannot make the console say anything else.
var notices = map[string]string{
	"binding-added":   "The binding was added.",
	"binding-removed": "The binding was removed.",
	"default-saved":   "The tenant default was saved.",
	"apps-saved":      "The MCP Apps setting was saved.",
	"history-saved":   "The memory setting for runs without a person was saved. It applies from the next such run.",
	"perms-saved":     "The permissions were saved. They apply to views made from now on.",
	"elicit-saved":    "The setting for asking people for input was saved. It applies from the server's next request.",
	"rules-saved":     "The data rules were checked and saved. They apply to the next tool call.",
	"policies-saved":  "The policies were checked and saved.",
	"view-revoked":    "The view was revoked: it can no longer be opened.",
	"key-revoked":     "The API key was revoked: calls with it are refused from now on.",
	"trigger-created": "The trigger was saved. It runs at the next run time shown.",
	"trigger-paused":  "The trigger was paused.",
	"trigger-resumed": "The trigger was resumed: it runs from its next run time on; times missed while paused do not run.",
	"trigger-deleted": "The trigger was deleted.",
}

// when writes a time for the console (UTC), or "never" for the zero time.
func when(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2 Jan 2006 15:04 MST")
}

// done redirects to a page after a change, with the notice to show.
func done(c echo.Context, path, notice string) error {
	return c.Redirect(http.StatusSeeOther, path+"?done="+notice)
}

// render writes a console page with the notice the redirect's code
// names; problem, when set, is shown as an alert.
func (h *Handler) render(c echo.Context, status int, name, title string, p access.Person, d page, problem string) error {
	return h.renderNotice(c, status, name, title, p, d, notices[c.QueryParam("done")], problem)
}

// renderNotice is render with the notice given: the words of what a
// change just did, which a page answering the change itself shows.
func (h *Handler) renderNotice(c echo.Context, status int, name, title string, p access.Person, d page, notice, problem string) error {
	who := p.Name
	if who == "" {
		who = p.UserID
	}
	section := name
	if s, ok := d.(sectioned); ok {
		section = s.sectionOf()
	}
	base := d.base()
	*base = pageData{Title: title, Page: section, Tenant: p.TenantID, Admin: who,
		FluentCSS: template.CSS(fluent.CSS()), CSS: template.CSS(h.css), Fluent: template.JS(fluent.Script()),
		Notice: notice, Problem: problem, Names: base.Names, Convs: base.Convs, Script: h.scripts[name].js}
	var b bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&b, "layout", d); err != nil {
		return fmt.Errorf("admin: render %s: %w", name, err)
	}
	policy := h.csp
	if ps, ok := h.scripts[name]; ok {
		policy = ps.csp
	}
	c.Response().Header().Set("Content-Security-Policy", policy)
	return c.HTMLBlob(status, b.Bytes())
}
