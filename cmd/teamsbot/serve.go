package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/access"
	"teamsbot/access/graph"
	"teamsbot/admin"
	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/telemetry"
	"teamsbot/internal/web"
	"teamsbot/internal/web/csp"
	"teamsbot/mcpauth"
	"teamsbot/playground"
	"teamsbot/signin"
	"teamsbot/triggers"
	"teamsbot/viewpage"
)

// shutdownGrace bounds the whole orderly shutdown; Teams gives up on a
// request after 15 s, so in-flight turns get most of it.
const shutdownGrace = 20 * time.Second

// certificateWarning is how long before the bot's certificate expires the
// start-up log warns of it.
const certificateWarning = 30 * 24 * time.Hour

// traceFlushGrace bounds exporting the last spans at shutdown: a collector
// that does not answer must not hold the service up.
const traceFlushGrace = 5 * time.Second

// sweepEvery is how often expired views are removed; an expired view is
// refused on read long before the sweep comes.
const sweepEvery = time.Hour

// serve builds every part, listens, then starts the MCP servers, serves
// until ctx ends, then shuts down in the reverse order: stop taking
// requests, stop the scheduler, finish turns and triggered runs, close MCP
// sessions, close the store last. In local mode it tells the person at
// the terminal (stdout) where the playground is.
func serve(ctx context.Context, cfg config, env environment, stdout io.Writer, logger *slog.Logger) (err error) {
	getenv := env.get
	logger.Info("starting", cfg.logAttrs()...)
	// Go collects garbage each time the heap doubles. A turn allocates much
	// short-lived memory (MCP's JSON above all), and collecting at three
	// times the live heap instead takes about a tenth off a turn's CPU for
	// some more memory (docs/performance.md), as long as the live heap is
	// small; as it grows, less garbage is allowed (gctarget.go). GOGC,
	// when set, is the operator's choice and stays.
	if getenv("GOGC") == "" {
		debug.SetGCPercent(defaultGCPercent)
		stop := followLiveHeap(logger, gcTargetPeriod, gcScanned, debug.SetGCPercent)
		defer stop()
	}
	if getenv("GOMEMLIMIT") == "" {
		self, _ := os.ReadFile("/proc/self/cgroup")
		switch n, from, err := containerMemoryLimit(cgroupRoot, ownCgroup(string(self))); {
		case err != nil:
			logger.Warn("no soft memory limit: the container's limit cannot be read; set GOMEMLIMIT", "err", err)
		case n > 0:
			soft := softMemoryLimit(n)
			debug.SetMemoryLimit(soft)
			logger.Info("soft memory limit set from the container's", "limit_bytes", n, "soft_limit_bytes", soft, "from", from)
		}
	}
	// A certificate that runs out stops every reply and every group lookup
	// at once; a month's warning leaves time to upload the next one.
	if end := cfg.BotCredential.NotAfter(); !end.IsZero() && time.Until(end) < certificateWarning {
		logger.Warn("the bot's certificate expires soon: upload a new one to the app registration and set TICKETIQ_BOT_CERT_FILE to it",
			"expires", end.UTC().Format(time.RFC3339), "file", cfg.BotCredential.Path())
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	// The stop line is the last word of an orderly stop, written once every
	// part below has closed, the MCP sessions and then the store: whoever
	// reads it (an operator, a container's log) knows that the data folder
	// is free. Registered first, it runs last.
	defer func() {
		if err == nil {
			logger.Info("stopped")
		}
	}()

	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	defer func() { err = errors.Join(err, st.Close()) }()

	// Traces, when an operator configured them: the provider goes to each
	// part, none is installed globally. The spans still waiting are
	// exported once the turns have finished, before the store closes.
	tracing, err := telemetry.New(ctx, cfg.Traces, telemetry.Options{Version: version, Logger: logger.With("part", "telemetry")})
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushGrace)
		defer cancel()
		if err := tracing.Shutdown(fctx); err != nil {
			logger.Warn("the last spans were not exported", "err", err)
		}
	}()
	if unread := telemetry.Unread(slices.Collect(maps.Keys(env))); len(unread) > 0 {
		logger.Info("these OpenTelemetry variables are not read by the service, and do nothing here", "variables", unread)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// Group membership comes from Microsoft Graph with the bot's own app
	// registration (client credentials, one token per tenant); without one
	// (local mode) no group can be looked up, and a rule naming a group
	// fails closed.
	var groups access.Groups
	var groupNames admin.GroupNamer
	var personNames admin.PersonNamer
	if cfg.BotAppID != "" {
		gc, err := graph.New(graph.Options{
			BaseURL: cfg.GraphBaseURL, TokenURL: cfg.GraphTokenURL,
			ClientID: cfg.BotAppID, Credential: cfg.BotCredential,
			Logger: logger.With("part", "graph"),
		})
		if err != nil {
			return fmt.Errorf("graph: %w", err)
		}
		groups, groupNames, personNames = gc, gc, gc
	}
	decide, err := access.New(access.Options{Store: st, Groups: groups, Logger: logger.With("part", "access")})
	if err != nil {
		return fmt.Errorf("access: %w", err)
	}

	// Servers reached as each person (auth: person) or as the service
	// (auth: service) go through the MCP authorization broker.
	var broker *mcpauth.Broker
	if usesAuth(cfg.Agents) {
		broker, err = mcpauth.New(mcpauth.Options{
			Store: st, PublicBaseURL: cfg.PublicBaseURL, DataDir: cfg.DataDir,
			AllowHTTP: cfg.Addr.Loopback(), Logger: logger.With("part", "mcpauth"),
			Servers: cfg.Agents.PersonServers(getenv),
		})
		if err != nil {
			return fmt.Errorf("MCP authorization: %w", err)
		}
	}
	agents, err := agent.New(ctx, cfg.Agents, agent.Options{
		Auth:        broker,
		ModelToken:  modelToken(ctx, cfg, logger),
		Store:       st,
		Access:      decide,
		Logger:      logger.With("part", "agent"),
		AppsEnabled: cfg.AppsEnabled,
		// The same limit bounds what a view's tool call returns, read by
		// the agent, so the page needs no limit of its own.
		MaxResourceBytes: cfg.MaxHTMLBytes,
		Getenv:           getenv,
		Registerer:       reg,
		TracerProvider:   tracing,
		Propagator:       tracing.Propagator,
		// The servers start once the service listens: two npx servers
		// take seconds, and liveness probes must be answered meanwhile.
		// A turn that comes first waits for them (agent.Options).
		Background: true,
		ElicitWait: cfg.ElicitWait,
	})
	if err != nil {
		return fmt.Errorf("agents: %w", err)
	}
	defer func() { err = errors.Join(err, agents.Close()) }()

	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	sweepDone := make(chan struct{})
	go func() { defer close(sweepDone); st.RunSweeper(sweepCtx, sweepEvery) }()
	defer func() { stopSweep(); <-sweepDone }()

	signIn, err := signin.New(ctx, signin.Options{
		Issuer:         cfg.OIDCIssuer,
		ClientID:       cfg.OIDCClientID,
		ClientSecret:   cfg.OIDCClientSecret,
		PublicBaseURL:  cfg.PublicBaseURL,
		DataDir:        cfg.DataDir,
		Loopback:       cfg.Addr.Loopback(),
		AllowedTenants: cfg.OIDCAllowedTenants,
		Logger:         logger.With("part", "signin"),
		Teams:          teamsSignIn(cfg),
		OnSignIn:       onSignIn(broker),
		APIScopes:      apiScopes(cfg),
	})
	if err != nil {
		return fmt.Errorf("sign-in: %w", err)
	}

	views, err := viewpage.New(viewpage.Options{
		Store:          st,
		Agent:          agents,
		SignIn:         signIn,
		Access:         decide,
		PublicBaseURL:  cfg.PublicBaseURL,
		SandboxBaseURL: cfg.SandboxBaseURL,
		DataDir:        cfg.DataDir,
		Logger:         logger.With("part", "viewpage"),
		Registerer:     reg,
		Teams:          teamsPage(cfg),
	})
	if err != nil {
		return fmt.Errorf("view page: %w", err)
	}

	teams, err := bot.New(bot.Options{
		AppID:              cfg.BotAppID,
		Credential:         cfg.BotCredential,
		TenantID:           cfg.BotTenantID,
		Cloud:              cfg.BotCloud,
		OpenIDMetadataURL:  cfg.BotOpenIDMetadataURL,
		TokenURL:           cfg.BotTokenURL,
		Agent:              agents,
		Store:              st,
		AllowedTenants:     cfg.BotAllowedTenants,
		Access:             decide,
		PublicBaseURL:      cfg.PublicBaseURL,
		StageView:          cfg.TeamsTab,
		Logger:             logger.With("part", "bot"),
		Registerer:         reg,
		Auth:               broker,
		ConnectWait:        broker.Wait(),
		MaxConcurrentTurns: cfg.MaxConcurrentTurns,
		ElicitWait:         cfg.ElicitWait,
		MaxPendingTurns:    cfg.MaxPendingTurns,
		TracerProvider:     tracing,
	})
	if err != nil {
		return fmt.Errorf("bot: %w", err)
	}

	runs, err := triggers.New(triggers.Options{
		Store: st, Bot: teams, Access: decide, Agents: agents.Agents(),
		PublicBaseURL: cfg.PublicBaseURL, Logger: logger.With("part", "triggers"), Registerer: reg,
	})
	if err != nil {
		return fmt.Errorf("triggers: %w", err)
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = web.ErrorHandler(logger, viewpage.Classify)
	e.Use(middleware.Recover())
	// The request log line, and the error handler's, carry the request's
	// trace; the probes make no spans.
	var requestTraces trace.TracerProvider // nil: no spans, at no cost
	if tracing.On() {
		requestTraces = tracing
	}
	e.Use(web.Trace(requestTraces, tracing.Propagator, "/healthz", "/readyz", "/metrics"))
	e.Use(web.RequestLog(logger))
	storeReady := st.Ping
	if cfg.DatabaseURL != "" {
		// A database can go away under a running service; a bbolt file
		// cannot. Readiness reports the gate's last probe.
		gate := &databaseGate{}
		storeReady = func(context.Context) error { return gate.err() }
		e.Use(gate.middleware)
		gateCtx, stopGate := context.WithCancel(context.WithoutCancel(ctx))
		gateDone := make(chan struct{})
		go func() { defer close(gateDone); gate.watch(gateCtx, st, logger.With("part", "store")) }()
		defer func() { stopGate(); <-gateDone }()
	}
	healthz := func(c echo.Context) error { return c.String(http.StatusOK, "ok\n") }
	var readyLog readinessLog
	readyz := func(c echo.Context) error {
		rctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
		defer cancel()
		agentsErr := agents.Ready(rctx)
		err := errors.Join(storeReady(rctx), agentsErr)
		readyLog.note(logger, err, time.Now())
		switch {
		case errors.Is(agentsErr, agent.ErrStarting):
			// Which servers are still starting is the operator's
			// configuration, not the servers' own words: fit to show.
			return c.String(http.StatusServiceUnavailable, "not ready: MCP servers still starting: "+strings.Join(agents.Starting(), ", ")+"\n")
		case err != nil:
			return c.String(http.StatusServiceUnavailable, "not ready\n")
		}
		return c.String(http.StatusOK, "ready\n")
	}
	metrics := echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	// Liveness stays on the main listener in every case: it says only that
	// the process answers. Readiness and metrics move to the internal
	// listener when there is one, out of reach of whoever reaches the
	// public address.
	e.GET("/healthz", healthz)
	if cfg.MetricsAddr.IsZero() {
		e.GET("/readyz", readyz)
		e.GET("/metrics", metrics)
	}
	teams.Register(e)
	signIn.Register(e)
	views.Register(e)
	runs.Register(e)
	console, err := admin.New(admin.Options{
		Store: st, Access: decide, SignIn: signIn, Groups: groupNames, People: personNames, Triggers: runs, Connections: broker,
		Agents: agents.Agents(), Rules: consoleRules(cfg), Servers: consoleServers(cfg), AppsEnabled: cfg.AppsEnabled,
		Logger: logger.With("part", "admin"),
	})
	if err != nil {
		return fmt.Errorf("admin console: %w", err)
	}
	console.Register(e)
	if broker != nil {
		pages, err := broker.NewPages(func(r *http.Request) (mcpauth.Signed, error) {
			ss, err := signIn.Session(r)
			return mcpauth.Signed{TenantID: ss.TenantID, UserID: ss.UserID, Name: ss.Name}, err
		}, signIn.SignInAsURL)
		if err != nil {
			return fmt.Errorf("MCP authorization pages: %w", err)
		}
		pages.FreshSignIn(cfg.OIDCIssuer != "")
		pages.Register(e)
	}

	// The listener comes before the playground, which posts to the
	// service's own address (a port of 0 is chosen here).
	ln, err := net.Listen("tcp", cfg.Addr.String())
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	homeCSP := csp.New().Add("default-src").String()
	home := func(c echo.Context) error {
		// People who reach the bare address learn what it is and where views
		// come from; nothing here needs a session.
		c.Response().Header().Set("Content-Security-Policy", homeCSP)
		return c.String(http.StatusOK, homeText)
	}
	var pg *playground.Handler
	if cfg.Playground {
		pg, err = newPlayground(ln, playground.Options{
			Bot: teams, Store: st, SignIn: signIn, Views: views,
			BotName: agentName(agents), HostVersion: version,
			Logger: logger.With("part", "playground"),
		})
		if err != nil {
			ln.Close()
			return fmt.Errorf("playground: %w", err)
		}
		defer pg.Close()
		pg.Register(e)
		home = pg.Home
	}
	e.GET("/", home)
	srv := &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      cfg.writeTimeout(),
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if pg != nil {
		// The playground's long polls end when shutdown begins, rather
		// than hold it up for their 25 seconds.
		srv.RegisterOnShutdown(pg.Close)
	}
	serveErr := make(chan error, 2)
	go func() { serveErr <- srv.Serve(ln) }()
	if !cfg.MetricsAddr.IsZero() {
		var backup echo.HandlerFunc
		if cfg.DatabaseURL == "" {
			backup = backupHandler(st, logger)
		}
		internal, iln, err := internalServer(cfg.MetricsAddr, cfg.Pprof, logger, healthz, readyz, metrics, backup)
		if err != nil {
			_ = srv.Close()
			return err
		}
		go func() { serveErr <- internal.Serve(iln) }()
		defer func() {
			// Nothing long-lived is served here: a short grace is enough.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = internal.Shutdown(sctx)
		}()
		serves := "/healthz /readyz /metrics"
		if backup != nil {
			serves += " /backup"
		}
		logger.Info("internal listener", "addr", iln.Addr().String(), "serves", serves)
	}
	// Now that probes are answered, the MCP servers start; /readyz says
	// which are still starting.
	agents.Start(ctx)
	// The scheduler starts with the service: its first pass runs, once
	// each, the triggers whose due times passed while it was down.
	schedCtx, stopScheduler := context.WithCancel(context.WithoutCancel(ctx))
	schedDone := make(chan struct{})
	go func() { defer close(schedDone); runs.RunScheduler(schedCtx) }()
	defer func() { stopScheduler(); <-schedDone }()
	announce(cfg, ln.Addr().String(), signInInForce(cfg, signIn), pg != nil, stdout, logger)

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("http shutdown", "err", err)
	}
	// No new scheduled run starts; those under way finish with the turns,
	// or are cancelled with them when the grace ends.
	stopScheduler()
	if err := teams.Shutdown(sctx); err != nil {
		logger.Warn("turns still running at shutdown", "err", err)
	}
	<-schedDone
	return nil
}

