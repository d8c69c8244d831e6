package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// revokeWhy is the why of the audit record of every connection an admin
// revokes here.
const revokeWhy = "revoked by a tenant admin"

// errNoConnections answers the connection routes of a console built
// without the MCP authorization broker: no server is reached as each
// person, so nobody has a connection.
var errNoConnections = web.NewError(http.StatusNotFound,
	"No MCP server of this service acts as each person, so nobody has connected one and there is nothing to show or revoke.")

// connectionsPage is /admin/connections: the servers people connected,
// each with how many did, and every person's connection, each revocable.
// It never holds a sealed token: the connections come from the broker,
// which leaves them out.
type connectionsPage struct {
	pageData
	Servers     []store.MCPServerUse
	Connections []store.MCPConnection
}

func (h *Handler) connectionsPage(c echo.Context, p access.Person) error {
	return h.renderConnections(c, http.StatusOK, p, "", "")
}

func (h *Handler) renderConnections(c echo.Context, status int, p access.Person, notice, problem string) error {
	servers, conns, err := h.connections(c.Request().Context(), p)
	if err != nil {
		return err
	}
	d := &connectionsPage{Servers: servers, Connections: conns}
	known, ids := map[string]string{}, []string{}
	for _, cn := range conns {
		known[cn.UserID], ids = cn.UserName, append(ids, cn.UserID)
	}
	d.Names = h.names(c.Request().Context(), p, known, ids...)
	return h.renderNotice(c, status, "connections", "People's connections to MCP servers", p, d, notice, problem)
}

// connections reads the admin's tenant's server uses and connections.
func (h *Handler) connections(ctx context.Context, p access.Person) ([]store.MCPServerUse, []store.MCPConnection, error) {
	if h.opts.Connections == nil {
		return nil, nil, errNoConnections
	}
	servers, err := h.opts.Store.MCPServerUses(ctx, p.TenantID)
	if err != nil {
		return nil, nil, fmt.Errorf("admin: connections of tenant %s: %w", p.TenantID, err)
	}
	conns, err := h.opts.Connections.Connections(ctx, p.TenantID, "")
	if err != nil {
		return nil, nil, fmt.Errorf("admin: connections of tenant %s: %w", p.TenantID, err)
	}
	for i := range conns {
		conns[i].Sealed = nil // the broker leaves it out already; never shown, whatever it does
	}
	return servers, conns, nil
}

// nothingSelected is the refusal of a revoke that names no agent or no
// server: it would otherwise select every connection of the tenant.
const nothingSelected = "Nothing was selected to revoke: use the Revoke all button of a server, or the Revoke button of a person's connection."

// revokeTarget is what a revoke names: an agent's server, and a person
// or everyone who connected it.
type revokeTarget struct {
	Agent, Server, User string
}

