package signin

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"teamsbot/internal/netaddr"
)

// LocalTenant is the tenant of the local people: the one the playground
// sends in its activities and the one the local development sign-in
// pre-fills, so that a view made in the playground opens after the sign-in.
// It has the shape of an Entra tenant id, as the bot expects.
const LocalTenant = "0b2d9c7e-4f1a-4c3b-9e8d-7a6b5c4d3e2f"

// LocalDefaultRoles are the app roles of someone typed into the local
// sign-in form rather than picked from the list.
const LocalDefaultRoles = "agents.read agents.run"

// LocalPerson is one of the people of LocalTenant that the local
// development sign-in lists and the playground offers: fictional people
// with Entra-like object ids, so that nobody has to invent ids to try the
// service.
type LocalPerson struct {
	// Name is the display name, sent as from.name and kept in the session.
	Name string
	// UserID is the object id, sent as from.aadObjectId.
	UserID string
	// Roles are the app roles the sign-in gives them, as an Entra ID token
	// would carry them.
	Roles []string
	// About says in a few words what to try as them.
	About string
}

// Admin reports whether the person holds agents.admin, which opens the
// admin console.
func (p LocalPerson) Admin() bool { return slices.Contains(p.Roles, "agents.admin") }

// Reader reports whether the person holds agents.read, which opens the
// views of runs without a person.
func (p LocalPerson) Reader() bool { return slices.Contains(p.Roles, "agents.read") }

// RoleList is the roles separated by spaces, as the form takes them.
func (p LocalPerson) RoleList() string { return strings.Join(p.Roles, " ") }

// LocalPeople returns the local people, a fresh slice on every call. The
// first is the one the sign-in and the playground start with.
func LocalPeople() []LocalPerson {
	return []LocalPerson{
		{
			Name: "Megan Bowen", UserID: "5f2c1c0e-8a34-4b8e-9a1d-3c6e2b7d9f01",
			Roles: []string{"agents.read", "agents.run"},
			About: "asks the bot; opens her own views and those of runs without a person",
		},
		{
			Name: "Alex Wilber", UserID: "a7d3e5f1-2b4c-4d6e-8f90-1a2b3c4d5e6f",
			Roles: []string{"agents.read", "agents.run"},
			About: "another person of the tenant: Megan's views are not his",
		},
		{
			Name: "Adele Vance", UserID: "c4e1b2a3-6d5f-4e7a-9b8c-0d1e2f3a4b5c",
			Roles: []string{"agents.admin", "agents.read", "agents.run"},
			About: "the tenant admin: opens the admin console at /admin",
		},
	}
}

// LocalPersonOf returns the local person with this tenant and user id.
func LocalPersonOf(tenantID, userID string) (LocalPerson, bool) {
	if tenantID != LocalTenant {
		return LocalPerson{}, false
	}
	for _, p := range LocalPeople() {
		if p.UserID == userID {
			return p, true
		}
	}
	return LocalPerson{}, false
}

// LocalAdmin returns the first local person who holds agents.admin: the
// one to sign in as for the admin console.
func LocalAdmin() LocalPerson {
	people := LocalPeople()
	if i := slices.IndexFunc(people, LocalPerson.Admin); i >= 0 {
		return people[i]
	}
	return LocalPerson{}
}

// LocalReader returns the first local person who holds agents.read: one
// of the tenant's agent readers, who may open the views of a run without a
// person.
func LocalReader() LocalPerson {
	people := LocalPeople()
	if i := slices.IndexFunc(people, LocalPerson.Reader); i >= 0 {
		return people[i]
	}
	return LocalPerson{}
}

// SignInAsURL is SignInURL with the local person userID selected on the
// local sign-in form. Outside the local sign-in, or for an id that is not
// a local person's, it is SignInURL: an Entra sign-in is never told whom
// to expect.
func (s *Service) SignInAsURL(returnPath, userID string) string {
	if _, ok := LocalPersonOf(LocalTenant, userID); !ok || !s.Local() {
		return s.SignInURL(returnPath)
	}
	return s.SignInURL(returnPath) + "&as=" + url.QueryEscape(userID)
}

// LocalRequest reports whether r is a request the local development
// sign-in would take: the local sign-in is on, and r names a loopback
// host (not a name rebound to 127.0.0.1) and came through no proxy or
// tunnel. Only to such a request may a page say what the local sign-in
// already lets anyone find out, such as which of the local people a view
// belongs to.
func (s *Service) LocalRequest(r *http.Request) bool {
	return s.Local() && netaddr.IsLoopbackHostPort(r.Host) && !proxied(r)
}
