package viewpage

import (
	"context"
	"fmt"
	"slices"

	"teamsbot/signin"
	"teamsbot/store"
)

// Access decides who may open a view and who may call a tool from it. The
// page asks it before it shows anything of a view; the agent's governed path
// (Cedar policies, visibility, data rules) still decides each call after it.
//
// A refusal is an error that wraps ErrForbidden; any other error is treated
// as a failure of the check itself (500).
type Access interface {
	// CanRead reports whether s may open v (the page, the view API and the
	// frame URLs minted for it).
	CanRead(ctx context.Context, s signin.Session, v store.View) error
	// CanCall reports whether s may call tool from v.
	CanCall(ctx context.Context, s signin.Session, v store.View, tool string) error
}

// Role names the default rule knows. The access package will bind them to
// people and groups per tenant; until then they come from the sign-in
// session (Entra app roles).
const (
	RoleAgentsRead  = "agents.read"
	RoleAgentsRun   = "agents.run"
	RoleAgentsAdmin = "agents.admin"
)

// OwnerRule is the default Access: the ownership rule of the product
// specification and the roles its API names ("GET /api/mcp-apps/{id} ...
// needs agents.read"; "POST /api/mcp-apps/{id}/call ... needs agents.run").
//
//   - Nobody from another tenant, ever.
//   - A view from a run for a person (UserID set) may be opened by that
//     person only (same tenant and same user id), and only while they hold
//     one of ReaderRoles; its tools may be called by that person while they
//     hold one of RunnerRoles. Roles do not widen this: an admin of the
//     tenant cannot open someone else's view.
//   - A view from a run with no person (a trigger) may be opened by the
//     tenant's agent readers, which this rule takes to be sessions holding
//     one of ReaderRoles; its tools may be called by sessions holding one
//     of RunnerRoles.
//
// The Cedar invoke check on the agent is not made here: every call goes
// through the agent's governed path, which makes it.
//
// The zero value uses the default roles below.
type OwnerRule struct {
	// ReaderRoles may open views; nil means agents.read and agents.admin.
	ReaderRoles []string
	// RunnerRoles may call tools from views; nil means agents.run and
	// agents.admin.
	RunnerRoles []string
}

// CanRead implements Access.
func (r OwnerRule) CanRead(_ context.Context, s signin.Session, v store.View) error {
	roles := r.ReaderRoles
	if roles == nil {
		roles = []string{RoleAgentsRead, RoleAgentsAdmin}
	}
	return r.check(s, v, roles)
}

// CanCall implements Access.
func (r OwnerRule) CanCall(_ context.Context, s signin.Session, v store.View, _ string) error {
	roles := r.RunnerRoles
	if roles == nil {
		roles = []string{RoleAgentsRun, RoleAgentsAdmin}
	}
	return r.check(s, v, roles)
}

func (OwnerRule) check(s signin.Session, v store.View, roles []string) error {
	if s.TenantID == "" || v.TenantID == "" || s.TenantID != v.TenantID {
		return fmt.Errorf("view %s: another tenant: %w", v.ID, ErrForbidden)
	}
	if v.UserID != "" && (s.UserID == "" || s.UserID != v.UserID) {
		return fmt.Errorf("view %s: another person's view: %w", v.ID, ErrForbidden)
	}
	for _, role := range s.Roles {
		if slices.Contains(roles, role) {
			return nil
		}
	}
	return fmt.Errorf("view %s: needs one of %v: %w", v.ID, roles, ErrMissingRole)
}
