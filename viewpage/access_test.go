package viewpage

import (
	"context"
	"errors"
	"testing"

	"teamsbot/signin"
	"teamsbot/store"
)

// "Only the person the run was for can open it. A view from a run that had
// no person (a trigger, for example) can be opened by the tenant's agent
// readers." And nobody from another tenant, whatever their roles.
func TestOwnerRule(t *testing.T) {
	mine := store.View{ID: "v1", TenantID: "t1", UserID: "alice"}
	noPerson := store.View{ID: "v2", TenantID: "t1"}
	cases := []struct {
		name       string
		s          signin.Session
		v          store.View
		read, call bool
	}{
		{"owner, reader and runner", signin.Session{TenantID: "t1", UserID: "alice", Roles: []string{RoleAgentsRead, RoleAgentsRun}}, mine, true, true},
		// "It needs agents.read" and "It needs agents.run": the owner too.
		{"owner without roles", signin.Session{TenantID: "t1", UserID: "alice"}, mine, false, false},
		{"owner, reader only", signin.Session{TenantID: "t1", UserID: "alice", Roles: []string{RoleAgentsRead}}, mine, true, false},
		{"owner, runner only", signin.Session{TenantID: "t1", UserID: "alice", Roles: []string{RoleAgentsRun}}, mine, false, true},
		{"owner, admin", signin.Session{TenantID: "t1", UserID: "alice", Roles: []string{RoleAgentsAdmin}}, mine, true, true},
		{"same user id, other tenant", signin.Session{TenantID: "t2", UserID: "alice", Roles: []string{RoleAgentsAdmin}}, mine, false, false},
		{"other person, same tenant", signin.Session{TenantID: "t1", UserID: "bob", Roles: []string{RoleAgentsRead, RoleAgentsRun}}, mine, false, false},
		{"tenant admin is not the owner", signin.Session{TenantID: "t1", UserID: "carol", Roles: []string{RoleAgentsAdmin}}, mine, false, false},
		{"empty session", signin.Session{}, mine, false, false},
		{"no-person view, reader", signin.Session{TenantID: "t1", UserID: "bob", Roles: []string{RoleAgentsRead}}, noPerson, true, false},
		{"no-person view, reader and runner", signin.Session{TenantID: "t1", UserID: "bob", Roles: []string{RoleAgentsRead, RoleAgentsRun}}, noPerson, true, true},
		{"no-person view, admin", signin.Session{TenantID: "t1", UserID: "bob", Roles: []string{RoleAgentsAdmin}}, noPerson, true, true},
		{"no-person view, no role", signin.Session{TenantID: "t1", UserID: "bob"}, noPerson, false, false},
		{"no-person view, reader of another tenant", signin.Session{TenantID: "t2", UserID: "bob", Roles: []string{RoleAgentsRead, RoleAgentsAdmin}}, noPerson, false, false},
		{"no-person view, empty user id in session", signin.Session{TenantID: "t1", Roles: []string{RoleAgentsRead}}, noPerson, true, false},
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := OwnerRule{}.CanRead(ctx, c.s, c.v)
			if (err == nil) != c.read {
				t.Errorf("CanRead = %v, want allowed=%v", err, c.read)
			}
			if err != nil && !errors.Is(err, ErrForbidden) {
				t.Errorf("CanRead refusal %v does not wrap ErrForbidden", err)
			}
			err = OwnerRule{}.CanCall(ctx, c.s, c.v, "refresh_sales")
			if (err == nil) != c.call {
				t.Errorf("CanCall = %v, want allowed=%v", err, c.call)
			}
			if err != nil && !errors.Is(err, ErrForbidden) {
				t.Errorf("CanCall refusal %v does not wrap ErrForbidden", err)
			}
		})
	}
}
