// Package viewpage serves the web side of MCP Apps views: the page that a
// card's Open button lands on (GET /mcp-apps/{id}), its API
// (GET /api/mcp-apps/{id} and POST /api/mcp-apps/{id}/call), and the two
// frame documents, the sandbox proxy (GET /sandbox/proxy) and the view's own
// HTML (GET /sandbox/views/{id}). The host side of the MCP Apps JSON-RPC
// conversation is plain JavaScript embedded in this package (assets/), with
// no build step; only teams-js, for the page inside Teams, comes bundled
// from npm (internal/teamsjs).
//
// The page frames the proxy with sandbox="allow-scripts" and no
// allow-same-origin, so the proxy has an opaque origin; the proxy frames the
// view the same way, adding allow-forms only when the view's server asked for
// it. Both frame URLs carry a signed token that expires after TokenLifetime;
// without one, neither document is served. Messages are trusted by the window
// they come from, never by their origin.
//
// Routes added by Register:
//
//	GET  /mcp-apps/{id}            the page; sign-in first, then Access.CanRead
//	GET  /api/mcp-apps/{id}        ViewInfo as JSON, with fresh frame tokens
//	POST /api/mcp-apps/{id}/call   {name, arguments} → CallToolResult, same-origin JSON only
//	POST /api/mcp-apps/{id}/blocked {channel, source, token} → 204: a closed channel the view tried (blocked.go)
//	GET  /api/mcp-apps/{id}/questions[?known=]  what the view's calls' servers ask this person (questions.go)
//	POST /api/mcp-apps/{id}/questions/{qid} {action, values} → 204, or 422 with problems: the person's answer
//	GET  /sandbox/proxy?view=&token=   the proxy document (token of purpose "proxy")
//	GET  /sandbox/views/{id}?token=    the view's HTML (token of purpose "view")
//
// Two browser facts shape the frames (each has a Chromium test). A frame
// inherits its parent's sandbox flags, so when a view is granted forms the
// proxy frame carries allow-forms too; otherwise both frames carry exactly
// allow-scripts. And an opaque-origin ancestor matches no frame-ancestors
// source (not even *), so the view document, whose parent is the opaque
// proxy, cannot carry frame-ancestors; it carries the CSP sandbox
// directive instead, which keeps it opaque wherever it is loaded, and both
// frame documents are refused when a browser asks for them as anything but
// an iframe (Sec-Fetch-Dest). The proxy, whose parent is the page, carries
// frame-ancestors with the public origin, or 'self' when there is no
// separate sandbox origin: then the frame URLs are paths, and the frames
// come from whatever host name the page was opened under.
//
// A view must not get anything out of the machine by a channel the browser
// lets us close, and CSP alone does not close them all: Chromium applies no
// CSP directive to WebRTC (an RTCPeerConnection sends its TURN username to
// any server) nor to the host names a blocked frame or a navigation looks
// up. So the view document also carries a Connection-Allowlist (its own
// origin and its declared ones; Chromium 152 and later refuse every other
// connection, WebRTC included), X-DNS-Prefetch-Control: off and CSP3's
// webrtc 'block' (not yet implemented by any browser), and it is served
// with the guard (guard.go, assets/guard.js) inserted after its doctype:
// a script that runs before the view's own and makes WebRTC unusable in
// the view and in every frame it makes. The guard and the proxy tell the
// page when the view tried a closed channel; the page records it
// (blocked.go). TestBrowserExfiltration proves each channel closed against
// DNS, TLS and TURN sinks, and what still leaves without the allowlist.
//
// Inside Microsoft Teams (Options.Teams, TICKETIQ_TEAMS_TAB) the page is a
// Stage View: it may be framed by the Teams and Microsoft 365 hosts of
// "Prerequisites for tabs" (and by no one else), it runs teams-js (bundled
// into the binary by internal/teamsjs, allowed by hash like the page's own
// scripts), reports success to Teams, and gives the view the Teams theme and
// locale in ui/initialize. Without a session, inside Teams' frame it serves
// a sign-in shell that trades a Teams single sign-on token (or a popup
// sign-in) for a session cookie of the frame, then loads again. The proxy
// adds the same hosts to its frame-ancestors, which names every ancestor up
// to Teams; the view document, the frame tokens and the bridge are
// unchanged, and teams-js drops the messages of the opaque frames.
//
// The files follow the routes: viewpage.go (options, constructor, routes),
// page.go (the page and the Teams sign-in shell), api.go (the view API),
// call.go (a view's tool call), questions.go (what a server asks the
// person during it), blocked.go (the reports of closed channels),
// frames.go (the proxy and view documents, with guard.go's script),
// csp.go (every document's Content-Security-Policy), access.go (loading
// a view for a person), token.go (the frame tokens) and errors.go (what
// each error answers).
//
// The package decides nothing about policy: who may open a view and call
// its tools is asked of an Access (OwnerRule by default), and every tool call
// goes through the agent's governed path (agent.Service.CallFromView), which
// checks visibility and policies and writes the audit record.
package viewpage

