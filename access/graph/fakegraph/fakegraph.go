// Package fakegraph is an in-process fake of the parts of Microsoft Graph
// v1.0 and of the Microsoft identity platform that package access/graph
// uses, served over HTTPS on loopback for tests.
//
// It speaks the real wire format, as the following reference pages describe
// it:
//
//   - Microsoft Graph API reference v1.0, "user: checkMemberGroups":
//     POST /v1.0/users/{id}/checkMemberGroups with the body
//     {"groupIds":["..."]} (at most 20 ids) answers 200 with
//     {"value":["..."]}, the ids among groupIds the user is a transitive
//     member of.
//   - Microsoft Graph API reference v1.0, "Get group":
//     GET /v1.0/groups/{id} with the OData query option $select (see
//     "Use query parameters to customize responses") answers 200 with the
//     group's selected properties, here id and displayName.
//   - Microsoft Graph API reference v1.0, "Get user":
//     GET /v1.0/users/{id} with $select answers 200 with the user's
//     selected properties, here id and displayName (User.Read.All).
//   - "Microsoft identity platform and the OAuth 2.0 client credentials
//     flow":
//     POST /{tenant}/oauth2/v2.0/token with the form fields
//     grant_type=client_credentials, client_id, scope, and either
//     client_secret or client_assertion_type
//     (urn:ietf:params:oauth:client-assertion-type:jwt-bearer) with
//     client_assertion, answers
//     {"token_type":"Bearer","expires_in":3599,"access_token":"..."},
//     and errors as {"error":"...","error_description":"AADSTS..."}.
//   - "Microsoft identity platform application authentication certificate
//     credentials": a certificate's client assertion is a JWT with the
//     header alg PS256, typ JWT and x5t#S256 (the base64url SHA-256
//     thumbprint of the uploaded certificate), signed with its key, with
//     aud the token endpoint's URL, iss and sub the client id, a unique
//     jti, and nbf and exp at most 10 minutes apart.
//   - "Workload identity federation": a federated identity credential
//     trusts the tokens of one issuer about one subject with the audience
//     api://AzureADTokenExchange; such a token is the client assertion
//     itself.
//   - "Microsoft Graph error responses and resource types": errors come as
//     {"error":{"code":"...","message":"...","innerError":{...}}}, and
//     "Microsoft Graph throttling guidance": 429 (or 503) with a
//     Retry-After header in seconds.
//
// The fake keeps tenants, each with users and groups; a group's members are
// users or other groups, and membership is transitive through nested groups
// (cycles allowed). Graph requests must carry a bearer token the fake's own
// token endpoint issued for an app it knows; the token decides the tenant,
// as with real Graph. Request bodies sent with Content-Encoding: gzip are
// decompressed, as the Graph SDK's default middleware compresses them.
//
// Where the pages leave details open (the error for more than 20 ids, the
// exact messages), the fake answers in Graph's error shape with error codes
// Graph uses elsewhere (Request_BadRequest, Request_ResourceNotFound,
// InvalidAuthenticationToken, TooManyRequests, serviceNotAvailable).
//
// An app proves itself with a secret ([Server.AddApp]), a certificate
// ([Server.AddCertificateApp]) or a federated credential
// ([Server.AddFederatedApp]); [Server.Assertions] lists the client
// assertions received, and [Server.SetNow] sets the clock assertions are
// judged by.
//
// Knobs let a test take the service down ([Server.Down],
// [Server.TokenDown]), throttle it ([Server.Throttle]), slow it down
// ([Server.Delay]), and count the calls it received ([Server.Counts],
// [Server.TokenRequests]).
//
// It owns nothing outside tests: production code never imports it, and it
// fakes only what access/graph calls, not Graph at large (no paging, no
// $filter, no other resources).
package fakegraph

import (
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/internal/guid"
	"teamsbot/internal/testenv"
)

// TokenLifetime is the lifetime of the access tokens the fake issues, and
// the expires_in it answers, as the identity platform does.
const TokenLifetime = 3599 * time.Second

// maxCheckIDs is Graph's limit on groupIds in one checkMemberGroups call.
const maxCheckIDs = 20

// odataJSON is the content type Graph answers JSON with.
const odataJSON = "application/json;odata.metadata=minimal;odata.streaming=true;IEEE754Compatible=false;charset=utf-8"

// Counts are the requests the fake received, whatever it answered.
type Counts struct {
	// Token counts requests to the token endpoint, in every tenant.
	Token int
	// CheckMemberGroups counts POST /users/{id}/checkMemberGroups.
	CheckMemberGroups int
	// GetGroup counts GET /groups/{id}.
	GetGroup int
	// GetUser counts GET /users/{id}.
	GetUser int
}

