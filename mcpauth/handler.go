package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"teamsbot/store"
)

// PersonHandler returns the go-sdk OAuth handler through which the
// person's session with s is authorized. It keeps nothing itself: each
// request reads the person's connection from the store, so that a
// disconnect or a revocation on any replica takes effect on the next
// request, and a token refreshed by one replica serves every other.
func (b *Broker) PersonHandler(p Person, s Server) auth.OAuthHandler {
	return &personHandler{b: b, p: p, s: s}
}

type personHandler struct {
	b *Broker
	p Person
	s Server
}

// TokenSource implements auth.OAuthHandler: the stored connection's
// token, refreshed when it expires; nil when the person has not
// connected, so that the request goes without a token and its 401 starts
// the authorization.
func (h *personHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	// One read of the store per request: the connection as it stands.
	c, g, err := h.b.load(ctx, h.p, h.s)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return tokenSourceFunc(func() (*oauth2.Token, error) {
		tok, err := h.b.tokenFor(ctx, h.p, h.s, c, g)
		if errors.Is(err, store.ErrNotFound) {
			// Gone before its refresh: go on without a token.
			return nil, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "not connected"}
		}
		return tok, err
	}), nil
}

type tokenSourceFunc func() (*oauth2.Token, error)

func (f tokenSourceFunc) Token() (*oauth2.Token, error) { return f() }

// Authorize implements auth.OAuthHandler: it runs go-sdk's authorization
// code flow, whose one step a service cannot take alone, the person's,
// waits on the Waiter in ctx. Two requests of the same person to the same
// server share one flow, so the person is asked once.
func (h *personHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusForbidden && !insufficientScope(resp) {
		// Not an authorization matter: the request is retried once and
		// its answer stands (go-sdk does the same).
		resp.Body.Close()
		return nil
	}
	b := h.b
	if resp.StatusCode == http.StatusUnauthorized {
		// A token was sent and refused: it is of no more use.
		if req.Header.Get("Authorization") != "" {
			b.drop(ctx, h.p, h.s, ActionRefused, "the server refused the kept token")
		}
	}
	w, ok := waiterFrom(ctx)
	if ok {
		// One run asks a person once per server: a flow that failed is
		// not started again by the transport's next request.
		if err := w.ended(key(h.p, h.s)); err != nil {
			resp.Body.Close()
			return err
		}
	}
	if !ok {
		resp.Body.Close()
		return worded(fmt.Sprintf("You have not connected %s, or your connection has ended: ask the assistant again in Teams to connect it.", h.s.Name),
			"%w: %s", ErrNotConnected, h.s.Name)
	}
	var owned atomic.Bool
	ch := b.flows.DoChan(key(h.p, h.s), func() (any, error) {
		owned.Store(true)
		return nil, h.authorize(ctx, w, req, resp)
	})
	select {
	case r := <-ch:
		if !owned.Load() {
			resp.Body.Close()
		}
		if r.Err != nil {
			w.end(key(h.p, h.s), r.Err)
		}
		return r.Err
	case <-ctx.Done():
		if !owned.Load() {
			resp.Body.Close()
		}
		return context.Cause(ctx)
	}
}

// insufficientScope reports a 403 that asks for step-up authorization
// (the MCP specification's "Step-Up Authorization Flow").
func insufficientScope(resp *http.Response) bool {
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return false
	}
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["error"] == "insufficient_scope" {
			return true
		}
	}
	return false
}

// flow is one authorization under way: what the fetcher learns that the
// grant kept at its end needs.
type flow struct {
	mu       sync.Mutex
	reqID    string
	resource string
	iss      string
	asked    Asked
	kept     bool
}

