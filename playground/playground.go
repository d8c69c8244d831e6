// Package playground is the local playground: a chat page at /playground
// that talks to the bot exactly as Microsoft Teams does, so that a person
// who runs the service on their own machine sees the whole path (typing,
// the "working on it" card and its update, the answer card, each view
// inline, and a server's question card, answered there) without Teams.
//
// The page never posts to /api/messages itself: in local mode the endpoint
// refuses requests from web pages. The page asks this package's server side,
// which builds the Bot Framework activity Teams would send (a message with
// its @mention entity, a card's Action.Submit, conversationUpdate,
// installationUpdate) and posts it over loopback HTTP to the service's own
// /api/messages. Each activity names as its serviceUrl the Bot Connector
// that this package also answers (/playground/connector/v3/...), so the
// bot's replies, updates, deletions and typing indicators come back here
// over loopback HTTP, and the page reads them by long polling.
//
// Views are shown inline with viewpage's host bridge (BridgeScript), framed
// from the same sandbox proxy and view documents as the view page, after the
// page signs the chosen person in through the local development sign-in
// (POST /signin/local): viewpage decides, as everywhere, who may open a view
// and call its tools. The people the page offers are the local sign-in's own
// list (signin.LocalPeople, in signin.LocalTenant), so that a view link opened
// elsewhere signs in as the same person, and the tenant admin among them
// opens the admin console.
//
// The playground exists only in local mode: New refuses a bot with an app
// id, and every route refuses callers that are not on this machine (a
// loopback connection addressed by a loopback name, with no proxy headers).
// It owns neither the bot's behaviour (package bot) nor card layout (package
// cards): it only plays Teams' part, and lays cards out with Microsoft's
// Adaptive Cards renderer and Teams' host configuration
// (internal/adaptivecards).
//
// Routes added by Register:
//
//	GET    /playground                         the chat page
//	GET    /playground/api/state?...           a conversation as the page shows it (long poll)
//	POST   /playground/api/send                a message from the chosen person
//	POST   /playground/api/install             install or uninstall the bot in the conversation
//	POST   /playground/api/submit              a card's Action.Submit, pressed by the chosen person
//	POST   /playground/connector/v3/conversations/{id}/activities[/{activityId}]
//	PUT    /playground/connector/v3/conversations/{id}/activities/{activityId}
//	DELETE /playground/connector/v3/conversations/{id}/activities/{activityId}
package playground

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/bot"
	"teamsbot/internal/adaptivecards"
	"teamsbot/internal/fluent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/viewpage"
)

var (
	//go:embed assets/playground.html
	pageHTML string
	//go:embed assets/playground.css
	pageCSS string
	//go:embed assets/playground.js
	pageJS string
	//go:embed assets/home.html
	homeHTML string
	//go:embed assets/home.css
	homeCSS string
)

// Path is the playground page.
const Path = "/playground"

// ConnectorPath is the serviceUrl the playground's activities name: the
// Bot Connector that this package answers.
const ConnectorPath = "/playground/connector"

// Errors of the playground.
var (
	// ErrNotLocal means the playground was asked for outside local mode.
	ErrNotLocal = errors.New("playground: only in local mode")
	// ErrNotFound means no such conversation or activity (404).
	ErrNotFound = errors.New("playground: not found")
	// ErrNotLoopback means a caller not on this machine (403).
	ErrNotLoopback = errors.New("playground: not a loopback caller")
	// ErrBadRequest means a malformed request (400).
	ErrBadRequest = errors.New("playground: bad request")
	// ErrBot means /api/messages did not take an activity (502).
	ErrBot = errors.New("playground: the bot refused the activity")
)

