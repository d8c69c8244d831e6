package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/pgtest"
	"teamsbot/internal/testenv/fakeauth"
	"teamsbot/internal/web"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// The whole flow on real HTTP: a real MCP server protected as the MCP
// specification says (fakeauth's resource server, RFC 9728), an
// authorization server that speaks RFC 8414, 7591, 8707, 9207 and the
// client ID metadata document draft (fakeauth's), go-sdk's client with
// the person's handler, and this package's pages, reached by a "browser"
// (an http.Client with the person's sign-in cookie) as a person would
// follow the Connect link.

const tenant = "0b2d9c7e-0000-4000-8000-000000000001"

// person is someone of the tenant: their id here and their account at the
// authorization server.
type person struct {
	id, name, account string
}

var (
	ada   = person{"11111111-0000-4000-8000-000000000001", "Ada Lovelace", fakeauth.Alice}
	grace = person{"22222222-0000-4000-8000-000000000002", "Grace Hopper", fakeauth.Bob}
)

func (p person) mcp() mcpauth.Person {
	return mcpauth.Person{TenantID: tenant, UserID: p.id, Name: p.name}
}

// env is one service (or two replicas of it) and the servers.
type env struct {
	t      *testing.T
	as     *fakeauth.AuthServer
	rs     *fakeauth.ResourceServer
	st     *store.Store
	b      *mcpauth.Broker
	base   string // the service's public base URL
	server mcpauth.Server
	certs  *http.Client   // trusts every server of the test
	site   *fakeauth.Site // the service's https site; nil on http
}

type envOpts struct {
	http     bool // the service on loopback http (no client ID metadata document)
	clientID string
	secret   string
	wait     time.Duration
	knobs    []func(*fakeauth.Knobs)
	st       *store.Store // shared store (replicas)
	dataDir  string
	as       *fakeauth.AuthServer
	rs       *fakeauth.ResourceServer
	// server changes the server as configured (Entra, scopes), once the
	// authorization and resource servers run.
	server func(*env, *mcpauth.Server)
	// freshSignIn is Pages.FreshSignIn.
	freshSignIn bool
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t}
	e.as, e.rs = o.as, o.rs
	if e.as == nil {
		e.as = fakeauth.StartAuthServer(t, o.knobs...)
		e.rs = fakeauth.StartResourceServer(t, e.as)
	}
	e.st = o.st
	if e.st == nil {
		st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		e.st = st
	}
	ec := echo.New()
	ec.HTTPErrorHandler = web.ErrorHandler(nil)
	var site *fakeauth.Site
	if o.http {
		hs := httptest.NewServer(ec)
		t.Cleanup(hs.Close)
		e.base = hs.URL
		e.certs = fakeauth.Client(e.as.Cert, e.rs.Cert)
	} else {
		site = fakeauth.ServeHTTPS(t, ec)
		e.site = site
		e.base = site.URL
		e.certs = fakeauth.Client(e.as.Cert, e.rs.Cert, site.Cert)
		// The authorization server fetches the client ID metadata
		// document from the service.
		e.as.Configure(func(k *fakeauth.Knobs) { k.DocumentClient = fakeauth.Client(site.Cert) })
	}
	if o.wait == 0 {
		o.wait = 20 * time.Second
	}
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	e.server = mcpauth.Server{AgentID: "default", Name: "crm", URL: e.rs.URL, ClientID: o.clientID, ClientSecret: o.secret}
	if o.server != nil {
		o.server(e, &e.server)
	}
	b, err := mcpauth.New(mcpauth.Options{
		Store: e.st, PublicBaseURL: netaddr.MustParseOrigin(e.base), DataDir: o.dataDir,
		HTTPClient: e.certs, AllowHTTP: o.http, Wait: o.wait, Poll: 20 * time.Millisecond,
		RequestTimeout: 2 * time.Second, Servers: []mcpauth.Server{e.server},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	registerPages(t, b, ec, o.freshSignIn)
	return e
}

// registerPages adds b's pages to ec, with the test's sign-in: the person
// whose id the test-person cookie holds.
func registerPages(t *testing.T, b *mcpauth.Broker, ec *echo.Echo, freshSignIn bool) {
	t.Helper()
	pages, err := b.NewPages(func(r *http.Request) (mcpauth.Signed, error) {
		c, err := r.Cookie("test-person")
		if err != nil {
			return mcpauth.Signed{}, err
		}
		for _, p := range []person{ada, grace} {
			if p.id == c.Value {
				return mcpauth.Signed{TenantID: tenant, UserID: p.id, Name: p.name}, nil
			}
		}
		return mcpauth.Signed{}, errors.New("no such person")
	}, func(ret, as string) string { return "/signin?" + url.Values{"return": {ret}, "as": {as}}.Encode() })
	if err != nil {
		t.Fatal(err)
	}
	pages.FreshSignIn(freshSignIn)
	pages.Register(ec)
}

// browser is a person's browser: signed in to the service (the cookie the
// test sign-in reads), trusting the test's certificates, not following
// redirects by itself.
type browser struct {
	p  person
	hc *http.Client
	// rewrite, when set, changes the callback address the authorization
	// server redirects to (another replica behind the same name).
	rewrite func(string) string
}

func (e *env) browser(p person) *browser {
	hc := *e.certs
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{p: p, hc: &hc}
}

func (br *browser) get(ctx context.Context, u string) (*http.Response, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", err
	}
	req.AddCookie(&http.Cookie{Name: "test-person", Value: br.p.id})
	resp, err := br.hc.Do(req)
	if err != nil {
		return nil, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body), nil
}

