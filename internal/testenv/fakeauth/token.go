package fakeauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verifierShape is RFC 7636 section 4.1's code_verifier: 43 to 128
// unreserved characters.
var verifierShape = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// tokenResponse is RFC 6749 section 5.1's successful answer.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope"`
}

// token is the token endpoint: the authorization_code and refresh_token
// grants.
func (a *AuthServer) token(w http.ResponseWriter, r *http.Request) {
	clientID, oerr := a.authenticate(r)
	a.mu.Lock()
	a.stats.ClientIDs = append(a.stats.ClientIDs, clientID)
	if r.PostForm.Has("resource") {
		a.stats.Resources = append(a.stats.Resources, r.PostFormValue("resource"))
	}
	if r.PostForm.Has("scope") {
		a.stats.Scopes = append(a.stats.Scopes, r.PostFormValue("scope"))
	}
	a.mu.Unlock()
	if oerr != nil {
		oerr.write(w)
		return
	}
	if a.knobsNow().Entra && r.PostForm.Has("resource") {
		(&oauthError{"invalid_request", entraNoResource}).write(w)
		return
	}
	var resp *tokenResponse
	switch r.PostFormValue("grant_type") {
	case jwtBearer:
		resp, oerr = a.onBehalfOf(r, clientID)
	case "authorization_code":
		resp, oerr = a.redeemCode(r, clientID)
	case "refresh_token":
		resp, oerr = a.redeemRefresh(r, clientID)
	default:
		oerr = &oauthError{"unsupported_grant_type", "grant_type must be authorization_code or refresh_token"}
	}
	if oerr != nil {
		oerr.write(w)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// authenticate finds the client of a token or revocation request:
// client_secret_basic (RFC 6749 section 2.3.1: the form-encoded id and
// secret in HTTP Basic), client_secret_post, or a public client's bare
// client_id. A client with a secret must present it, by either method.
func (a *AuthServer) authenticate(r *http.Request) (string, *oauthError) {
	if err := r.ParseForm(); err != nil {
		return "", &oauthError{"invalid_request", "the body is not a form"}
	}
	id, secret, basic := r.BasicAuth()
	// A public client may send its id in Basic with an empty password
	// (golang.org/x/oauth2 does, when it guesses the style): that is no
	// authentication, so it counts as none.
	method := "none"
	switch {
	case basic && secret != "":
		method = "client_secret_basic"
	case r.PostFormValue("client_secret") != "":
		method = "client_secret_post"
	}
	a.mu.Lock()
	a.stats.ClientAuth = append(a.stats.ClientAuth, method)
	a.mu.Unlock()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		if form := r.PostFormValue("client_id"); form != "" && form != id {
			return id, &oauthError{"invalid_request", "two different client ids"}
		}
	} else {
		id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
	}
	a.mu.Lock()
	c := a.clients[id]
	a.mu.Unlock()
	switch {
	case c == nil && strings.HasPrefix(id, "https://"):
		return id, nil // a client ID metadata document's client: public
	case c == nil:
		return id, &oauthError{"invalid_client", "unknown client"}
	case c.secret != "" && subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) != 1:
		return id, &oauthError{"invalid_client", "wrong or missing client secret"}
	}
	return id, nil
}

// redeemCode exchanges an authorization code, once, for tokens.
func (a *AuthServer) redeemCode(r *http.Request, clientID string) (*tokenResponse, *oauthError) {
	k := a.knobsNow()
	verifier := r.PostFormValue("code_verifier")
	sum := sha256.Sum256([]byte(verifier))
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.codes[r.PostFormValue("code")]
	switch {
	case c == nil:
		return nil, &oauthError{"invalid_grant", "unknown code"}
	case c.used:
		// OAuth 2.1 section 4.1.3: a code used twice revokes what it gave.
		c.grant.revoked = true
		return nil, &oauthError{"invalid_grant", "the code was already used"}
	}
	c.used = true
	switch {
	case c.grant.revoked:
		return nil, &oauthError{"invalid_grant", "the grant was revoked"}
	case time.Now().After(c.expires):
		return nil, &oauthError{"invalid_grant", "the code expired"}
	case c.grant.clientID != clientID:
		return nil, &oauthError{"invalid_grant", "the code was issued to another client"}
	case r.PostFormValue("redirect_uri") != c.redirectURI:
		return nil, &oauthError{"invalid_grant", "redirect_uri differs from the authorization request's"}
	case !verifierShape.MatchString(verifier) || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
		return nil, &oauthError{"invalid_grant", "the code_verifier does not match the code_challenge"}
	case !k.Entra && r.PostFormValue("resource") != c.grant.resource:
		return nil, &oauthError{"invalid_target", "resource must be the one authorized"}
	}
	a.stats.CodesRedeemed++
	return a.issue(c.grant, c.grant.scopes, k)
}

