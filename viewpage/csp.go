package viewpage

import (
	"slices"
	"strings"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/teamsjs"
	"teamsbot/internal/web"
)

// The Content-Security-Policy of each document the package serves.

// trustedTypes makes the browser refuse any string written into an HTML
// or script sink (innerHTML, eval and the like) on the page and the proxy:
// their scripts put what views say on the page as text only, and this
// keeps it so.
const trustedTypes = "require-trusted-types-for 'script'; trusted-types 'none'"

// blockWebRTC is the CSP3 directive that forbids peer connections.
const blockWebRTC = "webrtc 'block'"

// buildPolicies fixes the CSP of the page, the Teams sign-in shell and the
// proxy, all of which are the same for every request.
func (h *Handler) buildPolicies() {
	// Without a separate sandbox origin the frames come from wherever the
	// page was opened ('self'), which need not be the public base URL's
	// host name (127.0.0.1 for localhost, an internal name behind a proxy).
	frameSrc := h.FrameSource()

	// The page: its own script and style only, talks to its own API,
	// frames only the sandbox origin, and is framed by nobody; in Teams
	// mode it runs teams-js (embedded, allowed by hash like the others)
	// and only Teams and the Microsoft 365 hosts may frame it.
	scripts := web.CSPHash(bridgeJS) + " " + web.CSPHash(pageJS)
	ancestors := "frame-ancestors 'none'"
	if h.teamsHosts != nil {
		scripts += " " + teamsjs.Hash() + " " + web.CSPHash(teamsPageJS)
		ancestors = "frame-ancestors " + h.teamsSources
	}
	h.pageCSP = "default-src 'none'; " +
		"script-src " + scripts + "; " +
		"style-src " + web.CSPHash(pageCSS) + "; " +
		"img-src 'self' data:; " +
		"connect-src 'self'; " +
		"frame-src " + frameSrc + "; " +
		"base-uri 'none'; form-action 'none'; object-src 'none'; " +
		trustedTypes + "; " + ancestors
	if h.teamsHosts != nil {
		// The shell frames nothing and talks only to the sign-in API.
		h.signInCSP = "default-src 'none'; " +
			"script-src " + teamsjs.Hash() + " " + web.CSPHash(teamsPageJS) + "; " +
			"style-src " + web.CSPHash(pageCSS) + "; " +
			"connect-src 'self'; " +
			"base-uri 'none'; form-action 'none'; object-src 'none'; " +
			trustedTypes + "; " + ancestors
	}

	// The proxy: its own script and style only; it loads nothing, connects
	// nowhere and frames only view documents of the sandbox origin.
	// Only the page's origin may frame it.
	proxyCSP := "default-src 'none'; " +
		"script-src " + web.CSPHash(proxyJS) + "; " +
		"style-src " + web.CSPHash(proxyCSS) + "; " +
		"frame-src " + frameSrc + "; " +
		"base-uri 'none'; form-action 'none'; object-src 'none'; " + blockWebRTC + "; " + trustedTypes
	if h.sameOrigin() {
		h.proxyCSP = proxyCSP + "; frame-ancestors 'self'"
	} else {
		h.proxyCSP = proxyCSP + "; " + frameAncestors(h.publicOrigin)
	}
	if h.teamsHosts != nil {
		// frame-ancestors names every ancestor up to the top, not only
		// the parent: inside Teams the proxy's ancestors are the page and
		// Teams itself, so Teams' hosts join the page's origin here and
		// nowhere else. Its parent is still only ever the page: the frame
		// token comes from the page's API, and the view document keeps no
		// frame-ancestors at all (see viewAncestors).
		h.proxyCSP += " " + h.teamsSources
	}
}

// frameAncestors is the frame-ancestors directive that lets exactly the
// given origins frame a document ('none' for no origin). The origins are
// typed values, checked when the configuration was read, so nothing a
// server declared can reach this directive.
func frameAncestors(origins ...netaddr.Origin) string {
	srcs := make([]string, 0, len(origins))
	for _, o := range origins {
		if !o.IsZero() {
			srcs = append(srcs, o.String())
		}
	}
	slices.Sort(srcs)
	srcs = slices.Compact(srcs)
	if len(srcs) == 0 {
		return "frame-ancestors 'none'"
	}
	return "frame-ancestors " + strings.Join(srcs, " ")
}

// FrameSource is the CSP source expression of the frame documents: 'self'
// when they share the page's origin, else the sandbox origin. Another page
// that frames views (the playground) allows exactly this in frame-src.
func (h *Handler) FrameSource() string {
	if h.sameOrigin() {
		return "'self'"
	}
	return h.sandboxOrigin.String()
}