// Server is a running fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server
	tb  testing.TB

	mu            sync.Mutex
	apps          map[string]*app // by client id
	now           func() time.Time
	assertions    []string
	tenants       map[string]*tenant
	tokens        map[string]issued // access token -> what it was issued for
	tokenCounts   map[string]int    // tenant -> token requests
	counts        Counts
	down          bool
	tokenDown     bool
	throttleN     int
	throttleAfter time.Duration
	delay         time.Duration
}

// app is an app registration's credentials: a secret, or a certificate
// or a federated identity credential in entra.
type app struct {
	secret string
	entra  testenv.EntraApp
}

// FederatedAudience is the audience a federated identity credential for
// Entra ID expects in the other issuer's token.
const FederatedAudience = testenv.FederatedAudience

type tenant struct {
	users  map[string]bool
	names  map[string]string // user id -> displayName
	groups map[string]*group
}

type group struct {
	displayName string
	members     map[string]bool // user or group ids
}

type issued struct {
	tenant  string
	expires time.Time
}

// New starts a fake on a loopback HTTPS server and closes it when tb's test
// ends. It knows no app, tenant, user or group yet.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{
		tb:          tb,
		apps:        map[string]*app{},
		now:         time.Now,
		tenants:     map[string]*tenant{},
		tokens:      map[string]issued{},
		tokenCounts: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{tenant}/oauth2/v2.0/token", s.token)
	mux.HandleFunc("POST /v1.0/users/{id}/checkMemberGroups", s.graph(s.checkMemberGroups))
	mux.HandleFunc("GET /v1.0/groups/{id}", s.graph(s.getGroup))
	mux.HandleFunc("GET /v1.0/users/{id}", s.graph(s.getUser))
	s.srv = httptest.NewTLSServer(mux)
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the fake's origin, https://127.0.0.1:port.
func (s *Server) URL() string { return s.srv.URL }

// BaseURL is the Graph service root, like https://graph.microsoft.com/v1.0.
func (s *Server) BaseURL() string { return s.srv.URL + "/v1.0" }

// TokenURL is the token endpoint with the literal "{tenant}" for the tenant
// id, like https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token.
func (s *Server) TokenURL() string { return s.srv.URL + "/{tenant}/oauth2/v2.0/token" }

// Scope is the scope the token endpoint accepts besides
// https://graph.microsoft.com/.default: the fake's origin with "/.default".
func (s *Server) Scope() string { return s.srv.URL + "/.default" }

// Client returns an HTTP client that trusts the fake's certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// AddApp registers a multi-tenant app, consented in every tenant of the
// fake, that may get tokens with the client credentials clientID and secret.
func (s *Server) AddApp(clientID, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[clientID] = &app{secret: secret}
}

// AddCertificateApp registers a multi-tenant app, like AddApp, whose
// credential is cert: only assertions signed with cert's key prove it.
func (s *Server) AddCertificateApp(clientID string, cert *x509.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[clientID] = &app{entra: testenv.EntraApp{Cert: cert}}
}

// AddFederatedApp registers a multi-tenant app, like AddApp, whose
// credential is a federated identity credential: tokens that issuer signs
// with key about subject, for FederatedAudience, prove it.
func (s *Server) AddFederatedApp(clientID, issuer, subject string, key *rsa.PublicKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[clientID] = &app{entra: testenv.EntraApp{Federated: &testenv.FederatedCredential{Issuer: issuer, Subject: subject, Key: key}}}
}

// SetNow sets the clock that judges assertions' nbf and exp; default
// time.Now.
func (s *Server) SetNow(now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = now
}

// Assertions returns the client assertions received so far, in order,
// whatever was answered.
func (s *Server) Assertions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.assertions...)
}

// AddTenant adds an empty tenant. Adding users or groups adds their tenant
// too.
func (s *Server) AddTenant(tenantID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenant(tenantID)
}

// AddUser adds a user to tenant tenantID.
func (s *Server) AddUser(tenantID, userID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenant(tenantID).users[strings.ToLower(userID)] = true
}

// AddPerson adds a user named displayName to tenant tenantID.
func (s *Server) AddPerson(tenantID, userID, displayName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenant(tenantID)
	t.users[strings.ToLower(userID)] = true
	t.names[strings.ToLower(userID)] = displayName
}

// AddGroup adds a group named displayName to tenant tenantID.
func (s *Server) AddGroup(tenantID, groupID, displayName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tenant(tenantID).groups[strings.ToLower(groupID)] = &group{displayName: displayName, members: map[string]bool{}}
}

