package fakeauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"teamsbot/internal/testenv/fakeauth"
)

// world is an authorization server, a resource server it protects, and an
// HTTP client that trusts both.
type world struct {
	as *fakeauth.AuthServer
	rs *fakeauth.ResourceServer
	hc *http.Client
}

func newWorld(t *testing.T, set ...func(*fakeauth.Knobs)) *world {
	as := fakeauth.StartAuthServer(t, set...)
	rs := fakeauth.StartResourceServer(t, as)
	return &world{as: as, rs: rs, hc: fakeauth.Client(as.Cert, rs.Cert)}
}

// redirectURL is the client's redirect URI: AnswerConsent reads the
// redirect's location without following it, so nothing listens there.
const redirectURL = "http://127.0.0.1:9/callback"

// signInAs is an AuthorizationCodeFetcher for a person who presses Allow.
func signInAs(hc *http.Client, person string) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		return fakeauth.AnswerConsent(ctx, hc, args.URL, person, true)
	}
}

// connect connects go-sdk's MCP client to the resource server with an
// AuthorizationCodeHandler of cfg, whose Client and fetcher default to the
// world's client and a sign-in as Alice.
func (w *world) connect(ctx context.Context, t *testing.T, cfg auth.AuthorizationCodeHandlerConfig) (*mcp.ClientSession, error) {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = w.hc
	}
	if cfg.AuthorizationCodeFetcher == nil {
		cfg.AuthorizationCodeFetcher = signInAs(w.hc, fakeauth.Alice)
	}
	if cfg.RedirectURL == "" && cfg.DynamicClientRegistrationConfig == nil {
		cfg.RedirectURL = redirectURL
	}
	h, err := auth.NewAuthorizationCodeHandler(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fakeauth-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: w.rs.URL, HTTPClient: w.hc, OAuthHandler: h}, nil)
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

// call calls a tool and fails the test on any error.
func call(ctx context.Context, t *testing.T, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s answered an error: %v", name, res.Content)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// bearers are the tokens of the Authorization headers the resource server
// received.
func (w *world) bearers() []string {
	var out []string
	for _, h := range w.rs.Authorizations() {
		out = append(out, strings.TrimPrefix(h, "Bearer "))
	}
	return out
}

// claims reads a token's claims without checking it.
func claims(t *testing.T, token string) *fakeauth.Claims {
	t.Helper()
	var c fakeauth.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &c); err != nil {
		t.Fatalf("token %q: %v", token, err)
	}
	return &c
}

