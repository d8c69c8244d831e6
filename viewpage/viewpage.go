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
// The package decides nothing about policy: who may open a view and call
// its tools is asked of an Access (OwnerRule by default), and every tool call
// goes through the agent's governed path (agent.Service.CallFromView), which
// checks visibility and policies and writes the audit record.
package viewpage

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/teamsjs"
	"teamsbot/internal/web"
	"teamsbot/mcpapps"
	"teamsbot/signin"
	"teamsbot/store"
)

var (
	//go:embed assets/bridge.js
	bridgeJS string
	//go:embed assets/page.js
	pageJS string
	//go:embed assets/page.css
	pageCSS string
	//go:embed assets/page.html
	pageHTML string
	//go:embed assets/proxy.js
	proxyJS string
	//go:embed assets/proxy.css
	proxyCSS string
	//go:embed assets/proxy.html
	proxyHTML string
	//go:embed assets/teams-page.js
	teamsPageJS string
	//go:embed assets/teams-signin.html
	teamsSignInHTML string
)

// BridgeScript is the host side of MCP Apps in plain JavaScript: it defines
// TeamsbotBridge.mount, which frames a view's sandbox proxy and answers the
// view's JSON-RPC messages through the view API. The view page runs it, and
// so does any other page of the service that shows views inline (the
// playground), so that every view meets the same host. A page includes it
// as its own script element, allowed by BridgeScriptHash in its CSP.
func BridgeScript() string { return bridgeJS }

// BridgeScriptHash is the CSP source expression ('sha256-…') that allows
// BridgeScript.
func BridgeScriptHash() string { return web.CSPHash(bridgeJS) }

// MaxCallBodyBytes bounds the body of POST /api/mcp-apps/{id}/call.
const MaxCallBodyBytes = 1 << 20

// MaxToolNameBytes bounds the tool name of a call: MCP tool names are 1 to
// 128 characters, and the name is written to the audit log.
const MaxToolNameBytes = 128

// HostName is the hostInfo.name the page gives views in ui/initialize.
const HostName = "teamsbot"

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

	// blockedLimit bounds how often each view's closed channels are
	// recorded (blocked.go).
	blockedLimit blockedLimiter

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
			if !hostSource.MatchString(h) {
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
	if err := h.buildDocuments(); err != nil {
		return nil, err
	}
	h.metrics = metrics{
		tokenRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_viewpage_frame_token_refusals_total",
			Help: "Frame documents refused for a missing, forged or expired token.",
		}, []string{"purpose", "reason"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_viewpage_tool_calls_total",
			Help: "Tool calls made from views, by result (ok, error, refused).",
		}, []string{"result"}),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_viewpage_blocked_reports_total",
			Help: "Reports of a closed channel a view tried, by result (recorded, limited, refused).",
		}, []string{"result"}),
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{h.metrics.tokenRefusals, h.metrics.calls, h.metrics.blocked} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("viewpage: register metrics: %w", err)
			}
		}
	}
	return h, nil
}

// trustedTypes makes the browser refuse any string written into an HTML
// or script sink (innerHTML, eval and the like) on the page and the proxy:
// their scripts put what views say on the page as text only, and this
// keeps it so.
const trustedTypes = "require-trusted-types-for 'script'; trusted-types 'none'"

