// Package signin signs people in to the companion web page: OpenID Connect
// with Microsoft Entra ID (authorization code with PKCE, state and nonce,
// single- and multi-tenant issuers), the session cookie that follows, sign-out,
// and a local development sign-in for a service that listens on loopback only,
// which lists the local people (LocalPeople), the playground's, in its tenant.
//
// A person is identified by the token's tenant (tid) and object id (oid); the
// name, username and app roles ride along for display and for access checks
// done elsewhere. The session lives only in a sealed cookie (AES-GCM, key kept
// under the data folder): no Entra token is kept, and nothing is stored on the
// server. Deciding what a signed-in person may see or run is not this
// package's business; the view page and the access package do that.
//
// Routes added by Register:
//
//	GET  /signin?return=/local/path  start sign-in (the form, in local mode;
//	                                 &as= a local person's id selects them)
//	GET  /signin/callback            the provider's redirect (OIDC mode)
//	POST /signin/local               the local form (local mode): a local
//	                                 person picked, or someone typed in
//	GET  /signout                    a page with a sign-out button
//	POST /signout                    end the session
//	GET  /signed-out                 where sign-out lands
//
// and with Teams single sign-on (Options.Teams, see teams.go):
//
//	POST /api/signin/teams           {token}: a Teams SSO token for a session of Teams' frame
//	GET  /signin/teams/start         the popup sign-in, when Teams gives no token
//	GET  /signin/teams/done          its last page: a one-time code for the page, via teams-js
//	POST /api/signin/teams/handoff   {code}: that code for a session of Teams' frame
//
// Every sign-in page refuses to render in a frame.
//
// Cookies (HttpOnly, SameSite=Lax, Path=/; Secure with the __Host- prefix
// when the public base URL is https; a session made for Teams' frame is
// SameSite=None, Secure and Partitioned instead): teamsbot-session holds the session for
// its absolute lifetime; teamsbot-signin holds state, nonce, PKCE verifier
// and return path for 10 minutes and is spent by the callback. One sign-in at
// a time per browser: starting a second one replaces the first. The keys
// that seal both are in the file signin-cookie.key under the data folder:
// the newest seals, the older ones still open until `teamsbot keys retire`
// removes them; deleting the file ends every session.
package signin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/labstack/echo/v4"
)

// ErrNoSession is returned when a request carries no valid session: no
// cookie, one this service did not seal, or one past its expiry.
var ErrNoSession = errors.New("signin: no session")

// ErrConfig is wrapped by every configuration mistake New reports.
var ErrConfig = errors.New("signin: configuration")

// DefaultSessionLifetime is the absolute lifetime of a session when
// Options.SessionLifetime is zero: a working day, after which the person
// signs in again and fresh roles are read.
const DefaultSessionLifetime = 8 * time.Hour

// flowLifetime bounds the time between starting sign-in and the callback.
const flowLifetime = 10 * time.Minute

// Session is the signed-in person, as kept in the session cookie.
type Session struct {
	// TenantID is the Entra tenant (tid); with UserID, the identity.
	TenantID string `json:"tid"`
	// UserID is the person's immutable object id (oid), the same as the
	// Graph user id and Teams' from.aadObjectId.
	UserID string `json:"oid"`
	// Name is the display name (name), for display only.
	Name string `json:"name,omitempty"`
	// Username is preferred_username, for display only: it can change.
	Username string `json:"upn,omitempty"`
	// Roles are the app roles of the ID token (roles), read at sign-in.
	Roles []string `json:"roles,omitempty"`
	// Expires ends the session, however the browser keeps the cookie.
	Expires time.Time `json:"exp"`
	// Local is true for the local development sign-in.
	Local bool `json:"local,omitempty"`
}