// redeemRefresh exchanges a refresh token for new tokens and rotates it:
// the old one is spent, and presenting it again revokes the grant.
func (a *AuthServer) redeemRefresh(r *http.Request, clientID string) (*tokenResponse, *oauthError) {
	k := a.knobsNow()
	rt := r.PostFormValue("refresh_token")
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.refresh[rt]
	switch {
	case g == nil || k.FailRefresh:
		return nil, &oauthError{"invalid_grant", "unknown refresh token"}
	case g.revoked:
		return nil, &oauthError{"invalid_grant", "the grant was revoked"}
	case g.clientID != clientID:
		return nil, &oauthError{"invalid_grant", "the refresh token was issued to another client"}
	case rt != g.refresh:
		g.revoked = true
		return nil, &oauthError{"invalid_grant", "the refresh token was already used"}
	}
	scopes := g.scopes
	if r.PostForm.Has("scope") {
		scopes = strings.Fields(r.PostFormValue("scope"))
		if slices.ContainsFunc(scopes, func(s string) bool { return !slices.Contains(g.scopes, s) }) {
			return nil, &oauthError{"invalid_scope", "a refresh cannot widen the grant"}
		}
	}
	if r.PostForm.Has("resource") && r.PostFormValue("resource") != g.resource {
		return nil, &oauthError{"invalid_target", "resource must be the one authorized"}
	}
	a.stats.Refreshes++
	return a.issue(g, scopes, k)
}

// issue signs an access token of the grant and rotates its refresh token.
// The caller holds a.mu.
func (a *AuthServer) issue(g *grant, scopes []string, k Knobs) (*tokenResponse, *oauthError) {
	now := time.Now()
	aud := g.resource
	if k.Audience != "" {
		aud = k.Audience
	}
	claims := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: a.URL, Subject: g.sub, Audience: jwt.ClaimStrings{aud},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(k.AccessTokenLifetime)),
			ID: rand.Text(),
		},
		Scope:    strings.Join(scopes, " "),
		ClientID: g.clientID,
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = a.kid
	tok.Header["typ"] = "at+jwt"
	signed, err := tok.SignedString(a.key)
	if err != nil {
		return nil, &oauthError{"server_error", err.Error()}
	}
	a.access[claims.ID] = g
	g.refresh = rand.Text()
	a.refresh[g.refresh] = g
	return &tokenResponse{
		AccessToken: signed, TokenType: "Bearer", RefreshToken: g.refresh,
		ExpiresIn: int(k.AccessTokenLifetime.Seconds()), Scope: claims.Scope,
	}, nil
}

// jwtBearer is the grant type of the on-behalf-of flow (RFC 7523's JWT
// bearer grant, as the Microsoft identity platform uses it).
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// entraNoResource is Entra ID's answer to a resource parameter on its v2.0
// endpoints.
const entraNoResource = "AADSTS901002: The 'resource' request parameter isn't supported."

// resourceOfScopes is the resource an Entra ID scope names: the part before
// its last slash ({resource}/.default, {resource}/crm.read).
func resourceOfScopes(scope string) string {
	for _, s := range strings.Fields(scope) {
		if i := strings.LastIndexByte(s, '/'); i > 0 && strings.Contains(s, "://") {
			return s[:i]
		}
	}
	return ""
}

// entraScopes are the scopes an Entra ID request is granted: every scope
// of the server for a {resource}/.default, and offline_access when asked.
func entraScopes(scope string, k Knobs) string {
	var out []string
	for _, s := range strings.Fields(scope) {
		switch {
		case strings.HasSuffix(s, "/.default"):
			for _, g := range k.Scopes {
				if g != ScopeOffline {
					out = append(out, g)
				}
			}
		case s == ScopeOffline:
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// onBehalfOf is the Microsoft identity platform's on-behalf-of grant: a
// confidential client presents a user's access token for itself (the
// assertion) and gets one for the resource its scope names.
func (a *AuthServer) onBehalfOf(r *http.Request, clientID string) (*tokenResponse, *oauthError) {
	k := a.knobsNow()
	a.mu.Lock()
	c := a.clients[clientID]
	a.mu.Unlock()
	switch {
	case k.OnBehalfOf == nil:
		return nil, &oauthError{"unsupported_grant_type", "this server does not take the on-behalf-of grant"}
	case c == nil || c.secret == "":
		return nil, &oauthError{"unauthorized_client", "the on-behalf-of grant is for confidential clients"}
	case r.PostFormValue("requested_token_use") != "on_behalf_of":
		return nil, &oauthError{"invalid_request", "requested_token_use must be on_behalf_of"}
	}
	sub, err := k.OnBehalfOf(r.PostFormValue("assertion"))
	if err != nil {
		return nil, &oauthError{"invalid_grant", "the assertion is not accepted: " + err.Error()}
	}
	scope := r.PostFormValue("scope")
	resource := resourceOfScopes(scope)
	if resource == "" {
		return nil, &oauthError{"invalid_scope", "the scope names no resource ({resource}/.default)"}
	}
	g := &grant{clientID: clientID, sub: sub, resource: resource, scopes: strings.Fields(entraScopes(scope, k))}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.OnBehalfOf++
	return a.issue(g, g.scopes, k)
}