// Options configures New.
type Options struct {
	// Self is the service's own listener as an http loopback origin, such
	// as http://127.0.0.1:3978: activities go to Self + /api/messages and
	// name Self + ConnectorPath as their serviceUrl. Required.
	Self netaddr.Origin
	// Bot is the service's bot; it must be in local mode. Required.
	Bot *bot.Bot
	// Store tells whether the bot keeps a conversation (installed) and
	// which views an answer card named (its run's delivery). Required.
	Store *store.Store
	// SignIn tells whether the local development sign-in is on, which the
	// page needs to show views inline. Required.
	SignIn *signin.Service
	// Views is the view page, whose frames the page shows. Required.
	Views *viewpage.Handler
	// BotName is the bot's display name, as @mentions write it; empty
	// means "Assistant".
	BotName string
	// HostVersion is hostInfo.version the inline views are told; empty
	// means "dev".
	HostVersion string
	// HTTPClient posts activities to /api/messages; nil means a client
	// with a 30 s timeout.
	HTTPClient *http.Client
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Handler is the playground: the page, its API and the Bot Connector.
type Handler struct {
	self        netaddr.Origin
	store       *store.Store
	signin      *signin.Service
	botName     string
	hostVersion string
	client      *http.Client
	logger      *slog.Logger
	now         func() time.Time
	cop         *http.CrossOriginProtection

	page     []byte
	pageCSP  string
	homeTmpl *template.Template
	homeCSP  string

	// life ends with Close: the goroutines that find the views of an
	// answer card stop with it.
	life   context.Context
	cancel context.CancelFunc
	jobs   sync.WaitGroup

	chats *chats
}

// New builds the playground. It refuses a bot that is not in local mode and
// a Self that is not an http loopback origin.
func New(opts Options) (*Handler, error) {
	var errs []error
	if opts.Bot == nil {
		errs = append(errs, errors.New("playground: Bot is required"))
	} else if !opts.Bot.LocalMode() {
		errs = append(errs, fmt.Errorf("%w: the bot has an app id", ErrNotLocal))
	}
	if opts.Store == nil {
		errs = append(errs, errors.New("playground: Store is required"))
	}
	if opts.SignIn == nil {
		errs = append(errs, errors.New("playground: SignIn is required"))
	}
	if opts.Views == nil {
		errs = append(errs, errors.New("playground: Views is required"))
	}
	if opts.Self.IsZero() || opts.Self.HTTPS() || !opts.Self.Loopback() {
		errs = append(errs, fmt.Errorf("%w: Self must be an http loopback origin, not %q", ErrNotLocal, opts.Self.String()))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := &Handler{
		self:        opts.Self,
		store:       opts.Store,
		signin:      opts.SignIn,
		botName:     opts.BotName,
		hostVersion: opts.HostVersion,
		client:      opts.HTTPClient,
		logger:      opts.Logger,
		now:         opts.Now,
		cop:         http.NewCrossOriginProtection(),
	}
	if h.botName == "" {
		h.botName = "Assistant"
	}
	if h.hostVersion == "" {
		h.hostVersion = "dev"
	}
	if h.client == nil {
		h.client = &http.Client{Timeout: 30 * time.Second}
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.chats = newChats(h.now)
	h.life, h.cancel = context.WithCancel(context.Background())
	if err := h.buildPage(opts.Views); err != nil {
		return nil, err
	}
	return h, nil
}

// Close ends the page's long polls at once (each answers with what there
// is), stops the background lookups of answer cards' views and waits for
// them. Call it when the server starts shutting down
// (http.Server.RegisterOnShutdown), so that no poll holds the shutdown up;
// calling it again does nothing more.
func (h *Handler) Close() {
	// Under the chats' lock, which resolveLocked holds: no lookup starts
	// after this.
	h.chats.mu.Lock()
	h.cancel()
	h.chats.mu.Unlock()
	h.jobs.Wait()
}

// pageData is what playground.html shows.
type pageData struct {
	BotName, HostName, HostVersion string
	SignIn                         string // "local", or "off" when views cannot be opened
	// People are the local people to pick from, in Tenant; someone else
	// typed in gets DefaultRoles. Admin is the one who opens the console.
	People                []signin.LocalPerson
	Tenant, DefaultRoles  string
	Admin                 signin.LocalPerson
	FluentCSS, CSS        template.CSS
	Bridge, Cards, Script template.JS
}

// buildPage renders the page once (it is the same for every request) and
// fixes its CSP, that of a page showing views inline
// (viewpage.HostPagePolicy): its own scripts and style by hash, its own
// API, frames only from the sandbox origin, framed by nobody, no string
// into an HTML sink but through the card renderer's policies; its look is
// Fluent 2's (internal/fluent's stylesheet).
func (h *Handler) buildPage(views *viewpage.Handler) error {
	t, err := template.New("playground").Parse(pageHTML)
	if err != nil {
		return fmt.Errorf("playground: page template: %w", err)
	}
	signIn := "off"
	if h.signin.Local() {
		signIn = "local"
	}
	var b bytes.Buffer
	err = t.Execute(&b, pageData{
		BotName: h.botName, HostName: viewpage.HostName, HostVersion: h.hostVersion, SignIn: signIn,
		People: signin.LocalPeople(), Tenant: signin.LocalTenant, DefaultRoles: signin.LocalDefaultRoles, Admin: signin.LocalAdmin(),
		FluentCSS: template.CSS(fluent.CSS()), CSS: template.CSS(pageCSS),
		Bridge: template.JS(viewpage.BridgeScript()), Cards: template.JS(adaptivecards.Script()), Script: template.JS(pageJS),
	})
	if err != nil {
		return fmt.Errorf("playground: page template: %w", err)
	}
	h.page = b.Bytes()

	if h.homeTmpl, err = template.New("home").Parse(homeHTML); err != nil {
		return fmt.Errorf("playground: start page template: %w", err)
	}
	// Rendered once here, so that a mistake in it stops the start.
	if err := h.homeTmpl.Execute(io.Discard, h.homeData(nil)); err != nil {
		return fmt.Errorf("playground: start page template: %w", err)
	}
	// No script at all; one style; links only.
	h.homeCSP = csp.New().Add("default-src").Add("style-src", csp.Hash(homeCSS)).
		Add("base-uri").Add("form-action").Add("frame-ancestors").String()
	host, err := csp.Parse(views.HostPagePolicy([]string{adaptivecards.Hash(), csp.Hash(pageJS)}, csp.Hash(pageCSS)))
	if err != nil {
		return fmt.Errorf("playground: the view page's host policy: %w", err)
	}
	// Two changes to the host page policy, given first so that Append
	// leaves the host policy's own out: the Adaptive Cards renderer writes
	// card text (markdown.js's escaped HTML) through Trusted Types policies
	// of its own, which it creates when it loads, and which are the only
	// ones allowed (not 'none'); Fluent's tokens and native elements are a
	// second style element.
	h.pageCSP = csp.New().
		Add("trusted-types", adaptivecards.Policies()...).
		Add("style-src", fluent.CSSHash(), csp.Hash(pageCSS)).
		Append(host).String()
	return nil
}

// Register adds the page, its API and the Bot Connector to e.
func (h *Handler) Register(e *echo.Echo) {
	// The check is on each route, not on a group: Echo gives a group with
	// middleware a catch-all route of its own, and a group at the root
	// would answer every unknown path and every method a route does not
	// take with 404 (not 405) after this check.
	only := h.localOnly
	e.GET(Path, h.servePage, only)
	e.GET(Path+"/api/state", h.state, only)
	e.POST(Path+"/api/send", h.send, only)
	e.POST(Path+"/api/install", h.install, only)
	e.POST(Path+"/api/submit", h.submit, only)
	c := ConnectorPath + "/v3/conversations/:conversation/activities"
	e.POST(c, h.connectorPost, only)
	e.POST(c+"/:activity", h.connectorPost, only)
	e.PUT(c+"/:activity", h.connectorPut, only)
	e.DELETE(c+"/:activity", h.connectorDelete, only)
}

// localOnly refuses every caller that is not on this machine: the
// connection must come from loopback, name a loopback host (a page whose
// name an attacker points at 127.0.0.1 carries its own name here) and come
// through no proxy or tunnel, which would make anyone's request look local.
func (h *Handler) localOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch {
		case !netaddr.IsLoopbackRemote(r.RemoteAddr):
			return web.NewError(http.StatusForbidden, "The playground answers only on this machine.").Wrap(fmt.Errorf("%w: remote %s", ErrNotLoopback, r.RemoteAddr))
		case !netaddr.IsLoopbackHostPort(r.Host):
			return web.NewError(http.StatusForbidden, "The playground answers only at a loopback address such as http://127.0.0.1.").Wrap(fmt.Errorf("%w: host %.100q", ErrNotLoopback, r.Host))
		case proxied(r):
			return web.NewError(http.StatusForbidden, "The playground is refused through a proxy or a tunnel.").Wrap(fmt.Errorf("%w: proxy headers", ErrNotLoopback))
		}
		return next(c)
	}
}

// proxied reports whether a request says it came through a proxy.
func proxied(r *http.Request) bool {
	for name := range r.Header {
		if name == "Forwarded" || strings.HasPrefix(name, "X-Forwarded-") {
			return true
		}
	}
	return false
}

// servePage serves GET /playground.
func (h *Handler) servePage(c echo.Context) error {
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.pageCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, h.page)
}

