package clientcred

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"

	"teamsbot/internal/retry"
	"teamsbot/internal/textclip"
)

// Defaults of [SourceOptions].
const (
	// DefaultEarly renews a token five minutes before it expires, as MSAL
	// does, so that no request leaves with a token about to expire.
	DefaultEarly = 5 * time.Minute
	// DefaultFetchTimeout bounds one fetch, its retries included.
	DefaultFetchTimeout = 20 * time.Second
)

// DefaultRetry is how a token request is tried again: the request is
// idempotent (each attempt carries a fresh assertion, and a second token is
// harmless), so a connection that failed is retried, and so are 429 and the
// 5xx answers that say the endpoint is briefly unavailable ("temporarily_
// unavailable: retry the request" in "Microsoft identity platform and the
// OAuth 2.0 client credentials flow"). A 500 is a fault, not a pause, and
// is not retried.
func DefaultRetry() retry.Policy {
	return retry.Policy{
		Attempts: 3, First: 250 * time.Millisecond, Max: 5 * time.Second,
		Statuses: []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout},
	}
}

// SourceOptions say where a [Source] asks for tokens, for what, and how
// it keeps them.
type SourceOptions struct {
	// TokenURL is the token endpoint. Required.
	TokenURL string
	// ClientID is the app registration. Required.
	ClientID string
	// Credential proves it. Required; never logged.
	Credential Credential
	// Scope is the one scope asked for, such as
	// "https://api.botframework.com/.default". Required.
	Scope string
	// HTTPClient sends the token requests; nil means
	// http.DefaultClient. Its redirects are never followed: a 307 would
	// post the form, and the secret or assertion in it, to where it
	// points.
	HTTPClient *http.Client
	// Now is the clock of expiry and of the assertion's times; nil means
	// time.Now. Retry waits use real time.
	Now func() time.Time
	// Early is how long before its expiry a token is renewed, at most
	// half its life; zero means DefaultEarly.
	Early time.Duration
	// HoldFailure is how long a failed fetch answers every caller
	// without a new request, so that a dead endpoint is not asked on
	// every send; zero means the next caller asks again.
	HoldFailure time.Duration
	// FetchTimeout bounds one fetch; zero means DefaultFetchTimeout.
	FetchTimeout time.Duration
	// Life bounds fetches, which outlive the caller that started them
	// (the others wait for them too) but not the service; nil means
	// context.Background().
	Life context.Context
	// Retry is the fetch's retry policy; zero means DefaultRetry().
	Retry retry.Policy
	// Logger gets one line per failed fetch; nil discards.
	Logger *slog.Logger
}

// Source gets tokens with the OAuth 2.0 client credentials grant, as
// "Microsoft identity platform and the OAuth 2.0 client credentials flow"
// describes it, and keeps each until Early before it expires. Callers that
// ask while a fetch is under way wait for that fetch
// (golang.org/x/sync/singleflight); each request is made by
// golang.org/x/oauth2's clientcredentials with a fresh credential: a new
// assertion signed for this endpoint, or the federated token file read
// again. It is an [oauth2.TokenSource], and safe for concurrent use.
type Source struct {
	opts SourceOptions

	flight singleflight.Group

	mu       sync.Mutex
	tok      *oauth2.Token
	renewAt  time.Time // by opts.Now
	failedAt time.Time // of the last failed fetch, by opts.Now
	failErr  error
}

