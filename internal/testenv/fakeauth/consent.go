package fakeauth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// consentField finds a hidden field of the consent page.
var consentField = regexp.MustCompile(`<input type="hidden" name="(request|user)" value="([^"]*)">`)

// AnswerConsent plays the person at the authorization server without a
// browser: it follows authURL with hc (which must trust the server), signs
// in as person (empty: the one the page is fixed to), presses Allow, or
// Deny when allow is false, and returns what the redirect to the client
// carries: code, state and iss, or the error the server sent. A server
// that redirects at once, approving by itself (as the MCP TypeScript SDK's
// demo does), is read the same way. It suits go-sdk's
// auth.AuthorizationCodeFetcher.
func AnswerConsent(ctx context.Context, hc *http.Client, authURL, person string, allow bool) (*auth.AuthorizationResult, error) {
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("opening the authorization URL: %w", err)
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the sign-in page: %w", err)
	}
	if resp.StatusCode/100 == 3 {
		return readRedirect(resp.Header.Get("Location"))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the authorization URL answered %s: %s", resp.Status, strings.TrimSpace(string(page)))
	}
	form := url.Values{"decision": {"deny"}}
	if allow {
		form.Set("decision", "allow")
	}
	for _, m := range consentField.FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], m[2])
	}
	if person != "" {
		form.Set("user", person)
	}
	action, _ := url.Parse(authURL)
	action.RawQuery = ""
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("answering the sign-in page: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 3 {
		return nil, fmt.Errorf("the sign-in page's answer got %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return readRedirect(resp.Header.Get("Location"))
}

// readRedirect reads an authorization response (RFC 6749 section 4.1.2,
// with RFC 9207's iss) from the redirect's location.
func readRedirect(location string) (*auth.AuthorizationResult, error) {
	u, err := url.Parse(location)
	if err != nil {
		return nil, fmt.Errorf("the redirect %q: %w", location, err)
	}
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return nil, fmt.Errorf("the authorization server answered %s: %s", e, q.Get("error_description"))
	}
	return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
