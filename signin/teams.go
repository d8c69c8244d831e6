package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"

	"teamsbot/internal/guid"
	"teamsbot/internal/web"
)

// Teams single sign-on: inside Teams the view page asks teams-js for a
// token (authentication.getAuthToken), which Teams gets from Entra ID for
// this service's own application ID URI, and trades it here for a session.
// The documents followed are Microsoft's "Enable SSO for tab app" (with
// "Configure your tab app in Microsoft Entra ID" for the application ID
// URI, the access_as_user scope and the pre-authorized client ids) and
// "Access token claims reference" (iss, aud, tid, oid, scp, azp/appid,
// ver).

// TeamsScope is the delegated scope the app registration exposes for Teams
// single sign-on, as "Enable SSO for tab app" names it.
const TeamsScope = "access_as_user"

// TeamsClientIDs are the Microsoft 365 clients that ask Entra ID for a
// Teams single sign-on token ("Configure your tab app in Microsoft Entra
// ID", table of client ids to pre-authorize). A token whose azp (v2) or
// appid (v1) is none of them was not asked for by Teams, Microsoft 365 or
// Outlook, and is refused.
var TeamsClientIDs = []string{
	"1fec8e78-bce4-4aaf-ab1b-5451cc387264", // Teams mobile or desktop
	"5e3ce6c0-2b1f-4285-8d4b-75ee78787346", // Teams web
	"4765445b-32c6-49b0-83e6-1d93765276ca", // Microsoft 365 web
	"0ec893e0-5785-4de6-99da-4ed124e5296c", // Microsoft 365 desktop
	"d3590ed6-52b3-4102-aeff-aad2292ab01c", // Microsoft 365 mobile, Outlook desktop
	"bc59ab01-8403-45c6-8796-ac3ef710b3e3", // Outlook web
	"27922004-5251-4030-b22d-91ecd9a37ea4", // Outlook mobile
}

// publicAuthority is Entra ID's sign-in host in the public cloud, the only
// one whose v1 tokens are documented with the sts.windows.net issuer.
const publicAuthority = "https://login.microsoftonline.com"

// hostOrigin is what a HostOrigins entry may look like.
var hostOrigin = regexp.MustCompile(`^https://(\*\.)?[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$`)

// tokenSkew is the clock difference tolerated on exp and nbf.
const tokenSkew = time.Minute

// maxTeamsTokenBytes bounds the body of POST /signin/teams.
const maxTeamsTokenBytes = 16 << 10

// TeamsOptions turns on Teams single sign-on (TICKETIQ_TEAMS_TAB). It needs
// the OIDC sign-in: the app registration is the same (Options.ClientID), and
// the tenants allowed are the same.
type TeamsOptions struct {
	// ApplicationIDURI is the app registration's application ID URI,
	// api://{host of the public base URL}/{client id}; empty means exactly
	// that.
	ApplicationIDURI string
	// Authority is Entra ID's sign-in host of the cloud, such as
	// https://login.microsoftonline.com; v2 tokens carry {Authority}/{tid}/v2.0
	// as their issuer. Empty means the public cloud.
	Authority string
	// KeysURL is the key set the tokens are signed with; empty means
	// {Authority}/common/discovery/v2.0/keys, which holds the keys of every
	// tenant.
	KeysURL string
	// HTTPClient fetches the key set; nil means Options.HTTPClient.
	HTTPClient *http.Client
	// HostOrigins are origins (https://host or https://*.domain) whose
	// teams-js messages the popup's last page trusts besides the Teams
	// origins teams-js itself knows: the hosts allowed to frame the view
	// page.
	HostOrigins []string
}

// teamsSSO is what Teams single sign-on needs after New.
type teamsSSO struct {
	verifier  *oidc.IDTokenVerifier
	audiences []string // the application ID URI and the client id
	authority string
	// origins are TeamsOptions.HostOrigins, joined by spaces.
	origins string
	// tenant is the only tenant of a single-tenant issuer (a GUID), "" for
	// a multi-tenant one (then allowed decides).
	tenant string
}

