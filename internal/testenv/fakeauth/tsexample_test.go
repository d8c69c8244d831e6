package fakeauth_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"teamsbot/internal/testenv/fakeauth"
)

// TestTSExampleWithGoSDKClient signs go-sdk's client in to the MCP
// TypeScript SDK's example server through its demo authorization server,
// with dynamic registration, and calls a tool.
func TestTSExampleWithGoSDKClient(t *testing.T) {
	ex := fakeauth.StartTSExample(t)
	ctx := t.Context()
	hc := &http.Client{Transport: &http.Transport{}}
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{RedirectURIs: []string{redirectURL}, TokenEndpointAuthMethod: "none"},
		},
		AuthorizationCodeFetcher: signInAs(hc, ""),
		Client:                   hc,
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fakeauth-test", Version: "1"}, nil)
	s, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ex.MCPURL, HTTPClient: hc, OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, ex.Log)
	}
	defer s.Close()
	if got := text(call(ctx, t, s, "greet", map[string]any{"name": "Ada"})); !strings.Contains(got, "Ada") {
		t.Errorf("greet = %q", got)
	}
	if !strings.Contains(ex.Log.String(), "Authenticated user") {
		t.Errorf("the example logged no authenticated request:\n%s", ex.Log)
	}
}