// TestGoSDKClientSignsInEachWay runs go-sdk's AuthorizationCodeHandler
// against the servers with each way a client registers: a client ID
// metadata document, a pre-registered client with a secret, and dynamic
// registration of a confidential and of a public client. Each person
// reaches the server as themselves, with tokens for this resource only.
func TestGoSDKClientSignsInEachWay(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name     string
		person   string
		setup    func(t *testing.T, w *world) auth.AuthorizationCodeHandlerConfig
		clientID func(id string) bool
		auth     string // how the client authenticated at the token endpoint
	}{{
		name:   "client ID metadata document",
		person: fakeauth.Alice,
		setup: func(t *testing.T, w *world) auth.AuthorizationCodeHandlerConfig {
			var doc []byte
			site := fakeauth.ServeHTTPS(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/oauth/client.json" {
					http.NotFound(rw, r)
					return
				}
				rw.Header().Set("Content-Type", "application/json")
				rw.Write(doc)
			}))
			id := site.URL + "/oauth/client.json"
			doc, _ = json.Marshal(map[string]any{
				"client_id": id, "client_name": "Teams bot", "redirect_uris": []string{redirectURL},
				"grant_types": []string{"authorization_code", "refresh_token"}, "token_endpoint_auth_method": "none",
			})
			w.as.Configure(func(k *fakeauth.Knobs) { k.DocumentClient = fakeauth.Client(site.Cert) })
			return auth.AuthorizationCodeHandlerConfig{ClientIDMetadataDocumentConfig: &auth.ClientIDMetadataDocumentConfig{URL: id}}
		},
		clientID: func(id string) bool { return strings.HasSuffix(id, "/oauth/client.json") },
		auth:     "none",
	}, {
		name:   "pre-registered with a secret",
		person: fakeauth.Bob,
		setup: func(t *testing.T, w *world) auth.AuthorizationCodeHandlerConfig {
			w.as.AddClient("teams-bot", "s3cret", redirectURL)
			return auth.AuthorizationCodeHandlerConfig{PreregisteredClient: &oauthex.ClientCredentials{
				ClientID: "teams-bot", ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: "s3cret"},
			}}
		},
		clientID: func(id string) bool { return id == "teams-bot" },
		auth:     "client_secret_post", // go-sdk prefers it when the server lists it
	}, {
		name:   "dynamic registration, confidential",
		person: fakeauth.Alice,
		setup: func(t *testing.T, w *world) auth.AuthorizationCodeHandlerConfig {
			return auth.AuthorizationCodeHandlerConfig{DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
				Metadata: &oauthex.ClientRegistrationMetadata{
					RedirectURIs: []string{redirectURL}, ClientName: "Teams bot",
					TokenEndpointAuthMethod: "client_secret_basic", GrantTypes: []string{"authorization_code", "refresh_token"},
				},
			}}
		},
		clientID: func(id string) bool { return strings.HasPrefix(id, "dyn-") },
		auth:     "client_secret_basic",
	}, {
		name:   "dynamic registration, public",
		person: fakeauth.Bob,
		setup: func(t *testing.T, w *world) auth.AuthorizationCodeHandlerConfig {
			return auth.AuthorizationCodeHandlerConfig{DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
				Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{redirectURL}, TokenEndpointAuthMethod: "none"},
			}}
		},
		clientID: func(id string) bool { return strings.HasPrefix(id, "dyn-") },
		auth:     "none",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t)
			cfg := tt.setup(t, w)
			cfg.AuthorizationCodeFetcher = signInAs(w.hc, tt.person)
			s, err := w.connect(ctx, t, cfg)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			if got := text(call(ctx, t, s, "whoami", nil)); got != tt.person {
				t.Errorf("whoami = %q, want %q", got, tt.person)
			}
			if res := call(ctx, t, s, "list_customers", nil); !strings.Contains(text(res), "Contoso") {
				t.Errorf("list_customers = %q", text(res))
			}

			st := w.as.Stats()
			if st.CodesIssued != 1 || st.CodesRedeemed != 1 {
				t.Errorf("codes issued %d, redeemed %d; want one sign-in", st.CodesIssued, st.CodesRedeemed)
			}
			if wantReg := map[bool]int{true: 1}[cfg.DynamicClientRegistrationConfig != nil]; st.Registrations != wantReg {
				t.Errorf("registrations = %d, want %d", st.Registrations, wantReg)
			}
			if len(st.ClientIDs) == 0 || slices.ContainsFunc(st.ClientIDs, func(id string) bool { return !tt.clientID(id) }) {
				t.Errorf("client ids seen = %q", st.ClientIDs)
			}
			if len(st.Resources) != 2 || slices.ContainsFunc(st.Resources, func(r string) bool { return r != w.rs.URL }) {
				t.Errorf("resources asked = %q, want %s at /authorize and /token", st.Resources, w.rs.URL)
			}
			if !slices.Equal(st.ClientAuth, []string{tt.auth}) {
				t.Errorf("client authentication = %q, want %q", st.ClientAuth, tt.auth)
			}

			// Every token the server received is one of its own, for this
			// person and this resource, signed by the key the JWKS serves.
			keys := oidc.NewRemoteKeySet(oidc.ClientContext(ctx, w.as.Client()), w.as.URL+"/jwks")
			for _, tok := range w.bearers() {
				c := claims(t, tok)
				if c.Subject != tt.person || !slices.Equal(c.Audience, []string{w.rs.URL}) || c.Issuer != w.as.URL || !tt.clientID(c.ClientID) {
					t.Errorf("a token says sub %q, aud %q, iss %q, client_id %q", c.Subject, c.Audience, c.Issuer, c.ClientID)
				}
				if _, err := keys.VerifySignature(ctx, tok); err != nil {
					t.Errorf("the JWKS does not verify a token: %v", err)
				}
			}
		})
	}
}

