package fakeauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// authRequest is an authorization request waiting on the consent page.
type authRequest struct {
	client                     *client
	redirectURI, state         string
	challenge, resource, scope string
}

// code is an authorization code: one use, within codeLifetime.
type code struct {
	grant       *grant
	redirectURI string
	challenge   string
	expires     time.Time
	used        bool
}

// codeLifetime is how long a code may wait to be exchanged (OAuth 2.1
// recommends a short lifetime; ten minutes is RFC 6749's maximum).
const codeLifetime = 10 * time.Minute

// maxDocument is the largest client ID metadata document the server reads:
// the draft's security considerations suggest a limit of 5 kilobytes.
const maxDocument = 5 << 10

// authorize is the authorization endpoint (GET). A request whose client or
// redirect URI is wrong gets an error page and no redirect (RFC 6749
// section 4.1.2.1); any other error goes back to the client's redirect
// URI. A good request gets the consent page.
func (a *AuthServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.stats.ClientIDs = append(a.stats.ClientIDs, q.Get("client_id"))
	if q.Has("resource") {
		a.stats.Resources = append(a.stats.Resources, q.Get("resource"))
	}
	if q.Has("scope") {
		a.stats.Scopes = append(a.stats.Scopes, q.Get("scope"))
	}
	a.mu.Unlock()

	c, err := a.lookupClient(r.Context(), q.Get("client_id"))
	if err != nil {
		http.Error(w, "This sign-in link names an unknown client: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := &authRequest{
		client: c, redirectURI: q.Get("redirect_uri"), state: q.Get("state"),
		challenge: q.Get("code_challenge"), resource: q.Get("resource"), scope: q.Get("scope"),
	}
	if !slices.Contains(c.redirectURIs, req.redirectURI) {
		http.Error(w, "This sign-in link's redirect_uri is not one its client registered.", http.StatusBadRequest)
		return
	}
	k := a.knobsNow()
	fail := func(code, desc string) { a.respond(w, req, url.Values{"error": {code}, "error_description": {desc}}) }
	if k.Entra {
		if q.Has("resource") {
			fail("invalid_request", entraNoResource)
			return
		}
		req.resource = resourceOfScopes(req.scope)
		req.scope = entraScopes(req.scope, k)
	}
	switch res, _ := url.Parse(req.resource); {
	case q.Get("response_type") != "code":
		fail("unsupported_response_type", "response_type must be code")
	case q.Get("code_challenge_method") != "S256" || len(req.challenge) != 43:
		fail("invalid_request", "PKCE is required: code_challenge_method S256 and a code_challenge")
	case req.resource == "" || res == nil || !res.IsAbs() || res.Fragment != "":
		fail("invalid_target", "resource is required: the absolute URI of the protected resource (RFC 8707)")
	case slices.ContainsFunc(strings.Fields(req.scope), func(s string) bool { return !slices.Contains(k.Scopes, s) }):
		fail("invalid_scope", "the server grants only "+strings.Join(k.Scopes, " "))
	default:
		a.consent(w, req, k)
	}
}

// consentPage asks the person to allow or deny, as a form that a person,
// headless Chromium or an http.Client posts.
var consentPage = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in to {{.Server}}</title></head>
<body>
<form method="post" action="/authorize">
<h1>{{if .User}}Sign in to {{.Server}} as {{.User}}{{else}}Sign in to {{.Server}}{{end}}</h1>
{{if .User}}<input type="hidden" name="user" value="{{.User}}">{{else}}<label>Sign in to {{.Server}} as
<select name="user" id="user">{{range .People}}<option>{{.}}</option>{{end}}</select></label>{{end}}
<p>{{.Client}} asks to use {{.Server}} in your name{{with .Scope}} ({{.}}){{end}}.</p>
<input type="hidden" name="request" value="{{.ID}}">
<button type="submit" name="decision" value="allow" id="allow">Allow</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button>
</form>
</body></html>
`))

// consent keeps the request and shows the consent page.
func (a *AuthServer) consent(w http.ResponseWriter, req *authRequest, k Knobs) {
	id := rand.Text()
	a.mu.Lock()
	a.pending[id] = req
	a.mu.Unlock()
	server := k.ServerName
	if server == "" {
		u, _ := url.Parse(req.resource)
		server = u.Host
	}
	data := map[string]any{"Server": server, "Client": req.client.name, "Scope": req.scope, "ID": id, "People": k.People}
	if len(k.People) == 1 {
		data["User"] = k.People[0]
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	consentPage.Execute(w, data)
}

// decide takes the consent page's answer: Allow issues a code to the
// redirect URI, Deny answers access_denied. Each page is answered once.
func (a *AuthServer) decide(w http.ResponseWriter, r *http.Request) {
	k := a.knobsNow()
	id, user := r.PostFormValue("request"), r.PostFormValue("user")
	a.mu.Lock()
	req := a.pending[id]
	delete(a.pending, id)
	a.mu.Unlock()
	switch {
	case req == nil:
		http.Error(w, "This sign-in page was already answered or never shown. Start again from the application.", http.StatusBadRequest)
	case r.PostFormValue("decision") != "allow":
		a.respond(w, req, url.Values{"error": {"access_denied"}, "error_description": {"the person denied the request"}})
	case !slices.Contains(k.People, user):
		http.Error(w, "There is no account "+user+" here.", http.StatusBadRequest)
	default:
		c := rand.Text()
		a.mu.Lock()
		a.codes[c] = &code{
			grant: &grant{
				clientID: req.client.id, sub: user, resource: req.resource,
				scopes: strings.Fields(req.scope),
			},
			redirectURI: req.redirectURI, challenge: req.challenge,
			expires: time.Now().Add(codeLifetime),
		}
		a.stats.CodesIssued++
		a.mu.Unlock()
		a.respond(w, req, url.Values{"code": {c}})
	}
}

// respond redirects to the client's redirect URI with params, the state
// and iss (RFC 9207: in every response, errors too).
func (a *AuthServer) respond(w http.ResponseWriter, req *authRequest, params url.Values) {
	iss := a.URL
	if k := a.knobsNow(); k.ResponseIssuer != "" {
		iss = k.ResponseIssuer
	}
	params.Set("iss", iss)
	if req.state != "" {
		params.Set("state", req.state)
	}
	u, _ := url.Parse(req.redirectURI)
	q := u.Query()
	for key, v := range params {
		q[key] = v
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

// lookupClient finds a registered client, or, for an https URL, fetches
// and checks its client ID metadata document.
func (a *AuthServer) lookupClient(ctx context.Context, id string) (*client, error) {
	a.mu.Lock()
	c := a.clients[id]
	a.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if !strings.HasPrefix(id, "https://") {
		return nil, errors.New("the client is not registered")
	}
	// Fetched at each request, not cached, so that a test may change the
	// document between two sign-ins.
	c, err := a.fetchDocument(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("the client ID metadata document at %s: %w", id, err)
	}
	return c, nil
}

// fetchDocument fetches a client ID metadata document and checks it as
// draft-ietf-oauth-client-id-metadata-document says: an https URL with a
// path, a 200 answer without redirects, at most 5 KB of JSON whose
// client_id is the URL itself (a simple string comparison), redirect_uris
// listed, and no shared secret (the document is public).
func (a *AuthServer) fetchDocument(ctx context.Context, id string) (*client, error) {
	k := a.knobsNow()
	if k.DocumentClient == nil {
		return nil, errors.New("this server fetches no documents (no DocumentClient)")
	}
	if u, err := url.Parse(id); err != nil || u.Path == "" || u.Path == "/" || u.Fragment != "" {
		return nil, errors.New("a client ID URL is https with a path and no fragment")
	}
	hc := *k.DocumentClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocument+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxDocument {
		return nil, errors.New("larger than 5 KB")
	}
	var doc struct {
		ClientID                string   `json:"client_id"`
		ClientName              string   `json:"client_name"`
		RedirectURIs            []string `json:"redirect_uris"`
		TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
		ClientSecret            string   `json:"client_secret"`
	}
	switch err := json.Unmarshal(body, &doc); {
	case err != nil:
		return nil, fmt.Errorf("not JSON: %w", err)
	case doc.ClientID != id:
		return nil, fmt.Errorf("its client_id is %q, not its own URL", doc.ClientID)
	case len(doc.RedirectURIs) == 0:
		return nil, errors.New("it lists no redirect_uris")
	case doc.ClientSecret != "" || strings.HasPrefix(doc.TokenEndpointAuthMethod, "client_secret"):
		return nil, errors.New("it claims a shared secret, which a public document cannot hold")
	}
	name := doc.ClientName
	if name == "" {
		name = id
	}
	return &client{id: id, name: name, redirectURIs: doc.RedirectURIs}, nil
}
