// Package bot is the service's Bot Framework endpoint, POST /api/messages,
// which Microsoft Teams talks to through the Bot Connector.
//
// It authenticates each request (the Bot Connector's signed JWT, or, with no
// app id configured, loopback callers only), answers within Teams' 15
// seconds, runs the agent for the person who wrote in the background, and
// sends the answer as Adaptive Cards through the Bot Connector REST API. It
// keeps each conversation's reference in the store for later proactive sends,
// and the ids of each run's answer cards, so that UpdateAnswer can replace
// them later. RunTriggered runs the agent for nobody and posts the answer
// proactively (package triggers decides when); a conversation the app has
// left (uninstalled, or a 403 from the Bot Connector) is forgotten and its
// triggers paused.
//
// It owns neither card layout (package cards), nor runs and their MCP
// servers (package agent), nor storage (package store): it chooses which
// card to send and to whom, and keeps only the retry filter in memory. It
// uses the msbotbuilder-go schema types and its activity dispatch
// (activity.HandlerFuncs and TurnContext), and not the library's adapter:
// its request parsing, token validator and connector client are unsafe or
// lose what a turn needs (see serve, Validator and the connector type), so
// this package has its own.
//
// Inbound authentication follows "Authenticate requests from the Bot
// Connector service to your bot"; outbound calls follow "Bot Framework REST
// API reference: Conversations" (API reference - Bot Service) and use a
// client-credentials token for Scope from TokenURL.
//
// Trust in a serviceUrl: in authenticated mode the activity's serviceUrl must
// equal the signed serviceurl claim, so only the Bot Connector can choose
// where the bot's token is sent; it must also be https. In local mode no
// token is ever sent, and loopback http is allowed.
package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/retry"
	"teamsbot/internal/telemetry"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// Path is where the Bot Connector posts activities; the Azure Bot
// resource's messaging endpoint is https://<host>/api/messages.
const Path = "/api/messages"

// Defaults of Options.
const (
	// DefaultWorkingAfter is how long a run may take before the "working on
	// it" card: "a couple of seconds", well inside Teams' patience.
	DefaultWorkingAfter = 2 * time.Second
	// DefaultStreamAfter is how long a run in a personal chat must have
	// taken before the answer's first words open a streaming message: a
	// real model's first words come later than that (the stream then opens
	// at once), and an answer ready sooner goes out as one message, not a
	// stream opened and closed in the same breath.
	DefaultStreamAfter = 300 * time.Millisecond
	// DefaultTypingAfter is how long a run may take before the typing
	// indicator is sent. An answer quicker than this needs no sign that
	// the bot heard, and the indicator would cost a connector call from
	// the conversation's and the tenant's rate limits for nothing.
	DefaultTypingAfter = 250 * time.Millisecond
	// DefaultMaxConcurrentTurns bounds agent runs at once; more wait for a
	// slot, so a burst cannot exhaust MCP servers or the model.
	DefaultMaxConcurrentTurns = 64
	// DefaultMaxPendingTurns bounds turns accepted but not finished, and so
	// the goroutines and memory they hold; past it Teams is asked to retry.
	DefaultMaxPendingTurns = 2048
	// DefaultMaxBodyBytes bounds a request body: Teams' activities are far
	// smaller than 256 KB.
	DefaultMaxBodyBytes = 256 << 10
	// DefaultTurnTimeout bounds one turn, run and sends included.
	DefaultTurnTimeout = 2 * time.Minute
	// dedupTTL outlasts every retry Teams makes of one activity.
	dedupTTL = 15 * time.Minute
	// dedupMax bounds the memory the retry filter takes.
	dedupMax = 50000
	// sendTimeout bounds a short send outside a turn (welcome, refusal).
	sendTimeout = 30 * time.Second
)

// Errors of the endpoint.
var (
	// ErrBadActivity means the request body is not an activity the bot can
	// read or answer (400).
	ErrBadActivity = errors.New("bot: bad activity")
	// ErrBusy means too many turns are waiting; the endpoint answers 503 and
	// Teams retries.
	ErrBusy = errors.New("bot: too many turns in flight")
	// ErrClosed means the bot is shutting down and takes no new turns (503).
	ErrClosed = errors.New("bot: shutting down")
)

