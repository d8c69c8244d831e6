package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/microsoft/kiota-abstractions-go/authentication"

	"teamsbot/internal/clientcred"
)

// tokenMargin is how long before its expiry a token is replaced, as MSAL
// does, so that no request leaves with a token about to expire.
const tokenMargin = 5 * time.Minute

// token is an app-only access token for one tenant.
type token struct {
	value     string
	refreshAt time.Time
}

// tokenSource gets app-only tokens with the OAuth 2.0 client credentials
// grant, one per tenant, and keeps each until shortly before it expires.
type tokenSource struct {
	http     *http.Client
	tokenURL string // with "{tenant}"
	clientID string
	cred     clientcred.Credential
	scope    string
	now      func() time.Time

	mu      sync.Mutex
	cached  map[string]token // by tenant
	fetches flight[token]
}

// tokenError is a failure of the token endpoint. It wraps ErrUnavailable:
// without a token Graph cannot answer.
type tokenError struct {
	tenant string
	status int    // 0 when no answer came
	detail string // the endpoint's error code and description, or the transport error
}

func (e *tokenError) Error() string {
	return fmt.Sprintf("%v: token endpoint for tenant %s: %s", ErrUnavailable, e.tenant, e.detail)
}

func (e *tokenError) Unwrap() error { return ErrUnavailable }

// get returns a token for tenant; concurrent first requests for a tenant
// share one fetch.
func (s *tokenSource) get(ctx context.Context, tenant string) (string, error) {
	if t, ok := s.lookup(tenant); ok {
		return t.value, nil
	}
	t, err := s.fetches.do(ctx, tenant, func(ctx context.Context) (token, error) {
		if t, ok := s.lookup(tenant); ok {
			return t, nil
		}
		t, err := s.fetch(ctx, tenant)
		if err != nil {
			return token{}, err
		}
		s.mu.Lock()
		s.cached[tenant] = t
		s.mu.Unlock()
		return t, nil
	})
	return t.value, err
}

func (s *tokenSource) lookup(tenant string) (token, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.cached[tenant]
	if !ok || !s.now().Before(t.refreshAt) {
		return token{}, false
	}
	return t, true
}

// fetch asks the tenant's token endpoint for a new token, as "Microsoft
// identity platform and the OAuth 2.0 client credentials flow" describes
// it, with a secret, a certificate's assertion (signed for this tenant's
// endpoint, its audience) or the federated token file's current content.
// The form is never logged, and no error holds it.
func (s *tokenSource) fetch(ctx context.Context, tenant string) (token, error) {
	form := url.Values{
		"grant_type": {"client_credentials"},
		"client_id":  {s.clientID},
		"scope":      {s.scope},
	}
	endpoint := strings.ReplaceAll(s.tokenURL, "{tenant}", url.PathEscape(tenant))
	if err := s.cred.Apply(ctx, form, s.clientID, endpoint, s.now()); err != nil {
		if ctx.Err() != nil {
			return token{}, callerErr(ctx, "")
		}
		return token{}, &tokenError{tenant: tenant, detail: err.Error()}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return token{}, &tokenError{tenant: tenant, detail: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	issued := s.now()
	resp, err := s.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return token{}, callerErr(ctx, "")
		}
		// The *url.Error names the endpoint, never the form.
		return token{}, &tokenError{tenant: tenant, detail: err.Error()}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		if ctx.Err() != nil {
			return token{}, callerErr(ctx, "")
		}
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: "reading the answer: " + err.Error()}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		detail := fmt.Sprintf("status %d", resp.StatusCode)
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			// The first line of the description carries the AADSTS
			// code; the rest is trace ids and timestamps.
			first, _, _ := strings.Cut(e.Description, "\n")
			detail += ": " + e.Error + ": " + strings.TrimSpace(first)
		}
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: detail}
	}
	var ok struct {
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		AccessToken string          `json:"access_token"`
	}
	if err := json.Unmarshal(body, &ok); err != nil {
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: "malformed answer: " + err.Error()}
	}
	// Some identity endpoints send expires_in as a string.
	secs, err := strconv.Atoi(strings.Trim(string(ok.ExpiresIn), `"`))
	switch {
	case !strings.EqualFold(ok.TokenType, "Bearer"):
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: fmt.Sprintf("token_type %q is not Bearer", ok.TokenType)}
	case ok.AccessToken == "":
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: "no access_token"}
	case err != nil || secs <= 0:
		return token{}, &tokenError{tenant: tenant, status: resp.StatusCode, detail: fmt.Sprintf("expires_in %s is not a positive number of seconds", ok.ExpiresIn)}
	}
	life := time.Duration(secs) * time.Second
	return token{value: ok.AccessToken, refreshAt: issued.Add(life - min(tokenMargin, life/2))}, nil
}

// tenantTokens is the SDK's access token provider for one tenant.
type tenantTokens struct {
	c      *Client
	tenant string
}

// GetAuthorizationToken returns the tenant's token, and refuses to give it
// for any host but Graph's, or over plain HTTP.
func (p *tenantTokens) GetAuthorizationToken(ctx context.Context, u *url.URL, _ map[string]any) (string, error) {
	if u == nil || u.Scheme != "https" || !p.c.hosts.IsUrlHostValid(u) {
		return "", errors.New("graph: refusing to send a token to a host other than BaseURL's")
	}
	return p.c.tokens.get(ctx, p.tenant)
}

// GetAllowedHostsValidator returns the hosts tokens may go to: BaseURL's.
func (p *tenantTokens) GetAllowedHostsValidator() *authentication.AllowedHostsValidator {
	return &p.c.hosts
}
