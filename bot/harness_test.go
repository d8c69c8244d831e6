package bot

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/dialgate"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/telemetry"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/store"
)

const (
	testAppID    = "6f1c1d2e-0000-4000-8000-00000000b07a"
	testSecret   = "app-password-for-tests"
	testTenant   = "72f988bf-0000-4000-8000-0000000000aa"
	testUserOID  = "0b5e0a7e-0000-4000-8000-000000000001"
	testBotMRI   = "28:" + testAppID
	httpsBaseURL = "https://teams.example.com"
)

// clock is the shared settable clock, for token times and the retry
// filter; syncBuffer collects log lines from concurrent goroutines.
type (
	clock      = testenv.Clock
	syncBuffer = testenv.LogBuffer
)

type setup struct {
	local        bool
	publicBase   string
	workingAfter time.Duration
	// streamAfter is Options.StreamAfter; zero means a minute, so that
	// only a test of streamed words sees them.
	streamAfter time.Duration
	// typingAfter is Options.TypingAfter; zero sends the typing indicator
	// at once, so that tests of its order need no slow run.
	typingAfter time.Duration
	tokenURL    string
	cloud       string   // TICKETIQ_BOT_CLOUD; empty: public
	storePath   string   // the bbolt file; empty: a new one
	moreTenants []string // served besides testTenant
	builtins    map[string]func() *mcp.Server
	servers     []agent.ServerConfig
	realClock   bool
	quietLogs   bool
	maxPending  int
	// maxConcurrent is Options.MaxConcurrentTurns; zero: the default.
	maxConcurrent int
	// modelClient is agent.Options.HTTPClient, how the agent reaches an
	// OpenAI-compatible model; nil: Go's default transport.
	modelClient *http.Client
	model       *agent.ModelConfig // nil: the built-in model
	memory      agent.MemoryConfig
	// defaultClient leaves Options.HTTPClient nil, so the bot makes its
	// own; otherwise it gets loopbackClient.
	defaultClient bool
	// cred is the bot's credential: credSecret (the default),
	// credCertificate or credFederated; the fake token endpoint knows the
	// same one.
	cred string
	// stageView is Options.StageView (TICKETIQ_TEAMS_TAB).
	stageView bool
	// streamQuiet is the bot's streamQuiet; zero keeps the service's.
	streamQuiet time.Duration
	// streamMax is the bot's streamMax; zero keeps the service's.
	streamMax time.Duration
	// traces, when set, is the bot's and the agent's tracer provider and
	// propagator; nil: no spans.
	traces *telemetry.Provider
	// elicitWait is how long a call waits for the person's answer to what
	// its server asks; zero keeps the service's.
	elicitWait time.Duration
	// agentAccess gives the agent the bot's access service too, as the
	// service does (Cedar on every tool call, the tenant's settings).
	agentAccess bool
	// redact are the agent's data rules' redactions.
	redact []string
}

// The credentials a harness can give the bot.
const (
	credSecret      = "secret"
	credCertificate = "certificate"
	credFederated   = "federated"
)

// serviceAccount stands for a Kubernetes service account with Azure
// workload identity: its cluster's issuer signs its tokens, and the kubelet
// writes a fresh one to the projected file from time to time.
type serviceAccount struct {
	issuer, subject string
	key             *rsa.PrivateKey
	path            string
}

// loopbackClient is the bot's default client, except that it refuses to
// dial (or resolve) anything outside loopback: activities in tests, fuzzed
// ones above all, name serviceUrls such as https://x that must not reach
// the network.
func loopbackClient() *http.Client {
	c := newHTTPClient()
	tr := newTransport()
	tr.Proxy = nil
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
			return nil, fmt.Errorf("test: refusing to dial %s outside loopback", addr)
		}
		return dial(ctx, network, addr)
	}
	c.Transport = dialgate.New(tr)
	return c
}

