// Package agent runs an agent for a person: it connects the agent's MCP
// servers (stdio subprocesses, Streamable HTTP, and built-in servers in
// memory), offers the model the tools it may call, runs the model, sends
// every tool call (the model's and a view's) through one governed path
// (policy, data rules, per-server timeout, audit), and turns calls of tools
// that name a ui:// resource into views (the MCP Apps extension).
//
// What a run made (the run record with its notes, the views with their
// HTML, and the audit records) is written with one store.SaveRun at the end
// of the run, so a burst of runs shares the store's commits.
//
// The package does not decide who may open a view (access and viewpage do),
// does not render answers (cards does) and does not check the resource
// itself (mcpapps does); it only applies those decisions on the way.
//
// The model never sees a view's HTML: it reads the ordinary tool result,
// after the data rules have redacted it.
//
// An MCP server is not trusted. What it sends is bounded before the service
// keeps or shows it: its tool list (count, pages, names), the resources
// cached from it, a view's HTML and data, and its text (error messages,
// URIs, titles) in notes, answers, audit records and metric labels. A tool
// whose _meta.ui is malformed is offered to nobody, and a server's URL is
// shown by its host only, as it may carry a secret.
//
// What a person reads of a failure (a run note, a failed call, the text
// the model is given of it) is in the person's words with a reference; the
// error's text is for operators only (problems.go).
//
// The files: agent.go (the service and what a run returns), run.go (a
// run), modelcall.go (the model's tool calls), govern.go (the governed
// path and the audit record of a call), redact.go (data rules), views.go
// (making a view), viewcall.go (a view's calls), conn.go, tools.go and
// resources.go (an MCP server's connection, tool list and resources),
// memconn.go and limits.go (in-memory sessions, message bounds),
// model.go, builtin.go and openai.go (the models), config.go,
// configfile.go and configcheck.go (the configuration), metrics.go and
// problems.go.
package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"teamsbot/access"
	"teamsbot/internal/telemetry"
	"teamsbot/mcpapps"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// Errors of the governed path.
var (
	// ErrNotFound: unknown agent, server or tool.
	ErrNotFound = errors.New("agent: not found")
	// ErrToolNotAllowed: a view asked for a tool whose visibility lacks "app",
	// or a tool of another server.
	ErrToolNotAllowed = errors.New("agent: tool not allowed")
	// ErrDenied: the policy or a data rule denied the call.
	ErrDenied = errors.New("agent: denied")
	// ErrModel: the model could not answer (bad key, server error, timeout).
	ErrModel = errors.New("agent: model failed")
	// ErrUnavailable: an MCP server cannot be reached.
	ErrUnavailable = errors.New("agent: server unavailable")
	// ErrBadRequest: the request itself is malformed (no tenant, arguments
	// that are not a JSON object).
	ErrBadRequest = errors.New("agent: bad request")
	// ErrStarting: Ready was asked while MCP servers are still being
	// connected for the first time (Options.Background).
	ErrStarting = errors.New("MCP servers still starting")
)

// Person is who a run is for. UserID empty means a run with no person (a
// trigger); TenantID is always set.
type Person struct {
	TenantID string // Entra tenant id (tid)
	UserID   string // Entra object id (oid), Teams' from.aadObjectId
	Name     string // for display only, never for decisions
	// Roles are the Entra app roles of the person's sign-in token, for
	// access decisions; a message from Teams carries none.
	Roles []string
}

