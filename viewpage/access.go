package viewpage

import (
	"context"
	"errors"
	"fmt"
	"net/http"

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

// validID reports whether id could be a view id; anything else is 404
// without touching the store.
func validID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// loadView returns the view id, or an error wrapping ErrNotFound (unknown)
// or ErrExpired.
func (h *Handler) loadView(ctx context.Context, id string) (store.View, error) {
	if !validID(id) {
		return store.View{}, fmt.Errorf("view %.140q: %w", id, ErrNotFound)
	}
	v, err := h.store.View(ctx, id)
	switch {
	case isExpired(err):
		return store.View{}, fmt.Errorf("view %s: %w: %w", id, ErrExpired, err)
	case errors.Is(err, store.ErrNotFound):
		return store.View{}, fmt.Errorf("view %s: %w: %w", id, ErrNotFound, err)
	case err != nil:
		return store.View{}, fmt.Errorf("view %s: %w", id, err)
	}
	if v.Expired(h.now()) {
		return store.View{}, fmt.Errorf("view %s: %w", id, ErrExpired)
	}
	return v, nil
}

// session returns the signed-in person or an error wrapping ErrNoSession.
func (h *Handler) session(r *http.Request) (signin.Session, error) {
	s, err := h.signin.Session(r)
	if err != nil {
		if errors.Is(err, signin.ErrNoSession) {
			return signin.Session{}, fmt.Errorf("%w: %w", ErrNoSession, err)
		}
		return signin.Session{}, fmt.Errorf("viewpage: session: %w", err)
	}
	return s, nil
}
