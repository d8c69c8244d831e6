package viewpage_test

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/access"
	"teamsbot/access/graph"
	"teamsbot/access/graph/fakegraph"
	"teamsbot/admin"
	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/triggers"
	"teamsbot/viewpage"
)

// clock is the shared test clock; person is a mockoidc user with the
// claims of an Entra ID token.
type (
	clock  = testenv.Clock
	person = testenv.EntraUser
)

func agentPerson(p *person) agent.Person {
	return agent.Person{TenantID: p.TID, UserID: p.OID, Name: p.Name, Roles: p.Roles}
}

// The app registration the fake Graph knows.
const (
	graphApp    = "5a3b1f3e-0d8e-4c4f-9a57-6f1b2c3d4e5f"
	graphSecret = "fake-graph-secret"
)

const (
	tenantA = "11111111-1111-1111-1111-111111111111"
	tenantB = "22222222-2222-2222-2222-222222222222"
)

func alice() *person {
	return &person{TID: tenantA, OID: "aaaaaaaa-0000-0000-0000-00000000000a", Name: "Alice", Roles: []string{"agents.read", "agents.run"}}
}

func bob() *person {
	return &person{TID: tenantA, OID: "bbbbbbbb-0000-0000-0000-00000000000b", Name: "Bob", Roles: []string{"agents.read", "agents.run"}}
}

// mallory has Alice's user id in another tenant, and every role there.
func mallory() *person {
	return &person{TID: tenantB, OID: alice().OID, Name: "Mallory", Roles: []string{"agents.read", "agents.run", "agents.admin"}}
}

// env is the whole service as far as the view page needs it: a real bbolt
// store in a temporary folder, the real agent with the built-in demo server
// (and whatever servers the test adds), the real sign-in against mockoidc,
// and the view page, all served by Echo over HTTP on 127.0.0.1. The frame
// documents come from http://localhost on the same port, a second origin
// (and site), unless sameOrigin is set.
type env struct {
	t       testing.TB
	store   *store.Store
	agent   *agent.Service
	signin  *signin.Service
	access  *access.Service
	handler *viewpage.Handler
	graph   *fakegraph.Server // with envOptions.admin
	groups  *graph.Client
	oidc    *mockoidc.MockOIDC
	clock   *clock
	base    string // public origin, http://127.0.0.1:port
	sandbox string // sandbox origin
	dataDir string
	// Teams mode (envOptions.teams): the key set Entra signs with, the
	// origin of the fake Teams client, its server (which serves what a test
	// puts in teamsPage), and an https client of the service.
	keys      *testenv.EntraKeys
	teamsHost string
	teamsSrv  *httptest.Server
	https     *http.Client

	mu       sync.Mutex
	requests []string // "METHOD /path" of every request the server got
	// logs collects the log of the view page and the error handler.
	logs testenv.LogBuffer
}

// setDefault has a tenant admin of tenant A switch the tenant default on
// or off.
func (e *env) setDefault(runner bool) {
	e.t.Helper()
	admin := access.Person{TenantID: tenantA, UserID: "adadadad-0000-0000-0000-0000000000ad", Roles: []string{access.PermAdmin}}
	if err := e.access.SetDefault(context.Background(), admin, access.Default{Runner: runner}); err != nil {
		e.t.Fatalf("SetDefault: %v", err)
	}
}

// logText is everything logged so far.
func (e *env) logText() string { return e.logs.String() }

// requestsSince returns the requests after the first n.
func (e *env) requestsSince(n int) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.requests[min(n, len(e.requests)):])
}

// requestCount is how many requests the server got so far.
func (e *env) requestCount() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.requests)
}