// Options configures New.
type Options struct {
	// Issuer is the OIDC issuer, for Entra ID
	// https://login.microsoftonline.com/<tenant GUID>/v2.0 (one tenant) or
	// .../organizations/v2.0 or .../common/v2.0 (several tenants, which then
	// need AllowedTenants). Empty means the local development sign-in.
	Issuer, ClientID, ClientSecret string
	// PublicBaseURL is where people reach the service, an origin such as
	// https://bot.example.com. The callback URL is derived from it, and an
	// https address makes the cookies Secure with the __Host- prefix. It is
	// required with an Issuer; the zero Origin is allowed in local mode.
	PublicBaseURL netaddr.Origin
	// DataDir is where the cookie key is kept (created on first start).
	DataDir string
	// Loopback says the service listens on loopback only; the local
	// development sign-in is refused otherwise.
	Loopback bool
	// AllowedTenants are the onboarded tenant ids. Required with a
	// multi-tenant issuer; with a single-tenant issuer, when set, it is
	// checked too.
	AllowedTenants []string
	// SessionLifetime is the absolute lifetime of a session; zero means
	// DefaultSessionLifetime.
	SessionLifetime time.Duration
	// HTTPClient talks to the provider; nil means a client with a 15 s timeout.
	HTTPClient *http.Client
	// Logger receives sign-in events (never tokens or cookies); nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Teams, when set, turns on Teams single sign-on (see TeamsOptions):
	// the routes under /api/signin/teams and the popup sign-in of
	// /signin/teams/start. It needs an issuer.
	Teams *TeamsOptions
	// OnSignIn, when set, is told of each Entra ID sign-in with the
	// person's access token for this service (the assertion of the
	// on-behalf-of flow): the Teams single sign-on token, or the access
	// token of the sign-in when APIScopes made it one for this service.
	// It runs before the sign-in answers, so that what it does is done
	// when the person lands where they were going. The token goes no
	// further than this call: no session keeps it.
	OnSignIn func(ctx context.Context, s Session, assertion string)
	// APIScopes are asked at sign-in besides openid, profile and email:
	// this service's own API ({application ID URI}/access_as_user), so
	// that the sign-in's access token is one for this service.
	APIScopes []string
}

// Service signs people in. It is safe for concurrent use.
type Service struct {
	log      *slog.Logger
	now      func() time.Time
	lifetime time.Duration
	secure   bool
	origin   netaddr.Origin // PublicBaseURL; zero in local mode without one

	sessionCookie string
	flowCookie    string
	seal          *sealer
	cop           *http.CrossOriginProtection
	pages         *pages

	oidc *oidcFlow // nil in local mode
	// teams is Teams single sign-on; nil when off.
	teams *teamsSSO
	used  *usedStates
	// off: no issuer, and not on loopback either, so no sign-in at all.
	off bool
	// onSignIn is Options.OnSignIn; audiences are what this service's
	// own access tokens carry as aud: its client id and application ID
	// URI.
	onSignIn  func(ctx context.Context, s Session, assertion string)
	audiences []string
}