// Options configures New. Agent is required; everything else has a default.
type Options struct {
	// AppID and TenantID are the bot's Entra app registration
	// (TICKETIQ_BOT_APP_ID, TICKETIQ_BOT_TENANT_ID). An empty AppID is
	// local mode: unauthenticated activities from loopback only, and no
	// token sent with replies.
	AppID, TenantID string
	// Credential proves the app registration to the token endpoint: its
	// client secret, certificate or federated token file. Required with an
	// AppID.
	Credential clientcred.Credential
	// Cloud is Microsoft's cloud the bot is registered in (CloudNamed);
	// the zero value is the public cloud.
	Cloud Cloud
	// OpenIDMetadataURL is the Bot Framework OpenID metadata; empty means
	// the cloud's.
	OpenIDMetadataURL string
	// TokenURL is the client-credentials token endpoint; empty means
	// Cloud.TokenURL(TenantID).
	TokenURL string
	// Agent runs the turns.
	Agent *agent.Service
	// AgentID is the agent the bot serves; empty means the first one.
	AgentID string
	// Store keeps conversation references and where each answer went; nil
	// keeps none, and then nothing can be sent proactively or updated.
	Store *store.Store
	// AllowedTenants are the Entra tenants whose messages make runs
	// (TICKETIQ_BOT_ALLOWED_TENANTS); every other tenant's get a polite
	// refusal and no run, and its installs store nothing. Required with an
	// app id; local mode serves its loopback callers whatever they send.
	AllowedTenants []string
	// Access decides whether a person may run the agent (agents.run); nil
	// lets every served person run it.
	Access *access.Service
	// PublicBaseURL is where people reach the service; the cards have an
	// Open button only when it is https.
	PublicBaseURL netaddr.Origin
	// StageView makes the cards' Open buttons open views in Teams' Stage
	// View, with a second button for the browser (TICKETIQ_TEAMS_TAB).
	StageView bool
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// HTTPClient is used for the OpenID metadata, the token endpoint and
	// the Bot Connector (for the last two without following redirects);
	// nil means a client with timeouts on every step.
	HTTPClient *http.Client
	// Registerer receives the bot's metrics; nil registers none.
	Registerer prometheus.Registerer
	// AllowLoopbackServiceURL lets an authenticated bot send to a plain
	// http loopback serviceUrl, for tests with a fake Bot Connector. Local
	// mode always allows it.
	AllowLoopbackServiceURL bool
	// WorkingAfter is how long a turn may take before a "working on it"
	// card is posted and later replaced by the answer; zero means
	// DefaultWorkingAfter.
	WorkingAfter time.Duration
	// TypingAfter is how long a turn may take before the typing indicator
	// is sent; zero means DefaultTypingAfter, a negative value at once.
	TypingAfter time.Duration
	// MaxConcurrentTurns bounds agent runs at once; zero means
	// DefaultMaxConcurrentTurns.
	MaxConcurrentTurns int
	// MaxPendingTurns bounds turns accepted but not finished; past it the
	// endpoint answers 503 and Teams retries. Zero means
	// DefaultMaxPendingTurns.
	MaxPendingTurns int
	// MaxBodyBytes bounds a request body; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// TurnTimeout bounds one turn; zero means DefaultTurnTimeout.
	TurnTimeout time.Duration
	// Auth answers the chat commands about connections (/connections,
	// /disconnect); nil when no server is reached as each person.
	Auth *mcpauth.Broker
	// StreamAfter is DefaultStreamAfter's setting; zero means the default.
	StreamAfter time.Duration
	// ElicitWait is how long a turn may wait, besides TurnTimeout, for
	// the person's answer to what a server asks; zero means
	// agent.DefaultElicitWait.
	ElicitWait time.Duration
	// ConnectWait is how long a turn may wait, besides TurnTimeout, for
	// the person to connect a server (mcpauth's wait); zero when no
	// server is reached as each person.
	ConnectWait time.Duration
	// TracerProvider makes the spans of each turn and of each call to the
	// Bot Connector; nil makes none.
	TracerProvider trace.TracerProvider
}