// AddMember makes memberID, a user or a group of the tenant, a direct member
// of group groupID. Both must exist already.
func (s *Server) AddMember(tenantID, groupID, memberID string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenant(tenantID)
	g, ok := t.groups[strings.ToLower(groupID)]
	if !ok {
		s.tb.Fatalf("fakegraph: AddMember: no group %s in tenant %s", groupID, tenantID)
	}
	m := strings.ToLower(memberID)
	if _, isGroup := t.groups[m]; !isGroup && !t.users[m] {
		s.tb.Fatalf("fakegraph: AddMember: no user or group %s in tenant %s", memberID, tenantID)
	}
	g.members[m] = true
}

// Down makes every request, to Graph or to the token endpoint, answer 503
// while down is true; Graph's 503 carries Retry-After: 10.
func (s *Server) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// TokenDown makes the token endpoint alone answer 503 while down is true.
func (s *Server) TokenDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenDown = down
}

// Throttle makes the next n Graph requests (not token requests) answer 429
// with a Retry-After of retryAfter, rounded up to whole seconds.
func (s *Server) Throttle(n int, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.throttleN = n
	s.throttleAfter = retryAfter
}

// Delay makes every request wait d before it is answered, so that a test can
// make concurrent requests overlap.
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Counts returns the requests received so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// TokenRequests returns the token requests received so far for tenantID.
func (s *Server) TokenRequests(tenantID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokenCounts[strings.ToLower(tenantID)]
}

// IssuedTokens returns every access token issued so far, so that a test can
// check none of them leaks, into logs for instance.
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for tok := range s.tokens {
		out = append(out, tok)
	}
	return out
}

// tenant returns the tenant, adding it if needed. s.mu must be held.
func (s *Server) tenant(id string) *tenant {
	id = strings.ToLower(id)
	t, ok := s.tenants[id]
	if !ok {
		t = &tenant{users: map[string]bool{}, names: map[string]string{}, groups: map[string]*group{}}
		s.tenants[id] = t
	}
	return t
}

// wait sleeps for the configured delay, or until the request is abandoned.
func (s *Server) wait(r *http.Request) {
	s.mu.Lock()
	d := s.delay
	s.mu.Unlock()
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
}

// token is the client credentials grant of the token endpoint.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	tenantID := strings.ToLower(r.PathValue("tenant"))
	s.mu.Lock()
	s.counts.Token++
	s.tokenCounts[tenantID]++
	down := s.down || s.tokenDown
	s.mu.Unlock()
	s.wait(r)
	if down {
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "AADSTS50196: The server is temporarily unavailable.")
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/x-www-form-urlencoded" {
		oauthError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
	if err := r.ParseForm(); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_request", "AADSTS900144: The request body could not be read.")
		return
	}
	form := r.PostForm
	if gt := form.Get("grant_type"); gt != "client_credentials" {
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type '"+gt+"'.")
		return
	}
	s.mu.Lock()
	_, knownTenant := s.tenants[tenantID]
	a, knownApp := s.apps[form.Get("client_id")]
	s.mu.Unlock()
	switch {
	case !knownTenant:
		oauthError(w, http.StatusBadRequest, "invalid_request", "AADSTS90002: Tenant '"+tenantID+"' not found.")
		return
	case !knownApp:
		oauthError(w, http.StatusBadRequest, "unauthorized_client", "AADSTS700016: Application with identifier '"+form.Get("client_id")+"' was not found in the directory.")
		return
	case form.Has("client_assertion") || form.Has("client_assertion_type"):
		// The audience is this very endpoint, as the client addressed it.
		if desc := s.checkAssertion(form, a, "https://"+r.Host+r.URL.EscapedPath()); desc != "" {
			oauthError(w, http.StatusUnauthorized, "invalid_client", desc)
			return
		}
	case a.secret == "" || form.Get("client_secret") != a.secret:
		oauthError(w, http.StatusUnauthorized, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
		return
	}
	if scope := form.Get("scope"); scope != s.Scope() && scope != "https://graph.microsoft.com/.default" {
		oauthError(w, http.StatusBadRequest, "invalid_scope", "AADSTS1002012: The provided value for scope "+scope+" is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier (application ID URI).")
		return
	}
	tok := randomString("fakegraph.")
	s.mu.Lock()
	s.tokens[tok] = issued{tenant: tenantID, expires: time.Now().Add(TokenLifetime)}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store, no-cache")
	json.NewEncoder(w).Encode(map[string]any{
		"token_type":     "Bearer",
		"expires_in":     int(TokenLifetime / time.Second),
		"ext_expires_in": int(TokenLifetime / time.Second),
		"access_token":   tok,
	})
}

