package mcpauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"teamsbot/store"
)

// Microsoft Entra ID: its v2.0 endpoints refuse RFC 8707's resource
// parameter (AADSTS901002) and take the resource in the scopes
// ({resource}/.default); and a person already signed in to this service
// with Entra ID (Teams single sign-on, the view page's sign-in) is
// connected through the on-behalf-of flow ("Microsoft identity platform
// and OAuth 2.0 On-Behalf-Of flow"), whose assertion is the person's
// access token for this service: it is exchanged, never passed on.

// withoutResource returns a client that drops the resource parameter from
// the form bodies it posts (go-sdk's token requests add it).
func withoutResource(c *http.Client) *http.Client {
	out := *c
	out.Transport = &dropResource{base: c.Transport}
	return &out
}

type dropResource struct{ base http.RoundTripper }

func (d *dropResource) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil && strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		form, err := url.ParseQuery(string(body))
		if err == nil && form.Has("resource") {
			form.Del("resource")
			body = []byte(form.Encode())
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return d.base.RoundTrip(req)
}

// jwtBearer is the on-behalf-of flow's grant type.
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// SignedIn is told of a person's sign-in to this service with Entra ID,
// with assertion, their access token for this service: each Entra server
// they have not connected is connected on their behalf, with no prompt of
// its own. A refusal (consent not given, a server not pre-authorized) is
// audited and leaves that server to the Connect card.
func (b *Broker) SignedIn(ctx context.Context, p Person, assertion string) {
	if assertion == "" {
		return
	}
	for _, s := range b.opts.Servers {
		if !s.Entra {
			continue
		}
		if _, _, err := b.load(ctx, p, s); err == nil {
			continue // connected; its refresh token serves
		}
		if err := b.onBehalfOf(ctx, p, s, assertion); err != nil {
			b.log.Warn("MCP server not connected on behalf of the person", "agent", s.AgentID, "server", s.Name, "err", err)
			b.appendAudit(ctx, b.audit(ActionRefused, p, s, map[string]any{"why": "the on-behalf-of exchange was refused: " + refusalWhy(err), "registration": "on-behalf-of"}))
		}
	}
}

// entraServer returns the configured Entra server of a request, if it is
// one.
func (b *Broker) entraServer(agent, name string) (Server, bool) {
	for _, s := range b.opts.Servers {
		if s.Entra && s.AgentID == agent && s.Name == name {
			return s, true
		}
	}
	return Server{}, false
}

// onBehalfOf exchanges the person's assertion for a token of s and keeps
// it as their connection.
func (b *Broker) onBehalfOf(ctx context.Context, p Person, s Server, assertion string) error {
	if s.ClientID == "" || s.ClientSecret == "" {
		return errors.New("the on-behalf-of flow needs the server's clientId and clientSecretEnv")
	}
	authority := strings.TrimSuffix(s.Authority, "/")
	if authority == "" {
		authority = DefaultAuthority
	}
	g := grant{
		ClientID: s.ClientID, ClientSecret: s.ClientSecret, AuthStyle: int(oauth2.AuthStyleInParams), // as Entra ID takes it
		TokenURL:     authority + "/" + url.PathEscape(p.TenantID) + "/oauth2/v2.0/token",
		Registration: "on-behalf-of",
	}
	form := url.Values{
		"grant_type":          {jwtBearer},
		"requested_token_use": {"on_behalf_of"},
		"assertion":           {assertion},
		"scope":               {strings.Join(s.Scopes, " ")},
	}
	tok, _, err := b.tokenRequest(ctx, g, form)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	if err := checkAudience(tok.AccessToken, s, ""); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	g.AccessToken, g.RefreshToken, g.Expiry = tok.AccessToken, tok.RefreshToken, tok.Expiry
	granted := s.Scopes
	if sc, ok := tok.Extra("scope").(string); ok && sc != "" {
		granted = strings.Fields(sc)
	}
	now := b.now()
	c := store.MCPConnection{
		TenantID: p.TenantID, UserID: p.UserID, AgentID: s.AgentID, Server: s.Name, UserName: p.Name,
		Issuer: authority + "/" + p.TenantID + "/v2.0", Scopes: granted, ConnectedAt: now, RefreshedAt: now, LastUsedAt: now,
	}
	return b.keep(ctx, p, s, c, g, b.audit(ActionConnected, p, s, map[string]any{"registration": "on-behalf-of", "scopes": strings.Join(granted, " ")}))
}
