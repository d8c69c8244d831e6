package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
	"teamsbot/internal/web"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"
)

// tenantPlaceholder is how Entra's multi-tenant discovery document writes
// the tenant in its issuer: https://login.microsoftonline.com/{tenantid}/v2.0.
const tenantPlaceholder = "{tenantid}"

// scopes asks for the ID token (openid) with oid, name and
// preferred_username (profile, email). No offline_access: no refresh token
// is wanted, since no token is kept.
var scopes = []string{oidc.ScopeOpenID, "profile", "email"}

// oidcFlow is what OIDC mode needs after discovery.
type oidcFlow struct {
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	client   *http.Client
	// issuerTemplate is the expected iss with {tenantid} for a multi-tenant
	// issuer, "" for a single-tenant one (then go-oidc checks iss).
	issuerTemplate string
	allowed        map[string]bool // lower-case tenant ids; empty: any (single tenant only)
}

// tenantTemplate reports whether issuer is an Entra multi-tenant endpoint
// (organizations or common as the first path segment) and, if so, the
// issuer its tokens carry, with {tenantid} in place of that segment.
func tenantTemplate(issuer string) (string, bool) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return "", false
	}
	first, rest, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !strings.EqualFold(first, "organizations") && !strings.EqualFold(first, "common") {
		return "", false
	}
	t := u.Scheme + "://" + u.Host + "/" + tenantPlaceholder
	if rest = strings.TrimSuffix(rest, "/"); rest != "" {
		t += "/" + rest
	}
	return t, true
}

// discover reads the provider's discovery document and builds the flow.
func discover(ctx context.Context, opts Options, client *http.Client, origin netaddr.Origin, allowed map[string]bool, now func() time.Time) (*oidcFlow, error) {
	ctx = oidc.ClientContext(ctx, client)
	f := &oidcFlow{client: client, allowed: allowed}
	tmpl, multi := tenantTemplate(opts.Issuer)
	var (
		provider *oidc.Provider
		err      error
	)
	if multi {
		// The discovery document's issuer is the template itself, which
		// go-oidc would refuse as a mismatch. Get past discovery, then
		// check the discovered issuer here instead, and check every
		// token's iss against the template with its own tid.
		provider, err = oidc.NewProvider(oidc.InsecureIssuerURLContext(ctx, tmpl), opts.Issuer)
		if err != nil {
			return nil, fmt.Errorf("signin: OIDC discovery at %s: %w", opts.Issuer, err)
		}
		var meta struct {
			Issuer string `json:"issuer"`
		}
		if err := provider.Claims(&meta); err != nil {
			return nil, fmt.Errorf("signin: OIDC discovery at %s: %w", opts.Issuer, err)
		}
		if meta.Issuer != tmpl {
			return nil, fmt.Errorf("%w: OIDC discovery at %s gave issuer %q, expected %q", ErrConfig, opts.Issuer, meta.Issuer, tmpl)
		}
		f.issuerTemplate = tmpl
	} else {
		provider, err = oidc.NewProvider(ctx, opts.Issuer)
		if err != nil {
			return nil, fmt.Errorf("signin: OIDC discovery at %s: %w", opts.Issuer, err)
		}
	}
	f.verifier = provider.Verifier(&oidc.Config{
		ClientID:        opts.ClientID,
		SkipIssuerCheck: multi, // checked in checkIssuer
		Now:             now,
	})
	endpoint := provider.Endpoint()
	// Entra accepts the secret in the body (client_secret_post); saying so
	// avoids the failed first attempt of auto-detection.
	endpoint.AuthStyle = oauth2.AuthStyleInParams
	f.oauth = oauth2.Config{
		ClientID:     opts.ClientID,
		ClientSecret: opts.ClientSecret,
		Endpoint:     endpoint,
		RedirectURL:  origin.URL("/signin/callback"),
		Scopes:       append(slices.Clone(scopes), opts.APIScopes...),
	}
	return f, nil
}

// flowPayload is the sealed content of the short-lived sign-in cookie.
type flowPayload struct {
	V        int    `json:"v"`
	State    string `json:"state"`
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Return   string `json:"return"`
	Exp      int64  `json:"exp"`
}

