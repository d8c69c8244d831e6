package signin

import (
	"cmp"
	"log/slog"
	"net/http"
	"strings"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"

	"github.com/labstack/echo/v4"
)

// localForm is what the local sign-in form shows and posts: the local
// people to pick from, one of them selected, and the fields for someone
// else.
type localForm struct {
	People []formPerson
	// Other selects "someone else" instead of a listed person.
	Other bool
	// Current is who is signed in now, if anyone.
	Current                   string
	Name, Tenant, User, Roles string
	// LocalTenant is the tenant of the listed people.
	LocalTenant string
}

// formPerson is a local person on the form.
type formPerson struct {
	LocalPerson
	Checked bool
}

// renderLocalForm shows the local development sign-in form, with the
// local person whose user id is as selected (the first one when as names
// nobody of the list).
func (s *Service) renderLocalForm(c echo.Context, ret, as string) error {
	f := localForm{Tenant: LocalTenant, Roles: LocalDefaultRoles, LocalTenant: LocalTenant}
	if _, ok := LocalPersonOf(LocalTenant, as); !ok {
		as = LocalPeople()[0].UserID
	}
	for _, p := range LocalPeople() {
		f.People = append(f.People, formPerson{LocalPerson: p, Checked: p.UserID == as})
	}
	if cur, err := s.Session(c.Request()); err == nil {
		f.Current = cmp.Or(cur.Name, cur.UserID)
		if cur.TenantID != LocalTenant {
			f.Current += " (tenant " + cur.TenantID + ")"
		}
	}
	c.Response().Header().Set("Content-Security-Policy", s.pages.localCSP)
	return s.render(c, http.StatusOK, "local.html", pageData{
		Title:  "Sign in (development)",
		Return: ret,
		Form:   f,
	})
}

// handleLocal signs a person in: one of the local people picked from the
// list (person=their user id), or whoever was typed into the fields
// (person=other, or no person at all, as the playground posts). There is
// no password, which is why this exists only on loopback.
func (s *Service) handleLocal(c echo.Context) error {
	if err := s.cop.Check(c.Request()); err != nil {
		return errCrossSite
	}
	if !netaddr.IsLoopbackHostPort(c.Request().Host) {
		return errNotLoopbackHost
	}
	if proxied(c.Request()) {
		return errProxied
	}
	r := c.Request()
	ret := LocalPath(r.PostFormValue("return"))
	c.Set(returnKey, ret)
	var p sessionPayload
	if pick := r.PostFormValue("person"); pick != "" && pick != "other" {
		lp, ok := LocalPersonOf(LocalTenant, pick)
		if !ok {
			return web.NewError(http.StatusBadRequest, "There is no such person in the list. Pick one of the people shown, or someone else.")
		}
		p = sessionPayload{TID: LocalTenant, OID: lp.UserID, Name: lp.Name, Roles: lp.Roles, Local: true}
	} else {
		tenant := strings.TrimSpace(r.PostFormValue("tenant"))
		user := strings.TrimSpace(r.PostFormValue("user"))
		if !idPattern.MatchString(tenant) || !idPattern.MatchString(user) {
			return web.NewError(http.StatusBadRequest,
				"Tenant id and user id must be 1 to 128 letters, digits, dots, dashes or underscores, starting with a letter or digit.")
		}
		p = sessionPayload{TID: tenant, OID: user, Name: clip(r.PostFormValue("name"), 256), Local: true}
		for _, role := range strings.FieldsFunc(r.PostFormValue("roles"), func(r rune) bool { return r == ',' || r == ' ' }) {
			if len(p.Roles) == 64 {
				break
			}
			p.Roles = append(p.Roles, clip(role, 128))
		}
	}
	p.UPN = p.OID
	if _, err := s.startSession(c, p); err != nil {
		return err
	}
	s.log.Info("signed in (local development)", slog.String("tenant", p.TID), slog.String("user", p.OID))
	return c.Redirect(http.StatusSeeOther, ret)
}

// errNotLoopbackHost refuses the local sign-in under a name that is not a
// loopback one. A web page whose host name an attacker re-points at
// 127.0.0.1 (DNS rebinding) reaches the service as the same origin, so the
// cross-origin check passes; its Host header still carries the attacker's
// name, and without a session it can run nothing.
var errNotLoopbackHost = web.NewError(http.StatusForbidden,
	"The development sign-in answers only at a loopback address such as http://localhost or http://127.0.0.1.")

// proxied reports whether a request came through a proxy or a tunnel,
// which say so in Forwarded or X-Forwarded-* headers: someone other than
// this machine's user may have sent it.
func proxied(r *http.Request) bool {
	for name := range r.Header {
		if name == "Forwarded" || strings.HasPrefix(name, "X-Forwarded-") {
			return true
		}
	}
	return false
}

// errProxied refuses the local sign-in through a proxy or a tunnel.
var errProxied = web.NewError(http.StatusForbidden,
	"The development sign-in is refused through a proxy or a tunnel: it has no password, so it answers only requests made on this machine.")

// errCrossSite refuses a state-changing request sent from another site.
var errCrossSite = web.NewError(http.StatusForbidden, "This request came from another site and was refused.")

// handleSignOutPage shows a button that posts to /signout: signing out
// changes state, so it never happens on a GET.
func (s *Service) handleSignOutPage(c echo.Context) error {
	return s.render(c, http.StatusOK, "signout.html", pageData{Title: "Sign out"})
}

// handleSignOut ends the session.
func (s *Service) handleSignOut(c echo.Context) error {
	if err := s.cop.Check(c.Request()); err != nil {
		return errCrossSite
	}
	c.SetCookie(s.cookie(s.sessionCookie, "", -1))
	c.SetCookie(s.cookie(s.flowCookie, "", -1))
	return c.Redirect(http.StatusSeeOther, "/signed-out")
}

// handleSignedOut is where sign-out lands.
func (s *Service) handleSignedOut(c echo.Context) error {
	return s.render(c, http.StatusOK, "signedout.html", pageData{Title: "Signed out"})
}
