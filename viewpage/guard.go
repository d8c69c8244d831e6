package viewpage

import (
	"bytes"
	_ "embed"
)

//go:embed assets/guard.js
var guardJS string

// GuardScript is the guard every view document runs first (assets/guard.js):
// it makes WebRTC unusable in the view and in every frame the view makes,
// and reports a closed channel the view tried to the page. It is inserted
// into the view's HTML as served (see withGuard); the stored HTML and its
// SHA-256 stay exactly what the view's server sent.
func GuardScript() string { return guardJS }

// withGuard returns a view's HTML as it is served: the guard as an inline
// script where it runs before anything of the view's own and changes
// nothing of how the rest is parsed. That is right after the doctype: a
// script before it would put the document in quirks mode. A byte-order
// mark stays first, and comments (and bogus comments such as <?xml ...?>)
// before the doctype stay where they are. Without a doctype the document
// is in quirks mode anyway, and the guard goes before the first thing that
// is neither space nor a comment. The view's CSP always has
// 'unsafe-inline' for scripts (the MCP Apps default, which no declaration
// removes), so the guard runs under it; a <meta> CSP of the view's own
// comes after the guard and binds only what follows it.
func withGuard(html []byte) []byte {
	at := guardOffset(html)
	out := make([]byte, 0, len(html)+len(guardJS)+len("<script></script>"))
	out = append(out, html[:at]...)
	out = append(out, "<script>"...)
	out = append(out, guardJS...)
	out = append(out, "</script>"...)
	return append(out, html[at:]...)
}

// guardOffset is where withGuard inserts the guard: after the doctype, or
// where the doctype would have been.
func guardOffset(html []byte) int {
	i := 0
	if bytes.HasPrefix(html, []byte("\xef\xbb\xbf")) {
		i = 3
	}
	for {
		for i < len(html) && isHTMLSpace(html[i]) {
			i++
		}
		rest := html[i:]
		switch {
		case bytes.HasPrefix(rest, []byte("<!--")):
			end := commentEnd(rest)
			if end < 0 {
				// A comment to the end of the file: there is no doctype.
				return i
			}
			i += end
		case len(rest) >= 9 && bytes.EqualFold(rest[:9], []byte("<!doctype")):
			end := bytes.IndexByte(rest, '>')
			if end < 0 {
				return len(html)
			}
			return i + end + 1
		case bytes.HasPrefix(rest, []byte("<!")) || bytes.HasPrefix(rest, []byte("<?")):
			// A bogus comment ends at the first '>'.
			end := bytes.IndexByte(rest, '>')
			if end < 0 {
				return i
			}
			i += end + 1
		default:
			return i
		}
	}
}

// commentEnd returns the length of the comment that starts s ("<!--"), as
// the HTML tokenizer ends it ("-->", "--!>", or the abrupt "<!-->" and
// "<!--->"), or -1 when it runs to the end.
func commentEnd(s []byte) int {
	if bytes.HasPrefix(s, []byte("<!-->")) {
		return 5
	}
	if bytes.HasPrefix(s, []byte("<!--->")) {
		return 6
	}
	for j := 4; j < len(s); j++ {
		if bytes.HasPrefix(s[j:], []byte("-->")) {
			return j + 3
		}
		if bytes.HasPrefix(s[j:], []byte("--!>")) {
			return j + 4
		}
	}
	return -1
}

// isHTMLSpace reports whether c is ASCII whitespace as HTML defines it.
func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}
