package mcpauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"teamsbot/store"
)

// Prompter shows a person the Connect link of an authorization request
// (the bot posts a card into the conversation of the run).
type Prompter interface {
	// Ask shows p to the person; the returned Asked hears the outcome.
	Ask(ctx context.Context, p Prompt) (Asked, error)
}

// Prompt is what the person is shown.
type Prompt struct {
	// RequestID is the id in the Connect link; URL the link itself.
	RequestID, URL string
	AgentID        string
	Server         string
	// PersonName is whose sign-in it is, for a group chat where anyone
	// sees the card.
	PersonName string
	// Wait is how long the run waits.
	Wait time.Duration
}

// Outcome is how an authorization request ended, for the card.
type Outcome int

// The outcomes.
const (
	Connected Outcome = iota + 1
	TimedOut
	Refused
)

// Asked hears how a request shown to a person ended.
type Asked interface {
	Outcome(ctx context.Context, o Outcome)
}

// Waiter is what a run gives the authorization that may start during its
// calls: who asks the person, and the call's own timeout, which stops
// while the person is asked (a tool call's 30 s are the server's, not the
// person's).
type Waiter struct {
	Prompter Prompter
	// Pause and Resume stop and restart the call's timeout; nil when the
	// call has none of its own.
	Pause, Resume func()
	RunID         string
	// failed remembers the flows of this run that failed, so that the
	// person is not asked twice for one server in one run; set by
	// WithWaiter.
	failed *failures
}

// failures are a run's failed authorizations, by connection.
type failures struct {
	mu   sync.Mutex
	errs map[string]error
}

func (w Waiter) ended(k string) error {
	if w.failed == nil {
		return nil
	}
	w.failed.mu.Lock()
	defer w.failed.mu.Unlock()
	return w.failed.errs[k]
}

func (w Waiter) end(k string, err error) {
	if w.failed == nil {
		return
	}
	w.failed.mu.Lock()
	defer w.failed.mu.Unlock()
	w.failed.errs[k] = err
}

type waiterKey struct{}

// WithWaiter returns ctx carrying w: an authorization started under ctx
// may ask the person. Without one (a view's call, a run without a
// person) it fails with ErrNotConnected instead.
func WithWaiter(ctx context.Context, w Waiter) context.Context {
	if w.failed == nil {
		if prev, ok := waiterFrom(ctx); ok && prev.failed != nil {
			w.failed = prev.failed // a call of the same run
		} else {
			w.failed = &failures{errs: map[string]error{}}
		}
	}
	return context.WithValue(ctx, waiterKey{}, w)
}

func waiterFrom(ctx context.Context) (Waiter, bool) {
	w, ok := ctx.Value(waiterKey{}).(Waiter)
	return w, ok && w.Prompter != nil
}

// codeWhat binds a sealed authorization code to its request.
func codeWhat(id string) string { return "code\x00" + id }

