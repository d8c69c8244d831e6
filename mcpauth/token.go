package mcpauth

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
	"time"

	"github.com/golang-jwt/jwt/v4"
	"golang.org/x/oauth2"

	"teamsbot/store"
)

// grant is what is kept of a connection, sealed: the tokens, and what a
// refresh needs (the client, the token endpoint, the resource), so that
// any replica, after any restart, can refresh it.
type grant struct {
	AccessToken  string    `json:"at"`
	RefreshToken string    `json:"rt,omitempty"`
	TokenType    string    `json:"tt,omitempty"`
	Expiry       time.Time `json:"exp,omitzero"`
	ClientID     string    `json:"cid"`
	ClientSecret string    `json:"cs,omitempty"`
	AuthStyle    int       `json:"as,omitempty"`
	TokenURL     string    `json:"turl"`
	Resource     string    `json:"res,omitempty"`
	// Registration is how the client was registered: cimd, preregistered
	// or dynamic.
	Registration string `json:"reg,omitempty"`
}

// early is how long before its expiry a token is refreshed: a call must
// not start with a token that expires on the way.
const early = 30 * time.Second

func (g grant) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: g.AccessToken, TokenType: "Bearer", RefreshToken: g.RefreshToken, Expiry: g.Expiry}
}

func (g grant) fresh(now time.Time) bool {
	return g.Expiry.IsZero() || now.Add(early).Before(g.Expiry)
}

// grantWhat binds a sealed grant to its connection.
func grantWhat(p Person, s Server) string {
	return "grant\x00" + key(p, s)
}

// load returns a person's stored connection to s and its grant;
// store.ErrNotFound when there is none. A grant that no longer opens (its
// key retired) is a connection gone: it is deleted and audited.
func (b *Broker) load(ctx context.Context, p Person, s Server) (store.MCPConnection, grant, error) {
	c, err := b.opts.Store.MCPConnection(ctx, p.TenantID, p.UserID, s.AgentID, s.Name)
	if err != nil {
		return c, grant{}, err
	}
	plain, err := b.seal.open(grantWhat(p, s), c.Sealed)
	var g grant
	if err == nil {
		err = json.Unmarshal(plain, &g)
		clear(plain)
	}
	if err != nil {
		b.log.Warn("MCP connection does not open; it is dropped", "agent", s.AgentID, "server", s.Name, "err", err)
		b.drop(ctx, p, s, ActionRefused, "the kept authorization no longer opens with the service's token keys")
		return store.MCPConnection{}, grant{}, store.ErrNotFound
	}
	return c, g, nil
}

// keep seals g into c and stores it with its audit record.
func (b *Broker) keep(ctx context.Context, p Person, s Server, c store.MCPConnection, g grant, rec store.AuditRecord) error {
	plain, err := json.Marshal(g)
	if err != nil {
		return fmt.Errorf("mcpauth: encode grant: %w", err)
	}
	c.Sealed, c.KeyID = b.seal.seal(grantWhat(p, s), plain)
	clear(plain)
	if err := b.opts.Store.PutMCPConnection(ctx, c, rec); err != nil {
		return fmt.Errorf("mcpauth: keep connection: %w", err)
	}
	return nil
}

// drop deletes a person's connection to s, audited as action with why.
func (b *Broker) drop(ctx context.Context, p Person, s Server, action, why string) {
	_, err := b.opts.Store.DeleteMCPConnections(context.WithoutCancel(ctx),
		store.MCPConnectionFilter{TenantID: p.TenantID, UserID: p.UserID, AgentID: s.AgentID, Server: s.Name},
		func(removed []store.MCPConnection) []store.AuditRecord {
			return []store.AuditRecord{b.audit(action, p, s, map[string]any{"why": why})}
		})
	if err != nil {
		b.log.Error("MCP connection not dropped", "agent", s.AgentID, "server", s.Name, "err", err)
	}
}

// tokenFor returns a fresh token of the person's connection c to s (its
// grant g, as load read them), refreshing it when it expires. A refresh the authorization server
// refuses drops the connection and returns an invalid_grant
// *oauth2.RetrieveError: go-sdk's transport then sends the request
// without a token, and the server's 401 starts a new authorization.
func (b *Broker) tokenFor(ctx context.Context, p Person, s Server, c store.MCPConnection, g grant) (*oauth2.Token, error) {
	now := b.now()
	if !g.fresh(now) {
		v, err, _ := b.refreshes.Do(key(p, s), func() (any, error) { return b.refresh(ctx, p, s) })
		if err != nil {
			return nil, err
		}
		g = v.(grant)
	}
	if now.Sub(c.LastUsedAt) >= time.Minute {
		if err := b.opts.Store.UseMCPConnection(ctx, p.TenantID, p.UserID, s.AgentID, s.Name, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			b.log.Warn("MCP connection use not recorded", "err", err)
		}
	}
	return g.token(), nil
}