// TestStepUpThroughTheTransport: a token with crm.read calls
// update_customer; the server answers 403 insufficient_scope, go-sdk's
// transport runs the authorization again for crm.read and crm.write (a
// second consent), and retries the call, which succeeds.
func TestStepUpThroughTheTransport(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	s, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{redirectURL}},
		},
		RequestRefreshToken: true,
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	first := claims(t, w.bearers()[0])
	// A scope is a set of names in any order (RFC 6749, section 3.3), and
	// go-sdk's client asks in no fixed one.
	if got := first.Scopes(); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values([]string{fakeauth.ScopeRead, fakeauth.ScopeOffline}))) {
		t.Errorf("the first token's scopes = %q, want crm.read (the 401's scope) and offline_access", got)
	}

	res := call(ctx, t, s, "update_customer", map[string]any{"id": "c1", "name": "Contoso Ltd"})
	var out struct{ ID, Name, UpdatedBy string }
	if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &out) != nil || out.UpdatedBy != fakeauth.Alice || out.Name != "Contoso Ltd" {
		t.Errorf("update_customer = %+v", res.StructuredContent)
	}
	st := w.as.Stats()
	if st.CodesIssued != 2 || st.CodesRedeemed != 2 {
		t.Errorf("codes issued %d, redeemed %d; want a second consent for the step-up", st.CodesIssued, st.CodesRedeemed)
	}
	if len(st.Scopes) < 2 || !slices.Contains(strings.Fields(st.Scopes[len(st.Scopes)-1]), fakeauth.ScopeWrite) {
		t.Errorf("scopes asked = %q, want crm.write in the step-up", st.Scopes)
	}
	last := claims(t, w.bearers()[len(w.bearers())-1])
	if got := last.Scopes(); !slices.Contains(got, fakeauth.ScopeRead) || !slices.Contains(got, fakeauth.ScopeWrite) {
		t.Errorf("the token after the step-up has %q, want crm.read and crm.write", got)
	}
}

// TestRefreshAfterExpiry: access tokens of a second; once the first has
// expired the server refuses it, and the client's next call goes through
// on a refreshed token, without another sign-in.
func TestRefreshAfterExpiry(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, func(k *fakeauth.Knobs) { k.AccessTokenLifetime = time.Second })
	w.as.AddClient("teams-bot", "", redirectURL)
	s, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"},
		RequestRefreshToken: true,
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	call(ctx, t, s, "whoami", nil)
	old := w.bearers()[0]
	time.Sleep(time.Until(claims(t, old).ExpiresAt.Time) + 50*time.Millisecond)
	if status, challenge := post(t, w, old, "whoami"); status != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) {
		t.Fatalf("an expired token got %d %q, want 401 invalid_token", status, challenge)
	}

	if got := text(call(ctx, t, s, "whoami", nil)); got != fakeauth.Alice {
		t.Errorf("whoami after expiry = %q", got)
	}
	st := w.as.Stats()
	if st.Refreshes == 0 || st.CodesIssued != 1 {
		t.Errorf("refreshes %d, codes issued %d; want refreshes and one sign-in", st.Refreshes, st.CodesIssued)
	}
	if last := w.bearers()[len(w.bearers())-1]; last == old {
		t.Error("the call after expiry carried the expired token")
	}
}

