package graph

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/microsoft/kiota-abstractions-go/authentication"

	"teamsbot/internal/clientcred"
)

// tokenError is a failure of the token endpoint. It wraps ErrUnavailable:
// without a token Graph cannot answer.
type tokenError struct {
	tenant string
	err    *clientcred.TokenError
}

func (e *tokenError) Error() string {
	if e.err.Status == 0 {
		return fmt.Sprintf("%v: token endpoint for tenant %s (no answer): %v", ErrUnavailable, e.tenant, e.err)
	}
	return fmt.Sprintf("%v: token endpoint for tenant %s (status %d): %v", ErrUnavailable, e.tenant, e.err.Status, e.err)
}

func (e *tokenError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// token returns an app-only token for tenant from the tenant's
// clientcred.Source, which keeps it until shortly before it expires and
// fetches it once for concurrent callers.
func (c *Client) token(ctx context.Context, tenant string) (string, error) {
	tok, err := c.tokens.Source(tenant).TokenContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", callerErr(ctx, "")
		}
		var te *clientcred.TokenError
		if errors.As(err, &te) {
			return "", &tokenError{tenant: tenant, err: te}
		}
		return "", fmt.Errorf("%w: token for tenant %s: %w", ErrUnavailable, tenant, err)
	}
	return tok.AccessToken, nil
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
	return p.c.token(ctx, p.tenant)
}

// GetAllowedHostsValidator returns the hosts tokens may go to: BaseURL's.
func (p *tenantTokens) GetAllowedHostsValidator() *authentication.AllowedHostsValidator {
	return &p.c.hosts
}
