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
