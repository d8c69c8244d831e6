package mcpapps

import (
	"slices"
	"strings"
)

// connectingDirectives are the directives of a view's CSP whose sources the
// document makes network connections to: it loads scripts, styles, images,
// fonts and media from them, connects to them and frames them. base-uri
// names no connection (a <base> only changes how URLs resolve), and
// worker-src holds only the document's fixed sources.
var connectingDirectives = []string{"script-src", "style-src", "img-src", "font-src", "media-src", "connect-src", "frame-src"}

// ConnectionAllowlist returns the value of the Connection-Allowlist header
// a view document is served with, given the CSP header it is served under
// (as BuildCSP made it): the view's own origin (response-origin) and every
// https:// origin its server declared for something the view loads,
// connects to or frames, and nothing else.
//
// CSP governs requests by kind and has no directive for some ways out of a
// document: in Chromium an RTCPeerConnection sends its TURN username (and
// whatever a script put in it) to any TURN server, and <link
// rel=preconnect>, <link rel=dns-prefetch> or a blocked frame still look up
// and open a connection to a host name a script chose. Connection
// Allowlists (https://wicg.github.io/connection-allowlists/, in Chromium
// since version 152; Firefox and Safari have none) check every connection a
// document starts against one list, WebRTC included: a document with the
// header and without ";webrtc=allow" can make no peer connection at all,
// and a list like this one leaves it exactly the origins its CSP allows.
//
// The list is a Structured Field inner list (RFC 9651) of URL patterns: an
// origin without a path matches every path on it, and "https://*.host"
// every name below host, as the CSP source does. Only sources that are
// origins by BuildCSP's grammar are taken (each is checked again), so
// nothing in a stored policy can add a quote, a parenthesis or another
// parameter. Keywords and the fixed scheme sources (data:, blob:) name no
// connection and are left out.
func ConnectionAllowlist(csp string) string {
	var origins []string
	for d := range strings.SplitSeq(csp, ";") {
		fields := strings.Fields(d)
		if len(fields) < 2 || !slices.Contains(connectingDirectives, strings.ToLower(fields[0])) {
			continue
		}
		for _, src := range fields[1:] {
			if !strings.HasPrefix(strings.ToLower(src), "https://") {
				continue
			}
			if o, reason := parseOrigin(src); reason == "" {
				origins = append(origins, o)
			}
		}
	}
	slices.Sort(origins)
	origins = slices.Compact(origins)
	var b strings.Builder
	b.WriteString("(response-origin")
	for _, o := range origins {
		b.WriteString(` "`)
		b.WriteString(o)
		b.WriteByte('"')
	}
	b.WriteByte(')')
	return b.String()
}
