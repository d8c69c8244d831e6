package viewpage

import (
	"context"
	"errors"
	"fmt"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/signin"
	"teamsbot/store"
)

// The view page decides nothing itself: access does (the ownership rule,
// the roles, the tenant default, group bindings), and the agent's governed
// path decides each call with Cedar. These convert what the page has into
// what they take.

// personOf is who a session is, for access and the agent.
func personOf(s signin.Session) access.Person {
	return access.Person{TenantID: s.TenantID, UserID: s.UserID, Name: s.Name, Roles: s.Roles}
}

func agentPersonOf(s signin.Session) agent.Person {
	return agent.Person{TenantID: s.TenantID, UserID: s.UserID, Name: s.Name, Roles: s.Roles}
}

func accessView(v store.View) access.View {
	return access.View{ID: v.ID, TenantID: v.TenantID, UserID: v.UserID, AgentID: v.AgentID}
}

// viewFor loads view id for the signed-in s. A view of another tenant is
// answered exactly as one that does not exist, expired or not: the same
// error, so the same status and words; nothing about it is read further.
func (h *Handler) viewFor(ctx context.Context, id string, s signin.Session) (store.View, error) {
	v, err := h.loadView(ctx, id)
	switch {
	case errors.Is(err, ErrExpired):
		if tenant, terr := h.store.ViewTenant(ctx, id); terr != nil || tenant == "" || tenant != s.TenantID {
			return store.View{}, fmt.Errorf("view %.140q: %w", id, ErrNotFound)
		}
		return store.View{}, err
	case err != nil:
		return store.View{}, err
	case s.TenantID == "" || v.TenantID != s.TenantID:
		return store.View{}, fmt.Errorf("view %.140q: %w", id, ErrNotFound)
	}
	return v, nil
}

// refusal turns an access answer into the page's error: another tenant's
// view is "no such view", a refusal keeps its words.
func refusal(err error) error {
	switch {
	case errors.Is(err, access.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, access.ErrDenied), errors.Is(err, access.ErrUnavailable):
		return err
	}
	return fmt.Errorf("viewpage: access check: %w", err)
}