// buildDocuments parses the templates and fixes the CSP of the page, the
// proxy and the error pages, all of which are the same for every request.
func (h *Handler) buildDocuments() error {
	var err error
	if h.pageTmpl, err = template.New("page").Parse(pageHTML); err != nil {
		return fmt.Errorf("viewpage: page template: %w", err)
	}
	proxyTmpl, err := template.New("proxy").Parse(proxyHTML)
	if err != nil {
		return fmt.Errorf("viewpage: proxy template: %w", err)
	}
	var b bytes.Buffer
	err = proxyTmpl.Execute(&b, struct {
		CSS    template.CSS
		Script template.JS
	}{template.CSS(proxyCSS), template.JS(proxyJS)})
	if err != nil {
		return fmt.Errorf("viewpage: proxy template: %w", err)
	}
	h.proxyDoc = b.Bytes()

	// Without a separate sandbox origin the frames come from wherever the
	// page was opened ('self'), which need not be the public base URL's
	// host name (127.0.0.1 for localhost, an internal name behind a proxy).
	frameSrc := h.FrameSource()

	// The page: its own script and style only, talks to its own API,
	// frames only the sandbox origin, and is framed by nobody; in Teams
	// mode it runs teams-js (embedded, allowed by hash like the others)
	// and only Teams and the Microsoft 365 hosts may frame it.
	scripts := web.CSPHash(bridgeJS) + " " + web.CSPHash(pageJS)
	ancestors := "frame-ancestors 'none'"
	if h.teamsHosts != nil {
		scripts += " " + teamsjs.Hash() + " " + web.CSPHash(teamsPageJS)
		ancestors = "frame-ancestors " + h.teamsSources
	}
	h.pageCSP = "default-src 'none'; " +
		"script-src " + scripts + "; " +
		"style-src " + web.CSPHash(pageCSS) + "; " +
		"img-src 'self' data:; " +
		"connect-src 'self'; " +
		"frame-src " + frameSrc + "; " +
		"base-uri 'none'; form-action 'none'; object-src 'none'; " +
		trustedTypes + "; " + ancestors
	if h.teamsHosts != nil {
		if h.signInTmpl, err = template.New("teams-signin").Parse(teamsSignInHTML); err != nil {
			return fmt.Errorf("viewpage: Teams sign-in template: %w", err)
		}
		// The shell frames nothing and talks only to the sign-in API.
		h.signInCSP = "default-src 'none'; " +
			"script-src " + teamsjs.Hash() + " " + web.CSPHash(teamsPageJS) + "; " +
			"style-src " + web.CSPHash(pageCSS) + "; " +
			"connect-src 'self'; " +
			"base-uri 'none'; form-action 'none'; object-src 'none'; " +
			trustedTypes + "; " + ancestors
	}

	// The proxy: its own script and style only; it loads nothing, connects
	// nowhere and frames only view documents of the sandbox origin.
	// Only the page's origin may frame it.
	proxyCSP := "default-src 'none'; " +
		"script-src " + web.CSPHash(proxyJS) + "; " +
		"style-src " + web.CSPHash(proxyCSS) + "; " +
		"frame-src " + frameSrc + "; " +
		"base-uri 'none'; form-action 'none'; object-src 'none'; " + blockWebRTC + "; " + trustedTypes
	if h.sameOrigin() {
		h.proxyCSP = proxyCSP + "; frame-ancestors 'self'"
	} else {
		h.proxyCSP = proxyCSP + "; " + frameAncestors(h.publicOrigin)
	}
	if h.teamsHosts != nil {
		// frame-ancestors names every ancestor up to the top, not only
		// the parent: inside Teams the proxy's ancestors are the page and
		// Teams itself, so Teams' hosts join the page's origin here and
		// nowhere else. Its parent is still only ever the page: the frame
		// token comes from the page's API, and the view document keeps no
		// frame-ancestors at all (see viewAncestors).
		h.proxyCSP += " " + h.teamsSources
	}
	return nil
}

// frameAncestors is the frame-ancestors directive that lets exactly the
// given origins frame a document ('none' for no origin). The origins are
// typed values, checked when the configuration was read, so nothing a
// server declared can reach this directive.
func frameAncestors(origins ...netaddr.Origin) string {
	srcs := make([]string, 0, len(origins))
	for _, o := range origins {
		if !o.IsZero() {
			srcs = append(srcs, o.String())
		}
	}
	slices.Sort(srcs)
	srcs = slices.Compact(srcs)
	if len(srcs) == 0 {
		return "frame-ancestors 'none'"
	}
	return "frame-ancestors " + strings.Join(srcs, " ")
}

// sameOrigin reports whether the frame documents are served from the
// page's own origin (no separate TICKETIQ_SANDBOX_BASE_URL).
func (h *Handler) sameOrigin() bool { return h.sandboxOrigin == h.publicOrigin }

// FrameSource is the CSP source expression of the frame documents: 'self'
// when they share the page's origin, else the sandbox origin. Another page
// that frames views (the playground) allows exactly this in frame-src.
func (h *Handler) FrameSource() string {
	if h.sameOrigin() {
		return "'self'"
	}
	return h.sandboxOrigin.String()
}