// signInInForce names the sign-in the service really offers: "off",
// "local development" or "Entra ID (issuer ...)".
func signInInForce(cfg config, s *signin.Service) string {
	switch {
	case s.Off():
		return "off"
	case s.Local():
		return "local development"
	}
	return "Entra ID (issuer " + netaddr.RedactURLCredentials(cfg.OIDCIssuer) + ")"
}

// announce logs where the service listens, where people reach it and the
// sign-in in force; in local mode it also tells the person at the
// terminal where the playground is, in plain words on stdout (the log
// lines are JSON on stderr).
func announce(cfg config, addr, signIn string, playgroundOn bool, stdout io.Writer, logger *slog.Logger) {
	attrs := []any{"addr", addr, "public_base_url", cfg.PublicBaseURL.String(), "signin", signIn}
	local := "http://" + addr
	if playgroundOn {
		attrs = append(attrs, "playground", local+playground.Path)
	}
	logger.Info("listening", attrs...)
	// A loopback public base URL on another port than the listener's
	// sends people, and the sign-in's redirects, to some other program.
	if _, port, err := net.SplitHostPort(addr); err == nil && cfg.PublicBaseURL.Loopback() && originPort(cfg.PublicBaseURL) != port {
		logger.Warn("the public base URL is not this listener: links in cards and the sign-in go there; set TICKETIQ_PUBLIC_BASE_URL to the address people open",
			"public_base_url", cfg.PublicBaseURL.String(), "addr", addr)
	}
	if playgroundOn {
		fmt.Fprintf(stdout, "teamsbot is listening on %s: open %s%s to talk to the bot (Ctrl-C stops it)\n", local, local, playground.Path)
	}
}

