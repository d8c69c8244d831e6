package cards

import (
	"net/url"
	"strings"
)

// ViewURL returns the address of a view's page, {publicBaseURL}/mcp-apps/{id},
// and true, when an Open button may point there: the base must be an
// absolute https:// URL with a host, and no user name, query or fragment. Any
// other base (http://, a typo, "https:" without a host) gives "", false, and
// the card tells the person to open the view from the web console instead.
//
// The id is path-escaped, so it cannot add path segments, a query or another
// host; ids that would still move the path ("", ".", "..") give false.
func ViewURL(publicBaseURL, id string) (string, bool) {
	base, ok := openBase(publicBaseURL)
	if !ok || id == "" || id == "." || id == ".." {
		return "", false
	}
	return base + "/mcp-apps/" + url.PathEscape(id), true
}

// openBase returns the base URL in the form ViewURL appends to (scheme,
// host and path without trailing slashes), or false when buttons must not
// be shown.
func openBase(publicBaseURL string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(publicBaseURL))
	if err != nil || !strings.EqualFold(u.Scheme, "https") || u.Opaque != "" {
		return "", false
	}
	if u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", false
	}
	return "https://" + u.Host + strings.TrimRight(u.EscapedPath(), "/"), true
}