// frameBase is what the frame URLs start with: nothing (a path the browser
// resolves against the page) when they share the page's origin, else the
// sandbox origin.
func (h *Handler) frameBase() string {
	if h.sameOrigin() {
		return ""
	}
	return h.sandboxOrigin.String()
}

// Register adds the page, the API and the frame documents to e.
func (h *Handler) Register(e *echo.Echo) {
	e.GET("/mcp-apps/:id", h.page)
	e.GET("/api/mcp-apps/:id", h.viewAPI)
	e.POST("/api/mcp-apps/:id/call", h.call)
	e.POST("/api/mcp-apps/:id/blocked", h.blocked)
	e.GET("/sandbox/proxy", h.proxy)
	e.GET("/sandbox/views/:id", h.viewDocument)
}

// validID reports whether id could be a view id; anything else is 404
// without touching the store.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// loadView returns the view id, or an error wrapping ErrNotFound (unknown)
// or ErrExpired.
func (h *Handler) loadView(ctx context.Context, id string) (store.View, error) {
	if !validID(id) {
		return store.View{}, fmt.Errorf("view %.140q: %w", id, ErrNotFound)
	}
	v, err := h.store.View(ctx, id)
	switch {
	case isExpired(err):
		return store.View{}, fmt.Errorf("view %s: %w: %w", id, ErrExpired, err)
	case errors.Is(err, store.ErrNotFound):
		return store.View{}, fmt.Errorf("view %s: %w: %w", id, ErrNotFound, err)
	case err != nil:
		return store.View{}, fmt.Errorf("view %s: %w", id, err)
	}
	if v.Expired(h.now()) {
		return store.View{}, fmt.Errorf("view %s: %w", id, ErrExpired)
	}
	return v, nil
}

// session returns the signed-in person or an error wrapping ErrNoSession.
func (h *Handler) session(r *http.Request) (signin.Session, error) {
	s, err := h.signin.Session(r)
	if err != nil {
		if errors.Is(err, signin.ErrNoSession) {
			return signin.Session{}, fmt.Errorf("%w: %w", ErrNoSession, err)
		}
		return signin.Session{}, fmt.Errorf("viewpage: session: %w", err)
	}
	return s, nil
}

// pageData is what page.html shows.
type pageData struct {
	ID, Title, Tool, Server string
	Expires, ExpiresISO     string
	Arguments               string
	ShowArguments           bool
	HostName, HostVersion   string
	CSS                     template.CSS
	Bridge, Script          template.JS
	// Teams mode: teams-js and the page's Teams script, and the origins
	// whose teams-js messages it trusts.
	Teams                bool
	TeamsJS, TeamsScript template.JS
	TeamsOrigins         string
}