// connect follows a Connect link as br's person: the service's page, the
// authorization server's consent (as account, Allow or Deny), and the
// redirect back to the service's callback. It returns the callback page.
func (br *browser) connect(ctx context.Context, link, account string, allow bool) (int, string, error) {
	resp, body, err := br.get(ctx, link)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode != http.StatusSeeOther {
		return resp.StatusCode, body, nil
	}
	authURL := resp.Header.Get("Location")
	au, _ := url.Parse(authURL)
	res, err := fakeauth.AnswerConsent(ctx, br.hc, authURL, account, allow)
	q := url.Values{"state": {au.Query().Get("state")}}
	if err != nil {
		// The authorization server's error comes back to the service's
		// callback as its redirect carries it.
		code, ok := strings.CutPrefix(err.Error(), "the authorization server answered ")
		if !ok {
			return 0, "", err
		}
		code, _, _ = strings.Cut(code, ":")
		q.Set("error", code)
	} else {
		q.Set("code", res.Code)
		q.Set("state", res.State)
		if res.Iss != "" {
			q.Set("iss", res.Iss)
		}
	}
	cb, _ := url.Parse(au.Query().Get("redirect_uri"))
	cb.RawQuery = q.Encode()
	target := cb.String()
	if br.rewrite != nil {
		target = br.rewrite(target)
	}
	resp, body, err = br.get(ctx, target)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, body, nil
}

// prompter plays the bot: it records each prompt and each outcome, and
// has someone follow the link (or nobody, when act is nil).
type prompter struct {
	mu       sync.Mutex
	prompts  []mcpauth.Prompt
	outcomes []mcpauth.Outcome
	pages    []string // what the browser's callback page said
	statuses []int
	act      func(ctx context.Context, p mcpauth.Prompt) (int, string, error)
	errs     []error
	done     chan struct{}
}

func newPrompter(act func(ctx context.Context, p mcpauth.Prompt) (int, string, error)) *prompter {
	return &prompter{act: act, done: make(chan struct{}, 16)}
}

func (pr *prompter) Ask(ctx context.Context, p mcpauth.Prompt) (mcpauth.Asked, error) {
	pr.mu.Lock()
	pr.prompts = append(pr.prompts, p)
	pr.mu.Unlock()
	if pr.act != nil {
		go func() {
			status, page, err := pr.act(context.WithoutCancel(ctx), p)
			pr.mu.Lock()
			pr.statuses, pr.pages = append(pr.statuses, status), append(pr.pages, page)
			if err != nil {
				pr.errs = append(pr.errs, err)
			}
			pr.mu.Unlock()
			pr.done <- struct{}{}
		}()
	}
	return pr, nil
}

func (pr *prompter) Outcome(_ context.Context, o mcpauth.Outcome) {
	pr.mu.Lock()
	pr.outcomes = append(pr.outcomes, o)
	pr.mu.Unlock()
}

