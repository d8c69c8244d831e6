package clientcred_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"golang.org/x/oauth2"

	"teamsbot/internal/clientcred"
	"teamsbot/internal/testenv"
)

// endpoint is Entra ID's v2.0 token endpoint for the client credentials
// grant, as "Microsoft identity platform and the OAuth 2.0 client
// credentials flow" describes it, on loopback: it checks a secret or a
// client assertion (testenv.EntraApp) and answers the statuses it is
// scripted with first.
type endpoint struct {
	srv    *httptest.Server
	app    testenv.EntraApp
	secret string
	now    func() time.Time

	mu         sync.Mutex
	script     []int // statuses to answer first, in order
	forms      []map[string][]string
	issued     int
	retryAfter string
}

func newEndpoint(t *testing.T) *endpoint {
	e := &endpoint{now: func() time.Time { return now }}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) url() string { return e.srv.URL + "/tenant-a/oauth2/v2.0/token" }

func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

func (e *endpoint) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		oauthError(w, 400, "invalid_request", "AADSTS900144: The request body could not be read.")
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.forms = append(e.forms, r.PostForm)
	if len(e.script) > 0 {
		status := e.script[0]
		e.script = e.script[1:]
		if e.retryAfter != "" {
			w.Header().Set("Retry-After", e.retryAfter)
		}
		if status == http.StatusInternalServerError {
			// An HTML page that echoes the request, as a broken proxy
			// might: none of it may reach an error.
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(status)
			w.Write([]byte("<html>error for " + r.PostForm.Encode() + "</html>"))
			return
		}
		oauthError(w, status, "temporarily_unavailable", "AADSTS50196: The server is temporarily unavailable.\r\nTrace ID: 0000\r\nCorrelation ID: 1111")
		return
	}
	switch {
	case r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("client_id") != clientID || r.PostForm.Get("scope") != "api://resource/.default":
		oauthError(w, 400, "invalid_request", "AADSTS90014: A required field is missing.")
		return
	case r.PostForm.Has("client_assertion"):
		if desc := e.app.CheckAssertion(r.PostForm, clientID, e.url(), e.now()); desc != "" {
			oauthError(w, 401, "invalid_client", desc+"\r\nTrace ID: 2222\r\nCorrelation ID: 3333")
			return
		}
	case r.PostForm.Get("client_secret") != e.secret || e.secret == "":
		oauthError(w, 401, "invalid_client", "AADSTS7000215: Invalid client secret provided.\r\nTrace ID: 4444")
		return
	}
	e.issued++
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token_type": "Bearer", "expires_in": 3599, "access_token": "token-" + string(rune('0'+e.issued))})
}

func (e *endpoint) requests() []map[string][]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]map[string][]string(nil), e.forms...)
}