// page serves GET /mcp-apps/{id}: sign-in first, then the access rule, then
// the page, which loads the rest from the view API.
func (h *Handler) page(c echo.Context) error {
	id := c.Param("id")
	r := c.Request()
	s, err := h.session(r)
	if errors.Is(err, ErrNoSession) {
		if h.teamsHosts != nil && h.signin.Teams() && r.Header.Get("Sec-Fetch-Dest") == "iframe" {
			// Inside Teams' frame the sign-in pages cannot show (they
			// refuse every frame): the shell signs in with Teams.
			return h.teamsSignIn(c)
		}
		return c.Redirect(http.StatusSeeOther, h.signInFor(r, id))
	}
	if err != nil {
		return err
	}
	v, err := h.viewFor(r.Context(), id, s)
	if err == nil {
		if err = h.access.CanRead(r.Context(), personOf(s), accessView(v)); err != nil {
			err = refusal(err)
		}
	}
	if err != nil {
		return h.localRefusal(r, id, s, err)
	}
	title := v.ToolTitle
	if title == "" {
		title = v.Tool
	}
	args := prettyJSON(v.Arguments)
	d := pageData{
		ID: v.ID, Title: title, Tool: v.Tool, Server: v.Server,
		Expires:       v.ExpiresAt.UTC().Format("2 Jan 2006 15:04 MST"),
		ExpiresISO:    v.ExpiresAt.UTC().Format(time.RFC3339),
		Arguments:     args,
		ShowArguments: args != "{}",
		HostName:      HostName,
		HostVersion:   h.hostVersion,
		CSS:           template.CSS(pageCSS),
		Bridge:        template.JS(bridgeJS),
		Script:        template.JS(pageJS),
	}
	if h.teamsHosts != nil {
		d.Teams = true
		d.TeamsJS, d.TeamsScript = template.JS(teamsjs.Script()), template.JS(teamsPageJS)
		d.TeamsOrigins = h.teamsSources
	}
	var b bytes.Buffer
	if err := h.pageTmpl.Execute(&b, d); err != nil {
		return fmt.Errorf("viewpage: render page: %w", err)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.pageCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// teamsSignIn serves the Teams sign-in shell: a page, framed by Teams,
// whose script signs the person in with Teams single sign-on (or a popup)
// and loads the view page again. It shows nothing of the view.
func (h *Handler) teamsSignIn(c echo.Context) error {
	var b bytes.Buffer
	err := h.signInTmpl.Execute(&b, pageData{
		CSS: template.CSS(pageCSS), TeamsJS: template.JS(teamsjs.Script()), TeamsScript: template.JS(teamsPageJS),
		TeamsOrigins: h.teamsSources,
	})
	if err != nil {
		return fmt.Errorf("viewpage: render Teams sign-in: %w", err)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.signInCSP)
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

// prettyJSON indents a JSON value for display; null or empty shows as {}.
func prettyJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// ViewInfo is the answer of GET /api/mcp-apps/{id}: what the page needs to
// frame the view and answer its messages. The two URLs carry fresh tokens.
type ViewInfo struct {
	// ID is the view's id.
	ID string `json:"id"`
	// Server is the name of the MCP server the view came from.
	Server string `json:"server"`
	// Tool is the name of the tool whose call made the view.
	Tool string `json:"tool"`
	// ToolTitle is the tool's title, when it has one.
	ToolTitle string `json:"toolTitle,omitempty"`
	// ResourceURI is the ui:// resource the view's HTML was read from.
	ResourceURI string `json:"resourceUri"`
	// ProxyURL is the sandbox proxy's URL with a fresh token: on the
	// sandbox origin, or a path when the frames share the page's origin.
	ProxyURL string `json:"proxyUrl"`
	// ViewURL is the view document's URL with a fresh token, on the same
	// origin as ProxyURL.
	ViewURL string `json:"viewUrl"`
	// Arguments are the tool call's arguments, a JSON object ({} when
	// there were none): the view's tool-input.
	Arguments json.RawMessage `json:"arguments"`
	// Result is the tool's CallToolResult, its content always an array:
	// the view's tool-result.
	Result json.RawMessage `json:"result"`
	// ExpiresAt is when the view stops being served.
	ExpiresAt time.Time `json:"expiresAt"`
	// Permissions are what the view was granted of what its server
	// asked for: forms whenever asked (see Sandbox), the others only where
	// the configuration file or the tenant's admin allowed them for its
	// server (see Allow).
	Permissions Granted `json:"permissions"`
	// Allow is the allow attribute (Permissions Policy) of both frames:
	// the granted features, such as "microphone", separated by "; ";
	// empty when none was granted. The proxy frame carries it too because
	// a frame can delegate only what it was delegated.
	Allow string `json:"allow"`
	// Sandbox is the sandbox attribute of both frames: "allow-scripts",
	// plus "allow-forms" only when the server asked for forms. The proxy
	// frame carries it too because a frame inherits its parent's sandbox
	// flags (TestSandboxFlagsAreInherited).
	Sandbox string `json:"sandbox"`
	// PrefersBorder is the resource's prefersBorder, when it said.
	PrefersBorder *bool `json:"prefersBorder,omitempty"`
}

// Granted are the sandbox permissions a view was granted, as the page
// tells the view in ui/initialize.
type Granted struct {
	Camera         bool `json:"camera,omitempty"`
	Microphone     bool `json:"microphone,omitempty"`
	Geolocation    bool `json:"geolocation,omitempty"`
	ClipboardWrite bool `json:"clipboardWrite,omitempty"`
	Forms          bool `json:"forms,omitempty"`
}

// viewAPI serves GET /api/mcp-apps/{id}.
func (h *Handler) viewAPI(c echo.Context) error {
	r := c.Request()
	s, err := h.session(r)
	if err != nil {
		return err
	}
	v, err := h.viewFor(r.Context(), c.Param("id"), s)
	if err != nil {
		return err
	}
	if err := h.access.CanRead(r.Context(), personOf(s), accessView(v)); err != nil {
		return refusal(err)
	}
	now := h.now()
	info := ViewInfo{
		ID:          v.ID,
		Server:      v.Server,
		Tool:        v.Tool,
		ToolTitle:   v.ToolTitle,
		ResourceURI: v.ResourceURI,
		ProxyURL: h.frameBase() + "/sandbox/proxy?view=" + url.QueryEscape(v.ID) +
			"&token=" + h.keys.mint(purposeProxy, v.ID, now),
		ViewURL: h.frameBase() + "/sandbox/views/" + url.PathEscape(v.ID) +
			"?token=" + h.keys.mint(purposeView, v.ID, now),
		Arguments: jsonObjectOr(v.Arguments, `{}`),
		Result:    toolResultJSON(v.Result),
		ExpiresAt: v.ExpiresAt.UTC(),
		Permissions: Granted{Camera: v.Granted.Camera, Microphone: v.Granted.Microphone, Geolocation: v.Granted.Geolocation,
			ClipboardWrite: v.Granted.ClipboardWrite, Forms: v.Permissions.Forms},
		Allow:         strings.Join(v.Granted.PolicyFeatures(), "; "),
		Sandbox:       sandboxFor(v.Permissions.Forms),
		PrefersBorder: v.PrefersBorder,
	}
	hd := c.Response().Header()
	web.NoStore(hd)
	return c.JSON(http.StatusOK, info)
}

// sandboxFor is the inner frame's sandbox attribute. Never
// allow-same-origin, allow-popups or allow-top-navigation.
func sandboxFor(forms bool) string {
	if forms {
		return "allow-scripts allow-forms"
	}
	return "allow-scripts"
}

// jsonObjectOr returns raw when it is a JSON object, else def.
func jsonObjectOr(raw json.RawMessage, def string) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '{' && json.Valid(t) {
		return t
	}
	return json.RawMessage(def)
}

// toolResultJSON makes sure the stored result is a CallToolResult whose
// content is an array, which the MCP Apps SDK requires of tool-result.
func toolResultJSON(raw json.RawMessage) json.RawMessage {
	obj := jsonObjectOr(raw, `{"content":[]}`)
	var probe struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(obj, &probe); err == nil {
		t := bytes.TrimSpace(probe.Content)
		if len(t) > 0 && t[0] == '[' {
			return obj
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		return json.RawMessage(`{"content":[]}`)
	}
	m["content"] = json.RawMessage(`[]`)
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`{"content":[]}`)
	}
	return b
}

// callRequest is the body of POST /api/mcp-apps/{id}/call.
type callRequest struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// sameOriginJSON is what every POST of the page's own script must be.
// Cross-site requests never reach a handler: Sec-Fetch-Site or Origin must
// say same origin, and the Lax session cookie is a second line. The body
// is application/json only: a cross-site form cannot send it without a
// preflight, which this service never answers.
func sameOriginJSON(cop *http.CrossOriginProtection, r *http.Request) error {
	if err := cop.Check(r); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossOrigin, err)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return ErrUnsupportedMediaType
	}
	return nil
}

