package bot

// Fakes for what cannot run here: the Bot Framework's OpenID metadata and
// signing keys, the Entra token endpoint, and the Bot Connector. Each speaks
// the wire format of the document it names, on 127.0.0.1.

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"teamsbot/internal/testenv"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/golang-jwt/jwt/v4"
)

// fakeBotFramework serves the OpenID metadata document and its JWKS as
// "Authenticate requests from the Bot Connector service to your bot"
// describes them: the metadata names jwks_uri; each key carries the
// channels it is endorsed for in "endorsements".
type fakeBotFramework struct {
	srv *httptest.Server

	mu        sync.Mutex
	keys      map[string]*rsa.PrivateKey
	endorse   map[string][]string
	order     []string
	metaGets  int
	keysGets  int
	failMeta  bool
	metaDelay chan struct{} // when set, metadata requests wait for it
}

func newFakeBotFramework(t testing.TB) *fakeBotFramework {
	f := &fakeBotFramework{keys: map[string]*rsa.PrivateKey{}, endorse: map[string][]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/.well-known/openidconfiguration", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.metaGets++
		fail, wait := f.failMeta, f.metaDelay
		f.mu.Unlock()
		if wait != nil {
			<-wait
		}
		if fail {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"issuer":                                "https://api.botframework.com",
			"authorization_endpoint":                "https://invalid.botframework.com",
			"jwks_uri":                              f.srv.URL + "/v1/.well-known/keys",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"token_endpoint_auth_methods_supported": []string{"private_key_jwt"},
		})
	})
	mux.HandleFunc("GET /v1/.well-known/keys", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.keysGets++
		var keys []map[string]any
		for _, kid := range f.order {
			pub := f.keys[kid].PublicKey
			keys = append(keys, map[string]any{
				"kty":          "RSA",
				"use":          "sig",
				"kid":          kid,
				"n":            base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
				"e":            base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
				"endorsements": f.endorse[kid],
			})
		}
		writeJSON(w, http.StatusOK, map[string]any{"keys": keys})
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// addKey publishes a new signing key endorsed for the given channels.
func (f *fakeBotFramework) addKey(t testing.TB, kid string, endorsements ...string) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[kid] = k
	f.endorse[kid] = endorsements
	f.order = append(f.order, kid)
	return k
}

func (f *fakeBotFramework) key(kid string) *rsa.PrivateKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[kid]
}

func (f *fakeBotFramework) metadataURL() string {
	return f.srv.URL + "/v1/.well-known/openidconfiguration"
}

func (f *fakeBotFramework) fetchCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keysGets
}

// sign makes a JWT with the given header algorithm and key.
func sign(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fakeTokenEndpoint is the Microsoft identity platform v2.0 token endpoint
// for the client-credentials grant ("Microsoft identity platform and the
// OAuth 2.0 client credentials flow"): a form POST to
// /{tenant}/oauth2/v2.0/token answered with token_type, expires_in and
// access_token, or an OAuth error object. The app proves itself in one of
// the document's three ways: client_secret; a certificate's client
// assertion, checked as "Microsoft identity platform application
// authentication certificate credentials" describes it (PS256 signature by
// the uploaded certificate's key, found by its x5t#S256 thumbprint; aud the
// endpoint's own URL; iss and sub the client id; a jti never seen before;
// nbf, exp at most 10 minutes later); or a federated credential ("Workload
// identity federation"): a token of a trusted issuer, checked against the
// issuer's key, its subject and the audience api://AzureADTokenExchange.
type fakeTokenEndpoint struct {
	srv              *httptest.Server
	tenant           string
	clientID, secret string
	// scope is the one scope it grants: the public cloud's Bot Connector
	// unless a test sets another cloud's before the first request.
	scope string

	mu     sync.Mutex
	calls  int
	issued []string
	gate   chan struct{} // when set, requests wait for it to close
	gone   chan struct{} // closed when a caller gives up on a request held at the gate

	// now judges assertions' times; nil is time.Now.
	now func() time.Time
	// app holds the certificate uploaded to the app registration and its
	// federated identity credential, if any.
	app testenv.EntraApp
	// assertions are the client assertions received, in order.
	assertions []string
}

func newFakeTokenEndpoint(t testing.TB, tenant, clientID, secret string) *fakeTokenEndpoint {
	f := &fakeTokenEndpoint{tenant: tenant, clientID: clientID, secret: secret, scope: "https://api.botframework.com/.default"}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/"+f.tenant+"/oauth2/v2.0/token" {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not_found"})
			return
		}
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_request"})
			return
		}
		f.mu.Lock()
		f.calls++
		gate := f.gate
		f.mu.Unlock()
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				f.mu.Lock()
				if f.gone != nil {
					close(f.gone)
					f.gone = nil
				}
				f.mu.Unlock()
				return
			}
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.PostForm.Get("grant_type") != "client_credentials":
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		case r.PostForm.Get("scope") != f.scope:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_scope"})
		case r.PostForm.Get("client_id") != f.clientID:
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unauthorized_client", "error_description": "AADSTS700016: Application not found in the directory."})
		case r.PostForm.Has("client_assertion") || r.PostForm.Has("client_assertion_type"):
			if desc := f.checkAssertion(r.PostForm); desc != "" {
				writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": desc})
				return
			}
			f.grant(w)
		case f.secret == "" || r.PostForm.Get("client_secret") != f.secret:
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})
		default:
			f.grant(w)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// grant issues a token; f.mu is held.
