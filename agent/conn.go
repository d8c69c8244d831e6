package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
	"teamsbot/mcpapps"
)

func osGetenv(name string) string { return os.Getenv(name) }

// serverConn is the connection to one MCP server of one agent. It keeps
// the session, reconnects it when it died, and caches what a run needs on
// its hot path: the tool list (until notifications/tools/list_changed) and
// each checked ui:// resource (until notifications/resources/list_changed).
type serverConn struct {
	svc     *Service
	agentID string
	name    string
	cfg     ServerConfig
	timeout time.Duration
	// allowed are the permissions the configuration file allows this
	// server's views, for every tenant.
	allowed mcpapps.Permissions
	// builtin is the in-memory server, made once so that a reconnect finds
	// the same server state.
	builtin *mcp.Server
	// firstTry is closed when the first attempt to connect has ended,
	// whether it connected or not.
	firstTry     chan struct{}
	firstTryOnce sync.Once

	// mu guards the session fields; it is held while connecting, so that
	// concurrent runs wait for one attempt instead of starting several.
	mu      sync.Mutex
	session *mcp.ClientSession
	dead    bool // the session ended (a stdio child exited, a stream broke)
	lastErr error
	lastTry time.Time
	closed  bool

	// cmu guards the caches; gen counts invalidations so that a list that
	// was fetched while the server announced a change is not kept.
	cmu       sync.RWMutex
	tools     *toolList
	toolGen   uint64
	resources map[string]*resourceEntry // at most maxCachedResources
	resBytes  int                       // HTML held in resources
	listMeta  map[string]mcp.Meta       // resources/list entries' _meta, by URI
	resGen    uint64

	// cut counts the server's messages cut at the transport's limit.
	cut atomic.Uint64
}

// Bounds of the resource cache. Its keys are URIs a server chose, so
// without them a server naming a new ui:// resource on every tools/list
// would grow it for as long as the service runs.
const (
	// maxCachedResources is how many checked resources of one server are
	// kept; a new one beyond it pushes an old one out.
	maxCachedResources = 32
	// maxCachedHTMLBytes bounds the HTML kept for one server.
	maxCachedHTMLBytes = 16 << 20
	// maxListedResources is how many resources/list entries are read for
	// their _meta.ui, over at most maxListPages pages.
	maxListedResources = 1000
)

// toolList is one server's tools, read once per tools/list.
type toolList struct {
	byName map[string]*toolEntry
	// specs are the tools offered to the model, notes the run notes on
	// those that are not (at most maxToolNotes of them, then a count).
	specs []ToolSpec
	notes []string
	more  int // notes left out
	// all are every tool with a valid name, _meta.ui or not: what a run
	// of a tenant whose admin turned MCP Apps off is offered.
	all []ToolSpec
}

// Bounds on what one server's tools/list can make the service hold. The
// list comes from a server the service does not control: it could page
// forever, list thousands of tools, or fill every run's notes.
const (
	// maxTools is how many tools of one server are read; the rest are
	// not offered, and the notes say so.
	maxTools = 1000
	// maxListPages is how many pages of tools/list (or resources/list)
	// are read.
	maxListPages = 100
	// maxToolNotes is how many notes about one server's tools each run
	// gets; the rest are counted in one more note.
	maxToolNotes = 20
	// maxToolNameBytes is the longest tool name the MCP specification
	// allows.
	maxToolNameBytes = 128
)

func (tl *toolList) note(format string, args ...any) {
	if len(tl.notes) < maxToolNotes {
		tl.notes = append(tl.notes, fmt.Sprintf(format, args...))
		return
	}
	tl.more++
}

