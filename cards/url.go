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
	return pageURL(publicBaseURL, "/mcp-apps/", id)
}

// ConnectURL is like ViewURL for a Connect button: the address of the page
// that connects a person to an MCP server for a run,
// {publicBaseURL}/mcp-auth/connect/{id}, and true only for an https://
// base and an id that stays one path segment. Without it the Connect card
// has no button and says that the server can't be connected from Teams
// until an admin gives the service an https address.
func ConnectURL(publicBaseURL netaddr.Origin, id string) (string, bool) {
	return pageURL(publicBaseURL, "/mcp-auth/connect/", id)
}

// pageURL is prefix and the escaped id under an https:// base, or "", false.
func pageURL(base netaddr.Origin, prefix, id string) (string, bool) {
	if !base.HTTPS() || id == "" || id == "." || id == ".." {
		return "", false
	}
	return base.URL(prefix + url.PathEscape(id)), true
}

// connectURL is ConnectURL, and in local mode (Options.Local) the same
// address on a loopback http base, for the playground.
func connectURL(o Options, id string) (string, bool) {
	if o.Local && o.PublicBaseURL.Loopback() && !o.PublicBaseURL.HTTPS() {
		if id == "" || id == "." || id == ".." {
			return "", false
		}
		return o.PublicBaseURL.URL("/mcp-auth/connect/" + url.PathEscape(id)), true
	}
	return ConnectURL(o.PublicBaseURL, id)
}