// Request asks for one run.
type Request struct {
	Person  Person
	AgentID string // empty: the first agent
	Text    string
	// Conversation is the conversation the run answers in (the
	// activity's conversation id: a personal chat, a group chat, a
	// channel thread): the run reads its earlier turns and adds its own.
	// Empty: a run with no memory.
	Conversation string
	// Shared says the conversation has several people (a group chat, a
	// channel): each message the model reads says who wrote it.
	Shared bool
	// Stream, when set, hears the answer's words as the model writes
	// them (deltas, in order, on the run's goroutine, quickly).
	Stream func(delta string)
	// Connect, when set, asks the person to connect a server reached with
	// their own authorization (auth: person) that they have not
	// connected; the call waits meanwhile. Nil (a run without a person,
	// a script's run): such servers are not asked for.
	Connect mcpauth.Prompter
	// Progress, when set, hears of each tool call the run is about to
	// make, so that the person can be told what is going on. It is called
	// on the run's goroutine and must return quickly.
	Progress func(Step)
	// Elicit, when set, asks the person what a server asks during one of
	// the run's tool calls (elicitation); the call waits meanwhile. Nil
	// (a run without a person): such requests are declined at once, and
	// the run's notes say so.
	Elicit Elicitor
}

// Step is a tool call a run is about to make.
type Step struct {
	Server, Tool string
}

// Refusal is a view that was not made; the answer stands without it.
type Refusal struct {
	Server, Tool, ResourceURI string
	Reason                    string // scheme, mime, size, content, read (mcpapps.Reason*)
	// Ref is the reference under which the log, the run record and the
	// agent.mcp_app.refused audit record keep the checker's detail, which
	// may quote the server.
	Ref string
}

// ToolError is a tool call that failed (IsError result or transport error).
type ToolError struct {
	Server, Tool string
	// Message is what a person may read of the failure: the tool's own
	// error text for an IsError result, or, when the call itself failed,
	// words that say what failed, ending with the reference of the detail.
	Message string
}

// Answer is the outcome of a run.
type Answer struct {
	RunID   string
	AgentID string
	// Text is the model's answer; it never holds a view's HTML.
	Text string
	// Views are the views made, already stored; Refusals the views not
	// made; ToolErrors the calls that failed or were refused.
	Views      []store.View
	Refusals   []Refusal
	ToolErrors []ToolError
	// Notes say what the run left out and why (tools not offered to the
	// model, servers unavailable, rounds used up), one line each, in a
	// person's words: a note about a failure ends with the reference of
	// its detail, which only the log and the run record hold.
	Notes []string
	// Sources are the tools whose results the model read, each once, in
	// the order of their first call: what the answer relies on.
	Sources []Source
}

// Source is a tool whose result an answer relies on; ViewID names the view
// made of one of its calls, if any.
type Source struct {
	Server, Tool, ViewID string
}

// toolCall is who makes one tool call, for the access decision and the audit
// record.
type toolCall struct {
	person   Person
	agentID  string
	tenantID string // the tenant the agent runs for
	fromView bool
	viewID   string
	server   string
	tool     string
}