// TestFailedRefreshSignsInAgain: when the refresh answers invalid_grant,
// go-sdk sends the request without a token, gets the 401 and runs the
// authorization again.
func TestFailedRefreshSignsInAgain(t *testing.T) {
	ctx := t.Context()
	// oauth2 refreshes a token 10 s before it expires: an 11 s token is
	// due for refresh a second after it is issued.
	w := newWorld(t, func(k *fakeauth.Knobs) { k.AccessTokenLifetime = 11 * time.Second })
	w.as.AddClient("teams-bot", "", redirectURL)
	s, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"},
		RequestRefreshToken: true,
	})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	w.as.Configure(func(k *fakeauth.Knobs) { k.FailRefresh = true })
	time.Sleep(1200 * time.Millisecond)
	if got := text(call(ctx, t, s, "whoami", nil)); got != fakeauth.Alice {
		t.Errorf("whoami = %q", got)
	}
	st := w.as.Stats()
	if st.Requests["/token"] < 3 || st.Refreshes != 0 || st.CodesIssued != 2 {
		t.Errorf("token requests %d, refreshes %d, codes issued %d; want a failed refresh then a second sign-in", st.Requests["/token"], st.Refreshes, st.CodesIssued)
	}
}

// TestTokenForAnotherResourceIsRefused: the authorization server issues a
// token whose aud is another resource; the resource server answers 401
// invalid_token and go-sdk's client gives up after one authorization.
func TestTokenForAnotherResourceIsRefused(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t, func(k *fakeauth.Knobs) { k.Audience = "https://other.example/mcp" })
	w.as.AddClient("teams-bot", "", redirectURL)
	if _, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"},
	}); err == nil {
		t.Fatal("connected with a token for another resource")
	}
	// go-sdk's Connect tries server/discover, then initialize: each runs
	// the authorization once, so the server sees more than one token.
	toks := w.bearers()
	if len(toks) == 0 {
		t.Fatal("the server received no token")
	}
	for _, tok := range toks {
		if aud := claims(t, tok).Audience; !slices.Equal(aud, []string{"https://other.example/mcp"}) {
			t.Errorf("a token for %q reached the server", aud)
		}
		if status, challenge := post(t, w, tok, "whoami"); status != http.StatusUnauthorized || !strings.Contains(challenge, `error="invalid_token"`) {
			t.Errorf("the other resource's token got %d %q, want 401 invalid_token", status, challenge)
		}
	}
}

// TestRevokedPersonSignsInAgain: after RevokeUser the server refuses the
// person's token and the client signs them in again.
func TestRevokedPersonSignsInAgain(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	w.as.AddClient("teams-bot", "", redirectURL)
	s, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"}})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	w.as.RevokeUser(fakeauth.Alice)
	if _, err := w.as.Verify(w.bearers()[0]); !errors.Is(err, fakeauth.ErrRevoked) {
		t.Errorf("Verify of a revoked token: %v, want ErrRevoked", err)
	}
	if got := text(call(ctx, t, s, "whoami", nil)); got != fakeauth.Alice {
		t.Errorf("whoami = %q", got)
	}
	if st := w.as.Stats(); st.CodesIssued != 2 {
		t.Errorf("codes issued %d, want a second sign-in", st.CodesIssued)
	}
}

// TestGoSDKClientRefusesBrokenServers turns each attack knob on and checks
// that go-sdk's client does not sign in, and that no token reaches the
// resource server.
func TestGoSDKClientRefusesBrokenServers(t *testing.T) {
	tests := []struct {
		name       string
		knobs      func(*fakeauth.Knobs)
		codes      bool // whether the person got as far as a code
		timeout    time.Duration
		wantErrOne string
	}{
		{name: "issuer differs from its URL", knobs: func(k *fakeauth.Knobs) { k.MetadataIssuer = "https://login.example" }, wantErrOne: "issuer"},
		{name: "malformed metadata", knobs: func(k *fakeauth.Knobs) { k.MetadataMalformed = true }, wantErrOne: "metadata"},
		{name: "50 MB of metadata", knobs: func(k *fakeauth.Knobs) { k.MetadataSize = 50 << 20 }, wantErrOne: "metadata"},
		{name: "slow metadata", knobs: func(k *fakeauth.Knobs) { k.MetadataDelay = time.Minute }, timeout: 500 * time.Millisecond, wantErrOne: "deadline"},
		{name: "wrong iss in the redirect", knobs: func(k *fakeauth.Knobs) { k.ResponseIssuer = "https://login.example" }, codes: true, wantErrOne: "issuer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			w := newWorld(t, tt.knobs)
			w.as.AddClient("teams-bot", "", redirectURL)
			_, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"}})
			if err == nil || !strings.Contains(err.Error(), tt.wantErrOne) {
				t.Fatalf("connect: %v, want an error about %q", err, tt.wantErrOne)
			}
			t.Logf("go-sdk: %v", err)
			st := w.as.Stats()
			if (st.CodesIssued > 0) != tt.codes || st.CodesRedeemed != 0 || len(w.rs.Authorizations()) != 0 {
				t.Errorf("codes issued %d, redeemed %d, tokens at the server %d; want codes %v, none redeemed, no token", st.CodesIssued, st.CodesRedeemed, len(w.rs.Authorizations()), tt.codes)
			}
		})
	}
}

