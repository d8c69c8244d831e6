package fakeauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Alice and Bob are the people the consent page offers when the test names
// none.
const (
	Alice = "alice@crm.example"
	Bob   = "bob@crm.example"
)

// Knobs are what a test may change on a running [AuthServer], through
// [AuthServer.Configure]. The zero value of each is the server's ordinary
// behaviour.
type Knobs struct {
	// People are the accounts the consent page offers in its picker; nil
	// means [Alice] and [Bob]. A person's name is the sub of their tokens.
	People []string
	// User, when set, is the only person who can sign in: the page shows
	// "Sign in to <server> as <User>" with no picker.
	User string
	// ServerName is the <server> of the consent page; empty means the
	// host of the resource asked for.
	ServerName string
	// Scopes are scopes_supported, the only scopes the server grants;
	// nil means crm.read, crm.write and offline_access.
	Scopes []string
	// AccessTokenLifetime is the exp and expires_in of access tokens;
	// zero means an hour.
	AccessTokenLifetime time.Duration
	// DocumentClient fetches client ID metadata documents; it must trust
	// the certificate of the client's https origin. Nil refuses every URL
	// client_id.
	DocumentClient *http.Client

	// MetadataDelay holds every metadata answer this long (or until the
	// client gives up).
	MetadataDelay time.Duration
	// MetadataSize, when larger than the document, pads it with an unknown
	// member to this many bytes (still valid JSON), streamed.
	MetadataSize int
	// MetadataMalformed answers the metadata cut in half: not JSON.
	MetadataMalformed bool
	// MetadataIssuer is the issuer the metadata claims instead of the
	// server's URL (RFC 8414 section 3.3 requires a client to refuse it).
	MetadataIssuer string
	// InsecureAuthorizationEndpoint advertises an http:// authorization
	// endpoint (same host and port, not TLS).
	InsecureAuthorizationEndpoint bool
	// ResponseIssuer is the iss of authorization responses instead of the
	// server's URL (RFC 9207 section 2.4 requires a client to refuse it).
	ResponseIssuer string
	// Audience is the aud of access tokens instead of the resource asked
	// for: a token meant for another resource server.
	Audience string
	// FailRefresh answers every refresh with invalid_grant.
	FailRefresh bool

	// Entra makes the server behave as Microsoft Entra ID's v2.0
	// endpoints do: a resource parameter on /authorize or a token request
	// is refused (AADSTS901002, "The 'resource' request parameter isn't
	// supported"), and the resource is named by the scopes instead
	// ({resource}/.default), each such scope granting every scope of
	// Scopes. Token requests are also taken at /{tenant}/oauth2/v2.0/token.
	Entra bool
	// OnBehalfOf, when set, takes the on-behalf-of grant of the Microsoft
	// identity platform (grant_type
	// urn:ietf:params:oauth:grant-type:jwt-bearer, requested_token_use
	// on_behalf_of): it checks the user assertion and returns whose it is
	// (the sub of the tokens issued). A confidential client only.
	OnBehalfOf func(assertion string) (sub string, err error)
}

// Stats are what the server received, for a test to read with
// [AuthServer.Stats].
type Stats struct {
	// Requests counts requests by path, whatever the answer.
	Requests map[string]int
	// Registrations counts clients registered at /register.
	Registrations int
	// CodesIssued and CodesRedeemed count authorization codes given on
	// Allow and exchanged for tokens.
	CodesIssued, CodesRedeemed int
	// Refreshes counts refresh tokens exchanged for new tokens.
	Refreshes int
	// OnBehalfOf counts on-behalf-of grants answered with tokens.
	OnBehalfOf int
	// Resources, Scopes and ClientIDs are each resource, scope and
	// client_id parameter received at /authorize and /token, in order.
	Resources, Scopes, ClientIDs []string
	// ClientAuth is how each token and revocation request's client
	// authenticated: client_secret_basic, client_secret_post or none.
	ClientAuth []string
}

// AuthServer is a running authorization server. Its methods are safe for
// concurrent use.
type AuthServer struct {
	// URL is the issuer identifier and origin, https://127.0.0.1:port.
	URL string
	// Cert is the server's certificate.
	Cert *x509.Certificate

	key *ecdsa.PrivateKey
	kid string

	mu      sync.Mutex
	knobs   Knobs
	clients map[string]*client      // by client_id
	pending map[string]*authRequest // consent pages not yet answered, by id
	codes   map[string]*code        // by code
	refresh map[string]*grant       // by refresh token, current and spent
	access  map[string]*grant       // by access token jti
	stats   Stats
}

// client is a registered client, or one known by its metadata document.
type client struct {
	id, secret, name string
	redirectURIs     []string
}

// grant is what a person allowed a client: the tokens of one consent.
type grant struct {
	clientID, sub, resource string
	scopes                  []string
	refresh                 string // the current refresh token
	revoked                 bool
}

