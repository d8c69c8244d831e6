// Package mcpauth lets the agent act as the person on their MCP servers:
// the authorization of the MCP specification (basic/authorization,
// 2025-11-25), done with go-sdk's own auth and oauthex packages, per
// person and per server.
//
// When a server answers a person's request with 401, the person's handler
// (PersonHandler) runs go-sdk's authorization code flow: protected
// resource metadata (RFC 9728), authorization server metadata (RFC 8414,
// then OpenID discovery), a client registered in the specification's
// order (the client ID metadata document this service serves at its
// public https address, then a client pre-registered in the configuration
// file, then dynamic registration, RFC 7591), PKCE with S256, the
// resource parameter (RFC 8707) and the iss of the answer (RFC 9207)
// checked. Its one step a service cannot take alone is the person's: the
// flow waits while a Prompter (the bot) shows the person a Connect link,
// which leads to this package's pages; the callback may reach another
// replica than the one waiting, so the answer passes through the store.
//
// What the authorization server gives (the tokens and the client
// registration) is sealed with the service's token keys (key ids,
// rotatable) and kept per tenant, person, agent and server. A token is
// never logged, audited, shown, or put into a view, a card or a run; it
// is refreshed (with the resource parameter) when it expires, and gone
// when the person disconnects, an admin revokes it, the authorization
// server refuses its refresh, or the server refuses it.
//
// A person's own token for this service (Teams single sign-on, the view
// page's sign-in) is never passed to a server: the specification forbids
// token passthrough. Every server gets a token whose audience is itself.
//
// Every connect, refresh, refusal and revocation is audited
// (mcp.connection.*), with no token in the record.
package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"teamsbot/internal/netaddr"
	"teamsbot/store"
)

// Errors of the package. Each carries words for the person through
// web.Words where it reaches them.
var (
	// ErrNotConnected: the person has not connected the server (or their
	// connection has gone) and nobody can be asked now: a view's call, a
	// run without a person.
	ErrNotConnected = errors.New("mcpauth: not connected")
	// ErrTimedOut: the person did not connect within the wait.
	ErrTimedOut = errors.New("mcpauth: the person did not connect in time")
	// ErrRefused: the authorization failed: the person declined, or what
	// the authorization server answered was refused (a wrong iss, a token
	// for another resource, metadata too slow, too large or malformed).
	ErrRefused = errors.New("mcpauth: authorization refused")
	// ErrNotFound: no such connection or authorization request.
	ErrNotFound = errors.New("mcpauth: not found")
)

// Audit actions, one per event of a connection's life.
const (
	ActionAsked        = "mcp.connection.asked"        // a run asked the person to connect
	ActionConnected    = "mcp.connection.connected"    // a token was got and kept
	ActionRefreshed    = "mcp.connection.refreshed"    // a token was refreshed
	ActionRefused      = "mcp.connection.refused"      // an authorization or a refresh was refused
	ActionExpired      = "mcp.connection.expired"      // nobody connected in time
	ActionDisconnected = "mcp.connection.disconnected" // the person disconnected
	ActionRevoked      = "mcp.connection.revoked"      // an admin revoked, or the person was removed
)

// Defaults of Options.
const (
	DefaultWait = 5 * time.Minute
	DefaultPoll = time.Second
	// maxMetadataBytes bounds every answer of an authorization server:
	// its metadata documents and token answers are a few KiB.
	maxMetadataBytes = 256 << 10
	// DefaultRequestTimeout bounds each request to an authorization
	// server.
	DefaultRequestTimeout = 15 * time.Second
)

// Paths of this package's pages, below the public base URL.
const (
	ConnectPath       = "/mcp-auth/connect/"
	CallbackPath      = "/mcp-auth/callback"
	ClientPath        = "/mcp-auth/client.json"
	ConnectionsPath   = "/connections"
	disconnectPathFmt = "/connections/%s/%s/disconnect"
)

// Options configures New.
type Options struct {
	// Store keeps the connections and the authorization requests.
	// Required.
	Store *store.Store
	// PublicBaseURL is where people and authorization servers reach the
	// service: the callback and, when https, the client ID metadata
	// document are below it.
	PublicBaseURL netaddr.Origin
	// DataDir holds the token key file (TokenKeys), made on first start.
	DataDir string
	// HTTPClient's Transport is the base for requests to authorization
	// servers (tests give one that trusts their certificates); nil means
	// http.DefaultTransport. Its Timeout and redirects are not used.
	HTTPClient *http.Client
	// AllowHTTP lets authorization servers be reached over plain http on
	// loopback, for local development; otherwise every endpoint of an
	// authorization server must be https.
	AllowHTTP bool
	// Wait is how long a run waits for the person to connect; zero means
	// DefaultWait.
	Wait time.Duration
	// Poll is how often a waiting run reads the store for the answer;
	// zero means DefaultPoll.
	Poll time.Duration
	// RequestTimeout bounds each request to an authorization server;
	// zero means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Servers are the servers reached as each person: those with Entra
	// set are connected on behalf of a person who signs in (SignedIn).
	Servers []Server
	// AgentName names the service in the client metadata ("Assistant").
	AgentName string
	Logger    *slog.Logger
	Now       func() time.Time
}