func (f *fakeTokenEndpoint) grant(w http.ResponseWriter) {
	tok := fmt.Sprintf("bot-token-%d", f.calls)
	f.issued = append(f.issued, tok)
	writeJSON(w, http.StatusOK, map[string]any{
		"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": tok,
	})
}

// checkAssertion returns why the form's client assertion is refused, or ""
// when it proves the app, as Entra ID would judge it (testenv.EntraApp);
// f.mu is held.
func (f *fakeTokenEndpoint) checkAssertion(form url.Values) string {
	f.assertions = append(f.assertions, form.Get("client_assertion"))
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	return f.app.CheckAssertion(form, f.clientID, f.url(), now())
}

// receivedAssertions returns the client assertions received so far.
func (f *fakeTokenEndpoint) receivedAssertions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.assertions...)
}

func (f *fakeTokenEndpoint) url() string { return f.srv.URL + "/" + f.tenant + "/oauth2/v2.0/token" }

func (f *fakeTokenEndpoint) valid(tok string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.issued {
		if t == tok {
			return true
		}
	}
	return false
}

// revoke makes every token issued so far invalid, as when the app's secret
// is rotated: the connector answers 401 to them.
func (f *fakeTokenEndpoint) revoke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.issued = nil
}

func (f *fakeTokenEndpoint) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// received is one call the fake Bot Connector took.
type received struct {
	Method         string
	ConversationID string
	ActivityID     string // reply-to id for POST, the updated id for PUT
	Auth           string
	AssignedID     string    // the id the connector answered with
	At             time.Time // when the call arrived, by the real clock
	Activity       sentActivity
	Raw            json.RawMessage
}

// sentActivity is the part of an activity the tests look at.
type sentActivity struct {
	Type        string `json:"type"`
	ReplyToID   string `json:"replyToId"`
	Text        string `json:"text"`
	Summary     string `json:"summary"`
	Attachments []struct {
		ContentType string          `json:"contentType"`
		Content     json.RawMessage `json:"content"`
	} `json:"attachments"`
	Conversation struct {
		ID string `json:"id"`
	} `json:"conversation"`
}

// fakeConnector is the Bot Connector service as "Bot Framework REST API
// reference: Conversations" (API reference - Bot Service) defines it:
// POST /v3/conversations/{conversationId}/activities (send to
// conversation), POST .../activities/{activityId} (reply to activity), PUT
// .../activities/{activityId} (update activity), each answered with a
// ResourceResponse {"id": ...}, and DELETE .../activities/{activityId}
// (delete activity), answered with 200 and no body; 401 without a valid
// bearer token when a token endpoint is set; 413 for a message over Teams'
// size limit; 429 with Retry-After when told to throttle.
type fakeConnector struct {
	srv    *httptest.Server
	tokens *fakeTokenEndpoint // nil: no Authorization expected (local mode)

	mu       sync.Mutex
	open     int // TCP connections from the bot that are not closed
	calls    []received
	next     int
	throttle int // answer this many upcoming message posts with 429
	// faults are the statuses each conversation's upcoming message posts
	// get, in order, before one is taken.
	faults    map[string][]int
	refuse    int // answer this many upcoming message posts with 400
	sizeLimit int // bytes of UTF-16 a message may take; 0: Teams' 28 KB
	// forbidden conversations are answered 403 BotNotInConversationRoster,
	// as Teams answers once the app was removed from them.
	forbidden map[string]bool
	changed   chan struct{}
	waiters   map[string]chan struct{} // reply-to id → closed on the first non-typing reply
	recordAll bool
	// observe, when set, sees every call the connector accepted, as it
	// arrives (for the benchmarks, which keep no record).
	observe func(received)
}