// randomString returns 32 random bytes, base64url-encoded.
func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// handleSignIn starts OIDC sign-in, or shows the local form.
func (s *Service) handleSignIn(c echo.Context) error {
	ret := LocalPath(c.QueryParam("return"))
	if s.oidc == nil {
		if proxied(c.Request()) {
			return errProxied
		}
		return s.renderLocalForm(c, ret, c.QueryParam("as"))
	}
	p := flowPayload{
		V:        1,
		State:    randomString(),
		Nonce:    randomString(),
		Verifier: oauth2.GenerateVerifier(),
		Return:   ret,
		Exp:      s.now().Add(flowLifetime).Unix(),
	}
	plain, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("signin: encode sign-in state: %w", err)
	}
	c.SetCookie(s.cookie(s.flowCookie, s.seal.seal(s.flowCookie, plain), flowLifetime))
	to := s.oidc.oauth.AuthCodeURL(p.State,
		oidc.Nonce(p.Nonce),
		oauth2.S256ChallengeOption(p.Verifier),
		oauth2.SetAuthURLParam("response_mode", "query"),
	)
	return c.Redirect(http.StatusSeeOther, to)
}

// readFlow opens the sign-in cookie, or says why it cannot.
func (s *Service) readFlow(r *http.Request) (flowPayload, error) {
	var p flowPayload
	ck, err := r.Cookie(s.flowCookie)
	if err != nil {
		return p, errors.New("no sign-in cookie")
	}
	plain, err := s.seal.open(s.flowCookie, ck.Value)
	if err != nil {
		return p, err
	}
	if err := json.Unmarshal(plain, &p); err != nil || p.V != 1 || p.State == "" {
		return p, errors.New("bad sign-in cookie payload")
	}
	if !s.now().Before(time.Unix(p.Exp, 0)) {
		return p, errors.New("sign-in cookie expired")
	}
	return p, nil
}

// entraClaims are the ID token claims this package reads. See "ID token
// claims reference" in the Microsoft identity platform documentation.
type entraClaims struct {
	TID               string   `json:"tid"`
	OID               string   `json:"oid"`
	Name              string   `json:"name"`
	PreferredUsername string   `json:"preferred_username"`
	Roles             []string `json:"roles"`
}