import (
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/prom"
	"teamsbot/internal/web/csp"
	"teamsbot/signin"
	"teamsbot/store"
)

// Options configures New.
type Options struct {
	// Store holds the views and their HTML. Required.
	Store *store.Store
	// Agent runs the tool calls that views make. Required.
	Agent *agent.Service
	// SignIn tells who is signed in and where to sign in. Required.
	SignIn *signin.Service
	// Access decides who may open a view and call its tools. Required.
	Access *access.Service
	// PublicBaseURL is where people reach the service, such as
	// https://bot.example.com. Required. With a SandboxBaseURL, it is the
	// only origin allowed to frame the sandbox proxy.
	PublicBaseURL netaddr.Origin
	// SandboxBaseURL is an optional separate origin that serves the two
	// frame documents; the page's CSP lets it frame only this origin. The
	// zero Origin (or one equal to PublicBaseURL) means the page's own
	// origin, whatever host name it was opened under.
	SandboxBaseURL netaddr.Origin
	// DataDir is where the frame token keys are kept (generated on first
	// start, mode 0600). Required.
	DataDir string
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Registerer receives the package's metrics; nil registers none.
	Registerer prometheus.Registerer
	// HostVersion is hostInfo.version in ui/initialize; empty means "dev".
	HostVersion string
	// Teams, when set, lets the page open inside Microsoft Teams
	// (TICKETIQ_TEAMS_TAB): see TeamsOptions. Nil: the page refuses every
	// frame, as it always did.
	Teams *TeamsOptions
}

// TeamsOptions are what the page needs to open inside Teams.
type TeamsOptions struct {
	// FrameAncestors are the hosts that may frame the page, as CSP source
	// expressions of the form https://host or https://*.domain; nil means
	// TeamsHosts. They are also the origins whose teams-js messages the
	// page trusts besides teams-js's own list.
	FrameAncestors []string
}

// TeamsHosts are the hosts of Teams and of the Microsoft 365 applications
// that show Teams apps, which Microsoft's "Prerequisites for tabs" ("tab
// requirements") asks a tab page to allow in frame-ancestors.
var TeamsHosts = []string{
	"https://teams.microsoft.com",
	"https://*.teams.microsoft.com",
	"https://*.cloud.microsoft",
	"https://*.microsoft365.com",
	"https://*.office.com",
	"https://outlook.office.com",
	"https://outlook.office365.com",
	"https://outlook-sdf.office.com",
	"https://outlook-sdf.office365.com",
}

// hostSource is what a frame-ancestors host may look like: https, a host
// name (a leading *. allowed) and an optional port; nothing that could end
// the directive or add another.
var hostSource = regexp.MustCompile(`^https://(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$`)

// Handler serves the view page, its API and the frame documents.
type Handler struct {
	store  *store.Store
	agent  *agent.Service
	signin *signin.Service
	access *access.Service
	logger *slog.Logger
	now    func() time.Time
	keys   *tokenKeys
	cop    *http.CrossOriginProtection

	publicOrigin  netaddr.Origin
	sandboxOrigin netaddr.Origin
	hostVersion   string

	pageTmpl *template.Template
	pageCSP  string
	proxyDoc []byte
	proxyCSP string

	// teamsHosts may frame the page (Options.Teams); nil outside Teams
	// mode. signInTmpl and signInCSP are the Teams sign-in shell's.
	teamsHosts []string
	// teamsSources is teamsHosts as one CSP source list.
	teamsSources string
	signInTmpl   *template.Template
	signInCSP    string

	// unguarded turns layers of the view documents' protection off, for
	// the tests that show what each layer closes; always zero otherwise.
	unguarded struct{ script, allowlist, csp bool }

	// viewAncestors, when set, become a frame-ancestors directive on view
	// documents. It is nil: the view's parent is the proxy, whose origin
	// is opaque, and Chromium matches an opaque ancestor against no source
	// expression at all (not even *), so any frame-ancestors would stop our
	// own proxy from framing the view. TestFrameAncestorsOfSandboxedProxy
	// shows this by setting it. The view document is kept to its frame by
	// the CSP sandbox directive, Sec-Fetch-Dest and its token instead.
	viewAncestors []netaddr.Origin

	// opened remembers who opened which view lately, so that an opening
	// is audited once, not at every reload.
	opened openedViews
	// blockedLimit bounds how often each view's closed channels are
	// recorded (blocked.go).
	blockedLimit blockedLimiter
	// questions are what servers ask during views' calls, waiting for
	// the person's answer (questions.go).
	questions questionBoard

	metrics metrics
}