func newSource(t *testing.T, e *endpoint, cred clientcred.Credential, edit func(*clientcred.SourceOptions)) *clientcred.Source {
	t.Helper()
	opts := clientcred.SourceOptions{
		TokenURL: e.url(), ClientID: clientID, Credential: cred, Scope: "api://resource/.default",
		Now: e.now, Retry: clientcred.DefaultRetry(),
	}
	opts.Retry.Sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	if edit != nil {
		edit(&opts)
	}
	s, err := clientcred.NewSource(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Entra asks for a retry (503 temporarily_unavailable): the source asks
// again, with a new assertion, which the endpoint takes since its jti is
// new; and the token is then kept.
func TestSourceRetriesWithAFreshAssertion(t *testing.T) {
	e := newEndpoint(t)
	cert := testenv.NewCertificate(t, now.Add(-time.Hour), now.Add(time.Hour))
	e.app.Cert = cert.Cert
	e.script = []int{http.StatusServiceUnavailable}
	cred, err := clientcred.LoadCertificate(cert.File(t, nil), now)
	if err != nil {
		t.Fatal(err)
	}
	src := newSource(t, e, cred, nil)
	tok, err := src.TokenContext(context.Background())
	if err != nil || tok.AccessToken != "token-1" {
		t.Fatalf("Token = %v, %v; want token-1 after one retry", tok, err)
	}
	reqs := e.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	jti := func(i int) string {
		claims := jwt.MapClaims{}
		if _, _, err := jwt.NewParser().ParseUnverified(reqs[i]["client_assertion"][0], claims); err != nil {
			t.Fatal(err)
		}
		return claims["jti"].(string)
	}
	if jti(0) == jti(1) {
		t.Error("the retry sent the same assertion again")
	}
	if again, err := src.TokenContext(context.Background()); err != nil || again.AccessToken != tok.AccessToken || len(e.requests()) != 2 {
		t.Errorf("second call: %v, %v after %d requests; want the kept token", again, err, len(e.requests()))
	}
}

// A refusal is not retried, and its error names the endpoint, the status
// and Entra's reason (the first line of the description), never the
// secret nor the trace ids; a body that is not OAuth's JSON is not quoted.
func TestSourceErrors(t *testing.T) {
	const secret = "Sx8~the-secret-never-shown"
	e := newEndpoint(t)
	e.secret = "another"
	src := newSource(t, e, clientcred.Secret(secret), nil)
	_, err := src.TokenContext(context.Background())
	var te *clientcred.TokenError
	if !errors.As(err, &te) || te.Status != 401 || te.Code != "invalid_client" || len(e.requests()) != 1 {
		t.Fatalf("wrong secret: %v (%d requests); want one request and a TokenError 401 invalid_client", err, len(e.requests()))
	}
	msg := err.Error()
	for _, want := range []string{e.url(), "answered 401", "AADSTS7000215: Invalid client secret provided."} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	for _, never := range []string{secret, "Trace ID"} {
		if strings.Contains(msg, never) {
			t.Errorf("error %q holds %q", msg, never)
		}
	}

	e.script = []int{http.StatusInternalServerError}
	src = newSource(t, e, clientcred.Secret(secret), nil)
	_, err = src.TokenContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "answered 500") || strings.Contains(err.Error(), "Sx8") || strings.Contains(err.Error(), "html") {
		t.Errorf("an HTML 500 echoing the form: %v", err)
	}
}

// A 429 or 503 that keeps coming is tried DefaultRetry().Attempts times,
// after the Retry-After it gives.
func TestSourceRetryBounded(t *testing.T) {
	e := newEndpoint(t)
	e.secret = "s"
	e.script = []int{429, 429, 429, 429}
	e.retryAfter = "2"
	var waits []time.Duration
	src := newSource(t, e, clientcred.Secret("s"), func(o *clientcred.SourceOptions) {
		o.Retry.Sleep = func(ctx context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	})
	_, err := src.TokenContext(context.Background())
	var te *clientcred.TokenError
	if !errors.As(err, &te) || te.Status != 429 || !strings.Contains(err.Error(), "after 3 attempts") {
		t.Fatalf("Token = %v, want the 429 after 3 attempts", err)
	}
	if n := len(e.requests()); n != 3 || len(waits) != 2 || waits[0] != 2*time.Second {
		t.Errorf("%d requests, waits %v; want 3 requests and two waits of 2s", n, waits)
	}
}

// A failed fetch answers every caller for HoldFailure, without a request;
// then the next caller asks again.
func TestSourceHoldsAFailure(t *testing.T) {
	e := newEndpoint(t)
	clock := testenv.NewClock(now)
	e.now = clock.Now
	src := newSource(t, e, clientcred.Secret("wrong"), func(o *clientcred.SourceOptions) {
		o.HoldFailure, o.Now = 5*time.Second, clock.Now
	})
	ctx := context.Background()
	if _, err := src.TokenContext(ctx); err == nil {
		t.Fatal("no error")
	}
	clock.Advance(4 * time.Second)
	if _, err := src.TokenContext(ctx); err == nil || len(e.requests()) != 1 {
		t.Fatalf("within the hold: %v after %d requests, want the held error and 1 request", err, len(e.requests()))
	}
	e.mu.Lock()
	e.secret = "wrong"
	e.mu.Unlock()
	clock.Advance(2 * time.Second)
	if tok, err := src.TokenContext(ctx); err != nil || len(e.requests()) != 2 {
		t.Fatalf("after the hold: %v, %v after %d requests; want a token from a second request", tok, err, len(e.requests()))
	}
}

// The Source is an oauth2.TokenSource: an oauth2 client sends its token
// to a resource server, and reuses it.
func TestSourceIsAnOAuth2TokenSource(t *testing.T) {
	e := newEndpoint(t)
	e.secret = "s"
	var src oauth2.TokenSource = newSource(t, e, clientcred.Secret("s"), nil)
	var seen []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer api.Close()
	c := oauth2.NewClient(context.Background(), src)
	for range 2 {
		resp, err := c.Get(api.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if len(seen) != 2 || seen[0] != "Bearer token-1" || seen[1] != seen[0] || len(e.requests()) != 1 {
		t.Errorf("the API saw %v after %d token requests; want Bearer token-1 twice from one request", seen, len(e.requests()))
	}
}

// A caller that gives up gets its context's error at once; the fetch goes
// on for the cache.
func TestSourceCallerGivesUp(t *testing.T) {
	e := newEndpoint(t)
	e.secret = "s"
	release := make(chan struct{})
	slow := e.srv.Config.Handler
	e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		slow.ServeHTTP(w, r)
	})
	src := newSource(t, e, clientcred.Secret("s"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := src.TokenContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller that gave up: %v", err)
	}
	close(release)
	if tok, err := src.TokenContext(context.Background()); err != nil || tok.AccessToken != "token-1" || len(e.requests()) != 1 {
		t.Errorf("after the fetch: %v, %v, %d requests; want the one fetch's token", tok, err, len(e.requests()))
	}
}