func newFakeConnector(t testing.TB, tokens *fakeTokenEndpoint) *fakeConnector {
	f := &fakeConnector{tokens: tokens, changed: make(chan struct{}), waiters: map[string]chan struct{}{}, recordAll: true}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		f.mu.Lock()
		switch s {
		case http.StateNew:
			f.open++
		case http.StateClosed, http.StateHijacked:
			f.open--
		}
		f.mu.Unlock()
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeConnector) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v3/conversations/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 2 || len(parts) > 3 || parts[1] != "activities" {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": "NotFound", "message": "unknown route"}})
		return
	}
	auth := r.Header.Get("Authorization")
	if f.tokens != nil && !f.tokens.valid(strings.TrimPrefix(auth, "Bearer ")) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"code": "Unauthorized", "message": "bad token"}})
		return
	}
	rc := received{Method: r.Method, ConversationID: parts[0], Auth: auth, At: time.Now()}
	if len(parts) == 3 {
		rc.ActivityID = parts[2]
	}
	switch {
	case r.Method == http.MethodPost:
	case r.Method == http.MethodPut && rc.ActivityID != "":
	case r.Method == http.MethodDelete && rc.ActivityID != "":
		// Delete activity: no body either way, 200 on success.
		f.mu.Lock()
		f.calls = append(f.calls, rc)
		close(f.changed)
		f.changed = make(chan struct{})
		f.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"error": map[string]any{"code": "BadArgument"}})
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadSyntax", "message": "not JSON"}})
		return
	}
	rc.Raw = raw
	// "The bot message size limit is 28 KB ... includes the entire message
	// payload encoded as UTF-16" (Format your bot messages): Teams answers
	// 413 MessageSizeTooBig past it.
	f.mu.Lock()
	limit := f.sizeLimit
	f.mu.Unlock()
	if limit == 0 {
		limit = 28 * 1024
	}
	if n := 2 * len(utf16.Encode([]rune(string(raw)))); n > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": map[string]any{"code": "MessageSizeTooBig", "message": fmt.Sprintf("%d bytes in UTF-16", n)}})
		return
	}
	if err := json.Unmarshal(raw, &rc.Activity); err != nil || rc.Activity.Type == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadArgument", "message": "no activity type"}})
		return
	}
	f.mu.Lock()
	if f.refuse > 0 && rc.Activity.Type == "message" && r.Method == http.MethodPost {
		f.refuse--
		f.calls = append(f.calls, rc)
		f.mu.Unlock()
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"code": "BadArgument", "message": "refused by the test"}})
		return
	}
	if f.forbidden[rc.ConversationID] {
		f.mu.Unlock()
		writeJSON(w, http.StatusForbidden, map[string]any{"error": map[string]any{"code": "BotNotInConversationRoster", "message": "The bot is not part of the conversation roster."}})
		return
	}
	if q := f.faults[rc.ConversationID]; len(q) > 0 && rc.Activity.Type == "message" {
		f.faults[rc.ConversationID] = q[1:]
		f.mu.Unlock()
		if q[0] == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, q[0], map[string]any{"error": map[string]any{"code": http.StatusText(q[0])}})
		return
	}
	if f.throttle > 0 && rc.Activity.Type == "message" {
		f.throttle--
		f.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"code": "Throttled"}})
		return
	}
	f.next++
	id := "1:" + strconv.Itoa(f.next)
	if r.Method == http.MethodPut {
		id = rc.ActivityID
	}
	rc.AssignedID = id
	if f.recordAll || rc.Activity.Type != "typing" {
		f.calls = append(f.calls, rc)
	}
	if rc.Activity.Type == "message" && r.Method == http.MethodPost {
		if ch, ok := f.waiters[rc.ActivityID]; ok {
			delete(f.waiters, rc.ActivityID)
			close(ch)
		}
	}
	close(f.changed)
	f.changed = make(chan struct{})
	observe := f.observe
	f.mu.Unlock()
	if observe != nil {
		observe(rc)
	}
	if r.Method == http.MethodPut {
		writeJSON(w, http.StatusOK, map[string]any{"id": id})
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"id": id})
}

// waitFor returns the calls once cond holds, failing the test after a
// generous safety limit (a turn takes milliseconds).
func (f *fakeConnector) waitFor(t testing.TB, what string, cond func([]received) bool) []received {
	t.Helper()
	limit := time.After(20 * time.Second)
	for {
		f.mu.Lock()
		calls := append([]received(nil), f.calls...)
		ch := f.changed
		f.mu.Unlock()
		if cond(calls) {
			return calls
		}
		select {
		case <-ch:
		case <-limit:
			t.Fatalf("fake connector: gave up waiting for %s; received %d calls", what, len(calls))
		}
	}
}

// forbid makes the connector answer 403 for a conversation from now on.
func (f *fakeConnector) forbid(conversationID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.forbidden == nil {
		f.forbidden = map[string]bool{}
	}
	f.forbidden[conversationID] = true
}

func (f *fakeConnector) snapshot() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.calls...)
}

// expectReply returns a channel closed when a message replying to
// activityID arrives (for the benchmark, which cannot poll).
func (f *fakeConnector) expectReply(activityID string) <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	f.waiters[activityID] = ch
	f.mu.Unlock()
	return ch
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
