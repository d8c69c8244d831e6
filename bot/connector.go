package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/textclip"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"
)

// Outbound calls follow "Bot Framework REST API reference: Conversations"
// (API reference - Bot Service) and "Authenticate requests from your bot to
// the Bot Connector service".
const (
	// tokenEarly renews the bot token this long before it expires.
	tokenEarly = 5 * time.Minute
	// maxRetries bounds retries of one connector call on 429 and 5xx.
	maxRetries = 4
	// maxRetryWait caps the wait before one retry, Retry-After included.
	maxRetryWait = 10 * time.Second
	// firstBackoff is the wait before the first retry without Retry-After.
	firstBackoff = 200 * time.Millisecond
	// maxResponseBytes bounds what is read of a connector or token answer.
	maxResponseBytes = 1 << 20
)

// Errors of outbound calls.
var (
	// ErrServiceURL means the activity's serviceUrl is not one the bot
	// sends to (and so sends its token to).
	ErrServiceURL = errors.New("bot: serviceUrl refused")
	// ErrToken means no bot token could be had from the token endpoint.
	ErrToken = errors.New("bot: bot token unavailable")
	// ErrConnector means the Bot Connector refused or failed a call.
	ErrConnector = errors.New("bot: connector call failed")
	// ErrTooLarge means Teams refused a message as too large (413); it
	// is an ErrConnector too.
	ErrTooLarge = fmt.Errorf("%w: message too large for Teams", ErrConnector)
	// ErrNotInConversation means the Bot Connector answered 403: the bot
	// is no longer a member of the conversation (the app was removed), and
	// every later send there would fail alike. It wraps ErrConnector.
	ErrNotInConversation = fmt.Errorf("%w: the bot is not in the conversation (403)", ErrConnector)
)

// newHTTPClient returns a client with timeouts at every step and enough
// idle connections per host that concurrent turns reuse them instead of
// opening a connection each.
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 15 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   128,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// tokenSource gets and caches the bot's client-credentials token.
// Concurrent callers share one fetch.
type tokenSource struct {
	url, appID, scope string
	cred              clientcred.Credential
	client            *http.Client
	now               func() time.Time
	logger            *slog.Logger
	// life bounds fetches, which outlive the caller that started them (the
	// other callers wait for them too) but not the bot; nil means
	// context.Background().
	life context.Context

	mu       sync.Mutex
	token    string
	expires  time.Time
	inflight *tokenFetch
	failedAt time.Time // last failed fetch, so a dead endpoint is not asked on every send
	failErr  error
}

// tokenRetryAfterFailure spaces fetches while the token endpoint fails.
const tokenRetryAfterFailure = 5 * time.Second

type tokenFetch struct {
	done  chan struct{}
	token string
	err   error
}

// Token returns a token valid for at least a few more minutes.
func (ts *tokenSource) Token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	if ts.token != "" && ts.now().Before(ts.expires.Add(-tokenEarly)) {
		t := ts.token
		ts.mu.Unlock()
		return t, nil
	}
	if ts.inflight == nil && !ts.failedAt.IsZero() && ts.now().Sub(ts.failedAt) < tokenRetryAfterFailure {
		err := ts.failErr
		ts.mu.Unlock()
		return "", err
	}
	f := ts.inflight
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		ts.inflight = f
		go func() {
			life := ts.life
			if life == nil {
				life = context.Background()
			}
			fctx, cancel := context.WithTimeout(life, 20*time.Second)
			defer cancel()
			tok, exp, err := ts.fetch(fctx)
			ts.mu.Lock()
			if err == nil {
				ts.token, ts.expires = tok, exp
				ts.failedAt, ts.failErr = time.Time{}, nil
			} else {
				ts.failedAt, ts.failErr = ts.now(), err
				ts.logger.Error("getting the bot token failed", "token_url", ts.url, "err", err)
			}
			ts.inflight = nil
			ts.mu.Unlock()
			f.token, f.err = tok, err
			close(f.done)
		}()
	}
	ts.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %w", ErrToken, ctx.Err())
	}
}

