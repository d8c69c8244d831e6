package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/dialgate"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/retry"
	"teamsbot/internal/textclip"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"
	"go.opentelemetry.io/otel/trace"
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
	// maxResponseBytes bounds what is read of a connector answer.
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

// newHTTPClient returns a client with timeouts at every step, enough idle
// connections per host that concurrent turns reuse them instead of
// opening a connection each, and one TLS dial at a time per host, so that
// a burst of sends shares HTTP/2 connections instead of dialling one each
// (dialgate).
func newHTTPClient() *http.Client {
	return &http.Client{Transport: dialgate.New(newTransport()), Timeout: 30 * time.Second}
}

// newTransport is newHTTPClient's transport, before its dials are gated.
func newTransport() *http.Transport {
	return &http.Transport{
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
}

// botTokens is the bot's own token for the Bot Connector: one
// clientcred.Source (cached, renewed five minutes early, fetched once for
// concurrent callers, a failed fetch held for tokenHoldFailure), whose
// errors it marks ErrToken.
type botTokens struct {
	src *clientcred.Source
}

// tokenHoldFailure spaces fetches while the token endpoint fails, so a
// dead endpoint is not asked on every send.
const tokenHoldFailure = 5 * time.Second

// Token returns a token valid for at least a few more minutes.
func (t *botTokens) Token(ctx context.Context) (string, error) {
	tok, err := t.src.TokenContext(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrToken, err)
	}
	return tok.AccessToken, nil
}

// invalidate drops a token the connector refused.
func (t *botTokens) invalidate(tok string) { t.src.Invalidate(tok) }

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
	tokens        *botTokens // nil in local mode: no Authorization header
	allowLoopback bool       // plain http to a loopback serviceUrl
	logger        *slog.Logger
	tracer        trace.Tracer // a span for each call
	metrics       *metrics
	// retry says which answers are sent again and how long to wait
	// first (connectorRetry, with its Sleep replaced in tests).
	retry retry.Policy
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
	if err := c.call(ctx, serviceURL+"\x00"+conversationID, http.MethodPost, target, a, &rr); err != nil {
		return "", err
	}
	return rr.ID, nil
}

// SendLater is Send for a send that may wait long for its place under
// Teams' rate limits (a stream's opening and updates, a typing indicator),
// without a goroutine while it waits (pacer.admit): done is called, in a
// goroutine of its own, with what Send would return.
func (c *connector) SendLater(ctx context.Context, serviceURL, conversationID string, a *outActivity, done func(id string, err error)) {
	target, err := c.activitiesURL(serviceURL, conversationID, "")
	if err != nil || c.pacer == nil {
		go func() { done(c.Send(ctx, serviceURL, conversationID, "", a)) }()
		return
	}
	rr := &schema.ResourceResponse{}
	c.callLater(ctx, serviceURL+"\x00"+conversationID, http.MethodPost, target, a, rr, func(err error) { done(rr.ID, err) })
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
	return c.call(ctx, serviceURL+"\x00"+conversationID, http.MethodPut, target, a, nil)
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
	return c.call(ctx, serviceURL+"\x00"+conversationID, http.MethodDelete, target, nil, nil)
}

// call makes one call to a conversation (do), its first attempt given its
// place under Teams' rate limits before do begins (callLater), its caller
// waiting on a channel: an answer may wait seconds behind the
// conversation's other answers, and thousands of turns may wait at once,
// each with no more than its own frames on its stack.
func (c *connector) call(ctx context.Context, conv, method, target string, body, out any) error {
	if c.pacer == nil {
		return c.do(ctx, conv, method, target, body, out, nil)
	}
	done := make(chan error, 1)
	c.callLater(ctx, conv, method, target, body, out, func(err error) { done <- err })
	return <-done
}

// callLater makes the call once the pacer admits it, without a goroutine
// while it waits, and calls done with its error.
func (c *connector) callLater(ctx context.Context, conv, method, target string, body, out any, done func(error)) {
	c.pacer.admit(ctx, tenantOf(ctx), conv, func(release func(), err error) {
		if err != nil {
			done(fmt.Errorf("%w: %s %s: waiting for the conversation's send rate: %w", ErrConnector, method, redactPath(target), err))
			return
		}
		done(c.do(ctx, conv, method, target, body, out, release))
	})
}

// connectorRetry is how a Bot Connector call is tried again: the answers
// Microsoft asks bots to retry ("Optimize your bot with rate limiting in
// Teams": 429, and 412, 502 and 504), with 503, which says the same, after
// Retry-After or a jittered exponential backoff, up to maxRetries times and
// never past the call's deadline. A 500 is not retried: the connector may
// have taken the activity, and a second post would show it twice; a 403
// (the bot was removed or blocked) is final.
func connectorRetry() retry.Policy {
	return retry.Policy{
		Attempts: maxRetries + 1, First: firstBackoff, Max: maxRetryWait,
		Statuses: []int{http.StatusTooManyRequests, http.StatusPreconditionFailed, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout},
	}
}