func (pr *prompter) snapshot() ([]mcpauth.Prompt, []mcpauth.Outcome) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.prompts), slices.Clone(pr.outcomes)
}

// consenting has p follow the link and allow as their own account.
func (e *env) consenting(p person) *prompter {
	br := e.browser(p)
	return newPrompter(func(ctx context.Context, pr mcpauth.Prompt) (int, string, error) {
		return br.connect(ctx, pr.URL, p.account, true)
	})
}

// session opens p's MCP session with the server through the broker, with
// pr to ask them (nil: nobody can be asked).
func (e *env) session(ctx context.Context, p person, pr mcpauth.Prompter) (*mcp.ClientSession, error) {
	if pr != nil {
		ctx = mcpauth.WithWaiter(ctx, mcpauth.Waiter{Prompter: pr, RunID: "run-1"})
	}
	t := &mcp.StreamableClientTransport{Endpoint: e.rs.URL, HTTPClient: e.certs, OAuthHandler: e.b.PersonHandler(p.mcp(), e.server)}
	return mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, t, nil)
}

// call calls a tool as p; pr asks them when needed.
func (e *env) call(ctx context.Context, p person, pr mcpauth.Prompter, tool string) (string, error) {
	cs, err := e.session(ctx, p, pr)
	if err != nil {
		return "", err
	}
	defer cs.Close()
	if pr != nil {
		ctx = mcpauth.WithWaiter(ctx, mcpauth.Waiter{Prompter: pr, RunID: "run-1"})
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", b.String())
	}
	return b.String(), nil
}

func (e *env) audit(action string) []store.AuditRecord {
	e.t.Helper()
	recs, err := e.st.Audit(context.Background(), store.AuditQuery{TenantID: tenant, Action: action})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestConnectEachRegistration: a person who has not connected the server
// is asked once; after they allow, the call goes on as them (the server
// sees their account), with each of the specification's ways to register
// the client: the client ID metadata document (the service on https), a
// pre-registered client (with its secret), and dynamic registration (the
// service on loopback http, where no metadata document can be served).
func TestConnectEachRegistration(t *testing.T) {
	cases := []struct {
		name     string
		o        envOpts
		clientID func(e *env) string
		auth     string
	}{
		{"client ID metadata document", envOpts{}, func(e *env) string { return e.base + mcpauth.ClientPath }, "none"},
		{"pre-registered", envOpts{clientID: "teamsbot-prereg", secret: "s3cret-prereg"}, func(*env) string { return "teamsbot-prereg" }, "client_secret_post"},
		{"dynamic registration", envOpts{http: true}, nil, "none"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			e := newEnv(t, c.o)
			if c.o.clientID != "" {
				e.as.AddClient(c.o.clientID, c.o.secret, e.base+mcpauth.CallbackPath)
			}
			pr := e.consenting(ada)
			got, err := e.call(ctx, ada, pr, "whoami")
			if err != nil {
				t.Fatalf("whoami: %v (browser: %v %v)", err, pr.errs, pr.pages)
			}
			if !strings.Contains(got, ada.account) {
				t.Errorf("the server saw %q, want Ada's account %s", got, ada.account)
			}
			prompts, outcomes := pr.snapshot()
			if len(prompts) != 1 || prompts[0].Server != "crm" || prompts[0].PersonName != ada.name || !strings.HasPrefix(prompts[0].URL, e.base+mcpauth.ConnectPath) {
				t.Errorf("prompts = %+v, want one Connect link for Ada to crm", prompts)
			}
			if !slices.Equal(outcomes, []mcpauth.Outcome{mcpauth.Connected}) {
				t.Errorf("outcomes = %v, want [Connected]", outcomes)
			}
			<-pr.done
			if !strings.Contains(pr.pages[0], "connected") {
				t.Errorf("callback page: %s", pr.pages[0])
			}
			stats := e.as.Stats()
			if c.clientID != nil {
				if want := c.clientID(e); !slices.Contains(stats.ClientIDs, want) {
					t.Errorf("client ids seen %v, want %s", stats.ClientIDs, want)
				}
				if stats.Registrations != 0 {
					t.Errorf("registrations = %d, want none", stats.Registrations)
				}
			} else if stats.Registrations != 1 {
				t.Errorf("registrations = %d, want 1", stats.Registrations)
			}
			if !slices.Contains(stats.ClientAuth, c.auth) {
				t.Errorf("client authentication %v, want %s", stats.ClientAuth, c.auth)
			}
			// RFC 8707: the resource, on the authorization and the token request.
			if n := countOf(stats.Resources, e.rs.URL); n < 2 {
				t.Errorf("resource %s sent %d times (%v), want on /authorize and /token", e.rs.URL, n, stats.Resources)
			}
			if len(e.audit(mcpauth.ActionConnected)) != 1 || len(e.audit(mcpauth.ActionAsked)) != 1 {
				t.Errorf("audit: connected %d, asked %d", len(e.audit(mcpauth.ActionConnected)), len(e.audit(mcpauth.ActionAsked)))
			}

			// Kept: a new session (a new run, after a restart) is not asked again.
			again := newPrompter(nil)
			if got, err := e.call(ctx, ada, again, "list_customers"); err != nil || got == "" {
				t.Fatalf("second call: %q, %v", got, err)
			}
			if p, _ := again.snapshot(); len(p) != 0 {
				t.Errorf("asked again: %+v", p)
			}
		})
	}
}

