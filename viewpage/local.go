package viewpage

import (
	"cmp"
	"errors"
	"net/http"
	"net/url"

	"teamsbot/access"
	"teamsbot/internal/web"
	"teamsbot/signin"
	"teamsbot/store"
)

// In local mode (the local development sign-in, on loopback) a view link
// leads to the sign-in of the person who may open it, and a refusal says
// whom to sign in as. Anyone who reaches the local sign-in can sign in as
// each of the local people in turn and try a view, so naming which of them
// may open it tells nothing new; a view of anyone else (ids typed into the
// form, another tenant) is not named, and outside local mode nothing here
// applies: a view of another tenant answers exactly as an unknown one.

// localOwner returns the local person to sign in as to open view id: the
// person the run was for when they are one of the local people, or, for a
// run without a person in the local tenant, one of its agent readers. It
// answers only a request the local sign-in would take (signin.LocalRequest),
// and never for an unknown, expired or revoked view.
func (h *Handler) localOwner(r *http.Request, id string) (signin.LocalPerson, store.View, bool) {
	if !h.signin.LocalRequest(r) {
		return signin.LocalPerson{}, store.View{}, false
	}
	v, err := h.loadView(r.Context(), id)
	if err != nil || v.TenantID != signin.LocalTenant {
		return signin.LocalPerson{}, store.View{}, false
	}
	if v.UserID == "" {
		p := signin.LocalReader()
		return p, v, p.UserID != ""
	}
	p, ok := signin.LocalPersonOf(v.TenantID, v.UserID)
	return p, v, ok
}

// signInFor is where a person who is not signed in goes to open view id:
// the sign-in, back to the view, with the view's local person selected in
// local mode.
func (h *Handler) signInFor(r *http.Request, id string) string {
	ret := "/mcp-apps/" + url.PathEscape(id)
	if p, _, ok := h.localOwner(r, id); ok {
		return h.signin.SignInAsURL(ret, p.UserID)
	}
	return h.signin.SignInURL(ret)
}

// localRefusal is the page's answer when s may not open view id (err, no
// such view or a refusal). Outside local mode it is err, unchanged. In
// local mode the page offers "Sign in as someone else", back to the view;
// when a local person may open the view, the page names them and the
// sign-in has them selected.
func (h *Handler) localRefusal(r *http.Request, id string, s signin.Session, err error) error {
	if !h.signin.LocalRequest(r) || !(errors.Is(err, ErrNotFound) || errors.Is(err, access.ErrDenied)) {
		return err
	}
	we := Classify(err)
	if we == nil {
		return err
	}
	out := *we
	ret := "/mcp-apps/" + url.PathEscape(id)
	out.Link = &web.Link{Href: h.signin.SignInURL(ret), Text: "Sign in as someone else"}
	p, v, ok := h.localOwner(r, id)
	if !ok {
		return &out
	}
	out.Link.Href = h.signin.SignInAsURL(ret, p.UserID)
	if s.TenantID == v.TenantID && s.UserID == p.UserID {
		// The right person, short of a role: the refusal says which, and
		// signing in again as them gives the roles of the list.
		return &out
	}
	you := cmp.Or(s.Name, s.UserID)
	if s.TenantID != v.TenantID {
		you += " of another tenant (" + s.TenantID + ")"
	}
	out.Status = http.StatusForbidden
	if v.UserID == "" {
		out.Heading = "This view is for the tenant's agent readers"
		out.Message = "This view comes from a run without a person: the agent readers of its tenant (the agents.read role) can open it, and you are signed in as " +
			you + ". Sign in as someone else: " + p.Name + ", an agent reader, is selected there for you."
		return &out
	}
	out.Heading = "This view is " + p.Name + "'s"
	out.Message = "Only " + p.Name + ", the person the agent answered, can open this view, and you are signed in as " +
		you + ". Sign in as someone else: " + p.Name + " is selected there for you."
	return &out
}