// StartAuthServer starts an authorization server on HTTPS loopback until
// the test ends, with knobs set by the given functions.
func StartAuthServer(t testing.TB, set ...func(*Knobs)) *AuthServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	origin, cert, ln := listenTLS(t)
	a := &AuthServer{
		URL: origin, Cert: cert, key: key, kid: "fakeauth-" + rand.Text()[:8],
		clients: map[string]*client{}, pending: map[string]*authRequest{},
		codes: map[string]*code{}, refresh: map[string]*grant{}, access: map[string]*grant{},
		stats: Stats{Requests: map[string]int{}},
	}
	for _, f := range set {
		f(&a.knobs)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", a.metadata)
	mux.HandleFunc("GET /jwks", a.jwks)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /authorize", a.decide)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", a.token)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("POST /revoke", a.revoke)
	serve(t, ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.stats.Requests[r.URL.Path]++
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	return a
}

// Configure changes the knobs of the running server.
func (a *AuthServer) Configure(f func(*Knobs)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(&a.knobs)
}

// Client returns an HTTP client that trusts the server's certificate.
func (a *AuthServer) Client() *http.Client { return Client(a.Cert) }

// Stats returns a copy of what the server received so far.
func (a *AuthServer) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Requests = maps.Clone(s.Requests)
	s.Resources = slices.Clone(s.Resources)
	s.Scopes = slices.Clone(s.Scopes)
	s.ClientIDs = slices.Clone(s.ClientIDs)
	s.ClientAuth = slices.Clone(s.ClientAuth)
	return s
}

// AddClient pre-registers a client. An empty secret makes it a public
// client (token_endpoint_auth_method none).
func (a *AuthServer) AddClient(id, secret string, redirectURIs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients[id] = &client{id: id, secret: secret, name: id, redirectURIs: redirectURIs}
}

// RevokeUser revokes every grant of a person: their refresh tokens stop
// working and [AuthServer.Verify] refuses their access tokens.
func (a *AuthServer) RevokeUser(sub string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.refresh {
		if g.sub == sub {
			g.revoked = true
		}
	}
	for _, g := range a.access {
		if g.sub == sub {
			g.revoked = true
		}
	}
	for _, c := range a.codes {
		if c.grant.sub == sub {
			c.grant.revoked = true
		}
	}
}

// knobsNow is a copy of the knobs, with the defaults filled in.
func (a *AuthServer) knobsNow() Knobs {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := a.knobs
	if k.People == nil {
		k.People = []string{Alice, Bob}
	}
	if k.User != "" {
		k.People = []string{k.User}
	}
	if k.Scopes == nil {
		k.Scopes = []string{ScopeRead, ScopeWrite, ScopeOffline}
	}
	if k.AccessTokenLifetime == 0 {
		k.AccessTokenLifetime = time.Hour
	}
	return k
}

// metadata answers the RFC 8414 document, as the knobs have it.
func (a *AuthServer) metadata(w http.ResponseWriter, r *http.Request) {
	k := a.knobsNow()
	if k.MetadataDelay > 0 {
		select {
		case <-time.After(k.MetadataDelay):
		case <-r.Context().Done():
			return
		}
	}
	meta := oauthex.AuthServerMeta{
		Issuer:                                     a.URL,
		AuthorizationEndpoint:                      a.URL + "/authorize",
		TokenEndpoint:                              a.URL + "/token",
		JWKSURI:                                    a.URL + "/jwks",
		RegistrationEndpoint:                       a.URL + "/register",
		RevocationEndpoint:                         a.URL + "/revoke",
		ScopesSupported:                            k.Scopes,
		ResponseTypesSupported:                     []string{"code"},
		GrantTypesSupported:                        []string{"authorization_code", "refresh_token"},
		TokenEndpointAuthMethodsSupported:          []string{"client_secret_basic", "client_secret_post", "none"},
		RevocationEndpointAuthMethodsSupported:     []string{"client_secret_basic", "client_secret_post", "none"},
		CodeChallengeMethodsSupported:              []string{"S256"},
		ClientIDMetadataDocumentSupported:          true,
		AuthorizationResponseIssParameterSupported: true,
	}
	if k.MetadataIssuer != "" {
		meta.Issuer = k.MetadataIssuer
	}
	if k.InsecureAuthorizationEndpoint {
		meta.AuthorizationEndpoint = "http" + strings.TrimPrefix(a.URL, "https") + "/authorize"
	}
	body, _ := json.Marshal(meta)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case k.MetadataMalformed:
		w.Write(body[:len(body)/2])
	case k.MetadataSize > len(body):
		head := fmt.Sprintf(`%s,"x_padding":"`, body[:len(body)-1])
		pad := k.MetadataSize - len(head) - len(`"}`)
		io.WriteString(w, head)
		chunk := []byte(strings.Repeat("a", 64<<10))
		for pad > 0 {
			n := min(pad, len(chunk))
			if _, err := w.Write(chunk[:n]); err != nil {
				return // the client stopped reading, as it should
			}
			pad -= n
		}
		io.WriteString(w, `"}`)
	default:
		w.Write(body)
	}
}