// call serves POST /api/mcp-apps/{id}/call: the view's tools/call, made by
// the page with the person's session and run through the agent's governed
// path.
func (h *Handler) call(c echo.Context) error {
	r := c.Request()
	if err := sameOriginJSON(h.cop, r); err != nil {
		return err
	}
	s, err := h.session(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// Access is decided before anything of the view or the body is read:
	// another tenant's id is answered as an unknown one, and the refusal
	// is recorded in the caller's own tenant.
	id := c.Param("id")
	v, err := h.viewFor(ctx, id, s)
	if errors.Is(err, ErrNotFound) && validID(id) {
		h.metrics.calls.WithLabelValues("refused").Inc()
		h.auditRefusal(ctx, s, store.View{ID: id}, "", "access: no view of the caller's tenant has this id")
	}
	if err != nil {
		return err
	}
	if err := h.access.CanCall(ctx, personOf(s), accessView(v)); err != nil {
		err = refusal(err)
		if errors.Is(err, access.ErrDenied) {
			// The caller's own tenant, the caller's own words: the tool
			// they asked for is recorded, clipped, for their admins.
			h.metrics.calls.WithLabelValues("refused").Inc()
			req, _, _ := readCall(c)
			h.auditRefusal(ctx, s, v, req.Name, err.Error())
		}
		return err
	}
	req, args, err := readCall(c)
	if err != nil {
		return err
	}
	caller := agentPersonOf(s)
	res, err := h.agent.CallFromView(ctx, v, caller, req.Name, json.RawMessage(args))
	switch {
	case err == nil:
	case errors.Is(err, agent.ErrToolNotAllowed), errors.Is(err, agent.ErrDenied), errors.Is(err, agent.ErrBadRequest):
		h.metrics.calls.WithLabelValues("refused").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, err)
	case errors.Is(err, agent.ErrUnavailable):
		h.metrics.calls.WithLabelValues("error").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, ErrToolUnavailable)
	default:
		// What the server said (a JSON-RPC error, which may repeat the
		// arguments) stays in the agent's audit record; the error that
		// reaches the log says only where the call failed.
		h.metrics.calls.WithLabelValues("error").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, ErrToolFailed)
	}
	h.metrics.calls.WithLabelValues("ok").Inc()
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, res)
}