type envOptions struct {
	servers    []agent.ServerConfig
	builtins   map[string]func() *mcp.Server
	sameOrigin bool
	// admin serves the admin console too, with group names and
	// memberships from a fake Microsoft Graph (e.graph).
	admin bool
	// mutate lets a test change viewpage options before New.
	mutate func(*viewpage.Options)
	// local signs in with the local development sign-in (no issuer), as
	// ./run.sh does, instead of mockoidc.
	local bool
	// teams serves the service over https in Teams mode: Teams single
	// sign-on trusting e.keys, and the page framable by e.teamsHost, a
	// second https origin (and site) that plays the Teams client. The
	// frames share the page's origin.
	teams bool
	// elicitWait is the agent's ElicitWait: how long a call waits for the
	// answer to a server's question (zero: the agent's default).
	elicitWait time.Duration
	// writeTimeout is the server's WriteTimeout (zero: none).
	writeTimeout time.Duration
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	ctx := context.Background()
	ln := testenv.Listen(t)
	port := ln.Addr().(*net.TCPAddr).Port
	e := &env{
		t:       t,
		clock:   testenv.NewClock(time.Now()),
		base:    "http://127.0.0.1:" + strconv.Itoa(port),
		sandbox: "http://localhost:" + strconv.Itoa(port),
		dataDir: t.TempDir(),
	}
	var tlsSrv *httptest.Server
	if o.teams {
		ln.Close()
		tlsSrv = httptest.NewUnstartedServer(nil)
		e.base = "https://" + tlsSrv.Listener.Addr().String()
		o.sameOrigin = true
		e.keys = testenv.StartEntraKeys(t)
		e.teamsSrv = httptest.NewUnstartedServer(http.HandlerFunc(e.serveTeamsHost))
		// Chromium's first try of a test certificate fails before the
		// tab is told to trust it: not worth a log line.
		e.teamsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
		// localhost, not 127.0.0.1: another site, as teams.microsoft.com
		// is to the service.
		e.teamsHost = "https://localhost:" + strconv.Itoa(e.teamsSrv.Listener.Addr().(*net.TCPAddr).Port)
		e.teamsSrv.StartTLS()
		t.Cleanup(e.teamsSrv.Close)
	}
	if o.sameOrigin {
		e.sandbox = e.base
	}

	var err error
	e.store, err = store.Open(ctx, filepath.Join(e.dataDir, "teamsbot.db"), store.Options{Now: e.clock.Now})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { e.store.Close() })
	var groups access.Groups
	if o.admin {
		e.graph = fakegraph.New(t)
		e.graph.AddApp(graphApp, graphSecret)
		gc, err := graph.New(graph.Options{BaseURL: e.graph.BaseURL(), TokenURL: e.graph.TokenURL(), ClientID: graphApp, Credential: clientcred.Secret(graphSecret), HTTPClient: e.graph.Client()})
		if err != nil {
			t.Fatalf("graph.New: %v", err)
		}
		e.groups, groups = gc, gc
	}
	e.access, err = access.New(access.Options{Store: e.store, Now: e.clock.Now, Groups: groups})
	if err != nil {
		t.Fatalf("access.New: %v", err)
	}

	servers := append([]agent.ServerConfig{{Name: "demo", Builtin: "demo"}}, o.servers...)
	e.agent, err = agent.New(ctx, agent.Config{Agents: []agent.AgentConfig{{
		ID: "default", Name: "Assistant", Servers: servers,
	}}}, agent.Options{Store: e.store, Now: e.clock.Now, AppsEnabled: true, Builtins: o.builtins, Access: e.access, ElicitWait: o.elicitWait})
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	t.Cleanup(func() { e.agent.Close() })

	e.oidc = testenv.StartMockOIDC(t)
	cfg := e.oidc.Config()
	so := signin.Options{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		PublicBaseURL: netaddr.MustParseOrigin(e.base), DataDir: e.dataDir, Loopback: true,
		// The sign-in keeps the real clock: mockoidc signs with it, and a
		// test that moves the views' clock a week on still has a session.
	}
	if o.local {
		so = signin.Options{PublicBaseURL: netaddr.MustParseOrigin(e.base), DataDir: e.dataDir, Loopback: true}
	}
	if o.teams {
		so.AllowedTenants = []string{tenantA, tenantB}
		so.Teams = &signin.TeamsOptions{KeysURL: e.keys.URL, HTTPClient: e.keys.Client, HostOrigins: []string{e.teamsHost}}
	}
	e.signin, err = signin.New(ctx, so)
	if err != nil {
		t.Fatalf("signin.New: %v", err)
	}

	logger := slog.New(slog.NewTextHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts := viewpage.Options{
		Store: e.store, Agent: e.agent, SignIn: e.signin, Access: e.access,
		PublicBaseURL: netaddr.MustParseOrigin(e.base), DataDir: e.dataDir, Now: e.clock.Now, Logger: logger,
	}
	if !o.sameOrigin {
		opts.SandboxBaseURL = netaddr.MustParseOrigin(e.sandbox)
	}
	if o.teams {
		opts.Teams = &viewpage.TeamsOptions{FrameAncestors: []string{e.teamsHost}}
	}
	if o.mutate != nil {
		o.mutate(&opts)
	}
	e.handler, err = viewpage.New(opts)
	if err != nil {
		t.Fatalf("viewpage.New: %v", err)
	}

	ec := echo.New()
	ec.HideBanner, ec.HidePort = true, true
	ec.HTTPErrorHandler = web.ErrorHandler(logger, viewpage.Classify)
	ec.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			e.mu.Lock()
			e.requests = append(e.requests, c.Request().Method+" "+c.Request().URL.Path)
			e.mu.Unlock()
			return next(c)
		}
	})
	e.signin.Register(ec)
	e.handler.Register(ec)
	if o.admin {
		// The keys and triggers pages need the triggers service, which
		// needs a bot: a local-mode one, which never posts here.
		teams, err := bot.New(bot.Options{Agent: e.agent, Store: e.store, Access: e.access})
		if err != nil {
			t.Fatalf("bot.New: %v", err)
		}
		t.Cleanup(func() { teams.Shutdown(context.Background()) })
		trig, err := triggers.New(triggers.Options{Store: e.store, Bot: teams, Access: e.access, Agents: []string{"default"}})
		if err != nil {
			t.Fatalf("triggers.New: %v", err)
		}
		ah, err := admin.New(admin.Options{Store: e.store, Access: e.access, SignIn: e.signin, Groups: e.groups, Agents: []string{"default"}, AppsEnabled: true, Triggers: trig})
		if err != nil {
			t.Fatalf("admin.New: %v", err)
		}
		ah.Register(ec)
	}
	if tlsSrv != nil {
		tlsSrv.Config.Handler = ec
		tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
		tlsSrv.StartTLS()
		t.Cleanup(tlsSrv.Close)
		e.https = tlsSrv.Client()
		return e
	}
	srv := &http.Server{Handler: ec, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: o.writeTimeout}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return e
}