// Options configures New.
type Options struct {
	// Store receives runs, views and audit records; nil stores nothing.
	Store *store.Store
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Access decides every tool call with the tenant's Cedar policies (the
	// model's and the views'); nil decides none, for tests of the agent
	// alone. The service always sets it.
	Access *access.Service
	// AppsEnabled turns the MCP Apps extension on: advertised to servers,
	// app-only tools kept from the model, views made. Off: not advertised,
	// every tool offered, no views.
	AppsEnabled bool
	// MaxResourceBytes bounds a view's HTML, and separately its tool
	// arguments and result together, and what a view's tool call returns;
	// twice it and 1 MiB bound every message read from a server (a stdio
	// line, an HTTP body, one server-sent event). <= 0 means
	// mcpapps.DefaultMaxResourceBytes. MaxHTMLSetting sets it.
	MaxResourceBytes int
	// HTTPClient is the base for Streamable HTTP servers and the openai
	// model; its Transport is reused, its Timeout is not (a server's event
	// stream lives long). Nil means http.DefaultTransport.
	HTTPClient *http.Client
	// ModelToken gives an Entra ID access token for scope (the service's
	// own, from its app registration's credential): an openai model with
	// entra: true asks it for CognitiveServicesScope before each request
	// and sends it instead of a key. Nil: such a model is a configuration
	// mistake.
	ModelToken func(ctx context.Context, scope string) (string, error)
	// Getenv reads ${VAR} values and model keys; nil means os.Getenv.
	Getenv func(string) string
	// Registerer receives the package's metrics; nil registers none.
	Registerer prometheus.Registerer
	// ConnectTimeout bounds connecting one server; zero means 15s.
	ConnectTimeout time.Duration
	// ElicitWait is how long a tool call waits for the person's answer to
	// what its server asks (elicitation) before the answer is cancel;
	// zero means DefaultElicitWait.
	ElicitWait time.Duration
	// RetryInterval is the least time between two attempts to connect a
	// server that failed; zero means 5s.
	RetryInterval time.Duration
	// ReadyCacheFor is how long Ready keeps its answer: anyone who reaches
	// /readyz may ask, and each check may start a stdio child or open a
	// connection; zero means 3s.
	ReadyCacheFor time.Duration
	// Auth reaches servers as each person (auth: person) and as the
	// service (auth: service); required when a server says either.
	Auth *mcpauth.Broker
	// Builtins adds in-memory servers that a ServerConfig.Builtin may name,
	// beside "demo". Each call must return a new server.
	Builtins map[string]func() *mcp.Server
	// TracerProvider makes the spans of model calls, tool calls and run
	// commits; nil makes none.
	TracerProvider trace.TracerProvider
	// Propagator puts the trace context on the requests to Streamable
	// HTTP servers and to openai models; nil puts none.
	Propagator propagation.TextMapPropagator
	// Background makes New return before any server is connected; Start
	// then connects them (the built-in ones before it returns, the others
	// in the background), so that a service can listen, and answer its
	// liveness probe, while a slow server starts. Until
	// a server's first attempt ends, Ready answers ErrStarting naming it,
	// and a run or a view's call that needs it waits for that attempt,
	// as long as its context allows.
	Background bool
}

// Service runs agents. It is safe for concurrent use.
type Service struct {
	opts    Options
	log     *slog.Logger
	tracer  trace.Tracer
	now     func() time.Time
	getenv  func(string) string
	agents  []*agentRuntime
	byID    map[string]*agentRuntime
	conns   []*serverConn
	metrics *metrics
	ready   readiness
	// decoded keeps the decoded messages of conversations' earlier turns.
	decoded *decodedTurns

	// startOnce guards Start; stopStart ends the first attempts, which
	// started waits for, when the service closes first.
	startOnce sync.Once
	stopStart context.CancelFunc
	started   sync.WaitGroup
	closeOnce sync.Once
}

// readiness is Ready's last answer, kept for ReadyCacheFor, and the check
// under way, shared by every caller (golang.org/x/sync/singleflight).
type readiness struct {
	check singleflight.Group

	mu  sync.Mutex
	at  time.Time // when err was found; zero before the first check
	err error
}

// agentRuntime is one configured agent, ready to run.
type agentRuntime struct {
	cfg       AgentConfig
	model     Model
	maxRounds int
	servers   []*serverConn
	byName    map[string]*serverConn
	rules     dataRules
}

