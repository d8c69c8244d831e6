// Package textclip shortens text for logs, audit records, errors and
// cards without ever splitting a UTF-8 character, so that what it returns
// is still valid UTF-8 wherever it is shown or stored. It imports only the
// standard library, so that any package may use it.
package textclip

import "unicode/utf8"

// Ellipsis marks text that was cut.
const Ellipsis = "…"

// Clip returns s when it has at most n bytes; otherwise its longest prefix
// of at most n bytes that ends on a character boundary, followed by
// Ellipsis. A negative n counts as zero.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Prefix(s, n) + Ellipsis
}

// Prefix returns the longest prefix of s of at most n bytes that ends on a
// character boundary, with no mark.
func Prefix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