// readCall reads and checks the body of a view's tool call: one JSON
// object {name, arguments}, the arguments an object ({} when absent).
func readCall(c echo.Context) (callRequest, []byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, MaxCallBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return callRequest{}, nil, bodyTooLarge(MaxCallBodyBytes, err)
		}
		return callRequest{}, nil, fmt.Errorf("%w: reading the body: %w", ErrBadRequest, err)
	}
	// The keys are matched exactly: encoding/json alone would take "NAME"
	// or "nAme" for name, and a body that means one thing here and another
	// to a proxy or a log reader is refused instead. Nothing but space may
	// follow the object (a decoder alone stops at a stray "}").
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return callRequest{}, nil, badRequest(web.JSONWords(err, callRequest{}), err)
	}
	if fields == nil {
		return callRequest{}, nil, badRequest("the body must be a JSON object with `name` and `arguments`, not null", nil)
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return callRequest{}, nil, badRequest(fmt.Sprintf("the body goes on after its JSON object (after byte %d): send one JSON object with `name` and `arguments`", dec.InputOffset()), nil)
	}
	var req callRequest
	if raw, ok := fields["name"]; ok {
		if err := json.Unmarshal(raw, &req.Name); err != nil {
			return callRequest{}, nil, badRequest("`name` must be a string: the name of the tool to call", nil)
		}
	}
	req.Arguments = fields["arguments"]
	if req.Name == "" {
		return callRequest{}, nil, badRequest("`name` is missing: name the tool to call", nil)
	}
	if len(req.Name) > MaxToolNameBytes {
		return callRequest{}, nil, badRequest(fmt.Sprintf("`name` is %d bytes long; a tool's name is at most %d", len(req.Name), MaxToolNameBytes), nil)
	}
	args := bytes.TrimSpace(req.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte(`{}`)
	case args[0] != '{':
		return callRequest{}, nil, badRequest("`arguments` must be a JSON object (or left out), the tool's arguments by name", nil)
	}
	return req, args, nil
}

// auditRefusal has the agent record a call refused by the access rule, in
// the caller's own tenant; why is the refusal's own text.
func (h *Handler) auditRefusal(ctx context.Context, s signin.Session, v store.View, tool, why string) {
	if err := h.agent.RefuseViewCall(ctx, v, agentPersonOf(s), tool, why); err != nil {
		h.logger.ErrorContext(ctx, "audit of a refused view call failed", "view", v.ID, "err", err)
	}
}