// newTeamsSSO checks the options and prepares the token verifier.
func newTeamsSSO(ctx context.Context, opts Options, client *http.Client, allowed map[string]bool) (*teamsSSO, error) {
	t := opts.Teams
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: Teams single sign-on: "+format, append([]any{ErrConfig}, args...)...))
	}
	if opts.Issuer == "" {
		bad("needs the OIDC sign-in (an issuer and its client id): Teams asks Entra ID for a token of the same app registration")
	}
	if !opts.PublicBaseURL.HTTPS() {
		bad("needs an https:// public base URL: Teams shows only https pages, and the session cookie inside Teams must be Secure")
	}
	s := &teamsSSO{authority: strings.TrimSuffix(t.Authority, "/")}
	if s.authority == "" {
		s.authority = publicAuthority
	}
	if u, err := url.Parse(s.authority); err != nil || u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		bad("authority %q must be an https:// origin", t.Authority)
	}
	uri := t.ApplicationIDURI
	if uri == "" && !opts.PublicBaseURL.IsZero() {
		uri = ApplicationIDURI(opts.PublicBaseURL.Hostname(), opts.ClientID)
	}
	if !strings.HasPrefix(uri, "api://") {
		bad("application ID URI %q must start with api://", uri)
	}
	s.audiences = []string{uri, opts.ClientID}
	if _, multi := tenantTemplate(opts.Issuer); !multi {
		if first := issuerTenant(opts.Issuer); guid.Valid(first) {
			s.tenant = strings.ToLower(first)
		}
	}
	for _, o := range t.HostOrigins {
		if !hostOrigin.MatchString(o) {
			bad("host origin %q is not https://host or https://*.domain", o)
		}
	}
	s.origins = strings.Join(t.HostOrigins, " ")
	if s.tenant == "" && len(allowed) == 0 {
		bad("the tenants whose tokens are taken are not known: use a single-tenant issuer or list the allowed tenants")
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	keys := t.KeysURL
	if keys == "" {
		keys = s.authority + "/common/discovery/v2.0/keys"
	}
	if t.HTTPClient != nil {
		client = t.HTTPClient
	}
	// The key set outlives the start-up context: it fetches again when a
	// token names a key it does not have (Entra rolls its keys).
	keyCtx := oidc.ClientContext(context.WithoutCancel(ctx), client)
	s.verifier = oidc.NewVerifier("", oidc.NewRemoteKeySet(keyCtx, keys), &oidc.Config{
		// Checked in verify, each with the rule of "Access token claims
		// reference": the audience may be either of two, the issuer
		// depends on the token's tenant and version, and the time checks
		// allow a small skew both ways.
		SkipClientIDCheck:    true,
		SkipIssuerCheck:      true,
		SkipExpiryCheck:      true,
		SupportedSigningAlgs: []string{oidc.RS256},
	})
	return s, nil
}

// ApplicationIDURI is the application ID URI that "Enable SSO for tab app"
// asks for: api://{host}/{client id}, the host in lower case.
func ApplicationIDURI(host, clientID string) string {
	return "api://" + strings.ToLower(host) + "/" + clientID
}

// issuerTenant is the first path segment of an issuer URL
// (https://login.microsoftonline.com/{tenant}/v2.0).
func issuerTenant(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	return first
}

// teamsClaims are the access token claims Teams single sign-on reads.
type teamsClaims struct {
	Issuer            string          `json:"iss"`
	Version           string          `json:"ver"`
	TID               string          `json:"tid"`
	OID               string          `json:"oid"`
	Scope             string          `json:"scp"`
	AZP               string          `json:"azp"`
	AppID             string          `json:"appid"`
	Name              string          `json:"name"`
	PreferredUsername string          `json:"preferred_username"`
	UPN               string          `json:"upn"`
	Roles             []string        `json:"roles"`
	Exp               json.Number     `json:"exp"`
	NotBefore         json.Number     `json:"nbf"`
	Audience          json.RawMessage `json:"aud"`
}