// NewSource checks opts and returns a Source. It makes no request.
func NewSource(opts SourceOptions) (*Source, error) {
	var errs []error
	if u, err := url.Parse(opts.TokenURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		errs = append(errs, fmt.Errorf("clientcred: token URL %q is not an absolute http(s) URL", opts.TokenURL))
	}
	if opts.ClientID == "" {
		errs = append(errs, errors.New("clientcred: a client id is required"))
	}
	if opts.Credential.IsZero() {
		errs = append(errs, ErrNone)
	}
	if opts.Scope == "" {
		errs = append(errs, errors.New("clientcred: a scope is required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	direct := *opts.HTTPClient
	direct.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	opts.HTTPClient = &direct
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Early <= 0 {
		opts.Early = DefaultEarly
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Life == nil {
		opts.Life = context.Background()
	}
	if opts.Retry.Attempts == 0 {
		opts.Retry = DefaultRetry()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{opts: opts}, nil
}

// HTTPClient is the client the token requests go through, for tests of its
// timeouts.
func (s *Source) HTTPClient() *http.Client { return s.opts.HTTPClient }

// TokenURL is the token endpoint.
func (s *Source) TokenURL() string { return s.opts.TokenURL }

// Token returns a token valid for a while yet, waiting at most until the
// Source's Life ends. It makes Source an [oauth2.TokenSource].
func (s *Source) Token() (*oauth2.Token, error) { return s.TokenContext(s.opts.Life) }

// TokenContext returns a token valid for a while yet: the cached one, or a
// new one from a fetch that ctx waits for. The fetch goes on without a
// caller that gives up (its error is then ctx's), for the others and the
// cache. Errors are a *TokenError, or ctx's error.
func (s *Source) TokenContext(ctx context.Context) (*oauth2.Token, error) {
	if tok, ok, err := s.cached(); ok {
		return tok, err
	}
	ch := s.flight.DoChan("", func() (any, error) {
		if tok, ok, err := s.cached(); ok {
			return tok, err
		}
		fctx, cancel := context.WithTimeout(s.opts.Life, s.opts.FetchTimeout)
		defer cancel()
		tok, renewAt, err := s.fetch(fctx)
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.failedAt, s.failErr = s.opts.Now(), err
			s.opts.Logger.Error("getting a token failed", "token_url", s.opts.TokenURL, "err", err)
			return nil, err
		}
		s.tok, s.renewAt = tok, renewAt
		s.failedAt, s.failErr = time.Time{}, nil
		return tok, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*oauth2.Token), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cached returns the kept token while it is not due for renewal, or the
// last failure while HoldFailure lasts; ok is false when a fetch is
// needed.
func (s *Source) cached() (*oauth2.Token, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.opts.Now()
	if s.tok != nil && now.Before(s.renewAt) {
		return s.tok, true, nil
	}
	if s.failErr != nil && now.Sub(s.failedAt) < s.opts.HoldFailure {
		return nil, true, s.failErr
	}
	return nil, false, nil
}

// Invalidate drops access, a token the resource server refused (a secret
// rotated, a token revoked), so that the next call fetches a new one. A
// token already replaced is left alone.
func (s *Source) Invalidate(access string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok != nil && s.tok.AccessToken == access {
		s.tok = nil
	}
}

// fetch asks the endpoint for a token, retrying as opts.Retry allows. The
// form is never logged, and no error holds it.
func (s *Source) fetch(ctx context.Context) (*oauth2.Token, time.Time, error) {
	r := s.opts.Retry.Start()
	for {
		tok, renewAt, err := s.request(ctx)
		if err == nil {
			return tok, renewAt, nil
		}
		var te *TokenError
		if !errors.As(err, &te) || !s.opts.Retry.Again(true, te.Status, te.Err) {
			return nil, time.Time{}, err
		}
		if _, werr := r.Wait(ctx, te.retryAfter); werr != nil {
			te.Attempts = r.Attempt()
			return nil, time.Time{}, err
		}
	}
}

// request makes one token request.
func (s *Source) request(ctx context.Context) (*oauth2.Token, time.Time, error) {
	endpoint := s.opts.TokenURL
	// A certificate's assertion is signed for this very endpoint and a
	// federated token file is read again, for every request: Entra ID
	// refuses an assertion whose jti it has seen.
	form := url.Values{}
	if err := s.opts.Credential.Apply(ctx, form, s.opts.ClientID, endpoint, s.opts.Now()); err != nil {
		return nil, time.Time{}, &TokenError{Endpoint: endpoint, Err: err}
	}
	cfg := clientcredentials.Config{
		ClientID:       s.opts.ClientID,
		TokenURL:       endpoint,
		Scopes:         []string{s.opts.Scope},
		EndpointParams: form,
		AuthStyle:      oauth2.AuthStyleInParams,
	}
	// The answer's status and Retry-After are noted on the wire: x/oauth2
	// reports some answers (a 200 without access_token) without them.
	var seen answer
	client := *s.opts.HTTPClient
	client.Transport = &seen
	seen.next = s.opts.HTTPClient.Transport
	if seen.next == nil {
		seen.next = http.DefaultTransport
	}
	issued := s.opts.Now()
	tok, err := cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, &client))
	if err != nil {
		return nil, time.Time{}, tokenError(endpoint, seen, err)
	}
	// x/oauth2 sets Expiry by the real clock; the life is taken from the
	// answer itself, so that the Source's clock decides.
	life, ok := expiresIn(tok.Extra("expires_in"))
	switch {
	case !strings.EqualFold(tok.Type(), "Bearer"):
		return nil, time.Time{}, &TokenError{Endpoint: endpoint, Status: http.StatusOK, Err: fmt.Errorf("token_type %q is not Bearer", tok.TokenType)}
	case !ok:
		return nil, time.Time{}, &TokenError{Endpoint: endpoint, Status: http.StatusOK, Err: fmt.Errorf("expires_in %v is not a positive number of seconds", tok.Extra("expires_in"))}
	}
	tok.Expiry = issued.Add(life)
	return tok, issued.Add(life - min(s.opts.Early, life/2)), nil
}

// expiresIn reads expires_in, a number of seconds that some endpoints send
// as a string.
func expiresIn(v any) (time.Duration, bool) {
	var secs float64
	switch v := v.(type) {
	case float64:
		secs = v
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return 0, false
		}
		secs = float64(n)
	default:
		return 0, false
	}
	if secs <= 0 {
		return 0, false
	}
	return time.Duration(secs) * time.Second, true
}

// TokenError is a token request that failed. Its text names the endpoint
// and what it said, never the form (the secret or the assertion) nor a
// token.
type TokenError struct {
	// Endpoint is the token endpoint asked.
	Endpoint string
	// Status is the endpoint's answer; 0 when none came.
	Status int
	// Code and Description are the OAuth error and the first line of its
	// description, which names the problem ("AADSTS7000215: Invalid client
	// secret provided.") without the trace ids that follow.
	Code, Description string
	// Attempts is how many requests were made, when more than one.
	Attempts int
	// Err is the transport's error, or what was wrong with the answer.
	Err error

	retryAfter string
}

func (e *TokenError) Error() string {
	var b strings.Builder
	b.WriteString("token endpoint " + e.Endpoint)
	switch {
	case e.Status == 0 && e.Err != nil && !errors.Is(e.Err, ErrNone) && !errors.Is(e.Err, ErrCertificate) && !errors.Is(e.Err, ErrTokenFile):
		b.WriteString(" unreachable: " + e.Err.Error())
	case e.Status == 0:
		b.WriteString(": " + e.Err.Error())
	case e.Code != "":
		fmt.Fprintf(&b, " answered %d: %s", e.Status, e.Code)
		if e.Description != "" {
			b.WriteString(": " + e.Description)
		}
	case e.Err != nil:
		fmt.Fprintf(&b, " answered %d: %v", e.Status, e.Err)
	default:
		fmt.Fprintf(&b, " answered %d", e.Status)
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " (after %d attempts)", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the transport's error or the credential's.
func (e *TokenError) Unwrap() error { return e.Err }

// answer is the token request's transport: it notes the status and the
// Retry-After of the answer.
type answer struct {
	next       http.RoundTripper
	status     int
	retryAfter string
}

func (a *answer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if resp != nil {
		a.status, a.retryAfter = resp.StatusCode, resp.Header.Get("Retry-After")
	}
	return resp, err
}

// tokenError turns what x/oauth2 returned into a TokenError. Its
// RetrieveError prints the whole body when the answer is not OAuth's JSON;
// only the status, the error code and the description's first line are
// kept here.
func tokenError(endpoint string, seen answer, err error) *TokenError {
	te := &TokenError{Endpoint: endpoint, Status: seen.status, retryAfter: seen.retryAfter}
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		te.Code, te.Description = re.ErrorCode, firstLine(re.ErrorDescription)
	case seen.status != 0:
		// An answer x/oauth2 could not use: no access_token, or not JSON.
		te.Err = errors.New("the answer holds no usable token")
	default:
		te.Err = err // the transport's: no answer came
	}
	return te
}

// firstLine is the first line of s, clipped: Entra's descriptions go on
// with trace and correlation ids and a timestamp.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s, _, _ = strings.Cut(s, "\r")
	return textclip.Prefix(strings.TrimSpace(s), 200)
}

// Tenants keeps one [Source] per tenant, for an app that asks for
// app-only tokens in several tenants (Graph): the token URL's "{tenant}"
// stands for each tenant's id.
type Tenants struct {
	opts SourceOptions

	mu      sync.Mutex
	sources map[string]*Source
}

// NewTenants checks opts, whose TokenURL holds "{tenant}", and returns an
// empty Tenants.
func NewTenants(opts SourceOptions) (*Tenants, error) {
	if !strings.Contains(opts.TokenURL, "{tenant}") {
		return nil, fmt.Errorf("clientcred: token URL %q has no {tenant}", opts.TokenURL)
	}
	probe := opts
	probe.TokenURL = strings.ReplaceAll(opts.TokenURL, "{tenant}", "t")
	if _, err := NewSource(probe); err != nil {
		return nil, err
	}
	return &Tenants{opts: opts, sources: map[string]*Source{}}, nil
}

// Source returns tenant's Source, made on first use.
func (t *Tenants) Source(tenant string) *Source {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.sources[tenant]; ok {
		return s
	}
	opts := t.opts
	opts.TokenURL = strings.ReplaceAll(t.opts.TokenURL, "{tenant}", url.PathEscape(tenant))
	s, _ := NewSource(opts) // checked by NewTenants; the tenant only fills in a path segment
	t.sources[tenant] = s
	return s
}