// validToolName reports whether name follows the MCP specification's rule
// for tool names: 1 to 128 of A-Z, a-z, 0-9, '_', '-' and '.'. Anything
// else (control characters, '/', spaces) is not offered: the name reaches
// the model, the run notes and the audit log, and "server/tool" must split
// one way only.
func validToolName(name string) bool {
	if name == "" || len(name) > maxToolNameBytes {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// toolEntry is one tool with what its _meta.ui says.
type toolEntry struct {
	tool    *mcp.Tool
	ui      mcpapps.ToolUI
	toModel bool
	toApp   bool
	// notOffered says why the model is not offered the tool; "" when it is.
	notOffered string
}

// resourceEntry is a ui:// resource, read and checked once.
type resourceEntry struct {
	html    []byte
	sha     string
	ui      mcpapps.ResourceUI
	csp     mcpapps.Policy
	refusal *mcpapps.RefusedError
}

func newServerConn(s *Service, agentID string, cfg ServerConfig) *serverConn {
	timeout, _ := parseTimeout(cfg.Timeout, DefaultServerTimeout) // validated in New
	allowed, _ := mcpapps.ParsePermissions(cfg.Permissions)       // validated in New
	c := &serverConn{svc: s, agentID: agentID, name: cfg.Name, cfg: cfg, timeout: timeout, allowed: allowed, firstTry: make(chan struct{})}
	switch {
	case cfg.Builtin == BuiltinDemo && s.opts.Builtins[BuiltinDemo] == nil:
		c.builtin = demo.New(demo.Options{Now: s.opts.Now, Logger: s.log.With("server", cfg.Name)})
	case cfg.Builtin != "":
		c.builtin = s.opts.Builtins[cfg.Builtin]()
	}
	return c
}

// client makes the MCP client of one session; its handlers drop the caches
// when the server says its lists changed.
func (c *serverConn) client() *mcp.Client {
	caps := &mcp.ClientCapabilities{}
	if c.svc.opts.AppsEnabled {
		caps.AddExtension(mcpapps.ExtensionID, map[string]any{"mimeTypes": []string{mcpapps.MIMEType}})
	}
	return mcp.NewClient(&mcp.Implementation{Name: "teamsbot", Version: "1.0.0"}, &mcp.ClientOptions{
		Logger:       c.svc.log.With("server", c.name),
		Capabilities: caps,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.invalidateTools()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.invalidateResources()
		},
	})
}

// transport makes a new transport to the server.
func (c *serverConn) transport(ctx context.Context) (mcp.Transport, error) {
	switch {
	case c.builtin != nil:
		ct, st := newMemTransports()
		// The server side of an in-memory session lives until the client
		// closes it, not until ctx ends.
		if _, err := c.builtin.Connect(context.WithoutCancel(ctx), st, nil); err != nil {
			return nil, fmt.Errorf("starting built-in server %s: %w", c.cfg.Builtin, err)
		}
		return ct, nil
	case c.cfg.URL != "":
		return &mcp.StreamableClientTransport{
			Endpoint:   c.cfg.URL,
			HTTPClient: c.httpClient(),
			MaxRetries: 2,
		}, nil
	default:
		// The child must outlive the connect context: it ends when the
		// session is closed.
		cmd := exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		cmd.Dir = c.cfg.Dir
		cmd.Env = childEnv(c.svc.getenv)
		for k, v := range c.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logWriter{c: c}
		return &stdioTransport{cmd: cmd, maxLine: int(messageLimit(c.svc.maxResourceBytes())), terminate: 2 * time.Second, cut: &c.cut}, nil
	}
}

// inheritedEnv are the only variables of the service's environment that a
// stdio child gets (besides its configured env): what a program needs to
// run, and none of the service's secrets.
func inheritedEnv() []string {
	return []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR"}
}

func childEnv(getenv func(string) string) []string {
	var env []string
	for _, k := range inheritedEnv() {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// httpClient sends the configured headers on every request to the
// server's own origin, and to no other: they often hold a bearer token. A
// redirect to another origin is refused (the request's body holds the
// tool's arguments, which are the server's to see only). Timeouts are on
// the transport (connecting, TLS, waiting for headers) and on each call's
// context, not on the client: the server's event stream lives long.
func (c *serverConn) httpClient() *http.Client {
	var base http.RoundTripper = http.DefaultTransport
	if hc := c.svc.opts.HTTPClient; hc != nil && hc.Transport != nil {
		base = hc.Transport
	}
	if t, ok := base.(*http.Transport); ok {
		t = t.Clone()
		t.TLSHandshakeTimeout = 10 * time.Second
		t.ResponseHeaderTimeout = c.timeout + 5*time.Second
		base = t
	}
	base = &cappedTransport{base: base, limit: messageLimit(c.svc.maxResourceBytes()), cut: &c.cut}
	origin, _ := url.Parse(c.cfg.URL) // validated in New
	return &http.Client{
		Transport:     &headerTransport{base: base, headers: c.cfg.Headers, origin: origin},
		CheckRedirect: netaddr.SameOriginRedirects,
	}
}

// headerTransport adds fixed headers (often a bearer token) to requests to
// one origin.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	origin  *url.URL
}

// RoundTrip implements http.RoundTripper.
func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && t.origin != nil && netaddr.SameOrigin(t.origin, req.URL) {
		req = req.Clone(req.Context())
		for k, v := range t.headers {
			req.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// logWriter passes a stdio child's stderr to the log, a line at a time,
// at debug level: it is the child's own output and may hold anything.
type logWriter struct {
	c   *serverConn
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			break
		}
		w.c.svc.log.Debug("MCP server stderr", "server", w.c.name, "line", string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
	if len(w.buf) > 4096 {
		w.buf = w.buf[:0]
	}
	return len(p), nil
}

var _ io.Writer = (*logWriter)(nil)

// start connects the server and reads its tool list, so that the first run
// finds it cached.
func (c *serverConn) start(ctx context.Context) error {
	defer c.firstTryOnce.Do(func() { close(c.firstTry) })
	cs, _, err := c.sessionFor(ctx, true)
	if err != nil {
		return err
	}
	_, err = c.toolList(ctx, cs)
	return err
}

// sessionFor returns a live session, connecting (or reconnecting a dead
// one) when needed. A server that failed is tried again only after
// RetryInterval, unless force is set. reconnected reports a new session
// replacing a dead one, for the run notes.
func (c *serverConn) sessionFor(ctx context.Context, force bool) (*mcp.ClientSession, bool, error) {
	if !force {
		// While the server is first started, a run waits for that
		// attempt rather than start one of its own, as long as its
		// context allows.
		select {
		case <-c.firstTry:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("%w: %s: %w: %w", ErrUnavailable, c.name, ErrStarting, context.Cause(ctx))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false, fmt.Errorf("%w: %s: service closed", ErrUnavailable, c.name)
	}
	if c.session != nil && !c.dead {
		return c.session, false, nil
	}
	wasDead := c.session != nil && c.dead
	if c.session == nil && !wasDead && !force && c.lastErr != nil && c.svc.now().Sub(c.lastTry) < c.svc.opts.RetryInterval {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.name, c.lastErr)
	}
	if c.session != nil {
		_ = c.session.Close()
		c.session = nil
	}
	c.lastTry = c.svc.now()
	cs, err := c.connect(ctx)
	if err != nil {
		c.lastErr = err
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.name, err)
	}
	c.lastErr = nil
	c.session, c.dead = cs, false
	go func() {
		_ = cs.Wait()
		c.mu.Lock()
		if c.session == cs {
			c.dead = true
		}
		c.mu.Unlock()
		c.svc.log.Info("MCP session ended", "agent", c.agentID, "server", c.name)
	}()
	// A new session may face a changed server: read its lists anew.
	c.invalidateTools()
	c.invalidateResources()
	if wasDead {
		c.svc.log.Info("MCP server reconnected", "agent", c.agentID, "server", c.name)
	}
	return cs, wasDead, nil
}

func (c *serverConn) connect(ctx context.Context) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, c.svc.opts.ConnectTimeout)
	defer cancel()
	t, err := c.transport(ctx)
	if err != nil {
		return nil, err
	}
	var so *mcp.ClientSessionOptions
	if c.builtin != nil {
		// In memory, the stateless 2026-07-28 protocol buys nothing and
		// costs on the hot path: it repeats the client's capabilities in
		// every request's _meta, which the server decodes each time.
		so = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	cs, err := c.client().Connect(ctx, t, so)
	if err != nil {
		return nil, c.scrub(err)
	}
	return cs, nil
}

// scrub makes an error of the server's session fit to log and show. The
// server's URL is hidden: it often carries a secret (a token in its query,
// a secret path), and the transport's errors quote it ("Post
// \"https://...\": ..."). The text is cut to maxReasonBytes: a server's
// error message may be of any size. The result still wraps err.
func (c *serverConn) scrub(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := msg
	if c.cfg.URL != "" {
		forms := []string{c.cfg.URL}
		if u, perr := url.Parse(c.cfg.URL); perr == nil && u.String() != c.cfg.URL {
			forms = append(forms, u.String())
		}
		shown := netaddr.Redact(c.cfg.URL)
		for _, f := range forms {
			// As written, and as %q writes it (url.Error quotes the URL).
			out = strings.ReplaceAll(out, f, shown)
			out = strings.ReplaceAll(out, strings.Trim(strconv.Quote(f), `"`), shown)
		}
	}
	if out = textclip.Clip(out, maxReasonBytes); out == msg {
		return err
	}
	return &scrubbedError{msg: out, err: err}
}

// scrubbedError is an error whose text was scrubbed.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// markDead records that a call found the session broken, so that the next
// use reconnects.
func (c *serverConn) markDead(cs *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == cs {
		c.dead = true
	}
	c.mu.Unlock()
}

// ping connects if needed and pings the server. A server that failed is
// not tried again before RetryInterval: readiness must not start a child
// or open a connection on every probe.
func (c *serverConn) ping(ctx context.Context) error {
	cs, _, err := c.sessionFor(ctx, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.svc.opts.ConnectTimeout)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		if sessionBroken(err) {
			c.markDead(cs)
		}
		return fmt.Errorf("%w: %s: ping: %w", ErrUnavailable, c.name, c.scrub(err))
	}
	return nil
}

func (c *serverConn) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.session == nil {
		return nil
	}
	err := c.session.Close()
	c.session = nil
	if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !isExitError(err) {
		return fmt.Errorf("closing %s: %w", c.name, c.scrub(err))
	}
	return nil
}