// verifyTeamsToken checks a Teams single sign-on token and returns the
// session it gives, or a status and the reason (for the log) it is refused.
func (s *Service) verifyTeamsToken(ctx context.Context, raw string) (sessionPayload, int, string) {
	var p sessionPayload
	t := s.teams
	tok, err := t.verifier.Verify(ctx, raw)
	if err != nil {
		return p, http.StatusUnauthorized, "signature: " + err.Error()
	}
	var cl teamsClaims
	if err := tok.Claims(&cl); err != nil {
		return p, http.StatusUnauthorized, "claims: " + err.Error()
	}
	now := s.now()
	exp, err := cl.Exp.Int64()
	if err != nil {
		return p, http.StatusUnauthorized, "exp missing"
	}
	if !now.Before(time.Unix(exp, 0).Add(tokenSkew)) {
		return p, http.StatusUnauthorized, "expired"
	}
	if cl.NotBefore != "" {
		nbf, err := cl.NotBefore.Int64()
		if err != nil || now.Add(tokenSkew).Before(time.Unix(nbf, 0)) {
			return p, http.StatusUnauthorized, "not valid yet (nbf)"
		}
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(t.audiences, a) }) {
		return p, http.StatusUnauthorized, "audience is not this service's application ID URI or client id"
	}
	if !guid.Valid(cl.TID) || !guid.Valid(cl.OID) {
		return p, http.StatusUnauthorized, "tid or oid missing or malformed"
	}
	tid := strings.ToLower(cl.TID)
	p.TID = cl.TID
	// iss names the token's own tenant, so a token of one tenant cannot
	// pass for another's: v2 {authority}/{tid}/v2.0, v1 (public cloud
	// only) https://sts.windows.net/{tid}/.
	client := cl.AZP
	switch cl.Version {
	case "2.0":
		if !strings.EqualFold(cl.Issuer, t.authority+"/"+tid+"/v2.0") {
			return p, http.StatusUnauthorized, "iss is not the token tenant's v2.0 issuer"
		}
	case "1.0":
		if t.authority != publicAuthority || !strings.EqualFold(cl.Issuer, "https://sts.windows.net/"+tid+"/") {
			return p, http.StatusUnauthorized, "iss is not the token tenant's v1.0 issuer"
		}
		client = cl.AppID
	default:
		return p, http.StatusUnauthorized, "ver is neither 1.0 nor 2.0"
	}
	if !slices.Contains(strings.Fields(cl.Scope), TeamsScope) {
		// An ID token, or a token for another of the app's scopes.
		return p, http.StatusUnauthorized, "scp lacks " + TeamsScope
	}
	if !slices.Contains(TeamsClientIDs, strings.ToLower(client)) {
		return p, http.StatusUnauthorized, "not asked for by a Teams, Microsoft 365 or Outlook client (azp/appid)"
	}
	if t.tenant != "" && tid != t.tenant {
		return p, http.StatusForbidden, "tenant is not the issuer's tenant"
	}
	if len(s.oidc.allowed) > 0 && !s.oidc.allowed[tid] {
		return p, http.StatusForbidden, "tenant not onboarded"
	}
	p.OID = cl.OID
	p.Name = clip(cl.Name, 256)
	p.UPN = clip(cl.PreferredUsername, 256)
	if p.UPN == "" {
		p.UPN = clip(cl.UPN, 256)
	}
	p.Roles = clipRoles(cl.Roles)
	return p, 0, ""
}

// Teams reports whether Teams single sign-on is on.
func (s *Service) Teams() bool { return s.teams != nil }

// handleTeamsToken serves POST /signin/teams: the view page inside Teams
// trades its Teams single sign-on token for a session. The body is
// {"token": "..."}, JSON from the page's own origin only; the answer is
// 204 with the session cookie, made for a third-party frame.
func (s *Service) handleTeamsToken(c echo.Context) error {
	r := c.Request()
	if err := s.cop.Check(r); err != nil {
		return errCrossSite
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return web.NewError(http.StatusUnsupportedMediaType, "Send the token as JSON.")
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxTeamsTokenBytes))
	if err != nil {
		return web.NewError(http.StatusRequestEntityTooLarge, "The token is too large.")
	}
	var in struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.Token == "" {
		return web.NewError(http.StatusBadRequest, "Send {\"token\": \"...\"} with the token Teams gave.")
	}
	p, status, why := s.verifyTeamsToken(r.Context(), in.Token)
	if why != "" {
		s.log.Warn("Teams token refused", slog.String("why", why), slog.String("tenant", p.TID))
		msg := "Teams' sign-in token was not accepted."
		if status == http.StatusForbidden {
			msg = "Your organisation is not set up to use this service. Ask your administrator to onboard it."
		}
		return web.NewError(status, msg)
	}
	if _, err := s.startFramedSession(c, p); err != nil {
		return err
	}
	s.log.Info("signed in (Teams single sign-on)", slog.String("tenant", p.TID), slog.String("user", p.OID))
	if s.onSignIn != nil {
		// The Teams single sign-on token is an access token for this
		// service: the on-behalf-of flow's assertion.
		s.onSignIn(r.Context(), p.session(), in.Token)
	}
	return c.NoContent(http.StatusNoContent)
}