// TestMetadata reads both servers' metadata as clients do.
func TestMetadata(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	asm, err := auth.GetAuthServerMetadata(ctx, w.as.URL, w.hc)
	if err != nil || asm == nil {
		t.Fatalf("go-sdk reads the metadata: %v, %v", asm, err)
	}
	if asm.Issuer != w.as.URL || !asm.AuthorizationResponseIssParameterSupported || !asm.ClientIDMetadataDocumentSupported ||
		!slices.Equal(asm.CodeChallengeMethodsSupported, []string{"S256"}) || !slices.Contains(asm.ScopesSupported, fakeauth.ScopeOffline) ||
		asm.RegistrationEndpoint != w.as.URL+"/register" || !slices.Contains(asm.TokenEndpointAuthMethodsSupported, "client_secret_basic") {
		t.Errorf("metadata = %+v", asm)
	}
	oidcDoc, err := oauthex.GetAuthServerMeta(ctx, w.as.URL+"/.well-known/openid-configuration", w.as.URL, w.hc)
	if err != nil || oidcDoc.TokenEndpoint != w.as.URL+"/token" {
		t.Errorf("the OpenID Connect location: %+v, %v", oidcDoc, err)
	}
	w.as.Configure(func(k *fakeauth.Knobs) { k.InsecureAuthorizationEndpoint = true })
	if asm, _ := auth.GetAuthServerMetadata(ctx, w.as.URL, w.hc); asm == nil || !strings.HasPrefix(asm.AuthorizationEndpoint, "http://127.0.0.1:") {
		t.Errorf("with InsecureAuthorizationEndpoint the endpoint is %+v, want http://", asm)
	}

	for _, u := range []string{w.rs.MetadataURL, strings.TrimSuffix(w.rs.URL, "/mcp") + "/.well-known/oauth-protected-resource"} {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, u, w.rs.URL, w.hc)
		if err != nil || !slices.Equal(prm.AuthorizationServers, []string{w.as.URL}) {
			t.Errorf("%s: %+v, %v", u, prm, err)
		}
	}
}