// isExitError reports a stdio child that exited with a signal or a status
// when asked to close: not worth reporting.
func isExitError(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) || strings.Contains(err.Error(), "signal: terminated")
}

// sessionBroken tells a dead connection from a tool's or a request's own
// failure.
func sessionBroken(err error) bool {
	// A stream that carried bytes that are not JSON cannot be trusted to
	// frame the next message either: what follows may be swallowed into
	// the broken one, and every later call would wait out its timeout.
	var syntax *json.SyntaxError
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.As(err, &syntax)
}

func (c *serverConn) invalidateTools() {
	c.cmu.Lock()
	c.tools = nil
	c.toolGen++
	c.cmu.Unlock()
}

func (c *serverConn) invalidateResources() {
	c.cmu.Lock()
	c.resources, c.resBytes = nil, 0
	c.listMeta = nil
	c.resGen++
	c.cmu.Unlock()
}

// toolList returns the cached tool list, reading it when the cache is empty.
func (c *serverConn) toolList(ctx context.Context, cs *mcp.ClientSession) (*toolList, error) {
	c.cmu.RLock()
	tl, gen := c.tools, c.toolGen
	c.cmu.RUnlock()
	if tl != nil {
		return tl, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var tools []*mcp.Tool
	params := &mcp.ListToolsParams{}
	more := false // the server has tools beyond what was read
	for page := 0; ; page++ {
		if page == maxListPages {
			more = true
			break
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			if sessionBroken(err) {
				c.markDead(cs)
			}
			return nil, fmt.Errorf("%w: %s: tools/list: %w", ErrUnavailable, c.name, c.scrub(err))
		}
		tools = append(tools, res.Tools...)
		if len(tools) > maxTools {
			tools, more = tools[:maxTools], true
			break
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	tl = c.buildToolList(tools, more)
	c.cmu.Lock()
	if c.toolGen == gen {
		c.tools = tl
	}
	c.cmu.Unlock()
	return tl, nil
}

// buildToolList reads what each tool's _meta.ui says and decides what the
// model is offered; more says the server listed more tools than were read.
func (c *serverConn) buildToolList(tools []*mcp.Tool, more bool) *toolList {
	apps := c.svc.opts.AppsEnabled
	tl := &toolList{byName: make(map[string]*toolEntry, len(tools))}
	if more {
		tl.note("server %s lists more tools than the %d (or %d pages) read; the rest are not offered", c.name, maxTools, maxListPages)
	}
	for _, t := range tools {
		switch {
		case t == nil:
			continue
		case !validToolName(t.Name):
			tl.note("a tool of server %s named %.64q is not offered: a tool name is 1 to %d of A-Z, a-z, 0-9, '_', '-' and '.'", c.name, t.Name, maxToolNameBytes)
			continue
		case tl.byName[t.Name] != nil:
			tl.note("server %s lists tool %s twice; only the first is used", c.name, t.Name)
			continue
		}
		ui, err := mcpapps.ReadToolUI(t.Meta)
		e := &toolEntry{tool: t, ui: ui}
		switch {
		case !apps:
			// The extension is off: the server's _meta.ui means nothing here.
			e.ui = mcpapps.ToolUI{}
			e.toModel = true
		case err != nil:
			// A malformed _meta.ui: who may call the tool is unknown, so
			// nobody may (ReadToolUI fails closed the same way), and it
			// has no view. Offering it to the model could hand it a tool
			// its server meant for views only. The note says so; what is
			// wrong with it (the checker's error) is for the operator's log.
			e.notOffered = "its _meta.ui is malformed"
			c.svc.log.Warn("MCP tool not offered: its _meta.ui is malformed", "agent", c.agentID, "server", c.name, "tool", t.Name, "err", err)
		default:
			e.toModel = ui.VisibleTo(mcpapps.VisibilityModel)
			e.toApp = ui.VisibleTo(mcpapps.VisibilityApp)
			if !e.toModel {
				e.notOffered = fmt.Sprintf("its _meta.ui.visibility %q lacks \"model\"", ui.Visibility)
			}
		}
		tl.byName[t.Name] = e
		spec := ToolSpec{
			Name:        c.name + "/" + t.Name,
			Server:      c.name,
			Tool:        t.Name,
			Title:       toolTitle(t),
			Description: t.Description,
			InputSchema: t.InputSchema,
		}
		tl.all = append(tl.all, spec)
		if !e.toModel {
			tl.note("tool %s/%s is not offered to the model: %s", c.name, t.Name, e.notOffered)
			continue
		}
		tl.specs = append(tl.specs, spec)
	}
	if tl.more > 0 {
		tl.notes = append(tl.notes, fmt.Sprintf("server %s: %d more notes about its tools are left out", c.name, tl.more))
	}
	return tl
}

// maxTitleBytes bounds a tool's title as shown to the model, in views and
// on cards.
const maxTitleBytes = 256

// toolTitle is a tool's display name: title, annotations.title, name; one
// line, at most maxTitleBytes.
func toolTitle(t *mcp.Tool) string {
	title := t.Name
	switch {
	case t.Title != "":
		title = t.Title
	case t.Annotations != nil && t.Annotations.Title != "":
		title = t.Annotations.Title
	}
	return oneLine(textclip.Clip(title, maxTitleBytes))
}

// resource returns the checked resource uri, reading it when not cached. A
// read error is returned and not cached; a refusal is cached like a view,
// since the server would serve the same content until it says otherwise.
func (c *serverConn) resource(ctx context.Context, cs *mcp.ClientSession, uri string) (*resourceEntry, error) {
	c.cmu.RLock()
	e, gen := c.resources[uri], c.resGen
	meta, haveMeta := c.listMeta, c.listMeta != nil
	c.cmu.RUnlock()
	if e != nil {
		return e, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if !haveMeta {
		meta = listedUIMeta(ctx, cs)
	}
	cut := c.cut.Load()
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		oversize := tooLarge(err) || c.cut.Load() != cut
		if sessionBroken(err) || oversize {
			// A message over the limit ends the connection where it was
			// cut: the next use connects anew.
			c.markDead(cs)
		}
		if oversize {
			return &resourceEntry{refusal: sizeRefusal("the server's answer to resources/read is larger than the %d bytes read of one message (twice the HTML limit of %d bytes, and 1 MiB)",
				messageLimit(c.svc.maxResourceBytes()), c.svc.maxResourceBytes())}, nil
		}
		return nil, c.scrub(err)
	}
	e = c.check(uri, res.Contents, meta[uri])
	c.cmu.Lock()
	if c.resGen == gen {
		c.cache(uri, e)
		c.listMeta = meta
	}
	c.cmu.Unlock()
	return e, nil
}

// listedUIMeta reads resources/list for the _meta of entries that have
// _meta.ui. A server without resources/list still serves resources/read;
// the list only adds _meta.ui that the content may lack, so an error ends
// the reading without failing the view.
func listedUIMeta(ctx context.Context, cs *mcp.ClientSession) map[string]mcp.Meta {
	meta := map[string]mcp.Meta{}
	params := &mcp.ListResourcesParams{}
	for page, read := 0, 0; page < maxListPages && read < maxListedResources; page++ {
		res, err := cs.ListResources(ctx, params)
		if err != nil {
			break
		}
		for _, r := range res.Resources {
			if read++; read > maxListedResources {
				break
			}
			if r != nil && r.Meta["ui"] != nil {
				meta[r.URI] = r.Meta
			}
		}
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}
	return meta
}

// cache keeps e as the checked resource uri, pushing out other entries
// while the cache is over its bounds. c.cmu must be held.
func (c *serverConn) cache(uri string, e *resourceEntry) {
	if old := c.resources[uri]; old != nil {
		c.resBytes -= len(old.html)
		delete(c.resources, uri)
	}
	if c.resources == nil {
		c.resources = map[string]*resourceEntry{}
	}
	for k, old := range c.resources {
		if len(c.resources) < maxCachedResources && c.resBytes+len(e.html) <= maxCachedHTMLBytes {
			break
		}
		c.resBytes -= len(old.html)
		delete(c.resources, k)
	}
	c.resources[uri] = e
	c.resBytes += len(e.html)
}

// sizeRefusal is a "size" refusal that tells the operator which setting
// raises the limit.
func sizeRefusal(format string, args ...any) *mcpapps.RefusedError {
	return &mcpapps.RefusedError{Reason: mcpapps.ReasonSize,
		Detail: fmt.Sprintf(format, args...) + "; " + MaxHTMLSetting + " sets the limit"}
}

// check runs mcpapps' checks on a resource and prepares what each view of
// it needs: the HTML, its SHA-256 and the CSP.
func (c *serverConn) check(uri string, contents []*mcp.ResourceContents, listEntry mcp.Meta) *resourceEntry {
	html, err := mcpapps.CheckResource(uri, contents, c.svc.maxResourceBytes())
	if err != nil {
		var re *mcpapps.RefusedError
		if !errors.As(err, &re) {
			re = &mcpapps.RefusedError{Reason: mcpapps.ReasonContent, Detail: err.Error()}
		}
		if re.Reason == mcpapps.ReasonSize {
			re = sizeRefusal("%s", re.Detail)
		}
		return &resourceEntry{refusal: re}
	}
	var itemMeta mcp.Meta
	if len(contents) > 0 && contents[0] != nil {
		itemMeta = contents[0].Meta
	}
	ui, err := mcpapps.ReadResourceUI(itemMeta, listEntry)
	if err != nil {
		return &resourceEntry{refusal: &mcpapps.RefusedError{Reason: mcpapps.ReasonContent, Detail: "malformed _meta.ui: " + err.Error()}}
	}
	return &resourceEntry{html: html, sha: mcpapps.HTMLSHA256(html), ui: ui, csp: mcpapps.BuildCSP(ui.CSP)}
}
