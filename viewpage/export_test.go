package viewpage

import "teamsbot/internal/netaddr"

// SetViewAncestors replaces the origins a view document names in
// frame-ancestors, so a test can show which origin Chromium checks for the
// opaque-origin proxy frame.
func SetViewAncestors(h *Handler, origins []string) {
	h.viewAncestors = nil
	for _, o := range origins {
		h.viewAncestors = append(h.viewAncestors, netaddr.MustParseOrigin(o))
	}
}

// Unguard turns layers of the view documents' protection off, so that a
// test can show what each one closes: the guard script, the
// Connection-Allowlist header, and the view's stored
// CSP (only its sandbox directive is left). Set it before the first
// request.
func Unguard(h *Handler, script, allowlist, csp bool) {
	h.unguarded.script, h.unguarded.allowlist, h.unguarded.csp = script, allowlist, csp
}