func (h *personHandler) authorize(ctx context.Context, w Waiter, req *http.Request, resp *http.Response) error {
	b := h.b
	f := &flow{}
	client := b.client
	if h.s.Entra {
		client = withoutResource(b.client)
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:           b.RedirectURL(),
		RequestRefreshToken:   true,
		AcceptUnadvertisedIss: true,
		Client:                client,
		AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			return h.ask(ctx, w, f, args.URL)
		},
		ScopeFilter: h.scopes(ctx),
		NewTokenSource: func(tctx context.Context, oc *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			if err := h.keepNew(ctx, f, oc, tok); err != nil {
				return nil, err
			}
			return oc.TokenSource(tctx, tok), nil
		},
	}
	// The registration, in the order of the MCP specification's current
	// text (basic/authorization/client-registration): a client
	// pre-registered for this server when the configuration names one,
	// else the client ID metadata document when the authorization server
	// takes one, else dynamic registration. go-sdk tries the document
	// before a pre-registered client, so the document is offered only
	// when no client is configured.
	if u := b.ClientIDURL(); u != "" && h.s.ClientID == "" {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: u}
	}
	reused := false
	if v, ok := b.registered.Load(serverKey(h.s)); ok && h.s.ClientID == "" {
		// A client this authorization server registered for an earlier
		// authorization: go-sdk takes it as pre-registered, bound to its
		// issuer, and falls back to nothing else.
		r := v.(registration)
		pc := &oauthex.ClientCredentials{ClientID: r.clientID, Issuer: r.issuer}
		if r.secret != "" {
			pc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: r.secret}
		}
		cfg.PreregisteredClient = pc
		cfg.ClientIDMetadataDocumentConfig = nil
		reused = true
	}
	if h.s.ClientID != "" {
		pc := &oauthex.ClientCredentials{ClientID: h.s.ClientID}
		if h.s.ClientSecret != "" {
			pc.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: h.s.ClientSecret}
		}
		cfg.PreregisteredClient = pc
	}
	cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{Metadata: b.clientMetadata()}
	ah, err := auth.NewAuthorizationCodeHandler(cfg)
	if err != nil {
		resp.Body.Close()
		return fmt.Errorf("mcpauth: %w", err)
	}
	err = ah.Authorize(ctx, req, resp)
	if err != nil && reused && strings.Contains(err.Error(), "invalid_client") {
		// The authorization server forgot the client: register anew
		// next time.
		b.registered.Delete(serverKey(h.s))
	}
	f.mu.Lock()
	asked, reqID, kept := f.asked, f.reqID, f.kept
	f.mu.Unlock()
	if err == nil && kept {
		b.finish(ctx, reqID, store.MCPAuthDone)
		if asked != nil {
			asked.Outcome(context.WithoutCancel(ctx), Connected)
		}
		return nil
	}
	if err == nil {
		// go-sdk's own answer to a 403 that is not about scopes.
		return nil
	}
	if errors.Is(err, errConnectedElsewhere) {
		b.finish(ctx, reqID, store.MCPAuthDone)
		if asked != nil {
			asked.Outcome(context.WithoutCancel(ctx), Connected)
		}
		return nil
	}
	switch {
	case errors.Is(err, ErrTimedOut):
		b.finish(ctx, reqID, store.MCPAuthExpired)
		if asked != nil {
			asked.Outcome(context.WithoutCancel(ctx), TimedOut)
		}
		return err
	case ctx.Err() != nil:
		b.finish(ctx, reqID, store.MCPAuthExpired)
		if asked != nil {
			asked.Outcome(context.WithoutCancel(ctx), TimedOut)
		}
		return fmt.Errorf("%w: %w", ErrTimedOut, context.Cause(ctx))
	}
	why := refusalWhy(err)
	b.finish(ctx, reqID, store.MCPAuthRefused)
	b.appendAudit(ctx, b.audit(ActionRefused, h.p, h.s, map[string]any{"why": why, "request": reqID}))
	b.log.Warn("MCP authorization refused", "agent", h.s.AgentID, "server", h.s.Name, "err", err)
	if asked != nil {
		asked.Outcome(context.WithoutCancel(ctx), Refused)
	}
	if errors.Is(err, ErrRefused) {
		return err
	}
	return worded(fmt.Sprintf("%s could not be connected: %s.", h.s.Name, why), "%w: %s: %w", ErrRefused, h.s.Name, err)
}

// refusalWhy says in words why an authorization failed, from go-sdk's and
// this package's errors; never a token.
func refusalWhy(err error) string {
	msg := err.Error()
	switch {
	// go-sdk quotes some causes with %v: their text is matched too.
	case errors.Is(err, errInsecure), strings.Contains(msg, errInsecure.Error()):
		return "its sign-in server is not on https"
	case errors.Is(err, errTooLarge), strings.Contains(msg, errTooLarge.Error()):
		return "its sign-in server's answer was too large"
	case errors.Is(err, context.DeadlineExceeded), strings.Contains(msg, "Client.Timeout"), strings.Contains(msg, "timeout"), strings.Contains(msg, "deadline exceeded"):
		return "its sign-in server did not answer in time"
	case strings.Contains(msg, "issuer"):
		return "the sign-in answer came from another issuer than the server's"
	case strings.Contains(msg, "another resource"), strings.Contains(msg, "audience"):
		return "the sign-in server gave a token for another resource"
	case strings.Contains(msg, "access_denied"):
		return "the sign-in was declined"
	case strings.Contains(msg, "state mismatch"):
		return "the sign-in answer did not belong to this request"
	case strings.Contains(msg, "metadata"), strings.Contains(msg, "invalid character"), strings.Contains(msg, "unexpected end of JSON"):
		return "its sign-in server's metadata could not be read"
	case strings.Contains(msg, "registration"), strings.Contains(msg, "register"):
		return "the service could not register with its sign-in server"
	case strings.Contains(msg, "token exchange"):
		return "its sign-in server refused to give a token"
	}
	return "its sign-in server answered in a way the service refuses"
}