// TestResourceServerChallenges reads the resource server's refusals as
// RFC 6750 and the MCP specification write them.
func TestResourceServerChallenges(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	status, challenge := post(t, w, "", "whoami")
	if want := `Bearer scope="crm.read", resource_metadata="` + w.rs.MetadataURL + `"`; status != http.StatusUnauthorized || challenge != want {
		t.Errorf("without a token: %d %s, want 401 %s", status, challenge, want)
	}
	if status, challenge := post(t, w, "not.a.token", "whoami"); status != http.StatusUnauthorized || !strings.HasPrefix(challenge, `Bearer error="invalid_token"`) {
		t.Errorf("a malformed token: %d %s, want 401 invalid_token", status, challenge)
	}

	w.as.AddClient("teams-bot", "", redirectURL)
	before := len(w.bearers())
	if _, err := w.connect(ctx, t, auth.AuthorizationCodeHandlerConfig{PreregisteredClient: &oauthex.ClientCredentials{ClientID: "teams-bot"}}); err != nil {
		t.Fatal(err)
	}
	read := w.bearers()[before] // crm.read, the 401's scope
	if status, _ := post(t, w, read, "list_customers"); status != http.StatusOK {
		t.Errorf("list_customers with crm.read: %d, want 200", status)
	}
	want := `Bearer error="insufficient_scope", error_description="the tool needs crm.read crm.write", scope="crm.read crm.write", resource_metadata="` + w.rs.MetadataURL + `"`
	for name, body := range map[string]string{"a call": toolCall("update_customer"), "a batch": "[" + toolCall("whoami") + "," + toolCall("update_customer") + "]"} {
		if status, challenge := postBody(t, w, read, body); status != http.StatusForbidden || challenge != want {
			t.Errorf("update_customer with crm.read in %s: %d %s, want 403 %s", name, status, challenge, want)
		}
	}
}

// toolCall is the JSON-RPC request of a tools/call.
func toolCall(tool string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
}

// post sends a tools/call straight to the resource server with token, and
// returns the status and the WWW-Authenticate challenge.
func post(t *testing.T, w *world, token, tool string) (int, string) {
	t.Helper()
	return postBody(t, w, token, toolCall(tool))
}