// Broker holds what every person's handler shares: the store, the token
// keys, the client for authorization servers. It is safe for concurrent
// use.
type Broker struct {
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	seal   *sealer
	client *http.Client
	// flows runs one authorization at a time per person and server, so
	// that two runs needing the same server ask the person once.
	flows singleflight.Group
	// refreshes runs one refresh at a time per connection.
	refreshes singleflight.Group
	// registered are the clients dynamic registration gave, by agent and
	// server: the next person's authorization reuses the client rather
	// than register another one with the same authorization server.
	registered sync.Map // string → registration
}

// registration is a client an authorization server registered
// dynamically.
type registration struct {
	clientID, secret, issuer string
}

// New loads (or makes) the token keys and returns the broker.
func New(opts Options) (*Broker, error) {
	if opts.Store == nil {
		return nil, errors.New("mcpauth: a store is required")
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := loadSealer(opts.DataDir, opts.Now(), log)
	if err != nil {
		return nil, err
	}
	b := &Broker{opts: opts, log: log, now: opts.Now, seal: s}
	b.client = b.newClient()
	return b, nil
}

// Wait is how long a run waits for a person to connect; zero for a nil
// Broker (no server is reached as each person).
func (b *Broker) Wait() time.Duration {
	if b == nil {
		return 0
	}
	return b.opts.Wait
}

// RedirectURL is the callback every authorization server redirects to.
func (b *Broker) RedirectURL() string { return b.opts.PublicBaseURL.URL(CallbackPath) }

// ClientIDURL is the client ID metadata document's address, the client
// id itself; "" when the public base URL is not https (the document must
// be served over https).
func (b *Broker) ClientIDURL() string {
	if !b.opts.PublicBaseURL.HTTPS() {
		return ""
	}
	return b.opts.PublicBaseURL.URL(ClientPath)
}

// ConnectURL is the Connect link of an authorization request.
func (b *Broker) ConnectURL(id string) string {
	return b.opts.PublicBaseURL.URL(ConnectPath + id)
}

// Person is who a connection is for.
type Person struct {
	TenantID, UserID string
	// Name is for display only (the Connect card, the admin's list).
	Name string
}

// Server is one MCP server reached with each person's own authorization.
type Server struct {
	AgentID string
	// Name is the server's name in the configuration.
	Name string
	// URL is the server's MCP endpoint: the resource a token is for.
	URL string
	// ClientID and ClientSecret are a client pre-registered with the
	// server's authorization server (the only way for Microsoft Entra
	// ID); empty when none.
	ClientID, ClientSecret string
	// Scopes, when set, are asked instead of those the server's challenge
	// or metadata name.
	Scopes []string
	// Audience is a token audience the server goes by besides its URL
	// (Entra ID's api://<app id>); empty when none.
	Audience string
	// Entra says the server's authorization server is Microsoft Entra ID:
	// its v2.0 endpoints refuse RFC 8707's resource parameter
	// (AADSTS901002) and name the resource by the scopes instead, so none
	// is sent; and a person signed in to this service with Entra ID is
	// connected through the on-behalf-of flow, without a prompt of its
	// own. It needs ClientID and ClientSecret.
	Entra bool
	// Authority is Entra ID's sign-in host for the on-behalf-of flow
	// ({Authority}/{tenant}/oauth2/v2.0/token); empty means
	// DefaultAuthority.
	Authority string
}

// DefaultAuthority is Entra ID's sign-in host in the public cloud.
const DefaultAuthority = "https://login.microsoftonline.com"

// key names a connection in logs and the flows' single-flight groups;
// never shown.
func key(p Person, s Server) string {
	return strings.Join([]string{p.TenantID, p.UserID, s.AgentID, s.Name}, "\x00")
}

// serverKey names a server among the broker's.
func serverKey(s Server) string { return s.AgentID + "\x00" + s.Name }

// audit returns a record of action for p and s; fields never hold a
// token.
func (b *Broker) audit(action string, p Person, s Server, fields map[string]any) store.AuditRecord {
	f := map[string]any{"agent": s.AgentID, "server": s.Name, "person": p.UserID}
	for k, v := range fields {
		f[k] = v
	}
	return store.AuditRecord{Time: b.now(), TenantID: p.TenantID, Action: action, Actor: p.UserID, Fields: f}
}

// appendAudit writes records outside another write, logging a failure:
// an audit record that cannot be written must not undo what happened.
func (b *Broker) appendAudit(ctx context.Context, recs ...store.AuditRecord) {
	if err := b.opts.Store.Append(context.WithoutCancel(ctx), recs...); err != nil {
		b.log.Error("audit record not written", "action", recs[0].Action, "err", err)
	}
}

// wordedError is an error with words for the person.
type wordedError struct {
	err   error
	words string
}

func (e *wordedError) Error() string { return e.err.Error() }
func (e *wordedError) Unwrap() error { return e.err }

// Words implements web.Worded.
func (e *wordedError) Words() string { return e.words }

func worded(words string, format string, args ...any) error {
	return &wordedError{err: fmt.Errorf(format, args...), words: words}
}