// revokeConnections ends the admin's tenant's connections that t
// selects, audited by the broker with the admin as actor, and returns how
// many ended (0 when t matches none: the caller says what that means). A
// target without an agent or a server is refused: it would select the
// whole tenant.
func (h *Handler) revokeConnections(ctx context.Context, p access.Person, t revokeTarget) (int, error) {
	if h.opts.Connections == nil {
		return 0, errNoConnections
	}
	if t.Agent == "" || t.Server == "" {
		return 0, web.NewError(http.StatusBadRequest, nothingSelected)
	}
	n, err := h.opts.Connections.Revoke(ctx, store.MCPConnectionFilter{TenantID: p.TenantID, UserID: t.User, AgentID: t.Agent, Server: t.Server}, p.UserID, revokeWhy)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// revokedWords says what a revoke did, for the page; who names the
// person of a one-person revoke.
func revokedWords(t revokeTarget, who string, n int) string {
	if t.User != "" {
		return fmt.Sprintf("The connection of %s to %s was revoked: the agent can no longer act as them there until they connect it again.", who, t.Server)
	}
	if n == 1 {
		return fmt.Sprintf("1 connection to %s was revoked: the agent can no longer act as that person there until they connect it again.", t.Server)
	}
	return fmt.Sprintf("%d connections to %s were revoked: the agent can no longer act as those people there until they connect it again.", n, t.Server)
}

// nothingRevoked says why a revoke that matched nothing did nothing.
func nothingRevoked(t revokeTarget) string {
	if t.User != "" {
		return fmt.Sprintf("%s has no connection to %s; nothing was revoked. Reload the page to see the connections there are now.", t.User, t.Server)
	}
	return fmt.Sprintf("Nobody has connected %s; nothing was revoked. Reload the page to see the connections there are now.", t.Server)
}

// revokeForm is the Revoke all button of a server, or the Revoke button
// of one person's connection (user set). The page is shown again with
// how many connections ended: a redirect's notice could not carry the
// count without a link being able to claim any count.
func (h *Handler) revokeForm(c echo.Context, p access.Person) error {
	t := revokeTarget{Agent: strings.TrimSpace(c.FormValue("agent")), Server: strings.TrimSpace(c.FormValue("server")), User: strings.TrimSpace(c.FormValue("user"))}
	if h.opts.Connections != nil && (t.Agent == "" || t.Server == "") {
		return h.renderConnections(c, http.StatusBadRequest, p, "", nothingSelected)
	}
	ctx := c.Request().Context()
	q, err := h.connectionQuestion(ctx, p, t)
	if err != nil {
		return err
	}
	if !confirmed(c, q) {
		return h.ask(c, p, "connections", q)
	}
	who, err := h.personName(ctx, p, t)
	if err != nil {
		return err
	}
	n, err := h.revokeConnections(ctx, p, t)
	if err != nil {
		if msg, ok := problemOf(err); ok {
			return h.renderConnections(c, http.StatusBadRequest, p, "", msg)
		}
		return err
	}
	if n == 0 {
		return h.renderConnections(c, http.StatusNotFound, p, "", nothingRevoked(t))
	}
	return h.renderConnections(c, http.StatusOK, p, revokedWords(t, who, n), "")
}

// connectionQuestion is the confirmation a revoke of t needs: nil when
// nobody has such a connection.
func (h *Handler) connectionQuestion(ctx context.Context, p access.Person, t revokeTarget) (*confirmation, error) {
	if h.opts.Connections == nil {
		return nil, nil
	}
	servers, conns, err := h.connections(ctx, p)
	if err != nil {
		return nil, err
	}
	if t.User != "" {
		for _, cn := range conns {
			if cn.AgentID == t.Agent && cn.Server == t.Server && cn.UserID == t.User {
				return new(connectionConfirmation(cn)), nil
			}
		}
		return nil, nil
	}
	for _, s := range servers {
		if s.AgentID == t.Agent && s.Server == t.Server && s.People > 0 {
			return new(serverConfirmation(s)), nil
		}
	}
	return nil, nil
}

// personName is how the page names the person of a one-person revoke:
// their name and id as their connection keeps them, or the id alone.
func (h *Handler) personName(ctx context.Context, p access.Person, t revokeTarget) (string, error) {
	if t.User == "" || h.opts.Connections == nil {
		return t.User, nil
	}
	conns, err := h.opts.Connections.Connections(ctx, p.TenantID, t.User)
	if errors.Is(err, store.ErrInvalid) {
		return t.User, nil // revokeConnections says what is wrong with it
	}
	if err != nil {
		return "", fmt.Errorf("admin: connection of %s: %w", t.User, err)
	}
	for _, cn := range conns {
		if cn.AgentID == t.Agent && cn.Server == t.Server && cn.UserName != "" {
			return cn.UserName + " (" + cn.UserID + ")", nil
		}
	}
	return t.User, nil
}

// apiServerUse is a server people connected, as the admin API gives it.
type apiServerUse struct {
	Agent      string    `json:"agent"`
	Server     string    `json:"server"`
	People     int       `json:"people"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
}

// apiConnection is a person's connection as the admin API gives it: never
// the sealed token set, nor the sealing key's id.
type apiConnection struct {
	UserID      string    `json:"userId"`
	UserName    string    `json:"userName"`
	Agent       string    `json:"agent"`
	Server      string    `json:"server"`
	ConnectedAt time.Time `json:"connectedAt"`
	LastUsedAt  time.Time `json:"lastUsedAt,omitzero"`
	Scopes      []string  `json:"scopes"`
}

func (h *Handler) apiConnections(c echo.Context, p access.Person) error {
	servers, conns, err := h.connections(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := struct {
		Servers     []apiServerUse  `json:"servers"`
		Connections []apiConnection `json:"connections"`
	}{Servers: make([]apiServerUse, 0, len(servers)), Connections: make([]apiConnection, 0, len(conns))}
	for _, s := range servers {
		out.Servers = append(out.Servers, apiServerUse{Agent: s.AgentID, Server: s.Server, People: s.People, LastUsedAt: s.LastUsedAt})
	}
	for _, cn := range conns {
		out.Connections = append(out.Connections, apiConnection{UserID: cn.UserID, UserName: cn.UserName, Agent: cn.AgentID,
			Server: cn.Server, ConnectedAt: cn.ConnectedAt, LastUsedAt: cn.LastUsedAt, Scopes: nonNil(cn.Scopes)})
	}
	return c.JSON(http.StatusOK, out)
}

// apiRevokeConnections is DELETE /api/admin/mcp-connections?agent=&server=&user=:
// agent and server are required, user narrows it to one person. It
// answers how many connections ended, 0 included: nothing is left to
// revoke either way.
func (h *Handler) apiRevokeConnections(c echo.Context, p access.Person) error {
	q := c.Request().URL.Query()
	t := revokeTarget{Agent: strings.TrimSpace(q.Get("agent")), Server: strings.TrimSpace(q.Get("server")), User: strings.TrimSpace(q.Get("user"))}
	if t.Agent == "" || t.Server == "" {
		return web.NewError(http.StatusBadRequest, "agent and server are required: name the agent and the MCP server whose connections to revoke (and user for one person's only).")
	}
	n, err := h.revokeConnections(c.Request().Context(), p, t)
	if err != nil {
		return apiError(err)
	}
	return c.JSON(http.StatusOK, map[string]int{"revoked": n})
}