// postBody posts body to the resource server with token.
func postBody(t *testing.T, w *world, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, w.rs.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// TestAuthorizationServerRules holds the authorization server to the rules
// a client relies on, on the wire, with golang.org/x/oauth2 as the client.
func TestAuthorizationServerRules(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	w.as.AddClient("public", "", redirectURL)
	w.as.AddClient("confidential", "s3cret", redirectURL)
	octx := context.WithValue(ctx, oauth2.HTTPClient, w.hc)
	config := func(id, secret string, style oauth2.AuthStyle) *oauth2.Config {
		return &oauth2.Config{
			ClientID: id, ClientSecret: secret, RedirectURL: redirectURL, Scopes: []string{fakeauth.ScopeRead},
			Endpoint: oauth2.Endpoint{AuthURL: w.as.URL + "/authorize", TokenURL: w.as.URL + "/token", AuthStyle: style},
		}
	}
	public := config("public", "", oauth2.AuthStyleInParams)
	resource := oauth2.SetAuthURLParam("resource", w.rs.URL)
	// signIn runs the authorization request with PKCE and resource (and
	// opts), and Alice's Allow.
	signIn := func(c *oauth2.Config, opts ...oauth2.AuthCodeOption) (res *auth.AuthorizationResult, verifier string, err error) {
		verifier = oauth2.GenerateVerifier()
		opts = append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), resource}, opts...)
		res, err = fakeauth.AnswerConsent(ctx, w.hc, c.AuthCodeURL("the-state", opts...), fakeauth.Alice, true)
		return res, verifier, err
	}
	mustSignIn := func(c *oauth2.Config) (code, verifier string) {
		t.Helper()
		res, v, err := signIn(c)
		if err != nil {
			t.Fatalf("sign-in: %v", err)
		}
		return res.Code, v
	}
	errorCode := func(err error) string {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return re.ErrorCode
		}
		return fmt.Sprint(err)
	}

	t.Run("authorization response", func(t *testing.T) {
		res, _, err := signIn(public)
		if err != nil || res.Code == "" || res.State != "the-state" || res.Iss != w.as.URL {
			t.Errorf("Allow answered %+v, %v; want a code, the state and iss %s", res, err, w.as.URL)
		}
		v := oauth2.GenerateVerifier()
		u := public.AuthCodeURL("st", oauth2.S256ChallengeOption(v), resource)
		if _, err := fakeauth.AnswerConsent(ctx, w.hc, u, fakeauth.Alice, false); err == nil || !strings.Contains(err.Error(), "access_denied") {
			t.Errorf("Deny answered %v, want access_denied", err)
		}
	})
	t.Run("authorization request refused", func(t *testing.T) {
		for _, tt := range []struct {
			name, url, want string
		}{
			{"no PKCE", public.AuthCodeURL("st", resource), "invalid_request"},
			{"plain PKCE", public.AuthCodeURL("st", resource, oauth2.SetAuthURLParam("code_challenge", oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("code_challenge_method", "plain")), "invalid_request"},
			{"no resource", public.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier())), "invalid_target"},
			{"unknown scope", public.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), resource, oauth2.SetAuthURLParam("scope", "crm.admin")), "invalid_scope"},
			{"unregistered redirect URI", public.AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), resource, oauth2.SetAuthURLParam("redirect_uri", "https://evil.example/cb")), "400 Bad Request"},
			{"unknown client", config("nobody", "", 0).AuthCodeURL("st", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), resource), "400 Bad Request"},
		} {
			if _, err := fakeauth.AnswerConsent(ctx, w.hc, tt.url, fakeauth.Alice, true); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
			}
		}
	})
	t.Run("code", func(t *testing.T) {
		code, v := mustSignIn(public)
		if _, err := public.Exchange(octx, code, oauth2.VerifierOption(oauth2.GenerateVerifier()), resource); errorCode(err) != "invalid_grant" {
			t.Errorf("a wrong code_verifier: %v, want invalid_grant", err)
		}
		if _, err := public.Exchange(octx, code, oauth2.VerifierOption(v), resource); errorCode(err) != "invalid_grant" {
			t.Errorf("the code after a failed exchange: %v, want invalid_grant (spent)", err)
		}
		code, v = mustSignIn(public)
		if _, err := public.Exchange(octx, code, oauth2.VerifierOption(v), oauth2.SetAuthURLParam("resource", "https://other.example/mcp")); errorCode(err) != "invalid_target" {
			t.Errorf("another resource at the token endpoint: %v, want invalid_target", err)
		}
		code, v = mustSignIn(public)
		if _, err := public.Exchange(octx, code, oauth2.VerifierOption(v)); errorCode(err) != "invalid_target" {
			t.Errorf("no resource at the token endpoint: %v, want invalid_target", err)
		}
		code, v = mustSignIn(public)
		tok, err := public.Exchange(octx, code, oauth2.VerifierOption(v), resource)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := w.as.Verify(tok.AccessToken); err != nil || c.Subject != fakeauth.Alice || tok.Expiry.Before(time.Now().Add(50*time.Minute)) {
			t.Errorf("the token: %+v, %v, expiring %v", c, err, tok.Expiry)
		}
		if _, err := public.Exchange(octx, code, oauth2.VerifierOption(v), resource); errorCode(err) != "invalid_grant" {
			t.Errorf("the code a second time: %v, want invalid_grant", err)
		}
		if _, err := w.as.Verify(tok.AccessToken); !errors.Is(err, fakeauth.ErrRevoked) {
			t.Errorf("the token of a replayed code: %v, want ErrRevoked", err)
		}
	})
	t.Run("client authentication", func(t *testing.T) {
		for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
			c := config("confidential", "s3cret", style)
			code, v := mustSignIn(c)
			if _, err := c.Exchange(octx, code, oauth2.VerifierOption(v), resource); err != nil {
				t.Errorf("the right secret (style %d): %v", style, err)
			}
			c.ClientSecret = "guess"
			code, v = mustSignIn(c)
			if _, err := c.Exchange(octx, code, oauth2.VerifierOption(v), resource); errorCode(err) != "invalid_client" {
				t.Errorf("a wrong secret (style %d): %v, want invalid_client", style, err)
			}
		}
	})
	t.Run("revocation", func(t *testing.T) {
		code, v := mustSignIn(public)
		tok, err := public.Exchange(octx, code, oauth2.VerifierOption(v), resource)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := w.hc.PostForm(w.as.URL+"/revoke", url.Values{"client_id": {"public"}, "token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}})
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("revoke: %v, %v", resp, err)
		}
		resp.Body.Close()
		if _, err := w.as.Verify(tok.AccessToken); !errors.Is(err, fakeauth.ErrRevoked) {
			t.Errorf("the access token of a revoked refresh token: %v, want ErrRevoked", err)
		}
	})
	t.Run("refresh rotation", func(t *testing.T) {
		code, v := mustSignIn(public)
		first, err := public.Exchange(octx, code, oauth2.VerifierOption(v), resource)
		if err != nil {
			t.Fatal(err)
		}
		second, err := public.TokenSource(octx, &oauth2.Token{RefreshToken: first.RefreshToken}).Token()
		if err != nil || second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken {
			t.Fatalf("refresh: %v; want new tokens", err)
		}
		if c, err := w.as.Verify(second.AccessToken); err != nil || !slices.Equal(c.Audience, []string{w.rs.URL}) || c.Scope != fakeauth.ScopeRead {
			t.Errorf("the refreshed token: %+v, %v; want the same resource and scope", c, err)
		}
		if _, err := public.TokenSource(octx, &oauth2.Token{RefreshToken: first.RefreshToken}).Token(); errorCode(err) != "invalid_grant" {
			t.Errorf("the spent refresh token: %v, want invalid_grant", err)
		}
		if _, err := public.TokenSource(octx, &oauth2.Token{RefreshToken: second.RefreshToken}).Token(); errorCode(err) != "invalid_grant" {
			t.Errorf("the current refresh token after a replay: %v, want invalid_grant (grant revoked)", err)
		}
	})
}