// withTool adds to the agent a built-in MCP server, in memory, named
// server, with one tool whose result is the text fn returns (or its error).
func (s setup) withTool(server, tool string, fn func(ctx context.Context) (string, error)) setup {
	if s.builtins == nil {
		s.builtins = map[string]func() *mcp.Server{}
	}
	s.builtins[server] = func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: server, Version: "1.0.0"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: tool, Description: "a tool of the bot's tests"},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				text, err := fn(ctx)
				if err != nil {
					return nil, nil, err
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			})
		return srv
	}
	s.servers = append(s.servers, agent.ServerConfig{Name: server, Builtin: server})
	return s
}

// held is a tool body that says it started (when started is not nil),
// waits for release (nil: never) or its context, and then answers text.
func held(started chan<- struct{}, release <-chan struct{}, text string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		if started != nil {
			started <- struct{}{}
		}
		select {
		case <-release:
			return text, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// harness is the whole bot on loopback: an Echo server with the bot, the
// real agent with the built-in model and demo server, a real bbolt file,
// and the fakes for the Bot Framework.
type harness struct {
	access *access.Service
	t      testing.TB
	bf     *fakeBotFramework
	tokens *fakeTokenEndpoint
	conn   *fakeConnector
	bot    *Bot
	store  *store.Store
	agent  *agent.Service
	url    string
	clock  *clock
	now    func() time.Time
	logs   *syncBuffer
	reg    *prometheus.Registry
	client *http.Client
	issuer string               // the iss of the Bot Connector's tokens in the bot's cloud
	cert   *testenv.Certificate // credCertificate: the app's certificate
	sa     *serviceAccount      // credFederated: whose token file the bot reads
	// opts are the bot's options, for a second replica of it.
	opts Options
}

func newHarness(t testing.TB, s setup) *harness {
	t.Helper()
	h := &harness{t: t, logs: &syncBuffer{}, reg: prometheus.NewRegistry(), clock: testenv.NewClock(time.Now())}
	h.now = h.clock.Now
	if s.realClock {
		h.now = time.Now
	}
	var logger *slog.Logger
	if s.quietLogs {
		logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	} else {
		logger = slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot logs:\n%s", h.logs.String())
		}
	})

	ctx := context.Background()
	path := s.storePath
	if path == "" {
		path = filepath.Join(t.TempDir(), "teamsbot.db")
	}
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.store = st
	ax, err := access.New(access.Options{Store: st, Now: h.now})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.DefaultConfig()
	cfg.Agents[0].Servers = append(cfg.Agents[0].Servers, s.servers...)
	if s.model != nil {
		cfg.Agents[0].Model = *s.model
	}
	cfg.Agents[0].Memory = s.memory
	cfg.Agents[0].Rules.Redact = s.redact
	aopts := agent.Options{Store: st, AppsEnabled: true, Builtins: s.builtins, Logger: logger, HTTPClient: s.modelClient, ElicitWait: s.elicitWait}
	if s.traces != nil {
		aopts.TracerProvider, aopts.Propagator = s.traces, s.traces.Propagator
	}
	if s.agentAccess {
		aopts.Access = ax
	}
	ag, err := agent.New(ctx, cfg, aopts)
	if err != nil {
		t.Fatal(err)
	}
	h.agent = ag

	h.bf = newFakeBotFramework(t)
	h.bf.addKey(t, "key-1", "msteams", "webchat")
	opts := Options{
		Agent:        ag,
		Store:        st,
		Logger:       logger,
		Now:          h.now,
		Registerer:   h.reg,
		WorkingAfter: s.workingAfter,
		TypingAfter:  cmp.Or(s.typingAfter, -1),
		// MaxPendingTurns zero means the default.
		MaxPendingTurns:    s.maxPending,
		MaxConcurrentTurns: s.maxConcurrent,
		ElicitWait:         s.elicitWait,
	}
	if !s.defaultClient {
		opts.HTTPClient = loopbackClient()
	}
	if s.traces != nil {
		opts.TracerProvider = s.traces
	}
	h.access, opts.Access = ax, ax
	if s.publicBase == "" {
		s.publicBase = httpsBaseURL
	}
	opts.PublicBaseURL = netaddr.MustParseOrigin(s.publicBase)
	opts.StageView = s.stageView
	if opts.WorkingAfter == 0 {
		// Long enough that only the test that wants the working card sees it.
		opts.WorkingAfter = time.Minute
	}
	opts.StreamAfter = s.streamAfter
	if opts.StreamAfter == 0 {
		// Long enough that only the test that wants a stream of words sees one.
		opts.StreamAfter = time.Minute
	}
	if s.local {
		h.conn = newFakeConnector(t, nil)
	} else {
		h.tokens = newFakeTokenEndpoint(t, testTenant, testAppID, testSecret)
		h.conn = newFakeConnector(t, h.tokens)
		opts.AppID, opts.TenantID = testAppID, testTenant
		h.tokens.now = h.now
		switch s.cred {
		case "", credSecret:
			opts.Credential = clientcred.Secret(testSecret)
		case credCertificate:
			h.cert = testenv.NewCertificate(t, h.now().Add(-time.Hour), h.now().Add(30*24*time.Hour))
			h.tokens.app.Cert, h.tokens.secret = h.cert.Cert, ""
			if opts.Credential, err = clientcred.LoadCertificate(h.cert.File(t, nil), h.now()); err != nil {
				t.Fatal(err)
			}
		case credFederated:
			key, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				t.Fatal(err)
			}
			h.sa = &serviceAccount{
				issuer:  "https://oidc.prod-aks.azure.com/0c0c0c0c-0000-4000-8000-000000000a55/",
				subject: "system:serviceaccount:teamsbot:teamsbot",
				key:     key,
				path:    filepath.Join(t.TempDir(), "azure-identity-token"),
			}
			h.tokens.app.Federated = &testenv.FederatedCredential{Issuer: h.sa.issuer, Subject: h.sa.subject, Key: &key.PublicKey}
			h.tokens.secret = ""
			h.rotateServiceAccountToken()
			if opts.Credential, err = clientcred.FederatedTokenFile(h.sa.path); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unknown credential %q", s.cred)
		}
		cloud, err := CloudNamed(s.cloud)
		if err != nil {
			t.Fatal(err)
		}
		opts.Cloud, h.tokens.scope, h.issuer = cloud, cloud.Scope, cloud.Issuer
		opts.AllowedTenants = append([]string{testTenant}, s.moreTenants...)
		opts.OpenIDMetadataURL = h.bf.metadataURL()
		opts.TokenURL = h.tokens.url()
		opts.AllowLoopbackServiceURL = true
	}
	if s.tokenURL != "" {
		opts.TokenURL = s.tokenURL
	}
	h.opts = opts
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.streamQuiet > 0 {
		b.streamQuiet = s.streamQuiet
	}
	if s.streamMax > 0 {
		b.streamMax = s.streamMax
	}
	h.bot = b
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(nil)
	e.HideBanner = true
	if s.traces != nil {
		e.Use(web.Trace(s.traces, s.traces.Propagator))
	}
	b.Register(e)
	srv := httptest.NewServer(e)
	h.url = srv.URL
	h.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: 30 * time.Second}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		srv.Close()
		ag.Close()
		st.Close()
	})
	return h
}

