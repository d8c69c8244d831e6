package mcpauth

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"teamsbot/store"
)

// Connections lists a person's connections (what the store keeps,
// without the sealed grant).
func (b *Broker) Connections(ctx context.Context, tenant, user string) ([]store.MCPConnection, error) {
	list, err := b.opts.Store.MCPConnections(ctx, store.MCPConnectionFilter{TenantID: tenant, UserID: user})
	if err != nil {
		return nil, fmt.Errorf("mcpauth: connections: %w", err)
	}
	for i := range list {
		list[i].Sealed = nil
	}
	return list, nil
}

// Disconnect ends a person's connection to a server of an agent ("" for
// any agent), audited; it returns how many ended.
func (b *Broker) Disconnect(ctx context.Context, p Person, agent, server string) (int, error) {
	n, err := b.opts.Store.DeleteMCPConnections(ctx,
		store.MCPConnectionFilter{TenantID: p.TenantID, UserID: p.UserID, AgentID: agent, Server: server},
		func(removed []store.MCPConnection) []store.AuditRecord {
			recs := make([]store.AuditRecord, 0, len(removed))
			for _, c := range removed {
				recs = append(recs, b.audit(ActionDisconnected, p, Server{AgentID: c.AgentID, Name: c.Server}, nil))
			}
			return recs
		})
	if err != nil {
		return 0, fmt.Errorf("mcpauth: disconnect: %w", err)
	}
	return n, nil
}

// Revoke ends a tenant's connections that f selects (a server's, a
// person's), on an admin's word or because the person was removed;
// by names who (an admin's user id, or "" for the service), why says
// what happened. Each ended connection is audited.
func (b *Broker) Revoke(ctx context.Context, f store.MCPConnectionFilter, by, why string) (int, error) {
	n, err := b.opts.Store.DeleteMCPConnections(ctx, f, func(removed []store.MCPConnection) []store.AuditRecord {
		recs := make([]store.AuditRecord, 0, len(removed))
		for _, c := range removed {
			rec := b.audit(ActionRevoked, Person{TenantID: c.TenantID, UserID: c.UserID}, Server{AgentID: c.AgentID, Name: c.Server}, map[string]any{"why": why})
			rec.Actor = by
			recs = append(recs, rec)
		}
		return recs
	})
	if err != nil {
		return 0, fmt.Errorf("mcpauth: revoke: %w", err)
	}
	return n, nil
}

// ServiceHandler returns the handler of a server reached as the service
// itself: the client credentials grant (go-sdk's extauth), with the
// scopes of the server's challenge, for servers that accept the
// service's own identity.
func (b *Broker) ServiceHandler(s Server) (auth.OAuthHandler, error) {
	h, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{ClientID: s.ClientID, ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: s.ClientSecret}},
		HTTPClient:  b.client,
	})
	if err != nil {
		return nil, fmt.Errorf("mcpauth: %s: %w", s.Name, err)
	}
	return h, nil
}