// TestClientIDMetadataDocumentChecks: the authorization server accepts a
// URL client_id only when its document is what the draft requires.
func TestClientIDMetadataDocumentChecks(t *testing.T) {
	ctx := t.Context()
	w := newWorld(t)
	docs := map[string]map[string]any{}
	site := fakeauth.ServeHTTPS(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved.json" {
			http.Redirect(rw, r, "/good.json", http.StatusFound)
			return
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(doc)
	}))
	doc := func(path string, change func(map[string]any)) string {
		d := map[string]any{"client_id": site.URL + path, "client_name": "Teams bot", "redirect_uris": []string{redirectURL}}
		if change != nil {
			change(d)
		}
		docs[path] = d
		return site.URL + path
	}
	good := doc("/good.json", nil)
	tests := map[string]string{
		"good":                  good,
		"client_id of another":  doc("/other.json", func(d map[string]any) { d["client_id"] = good }),
		"redirect not listed":   doc("/redirect.json", func(d map[string]any) { d["redirect_uris"] = []string{"https://evil.example/cb"} }),
		"a secret":              doc("/secret.json", func(d map[string]any) { d["token_endpoint_auth_method"] = "client_secret_basic" }),
		"larger than 5 KB":      doc("/large.json", func(d map[string]any) { d["client_name"] = strings.Repeat("x", 6<<10) }),
		"behind a redirect":     site.URL + "/moved.json",
		"no document":           site.URL + "/missing.json",
		"no path":               site.URL,
		"an untrusted TLS site": "https://" + strings.TrimPrefix(w.rs.URL, "https://"),
	}
	signIn := func(id string) error {
		v := oauth2.GenerateVerifier()
		c := &oauth2.Config{ClientID: id, RedirectURL: redirectURL, Endpoint: oauth2.Endpoint{AuthURL: w.as.URL + "/authorize"}}
		_, err := fakeauth.AnswerConsent(ctx, w.hc, c.AuthCodeURL("st", oauth2.S256ChallengeOption(v), oauth2.SetAuthURLParam("resource", w.rs.URL)), fakeauth.Alice, true)
		return err
	}
	if err := signIn(good); err == nil || !strings.Contains(err.Error(), "no DocumentClient") {
		t.Errorf("without a DocumentClient: %v, want a refusal", err)
	}
	w.as.Configure(func(k *fakeauth.Knobs) { k.DocumentClient = fakeauth.Client(site.Cert) })
	for name, id := range tests {
		err := signIn(id)
		if (err == nil) != (name == "good") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
