package signin

import (
	"log/slog"
	"net/http"
	"strings"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"

	"github.com/labstack/echo/v4"
)

// Defaults of the local development sign-in form.
const (
	LocalDefaultTenant = "local-tenant"
	LocalDefaultUser   = "local-user"
	LocalDefaultName   = "Local Developer"
	LocalDefaultRoles  = "agents.read agents.run"
)

// localForm is what the local sign-in form shows and posts.
type localForm struct {
	Name, Tenant, User, Roles string
}

// renderLocalForm shows the local development sign-in form.
func (s *Service) renderLocalForm(c echo.Context, ret string) error {
	return s.render(c, http.StatusOK, "local.html", pageData{
		Title:  "Sign in (development)",
		Return: ret,
		Form: localForm{
			Name:   LocalDefaultName,
			Tenant: LocalDefaultTenant,
			User:   LocalDefaultUser,
			Roles:  LocalDefaultRoles,
		},
	})
}

// handleLocal signs a person in with what they typed: there is no password,
// which is why this exists only on loopback.
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
	tenant := strings.TrimSpace(r.PostFormValue("tenant"))
	user := strings.TrimSpace(r.PostFormValue("user"))
	if !idPattern.MatchString(tenant) || !idPattern.MatchString(user) {
		return web.NewError(http.StatusBadRequest,
			"Tenant id and user id must be 1 to 128 letters, digits, dots, dashes or underscores, starting with a letter or digit.")
	}
	p := sessionPayload{
		TID:   tenant,
		OID:   user,
		Name:  clip(r.PostFormValue("name"), 256),
		Local: true,
	}
	p.UPN = p.OID
	for _, role := range strings.FieldsFunc(r.PostFormValue("roles"), func(r rune) bool { return r == ',' || r == ' ' }) {
		if len(p.Roles) == 64 {
			break
		}
		p.Roles = append(p.Roles, clip(role, 128))
	}
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
