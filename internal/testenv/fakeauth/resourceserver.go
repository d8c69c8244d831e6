package fakeauth

import (
	"bytes"
	"cmp"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// toolScopes are the scopes a tool needs beyond a valid token; a 403
// challenge names all of them, the ones the token has included, as the MCP
// specification's step-up section recommends.
func toolScopes(name string) []string {
	switch name {
	case "list_customers":
		return []string{ScopeRead}
	case "update_customer":
		return []string{ScopeRead, ScopeWrite}
	}
	return nil
}

// ResourceServer is a running MCP server (go-sdk's Streamable HTTP handler)
// protected by an [AuthServer]. Its methods are safe for concurrent use.
type ResourceServer struct {
	// URL is the MCP endpoint, https://127.0.0.1:port/mcp, and the
	// resource identifier: the aud its tokens must carry exactly.
	URL string
	// MetadataURL is where its protected resource metadata is, the
	// resource_metadata of its challenges.
	MetadataURL string
	// Cert is the server's certificate.
	Cert *x509.Certificate

	as *AuthServer

	mu             sync.Mutex
	authorizations []string
}

// StartResourceServer starts an MCP server on HTTPS loopback until the
// test ends, accepting the tokens that as issues for it. Its tools are whoami
// (the token's sub: who the server sees), list_customers (needs crm.read)
// and update_customer (needs crm.read and crm.write).
//
// Without a valid token it answers 401 with
// WWW-Authenticate: Bearer scope="crm.read", resource_metadata="..."
// (error="invalid_token" when a token was sent: bad signature, issuer,
// expiry, revoked, or an aud other than URL). A tools/call of a tool whose
// scopes the token lacks gets 403 with error="insufficient_scope" before
// the MCP handler runs: a tool's own result cannot carry an HTTP status, and
// go-sdk's client steps up only on a 403 whose challenge says
// insufficient_scope.
func StartResourceServer(t testing.TB, as *AuthServer) *ResourceServer {
	t.Helper()
	origin, cert, ln := listenTLS(t)
	rs := &ResourceServer{
		URL: origin + "/mcp", MetadataURL: origin + "/.well-known/oauth-protected-resource/mcp",
		Cert: cert, as: as,
	}
	// RFC 9728 section 3.1 places the document for https://host/mcp at
	// the path-suffixed location; the MCP specification's clients also try
	// the root. Both answer the same document, whose resource is the MCP
	// endpoint. (go-sdk's client, when it falls back to the root, expects
	// the origin as resource there, per RFC 9728 section 3.3, and passes
	// over it; it reads the path-suffixed document the challenge names.)
	prm := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               rs.URL,
		AuthorizationServers:   []string{as.URL},
		ScopesSupported:        []string{ScopeRead, ScopeWrite},
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "CRM",
	})
	server := mcp.NewServer(&mcp.Implementation{Name: "crm", Version: "1.0.0"}, nil)
	addTools(server)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	// RequireBearerToken only carries the claims the gate checked into
	// go-sdk's TokenInfo (the tools' req.Extra.TokenInfo, and the binding
	// of each MCP session to its person); the gate answers every refusal,
	// with the error codes RequireBearerToken does not send.
	withInfo := auth.RequireBearerToken(func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, ok := r.Context().Value(claimsKey{}).(*Claims)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{Scopes: c.Scopes(), Expiration: c.ExpiresAt.Time, UserID: c.Subject}, nil
	}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: rs.MetadataURL})

	mux := http.NewServeMux()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", prm)
	mux.Handle("/.well-known/oauth-protected-resource", prm)
	mux.Handle("/mcp", rs.gate(withInfo(mcpHandler)))
	serve(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := r.Header.Get("Authorization"); h != "" {
			rs.mu.Lock()
			rs.authorizations = append(rs.authorizations, h)
			rs.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	}))
	return rs
}

// Authorizations are the Authorization headers the server received, in
// order: a test checks that no token of another audience (a person's
// Teams or Entra ID token) was ever passed through.
func (rs *ResourceServer) Authorizations() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.authorizations)
}

type claimsKey struct{}

// errAudience is the gate's refusal of a token meant for another resource.
var errAudience = errors.New("the token is not for this resource")

// gate checks the bearer token and the scopes of a tools/call.
func (rs *ResourceServer) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, raw, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(kind, "Bearer") || raw == "" {
			rs.challenge(w, http.StatusUnauthorized, "", "", []string{ScopeRead})
			return
		}
		c, err := rs.as.Verify(raw)
		if err == nil && !slices.Equal(c.Audience, []string{rs.URL}) {
			err = errAudience
		}
		if err != nil {
			rs.challenge(w, http.StatusUnauthorized, "invalid_token", err.Error(), []string{ScopeRead})
			return
		}
		need, err := toolOf(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if slices.ContainsFunc(need, func(s string) bool { return !slices.Contains(c.Scopes(), s) }) {
			rs.challenge(w, http.StatusForbidden, "insufficient_scope", "the tool needs "+strings.Join(need, " "), need)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	})
}

// toolOf reads a POSTed JSON-RPC message (or a batch, which protocol
// versions before 2025-06-18 allow) and returns the scopes of the tools its
// tools/calls name, leaving the body for the MCP handler.
func toolOf(r *http.Request) ([]string, error) {
	if r.Method != http.MethodPost {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	type message struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	var batch []message
	if json.Unmarshal(body, &batch) != nil {
		var one message
		json.Unmarshal(body, &one) // the MCP handler answers what is not JSON-RPC
		batch = []message{one}
	}
	var need []string
	for _, m := range batch {
		if m.Method == "tools/call" {
			for _, s := range toolScopes(m.Params.Name) {
				if !slices.Contains(need, s) {
					need = append(need, s)
				}
			}
		}
	}
	return need, nil
}

// challenge refuses a request with RFC 6750's WWW-Authenticate challenge,
// carrying RFC 9728's resource_metadata.
func (rs *ResourceServer) challenge(w http.ResponseWriter, status int, code, desc string, scopes []string) {
	var params []string
	if code != "" {
		params = append(params, fmt.Sprintf("error=%q", code))
	}
	if desc != "" {
		params = append(params, fmt.Sprintf("error_description=%q", strings.ReplaceAll(desc, `"`, "'")))
	}
	params = append(params,
		fmt.Sprintf("scope=%q", strings.Join(scopes, " ")),
		fmt.Sprintf("resource_metadata=%q", rs.MetadataURL))
	w.Header().Set("WWW-Authenticate", "Bearer "+strings.Join(params, ", "))
	http.Error(w, cmp.Or(desc, "This MCP server needs an access token."), status)
}

// customer is a record of the CRM the tools read and change.
type customer struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type customers struct {
	Customers []customer `json:"customers"`
}

type updated struct {
	customer
	UpdatedBy string `json:"updatedBy" jsonschema:"the person who made the change"`
}

// addTools adds whoami, list_customers and update_customer.
func addTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "The person this server sees: the sub of the access token."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "list_customers", Description: "The customers (needs crm.read)."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, customers, error) {
			return nil, customers{[]customer{{"c1", "Contoso"}, {"c2", "Fabrikam"}}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "can_ask", Description: "Whether the client declared that it asks its person (elicitation)."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			p := req.Session.InitializeParams()
			can := p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("can ask: %t", can)}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "update_customer", Description: "Renames a customer (needs crm.write)."},
		func(_ context.Context, req *mcp.CallToolRequest, in customer) (*mcp.CallToolResult, updated, error) {
			return nil, updated{in, req.Extra.TokenInfo.UserID}, nil
		})
}