func countOf(list []string, v string) int {
	n := 0
	for _, x := range list {
		if strings.TrimSuffix(x, "/") == strings.TrimSuffix(v, "/") {
			n++
		}
	}
	return n
}

// TestEachPersonIsThemselves: two people of one tenant reach the server
// each as themselves, never with the other's token, and a person's own
// token for this service never reaches the server (no passthrough: every
// Authorization header the server got is a token of its own
// authorization server for its own audience).
func TestEachPersonIsThemselves(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	for _, p := range []person{ada, grace} {
		got, err := e.call(ctx, p, e.consenting(p), "whoami")
		if err != nil || !strings.Contains(got, p.account) {
			t.Fatalf("%s: whoami %q, %v", p.name, got, err)
		}
	}
	for _, p := range []person{ada, grace} {
		got, err := e.call(ctx, p, newPrompter(nil), "whoami")
		if err != nil || !strings.Contains(got, p.account) {
			t.Errorf("%s again: whoami %q, %v", p.name, got, err)
		}
	}
	for _, h := range e.rs.Authorizations() {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			t.Fatalf("Authorization %q is not a bearer token", h)
		}
		claims, err := e.as.Verify(tok)
		if err != nil {
			t.Errorf("the server got a token its authorization server did not issue: %v", err)
			continue
		}
		if !slices.Contains([]string(claims.Audience), e.rs.URL) {
			t.Errorf("token for %v reached %s", claims.Audience, e.rs.URL)
		}
	}
}

// TestSomeoneElseClicksConnect: in a group chat anyone sees the Connect
// card; another person who follows it is told whose sign-in it is and
// goes no further (the request still waits), and the callback with a
// code from another person's browser is refused too; then the right
// person connects.
func TestSomeoneElseClicksConnect(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	other := e.browser(grace)
	var otherStatus int
	var otherPage string
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		resp, body, err := other.get(ctx, p.URL)
		if err != nil {
			return 0, "", err
		}
		otherStatus, otherPage = resp.StatusCode, body
		return e.browser(ada).connect(ctx, p.URL, ada.account, true)
	})
	if got, err := e.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami %q, %v", got, err)
	}
	if otherStatus != http.StatusForbidden || !strings.Contains(otherPage, "This sign-in is for Ada Lovelace") {
		t.Errorf("Grace following Ada's link: %d %s", otherStatus, otherPage)
	}
	refused := e.audit(mcpauth.ActionRefused)
	if len(refused) != 1 || refused[0].Actor != grace.id {
		t.Errorf("refusals audited: %+v", refused)
	}
}

// TestConnectSignsInThePersonAsked: a browser with nobody signed in that
// follows the Connect link is sent to sign in, as the person the request
// is for (the local development sign-in has them selected), and comes
// back to the link.
func TestConnectSignsInThePersonAsked(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{wait: 5 * time.Second})
	hc := *e.certs
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var location string
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		resp.Body.Close()
		location = resp.Header.Get("Location")
		return e.browser(grace).connect(ctx, p.URL, grace.account, true)
	})
	if got, err := e.call(ctx, grace, pr, "whoami"); err != nil || !strings.Contains(got, grace.account) {
		t.Fatalf("whoami %q, %v", got, err)
	}
	prompts, _ := pr.snapshot()
	u, err := url.Parse(location)
	if err != nil || u.Path != "/signin" || u.Query().Get("as") != grace.id || u.Query().Get("return") != mcpauth.ConnectPath+prompts[0].RequestID {
		t.Errorf("a browser signed in as nobody was sent to %q; want the sign-in as Grace, back to her Connect link", location)
	}
}