// invalidate drops a token the connector refused.
func (ts *tokenSource) invalidate(tok string) {
	ts.mu.Lock()
	if ts.token == tok {
		ts.token = ""
	}
	ts.mu.Unlock()
}

// fetch asks the token endpoint, as "Microsoft identity platform and the
// OAuth 2.0 client credentials flow" describes (v2.0 endpoint, form body)
// with each of its three credentials: a shared secret, a certificate's
// assertion, or a federated credential. The form is never logged, and no
// error below holds it.
func (ts *tokenSource) fetch(ctx context.Context) (string, time.Time, error) {
	form := url.Values{
		"grant_type": {"client_credentials"},
		"client_id":  {ts.appID},
		"scope":      {ts.scope},
	}
	// A certificate's assertion is signed for this very endpoint, and a
	// federated token file is read again here, so a token the platform
	// rotated is the one sent.
	if err := ts.cred.Apply(ctx, form, ts.appID, ts.url, ts.now()); err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.url, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: %w", ErrToken, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := ts.client.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: token endpoint %s unreachable: %w", ErrToken, ts.url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	var tr struct {
		TokenType   string          `json:"token_type"`
		AccessToken string          `json:"access_token"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
		Error       string          `json:"error"`
		Description string          `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK {
		// The error code and description name the problem (a wrong secret,
		// an unknown tenant) without carrying a secret.
		return "", time.Time{}, fmt.Errorf("%w: token endpoint %s answered %d: %s %s", ErrToken, ts.url, resp.StatusCode, tr.Error, firstLine(tr.Description))
	}
	if tr.AccessToken == "" {
		return "", time.Time{}, fmt.Errorf("%w: token endpoint %s answered without access_token", ErrToken, ts.url)
	}
	// expires_in is a number, but some endpoints send it as a string.
	secs, err := strconv.Atoi(strings.Trim(string(tr.ExpiresIn), `"`))
	if err != nil || secs <= 0 {
		secs = 3600
	}
	return tr.AccessToken, ts.now().Add(time.Duration(secs) * time.Second), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s, _, _ = strings.Cut(s, "\r")
	return textclip.Prefix(s, 200)
}

// connector speaks the Bot Connector REST API: Send, Update and Remove
// take a context and return what the Bot Connector answered, such as the
// new activity's id. It replaces the msbotbuilder-go client, which has no
// timeouts, panics when the token endpoint is unreachable, and cannot tell
// the id of what it sent; the adapter is therefore built without a client.
type connector struct {
	client        *http.Client
	tokens        *tokenSource // nil in local mode: no Authorization header
	allowLoopback bool         // plain http to a loopback serviceUrl
	logger        *slog.Logger
	metrics       *metrics
	sleep         func(ctx context.Context, d time.Duration) error
	// pacer keeps sends under Teams' rate limits; nil sends at once.
	pacer *pacer
}

// outActivity is what the bot sends. It is not schema.Activity because that
// type's struct fields (timestamp, expiration, relatesTo, ...) have no
// usable omitempty and would go out as zero times and empty objects.
type outActivity struct {
	Type         schema.ActivityTypes        `json:"type"`
	From         *schema.ChannelAccount      `json:"from,omitempty"`
	Recipient    *schema.ChannelAccount      `json:"recipient,omitempty"`
	Conversation *schema.ConversationAccount `json:"conversation,omitempty"`
	ReplyToID    string                      `json:"replyToId,omitempty"`
	Text         string                      `json:"text,omitempty"`
	Summary      string                      `json:"summary,omitempty"`
	TextFormat   schema.TextFormatTypes      `json:"textFormat,omitempty"`
	Attachments  []schema.Attachment         `json:"attachments,omitempty"`
	Entities     []any                       `json:"entities,omitempty"`
	ChannelData  map[string]any              `json:"channelData,omitempty"`
}

// checkServiceURL refuses a serviceUrl we must not send the bot token to.
// In authenticated mode the serviceUrl has already been matched to the
// signed serviceurl claim, so only the Bot Connector can name it; this
// check adds that it must be https (or loopback http in local mode and
// tests) and carry no user info, query or fragment.
func (c *connector) checkServiceURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: %q is not an absolute URL", ErrServiceURL, raw)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: %q has user info, a query or a fragment", ErrServiceURL, raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !c.allowLoopback || !netaddr.IsLoopbackHost(u.Hostname()) {
			return nil, fmt.Errorf("%w: %q is not https", ErrServiceURL, raw)
		}
	default:
		return nil, fmt.Errorf("%w: %q is not https", ErrServiceURL, raw)
	}
	return u, nil
}