// jwks answers the JSON Web Key Set (RFC 7517) of the token signing key.
func (a *AuthServer) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := a.key.PublicKey
	b64 := func(n []byte) string { return base64.RawURLEncoding.EncodeToString(n) }
	x, y := make([]byte, 32), make([]byte, 32)
	pub.X.FillBytes(x)
	pub.Y.FillBytes(y)
	writeJSON(w, http.StatusOK, map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": a.kid,
		"x": b64(x), "y": b64(y),
	}}})
}

// Claims are the claims of the server's access tokens (RFC 9068).
type Claims struct {
	jwt.RegisteredClaims
	// Scope is the space-separated list of granted scopes.
	Scope string `json:"scope"`
	// ClientID is the client the token was issued to.
	ClientID string `json:"client_id"`
}

// Scopes are the granted scopes.
func (c *Claims) Scopes() []string { return strings.Fields(c.Scope) }

// ErrRevoked is Verify's error for a token whose grant was revoked.
var ErrRevoked = errors.New("the token was revoked")

// Verify checks an access token as a resource server must: the signature
// with the server's key, the issuer, the expiry, and that its grant is not
// revoked. The audience is the resource server's to check.
func (a *AuthServer) Verify(token string) (*Claims, error) {
	var c Claims
	_, err := jwt.ParseWithClaims(token, &c, func(tok *jwt.Token) (any, error) {
		if tok.Header["kid"] != a.kid || tok.Header["typ"] != "at+jwt" {
			return nil, errors.New("not an access token of this server")
		}
		return &a.key.PublicKey, nil
	}, jwt.WithValidMethods([]string{"ES256"}), jwt.WithIssuer(a.URL), jwt.WithExpirationRequired())
	if err != nil {
		return nil, fmt.Errorf("access token: %w", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.access[c.ID]; g == nil || g.revoked {
		return nil, ErrRevoked
	}
	return &c, nil
}

// register is RFC 7591's client registration endpoint. A client whose
// token_endpoint_auth_method is client_secret_basic (the default) or
// client_secret_post gets a secret; one with none is public.
func (a *AuthServer) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&m); err != nil {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "the body is not a JSON object of client metadata"})
		return
	}
	if len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_redirect_uri", "redirect_uris is required"})
		return
	}
	for _, u := range m.RedirectURIs {
		if p, err := url.Parse(u); err != nil || !p.IsAbs() || p.Fragment != "" {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_redirect_uri", "a redirect URI must be absolute, without a fragment"})
			return
		}
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "client_secret_basic"
	}
	if !slices.Contains([]string{"client_secret_basic", "client_secret_post", "none"}, m.TokenEndpointAuthMethod) {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_client_metadata", "token_endpoint_auth_method must be client_secret_basic, client_secret_post or none"})
		return
	}
	c := &client{id: "dyn-" + rand.Text(), name: m.ClientName, redirectURIs: m.RedirectURIs}
	if m.TokenEndpointAuthMethod != "none" {
		c.secret = rand.Text()
	}
	if c.name == "" {
		c.name = c.id
	}
	a.mu.Lock()
	a.clients[c.id] = c
	a.stats.Registrations++
	a.mu.Unlock()
	writeJSON(w, http.StatusCreated, &oauthex.ClientRegistrationResponse{
		ClientRegistrationMetadata: m,
		ClientID:                   c.id,
		ClientSecret:               c.secret,
		ClientIDIssuedAt:           time.Now(),
	})
}

// revoke is RFC 7009's revocation endpoint: revoking an access or refresh
// token revokes its whole grant. It answers 200 for unknown tokens too.
func (a *AuthServer) revoke(w http.ResponseWriter, r *http.Request) {
	clientID, oerr := a.authenticate(r)
	if oerr != nil {
		oerr.write(w)
		return
	}
	tok := r.PostFormValue("token")
	a.mu.Lock()
	g := a.refresh[tok]
	if g == nil {
		var c Claims
		if _, _, err := jwt.NewParser().ParseUnverified(tok, &c); err == nil {
			g = a.access[c.ID]
		}
	}
	if g != nil && g.clientID == clientID {
		g.revoked = true
	}
	a.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// oauthError is an OAuth error response (RFC 6749 section 5.2), written
// with status 400, or 401 for invalid_client.
type oauthError struct {
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *oauthError) write(w http.ResponseWriter) {
	status := http.StatusBadRequest
	if e.Code == "invalid_client" {
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Basic realm="token"`)
	}
	writeJSON(w, status, e)
}