// proxy serves GET /sandbox/proxy?view={id}&token=...: the same small
// document for every view, only with a valid proxy token.
func (h *Handler) proxy(c echo.Context) error {
	id := c.QueryParam("view")
	if err := h.keys.verify(c.QueryParam("token"), purposeProxy, id, h.now()); err != nil {
		return h.tokenRefused(purposeProxy, err)
	}
	if err := framedOnly(c.Request()); err != nil {
		return err
	}
	// A view that expired or was revoked since its token was minted is
	// gone from its frames too, at once.
	if _, err := h.loadView(c.Request().Context(), id); err != nil {
		return err
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", h.proxyCSP)
	frameHeaders(hd)
	// No Connection-Allowlist here, though the proxy connects nowhere (its
	// default-src is 'none'): with one on the proxy as well as on the
	// view, Chromium 156 stops answering, DevTools included, once the view
	// makes a peer connection (TestBrowserExfiltration found it). The
	// view's own list is what closes the view's channels.
	return c.HTMLBlob(http.StatusOK, h.proxyDoc)
}

// viewDocument serves GET /sandbox/views/{id}?token=...: the view's own
// HTML under its stored CSP, which only our page and proxy may frame.
func (h *Handler) viewDocument(c echo.Context) error {
	id := c.Param("id")
	if err := h.keys.verify(c.QueryParam("token"), purposeView, id, h.now()); err != nil {
		return h.tokenRefused(purposeView, err)
	}
	if err := framedOnly(c.Request()); err != nil {
		return err
	}
	ctx := c.Request().Context()
	v, err := h.loadView(ctx, id)
	if err != nil {
		return err
	}
	html, err := h.store.ViewHTML(ctx, v.HTMLSHA256)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("view %s: html %s: %w: %w", id, v.HTMLSHA256, ErrNotFound, err)
		}
		return fmt.Errorf("view %s: html: %w", id, err)
	}
	csp := v.CSP
	if strings.TrimSpace(csp) == "" {
		// The agent stores every view with the policy it applies; a record
		// without one gets nothing at all rather than a guess.
		csp = "default-src 'none'"
	}
	// The sandbox directive keeps the document in an opaque origin even
	// if it is ever loaded outside our frames (a top-level window, another
	// site's frame), so third-party HTML never runs with our origin. It
	// comes first: of two directives of one name a browser keeps the
	// first, so nothing in the stored policy can loosen it.
	// webrtc 'block' (CSP3) comes second for the same reason. Chromium
	// does not implement it yet (it logs the directive as unrecognized);
	// the Connection-Allowlist below and the guard close WebRTC there.
	allowlist := mcpapps.ConnectionAllowlist(csp)
	csp = "sandbox " + sandboxFor(v.Permissions.Forms) + "; " + blockWebRTC + "; " + csp
	if h.unguarded.csp {
		csp = "sandbox " + sandboxFor(v.Permissions.Forms)
	}
	if h.viewAncestors != nil {
		csp += "; " + frameAncestors(h.viewAncestors...)
	}
	hd := c.Response().Header()
	hd.Set("Content-Security-Policy", csp)
	frameHeaders(hd)
	if !h.unguarded.allowlist {
		hd.Set("Connection-Allowlist", allowlist)
	}
	if !h.unguarded.script {
		html = withGuard(html)
	}
	return c.HTMLBlob(http.StatusOK, html)
}

// blockWebRTC is the CSP3 directive that forbids peer connections.
const blockWebRTC = "webrtc 'block'"

// framedOnly refuses a frame document that a browser asks for as anything
// but an iframe (a top-level window, a fetch). Browsers send Sec-Fetch-Dest
// on every request; a client that sends none runs no script either.
func framedOnly(r *http.Request) error {
	if d := r.Header.Get("Sec-Fetch-Dest"); d != "" && d != "iframe" {
		return fmt.Errorf("%w: Sec-Fetch-Dest %.20q", ErrNotFramed, d)
	}
	return nil
}

// frameHeaders are the headers both frame documents carry. Never
// X-Frame-Options: the page must be able to frame them, and
// frame-ancestors says by whom.
func frameHeaders(hd http.Header) {
	web.NoStore(hd)
	hd.Set("Referrer-Policy", "no-referrer")
	// No speculative DNS lookups for the links a document shows. (Chromium
	// still resolves what <link rel=dns-prefetch> or preconnect names;
	// Connection-Allowlist stops those.)
	hd.Set("X-DNS-Prefetch-Control", "off")
}

// tokenRefused counts a refused frame token and returns the error that
// becomes 403.
func (h *Handler) tokenRefused(purpose string, err error) error {
	reason := reasonMalformed
	var te *tokenError
	if errors.As(err, &te) {
		reason = te.reason
	}
	h.metrics.tokenRefusals.WithLabelValues(purpose, reason).Inc()
	return fmt.Errorf("%s: %w", purpose, err)
}
