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

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/telemetry"
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

	// clientSecret is the secret of ServerConfig.ClientSecretEnv;
	// serviceAuth the handler of an auth: service server.
	clientSecret string
	serviceAuth  auth.OAuthHandler
	// pmu guards personal, each person's session with an auth: person
	// server, by tenant and user id.
	pmu      sync.Mutex
	personal map[string]*personal

	// emu guards calls, the calls under way that a server's request for
	// the person's input may belong to (by token), and urls, the URL mode
	// requests waiting for their completion (by the server's id).
	emu   sync.Mutex
	calls map[string]*elicitCall
	urls  map[string]*urlWaiter
}

func newServerConn(s *Service, agentID string, cfg ServerConfig) *serverConn {
	timeout, _ := parseTimeout(cfg.Timeout, DefaultServerTimeout) // validated in New
	allowed, _ := mcpapps.ParsePermissions(cfg.Permissions)       // validated in New
	c := &serverConn{svc: s, agentID: agentID, name: cfg.Name, cfg: cfg, timeout: timeout, allowed: allowed, firstTry: make(chan struct{}),
		personal: map[string]*personal{}}
	if cfg.ClientSecretEnv != "" {
		c.clientSecret = s.getenv(cfg.ClientSecretEnv)
	}
	switch {
	case cfg.Builtin == BuiltinDemo && s.opts.Builtins[BuiltinDemo] == nil:
		c.builtin = demo.New(demo.Options{Now: s.opts.Now, Logger: s.log.With("server", cfg.Name)})
	case cfg.Builtin != "":
		c.builtin = s.opts.Builtins[cfg.Builtin]()
	}
	return c
}

// client makes the MCP client of one session; its handlers drop the caches
// when the server says its lists changed. ask declares elicitation: a
// session shared by every tenant's runs always does (a tenant whose admin
// turned the server's questions off has them declined); a person's own
// session does unless their tenant's admin turned it off.
func (c *serverConn) client(ask bool) *mcp.Client {
	caps := &mcp.ClientCapabilities{}
	if c.svc.opts.AppsEnabled {
		caps.AddExtension(mcpapps.ExtensionID, map[string]any{"mimeTypes": []string{mcpapps.MIMEType}})
	}
	// Elicitation is declared in both modes; sampling never (its
	// requests are refused and audited by refuseSampling).
	opts := &mcp.ClientOptions{
		Logger:       c.svc.log.With("server", c.name),
		Capabilities: caps,
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.invalidateTools()
		},
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			c.invalidateResources()
		},
	}
	if ask {
		caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}
		opts.ElicitationHandler = c.elicit
		opts.ElicitationCompleteHandler = func(_ context.Context, req *mcp.ElicitationCompleteNotificationRequest) {
			c.completed(req.Session, req.Params.ElicitationID)
		}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "teamsbot", Version: "1.0.0"}, opts)
	cl.AddReceivingMiddleware(c.refuseSampling)
	return cl
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
			Endpoint:     c.cfg.URL,
			HTTPClient:   c.httpClient(),
			MaxRetries:   2,
			OAuthHandler: c.serviceAuth,
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
	// A request the server sends during a call names the call.
	base = &tagRelated{base: base, conn: c}
	// The server may join its spans to the call's (traceparent).
	base = telemetry.Transport(base, c.svc.opts.Propagator)
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
	if c.perPerson() {
		// Nothing to connect until a person asks.
		return nil
	}
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
	if c.perPerson() {
		return c.personalSession(ctx)
	}
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
	cs, err := c.client(true).Connect(ctx, related(t, c), so)
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
	if c.perPerson() {
		c.markPersonalDead(cs)
		return
	}
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
	if c.perPerson() {
		// Only a person can be connected to it; there is nothing to ping.
		return nil
	}
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
	c.closePersonal()
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
