package signin

import (
	"net/url"
	"strings"
)

// maxReturnLen bounds the return path kept in the sign-in cookie.
const maxReturnLen = 2048

// LocalPath returns p when it is safe to redirect to after sign-in, and "/"
// otherwise. Safe means a path on this service: it starts with a single "/",
// has no scheme, host, backslash, control character or dot segment, and stays
// so however many times it is percent-decoded. Browsers read "//host" and
// "/\host" as another site, and a later hop that decodes "/%2F%2Fhost" once
// more would too; refusing all of them closes the open redirect.
func LocalPath(p string) string {
	if !isLocalPath(p) {
		return "/"
	}
	return p
}

func isLocalPath(p string) bool {
	if p == "" || len(p) > maxReturnLen {
		return false
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return false
	}
	// Check the raw form and every decoded form of the path (not the
	// query, which a browser never reads as a host).
	s := p
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	for range 4 {
		if !plainLocal(s) {
			return false
		}
		d, err := url.PathUnescape(s)
		if err != nil {
			return false
		}
		if d == s {
			break
		}
		s = d
	}
	// Control characters anywhere (query included) could split a header or
	// be dropped by a browser, turning "/\t/evil" into "//evil".
	if hasControl(p) {
		return false
	}
	// Coming back to the sign-in routes themselves would loop.
	switch u.Path {
	case "/signin", "/signin/callback", "/signin/local", "/signout":
		return false
	}
	return true
}

// plainLocal checks one form of the path.
func plainLocal(s string) bool {
	if len(s) == 0 || s[0] != '/' {
		return false
	}
	if len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	if strings.ContainsRune(s, '\\') || hasControl(s) {
		return false
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' || r == '\ufeff' {
			return true
		}
	}
	return false
}