// handleCallback finishes OIDC sign-in.
func (s *Service) handleCallback(c echo.Context) error {
	r := c.Request()
	q := r.URL.Query()
	flow, flowErr := s.readFlow(r)
	// Single use: whatever happens next, this sign-in attempt is over.
	c.SetCookie(s.cookie(s.flowCookie, "", -1))

	if code := q.Get("error"); code != "" {
		s.log.Info("provider refused sign-in", slog.String("err", clip(code, 64)))
		// The provider's words are shown only on the answer to a sign-in
		// this browser started: anyone can craft a callback link, and its
		// text must not speak with this service's voice.
		if flowErr == nil && subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) == 1 {
			return web.NewError(http.StatusBadRequest,
				"The identity provider did not sign you in ("+clip(code, 64)+": "+clip(q.Get("error_description"), 300)+").")
		}
		return web.NewError(http.StatusBadRequest, "The identity provider did not sign you in. Please start again.")
	}
	// An expired flow still names where the person was going.
	c.Set(returnKey, flow.Return)
	if flowErr != nil {
		s.log.Info("callback without a usable sign-in cookie", slog.String("why", flowErr.Error()))
		return web.NewError(http.StatusBadRequest,
			"This sign-in link has expired or was not started in this browser. Please start again.")
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(flow.State)) != 1 {
		s.log.Info("callback state does not match")
		return web.NewError(http.StatusBadRequest,
			"This sign-in response does not belong to the sign-in started in this browser. Please start again.")
	}
	if s.used.seen(flow.State, s.now()) {
		s.log.Warn("sign-in state used twice")
		return web.NewError(http.StatusBadRequest, "This sign-in response was already used. Please start again.")
	}
	code := q.Get("code")
	if code == "" {
		return web.NewError(http.StatusBadRequest, "The sign-in response has no code. Please start again.")
	}

	ctx := oidc.ClientContext(r.Context(), s.oidc.client)
	tok, err := s.oidc.oauth.Exchange(ctx, code, oauth2.VerifierOption(flow.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			s.log.Warn("code exchange refused", slog.Int("status", re.Response.StatusCode), slog.String("err", clip(re.ErrorCode, 64)))
			return web.NewError(http.StatusBadRequest, "The identity provider refused the sign-in code. Please start again.")
		}
		return web.NewError(http.StatusBadGateway, "The identity provider could not be reached. Please try again later.").
			Wrap(fmt.Errorf("signin: code exchange: %w", err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return web.NewError(http.StatusBadRequest, "The identity provider sent no ID token.")
	}
	p, status, why := s.verifyIDToken(ctx, raw, flow.Nonce)
	if why != "" {
		s.log.Warn("ID token refused", slog.String("why", why), slog.String("tenant", p.TID))
		msg := "The sign-in could not be verified. Please start again."
		if status == http.StatusForbidden {
			msg = "Your organisation is not set up to use this service. Ask your administrator to onboard it."
		}
		return web.NewError(status, msg)
	}
	// Spent only now: recording states before the provider has vouched for
	// the code would let anyone fill the record with flows of their own.
	if !s.used.use(flow.State, time.Unix(flow.Exp, 0), s.now()) {
		s.log.Warn("sign-in state used twice")
		return web.NewError(http.StatusBadRequest, "This sign-in response was already used. Please start again.")
	}
	if _, err := s.startSession(c, p); err != nil {
		return err
	}
	s.log.Info("signed in", slog.String("tenant", p.TID), slog.String("user", p.OID))
	if s.onSignIn != nil && tok.AccessToken != "" && s.forThisService(tok.AccessToken) {
		s.onSignIn(r.Context(), p.session(), tok.AccessToken)
	}
	return c.Redirect(http.StatusSeeOther, LocalPath(flow.Return))
}

// verifyIDToken checks the ID token and returns the session it gives, or a
// status and the reason (for the log) it is refused.
func (s *Service) verifyIDToken(ctx context.Context, raw, nonce string) (sessionPayload, int, string) {
	var p sessionPayload
	idt, err := s.oidc.verifier.Verify(ctx, raw)
	if err != nil {
		return p, http.StatusBadRequest, "verify: " + err.Error()
	}
	// go-oidc does not check the nonce.
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return p, http.StatusBadRequest, "nonce does not match"
	}
	var cl entraClaims
	if err := idt.Claims(&cl); err != nil {
		return p, http.StatusBadRequest, "claims: " + err.Error()
	}
	if !idPattern.MatchString(cl.TID) || !idPattern.MatchString(cl.OID) {
		return p, http.StatusBadRequest, "tid or oid missing or malformed"
	}
	p.TID = cl.TID
	if t := s.oidc.issuerTemplate; t != "" {
		if want := strings.Replace(t, tenantPlaceholder, cl.TID, 1); idt.Issuer != want {
			return p, http.StatusBadRequest, "iss does not match the tenant's issuer"
		}
	}
	if len(s.oidc.allowed) > 0 && !s.oidc.allowed[strings.ToLower(cl.TID)] {
		return p, http.StatusForbidden, "tenant not onboarded"
	}
	p.OID = cl.OID
	p.Name = clip(cl.Name, 256)
	p.UPN = clip(cl.PreferredUsername, 256)
	p.Roles = clipRoles(cl.Roles)
	return p, 0, ""
}

// clipRoles is a token's app roles as a session keeps them: at most 64,
// each clipped to 128 bytes, empty ones dropped.
func clipRoles(roles []string) []string {
	var out []string
	for _, role := range roles {
		if len(out) == 64 {
			break
		}
		if role = clip(role, 128); role != "" {
			out = append(out, role)
		}
	}
	return out
}

// clip trims s, drops control characters and cuts it to at most n bytes on
// a character boundary: provider text shown on a page or kept in a cookie.
func clip(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	return textclip.Prefix(s, n)
}