// rotateServiceAccountToken writes a new service account token to the
// projected file, as the kubelet does (a new file renamed over the old),
// and returns it. The claims are a projected token's: the cluster's issuer,
// the service account as subject, Entra ID's token exchange as audience.
func (h *harness) rotateServiceAccountToken() string {
	h.t.Helper()
	now := h.now()
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		h.t.Fatal(err)
	}
	tok := sign(h.t, jwt.SigningMethodRS256, "sa-key", h.sa.key, jwt.MapClaims{
		"iss": h.sa.issuer, "sub": h.sa.subject, "aud": []string{testenv.FederatedAudience},
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"jti": fmt.Sprintf("%x", jti),
	})
	tmp := h.sa.path + ".new"
	if err := os.WriteFile(tmp, []byte(tok), 0o600); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, h.sa.path); err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// claims are the claims the Bot Connector puts in a token for this bot.
func (h *harness) claims() jwt.MapClaims {
	now := h.now()
	return jwt.MapClaims{
		"iss":        h.issuer,
		"aud":        testAppID,
		"exp":        now.Add(time.Hour).Unix(),
		"nbf":        now.Add(-time.Minute).Unix(),
		"serviceurl": h.conn.srv.URL,
	}
}

// token signs claims with the published key-1.
func (h *harness) token(c jwt.MapClaims) string {
	return sign(h.t, jwt.SigningMethodRS256, "key-1", h.bf.key("key-1"), c)
}

