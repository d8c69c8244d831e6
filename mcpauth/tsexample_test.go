package mcpauth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv/fakeauth"
	"teamsbot/internal/web"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// cookieLog records the cookies that responses from one host set: what an
// authorization server keeps in the person's browser.
type cookieLog struct {
	base http.RoundTripper
	host string
	mu   sync.Mutex
	set  []string
}

func (c *cookieLog) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil && req.URL.Host == c.host {
		c.mu.Lock()
		c.set = append(c.set, resp.Header.Values("Set-Cookie")...)
		c.mu.Unlock()
	}
	return resp, err
}

func (c *cookieLog) cookies() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.set, "\n")
}

// TestTSExampleThroughTheBroker connects a person, through this package's
// broker and pages, to a third party's MCP server and authorization
// server: the MCP TypeScript SDK's example (simpleStreamableHttp with
// --oauth --oauth-strict and its demo provider), on plain http on
// localhost, as the service on loopback http reaches it in local
// development. The service registers itself dynamically (no client ID
// metadata document without https), the person's browser follows the
// Connect link, the demo signs them in as its demo_user and sends them
// back to the callback, the run's call goes through with a token the
// server accepts as issued for itself, and a second session of the same
// person is not asked again.
//
// What the example does differently from the specification's fuller
// authorization servers, and the broker takes: its authorization
// response carries no iss and its metadata does not advertise
// authorization_response_iss_parameter_supported (RFC 9207 lets a client
// accept such an answer; the broker keeps the authorization endpoint's
// origin as the issuer), its access tokens are opaque (the audience is checked by the server
// through introspection, not by the broker), and it offers no refresh
// token (offline_access is not in its scopes_supported: the person is
// asked again when the hour-long token expires).
func TestTSExampleThroughTheBroker(t *testing.T) {
	ex := fakeauth.StartTSExample(t)
	ctx := ctxFor(t)
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ec := echo.New()
	ec.HTTPErrorHandler = web.ErrorHandler(nil)
	hs := httptest.NewServer(ec)
	t.Cleanup(hs.Close)
	b, err := mcpauth.New(mcpauth.Options{
		Store: st, PublicBaseURL: netaddr.MustParseOrigin(hs.URL), DataDir: t.TempDir(),
		AllowHTTP: true, Wait: 20 * time.Second, Poll: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	registerPages(t, b, ec, false)
	server := mcpauth.Server{AgentID: "default", Name: "demo", URL: ex.MCPURL}

	issuer, _ := url.Parse(ex.Issuer)
	demoCookies := &cookieLog{base: http.DefaultTransport, host: issuer.Host}
	br := &browser{p: ada, hc: &http.Client{
		Transport:     demoCookies,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	pr := newPrompter(func(ctx context.Context, p mcpauth.Prompt) (int, string, error) {
		// The demo signs in whoever comes, with no page: the account
		// is its own.
		return br.connect(ctx, p.URL, "", true)
	})
	greet := func(pr mcpauth.Prompter) (string, error) {
		wctx := mcpauth.WithWaiter(ctx, mcpauth.Waiter{Prompter: pr, RunID: "run-ts"})
		t := &mcp.StreamableClientTransport{Endpoint: ex.MCPURL, HTTPClient: &http.Client{}, OAuthHandler: b.PersonHandler(ada.mcp(), server)}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(wctx, t, nil)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		res, err := cs.CallTool(wctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
		if err != nil {
			return "", err
		}
		var text strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			return "", fmt.Errorf("tool error: %s", text.String())
		}
		return text.String(), nil
	}

	got, err := greet(pr)
	if err != nil {
		t.Fatalf("greet through the broker: %v (browser: %v %v)\n%s", err, pr.errs, pr.pages, ex.Log)
	}
	if got != "Hello, Ada!" {
		t.Errorf("greet = %q, want Hello, Ada!", got)
	}
	prompts, outcomes := pr.snapshot()
	if len(prompts) != 1 || prompts[0].Server != "demo" || !strings.HasPrefix(prompts[0].URL, hs.URL+mcpauth.ConnectPath) {
		t.Errorf("prompts = %+v, want one Connect link to demo", prompts)
	}
	if len(outcomes) != 1 || outcomes[0] != mcpauth.Connected {
		t.Errorf("outcomes = %v, want [Connected]", outcomes)
	}
	<-pr.done
	if len(pr.pages) != 1 || !strings.Contains(pr.pages[0], "demo is connected") {
		t.Errorf("the callback page said %q", pr.pages)
	}
	// The demo's authorization endpoint signed the person in as its one
	// user, and the example's MCP server took the broker's token,
	// issued for itself (--oauth-strict compares the token's resource
	// with its own URL).
	if c := demoCookies.cookies(); !strings.Contains(c, "demo_session=") || !strings.Contains(c, "demo_user") {
		t.Errorf("the demo did not sign the browser in as demo_user: %q", c)
	}
	if log := ex.Log.String(); !strings.Contains(log, "Authenticated user") || !strings.Contains(log, "href: '"+ex.MCPURL+"'") {
		t.Errorf("the example logged no request authenticated for %s:\n%s", ex.MCPURL, log)
	}

	c, err := st.MCPConnection(ctx, tenant, ada.id, "default", "demo")
	if err != nil {
		t.Fatalf("no connection kept: %v", err)
	}
	if want := strings.TrimSuffix(ex.Issuer, "/"); c.Issuer != want {
		t.Errorf("issuer kept %q, want %q", c.Issuer, want)
	}
	// The challenge names no scope: the example's scopes_supported are
	// asked for, without offline_access, which it does not offer.
	if !slices.Equal(c.Scopes, []string{"mcp:tools"}) {
		t.Errorf("scopes kept %v, want [mcp:tools]", c.Scopes)
	}
	recs, err := st.Audit(ctx, store.AuditQuery{TenantID: tenant, Action: mcpauth.ActionConnected})
	if err != nil || len(recs) != 1 || recs[0].Fields["registration"] != "dynamic" {
		t.Errorf("connected audit records %+v, %v; want one, registered dynamically", recs, err)
	}

	// A second session (a later run) is not asked again.
	again := newPrompter(nil)
	if got, err := greet(again); err != nil || got != "Hello, Ada!" {
		t.Fatalf("second session: %q, %v\n%s", got, err, ex.Log)
	}
	if p, _ := again.snapshot(); len(p) != 0 {
		t.Errorf("asked again: %+v", p)
	}
}
