package viewpage

import (
	"context"
	"slices"
	"strings"

	"teamsbot/internal/fluent"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/teamsjs"
	"teamsbot/internal/web/csp"
	"teamsbot/store"
)

// The Content-Security-Policy of each document the package serves: the
// page, the Teams sign-in shell and the proxy, fixed when the handler is
// built, and each view document's, from the policy stored with the view.
//
// The page, the shell and the proxy also carry Trusted Types
// (require-trusted-types-for 'script'; trusted-types 'none'): the browser
// refuses any string written into an HTML or script sink (innerHTML, eval
// and the like), since their scripts put what views say on the page as
// text only, and this keeps it so.

// buildPolicies fixes the CSP of the page, the Teams sign-in shell and the
// proxy, all of which are the same for every request.
func (h *Handler) buildPolicies() {
	// Without a separate sandbox origin the frames come from wherever the
	// page was opened ('self'), which need not be the public base URL's
	// host name (127.0.0.1 for localhost, an internal name behind a proxy).
	frameSrc := h.FrameSource()

	// The page: its own scripts (the bridge, the questions' dialog, the
	// page's) and style only, talks to its own API, frames only the
	// sandbox origin, and is framed by nobody; in Teams mode it runs
	// teams-js (embedded, allowed by hash like the others) and only Teams
	// and the Microsoft 365 hosts may frame it.
	scripts := []string{csp.Hash(questionsJS), csp.Hash(pageJS)}
	var ancestors []string // 'none'
	if h.teamsHosts != nil {
		scripts = append(scripts, teamsjs.Hash(), csp.Hash(teamsPageJS))
		ancestors = h.teamsHosts
	}
	h.pageCSP = h.hostPagePolicy(scripts, []string{fluent.CSSHash(), csp.Hash(pageCSS)}, ancestors)
	if h.teamsHosts != nil {
		// The shell frames nothing and talks only to the sign-in API.
		h.signInCSP = csp.New().
			Add("default-src").
			Add("script-src", teamsjs.Hash(), csp.Hash(teamsPageJS)).
			Add("style-src", fluent.CSSHash(), csp.Hash(pageCSS)).
			Add("connect-src", csp.Self).
			Add("base-uri").Add("form-action").Add("object-src").
			Add("require-trusted-types-for", csp.Script).Add("trusted-types").
			Add("frame-ancestors", ancestors...).
			String()
	}

	// The proxy: its own script and style only; it loads nothing, connects
	// nowhere, makes no peer connection and frames only view documents of
	// the sandbox origin. Only the page's origin may frame it.
	proxyAncestors := originSources(h.publicOrigin)
	if h.sameOrigin() {
		proxyAncestors = []string{csp.Self}
	}
	if h.teamsHosts != nil {
		// frame-ancestors names every ancestor up to the top, not only
		// the parent: inside Teams the proxy's ancestors are the page and
		// Teams itself, so Teams' hosts join the page's origin here and
		// nowhere else. Its parent is still only ever the page: the frame
		// token comes from the page's API, and the view document keeps no
		// frame-ancestors at all (see viewAncestors).
		proxyAncestors = append(proxyAncestors, h.teamsHosts...)
	}
	h.proxyCSP = csp.New().
		Add("default-src").
		Add("script-src", csp.Hash(proxyJS)).
		Add("style-src", csp.Hash(proxyCSS)).
		Add("frame-src", frameSrc).
		Add("base-uri").Add("form-action").Add("object-src").
		Add("webrtc", csp.Block).
		Add("require-trusted-types-for", csp.Script).Add("trusted-types").
		Add("frame-ancestors", proxyAncestors...).
		String()
}

// HostPagePolicy is the CSP of a page of the service that shows views
// inline with BridgeScript (the playground), as the view page's own is
// made: the bridge and the page's own scripts (given as hash sources) and
// its styles (internal/fluent's and its own, say), its own API, frames only from where the frame documents
// come (the sandbox origin, or 'self'), framed by nobody, and Trusted
// Types. It panics if a script or a style is not a source expression.
func (h *Handler) HostPagePolicy(scripts []string, styles ...string) string {
	return h.hostPagePolicy(scripts, styles, nil)
}

// hostPagePolicy is HostPagePolicy with the hosts that may frame the page
// ('none' for none).
func (h *Handler) hostPagePolicy(scripts, styles []string, ancestors []string) string {
	return csp.New().
		Add("default-src").
		Add("script-src", append([]string{csp.Hash(bridgeJS)}, scripts...)...).
		Add("style-src", styles...).
		Add("img-src", csp.Self, csp.Data).
		Add("connect-src", csp.Self).
		Add("frame-src", h.FrameSource()).
		Add("base-uri").Add("form-action").Add("object-src").
		Add("require-trusted-types-for", csp.Script).Add("trusted-types").
		Add("frame-ancestors", ancestors...).
		String()
}

// viewPolicy returns the CSP a view document is served under, and the
// view's own part of it, from which its Connection-Allowlist is made.
//
// The view's own part is the policy the agent stored with the view
// (mcpapps.BuildCSP), read back with csp.Parse. A record without one, or
// with one that is not a valid policy, gets default-src 'none' rather
// than a guess, and the second is logged: the agent writes neither.
//
// The service's directives come first: of two directives of one name a
// browser keeps the first, so nothing in the stored policy can loosen
// them, and the builder drops a stored one that repeats them. The sandbox
// directive keeps the document in an opaque origin even if it is ever
// loaded outside our frames (a top-level window, another site's frame),
// so third-party HTML never runs with our origin. webrtc 'block' (CSP3)
// comes second. Chromium does not implement it yet (it logs the directive
// as unrecognized); the Connection-Allowlist and the guard close WebRTC
// there.
func (h *Handler) viewPolicy(ctx context.Context, v store.View) (policy, own string) {
	stored := csp.New().Add("default-src")
	if strings.TrimSpace(v.CSP) != "" {
		p, err := csp.Parse(v.CSP)
		switch {
		case err != nil:
			h.logger.ErrorContext(ctx, "the view's stored CSP is not a valid policy; it is served under default-src 'none'",
				"view", v.ID, "err", err)
		case p.String() != "":
			stored = p
		}
	}
	p := csp.New().Add("sandbox", strings.Fields(sandboxFor(v.Permissions.Forms))...)
	if h.viewAncestors != nil {
		p.Add("frame-ancestors", originSources(h.viewAncestors...)...)
	}
	if !h.unguarded.csp {
		p.Add("webrtc", csp.Block).Append(stored)
	}
	return p.String(), stored.String()
}

// originSources are the given origins as the sources of a directive that
// lets exactly them in, sorted, the zero Origin left out (none at all is
// 'none'). The origins are typed values, checked when the configuration
// was read, so nothing a server declared can reach the directive.
func originSources(origins ...netaddr.Origin) []string {
	srcs := make([]string, 0, len(origins))
	for _, o := range origins {
		if !o.IsZero() {
			srcs = append(srcs, o.String())
		}
	}
	slices.Sort(srcs)
	return srcs
}

// FrameSource is the CSP source expression of the frame documents: 'self'
// when they share the page's origin, else the sandbox origin. A page that
// frames views allows exactly this in frame-src (HostPagePolicy).
func (h *Handler) FrameSource() string {
	if h.sameOrigin() {
		return csp.Self
	}
	return h.sandboxOrigin.String()
}