// originPort is the port of an origin, its scheme's when it names none.
func originPort(o netaddr.Origin) string {
	if _, port, err := net.SplitHostPort(o.Host()); err == nil {
		return port
	}
	if o.HTTPS() {
		return "443"
	}
	return "80"
}

// cgroupRoot is where the container's cgroup files are (memlimit.go).
const cgroupRoot = "/sys/fs/cgroup"

// defaultGCPercent is the garbage collector's target unless GOGC is set.
const defaultGCPercent = 200

// internalServer is the listener of TICKETIQ_METRICS_ADDR: liveness,
// readiness and metrics, for the operator's probes and scraper only; a
// copy of the bbolt file when backup is not nil; and, when asked, Go's
// profiler.
func internalServer(addr netaddr.Listen, profiler bool, logger *slog.Logger, healthz, readyz, metrics, backup echo.HandlerFunc) (*http.Server, net.Listener, error) {
	ie := echo.New()
	ie.HideBanner, ie.HidePort = true, true
	ie.Use(middleware.Recover())
	ie.GET("/healthz", healthz)
	ie.GET("/readyz", readyz)
	ie.GET("/metrics", metrics)
	if backup != nil {
		ie.GET("/backup", backup)
	}
	if profiler {
		// net/http/pprof's handlers, registered on this listener alone
		// rather than through the package's import side effect on
		// http.DefaultServeMux, which nothing here serves.
		ie.GET("/debug/pprof/", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
		ie.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
		ie.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
		ie.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
		ie.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
		ie.GET("/debug/pprof/:name", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	}
	ln, err := net.Listen("tcp", addr.String())
	if err != nil {
		return nil, nil, fmt.Errorf("listen on TICKETIQ_METRICS_ADDR: %w", err)
	}
	return &http.Server{
		Handler:           ie,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}, ln, nil
}

// homeText is the whole answer of GET /.
const homeText = `teamsbot is running.

This is the Microsoft Teams side of the agent: ask the bot in Teams, and open
the views in its answers with the Open button on the card.
`

// newPlayground builds the playground for the service listening on ln: its
// activities go to that address.
func newPlayground(ln net.Listener, o playground.Options) (*playground.Handler, error) {
	self, err := netaddr.ParseOrigin("http://" + ln.Addr().String())
	if err != nil {
		return nil, err
	}
	o.Self = self
	return playground.New(o)
}

// agentName is the name of the agent the bot serves (the first), as people
// @mention it.
func agentName(agents *agent.Service) string {
	if ids := agents.Agents(); len(ids) > 0 {
		if name, err := agents.AgentName(ids[0]); err == nil {
			return name
		}
	}
	return ""
}

// consoleRules are the configured data rules, as the admin console shows
// them.
// consoleServers are the configured MCP servers by name, as the console's
// permissions form shows them: a tenant allows permissions by server name,
// for every agent that has a server of that name.
func consoleServers(cfg config) []admin.Server {
	var out []admin.Server
	for _, a := range cfg.Agents.Agents {
		for _, s := range a.Servers {
			i := slices.IndexFunc(out, func(o admin.Server) bool { return o.Name == s.Name })
			if i < 0 {
				out = append(out, admin.Server{Name: s.Name})
				i = len(out) - 1
			}
			for _, p := range s.Permissions {
				if !slices.Contains(out[i].Configured, p) {
					out[i].Configured = append(out[i].Configured, p)
				}
			}
		}
	}
	return out
}

func consoleRules(cfg config) []admin.Rules {
	var out []admin.Rules
	for _, a := range cfg.Agents.Agents {
		out = append(out, admin.Rules{Agent: a.ID, Deny: a.Rules.DenyTools, Redact: a.Rules.Redact})
	}
	return out
}

// readinessRepeat is how often an unchanged "not ready" is logged again.
const readinessRepeat = time.Minute

// readinessLog logs readiness when it changes, and an unchanged failure
// once a minute: anyone may ask /readyz, and a burst of requests while a
// server is down must not flood the log.
type readinessLog struct {
	mu     sync.Mutex
	last   string // "" while ready
	logged time.Time
}

func (r *readinessLog) note(logger *slog.Logger, err error, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil && r.last != "":
		r.last = ""
		logger.Info("ready again")
	case err == nil:
	case err.Error() != r.last || now.Sub(r.logged) >= readinessRepeat:
		r.last, r.logged = err.Error(), now
		logger.Warn("not ready", "err", err)
	}
}

// usesAuth reports a server reached as each person or as the service.
func usesAuth(c agent.Config) bool {
	for _, a := range c.Agents {
		for _, s := range a.Servers {
			if s.Auth == agent.AuthPerson || s.Auth == agent.AuthService {
				return true
			}
		}
	}
	return false
}

// onSignIn hands each Entra ID sign-in's assertion to the broker, which
// connects the person to the Entra servers on their behalf; nil without
// one.
func onSignIn(b *mcpauth.Broker) func(context.Context, signin.Session, string) {
	if b == nil {
		return nil
	}
	return func(ctx context.Context, s signin.Session, assertion string) {
		b.SignedIn(ctx, mcpauth.Person{TenantID: s.TenantID, UserID: s.UserID, Name: s.Name}, assertion)
	}
}

// apiScopes asks, at sign-in, for an access token of this service's own
// API when a server is connected on behalf of the person (entra: true):
// the on-behalf-of flow takes no ID token, and the sign-in's default
// access token is Microsoft Graph's.
func apiScopes(cfg config) []string {
	if cfg.OIDCIssuer == "" || cfg.OIDCClientID == "" {
		return nil
	}
	for _, s := range cfg.Agents.PersonServers(func(string) string { return "" }) {
		if s.Entra {
			return []string{signin.ApplicationIDURI(cfg.PublicBaseURL.Host(), cfg.OIDCClientID) + "/access_as_user"}
		}
	}
	return nil
}

// modelToken gives a model configured with entra: true (Azure OpenAI) a
// token of the bot's app registration for the scope it asks, through the
// one client-credentials token source (cached, renewed early, fetched
// once for concurrent runs); nil without an app registration.
func modelToken(ctx context.Context, cfg config, logger *slog.Logger) func(context.Context, string) (string, error) {
	if cfg.BotAppID == "" || cfg.BotCredential.IsZero() {
		return nil
	}
	tokenURL := cfg.BotTokenURL
	if tokenURL == "" {
		tokenURL = cfg.BotCloud.TokenURL(cfg.BotTenantID)
	}
	var mu sync.Mutex
	sources := map[string]*clientcred.Source{}
	return func(rctx context.Context, scope string) (string, error) {
		mu.Lock()
		src := sources[scope]
		if src == nil {
			var err error
			src, err = clientcred.NewSource(clientcred.SourceOptions{
				TokenURL: tokenURL, ClientID: cfg.BotAppID, Credential: cfg.BotCredential, Scope: scope,
				Life: context.WithoutCancel(ctx), Logger: logger.With("part", "model-token"),
			})
			if err != nil {
				mu.Unlock()
				return "", err
			}
			sources[scope] = src
		}
		mu.Unlock()
		tok, err := src.TokenContext(rctx)
		if err != nil {
			return "", err
		}
		return tok.AccessToken, nil
	}
}