// TestWaitEnds: nobody connects; the call fails with ErrTimedOut after the
// wait, the card hears TimedOut, and the request and the audit log say it
// expired.
func TestWaitEnds(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{wait: 300 * time.Millisecond})
	pr := newPrompter(nil)
	_, err := e.call(ctx, ada, pr, "whoami")
	if !errors.Is(err, mcpauth.ErrTimedOut) {
		t.Fatalf("err = %v, want ErrTimedOut", err)
	}
	prompts, outcomes := pr.snapshot()
	if len(prompts) != 1 || !slices.Equal(outcomes, []mcpauth.Outcome{mcpauth.TimedOut}) {
		t.Errorf("prompts %d, outcomes %v", len(prompts), outcomes)
	}
	r, err := e.st.MCPAuthRequest(ctx, prompts[0].RequestID)
	if err != nil || r.Status != store.MCPAuthExpired {
		t.Errorf("request %+v, %v; want expired", r.Status, err)
	}
	if len(e.audit(mcpauth.ActionExpired)) != 1 {
		t.Errorf("expired audit records: %d", len(e.audit(mcpauth.ActionExpired)))
	}
	// The link is dead now.
	resp, body, err := e.browser(ada).get(ctx, prompts[0].URL)
	if err != nil || resp.StatusCode != http.StatusGone {
		t.Errorf("expired link: %v %v %s", resp.StatusCode, err, body)
	}
}

// TestDeclined: the person presses Deny; the call fails as refused, and
// the card hears Refused.
func TestDeclined(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	br := e.browser(ada)
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		return br.connect(ctx, p.URL, ada.account, false)
	})
	_, err := e.call(ctx, ada, pr, "whoami")
	if !errors.Is(err, mcpauth.ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	if _, o := pr.snapshot(); !slices.Equal(o, []mcpauth.Outcome{mcpauth.Refused}) {
		t.Errorf("outcomes %v", o)
	}
	<-pr.done
	if !strings.Contains(pr.pages[0], "was not connected") {
		t.Errorf("callback page: %s", pr.pages[0])
	}
}

// TestNobodyToAsk: a view's call or a run without a person has no waiter:
// the call fails at once with ErrNotConnected, asking nobody.
func TestNobodyToAsk(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	_, err := e.call(ctx, ada, nil, "whoami")
	if !errors.Is(err, mcpauth.ErrNotConnected) {
		t.Fatalf("err = %v, want ErrNotConnected", err)
	}
}

// TestRefresh: an expired token is refreshed (with the resource
// parameter) without asking the person; a refresh the authorization
// server refuses ends the connection, audited, and the person is asked
// again.
func TestRefresh(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{knobs: []func(*fakeauth.Knobs){func(k *fakeauth.Knobs) { k.AccessTokenLifetime = 31 * time.Second }}})
	if _, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil {
		t.Fatal(err)
	}
	// Tokens are refreshed 30 s before they expire: this one at once.
	time.Sleep(1100 * time.Millisecond)
	before := e.as.Stats()
	pr := newPrompter(nil)
	if got, err := e.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("after expiry: %q, %v", got, err)
	}
	after := e.as.Stats()
	if after.Refreshes != before.Refreshes+1 {
		t.Errorf("refreshes %d → %d, want one more", before.Refreshes, after.Refreshes)
	}
	if countOf(after.Resources, e.rs.URL) <= countOf(before.Resources, e.rs.URL) {
		t.Errorf("the refresh sent no resource parameter")
	}
	if p, _ := pr.snapshot(); len(p) != 0 {
		t.Errorf("asked on refresh: %+v", p)
	}
	if len(e.audit(mcpauth.ActionRefreshed)) == 0 {
		t.Errorf("refresh not audited")
	}

	e.as.Configure(func(k *fakeauth.Knobs) { k.FailRefresh = true })
	time.Sleep(1100 * time.Millisecond)
	pr = e.consenting(ada)
	if got, err := e.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("after a refused refresh: %q, %v", got, err)
	}
	if p, _ := pr.snapshot(); len(p) != 1 {
		t.Errorf("after a refused refresh the person was asked %d times, want once", len(p))
	}
	var why []string
	for _, r := range e.audit(mcpauth.ActionRefused) {
		why = append(why, fmt.Sprint(r.Fields["why"]))
	}
	if !slices.ContainsFunc(why, func(s string) bool { return strings.Contains(s, "refused to refresh") }) {
		t.Errorf("refused refresh not audited: %v", why)
	}
}