// run runs the agent for p (nil: a run with no person, in tenant A) and
// returns the first view it made.
func (e *env) run(p *person, text string) store.View {
	e.t.Helper()
	req := agent.Request{Person: agent.Person{TenantID: tenantA}, Text: text}
	if p != nil {
		req.Person = agentPerson(p)
	}
	ans, err := e.agent.Run(context.Background(), req)
	if err != nil {
		e.t.Fatalf("agent run %q: %v", text, err)
	}
	if len(ans.Views) == 0 {
		// What the answer says of a failure is for people; the detail is
		// in the run record, under the references the answer gives.
		run, _ := e.store.GetRun(context.Background(), ans.RunID)
		e.t.Fatalf("agent run %q made no view: %+v; problems %+v", text, ans, run.Problems)
	}
	return ans.Views[0]
}

// client is a browser-like HTTP client with a cookie jar, signed in as p
// through mockoidc (nil: not signed in).
func (e *env) client(p *person) *http.Client {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	if p == nil {
		return c
	}
	e.oidc.QueueUser(p)
	resp, err := c.Get(e.base + "/signin?return=/")
	if err != nil {
		e.t.Fatalf("sign in as %s: %v", p.Name, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	u, _ := url.Parse(e.base)
	if len(jar.Cookies(u)) == 0 {
		e.t.Fatalf("sign in as %s: no session cookie (last status %d at %s)", p.Name, resp.StatusCode, resp.Request.URL)
	}
	return c
}

// noRedirect returns c stopping at the first redirect.
func noRedirect(c *http.Client) *http.Client {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t testing.TB, c *http.Client, method, u string, header map[string]string, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v // the name the browser asked for
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

// viewInfo fetches GET /api/mcp-apps/{id} as c.
func (e *env) viewInfo(c *http.Client, id string) viewpage.ViewInfo {
	e.t.Helper()
	r := do(e.t, c, http.MethodGet, e.base+"/api/mcp-apps/"+id, nil, "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /api/mcp-apps/%s: %d %s", id, r.status, r.body)
	}
	var info viewpage.ViewInfo
	if err := json.Unmarshal([]byte(r.body), &info); err != nil {
		e.t.Fatal(err)
	}
	return info
}

// audit returns the tenant's agent.mcp_app.call records.
func (e *env) callAudit(tenant string) []store.AuditRecord {
	e.t.Helper()
	recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenant, Action: "agent.mcp_app.call"})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}