// message builds a Teams message activity in a conversation of the given
// type ("personal", "groupChat" or "channel"); in group chats and channels
// the text starts with the bot's @mention, as Teams sends it.
func (h *harness) message(convType, convID, id, text string) map[string]any {
	conv := map[string]any{"id": convID, "conversationType": convType, "tenantId": testTenant}
	channelData := map[string]any{"tenant": map[string]any{"id": testTenant}}
	a := map[string]any{
		"type":       "message",
		"id":         id,
		"timestamp":  "2026-12-02T10:00:00.000Z",
		"serviceUrl": h.conn.srv.URL,
		"channelId":  "msteams",
		"from":       map[string]any{"id": "29:1a2b3c", "name": "Ada Lovelace", "aadObjectId": testUserOID},
		"recipient":  map[string]any{"id": testBotMRI, "name": "TicketIQ"},
		"textFormat": "plain",
		"locale":     "en-US",
	}
	if convType != "personal" {
		conv["isGroup"] = true
		text = "<at>TicketIQ</at> " + text
		a["entities"] = []any{
			map[string]any{"type": "mention", "text": "<at>TicketIQ</at>", "mentioned": map[string]any{"id": testBotMRI, "name": "TicketIQ"}},
			map[string]any{"type": "clientInfo", "locale": "en-US", "platform": "Web"},
		}
	}
	if convType == "channel" {
		channelData["teamsChannelId"] = "19:channel@thread.tacv2"
		channelData["teamsTeamId"] = "19:team@thread.tacv2"
		channelData["channel"] = map[string]any{"id": "19:channel@thread.tacv2"}
		channelData["team"] = map[string]any{"id": "19:team@thread.tacv2"}
	}
	a["conversation"] = conv
	a["channelData"] = channelData
	a["text"] = text
	return a
}

// post sends an activity to /api/messages with the given Authorization
// header value ("" for none).
func (h *harness) post(body any, authorization string) (int, string) {
	h.t.Helper()
	var data []byte
	switch b := body.(type) {
	case []byte:
		data = b
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			h.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodPost, h.url+Path, bytes.NewReader(data))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", Path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// send posts a correctly signed activity.
func (h *harness) send(body any) (int, string) {
	h.t.Helper()
	return h.post(body, "Bearer "+h.token(h.claims()))
}

// shutdown waits for every turn in flight.
func (h *harness) shutdown() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.bot.Shutdown(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// replyTo finds the first message call replying to activityID.
func replyTo(calls []received, activityID string) (received, bool) {
	for _, c := range calls {
		if c.Method == http.MethodPost && c.ActivityID == activityID && c.Activity.Type == "message" {
			return c, true
		}
	}
	return received{}, false
}

func hasReplyTo(activityID string) func([]received) bool {
	return func(calls []received) bool { _, ok := replyTo(calls, activityID); return ok }
}

// cardActions lists the Action.OpenUrl URLs anywhere in an attachment.
func openURLs(t testing.TB, content json.RawMessage) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(content, &v); err != nil {
		t.Fatal(err)
	}
	var urls []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			if x["type"] == "Action.OpenUrl" {
				u, _ := x["url"].(string)
				urls = append(urls, u)
			}
			for _, y := range x {
				walk(y)
			}
		case []any:
			for _, y := range x {
				walk(y)
			}
		}
	}
	walk(v)
	return urls
}

func counterValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metric:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			if c := m.GetCounter(); c != nil {
				total += c.GetValue()
			}
		}
	}
	return total
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