// TestStepUp: a tool that needs a scope the token lacks answers 403
// insufficient_scope; the person is asked again, for the scopes they had
// and the new one, and the call goes through.
func TestStepUp(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	pr := e.consenting(ada)
	cs, err := e.session(ctx, ada, pr)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	wctx := mcpauth.WithWaiter(ctx, mcpauth.Waiter{Prompter: pr})
	if _, err := cs.CallTool(wctx, &mcp.CallToolParams{Name: "list_customers", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(wctx, &mcp.CallToolParams{Name: "update_customer", Arguments: map[string]any{"id": "c1", "name": "Contoso"}})
	if err != nil || res.IsError {
		t.Fatalf("update_customer: %v %+v %v", err, res, res.Content[0].(*mcp.TextContent).Text)
	}
	if p, _ := pr.snapshot(); len(p) != 2 {
		t.Errorf("asked %d times, want twice (connect, then step-up)", len(p))
	}
	c, err := e.st.MCPConnection(ctx, tenant, ada.id, "default", "crm")
	if err != nil || !slices.Contains(c.Scopes, fakeauth.ScopeRead) || !slices.Contains(c.Scopes, fakeauth.ScopeWrite) {
		t.Errorf("scopes kept %v, %v; want crm.read and crm.write", c.Scopes, err)
	}
}

// TestReplayAndForeignState: the callback answers a state once; a second
// use of the same answer, and a state this service never made, are
// refused and audited.
func TestReplayAndForeignState(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	br := e.browser(ada)
	var callback string
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		resp, _, err := br.get(ctx, p.URL)
		if err != nil {
			return 0, "", err
		}
		authURL := resp.Header.Get("Location")
		res, err := fakeauth.AnswerConsent(ctx, br.hc, authURL, ada.account, true)
		if err != nil {
			return 0, "", err
		}
		callback = e.base + mcpauth.CallbackPath + "?" + url.Values{"code": {res.Code}, "state": {res.State}, "iss": {res.Iss}}.Encode()
		r, body, err := br.get(ctx, callback)
		return r.StatusCode, body, err
	})
	if _, err := e.call(ctx, ada, pr, "whoami"); err != nil {
		t.Fatal(err)
	}
	<-pr.done
	resp, body, err := br.get(ctx, callback)
	if err != nil || resp.StatusCode != http.StatusGone {
		t.Errorf("replayed callback: %v %v %s", resp.StatusCode, err, body)
	}
	resp, _, err = br.get(ctx, e.base+mcpauth.CallbackPath+"?code=x&state=never-made")
	if err != nil || resp.StatusCode != http.StatusGone {
		t.Errorf("foreign state: %v %v", resp.StatusCode, err)
	}
	if n := len(e.audit(mcpauth.ActionRefused)); n != 2 {
		t.Errorf("refusals audited: %d, want 2", n)
	}
}