// homeData is what home.html shows.
type homeData struct {
	BotName string
	CSS     template.CSS
	// SignInOff: no local sign-in, so neither views nor the console open.
	SignInOff bool
	// Current is who is signed in (empty: nobody), with their roles.
	Current, CurrentRoles string
	// SwitchURL is the local sign-in, back to the start page.
	SwitchURL string
	// People are the local people of Tenant; Admin opens the console, as
	// AdminURL (the sign-in with Admin selected, back to /admin) does.
	People   []signin.LocalPerson
	Tenant   string
	Admin    signin.LocalPerson
	AdminURL string
}

// homeData is the start page for the person of session s (nil: nobody).
func (h *Handler) homeData(s *signin.Session) homeData {
	d := homeData{
		BotName: h.botName, CSS: template.CSS(homeCSS),
		SignInOff: !h.signin.Local(),
		SwitchURL: h.signin.SignInURL("/"),
		People:    signin.LocalPeople(), Tenant: signin.LocalTenant, Admin: signin.LocalAdmin(),
		AdminURL: h.signin.SignInAsURL("/admin", signin.LocalAdmin().UserID),
	}
	if s != nil {
		d.Current = cmp.Or(s.Name, s.UserID)
		if s.TenantID != signin.LocalTenant {
			d.Current += " of tenant " + s.TenantID
		}
		d.CurrentRoles = strings.Join(s.Roles, " ")
	}
	return d
}

// Home serves the start page, GET /, in local mode: one click to the
// playground, what to try there, who is signed in (and a way to sign in
// as someone else), the local people, and how to reach the admin console.
func (h *Handler) Home(c echo.Context) error {
	var who *signin.Session
	if s, err := h.signin.Session(c.Request()); err == nil {
		who = &s
	}
	var b bytes.Buffer
	if err := h.homeTmpl.Execute(&b, h.homeData(who)); err != nil {
		return fmt.Errorf("playground: start page: %w", err)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.homeCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// pageRequest checks a state-changing request of the page: same origin
// (Sec-Fetch-Site or Origin), JSON only, so no other site can drive the
// playground from the person's browser.
func (h *Handler) pageRequest(r *http.Request) error {
	if err := h.cop.Check(r); err != nil {
		return web.NewError(http.StatusForbidden, "This request came from another site and was refused.").Wrap(err)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return web.NewError(http.StatusUnsupportedMediaType, "Send JSON.").Wrap(ErrBadRequest)
	}
	return nil
}