// metrics are the package's Prometheus collectors.
type metrics struct {
	tokenRefusals *prometheus.CounterVec
	calls         *prometheus.CounterVec
	blocked       *prometheus.CounterVec
}

// New builds a Handler. It reads (or creates) the frame token keys under
// opts.DataDir.
func New(opts Options) (*Handler, error) {
	var errs []error
	if opts.Store == nil {
		errs = append(errs, errors.New("viewpage: Store is required"))
	}
	if opts.Agent == nil {
		errs = append(errs, errors.New("viewpage: Agent is required"))
	}
	if opts.SignIn == nil {
		errs = append(errs, errors.New("viewpage: SignIn is required"))
	}
	if opts.Access == nil {
		errs = append(errs, errors.New("viewpage: Access is required"))
	}
	if opts.PublicBaseURL.IsZero() {
		errs = append(errs, errors.New("viewpage: PublicBaseURL is required"))
	}
	var teamsHosts []string
	if opts.Teams != nil {
		teamsHosts = opts.Teams.FrameAncestors
		if teamsHosts == nil {
			teamsHosts = TeamsHosts
		}
		if len(teamsHosts) == 0 {
			errs = append(errs, errors.New("viewpage: Teams.FrameAncestors is empty: the page could not open inside Teams"))
		}
		for _, h := range teamsHosts {
			if !hostSource.MatchString(h) || csp.CheckSource(h) != nil {
				errs = append(errs, fmt.Errorf("viewpage: Teams.FrameAncestors: %q is not https://host or https://*.domain", h))
			}
		}
		if !opts.PublicBaseURL.IsZero() && !opts.PublicBaseURL.HTTPS() {
			errs = append(errs, errors.New("viewpage: Teams needs an https:// PublicBaseURL: Teams shows only https pages"))
		}
	}
	public, sandbox := opts.PublicBaseURL, opts.SandboxBaseURL
	if sandbox.IsZero() {
		sandbox = public
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h := &Handler{
		store:         opts.Store,
		agent:         opts.Agent,
		signin:        opts.SignIn,
		access:        opts.Access,
		logger:        opts.Logger,
		now:           opts.Now,
		cop:           http.NewCrossOriginProtection(),
		publicOrigin:  public,
		sandboxOrigin: sandbox,
		hostVersion:   opts.HostVersion,
		teamsHosts:    slices.Clone(teamsHosts),
		teamsSources:  strings.Join(teamsHosts, " "),
	}
	// Behind a reverse proxy the Host header may not be the public one;
	// the public origin is same-origin by definition.
	var err error
	if err = h.cop.AddTrustedOrigin(public.String()); err != nil {
		return nil, fmt.Errorf("viewpage: PublicBaseURL: %w", err)
	}
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.hostVersion == "" {
		h.hostVersion = "dev"
	}
	if h.keys, err = loadTokenKeys(opts.DataDir, h.now(), h.logger); err != nil {
		return nil, err
	}
	if err := h.parsePages(); err != nil {
		return nil, err
	}
	if err := h.renderProxy(); err != nil {
		return nil, err
	}
	h.buildPolicies()
	d := prom.On(opts.Registerer)
	h.metrics = metrics{
		tokenRefusals: d.CounterVec("teamsbot_viewpage_frame_token_refusals_total", "Frame documents refused for a missing, forged or expired token.", "purpose", "reason"),
		calls:         d.CounterVec("teamsbot_viewpage_tool_calls_total", "Tool calls made from views, by result (ok, error, refused).", "result"),
		blocked:       d.CounterVec("teamsbot_viewpage_blocked_reports_total", "Reports of a closed channel a view tried, by result (recorded, limited, refused).", "result"),
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("viewpage: register metrics: %w", err)
	}
	return h, nil
}

// sameOrigin reports whether the frame documents are served from the
// page's own origin (no separate TICKETIQ_SANDBOX_BASE_URL).
func (h *Handler) sameOrigin() bool { return h.sandboxOrigin == h.publicOrigin }

// Register adds the page, the API and the frame documents to e.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/mcp-apps/:id", h.page)
	e.GET("/api/mcp-apps/:id", h.viewAPI)
	e.POST("/api/mcp-apps/:id/call", h.call)
	e.POST("/api/mcp-apps/:id/blocked", h.blocked)
	e.GET("/api/mcp-apps/:id/questions", h.listQuestions)
	e.POST("/api/mcp-apps/:id/questions/:qid", h.answerQuestion)
	e.GET("/sandbox/proxy", h.proxy)
	e.GET("/sandbox/views/:id", h.viewDocument)
}