// do sends one call to a conversation (conv: its service URL and id) with
// retries of the answers connectorRetry names, honouring Retry-After, and
// never waits past ctx's deadline. Every attempt takes its turn in the
// pacer first, so a retry is paced like any send. A POST is not
// idempotent (a second one shows the person a duplicate): without an
// answer it is sent again only when the connection was refused before it
// was written; a PUT or DELETE is. admitted, when set, gives back the
// places the first attempt already holds (callLater): it is not paced
// again.
func (c *connector) do(ctx context.Context, conv, method, target string, body any, out any, admitted func()) (err error) {
	r := c.retry.Start()
	var status int // the last answer's
	ctx, span := c.startCall(ctx, method, body)
	defer func() { endCall(span, status, r.Attempt()-1, err) }()
	defer func() {
		if admitted != nil {
			admitted() // the places are given back when no request left
		}
	}()
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%w: encoding activity: %w", ErrConnector, err)
		}
	}
	idempotent := method != http.MethodPost
	refreshed := false
	for {
		var tok string
		if c.tokens != nil {
			var err error
			if tok, err = c.tokens.Token(ctx); err != nil {
				return err
			}
		}
		if c.pacer != nil && admitted == nil {
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
		release := func() {}
		switch {
		case admitted != nil:
			release, admitted = admitted, nil
		case c.pacer != nil:
			// The send takes its place among the conversation's and the
			// tenant's sends under way (pacer.inFlight), then its time
			// is checked once more as the request leaves
			// (pacer.sending), before it takes a connection: a send
			// held there would hold its place on an HTTP/2 connection,
			// and thousands held at once made the transport dial a
			// connection for each new one.
			var err error
			if release, err = c.pacer.inFlight(ctx, tenantOf(ctx), conv); err == nil {
				if err = c.pacer.sending(ctx, tenantOf(ctx), conv); err != nil {
					release()
				}
			}
			if err != nil {
				return fmt.Errorf("%w: %s %s: waiting for the conversation's send rate: %w", ErrConnector, method, redactPath(target), err)
			}
		}
		resp, err := c.client.Do(req)
		if err != nil {
			release()
			if !c.retry.Again(idempotent, 0, err) {
				return fmt.Errorf("%w: %s %s: %w", ErrConnector, method, redactPath(target), err)
			}
			if err := c.wait(ctx, r, "", method, target, 0, err); err != nil {
				return err
			}
			continue
		}
		status = resp.StatusCode
		data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
		resp.Body.Close()
		release() // answered: the send has reached the connector
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
		case c.retry.Again(idempotent, resp.StatusCode, nil):
			c.metrics.throttled.WithLabelValues(strconv.Itoa(resp.StatusCode)).Inc()
			if err := c.wait(ctx, r, resp.Header.Get("Retry-After"), method, target, resp.StatusCode, nil); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%w: %s %s: status %d: %s", ErrConnector, method, redactPath(target), resp.StatusCode, firstLine(string(data)))
		}
	}
}

// wait waits before the next attempt of a call that failed with status,
// or without an answer with cause, or returns the error to give up with:
// the retries are spent, or the wait (Retry-After or the backoff) would end
// after the call's deadline, which frees the turn slot at once rather than
// hold it until then.
func (c *connector) wait(ctx context.Context, r *retry.Retrier, retryAfter, method, target string, status int, cause error) error {
	what := cause
	if what == nil {
		what = fmt.Errorf("status %d", status)
	}
	wait, err := r.Next(ctx, retryAfter)
	if err != nil {
		if errors.Is(err, retry.ErrAttempts) {
			return fmt.Errorf("%w: %s %s: %v after %d retries", ErrConnector, method, redactPath(target), what, r.Attempt()-1)
		}
		return fmt.Errorf("%w: %s %s: %v; %w", ErrConnector, method, redactPath(target), what, err)
	}
	c.metrics.connectorRetries.Inc()
	if cause != nil {
		c.logger.Info("connector unreachable; retrying", "err", cause, "wait", wait, "attempt", r.Attempt())
	} else {
		c.logger.Info("connector asked to retry", "status", status, "wait", wait, "attempt", r.Attempt())
	}
	if err := r.Sleep(ctx, wait); err != nil {
		return fmt.Errorf("%w: %s %s: %w", ErrConnector, method, redactPath(target), err)
	}
	return nil
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