// New builds the service and connects every agent's MCP servers at once,
// each within Options.ConnectTimeout. A server that cannot be reached is
// logged and tried again on later use; it does not stop the service, but
// Ready reports it. Configuration mistakes are errors.
func New(ctx context.Context, cfg Config, opts Options) (*Service, error) {
	s := &Service{opts: opts, log: opts.Logger, now: opts.Now, getenv: opts.Getenv, decoded: newDecodedTurns(decodedTurnsMax),
		tracer: telemetry.Tracer(opts.TracerProvider, "teamsbot/agent")}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.getenv == nil {
		s.getenv = osGetenv
	}
	if s.opts.ConnectTimeout <= 0 {
		s.opts.ConnectTimeout = 15 * time.Second
	}
	if s.opts.RetryInterval <= 0 {
		s.opts.RetryInterval = 5 * time.Second
	}
	if s.opts.ReadyCacheFor <= 0 {
		s.opts.ReadyCacheFor = 3 * time.Second
	}
	known := func(name string) bool {
		_, ok := opts.Builtins[name]
		return ok || name == BuiltinDemo
	}
	if err := configErrors(cfg.validate(known)); err != nil {
		return nil, fmt.Errorf("agent: config: %w", err)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s.metrics = m
	s.byID = make(map[string]*agentRuntime, len(cfg.Agents))
	for _, ac := range cfg.Agents {
		a := &agentRuntime{cfg: ac, byName: map[string]*serverConn{}}
		a.rules = compileRules(ac.Rules)
		a.model, a.maxRounds, err = s.newModel(ac)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ac.ID, err)
		}
		for j, sc := range ac.Servers {
			c := newServerConn(s, ac.ID, sc)
			if err := s.setUpAuth(c, fmt.Sprintf("agents[%s].servers[%d] (%s)", ac.ID, j, sc.Name)); err != nil {
				return nil, fmt.Errorf("agent: config: %w", err)
			}
			a.servers = append(a.servers, c)
			a.byName[sc.Name] = c
			s.conns = append(s.conns, c)
		}
		s.agents = append(s.agents, a)
		s.byID[ac.ID] = a
	}

	if !opts.Background {
		s.Start(ctx)
		s.started.Wait()
	}
	return s, nil
}

// Start connects every server, each within Options.ConnectTimeout: the
// built-in ones (in memory, a matter of microseconds) before it returns,
// so that a service running only those is ready as soon as it listens,
// and the others in the background. Only the first call does anything.
// A server that cannot be reached is logged and tried again on later use;
// it does not stop the service, but Ready reports it.
func (s *Service) Start(ctx context.Context) {
	s.startOnce.Do(func() {
		ctx, s.stopStart = context.WithCancel(ctx)
		start := func(c *serverConn) {
			if err := c.start(ctx); err != nil {
				s.log.Warn("MCP server not connected; will retry", "agent", c.agentID, "server", c.name, "err", err)
			} else {
				s.log.Info("MCP server connected", "agent", c.agentID, "server", c.name)
			}
		}
		for _, c := range s.conns {
			if c.builtin != nil {
				start(c)
			} else {
				s.started.Go(func() { start(c) })
			}
		}
	})
}

// Starting names the servers whose first attempt to connect has not
// ended yet ("agent/server" when there are several agents); none once
// every server was tried.
func (s *Service) Starting() []string {
	var out []string
	for _, c := range s.conns {
		select {
		case <-c.firstTry:
		default:
			name := c.name
			if len(s.agents) > 1 {
				name = c.agentID + "/" + c.name
			}
			out = append(out, name)
		}
	}
	return out
}

// Agents lists the configured agent ids, the first (the bot's) first.
func (s *Service) Agents() []string {
	ids := make([]string, len(s.agents))
	for i, a := range s.agents {
		ids[i] = a.cfg.ID
	}
	return ids
}

// AgentName returns an agent's display name; ErrNotFound when unknown.
func (s *Service) AgentName(id string) (string, error) {
	a, err := s.agent(id)
	if err != nil {
		return "", err
	}
	return a.cfg.DisplayName(), nil
}

func (s *Service) agent(id string) (*agentRuntime, error) {
	if id == "" {
		if len(s.agents) == 0 {
			return nil, fmt.Errorf("%w: no agents", ErrNotFound)
		}
		return s.agents[0], nil
	}
	a, ok := s.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: agent %q", ErrNotFound, id)
	}
	return a, nil
}

