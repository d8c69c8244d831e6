package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/mcpauth"
)

// Servers reached with each person's own authorization (auth: person):
// each person has a session of their own, whose requests carry their
// token (mcpauth.PersonHandler), made on first use and closed when idle.
// The tool list is shared: what a server lists is taken as the same for
// everyone, so that a person who has not connected yet is offered its
// tools and asked to connect only when the model calls one.

// ErrNeedsPerson: a server reached as each person was asked for by a run
// or a call with no person (a trigger, a view of such a run).
var ErrNeedsPerson = errors.New("the server works as each person, and this run has none")

// ErrNotConnected: a view's call (or another call with nobody to ask)
// needs a server reached as its person, who has not connected it or whose
// connection has ended. It is mcpauth's.
var ErrNotConnected = mcpauth.ErrNotConnected

// personalIdle is how long a person's unused session is kept open.
const personalIdle = 10 * time.Minute

// personal is one person's session with a server.
type personal struct {
	mu      sync.Mutex // held while connecting
	session *mcp.ClientSession
	dead    bool
	used    time.Time
}

type personKey struct{}

// withPerson returns ctx carrying the person a server is reached as.
func withPerson(ctx context.Context, p Person) context.Context {
	return context.WithValue(ctx, personKey{}, p)
}

func personFrom(ctx context.Context) Person {
	p, _ := ctx.Value(personKey{}).(Person)
	return p
}

// perPerson reports a server reached with each person's authorization.
func (c *serverConn) perPerson() bool { return c.cfg.Auth == AuthPerson }

// authServer is the server as mcpauth knows it.
func (c *serverConn) authServer() mcpauth.Server {
	return authServer(c.agentID, c.cfg, c.clientSecret)
}

func authServer(agentID string, cfg ServerConfig, secret string) mcpauth.Server {
	return mcpauth.Server{AgentID: agentID, Name: cfg.Name, URL: cfg.URL, ClientID: cfg.ClientID,
		ClientSecret: secret, Scopes: cfg.Scopes, Audience: cfg.Audience, Entra: cfg.Entra, Authority: cfg.Authority}
}

// PersonServers are the servers of c reached as each person, as
// mcpauth.Options.Servers takes them, their secrets read with getenv.
func (c Config) PersonServers(getenv func(string) string) []mcpauth.Server {
	var out []mcpauth.Server
	for _, a := range c.Agents {
		for _, s := range a.Servers {
			if s.Auth != AuthPerson {
				continue
			}
			secret := ""
			if s.ClientSecretEnv != "" {
				secret = getenv(s.ClientSecretEnv)
			}
			out = append(out, authServer(a.ID, s, secret))
		}
	}
	return out
}

// personalSession returns the session of the person in ctx, connecting
// it when needed: the connect may wait while the person is asked to
// connect the server (an mcpauth.Waiter in ctx).
func (c *serverConn) personalSession(ctx context.Context) (*mcp.ClientSession, bool, error) {
	p := personFrom(ctx)
	if p.UserID == "" {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.name, ErrNeedsPerson)
	}
	if c.svc.opts.Auth == nil {
		return nil, false, fmt.Errorf("%w: %s: per-person authorization is not set up", ErrUnavailable, c.name)
	}
	k := p.TenantID + "\x00" + p.UserID
	now := c.svc.now()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, false, fmt.Errorf("%w: %s: service closed", ErrUnavailable, c.name)
	}
	c.pmu.Lock()
	e := c.personal[k]
	if e == nil {
		e = &personal{}
		c.personal[k] = e
	}
	var idle []*mcp.ClientSession
	for ok, o := range c.personal {
		if o != e && o.session != nil && now.Sub(o.used) > personalIdle && o.mu.TryLock() {
			idle = append(idle, o.session)
			delete(c.personal, ok)
			o.mu.Unlock()
		}
	}
	c.pmu.Unlock()
	for _, s := range idle {
		go s.Close()
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	e.used = now
	if e.session != nil && !e.dead {
		return e.session, false, nil
	}
	wasDead := e.session != nil
	if e.session != nil {
		_ = e.session.Close()
		e.session = nil
	}
	cctx, cancel, _, _ := pausableTimeout(ctx, c.svc.opts.ConnectTimeout)
	defer cancel()
	t := &mcp.StreamableClientTransport{
		Endpoint:     c.cfg.URL,
		HTTPClient:   c.httpClient(),
		MaxRetries:   2,
		OAuthHandler: c.svc.opts.Auth.PersonHandler(mcpauth.Person{TenantID: p.TenantID, UserID: p.UserID, Name: p.Name}, c.authServer()),
	}
	ask := c.svc.opts.Access == nil || c.svc.opts.Access.ElicitationAllowed(ctx, p.TenantID, c.name)
	cs, err := c.client(ask).Connect(cctx, t, nil)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %w", ErrUnavailable, c.name, c.scrub(err))
	}
	e.session, e.dead = cs, false
	go func() {
		_ = cs.Wait()
		e.mu.Lock()
		if e.session == cs {
			e.dead = true
		}
		e.mu.Unlock()
	}()
	return cs, wasDead, nil
}

// markPersonalDead records that a person's session broke.
func (c *serverConn) markPersonalDead(cs *mcp.ClientSession) {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	for _, e := range c.personal {
		if e.session == cs {
			e.dead = true
		}
	}
}

// closePersonal closes every person's session.
func (c *serverConn) closePersonal() {
	c.pmu.Lock()
	all := c.personal
	c.personal = map[string]*personal{}
	c.pmu.Unlock()
	for _, e := range all {
		e.mu.Lock()
		if e.session != nil {
			_ = e.session.Close()
		}
		e.mu.Unlock()
	}
}

// pausableTimeout is context.WithTimeout whose clock stops while a person
// is asked something: to connect a server (ctx's mcpauth.Waiter, if any,
// is passed on with Pause and Resume set), or what a server asks during
// the call (pause and resume, for the elicitation). A call's timeout is
// the server's time to answer, not the person's.
func pausableTimeout(ctx context.Context, d time.Duration) (cctx context.Context, cancelCall context.CancelFunc, pause, resume func()) {
	cctx, cancel := context.WithCancelCause(ctx)
	var mu sync.Mutex
	left := d
	started := time.Now()
	timer := time.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	pause = func() {
		mu.Lock()
		defer mu.Unlock()
		if timer.Stop() {
			left -= time.Since(started)
		}
	}
	resume = func() {
		mu.Lock()
		defer mu.Unlock()
		started = time.Now()
		timer.Reset(max(left, time.Second))
	}
	if w, ok := mcpauth.WaiterFrom(ctx); ok {
		w.Pause, w.Resume = pause, resume
		cctx = mcpauth.WithWaiter(cctx, w)
	}
	return cctx, func() { timer.Stop(); cancel(context.Canceled) }, pause, resume
}
