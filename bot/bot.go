// Package bot is the service's Bot Framework endpoint, POST /api/messages,
// which Microsoft Teams talks to through the Bot Connector.
//
// It authenticates each request (the Bot Connector's signed JWT, or, with no
// app id configured, loopback callers only), answers within Teams' 15
// seconds, runs the agent for the person who wrote in the background, and
// sends the answer as Adaptive Cards through the Bot Connector REST API. It
// keeps each conversation's reference in the store for later proactive sends,
// and the ids of each run's answer cards, so that UpdateAnswer can replace
// them later.
//
// It owns neither card layout (package cards), nor runs and their MCP
// servers (package agent), nor storage (package store): it chooses which
// card to send and to whom, and keeps only the retry filter in memory. It uses the msbotbuilder-go schema types, its
// activity dispatch (activity.HandlerFuncs and TurnContext) and its
// core.BotFrameworkAdapter struct, with this package's own token validator
// and connector client plugged into the adapter's fields, because the
// library's own ones are unsafe (see Validator and the connector type).
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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/infracloudio/msbotbuilder-go/connector/auth"
	"github.com/infracloudio/msbotbuilder-go/core"
	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/infracloudio/msbotbuilder-go/schema"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/agent"
	"teamsbot/cards"
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
	// AppID, AppPassword and TenantID are the bot's Entra app registration
	// (TICKETIQ_BOT_APP_ID, ..._APP_PASSWORD, ..._TENANT_ID). An empty
	// AppID is local mode: unauthenticated activities from loopback only,
	// and no token sent with replies.
	AppID, AppPassword, TenantID string
	// OpenIDMetadataURL is the Bot Framework OpenID metadata; empty means
	// DefaultOpenIDMetadataURL.
	OpenIDMetadataURL string
	// TokenURL is the client-credentials token endpoint; empty means
	// TokenURL(TenantID).
	TokenURL string
	// Agent runs the turns.
	Agent *agent.Service
	// AgentID is the agent the bot serves; empty means the first one.
	AgentID string
	// Store keeps conversation references and where each answer went; nil
	// keeps none, and then nothing can be sent proactively or updated.
	Store *store.Store
	// PublicBaseURL is where people reach the service; the cards have an
	// Open button only when it is https.
	PublicBaseURL string
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
}

// Bot is the POST /api/messages endpoint and the turns it runs.
type Bot struct {
	opts      Options
	agentName string
	local     bool
	logger    *slog.Logger
	now       func() time.Time
	adapter   *core.BotFrameworkAdapter
	conn      *connector
	validator *Validator // nil in local mode
	handlers  activity.HandlerFuncs
	metrics   *metrics
	seen      *seenSet
	sem       chan struct{}
	pending   atomic.Int64

	// ctx lives as long as the service: turns run under it, not under the
	// request that started them.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closing bool
	turns   sync.WaitGroup
}