// checkAssertion returns why a client assertion does not prove app a at
// endpoint, as Entra ID judges it (testenv.EntraApp), or "" when it does.
func (s *Server) checkAssertion(form url.Values, a *app, endpoint string) string {
	s.mu.Lock()
	s.assertions = append(s.assertions, form.Get("client_assertion"))
	now := s.now()
	s.mu.Unlock()
	return a.entra.CheckAssertion(form, form.Get("client_id"), endpoint, now)
}

// graph wraps a Graph handler: it counts, delays, answers down and
// throttled, checks the bearer token and decompresses the body. The handler
// gets the tenant the token was issued for.
func (s *Server) graph(h func(w http.ResponseWriter, r *http.Request, tenantID string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		reqID := randomString("")
		w.Header().Set("request-id", reqID)
		if c := r.Header.Get("client-request-id"); c != "" {
			w.Header().Set("client-request-id", c)
		}
		s.mu.Lock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/checkMemberGroups"):
			s.counts.CheckMemberGroups++
		case strings.HasPrefix(r.URL.Path, "/v1.0/groups/"):
			s.counts.GetGroup++
		case strings.HasPrefix(r.URL.Path, "/v1.0/users/"):
			s.counts.GetUser++
		}
		down := s.down
		throttled := false
		var retryAfter time.Duration
		if !down && s.throttleN > 0 {
			s.throttleN--
			throttled, retryAfter = true, s.throttleAfter
		}
		s.mu.Unlock()
		s.wait(r)
		if down {
			w.Header().Set("Retry-After", "10")
			graphError(w, r, http.StatusServiceUnavailable, "serviceNotAvailable", "The service is temporarily unavailable.")
			return
		}
		if throttled {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(retryAfter.Seconds()))))
			graphError(w, r, http.StatusTooManyRequests, "TooManyRequests", "Too many requests, please retry after the time given in Retry-After.")
			return
		}
		tenantID, msg := s.authenticate(r)
		if msg != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="", authorization_uri="https://login.microsoftonline.com/common/oauth2/authorize", client_id="00000003-0000-0000-c000-000000000000"`)
			graphError(w, r, http.StatusUnauthorized, "InvalidAuthenticationToken", msg)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if enc := r.Header.Get("Content-Encoding"); enc != "" {
			if !strings.EqualFold(enc, "gzip") {
				graphError(w, r, http.StatusUnsupportedMediaType, "BadRequest", "Unsupported Content-Encoding "+enc+".")
				return
			}
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				graphError(w, r, http.StatusBadRequest, "BadRequest", "The gzip request body is corrupt.")
				return
			}
			defer zr.Close()
			r.Body = io.NopCloser(zr)
		}
		h(w, r, tenantID)
	}
}

// authenticate returns the tenant the request's bearer token was issued for,
// or Graph's message for why the token is refused.
func (s *Server) authenticate(r *http.Request) (tenantID, msg string) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", "Access token is empty."
	}
	s.mu.Lock()
	is, ok := s.tokens[tok]
	s.mu.Unlock()
	switch {
	case !ok:
		return "", "Access token validation failure. Invalid audience."
	case time.Now().After(is.expires):
		return "", "Lifetime validation failed, the token is expired."
	}
	return is.tenant, ""
}

func (s *Server) checkMemberGroups(w http.ResponseWriter, r *http.Request, tenantID string) {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
		graphError(w, r, http.StatusUnsupportedMediaType, "BadRequest", "A supported MIME type could not be found that matches the content type of the response.")
		return
	}
	var body struct {
		GroupIDs *[]string `json:"groupIds"`
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		graphError(w, r, http.StatusBadRequest, "BadRequest", "The request payload is not valid for the operation 'checkMemberGroups': "+err.Error())
		return
	}
	if body.GroupIDs == nil {
		graphError(w, r, http.StatusBadRequest, "Request_BadRequest", "The parameter 'groupIds' is missing.")
		return
	}
	ids := *body.GroupIDs
	if len(ids) > maxCheckIDs {
		graphError(w, r, http.StatusBadRequest, "Request_BadRequest", fmt.Sprintf("At most %d group ids may be checked in one request, got %d.", maxCheckIDs, len(ids)))
		return
	}
	for _, id := range ids {
		if !guid.Valid(id) {
			graphError(w, r, http.StatusBadRequest, "Request_BadRequest", "Invalid GUID:"+id)
			return
		}
	}
	userID := strings.ToLower(r.PathValue("id"))
	s.mu.Lock()
	t := s.tenant(tenantID)
	if !t.users[userID] {
		s.mu.Unlock()
		graphError(w, r, http.StatusNotFound, "Request_ResourceNotFound", "Resource '"+r.PathValue("id")+"' does not exist or one of its queried reference-property objects are not present.")
		return
	}
	in := t.memberOf(userID)
	s.mu.Unlock()
	value := []string{}
	for _, id := range ids {
		if in[strings.ToLower(id)] && !slices.Contains(value, strings.ToLower(id)) {
			value = append(value, strings.ToLower(id))
		}
	}
	writeJSON(w, map[string]any{
		"@odata.context": s.BaseURL() + "/$metadata#Collection(Edm.String)",
		"value":          value,
	})
}

// getGroup answers GET /groups/{id}?$select=id,displayName as Graph does.
func (s *Server) getGroup(w http.ResponseWriter, r *http.Request, tenantID string) {
	s.getObject(w, r, tenantID, "group", func(t *tenant, id string) (string, bool) {
		g, ok := t.groups[id]
		if !ok {
			return "", false
		}
		return g.displayName, true
	})
}

// getUser answers GET /users/{id}?$select=displayName as Graph does.
func (s *Server) getUser(w http.ResponseWriter, r *http.Request, tenantID string) {
	s.getObject(w, r, tenantID, "user", func(t *tenant, id string) (string, bool) {
		return t.names[id], t.users[id]
	})
}

// getObject answers GET /{kind}s/{id} as Graph does: an object of the
// tenant that find knows (called with s.mu held), with the properties
// selected (id and displayName, the only ones kept); 400 for another
// property or an id that is no GUID, 404 for an object the tenant has not.
func (s *Server) getObject(w http.ResponseWriter, r *http.Request, tenantID, kind string, find func(t *tenant, id string) (name string, ok bool)) {
	id := strings.ToLower(r.PathValue("id"))
	props := []string{"id", "displayName"}
	if sel := r.URL.Query().Get("$select"); sel != "" {
		props = strings.Split(sel, ",")
		for _, p := range props {
			if p != "id" && p != "displayName" {
				graphError(w, r, http.StatusBadRequest, "BadRequest", "Could not find a property named '"+p+"' on type 'microsoft.graph."+kind+"'.")
				return
			}
		}
	}
	if !guid.Valid(id) {
		graphError(w, r, http.StatusBadRequest, "Request_BadRequest", "Invalid object identifier '"+r.PathValue("id")+"'.")
		return
	}
	s.mu.Lock()
	name, ok := find(s.tenant(tenantID), id)
	s.mu.Unlock()
	if !ok {
		graphError(w, r, http.StatusNotFound, "Request_ResourceNotFound", "Resource '"+r.PathValue("id")+"' does not exist or one of its queried reference-property objects are not present.")
		return
	}
	out := map[string]any{"@odata.context": s.BaseURL() + "/$metadata#" + kind + "s(" + strings.Join(props, ",") + ")/$entity"}
	for _, p := range props {
		switch p {
		case "id":
			out["id"] = id
		case "displayName":
			out["displayName"] = name
		}
	}
	writeJSON(w, out)
}

// memberOf returns every group the member belongs to, directly or through
// nested groups.
func (t *tenant) memberOf(member string) map[string]bool {
	in := map[string]bool{}
	frontier := []string{member}
	for len(frontier) > 0 {
		x := frontier[0]
		frontier = frontier[1:]
		for gid, g := range t.groups {
			if g.members[x] && !in[gid] {
				in[gid] = true
				frontier = append(frontier, gid)
			}
		}
	}
	return in
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", odataJSON)
	w.WriteHeader(http.StatusOK)
	json.NewEncoder(w).Encode(v)
}

// graphError answers Graph's error body.
func graphError(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	w.Header().Set("Content-Type", odataJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{
			"code":    code,
			"message": message,
			"innerError": map[string]any{
				"date":              time.Now().UTC().Format("2006-01-02T15:04:05"),
				"request-id":        w.Header().Get("request-id"),
				"client-request-id": r.Header.Get("client-request-id"),
			},
		},
	})
}

// oauthError answers the identity platform's error body.
func oauthError(w http.ResponseWriter, status int, code, description string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"error":             code,
		"error_description": description + "\r\nTrace ID: " + randomString("") + "\r\nTimestamp: " + time.Now().UTC().Format("2006-01-02 15:04:05Z"),
		"timestamp":         time.Now().UTC().Format("2006-01-02 15:04:05Z"),
	})
}

func randomString(prefix string) string {
	b := make([]byte, 24)
	rand.Read(b)
	return prefix + base64.RawURLEncoding.EncodeToString(b)
}