// New prepares sign-in: it loads or creates the cookie key and, when an
// issuer is set, runs OIDC discovery. Configuration mistakes are reported
// together, each wrapping ErrConfig.
func New(ctx context.Context, opts Options) (*Service, error) {
	s := &Service{
		log:      opts.Logger,
		now:      opts.Now,
		lifetime: opts.SessionLifetime,
		used:     &usedStates{m: map[string]time.Time{}},
		onSignIn: opts.OnSignIn,
	}
	if opts.ClientID != "" {
		s.audiences = []string{opts.ClientID, "api://" + opts.ClientID}
		if !opts.PublicBaseURL.IsZero() {
			s.audiences = append(s.audiences, ApplicationIDURI(opts.PublicBaseURL.Host(), opts.ClientID))
		}
		if opts.Teams != nil && opts.Teams.ApplicationIDURI != "" {
			s.audiences = append(s.audiences, opts.Teams.ApplicationIDURI)
		}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.lifetime == 0 {
		s.lifetime = DefaultSessionLifetime
	}

	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
	}
	if s.lifetime < 0 {
		bad("session lifetime %v must be positive", opts.SessionLifetime)
	}
	if opts.DataDir == "" {
		bad("DataDir is required: the cookie key is kept there")
	}
	if opts.PublicBaseURL.IsZero() && opts.Issuer != "" {
		bad("public base URL: required with an OIDC issuer (the callback URL is derived from it)")
	}
	s.origin = opts.PublicBaseURL
	s.secure = s.origin.HTTPS()
	// The local sign-in has no password: it is offered only where nobody
	// but this machine's own user can reach it. A loopback listener alone
	// is not enough, since a tunnel or a reverse proxy on the same machine
	// makes every request come from 127.0.0.1: the public base URL must be
	// a loopback http:// address too.
	if opts.Issuer == "" && (!opts.Loopback || s.origin.IsZero() || !s.origin.Loopback() || s.origin.HTTPS()) {
		// The rest of the service (the bot, the agent) still runs; only
		// opening views waits for a configured sign-in.
		s.off = true
		s.log.Warn("sign-in is off: no OIDC issuer is configured (" + offHelp + ")")
	}
	allowed := map[string]bool{}
	for _, t := range opts.AllowedTenants {
		t = strings.ToLower(strings.TrimSpace(t))
		if !idPattern.MatchString(t) {
			bad("allowed tenant %q is not a tenant id", t)
			continue
		}
		allowed[t] = true
	}
	if opts.Issuer != "" {
		if opts.ClientID == "" {
			bad("an OIDC client id is required with an issuer")
		}
		if opts.ClientSecret == "" {
			bad("an OIDC client secret is required with an issuer")
		}
		if _, multi := tenantTemplate(opts.Issuer); multi && len(allowed) == 0 {
			bad("issuer %s accepts any Entra tenant: list the onboarded tenant ids in AllowedTenants", opts.Issuer)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	if s.secure {
		// __Host- makes the browser refuse the cookie unless it is Secure,
		// has Path=/ and no Domain: a sibling subdomain cannot plant one.
		s.sessionCookie, s.flowCookie = "__Host-teamsbot-session", "__Host-teamsbot-signin"
	} else {
		s.sessionCookie, s.flowCookie = "teamsbot-session", "teamsbot-signin"
	}

	var err error
	if s.seal, err = loadSealer(opts.DataDir, s.now(), s.log); err != nil {
		return nil, err
	}

	s.cop = http.NewCrossOriginProtection()
	if !s.origin.IsZero() {
		// Behind a reverse proxy the Host header may not be the public
		// one; the public origin is same-site by definition.
		if err := s.cop.AddTrustedOrigin(s.origin.String()); err != nil {
			return nil, fmt.Errorf("%w: public base URL: %w", ErrConfig, err)
		}
	}
	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}

	if opts.Issuer != "" {
		client := opts.HTTPClient
		if client == nil {
			// The token request carries the client secret in its body,
			// which Go re-posts to wherever a 307 points.
			client = &http.Client{Timeout: 15 * time.Second, CheckRedirect: netaddr.SameOriginRedirects}
		}
		s.oidc, err = discover(ctx, opts, client, s.origin, allowed, s.now)
		if err != nil {
			return nil, err
		}
	}
	if opts.Teams != nil {
		client := opts.HTTPClient
		if client == nil {
			client = &http.Client{Timeout: 15 * time.Second, CheckRedirect: netaddr.SameOriginRedirects}
		}
		if s.teams, err = newTeamsSSO(ctx, opts, client, allowed); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// idPattern is what a tenant or user id may look like: Entra GUIDs, and
// simple names for the local sign-in. It keeps ids safe to put in an
// issuer URL, a log line or a store key.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// offHelp says how to turn sign-in on; the start-up warning and the sign-in
// page both show it.
const offHelp = "set TICKETIQ_OIDC_ISSUER, TICKETIQ_OIDC_CLIENT_ID and TICKETIQ_OIDC_CLIENT_SECRET; " +
	"the local development sign-in is offered only while the service listens on loopback and its public base URL is a loopback http:// address, as ./run.sh does"

// ErrOff is returned by the sign-in page when sign-in is off: no OIDC issuer
// is configured and the service does not listen on loopback.
var ErrOff = errors.New("signin: sign-in is not configured")

// Register adds the sign-in routes (see the package doc) to e.
func (s *Service) Register(e *echo.Echo) {
	if s.off {
		e.GET("/signin", s.page(func(echo.Context) error {
			return web.NewError(http.StatusServiceUnavailable, "Sign-in is not configured on this service: "+offHelp+".").Wrap(ErrOff)
		}))
		return
	}
	e.GET("/signin", s.page(s.handleSignIn))
	if s.oidc != nil {
		e.GET("/signin/callback", s.page(s.handleCallback))
	} else {
		e.POST("/signin/local", s.page(s.handleLocal))
	}
	if s.teams != nil {
		e.POST("/api/signin/teams", s.handleTeamsToken)
		e.POST("/api/signin/teams/handoff", s.handleTeamsHandoff)
		e.GET("/signin/teams/start", s.page(s.handleTeamsStart))
		e.GET("/signin/teams/done", s.page(s.handleTeamsDone))
	}
	e.GET("/signout", s.page(s.handleSignOutPage))
	e.POST("/signout", s.page(s.handleSignOut))
	e.GET("/signed-out", s.page(s.handleSignedOut))
}

// SignInURL is where to send a person who must sign in to reach returnPath.
// A returnPath that is not a local path becomes "/".
func (s *Service) SignInURL(returnPath string) string {
	return "/signin?return=" + url.QueryEscape(LocalPath(returnPath))
}

// Local reports whether the service offers the local development sign-in
// instead of OIDC.
func (s *Service) Local() bool { return s.oidc == nil && !s.off }

// Off reports whether no sign-in is offered at all (no issuer, not on
// loopback): nobody can open a view until one is configured.
func (s *Service) Off() bool { return s.off }

// sessionPayload is the sealed content of the session cookie.
type sessionPayload struct {
	V     int      `json:"v"`
	TID   string   `json:"tid"`
	OID   string   `json:"oid"`
	Name  string   `json:"name,omitempty"`
	UPN   string   `json:"upn,omitempty"`
	Roles []string `json:"roles,omitempty"`
	Exp   int64    `json:"exp"`
	Local bool     `json:"local,omitempty"`
}

// clockSlack tolerates a clock stepped back a little since a cookie was made.
const clockSlack = 5 * time.Minute

// Session returns the session of a request, or ErrNoSession. The expiry is
// read from the sealed payload, not from the cookie's Max-Age, which a client
// could ignore.
func (s *Service) Session(r *http.Request) (Session, error) {
	if s.off {
		return Session{}, ErrNoSession
	}
	now := s.now()
	for _, c := range r.CookiesNamed(s.sessionCookie) {
		plain, err := s.seal.open(s.sessionCookie, c.Value)
		if err != nil {
			s.log.Debug("session cookie refused", slog.String("why", "not sealed by this service"))
			continue
		}
		var p sessionPayload
		if err := json.Unmarshal(plain, &p); err != nil || p.V != 1 || p.TID == "" || p.OID == "" {
			s.log.Debug("session cookie refused", slog.String("why", "bad payload"))
			continue
		}
		if p.Local != (s.oidc == nil) {
			// A session from the local sign-in must never be worth anything
			// once an issuer is configured on the same data folder.
			s.log.Debug("session cookie refused", slog.String("why", "made by the other sign-in mode"))
			continue
		}
		if s.oidc != nil && len(s.oidc.allowed) > 0 && !s.oidc.allowed[strings.ToLower(p.TID)] {
			s.log.Debug("session cookie refused", slog.String("why", "tenant no longer onboarded"))
			continue
		}
		exp := time.Unix(p.Exp, 0)
		if !now.Before(exp) {
			s.log.Debug("session cookie refused", slog.String("why", "expired"))
			continue
		}
		if exp.Sub(now) > s.lifetime+clockSlack {
			// Made under a longer lifetime than the one now configured.
			s.log.Debug("session cookie refused", slog.String("why", "lifetime"))
			continue
		}
		return Session{
			TenantID: p.TID,
			UserID:   p.OID,
			Name:     p.Name,
			Username: p.UPN,
			Roles:    p.Roles,
			Expires:  exp,
			Local:    p.Local,
		}, nil
	}
	return Session{}, ErrNoSession
}

// startSession sets the session cookie for the person.
func (s *Service) startSession(c echo.Context, p sessionPayload) (time.Time, error) {
	exp, value, err := s.sealSession(p)
	if err != nil {
		return time.Time{}, err
	}
	c.SetCookie(s.cookie(s.sessionCookie, value, s.lifetime))
	return exp, nil
}

// sealSession seals a session for the cookie, refusing one too large for
// a browser to keep.
func (s *Service) sealSession(p sessionPayload) (time.Time, string, error) {
	exp := s.now().Add(s.lifetime).Truncate(time.Second)
	p.V = 1
	p.Exp = exp.Unix()
	plain, err := json.Marshal(p)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("signin: encode session: %w", err)
	}
	value := s.seal.seal(s.sessionCookie, plain)
	if len(s.sessionCookie)+len(value) > maxCookieValue {
		// A browser would drop the cookie without a word (Chromium keeps
		// name and value up to 4096 bytes together) and the person would
		// be sent to sign in again and again.
		s.log.Warn("session too large for a cookie",
			slog.String("tenant", p.TID), slog.String("user", p.OID), slog.Int("roles", len(p.Roles)), slog.Int("bytes", len(value)))
		return time.Time{}, "", web.NewError(http.StatusBadRequest,
			"Your sign-in carries more than a session can hold (too many app roles, or very long names). Ask your administrator.")
	}
	return exp, value, nil
}

// startFramedSession sets the session cookie for a page that Teams shows
// in its own frame: a third-party frame, where a browser sends a cookie
// only when it is SameSite=None and Secure, and keeps it only in the
// partition of the top-level site when it is Partitioned (CHIPS). Outside
// Teams the session keeps the Lax cookie of startSession.
func (s *Service) startFramedSession(c echo.Context, p sessionPayload) (time.Time, error) {
	exp, value, err := s.sealSession(p)
	if err != nil {
		return time.Time{}, err
	}
	ck := s.cookie(s.sessionCookie, value, s.lifetime)
	ck.SameSite = http.SameSiteNoneMode
	ck.Secure = true
	ck.Partitioned = true
	c.SetCookie(ck)
	return exp, nil
}

// cookie builds a cookie with the attributes every cookie of this package
// has. maxAge < 0 deletes it.
func (s *Service) cookie(name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     "/",
		HttpOnly: true,
		Secure:   s.secure,
		// Lax: sent on the top-level redirect back from the provider
		// (response_mode=query), not on cross-site subrequests.
		SameSite: http.SameSiteLaxMode,
	}
	if maxAge < 0 {
		c.MaxAge = -1
		c.Value = ""
	} else {
		c.MaxAge = int(maxAge / time.Second)
	}
	return c
}

// usedStates remembers the states of finished sign-ins until their flow
// cookie would have expired, so that a copied flow cookie cannot be used a
// second time even though the browser was told to delete it. Only states
// whose ID token verified are recorded, so its size follows real sign-ins.
type usedStates struct {
	mu     sync.Mutex
	m      map[string]time.Time
	pruned time.Time
}

// pruneEvery spaces out the sweeps of expired states, so that a burst of
// sign-ins costs one sweep, not one per sign-in.
const pruneEvery = time.Minute

// seen reports whether state was recorded and has not expired.
func (u *usedStates) seen(state string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	t, ok := u.m[state]
	return ok && now.Before(t)
}

// use records state and reports whether it was unused.
func (u *usedStates) use(state string, until, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if now.Sub(u.pruned) >= pruneEvery || now.Before(u.pruned) {
		for k, t := range u.m {
			if !now.Before(t) {
				delete(u.m, k)
			}
		}
		u.pruned = now
	}
	if t, ok := u.m[state]; ok && now.Before(t) {
		return false
	}
	u.m[state] = until
	return true
}

// session is the Session of a payload.
func (p sessionPayload) session() Session {
	return Session{TenantID: p.TID, UserID: p.OID, Name: p.Name, Username: p.UPN, Roles: p.Roles, Expires: time.Unix(p.Exp, 0), Local: p.Local}
}

// forThisService reports an access token whose aud names this service:
// only such a token may be exchanged on the person's behalf (Entra ID
// refuses any other as an on-behalf-of assertion, and the sign-in's
// default access token is Microsoft Graph's). It was just received from
// the provider's token endpoint over TLS; its audience is read, not
// trusted further.
func (s *Service) forThisService(token string) bool {
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &claims); err != nil {
		return false
	}
	return slices.ContainsFunc(claims.Audience, func(a string) bool { return slices.Contains(s.audiences, a) })
}