// TestHostileAuthorizationServer: what an authorization server answers is
// refused, with an audited reason, a Refused outcome for the card and
// words for the person, when it is too slow, too large, not JSON, from
// another issuer, sends the person to plain http, answers with the iss of
// another server, or gives a token for another resource.
func TestHostileAuthorizationServer(t *testing.T) {
	cases := []struct {
		name  string
		knob  func(*fakeauth.Knobs)
		words string
		asked bool
	}{
		{"slow metadata", func(k *fakeauth.Knobs) { k.MetadataDelay = 5 * time.Second }, "in time", false},
		{"huge metadata", func(k *fakeauth.Knobs) { k.MetadataSize = 50 << 20 }, "too large", false},
		{"malformed metadata", func(k *fakeauth.Knobs) { k.MetadataMalformed = true }, "", false},
		{"another issuer's metadata", func(k *fakeauth.Knobs) { k.MetadataIssuer = "https://evil.example" }, "", false},
		{"http authorization endpoint", func(k *fakeauth.Knobs) { k.InsecureAuthorizationEndpoint = true }, "https", false},
		{"wrong iss in the answer", func(k *fakeauth.Knobs) { k.ResponseIssuer = "https://evil.example" }, "issuer", true},
		{"token for another resource", func(k *fakeauth.Knobs) { k.Audience = "https://other.example/mcp" }, "another resource", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxFor(t)
			e := newEnv(t, envOpts{knobs: []func(*fakeauth.Knobs){c.knob}})
			pr := e.consenting(ada)
			_, err := e.call(ctx, ada, pr, "whoami")
			if !errors.Is(err, mcpauth.ErrRefused) && !errors.Is(err, mcpauth.ErrNotConnected) {
				t.Fatalf("err = %v, want a refusal", err)
			}
			var w interface{ Words() string }
			if !errors.As(err, &w) || (c.words != "" && !strings.Contains(w.Words(), c.words)) {
				t.Errorf("words %v; want them to say %q", err, c.words)
			}
			refused := e.audit(mcpauth.ActionRefused)
			if len(refused) == 0 || refused[len(refused)-1].Fields["why"] == "" {
				t.Errorf("refusal not audited with a reason: %+v", refused)
			}
			prompts, outcomes := pr.snapshot()
			if c.asked != (len(prompts) == 1) {
				t.Errorf("asked %d times, want asked=%v", len(prompts), c.asked)
			}
			if c.asked && !slices.Equal(outcomes, []mcpauth.Outcome{mcpauth.Refused}) {
				t.Errorf("outcomes %v, want [Refused]", outcomes)
			}
			if _, err := e.st.MCPConnection(ctx, tenant, ada.id, "default", "crm"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a connection was kept: %v", err)
			}
		})
	}
}

// TestTokensKeptSealed: nothing of a token is in the store's file, the
// audit log or the log: the grant is sealed with the token keys.
func TestTokensKeptSealed(t *testing.T) {
	ctx := ctxFor(t)
	dir := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(dir, "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOpts{st: st})
	if _, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil {
		t.Fatal(err)
	}
	recs, _ := json.Marshal(e.audit(""))
	st.Close()
	raw, err := os.ReadFile(filepath.Join(dir, "teamsbot.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range e.rs.Authorizations() {
		tok := strings.TrimPrefix(h, "Bearer ")
		// A JWT's signature alone is enough to spot it.
		sig := tok[strings.LastIndexByte(tok, '.')+1:]
		if strings.Contains(string(raw), sig) {
			t.Errorf("the store's file holds the access token in the clear")
		}
		if strings.Contains(string(recs), sig) {
			t.Errorf("the audit log holds the access token")
		}
	}
}

// TestDisconnectAndRevoke: after the person disconnects, or an admin
// revokes, the next call asks again; both are audited.
func TestDisconnectAndRevoke(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{})
	if _, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil {
		t.Fatal(err)
	}
	n, err := e.b.Disconnect(ctx, ada.mcp(), "default", "crm")
	if err != nil || n != 1 {
		t.Fatalf("disconnect: %d, %v", n, err)
	}
	if _, err := e.call(ctx, ada, nil, "whoami"); !errors.Is(err, mcpauth.ErrNotConnected) {
		t.Errorf("after disconnect: %v, want ErrNotConnected", err)
	}
	if _, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil {
		t.Fatal(err)
	}
	n, err = e.b.Revoke(ctx, store.MCPConnectionFilter{TenantID: tenant, AgentID: "default", Server: "crm"}, "admin-1", "revoked by a tenant admin")
	if err != nil || n != 1 {
		t.Fatalf("revoke: %d, %v", n, err)
	}
	if _, err := e.call(ctx, ada, nil, "whoami"); !errors.Is(err, mcpauth.ErrNotConnected) {
		t.Errorf("after revoke: %v, want ErrNotConnected", err)
	}
	if len(e.audit(mcpauth.ActionDisconnected)) != 1 {
		t.Errorf("disconnect not audited")
	}
	rev := e.audit(mcpauth.ActionRevoked)
	if len(rev) != 1 || rev[0].Actor != "admin-1" {
		t.Errorf("revocations audited: %+v", rev)
	}
}

// TestTwoReplicas: on PostgreSQL, the run waits on one replica and the
// person's browser reaches the other: the answer goes through the
// database, and the connection serves both.
func TestTwoReplicas(t *testing.T) {
	ctx := ctxFor(t)
	url := pgtest.Database(t)
	open := func() *store.Store {
		st, err := store.OpenPostgres(ctx, url, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	keys := t.TempDir()
	one := newEnv(t, envOpts{st: open(), dataDir: keys})
	two := newEnv(t, envOpts{st: open(), dataDir: keys, as: one.as, rs: one.rs})
	br := two.browser(ada)
	// Both replicas serve the client ID metadata document.
	one.as.Configure(func(k *fakeauth.Knobs) { k.DocumentClient = fakeauth.Client(one.site.Cert, two.site.Cert) })
	trusted := fakeauth.Client(one.as.Cert, one.rs.Cert, one.site.Cert, two.site.Cert)
	trusted.CheckRedirect = br.hc.CheckRedirect
	br.hc = trusted
	// Behind one name, the callback reaches the replica that is not
	// waiting.
	br.rewrite = func(u string) string { return strings.Replace(u, one.base, two.base, 1) }
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		return br.connect(ctx, p.URL, ada.account, true)
	})
	if got, err := one.call(ctx, ada, pr, "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami on replica one: %q, %v (%v)", got, err, pr.errs)
	}
	if got, err := two.call(ctx, ada, newPrompter(nil), "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("whoami on replica two: %q, %v", got, err)
	}
}