// refresh refreshes a connection's token with the resource parameter
// (RFC 8707 asks for it on every token request; golang.org/x/oauth2's own
// refresh cannot send it) and keeps the result.
func (b *Broker) refresh(ctx context.Context, p Person, s Server) (grant, error) {
	// Another run, or another replica, may have refreshed it meanwhile.
	c, g, err := b.load(ctx, p, s)
	if err != nil {
		return grant{}, err
	}
	if g.fresh(b.now()) {
		return g, nil
	}
	if g.RefreshToken == "" {
		b.drop(ctx, p, s, ActionRefused, "the token expired and the authorization server gave no refresh token")
		return grant{}, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "no refresh token"}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {g.RefreshToken}}
	if g.Resource != "" {
		form.Set("resource", g.Resource)
	}
	tok, status, err := b.tokenRequest(ctx, g, form)
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && (re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client") {
			// A rotated refresh token is spent by the first replica
			// that uses it: if another one refreshed meanwhile, its
			// token stands.
			if c2, g2, lerr := b.load(ctx, p, s); lerr == nil && c2.RefreshedAt.After(c.RefreshedAt) && g2.fresh(b.now()) {
				return g2, nil
			}
			b.drop(ctx, p, s, ActionRefused, fmt.Sprintf("the authorization server refused to refresh the token (%s)", re.ErrorCode))
			return grant{}, &oauth2.RetrieveError{ErrorCode: "invalid_grant", ErrorDescription: "refresh refused"}
		}
		b.log.Warn("MCP token not refreshed", "agent", s.AgentID, "server", s.Name, "status", status, "err", err)
		return grant{}, fmt.Errorf("%w: refreshing the token for %s: %w", ErrRefused, s.Name, err)
	}
	if err := checkAudience(tok.AccessToken, s, g.Resource); err != nil {
		b.drop(ctx, p, s, ActionRefused, err.Error())
		return grant{}, fmt.Errorf("%w: %w", ErrRefused, err)
	}
	g.AccessToken, g.Expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		g.RefreshToken = tok.RefreshToken
	}
	c.RefreshedAt = b.now()
	if err := b.keep(ctx, p, s, c, g, b.audit(ActionRefreshed, p, s, nil)); err != nil {
		return grant{}, err
	}
	return g, nil
}

// tokenResponse is a token endpoint's answer (RFC 6749 section 5.1) or
// its error (section 5.2).
type tokenResponse struct {
	AccessToken      string          `json:"access_token"`
	TokenType        string          `json:"token_type"`
	RefreshToken     string          `json:"refresh_token"`
	ExpiresIn        json.Number     `json:"expires_in"`
	Scope            string          `json:"scope"`
	Error            string          `json:"error"`
	ErrorDescription string          `json:"error_description"`
	Extra            json.RawMessage `json:"-"`
}

// tokenRequest posts form to g's token endpoint with g's client
// authentication and returns the token.
func (b *Broker) tokenRequest(ctx context.Context, g grant, form url.Values) (*oauth2.Token, int, error) {
	secretInHeader := g.ClientSecret != "" && oauth2.AuthStyle(g.AuthStyle) != oauth2.AuthStyleInParams
	if !secretInHeader {
		form.Set("client_id", g.ClientID)
		if g.ClientSecret != "" {
			form.Set("client_secret", g.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if secretInHeader {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, resp.StatusCode, err
	}
	var tr tokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("the token endpoint answered %d with no JSON", resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK || tr.Error != "" {
		return nil, resp.StatusCode, &oauth2.RetrieveError{Response: &http.Response{StatusCode: resp.StatusCode}, ErrorCode: tr.Error, ErrorDescription: tr.ErrorDescription}
	}
	if tr.AccessToken == "" || !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, resp.StatusCode, errors.New("the token endpoint gave no bearer token")
	}
	tok := (&oauth2.Token{AccessToken: tr.AccessToken, TokenType: "Bearer", RefreshToken: tr.RefreshToken}).WithExtra(map[string]any{"scope": tr.Scope})
	if n, err := tr.ExpiresIn.Int64(); err == nil && n > 0 {
		tok.Expiry = b.now().Add(time.Duration(n) * time.Second)
	}
	return tok, resp.StatusCode, nil
}

// checkAudience refuses an access token that says it is for another
// resource. A token is opaque to its client in general; but when it is a
// JWT with an aud claim (as most authorization servers issue, Entra ID
// among them), an aud that names neither the resource asked for, the
// server's URL nor its configured audience is a token the server would
// refuse, or worse, one meant for another server (RFC 8707 section 2).
func checkAudience(token string, s Server, resource string) error {
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil || len(claims.Audience) == 0 {
		return nil // opaque to its client, or no audience to check
	}
	want := []string{canonical(s.URL), canonical(resource)}
	if s.Audience != "" {
		want = append(want, canonical(s.Audience))
	}
	for _, a := range claims.Audience {
		if a != "" && slices.Contains(want, canonical(a)) {
			return nil
		}
	}
	return fmt.Errorf("the access token is for another resource (%.200q), not for %s", strings.Join(claims.Audience, " "), s.Name)
}

// canonical drops what does not change which resource a URL names: a
// trailing slash.
func canonical(u string) string { return strings.TrimSuffix(u, "/") }