// ready checks, before a turn starts, that its answer could be sent: the
// serviceUrl is acceptable and a bot token can be had (cached after the
// first turn).
func (c *connector) ready(ctx context.Context, serviceURL string) error {
	if _, err := c.checkServiceURL(serviceURL); err != nil {
		return err
	}
	if c.tokens != nil {
		if _, err := c.tokens.Token(ctx); err != nil {
			return err
		}
	}
	return nil
}

// activitiesURL builds {serviceUrl}/v3/conversations/{id}/activities[/{activityId}].
func (c *connector) activitiesURL(serviceURL, conversationID, activityID string) (string, error) {
	u, err := c.checkServiceURL(serviceURL)
	if err != nil {
		return "", err
	}
	if conversationID == "" {
		return "", fmt.Errorf("%w: no conversation id", ErrConnector)
	}
	s := strings.TrimSuffix(u.String(), "/") + "/v3/conversations/" + url.PathEscape(conversationID) + "/activities"
	if activityID != "" {
		s += "/" + url.PathEscape(activityID)
	}
	return s, nil
}

// Send posts an activity to a conversation, as a reply to replyToID when it
// is set, and returns the id the connector gave it.
func (c *connector) Send(ctx context.Context, serviceURL, conversationID, replyToID string, a *outActivity) (string, error) {
	target, err := c.activitiesURL(serviceURL, conversationID, replyToID)
	if err != nil {
		return "", err
	}
	a.ReplyToID = replyToID
	var rr schema.ResourceResponse
	if err := c.do(ctx, serviceURL+"\x00"+conversationID, http.MethodPost, target, a, &rr); err != nil {
		return "", err
	}
	return rr.ID, nil
}

// Update replaces an activity the bot sent before.
func (c *connector) Update(ctx context.Context, serviceURL, conversationID, activityID string, a *outActivity) error {
	if activityID == "" {
		return fmt.Errorf("%w: update without an activity id", ErrConnector)
	}
	target, err := c.activitiesURL(serviceURL, conversationID, activityID)
	if err != nil {
		return err
	}
	return c.do(ctx, serviceURL+"\x00"+conversationID, http.MethodPut, target, a, nil)
}

// Remove deletes an activity the bot sent before ("Delete activity").
func (c *connector) Remove(ctx context.Context, serviceURL, conversationID, activityID string) error {
	if activityID == "" {
		return fmt.Errorf("%w: delete without an activity id", ErrConnector)
	}
	target, err := c.activitiesURL(serviceURL, conversationID, activityID)
	if err != nil {
		return err
	}
	return c.do(ctx, serviceURL+"\x00"+conversationID, http.MethodDelete, target, nil, nil)
}