// scopes returns the ScopeFilter: the configured scopes when set, else
// those the server asked for, with the scopes of the person's earlier
// grant kept (a step-up must not lose what was granted before).
func (h *personHandler) scopes(ctx context.Context) func([]string) []string {
	return func(discovered []string) []string {
		out := discovered
		if len(h.s.Scopes) > 0 {
			out = slices.Clone(h.s.Scopes)
			// A step-up names what it needs beyond the configured ones.
			for _, sc := range discovered {
				if !slices.Contains(out, sc) {
					out = append(out, sc)
				}
			}
		}
		if c, err := h.b.opts.Store.MCPConnection(ctx, h.p.TenantID, h.p.UserID, h.s.AgentID, h.s.Name); err == nil {
			for _, sc := range c.Scopes {
				if !slices.Contains(out, sc) {
					out = append(out, sc)
				}
			}
		}
		return out
	}
}

// keepNew checks and keeps the token the code was exchanged for.
func (h *personHandler) keepNew(ctx context.Context, f *flow, oc *oauth2.Config, tok *oauth2.Token) error {
	b := h.b
	f.mu.Lock()
	resource, iss, reqID := f.resource, f.iss, f.reqID
	f.mu.Unlock()
	if err := checkAudience(tok.AccessToken, h.s, resource); err != nil {
		return worded(fmt.Sprintf("%s could not be connected: the sign-in server gave a token for another resource.", h.s.Name), "%w: %w", ErrRefused, err)
	}
	reg := "dynamic"
	switch oc.ClientID {
	case b.ClientIDURL():
		reg = "cimd"
	case h.s.ClientID:
		reg = "preregistered"
	}
	if reg == "dynamic" {
		issuer := iss
		if issuer == "" {
			if u, err := url.Parse(oc.Endpoint.AuthURL); err == nil {
				issuer = u.Scheme + "://" + u.Host
			}
		}
		b.registered.Store(serverKey(h.s), registration{clientID: oc.ClientID, secret: oc.ClientSecret, issuer: issuer})
	}
	g := grant{
		AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry,
		ClientID: oc.ClientID, ClientSecret: oc.ClientSecret, AuthStyle: int(oc.Endpoint.AuthStyle),
		TokenURL: oc.Endpoint.TokenURL, Resource: resource, Registration: reg,
	}
	if iss == "" {
		if u, err := url.Parse(oc.Endpoint.AuthURL); err == nil {
			iss = u.Scheme + "://" + u.Host
		}
	}
	granted := oc.Scopes
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		granted = strings.Fields(sc)
	}
	now := b.now()
	c := store.MCPConnection{
		TenantID: h.p.TenantID, UserID: h.p.UserID, AgentID: h.s.AgentID, Server: h.s.Name, UserName: h.p.Name,
		Issuer: iss, Scopes: granted, ConnectedAt: now, RefreshedAt: now, LastUsedAt: now,
	}
	rec := b.audit(ActionConnected, h.p, h.s, map[string]any{"registration": reg, "scopes": strings.Join(granted, " "), "request": reqID})
	if err := b.keep(ctx, h.p, h.s, c, g, rec); err != nil {
		return err
	}
	f.mu.Lock()
	f.kept = true
	f.mu.Unlock()
	return nil
}

// clientMetadata is what this service says of itself as an OAuth client:
// the client ID metadata document and the dynamic registration request.
func (b *Broker) clientMetadata() *oauthex.ClientRegistrationMetadata {
	name := b.opts.AgentName
	if name == "" {
		name = "Assistant"
	}
	return &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{b.RedirectURL()},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              name + " in Microsoft Teams",
		ClientURI:               b.opts.PublicBaseURL.URL("/"),
	}
}