// ask is go-sdk's AuthorizationCodeFetcher: it keeps an authorization
// request in the store, has the person shown its Connect link, and waits
// until the callback (on any replica) has stored the answer, the wait is
// over, or ctx ends.
func (h *personHandler) ask(ctx context.Context, w Waiter, f *flow, authURL string) (*auth.AuthorizationResult, error) {
	b := h.b
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, fmt.Errorf("%w: the authorization address does not parse", ErrRefused)
	}
	if err := (&guardedTransport{allowHTTP: b.opts.AllowHTTP}).allowed(u); err != nil {
		// The person's browser would be sent there: never to plain http.
		return nil, err
	}
	q := u.Query()
	state := q.Get("state")
	resource := q.Get("resource")
	if h.s.Entra {
		// Entra ID's v2.0 endpoints refuse the parameter; its scopes
		// name the resource.
		q.Del("resource")
		u.RawQuery = q.Encode()
		authURL = u.String()
		resource = ""
	}
	now := b.now()
	r := store.MCPAuthRequest{
		ID: rand.Text(), State: state,
		TenantID: h.p.TenantID, UserID: h.p.UserID, UserName: h.p.Name,
		AgentID: h.s.AgentID, Server: h.s.Name, RunID: w.RunID,
		AuthURL: authURL, CreatedAt: now, ExpiresAt: now.Add(b.opts.Wait), Status: store.MCPAuthWaiting,
	}
	f.mu.Lock()
	f.reqID, f.resource = r.ID, resource
	f.mu.Unlock()
	if err := b.opts.Store.PutMCPAuthRequest(ctx, r, b.audit(ActionAsked, h.p, h.s, map[string]any{"request": r.ID, "run": w.RunID})); err != nil {
		return nil, fmt.Errorf("mcpauth: keep the authorization request: %w", err)
	}
	if w.Pause != nil {
		w.Pause()
		defer w.Resume()
	}
	asked, err := w.Prompter.Ask(ctx, Prompt{RequestID: r.ID, URL: b.ConnectURL(r.ID), AgentID: h.s.AgentID, Server: h.s.Name, PersonName: h.p.Name, Wait: b.opts.Wait})
	if err != nil {
		b.finish(ctx, r.ID, store.MCPAuthExpired)
		return nil, fmt.Errorf("%w: the person could not be asked: %w", ErrNotConnected, err)
	}
	f.mu.Lock()
	f.asked = asked
	f.mu.Unlock()

	deadline := time.NewTimer(b.opts.Wait)
	defer deadline.Stop()
	tick := time.NewTicker(b.opts.Poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-deadline.C:
			b.appendAudit(ctx, b.audit(ActionExpired, h.p, h.s, map[string]any{"request": r.ID, "run": w.RunID}))
			return nil, worded(fmt.Sprintf("%s was not connected in time, so the answer goes without it; ask again to connect it.", h.s.Name),
				"%w: %s after %s", ErrTimedOut, h.s.Name, b.opts.Wait)
		case <-tick.C:
		}
		// Connected another way meanwhile (the on-behalf-of flow, when
		// the person signed in again): nothing to exchange.
		if c, err := b.opts.Store.MCPConnection(ctx, h.p.TenantID, h.p.UserID, h.s.AgentID, h.s.Name); err == nil && !c.ConnectedAt.Before(r.CreatedAt) {
			return nil, errConnectedElsewhere
		}
		got, err := b.opts.Store.MCPAuthRequest(ctx, r.ID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("%w: the authorization request is gone", ErrRefused)
			}
			b.log.Warn("authorization request not read; trying again", "err", err)
			continue
		}
		if got.Status != store.MCPAuthAnswered {
			continue
		}
		if got.Error != "" {
			return nil, fmt.Errorf("%w: the authorization server answered %s", ErrRefused, got.Error)
		}
		code, err := b.seal.open(codeWhat(r.ID), got.Answer)
		if err != nil {
			return nil, fmt.Errorf("%w: the answer does not open: %w", ErrRefused, err)
		}
		f.mu.Lock()
		f.iss = got.Iss
		f.mu.Unlock()
		return &auth.AuthorizationResult{Code: string(code), State: got.State, Iss: got.Iss}, nil
	}
}

// finish records how a request ended, when it has not ended already.
func (b *Broker) finish(ctx context.Context, id, status string) {
	if id == "" {
		return
	}
	_, err := b.opts.Store.UpdateMCPAuthRequest(context.WithoutCancel(ctx), id, func(r *store.MCPAuthRequest) error {
		switch r.Status {
		case store.MCPAuthDone, store.MCPAuthRefused, store.MCPAuthExpired:
			return errFinished
		}
		r.Status = status
		return nil
	}, nil)
	if err != nil && !errors.Is(err, errFinished) {
		b.log.Warn("authorization request not finished", "status", status, "err", err)
	}
}

var errFinished = errors.New("mcpauth: request already finished")

// WaiterFrom returns the Waiter of ctx, if it has one.
func WaiterFrom(ctx context.Context) (Waiter, bool) { return waiterFrom(ctx) }

// errConnectedElsewhere ends a wait whose connection was made another
// way (the on-behalf-of flow): the authorization has succeeded.
var errConnectedElsewhere = errors.New("mcpauth: connected on behalf of the person")