// TestDynamicRegistrationOnce: the client an authorization server
// registered for the first person serves the next one: it is registered
// once, not once per authorization.
func TestDynamicRegistrationOnce(t *testing.T) {
	ctx := ctxFor(t)
	e := newEnv(t, envOpts{http: true})
	for _, p := range []person{ada, grace} {
		if got, err := e.call(ctx, p, e.consenting(p), "whoami"); err != nil || !strings.Contains(got, p.account) {
			t.Fatalf("%s: %q, %v", p.name, got, err)
		}
	}
	if n := e.as.Stats().Registrations; n != 1 {
		t.Errorf("registrations = %d, want 1", n)
	}
}

// TestTokenKeysRotate: after `teamsbot keys rotate` a connection sealed by
// the older key still opens (and the next refresh is sealed by the new
// one); once the older key is retired, a connection it sealed no longer
// opens: it is dropped, audited, and the person connects again.
func TestTokenKeysRotate(t *testing.T) {
	ctx := ctxFor(t)
	keys := t.TempDir()
	e := newEnv(t, envOpts{dataDir: keys})
	if _, err := e.call(ctx, ada, e.consenting(ada), "whoami"); err != nil {
		t.Fatal(err)
	}
	old, err := e.st.MCPConnection(ctx, tenant, ada.id, "default", "crm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mcpauth.TokenKeys(keys).Rotate(time.Now()); err != nil {
		t.Fatal(err)
	}
	// A restarted service reads the rotated file.
	again := newEnv(t, envOpts{dataDir: keys, st: e.st, as: e.as, rs: e.rs})
	if got, err := again.call(ctx, ada, newPrompter(nil), "whoami"); err != nil || !strings.Contains(got, ada.account) {
		t.Fatalf("after rotate: %q, %v", got, err)
	}
	if found, err := mcpauth.TokenKeys(keys).Retire(old.KeyID); err != nil || !found {
		t.Fatalf("retire %s: %v %v", old.KeyID, found, err)
	}
	retired := newEnv(t, envOpts{dataDir: keys, st: e.st, as: e.as, rs: e.rs})
	if _, err := retired.call(ctx, ada, nil, "whoami"); !errors.Is(err, mcpauth.ErrNotConnected) {
		t.Fatalf("after retire: %v, want ErrNotConnected", err)
	}
	var why []string
	for _, r := range e.audit(mcpauth.ActionRefused) {
		why = append(why, fmt.Sprint(r.Fields["why"]))
	}
	if !slices.ContainsFunc(why, func(s string) bool { return strings.Contains(s, "no longer opens") }) {
		t.Errorf("the dropped connection is not audited: %v", why)
	}
}
