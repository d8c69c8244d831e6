package cards

import (
	"net/url"

	"teamsbot/internal/netaddr"
)

// ViewURL returns the address of a view's page, {publicBaseURL}/mcp-apps/{id},
// and true, when an Open button may point there: the base must be an
// https:// origin (Teams opens nothing else, and the product shows the
// button only then). Any other base gives "", false, and the card says
// that the view can't be opened from Teams until an admin gives the
// service an https address.
//
// The id is path-escaped, so it cannot add path segments, a query or another
// host; ids that would still move the path ("", ".", "..") give false.
func ViewURL(publicBaseURL netaddr.Origin, id string) (string, bool) {
	if !publicBaseURL.HTTPS() || id == "" || id == "." || id == ".." {
		return "", false
	}
	return publicBaseURL.URL("/mcp-apps/" + url.PathEscape(id)), true
}
