package store

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The records of per-person authorization to MCP servers (OAuth 2.1, as
// the MCP specification's basic/authorization describes): a person's
// connection to a server of an agent, holding the tokens sealed by the
// caller, and an authorization under way, which a run waits on while the
// person signs in at the authorization server. The store keeps them; it
// neither runs the OAuth flows nor reads what is sealed.

// Bounds of the MCP authorization records.
const (
	// MaxMCPSealed bounds a connection's sealed token set and client
	// registration.
	MaxMCPSealed = 64 << 10
	// MaxMCPAuthURL bounds an authorization request's AuthURL.
	MaxMCPAuthURL = 8 << 10
	// MaxMCPAnswer bounds an authorization request's sealed Answer.
	MaxMCPAnswer = 8 << 10
	// MaxMCPAuthError bounds the Error of an authorization request: a
	// longer one is cut to it, as it comes from the authorization server
	// and the person only needs its start.
	MaxMCPAuthError = 1 << 10
	// maxIssuer bounds an issuer identifier, an https URL (RFC 8414).
	maxIssuer = 2 << 10
	// maxScopes bounds how many scopes a connection lists.
	maxScopes = 128
)

// mcpAuthRequestKept is how long after its ExpiresAt an authorization
// request is kept before a sweep deletes it: long enough for a late
// callback to be told that it came too late rather than that it is
// unknown.
const mcpAuthRequestKept = 24 * time.Hour

// MCPConnection is one person's authorization to one MCP server of an agent.
type MCPConnection struct {
	TenantID string `json:"tenantId"`
	UserID   string `json:"userId"`
	AgentID  string `json:"agentId"`
	Server   string `json:"server"`
	UserName string `json:"userName,omitempty"` // display only
	// Sealed is the token set and the client registration, sealed (encrypted) by the caller; the store never reads it. At most 64 KiB.
	Sealed []byte `json:"sealed"`
	// KeyID names the key that sealed it (so `teamsbot keys retire` can tell what a retire strands).
	KeyID       string    `json:"keyId"`
	Issuer      string    `json:"issuer,omitempty"`
	Scopes      []string  `json:"scopes,omitempty"`
	ConnectedAt time.Time `json:"connectedAt"`
	RefreshedAt time.Time `json:"refreshedAt,omitzero"`
	LastUsedAt  time.Time `json:"lastUsedAt,omitzero"`
}

// MCPConnectionFilter selects connections: TenantID is required, the others narrow it when set.
type MCPConnectionFilter struct{ TenantID, UserID, AgentID, Server string }

// MCPServerUse is what a tenant admin sees of one server: how many people connected it and when it was last used.
type MCPServerUse struct {
	AgentID, Server string
	People          int
	LastUsedAt      time.Time
}

// MCPAuthRequest is an authorization under way: a run waits for a person to connect a server.
// It lives in the store so that the callback may reach another replica than the one waiting.
type MCPAuthRequest struct {
	ID        string    `json:"id"`    // random, in the Connect link
	State     string    `json:"state"` // the OAuth state parameter of AuthURL; unique
	TenantID  string    `json:"tenantId"`
	UserID    string    `json:"userId"`
	UserName  string    `json:"userName,omitempty"`
	AgentID   string    `json:"agentId"`
	Server    string    `json:"server"`
	RunID     string    `json:"runId,omitempty"`
	AuthURL   string    `json:"authUrl"` // at most 8 KiB
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Status is one of the MCPAuth* constants below.
	Status string `json:"status"`
	// Answer is the authorization response's code, sealed by the caller (at most 8 KiB); Iss its RFC 9207 iss; Error the error the authorization server answered with (at most 1 KiB, cut).
	Answer     []byte    `json:"answer,omitempty"`
	Iss        string    `json:"iss,omitempty"`
	Error      string    `json:"error,omitempty"`
	OpenedAt   time.Time `json:"openedAt,omitzero"`
	AnsweredAt time.Time `json:"answeredAt,omitzero"`
	Version    uint64    `json:"version"` // the store sets it
}

// The statuses of an MCPAuthRequest.
const (
	MCPAuthWaiting  = "waiting"  // made, the card sent
	MCPAuthOpened   = "opened"   // the person followed Connect to the authorization server
	MCPAuthAnswered = "answered" // the callback came; Answer or Error set
	MCPAuthDone     = "done"     // the waiting run took the answer
	MCPAuthRefused  = "refused"  // the run refused the answer (wrong iss, exchange failed...)
	MCPAuthExpired  = "expired"  // nobody answered in time
)

// mcpAuthStatuses are the statuses a request may have.
var mcpAuthStatuses = [...]string{MCPAuthWaiting, MCPAuthOpened, MCPAuthAnswered, MCPAuthDone, MCPAuthRefused, MCPAuthExpired}

// check checks the filter: the tenant required, every part given a valid
// key part.
func (f MCPConnectionFilter) check() error {
	if err := checkKeyPart("the tenant id", f.TenantID); err != nil {
		return err
	}
	for _, p := range []struct{ what, v string }{{"the user id", f.UserID}, {"the agent id", f.AgentID}, {"the MCP server", f.Server}} {
		if p.v == "" {
			continue
		}
		if err := checkKeyPart(p.what, p.v); err != nil {
			return err
		}
	}
	return nil
}

// match reports whether the filter selects c. A backend reads what its
// indexes answer of a filter; the Store keeps exactly what match selects.
func (f MCPConnectionFilter) match(c MCPConnection) bool {
	return c.TenantID == f.TenantID && (f.UserID == "" || c.UserID == f.UserID) &&
		(f.AgentID == "" || c.AgentID == f.AgentID) && (f.Server == "" || c.Server == f.Server)
}

// compareMCPConnections orders connections by agent, server and user.
func compareMCPConnections(a, b MCPConnection) int {
	return cmp.Or(strings.Compare(a.AgentID, b.AgentID), strings.Compare(a.Server, b.Server), strings.Compare(a.UserID, b.UserID))
}

// checkMCPKey checks the four parts that name a connection.
func checkMCPKey(tenant, user, agent, server string) error {
	return checkKeyParts("the tenant id", tenant, "the user id", user, "the agent id", agent, "the MCP server", server)
}

// checkBytes checks bytes stored as they are: present when required, and
// bounded.
func checkBytes(what string, v []byte, required bool, limit int) error {
	switch {
	case required && len(v) == 0:
		return invalid("%s is empty", what)
	case len(v) > limit:
		return invalid("%s is %d bytes long, at most %d", what, len(v), limit)
	}
	return nil
}

// check checks a connection before it is stored.
func (c MCPConnection) check() error {
	if err := checkMCPKey(c.TenantID, c.UserID, c.AgentID, c.Server); err != nil {
		return err
	}
	if err := checkKeyPart("the sealing key id", c.KeyID); err != nil {
		return err
	}
	if err := checkBytes("the sealed token set", c.Sealed, true, MaxMCPSealed); err != nil {
		return err
	}
	if err := checkText("the user name", c.UserName, maxDisplayName); err != nil {
		return err
	}
	if err := checkText("the issuer", c.Issuer, maxIssuer); err != nil {
		return err
	}
	if len(c.Scopes) > maxScopes {
		return invalid("%d scopes, at most %d", len(c.Scopes), maxScopes)
	}
	for i, sc := range c.Scopes {
		if err := checkKeyPart(fmt.Sprintf("scope %d", i+1), sc); err != nil {
			return err
		}
	}
	return nil
}

// name names a connection in errors.
func (c MCPConnection) name() string {
	return fmt.Sprintf("MCP connection of user %.128s to server %.128s of agent %.128s in tenant %.128s", c.UserID, c.Server, c.AgentID, c.TenantID)
}

// PutMCPConnection stores a person's connection to a server of an agent,
// or replaces the one stored, with the audit records of the change in the
// same commit. Tenant, user, agent, server and the sealing key's id are
// checked as binding parts; Sealed is required and at most MaxMCPSealed
// bytes (ErrInvalid otherwise). A zero ConnectedAt is set from the
// store's clock. LastUsedAt never moves back: a replace made from a
// record read before a use keeps the use.
func (s *Store) PutMCPConnection(ctx context.Context, c MCPConnection, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.check(); err != nil {
		return err
	}
	if c.ConnectedAt.IsZero() {
		c.ConnectedAt = s.now()
	}
	enc, err := encode(c)
	if err != nil {
		return fmt.Errorf("%s: %w", c.name(), err)
	}
	prepared, err := s.prepareTenantAudit(c.TenantID, audit)
	if err != nil {
		return err
	}
	err = s.write(ctx, false, func(w writer) error {
		rec := enc
		var old *MCPConnection
		switch stored, err := w.mcpConnection(c.TenantID, c.UserID, c.AgentID, c.Server); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			old = &stored
			if stored.LastUsedAt.After(c.LastUsedAt) {
				kept := c
				kept.LastUsedAt = stored.LastUsedAt
				if rec, err = encode(kept); err != nil {
					return err
				}
			}
		}
		if err := w.putMCPConnection(rec, old); err != nil {
			return err
		}
		return w.appendAudit(prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put %s: %w", c.name(), err)
	}
	return nil
}

// MCPConnection returns a person's connection to a server of an agent;
// ErrNotFound when there is none.
func (s *Store) MCPConnection(ctx context.Context, tenant, user, agent, server string) (MCPConnection, error) {
	if err := ctx.Err(); err != nil {
		return MCPConnection{}, err
	}
	if err := checkMCPKey(tenant, user, agent, server); err != nil {
		return MCPConnection{}, err
	}
	var c MCPConnection
	err := s.be.read(ctx, func(r reader) error {
		var err error
		c, err = r.mcpConnection(tenant, user, agent, server)
		return err
	})
	if err != nil {
		return MCPConnection{}, fmt.Errorf("store: %s: %w", MCPConnection{TenantID: tenant, UserID: user, AgentID: agent, Server: server}.name(), err)
	}
	return c, nil
}

// UseMCPConnection records that a connection was used at at (its
// LastUsedAt; a zero at is the store's clock). It is a lazy write, and
// writes nothing when the stored LastUsedAt is less than a minute older
// than at: a run calls tools many times a minute, and the admin's page
// needs no finer time. A connection that is gone (disconnected
// meanwhile) is ErrNotFound.
func (s *Store) UseMCPConnection(ctx context.Context, tenant, user, agent, server string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkMCPKey(tenant, user, agent, server); err != nil {
		return err
	}
	if at.IsZero() {
		at = s.now()
	}
	name := MCPConnection{TenantID: tenant, UserID: user, AgentID: agent, Server: server}.name()
	stale := func(c MCPConnection) bool { return at.Sub(c.LastUsedAt) >= time.Minute }
	// Most uses find the last one recent: a read, and no write at all.
	var c MCPConnection
	err := s.be.read(ctx, func(r reader) error {
		var err error
		c, err = r.mcpConnection(tenant, user, agent, server)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: use %s: %w", name, err)
	}
	if !stale(c) {
		return nil
	}
	err = s.write(ctx, true, func(w writer) error {
		before, err := w.mcpConnection(tenant, user, agent, server)
		if err != nil {
			return err
		}
		if !stale(before) {
			return nil // another use came first
		}
		after := before
		after.LastUsedAt = at
		enc, err := encode(after)
		if err != nil {
			return err
		}
		return w.putMCPConnection(enc, &before)
	})
	if err != nil {
		return fmt.Errorf("store: use %s: %w", name, err)
	}
	return nil
}

// MCPConnections returns the connections f selects, sorted by agent,
// server and user. A filter without a tenant is ErrInvalid.
func (s *Store) MCPConnections(ctx context.Context, f MCPConnectionFilter) ([]MCPConnection, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	out, err := list(ctx, s, "MCP connections", f.TenantID, func(r reader) ([]MCPConnection, error) { return r.mcpConnections(f) })
	out = slices.DeleteFunc(out, func(c MCPConnection) bool { return !f.match(c) })
	slices.SortFunc(out, compareMCPConnections)
	return out, err
}

// MCPServerUses returns, for each server of an agent of tenant that at
// least one person connected, how many people did and when one last used
// it, sorted by agent and server. It reads no sealed tokens.
func (s *Store) MCPServerUses(ctx context.Context, tenant string) ([]MCPServerUse, error) {
	out, err := list(ctx, s, "MCP server uses", tenant, func(r reader) ([]MCPServerUse, error) { return r.mcpServerUses(tenant) })
	slices.SortFunc(out, func(a, b MCPServerUse) int {
		return cmp.Or(strings.Compare(a.AgentID, b.AgentID), strings.Compare(a.Server, b.Server))
	})
	return out, err
}

// DeleteMCPConnections deletes the connections f selects in one commit,
// with the audit records audit makes of them (given sorted as
// MCPConnections sorts; nil writes none), and returns how many it
// deleted. Nothing matched is 0 and no error, and audit is not called.
// audit may run more than once and must only build records.
func (s *Store) DeleteMCPConnections(ctx context.Context, f MCPConnectionFilter, audit func(removed []MCPConnection) []AuditRecord) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := f.check(); err != nil {
		return 0, err
	}
	var n int
	err := s.write(ctx, false, func(w writer) error {
		n = 0
		stored, err := w.mcpConnections(f)
		if err != nil {
			return err
		}
		removed := slices.DeleteFunc(stored, func(c MCPConnection) bool { return !f.match(c) })
		slices.SortFunc(removed, compareMCPConnections)
		for _, c := range removed {
			if err := w.deleteMCPConnection(c); err != nil {
				return err
			}
		}
		n = len(removed)
		if audit == nil || n == 0 {
			return nil
		}
		return s.auditFor(w, f.TenantID, func() []AuditRecord { return audit(removed) })
	})
	if err != nil {
		return 0, fmt.Errorf("store: delete MCP connections of tenant %s: %w", f.TenantID, err)
	}
	return n, nil
}

// check checks an authorization request before it is stored; its Error
// is cut already.
func (r MCPAuthRequest) check() error {
	if err := checkKeyParts("the request id", r.ID, "the OAuth state", r.State); err != nil {
		return err
	}
	if err := checkMCPKey(r.TenantID, r.UserID, r.AgentID, r.Server); err != nil {
		return err
	}
	for _, p := range []struct {
		what, v string
		limit   int
	}{
		{"the user name", r.UserName, maxDisplayName}, {"the run id", r.RunID, maxIDLen},
		{"the authorization URL", r.AuthURL, MaxMCPAuthURL}, {"the issuer of the answer", r.Iss, maxIssuer},
		{"the error of the answer", r.Error, MaxMCPAuthError},
	} {
		if err := checkText(p.what, p.v, p.limit); err != nil {
			return err
		}
	}
	if r.AuthURL == "" {
		return invalid("the authorization URL is empty")
	}
	if err := checkBytes("the answer", r.Answer, false, MaxMCPAnswer); err != nil {
		return err
	}
	if !slices.Contains(mcpAuthStatuses[:], r.Status) {
		return invalid("the status %q is none of %s", r.Status, strings.Join(mcpAuthStatuses[:], ", "))
	}
	if r.ExpiresAt.IsZero() {
		return invalid("the request has no expiry")
	}
	if !r.ExpiresAt.After(r.CreatedAt) {
		return invalid("the request expires at %s, not after it was made at %s",
			r.ExpiresAt.UTC().Format(time.RFC3339), r.CreatedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// PutMCPAuthRequest stores a new authorization request, with the audit
// records of its making in the same commit. An ID or a State stored
// already is ErrConflict. Ids are checked as binding parts, AuthURL is
// required and at most MaxMCPAuthURL bytes, Answer at most MaxMCPAnswer,
// Status one of the MCPAuth* constants (an empty one is MCPAuthWaiting),
// and ExpiresAt after CreatedAt (ErrInvalid otherwise). A zero CreatedAt
// is set from the store's clock, an Error longer than MaxMCPAuthError is
// cut to it, and Version is 1.
func (s *Store) PutMCPAuthRequest(ctx context.Context, r MCPAuthRequest, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	if r.Status == "" {
		r.Status = MCPAuthWaiting
	}
	r.Error = cutText(r.Error, MaxMCPAuthError)
	r.Version = 1
	if err := r.check(); err != nil {
		return err
	}
	enc, err := encode(r)
	if err != nil {
		return fmt.Errorf("MCP authorization request %s: %w", r.ID, err)
	}
	err = create(ctx, s, r.TenantID, "request id "+r.ID, enc, audit, func(rd reader) error {
		if _, err := rd.mcpAuthRequest(r.ID); err == nil || !errors.Is(err, ErrNotFound) {
			return err
		}
		switch _, err := rd.mcpAuthRequestByState(r.State); {
		case err == nil:
			// The state is not named: it is the request's secret.
			return fmt.Errorf("the OAuth state of request %s is another request's: %w", r.ID, ErrConflict)
		case errors.Is(err, ErrNotFound):
			return ErrNotFound
		default:
			return err
		}
	}, writer.putMCPAuthRequest)
	if err != nil {
		return fmt.Errorf("store: put MCP authorization request %s of tenant %s: %w", r.ID, r.TenantID, err)
	}
	return nil
}

// MCPAuthRequest returns an authorization request by its id; ErrNotFound
// when there is none (or a sweep deleted it, a day after it expired). A
// request past its ExpiresAt is returned as stored: what it means is the
// caller's to say.
func (s *Store) MCPAuthRequest(ctx context.Context, id string) (MCPAuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return MCPAuthRequest{}, err
	}
	if err := checkKeyPart("the request id", id); err != nil {
		return MCPAuthRequest{}, err
	}
	r, err := get(ctx, s, "MCP authorization request", id, reader.mcpAuthRequest)
	if err != nil {
		return MCPAuthRequest{}, fmt.Errorf("store: %w", err)
	}
	return r, nil
}

// MCPAuthRequestByState returns the authorization request whose State is
// state, as the authorization server's callback names it; ErrNotFound
// when there is none. Errors never quote the state.
func (s *Store) MCPAuthRequestByState(ctx context.Context, state string) (MCPAuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return MCPAuthRequest{}, err
	}
	if err := checkKeyPart("the OAuth state", state); err != nil {
		return MCPAuthRequest{}, err
	}
	var r MCPAuthRequest
	err := s.be.read(ctx, func(rd reader) error {
		var err error
		r, err = rd.mcpAuthRequestByState(state)
		return err
	})
	if err != nil {
		return MCPAuthRequest{}, fmt.Errorf("store: MCP authorization request by its state: %w", err)
	}
	return r, nil
}

// UpdateMCPAuthRequest changes an authorization request in one commit:
// it reads the stored request, change edits it, and the store writes it
// with Version one more, with the audit records audit makes of the
// request before and after (nil writes none) in the same commit. Of
// changes to one request at once, each sees the one committed before it
// (on PostgreSQL the row is locked from the read to the commit): a change
// that requires a status sees the status the other left. An error from
// change is returned as it is, unwrapped, and nothing is written. ID,
// State, tenant, user, agent, server and CreatedAt cannot change; the
// rest is checked as by PutMCPAuthRequest (an Error cut). change and
// audit may run more than once and must only compute. An unknown request
// is ErrNotFound. It returns the request as stored.
func (s *Store) UpdateMCPAuthRequest(ctx context.Context, id string, change func(*MCPAuthRequest) error, audit func(before, after MCPAuthRequest) []AuditRecord) (MCPAuthRequest, error) {
	if err := ctx.Err(); err != nil {
		return MCPAuthRequest{}, err
	}
	if err := checkKeyPart("the request id", id); err != nil {
		return MCPAuthRequest{}, err
	}
	var after MCPAuthRequest
	var refused error
	err := s.write(ctx, false, func(w writer) error {
		refused = nil
		before, err := w.mcpAuthRequest(id)
		if err != nil {
			return err
		}
		after = before
		after.Answer = bytes.Clone(before.Answer) // change's own, so that before stays as read
		if err := change(&after); err != nil {
			refused = err
			return err
		}
		after.ID, after.State, after.TenantID, after.UserID, after.AgentID, after.Server, after.CreatedAt =
			before.ID, before.State, before.TenantID, before.UserID, before.AgentID, before.Server, before.CreatedAt
		after.Version = before.Version + 1
		after.Error = cutText(after.Error, MaxMCPAuthError)
		if err := after.check(); err != nil {
			return err
		}
		enc, err := encode(after)
		if err != nil {
			return err
		}
		if err := w.putMCPAuthRequest(enc, &before); err != nil {
			return err
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, before.TenantID, func() []AuditRecord { return audit(before, after) })
	})
	if refused != nil && err == refused {
		return MCPAuthRequest{}, refused
	}
	if err != nil {
		return MCPAuthRequest{}, fmt.Errorf("store: update MCP authorization request %.128s: %w", id, err)
	}
	return after, nil
}