// Ready reports whether every MCP server is reachable: each is connected
// and answers a ping. A server that failed is tried again only after
// RetryInterval, as on any other use. The answer is kept for
// ReadyCacheFor, and callers that ask while a check is under way share
// it: readiness is asked by anyone who reaches /readyz, and must not
// become a way to start children or open connections at will. A caller
// whose ctx ends first gets ErrUnavailable; the check goes on for the
// next.
func (s *Service) Ready(ctx context.Context) error {
	if starting := s.Starting(); len(starting) > 0 {
		// Nothing to ask yet: the first attempts are under way.
		return fmt.Errorf("%w: %s", ErrStarting, strings.Join(starting, ", "))
	}
	r := &s.ready
	r.mu.Lock()
	if !r.at.IsZero() && s.now().Sub(r.at) < s.opts.ReadyCacheFor {
		err := r.err
		r.mu.Unlock()
		return err
	}
	r.mu.Unlock()
	// The check belongs to every caller waiting for it, not to the first
	// one: it is bounded by the connect timeout, not by ctx.
	check := r.check.DoChan("", func() (any, error) {
		return nil, s.checkReady(context.WithoutCancel(ctx))
	})
	select {
	case res := <-check:
		return res.Err
	case <-ctx.Done():
		return fmt.Errorf("%w: readiness: %w", ErrUnavailable, ctx.Err())
	}
}

// checkReady pings every server, records the answer for Ready and returns
// it.
func (s *Service) checkReady(ctx context.Context) error {
	// Connecting and pinging are each bounded by ConnectTimeout.
	ctx, cancel := context.WithTimeout(ctx, 2*s.opts.ConnectTimeout+time.Second)
	defer cancel()
	errs := make([]error, len(s.conns))
	var wg sync.WaitGroup
	for i, c := range s.conns {
		wg.Go(func() { errs[i] = c.ping(ctx) })
	}
	wg.Wait()
	err := errors.Join(errs...)
	r := &s.ready
	r.mu.Lock()
	r.err, r.at = err, s.now()
	r.mu.Unlock()
	return err
}

// Close closes every MCP session; stdio children are asked to exit and
// terminated if they do not.
func (s *Service) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		s.startOnce.Do(func() {}) // no Start after Close
		if s.stopStart != nil {
			s.stopStart()
		}
		s.started.Wait()
		errs = make([]error, len(s.conns))
		var wg sync.WaitGroup
		for i, c := range s.conns {
			wg.Go(func() { errs[i] = c.close() })
		}
		wg.Wait()
	})
	return errors.Join(errs...)
}

// maxResourceBytes is Options.MaxResourceBytes with its default.
func (s *Service) maxResourceBytes() int {
	if s.opts.MaxResourceBytes > 0 {
		return s.opts.MaxResourceBytes
	}
	return mcpapps.DefaultMaxResourceBytes
}

// newID returns a URL-safe id of 26 characters: the time in milliseconds
// in 10 characters that sort as the time does (base32hex, whose digits are
// in ASCII order), then 96 random bits. The store keys views and runs by
// id: ids made one after another land side by side at the end of its
// B+tree, so a commit of many new views writes a few pages rather than a
// page for each, and its fsyncs are that much shorter. The random part
// alone keeps an id unguessable.
func newID() string {
	return idAt(time.Now())
}

// idAt is newID for the time t.
func idAt(t time.Time) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	ms := uint64(max(t.UnixMilli(), 0))
	var id [10 + 16]byte
	for i := 9; i >= 0; i-- {
		id[i] = idClock[ms&31]
		ms >>= 5
	}
	base64.RawURLEncoding.Encode(id[10:], b[:])
	return string(id[:])
}

// idClock is base32hex in lower case: digits, then letters, in ASCII order.
const idClock = "0123456789abcdefghijklmnopqrstuv"

// setUpAuth checks what a server's authorization needs of the service
// and makes the handler of an auth: service server.
func (s *Service) setUpAuth(c *serverConn, where string) error {
	if c.cfg.Auth != AuthPerson && c.cfg.Auth != AuthService {
		return nil
	}
	if s.opts.Auth == nil {
		return fmt.Errorf("%s: auth %s needs the service's MCP authorization (a data folder and a public address)", where, c.cfg.Auth)
	}
	if c.cfg.ClientSecretEnv != "" && c.clientSecret == "" {
		return fmt.Errorf("%s: clientSecretEnv %s: the variable is not set", where, c.cfg.ClientSecretEnv)
	}
	if c.cfg.Auth == AuthService {
		h, err := s.opts.Auth.ServiceHandler(c.authServer())
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		c.serviceAuth = h
	}
	return nil
}