// retryable are the answers Microsoft asks bots to retry ("Optimize your
// bot with rate limiting in Teams": 429, and 412, 502 and 504), with 503,
// which says the same. A 500 is not retried: the connector may have taken
// the activity, and a second post would show it twice; a 403 (the bot was
// removed or blocked) is final.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusPreconditionFailed, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// do sends one call to a conversation (conv: its service URL and id) with
// retries of the retryable answers, honouring Retry-After, and never waits
// past ctx's deadline. Every attempt takes its turn in the pacer first.
func (c *connector) do(ctx context.Context, conv, method, target string, body any, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%w: encoding activity: %w", ErrConnector, err)
		}
	}
	refreshed := false
	for attempt := 0; ; attempt++ {
		var tok string
		if c.tokens != nil {
			var err error
			if tok, err = c.tokens.Token(ctx); err != nil {
				return err
			}
		}
		if c.pacer != nil {
			if err := c.pacer.wait(ctx, tenantOf(ctx), conv); err != nil {
				return fmt.Errorf("%w: %s %s: waiting for the conversation's send rate: %w", ErrConnector, method, redactPath(target), err)
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("%w: %w", ErrConnector, err)
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			// Not retried: the connector may have taken the activity, and a
			// second post would show the person a duplicate.
			return fmt.Errorf("%w: %s %s: %w", ErrConnector, method, redactPath(target), err)
		}
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			if out != nil && len(bytes.TrimSpace(data)) > 0 {
				if err := json.Unmarshal(data, out); err != nil {
					return fmt.Errorf("%w: %s %s: reading answer: %w", ErrConnector, method, redactPath(target), err)
				}
			}
			if rerr != nil {
				return fmt.Errorf("%w: %s %s: %w", ErrConnector, method, redactPath(target), rerr)
			}
			return nil
		case resp.StatusCode == http.StatusRequestEntityTooLarge:
			return fmt.Errorf("%w: %s %s: status 413: %s", ErrTooLarge, method, redactPath(target), firstLine(string(data)))
		case resp.StatusCode == http.StatusUnauthorized && c.tokens != nil && !refreshed:
			// A token revoked early: get a new one, once.
			c.tokens.invalidate(tok)
			refreshed = true
			continue
		case resp.StatusCode == http.StatusForbidden:
			// Not retried: Teams answers 403 (BotNotInConversationRoster)
			// once the app is removed, and will go on doing so.
			return fmt.Errorf("%w: %s %s: %s", ErrNotInConversation, method, redactPath(target), firstLine(string(data)))
		case retryable(resp.StatusCode):
			c.metrics.throttled.WithLabelValues(strconv.Itoa(resp.StatusCode)).Inc()
			if attempt >= maxRetries {
				return fmt.Errorf("%w: %s %s: status %d after %d retries", ErrConnector, method, redactPath(target), resp.StatusCode, attempt)
			}
			wait := retryAfter(resp.Header.Get("Retry-After"), time.Now())
			if wait < 0 {
				wait = backoff(attempt)
			}
			if wait > maxRetryWait {
				wait = maxRetryWait
			}
			// A retry after the caller's deadline could never be made:
			// fail now rather than hold a turn slot until then.
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				return fmt.Errorf("%w: %s %s: status %d; its Retry-After or backoff of %v ends after the call's deadline", ErrConnector, method, redactPath(target), resp.StatusCode, wait)
			}
			c.metrics.connectorRetries.Inc()
			c.logger.Info("connector asked to retry", "status", resp.StatusCode, "wait", wait, "attempt", attempt+1)
			if err := c.sleep(ctx, wait); err != nil {
				return fmt.Errorf("%w: %s %s: %w", ErrConnector, method, redactPath(target), err)
			}
		default:
			return fmt.Errorf("%w: %s %s: status %d: %s", ErrConnector, method, redactPath(target), resp.StatusCode, firstLine(string(data)))
		}
	}
}

// redactPath keeps the host of a connector URL for logs; conversation ids
// are not secrets but are long and say nothing useful in an error.
func redactPath(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return "(connector)"
	}
	return u.Scheme + "://" + u.Host
}

// retryAfter reads a Retry-After header (seconds or an HTTP date); it
// returns -1 when there is none or it cannot be read.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return -1
	}
	if s, err := strconv.Atoi(h); err == nil {
		if s < 0 {
			return -1
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d
	}
	return -1
}

// backoff is exponential with full jitter, so concurrent turns that hit
// the same 429 do not retry in step.
func backoff(attempt int) time.Duration {
	d := firstBackoff << attempt
	if d > maxRetryWait {
		d = maxRetryWait
	}
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
