// Package dialgate keeps a burst of HTTPS requests to one host from
// dialling a connection each.
//
// net/http dials a new connection for every request that finds no
// connection with room for it, and an HTTP/2 connection full of streams
// has none: when thousands of requests go to one host at once (a model's
// streamed answers, the Bot Connector's sends) each starts its own TLS
// handshake, and the connections that win are kept although one of them
// would have carried hundreds of the requests. The gate lets a few TLS
// dials at a time per address; a request waiting to dial that was
// meanwhile given a connection (a new one, shared by HTTP/2) gives its
// dial up at once.
package dialgate

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"
)

// errNotNeeded ends a dial whose request was given a connection while the
// dial waited: net/http drops the error, as the request no longer waits
// for that dial.
var errNotNeeded = errors.New("dialgate: the request was given another connection")

// settle is how long a dial that waited gives the connection just made
// to reach the requests waiting for one, before it looks whether its own
// request got it.
const settle = 2 * time.Millisecond

// New gates t's TLS dials and returns t wrapped so that each request's
// dial knows whether the request still needs it. t's DialContext (or a
// net.Dialer's), TLSClientConfig and TLSHandshakeTimeout make the
// connections; t must not have a DialTLSContext or DialTLS of its own.
// Requests through a proxy are not gated (net/http dials those itself).
func New(t *http.Transport) *Transport {
	g := &gate{hosts: map[string]*host{}, dial: t.DialContext, tls: t.TLSClientConfig, timeout: t.TLSHandshakeTimeout}
	if g.dial == nil {
		g.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	t.DialTLSContext = g.dialTLS
	return &Transport{t: t}
}

// Transport is an http.Transport whose TLS dials are gated; it marks each
// request's connection attempts for the gate.
type Transport struct{ t *http.Transport }

// Base is the gated http.Transport, whose settings are read, never
// changed, once it carries requests.
func (tr *Transport) Base() *http.Transport { return tr.t }

// attemptKey carries a request's *tracker in its context (net/http keeps
// the request's values in the context it dials with).
type attemptKey struct{}

// tracker follows a request's attempts at a connection: net/http makes a
// new one each time it retries on another connection.
type tracker struct{ cur atomic.Pointer[attempt] }

// attempt is one wait for a connection; served is closed once it has one.
type attempt struct {
	served chan struct{}
	once   sync.Once
}

func newAttempt() *attempt { return &attempt{served: make(chan struct{})} }

func (a *attempt) serve() { a.once.Do(func() { close(a.served) }) }

// RoundTrip implements http.RoundTripper.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := &tracker{}
	k.cur.Store(newAttempt())
	ctx := context.WithValue(req.Context(), attemptKey{}, k)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// A new attempt means the request is done with the one
		// before (it was given a connection that could not take it):
		// the earlier attempt's dial is not needed either.
		GetConn: func(string) { k.cur.Swap(newAttempt()).serve() },
		GotConn: func(httptrace.GotConnInfo) { k.cur.Load().serve() },
	})
	return tr.t.RoundTrip(req.WithContext(ctx))
}

// CloseIdleConnections closes the transport's idle connections, as
// http.Client asks of its transport.
func (tr *Transport) CloseIdleConnections() { tr.t.CloseIdleConnections() }

// maxDials is how many TLS dials to one address may be under way at once:
// more than one, so that a dial whose SYN or handshake is lost does not
// hold up every other request to the host until it times out.
const maxDials = 2

// gate lets maxDials dials at a time per address.
type gate struct {
	mu      sync.Mutex
	hosts   map[string]*host
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	tls     *tls.Config
	timeout time.Duration
}

// host is an address's dials under way; ended is closed, and replaced,
// each time one of them ends.
type host struct {
	dialing int
	ended   chan struct{}
}

func (g *gate) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	served := make(<-chan struct{}) // never, for a request not marked by Transport
	if k, ok := ctx.Value(attemptKey{}).(*tracker); ok {
		served = k.cur.Load().served
	}
	h, err := g.enter(ctx, addr, served)
	if err != nil {
		return nil, err
	}
	defer g.leave(addr, h)
	return g.handshake(ctx, network, addr)
}

// enter waits for a place among addr's dials. It gives up, with
// errNotNeeded, as soon as the request was given a connection (served),
// and after each dial that ends it lets the new connection settle before
// it looks again.
func (g *gate) enter(ctx context.Context, addr string, served <-chan struct{}) (*host, error) {
	for {
		g.mu.Lock()
		h := g.hosts[addr]
		if h == nil {
			h = &host{ended: make(chan struct{})}
			g.hosts[addr] = h
		}
		if h.dialing < maxDials {
			h.dialing++
			g.mu.Unlock()
			return h, nil
		}
		ended := h.ended
		g.mu.Unlock()
		select {
		case <-ended:
		case <-served:
			return nil, errNotNeeded
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		t := time.NewTimer(settle)
		select {
		case <-t.C:
		case <-served:
			t.Stop()
			return nil, errNotNeeded
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// leave ends one of addr's dials and wakes the dials waiting for a place.
func (g *gate) leave(addr string, h *host) {
	g.mu.Lock()
	defer g.mu.Unlock()
	h.dialing--
	close(h.ended)
	h.ended = make(chan struct{})
	if h.dialing == 0 {
		delete(g.hosts, addr)
	}
}

// handshake dials addr and makes the TLS handshake, offering HTTP/2 and
// HTTP/1.1 unless the transport's TLS configuration says otherwise.
func (g *gate) handshake(ctx context.Context, network, addr string) (net.Conn, error) {
	raw, err := g.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{}
	if g.tls != nil {
		cfg = g.tls.Clone()
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	if len(cfg.NextProtos) == 0 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	hctx := ctx
	if g.timeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, g.timeout)
		defer cancel()
	}
	conn := tls.Client(raw, cfg)
	if err := conn.HandshakeContext(hctx); err != nil {
		raw.Close()
		return nil, err
	}
	return conn, nil
}