// New builds the bot. It does no network I/O: signing keys and the bot
// token are fetched when first needed.
func New(opts Options) (*Bot, error) {
	if opts.Agent == nil {
		return nil, errors.New("bot: Options.Agent is required")
	}
	if opts.AppID != "" && opts.AppPassword == "" {
		return nil, errors.New("bot: an app id needs an app password (TICKETIQ_BOT_APP_PASSWORD)")
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
	if opts.WorkingAfter <= 0 {
		opts.WorkingAfter = DefaultWorkingAfter
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
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = DefaultTurnTimeout
	}
	if opts.OpenIDMetadataURL == "" {
		opts.OpenIDMetadataURL = DefaultOpenIDMetadataURL
	}
	if opts.TokenURL == "" {
		opts.TokenURL = TokenURL(opts.TenantID)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("bot: registering metrics: %w", err)
	}

	b := &Bot{
		opts:    opts,
		local:   opts.AppID == "",
		logger:  opts.Logger,
		now:     opts.Now,
		metrics: m,
		seen:    newSeenSet(dedupTTL, dedupMax),
		sem:     make(chan struct{}, opts.MaxConcurrentTurns),
	}
	if ids := opts.Agent.Agents(); opts.AgentID == "" && len(ids) > 0 {
		b.agentName, _ = opts.Agent.AgentName(ids[0])
	} else if opts.AgentID != "" {
		if b.agentName, err = opts.Agent.AgentName(opts.AgentID); err != nil {
			return nil, fmt.Errorf("bot: agent %q: %w", opts.AgentID, err)
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	// The bot token and the app password go only where they are addressed:
	// a redirect is an error, not followed. (Go's client would follow one
	// to another port or a subdomain of the same host with the
	// Authorization header, and re-post the token request's form on 307.)
	direct := *opts.HTTPClient
	direct.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	b.conn = &connector{
		client:        &direct,
		allowLoopback: b.local || opts.AllowLoopbackServiceURL,
		logger:        opts.Logger,
		metrics:       m,
		sleep:         sleepCtx,
	}
	if !b.local {
		b.conn.tokens = &tokenSource{
			url: opts.TokenURL, appID: opts.AppID, password: opts.AppPassword,
			client: &direct, now: opts.Now, logger: opts.Logger, life: b.ctx,
		}
		b.validator, err = NewValidator(ValidatorOptions{
			AppID: opts.AppID, MetadataURL: opts.OpenIDMetadataURL,
			HTTPClient: opts.HTTPClient, Now: opts.Now, Logger: opts.Logger,
		})
		if err != nil {
			return nil, err
		}
	}

	// The adapter struct is built here rather than with core.NewBotAdapter,
	// which would install the library's validator and client. Its fields
	// hold ours; the bot calls the validator through it. Its
	// ProcessActivity is not used: it sends replies through a path that
	// drops the reply id, takes no context and cannot return the id of
	// what it sent, which the working card's update needs.
	b.adapter = &core.BotFrameworkAdapter{
		AdapterSetting: core.AdapterSetting{
			AppID:              opts.AppID,
			AppPassword:        opts.AppPassword,
			ChannelAuthTenant:  opts.TenantID,
			OauthEndpoint:      opts.TokenURL,
			OpenIDMetadata:     opts.OpenIDMetadataURL,
			ChannelService:     auth.ChannelService,
			CredentialProvider: auth.SimpleCredentialProvider{AppID: opts.AppID, Password: opts.AppPassword},
		},
		Client: b.conn,
	}
	if b.validator != nil {
		b.adapter.TokenValidator = b.validator
	}
	b.handlers = activity.HandlerFuncs{
		OnMessageFunc:            b.onMessage,
		OnConversationUpdateFunc: b.onConversationUpdate,
		OnInvokeFunc:             b.onInvoke,
	}

	if b.local {
		b.logger.Warn("bot: local mode: no TICKETIQ_BOT_APP_ID, so /api/messages accepts unauthenticated activities from loopback addresses only and sends replies without a token")
	} else {
		b.logger.Info("bot: Bot Framework authentication on", "app", opts.AppID, "token_url", opts.TokenURL, "openid_metadata", opts.OpenIDMetadataURL)
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
	b.opts.HTTPClient.CloseIdleConnections()
	return err
}

// ConversationKey is the store key of a conversation reference.
func ConversationKey(tenantID, conversationID string) string {
	return tenantID + "/" + conversationID
}

// inbound is an activity as received. It embeds the library's schema type
// and overrides two fields: schema.Entity keeps only an entity's type, and
// the @mention's id and text are needed to strip it; schema.Activity's
// value must be an object, while activities other than invoke may carry
// any JSON there.
type inbound struct {
	schema.Activity
	Entities []entity        `json:"entities,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
}

type entity struct {
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Mentioned struct {
		ID string `json:"id"`
	} `json:"mentioned"`
}

// invokeResponse is what a handler returns for an invoke: Teams reads the
// status and body from the HTTP response, as the Bot Framework SDKs' "invokeResponse"
// activity carries them.
type invokeResponse struct {
	Status int `json:"status"`
	Body   any `json:"body,omitempty"`
}

const invokeResponseType schema.ActivityTypes = "invokeResponse"

// serve is POST /api/messages.
//
// It does not use the adapter's ParseRequest: that decodes into
// schema.Activity, whose Entity type drops the @mention's id and text,
// reads the body without a size limit, cannot tell a malformed body (400)
// from a refused token (401), and demands a token even in local mode. The
// token check itself goes through the adapter's TokenValidator field.
func (b *Bot) serve(c echo.Context) error {
	req := c.Request()
	if b.local && !remoteIsLoopback(req.RemoteAddr) {
		b.refuse(authErr(ReasonNotLoopback, "local mode takes activities from loopback only, not %s", req.RemoteAddr), req)
		return echo.NewHTTPError(http.StatusForbidden, "bot: local mode accepts activities from loopback addresses only")
	}
	if b.local {
		if why := fromBrowserPage(req); why != "" {
			b.refuse(authErr(ReasonNotLoopback, "local mode: %s", why), req)
			return echo.NewHTTPError(http.StatusForbidden, "bot: local mode accepts activities from local tools only, not from web pages")
		}
	}
	if !b.local && req.Header.Get("Authorization") == "" {
		// Refused before the body is read: no work for anonymous callers.
		ae := authErr(ReasonMissingToken, "no Authorization header")
		b.refuse(ae, req)
		return echo.NewHTTPError(ae.Status, "bot: missing Authorization bearer token")
	}

	body, err := readBody(http.MaxBytesReader(c.Response(), req.Body, b.opts.MaxBodyBytes), req.ContentLength, b.opts.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return echo.NewHTTPError(http.StatusRequestEntityTooLarge, fmt.Sprintf("bot: activity larger than %d bytes", b.opts.MaxBodyBytes))
		}
		return echo.NewHTTPError(http.StatusBadRequest, "bot: reading request body failed")
	}
	var in inbound
	if err := json.Unmarshal(body, &in); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "bot: malformed activity JSON: "+err.Error())
	}
	if err := checkActivity(&in); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, err.Error())
	}

	if !b.local {
		_, err := b.adapter.TokenValidator.AuthenticateRequest(req.Context(), in.Activity, req.Header.Get("Authorization"), b.adapter.CredentialProvider, b.adapter.ChannelService)
		if err != nil {
			var ae *AuthError
			if !errors.As(err, &ae) {
				ae = authErr(ReasonMalformed, "%v", err)
			}
			b.refuse(ae, req)
			return echo.NewHTTPError(ae.Status, "bot: unauthorized: "+ae.Reason)
		}
	}

	switch in.Type {
	case schema.Message:
		in.Activity.Text = stripMentions(in.Activity.Text, in.Entities, in.Recipient.ID)
	case schema.Invoke:
		in.Activity.Value = nil
		if len(in.Value) > 0 && in.Value[0] == '{' {
			_ = json.Unmarshal(in.Value, &in.Activity.Value)
		}
	case schema.InstallationUpdate:
		// The library's dispatch has no installationUpdate case.
		if err := b.onInstallationUpdate(req.Context(), &in.Activity); err != nil {
			return err
		}
		return c.NoContent(http.StatusOK)
	case schema.ConversationUpdate:
	default:
		// Every other type (typing, messageReaction, event, ...) is
		// acknowledged and ignored.
		return c.NoContent(http.StatusOK)
	}

	reply, err := activity.PrepareActivityContext(b.handlers, &activity.TurnContext{Activity: in.Activity})
	if err != nil {
		switch {
		case errors.Is(err, ErrBusy), errors.Is(err, ErrClosed):
			c.Response().Header().Set("Retry-After", "5")
			return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
		default:
			b.logger.Error("bot: handling activity failed", "type", string(in.Type), "conversation", in.Conversation.ID, "error", err)
			return echo.NewHTTPError(http.StatusInternalServerError, "bot: handling the activity failed")
		}
	}
	if reply.Type == invokeResponseType {
		ir, _ := reply.Value["invokeResponse"].(invokeResponse)
		if ir.Body == nil {
			return c.NoContent(ir.Status)
		}
		return c.JSON(ir.Status, ir.Body)
	}
	if in.Type == schema.Message {
		return c.NoContent(http.StatusAccepted)
	}
	return c.NoContent(http.StatusOK)
}

// readBody reads the whole body, sized from Content-Length when it is
// given, to spare io.ReadAll's regrowing.
func readBody(r io.Reader, length, limit int64) ([]byte, error) {
	if length <= 0 || length > limit {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, length+1))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// refuse logs and counts a refused request; it never logs the token.
func (b *Bot) refuse(ae *AuthError, req *http.Request) {
	b.metrics.authFailures.WithLabelValues(ae.Reason).Inc()
	b.logger.Warn("bot: refused activity", "reason", ae.Reason, "detail", ae.Detail, "status", ae.Status, "remote", req.RemoteAddr)
}

// remoteIsLoopback checks the TCP peer, never a header a caller could set.
func remoteIsLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fromBrowserPage says why a local-mode request looks like it was sent by a
// web page, or "" when it does not. Without a token, the loopback check is
// the only guard, and a page can pass it: any site can POST to 127.0.0.1
// from the person's browser, and a site whose name an attacker points at
// 127.0.0.1 (DNS rebinding) even reads the answers. The Bot Framework
// Emulator, curl and the Bot Connector send none of the headers browsers add
// to such requests, and they address the service by a loopback name.
func fromBrowserPage(req *http.Request) string {
	if req.Header.Get("Origin") != "" || req.Header.Get("Sec-Fetch-Site") != "" || req.Header.Get("Sec-Fetch-Mode") != "" {
		return "the request comes from a web page (Origin or Sec-Fetch headers)"
	}
	host := req.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return ""
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return ""
	}
	return fmt.Sprintf("Host %.100q is not a loopback name", req.Host)
}

// checkActivity refuses activities without the fields every reply needs.
func checkActivity(in *inbound) error {
	var missing []string
	if in.Type == "" {
		missing = append(missing, "type")
	}
	if in.ServiceURL == "" {
		missing = append(missing, "serviceUrl")
	}
	if in.Conversation.ID == "" {
		missing = append(missing, "conversation.id")
	}
	if in.ChannelID == "" {
		missing = append(missing, "channelId")
	}
	if in.Type == schema.Message && in.Recipient.ID == "" {
		missing = append(missing, "recipient.id")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrBadActivity, strings.Join(missing, ", "))
	}
	return nil
}

// stripMentions removes the bot's own @mention (an entity of type mention
// whose mentioned.id is the recipient), which Teams puts in the text of
// channel and group chat messages as "<at>Name</at>". Only the mention and
// one space beside it go: the rest of the text, its line breaks and the
// spaces inside a tool's JSON arguments, reaches the agent as written.
func stripMentions(text string, entities []entity, botID string) string {
	for _, e := range entities {
		if e.Type != "mention" || e.Mentioned.ID != botID || e.Text == "" {
			continue
		}
		var b strings.Builder
		for {
			before, after, found := strings.Cut(text, e.Text)
			if !found {
				b.WriteString(text)
				break
			}
			if strings.HasSuffix(before, " ") && strings.HasPrefix(after, " ") {
				after = after[1:]
			}
			b.WriteString(before)
			text = after
		}
		text = b.String()
	}
	return strings.TrimSpace(text)
}

// channelTenant returns channelData.tenant.id.
func channelTenant(a *schema.Activity) string {
	t, _ := a.ChannelData["tenant"].(map[string]interface{})
	id, _ := t["id"].(string)
	return id
}

// personOf returns who wrote: the tenant, the Entra object id and the name.
func personOf(a *schema.Activity) agent.Person {
	return agent.Person{TenantID: channelTenant(a), UserID: a.From.AadObjectID, Name: a.From.Name}
}

// onMessage accepts a message: it filters retries, refuses messages
// without a person, and starts the turn in the background.
func (b *Bot) onMessage(t *activity.TurnContext) (schema.Activity, error) {
	a := t.Activity
	dedupKey := ""
	if a.ID != "" {
		dedupKey = a.Conversation.ID + "\x00" + a.ID
		if !b.seen.firstTime(dedupKey, b.now()) {
			b.metrics.turns.WithLabelValues("duplicate").Inc()
			b.logger.Info("bot: retried activity ignored", "conversation", a.Conversation.ID, "activity", a.ID)
			return schema.Activity{}, nil
		}
	}
	p := personOf(&a)
	if !b.begin() {
		b.seen.forget(dedupKey)
		return schema.Activity{}, ErrClosed
	}
	if b.pending.Add(1) > int64(b.opts.MaxPendingTurns) {
		b.pending.Add(-1)
		b.turns.Done()
		b.seen.forget(dedupKey)
		b.metrics.turns.WithLabelValues("busy").Inc()
		b.logger.Warn("bot: too many turns in flight; asking Teams to retry", "pending", b.opts.MaxPendingTurns)
		return schema.Activity{}, ErrBusy
	}
	go func() {
		defer b.turns.Done()
		defer b.pending.Add(-1)
		if p.TenantID == "" || p.UserID == "" {
			b.metrics.turns.WithLabelValues("refused").Inc()
			b.logger.Info("bot: message without tenant or user object id refused", "conversation", a.Conversation.ID, "channel", a.ChannelID)
			b.sendCard(&a, cards.MissingIdentity())
			return
		}
		b.runTurn(&a, p)
	}()
	return schema.Activity{}, nil
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

type runResult struct {
	ans agent.Answer
	err error
}

// runTurn sends a typing indicator, runs the agent, and sends the answer:
// directly when the run is quick, or as an update of a "working on it"
// card posted once the run has taken WorkingAfter.
func (b *Bot) runTurn(a *schema.Activity, p agent.Person) {
	start := b.now()
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.TurnTimeout)
	defer cancel()

	// Without a token or a usable serviceUrl nothing can reach the
	// person: fail now rather than run the agent for nobody.
	if err := b.conn.ready(ctx, a.ServiceURL); err != nil {
		b.metrics.turns.WithLabelValues("failed").Inc()
		b.logger.Error("bot: turn failed: cannot send to the conversation", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "error", err)
		return
	}

	// The typing indicator goes out while the agent runs; the answer waits
	// for it so the two never arrive out of order.
	typingDone := make(chan struct{})
	go func() {
		defer close(typingDone)
		if _, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, "", b.outgoing(a, schema.Typing)); err != nil {
			b.logger.Warn("bot: typing indicator not sent", "conversation", a.Conversation.ID, "error", err)
		}
	}()

	select {
	case b.sem <- struct{}{}:
	case <-ctx.Done():
		<-typingDone
		b.metrics.turns.WithLabelValues("failed").Inc()
		b.logger.Error("bot: turn abandoned while waiting for a slot", "conversation", a.Conversation.ID, "activity", a.ID, "error", ctx.Err())
		return
	}
	// Once the run has taken WorkingAfter, a timer posts the working card;
	// the run itself stays in this goroutine.
	var workingID string
	workingDone := make(chan struct{})
	timer := time.AfterFunc(b.opts.WorkingAfter, func() {
		defer close(workingDone)
		<-typingDone
		w := withCard(b.outgoing(a, schema.Message), cards.Working(a.Text))
		id, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, w)
		if err != nil {
			b.logger.Warn("bot: working card not sent", "conversation", a.Conversation.ID, "error", err)
		}
		workingID = id
	})
	ans, runErr := b.opts.Agent.Run(ctx, agent.Request{Person: p, AgentID: b.opts.AgentID, Text: a.Text})
	<-b.sem
	if !timer.Stop() {
		<-workingDone // workingID is read only after this
	}
	res := runResult{ans, runErr}

	outcome := "answered"
	var answer []cards.Card
	switch {
	case res.err == nil:
		answer = b.answerCards(res.ans)
	case errors.Is(res.err, agent.ErrModel) && len(res.ans.Views) > 0:
		// The model failed after tools made views, which are stored and
		// the person's: the card names them beside the agent's own words
		// that the model could not answer. The run notes stay out, as they
		// quote the model's error.
		outcome = "failed"
		b.logger.Error("bot: agent run failed after making views", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "reference", res.ans.RunID, "views", len(res.ans.Views), "error", res.err)
		res.ans.Notes = nil
		answer = b.answerCards(res.ans)
	default:
		outcome = "failed"
		// The card gives a reference, never the cause, which may carry
		// internal detail; the log line has both.
		ref := res.ans.RunID
		if ref == "" {
			ref = a.ID
		}
		b.logger.Error("bot: agent run failed", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "reference", ref, "error", res.err)
		answer = []cards.Card{cards.RunFailed(ref)}
	}

	<-typingDone
	var err error
	// The ids of the activities that carry the answer, in card order, kept
	// so the cards can be updated later. Should the connector not name a
	// card's activity, only the ids before it are kept: an id out of place
	// would have a later update put a card where another one was.
	sent := make([]string, 0, len(answer))
	gap := false
	for i, c := range answer {
		out := withCard(b.outgoing(a, schema.Message), c)
		if i == 0 && workingID != "" {
			// The working card becomes the answer's first card.
			if err = b.conn.Update(ctx, a.ServiceURL, a.Conversation.ID, workingID, out); err == nil {
				sent = append(sent, workingID)
				continue
			}
			b.logger.Warn("bot: updating the working card failed; sending the answer as a new message", "conversation", a.Conversation.ID, "error", err)
		}
		var id string
		if id, err = b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, out); err != nil {
			break
		}
		gap = gap || id == ""
		if !gap {
			sent = append(sent, id)
		}
	}
	if err != nil {
		outcome = "failed"
		b.logger.Error("bot: answer not delivered", "tenant", p.TenantID, "conversation", a.Conversation.ID, "activity", a.ID, "run", res.ans.RunID, "error", err)
	}
	b.metrics.turns.WithLabelValues(outcome).Inc()
	b.metrics.turnDuration.Observe(b.now().Sub(start).Seconds())
	// After the turn's duration is taken: the person has the answer, and
	// the store may hold this write back to share a commit.
	b.recordDelivery(ctx, a, res.ans.RunID, sent)
	b.logger.Debug("bot: turn done", "conversation", a.Conversation.ID, "activity", a.ID, "outcome", outcome, "run", res.ans.RunID, "views", len(res.ans.Views))
}

// outgoing starts an activity addressed back to the conversation of a.
func (b *Bot) outgoing(a *schema.Activity, typ schema.ActivityTypes) *outActivity {
	from, to := a.Recipient, a.From
	conv := schema.ConversationAccount{ID: a.Conversation.ID}
	return &outActivity{Type: typ, From: &from, Recipient: &to, Conversation: &conv}
}

// sendCard sends one card in reply to a, outside a turn.
func (b *Bot) sendCard(a *schema.Activity, c cards.Card) {
	ctx, cancel := context.WithTimeout(b.ctx, sendTimeout)
	defer cancel()
	out := withCard(b.outgoing(a, schema.Message), c)
	if _, err := b.conn.Send(ctx, a.ServiceURL, a.Conversation.ID, a.ID, out); err != nil {
		b.logger.Warn("bot: card not sent", "conversation", a.Conversation.ID, "error", err)
	}
}

// onConversationUpdate stores the reference and welcomes when the bot was
// added to a conversation, and forgets it when the bot was removed.
func (b *Bot) onConversationUpdate(t *activity.TurnContext) (schema.Activity, error) {
	a := t.Activity
	botID := a.Recipient.ID
	ctx, cancel := context.WithTimeout(b.ctx, sendTimeout)
	defer cancel()
	for _, m := range a.MembersRemoved {
		if m.ID == botID {
			return schema.Activity{}, b.forgetConversation(ctx, &a)
		}
	}
	for _, m := range a.MembersAdded {
		if m.ID == botID {
			return schema.Activity{}, b.installed(ctx, &a, true)
		}
	}
	return schema.Activity{}, nil
}

// onInstallationUpdate handles install and uninstall of the app.
func (b *Bot) onInstallationUpdate(reqCtx context.Context, a *schema.Activity) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(reqCtx), sendTimeout)
	defer cancel()
	var err error
	switch a.Action {
	case "add":
		err = b.installed(ctx, a, true)
	case "add-upgrade":
		// A new version of the app: keep the reference fresh, but the
		// person has been welcomed already.
		err = b.installed(ctx, a, false)
	case "remove", "remove-upgrade":
		err = b.forgetConversation(ctx, a)
	}
	if err != nil {
		b.logger.Error("bot: installation update failed", "conversation", a.Conversation.ID, "error", err)
		return echo.NewHTTPError(http.StatusInternalServerError, "bot: storing the conversation failed")
	}
	return nil
}

func conversationTenant(a *schema.Activity) string {
	if t := channelTenant(a); t != "" {
		return t
	}
	return a.Conversation.TenantID
}

// installed stores the conversation reference for proactive sends and
// sends the welcome card once per conversation (Teams announces an install
// with both a conversationUpdate and an installationUpdate).
func (b *Bot) installed(ctx context.Context, a *schema.Activity, welcome bool) error {
	tenant := conversationTenant(a)
	if tenant == "" {
		b.logger.Warn("bot: bot added to a conversation without a tenant; reference not stored", "conversation", a.Conversation.ID)
	} else if b.opts.Store != nil {
		ref, err := json.Marshal(activity.GetCoversationReference(*a))
		if err != nil {
			return fmt.Errorf("bot: conversation reference: %w", err)
		}
		err = b.opts.Store.PutConversation(ctx, store.ConversationRef{
			Key:            ConversationKey(tenant, a.Conversation.ID),
			TenantID:       tenant,
			ConversationID: a.Conversation.ID,
			ServiceURL:     a.ServiceURL,
			ChannelID:      a.ChannelID,
			BotID:          a.Recipient.ID,
			Reference:      ref,
		})
		if err != nil {
			return fmt.Errorf("bot: storing conversation %s: %w", a.Conversation.ID, err)
		}
		b.logger.Info("bot: added to conversation", "tenant", tenant, "conversation", a.Conversation.ID, "type", a.Conversation.ConversationType)
	}
	if welcome && b.seen.firstTime("welcome\x00"+a.Conversation.ID, b.now()) && b.begin() {
		act := *a
		go func() {
			defer b.turns.Done()
			b.sendCard(&act, cards.Welcome(b.cardOptions()))
		}()
	}
	return nil
}

// forgetConversation removes the reference when the bot leaves.
func (b *Bot) forgetConversation(ctx context.Context, a *schema.Activity) error {
	tenant := conversationTenant(a)
	if tenant == "" || b.opts.Store == nil {
		return nil
	}
	if err := b.opts.Store.DeleteConversation(ctx, ConversationKey(tenant, a.Conversation.ID)); err != nil {
		return fmt.Errorf("bot: removing conversation %s: %w", a.Conversation.ID, err)
	}
	b.seen.forget("welcome\x00" + a.Conversation.ID)
	b.logger.Info("bot: removed from conversation", "tenant", tenant, "conversation", a.Conversation.ID)
	return nil
}

// onInvoke answers invokes in the HTTP response. The cards carry no
// Action.Execute, so an adaptiveCard/action gets a short message.
func (b *Bot) onInvoke(t *activity.TurnContext) (schema.Activity, error) {
	var ir invokeResponse
	switch t.Activity.Name {
	case "adaptiveCard/action":
		// "Universal Actions for Adaptive Cards": a message response.
		ir = invokeResponse{Status: http.StatusOK, Body: map[string]any{
			"statusCode": http.StatusOK,
			"type":       "application/vnd.microsoft.activity.message",
			"value":      "Nothing to do here: open a view with its Open button, or write to me.",
		}}
	default:
		ir = invokeResponse{Status: http.StatusOK, Body: map[string]any{}}
	}
	return schema.Activity{Type: invokeResponseType, Value: map[string]interface{}{"invokeResponse": ir}}, nil
}

// ErrNoStore means the bot was built without a store, so it keeps no
// conversation references and cannot send proactively.
var ErrNoStore = errors.New("bot: no store configured")

// SendProactive posts a card, unprompted, to a conversation the bot was
// added to, using the reference stored at install (key is
// ConversationKey(tenant, conversation id)), and returns the id the Bot
// Connector gave the new activity, with which it can be updated later.
// store.ErrNotFound (wrapped) means the bot is not, or no longer, in that
// conversation.
func (b *Bot) SendProactive(ctx context.Context, key string, c cards.Card) (string, error) {
	ref, out, err := b.proactive(ctx, key, c)
	if err != nil {
		return "", fmt.Errorf("bot: proactive send to %s: %w", key, err)
	}
	id, err := b.conn.Send(ctx, ref.ServiceURL, ref.ConversationID, "", out)
	if err != nil {
		return "", fmt.Errorf("bot: proactive send to %s: %w", key, err)
	}
	return id, nil
}

// UpdateProactive replaces an activity the bot sent to a conversation (its
// id as SendProactive returned it) with another card.
func (b *Bot) UpdateProactive(ctx context.Context, key, activityID string, c cards.Card) error {
	ref, out, err := b.proactive(ctx, key, c)
	if err == nil {
		err = b.conn.Update(ctx, ref.ServiceURL, ref.ConversationID, activityID, out)
	}
	if err != nil {
		return fmt.Errorf("bot: proactive update in %s: %w", key, err)
	}
	return nil
}

// proactive reads a stored conversation reference and builds a message
// carrying c from the bot to that conversation.
func (b *Bot) proactive(ctx context.Context, key string, c cards.Card) (store.ConversationRef, *outActivity, error) {
	if b.opts.Store == nil {
		return store.ConversationRef{}, nil, ErrNoStore
	}
	ref, err := b.opts.Store.Conversation(ctx, key)
	if err != nil {
		return store.ConversationRef{}, nil, err
	}
	bot := schema.ChannelAccount{ID: ref.BotID}
	conv := schema.ConversationAccount{ID: ref.ConversationID}
	return ref, withCard(&outActivity{Type: schema.Message, From: &bot, Conversation: &conv}, c), nil
}