// Bot is the POST /api/messages endpoint and the turns it runs.
type Bot struct {
	opts      Options
	agentName string
	agentID   string
	local     bool
	logger    *slog.Logger
	tracer    trace.Tracer
	now       func() time.Time
	conn      *connector
	validator *Validator // nil in local mode
	handlers  activity.HandlerFuncs
	metrics   *metrics
	seen      *seenSet
	refs      knownRefs // conversation references known to be current
	zones     zones     // the people's time zones, loaded once each
	sem       chan struct{}
	pending   atomic.Int64
	// streamQuiet is the longest an open stream goes without an update
	// (streamQuiet; shorter in tests).
	streamQuiet time.Duration
	// streamMax is how long a stream stays open before it closes itself
	// (streamMax; shorter in tests).
	streamMax time.Duration

	// ctx lives as long as the service: turns run under it, not under the
	// request that started them.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closing bool
	turns   sync.WaitGroup
	// records are arrivals being written to the store; Shutdown waits
	// for them, as the store closes after the bot.
	records sync.WaitGroup
	// ledger keeps the servers' questions waiting for their person;
	// waiting wakes this replica's runs whose question was answered here.
	ledger  questionLedger
	waiting waiters
}

// New builds the bot. It does no network I/O: signing keys and the bot
// token are fetched when first needed.
func New(opts Options) (*Bot, error) {
	if opts.Agent == nil {
		return nil, errors.New("bot: Options.Agent is required")
	}
	if opts.AppID != "" && opts.Credential.IsZero() {
		return nil, errors.New("bot: an app id needs a credential (TICKETIQ_BOT_APP_PASSWORD, TICKETIQ_BOT_CERT_FILE or TICKETIQ_BOT_FEDERATED_TOKEN_FILE)")
	}
	if opts.AppID != "" && len(opts.AllowedTenants) == 0 {
		return nil, errors.New("bot: an app id needs the tenants it serves (TICKETIQ_BOT_ALLOWED_TENANTS, or TICKETIQ_BOT_TENANT_ID)")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = newHTTPClient()
	}
	if opts.StreamAfter <= 0 {
		opts.StreamAfter = DefaultStreamAfter
	}
	if opts.WorkingAfter <= 0 {
		opts.WorkingAfter = DefaultWorkingAfter
	}
	switch {
	case opts.TypingAfter == 0:
		opts.TypingAfter = DefaultTypingAfter
	case opts.TypingAfter < 0:
		opts.TypingAfter = 0
	}
	if opts.MaxConcurrentTurns <= 0 {
		opts.MaxConcurrentTurns = DefaultMaxConcurrentTurns
	}
	if opts.MaxPendingTurns <= 0 {
		opts.MaxPendingTurns = DefaultMaxPendingTurns
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.ElicitWait <= 0 {
		opts.ElicitWait = agent.DefaultElicitWait
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = DefaultTurnTimeout
	}
	if opts.Cloud.Name == "" {
		opts.Cloud = publicCloud()
	}
	if opts.OpenIDMetadataURL == "" {
		opts.OpenIDMetadataURL = opts.Cloud.OpenIDMetadataURL
	}
	if opts.TokenURL == "" {
		opts.TokenURL = opts.Cloud.TokenURL(opts.TenantID)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("bot: registering metrics: %w", err)
	}

	b := &Bot{
		opts:    opts,
		local:   opts.AppID == "",
		logger:  opts.Logger,
		tracer:  telemetry.Tracer(opts.TracerProvider, "teamsbot/bot"),
		now:     opts.Now,
		metrics: m,
		seen:    newSeenSet(dedupTTL, dedupMax),
		sem:     make(chan struct{}, opts.MaxConcurrentTurns),

		streamQuiet: streamQuiet,
		streamMax:   streamMax,
	}
	b.ledger = &memLedger{}
	if opts.Store != nil {
		b.ledger = storeLedger{opts.Store}
	}
	b.agentID = opts.AgentID
	if ids := opts.Agent.Agents(); opts.AgentID == "" && len(ids) > 0 {
		b.agentID = ids[0]
		b.agentName, _ = opts.Agent.AgentName(ids[0])
	} else if opts.AgentID != "" {
		if b.agentName, err = opts.Agent.AgentName(opts.AgentID); err != nil {
			return nil, fmt.Errorf("bot: agent %q: %w", opts.AgentID, err)
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// The bot token and the app's credential go only where they are
	// addressed: a redirect is an error, not followed. (Go's client would
	// follow one to another port or a subdomain of the same host with the
	// Authorization header, and re-post the token request's form, secret or
	// client assertion, on 307.)
	direct := *opts.HTTPClient
	direct.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b.conn = &connector{
		client:        &direct,
		allowLoopback: b.local || opts.AllowLoopbackServiceURL,
		logger:        opts.Logger,
		tracer:        b.tracer,
		metrics:       m,
		retry:         connectorRetry(),
		// Pacing is about the Bot Connector's clock, the real one.
		pacer: newPacer(time.Now, retry.Sleep, func(waiting int, limit string) {
			m.sendQueue.Set(float64(waiting))
			if limit != "" {
				m.paced.WithLabelValues(limit).Inc()
			}
		}),
	}
	if !b.local {
		src, err := clientcred.NewSource(clientcred.SourceOptions{
			TokenURL: opts.TokenURL, ClientID: opts.AppID, Credential: opts.Credential, Scope: opts.Cloud.Scope,
			HTTPClient: &direct, Now: opts.Now, Early: tokenEarly, HoldFailure: tokenHoldFailure, Life: b.ctx,
			Logger: opts.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("bot: %w", err)
		}
		b.conn.tokens = &botTokens{src: src}
		b.validator, err = NewValidator(ValidatorOptions{
			AppID: opts.AppID, MetadataURL: opts.OpenIDMetadataURL, Issuer: opts.Cloud.Issuer,
			HTTPClient: opts.HTTPClient, Now: opts.Now, Logger: opts.Logger,
		})
		if err != nil {
			return nil, err
		}
	}

	// A message's handler is given the request's context in serve, for
	// the turn's span.
	b.handlers = activity.HandlerFuncs{
		OnConversationUpdateFunc: b.onConversationUpdate,
		OnInvokeFunc:             b.onInvoke,
	}

	if b.local {
		b.logger.Warn("local mode: no TICKETIQ_BOT_APP_ID, so /api/messages accepts unauthenticated activities from loopback addresses only and sends replies without a token")
	} else {
		b.logger.Info("Bot Framework authentication on", "app", opts.AppID, "credential", opts.Credential, "token_url", opts.TokenURL, "openid_metadata", opts.OpenIDMetadataURL)
	}
	return b, nil
}

// LocalMode reports whether the bot runs without an app id, taking
// unauthenticated activities from loopback only.
func (b *Bot) LocalMode() bool { return b.local }

// Register adds POST /api/messages to e.
func (b *Bot) Register(e *echo.Echo) {
	e.POST(Path, b.serve)
}

// Shutdown refuses new turns and waits for those in flight. When ctx ends
// first, it cancels them and returns ctx's error. Either way it then ends a
// bot token fetch in flight and closes the idle connections of its HTTP
// client (only idle ones, so a client shared with others loses nothing).
func (b *Bot) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	done := make(chan struct{})
	go func() {
		b.turns.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("bot: shutdown: %w", ctx.Err())
	}
	b.cancel()
	<-done
	b.records.Wait()
	b.opts.HTTPClient.CloseIdleConnections()
	return err
}

// begin registers a background job unless the bot is shutting down.
func (b *Bot) begin() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return false
	}
	b.turns.Add(1)
	return true
}
