package mcpapps

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"teamsbot/internal/textclip"
	"teamsbot/internal/web/csp"
)

// DefaultCSP is the policy of a view whose server declared nothing (or only
// entries that were dropped). It is the MCP Apps specification's default,
//
//	default-src 'none'; script-src 'self' 'unsafe-inline';
//	style-src 'self' 'unsafe-inline'; img-src 'self' data:;
//	media-src 'self' data:; connect-src 'none'; object-src 'none'
//
// widened only by sources that stay inside the document, and with four
// directives that default-src does not cover, or covers more strictly than
// a single-file view needs:
//
//   - script-src adds 'unsafe-eval', blob: and data:. The document already
//     runs its own inline script, so evaluating a string (new Function, as
//     3D and charting libraries do) or running a script the view carries
//     inline as a data: URL or made itself as a blob: URL (a PDF renderer
//     loads its worker code so) gives it no power it lacks; none of them
//     loads anything from elsewhere. Without them real views draw nothing.
//   - img-src, font-src and media-src add blob:, and worker-src 'self'
//     blob: is written out: a blob: URL names bytes the document already
//     holds (a decoded PDF page, a recorded clip, a worker built from its
//     own source), never a place outside it. connect-src stays 'none', so
//     a worker can no more reach out than the document.
//   - font-src 'self' data: blob:, so that fonts inlined as data: URLs by a
//     bundler work like inlined images.
//   - frame-src 'none', as the specification says for absent frameDomains
//     (default-src already implies it; written out so the header says it).
//   - base-uri 'none', stricter than the specification's 'self': a <base>
//     element is not governed by default-src, a view served by this service
//     has no files of its own beside it, and 'none' leaves relative URLs
//     where the document's own URL puts them.
//   - form-action 'none': form submission is not governed by default-src, and
//     a form posting to any site would carry data out of the view even when
//     connect-src is 'none'. A view granted allow-forms still handles its
//     forms in script and calls tools through the host.
//
// data: and blob: are fixed sources of the host, never declarable: a
// server's declared data: or blob: entry is dropped like any non-https
// entry. frame-ancestors is deliberately absent: which of the service's own
// origins may frame its documents is the view page's decision, not the
// extension's.
const DefaultCSP = "default-src 'none'; " +
	"script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data:; " +
	"style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; " +
	"font-src 'self' data: blob:; " +
	"media-src 'self' data: blob:; " +
	"worker-src 'self' blob:; " +
	"connect-src 'none'; " +
	"frame-src 'none'; " +
	"object-src 'none'; " +
	"base-uri 'none'; " +
	"form-action 'none'"

// MaxDomainsPerField bounds how many entries of one csp field are read. The
// rest are dropped as one DroppedEntry, so that a server cannot make a view's
// header or its audit record arbitrarily large.
const MaxDomainsPerField = 32

// maxDroppedValueBytes bounds DroppedEntry.Value, for the same reason.
const maxDroppedValueBytes = 256

// maxOriginBytes bounds one declared entry: "https://", a 253-byte host name
// and a port.
const maxOriginBytes = len("https://") + 253 + len(":65535") + len("/")

// Policy is a CSP header value and the declared entries left out of it.
type Policy struct {
	Header  string
	Dropped []DroppedEntry
}

// BuildCSP builds the CSP a view is served under from its declared domains.
//
// It starts from DefaultCSP and adds declared entries only when they are
// https:// origins (see the origin grammar below): resourceDomains join
// script-src, style-src, img-src, font-src and media-src; connectDomains
// replace connect-src 'none'; frameDomains replace frame-src 'none';
// baseUriDomains replace base-uri 'none'. Nothing else can change: the
// directive names and the keywords are fixed, so no declaration can add a
// directive, a keyword, or a scheme source: the host's own fixed sources
// ('unsafe-eval', data:, blob:) are the same for every view, and a server
// that declares them gets nothing more.
//
// The origin grammar: "https://" (any case), a host, an optional ":port"
// (1 to 65535, decimal, no leading zero), and optionally a single trailing
// "/", which CSP reads as "any path" and is removed. The host is a DNS name
// of at least two labels, each 1 to 63 of [a-z0-9-] not starting or ending
// with '-', the last starting with a letter; "*." may stand as the whole
// leftmost label, above at least two labels. Scheme and host are lower-cased.
//
// Every other entry is dropped and listed in Policy.Dropped with its field,
// value and reason, for the audit log: other schemes (http:, wss:, data:,
// blob:; an https:// source also lets CSP reach wss:// on the same host),
// bare schemes and "*", keywords and anything quoted, whitespace, ';' and ','
// (a stray directive), paths, queries, fragments, user info, wildcards
// elsewhere than the leftmost label or over a top-level domain, IP
// addresses and single-label or .localhost names (they reach the person's
// own machine or network, not a server's), and non-ASCII names (write them
// in punycode). A public suffix such as *.co.uk passes: telling it apart
// needs the public suffix list, which this package does not carry.
//
// Duplicates are removed and each directive lists its origins sorted, so
// the same declaration always gives the same header. At most
// MaxDomainsPerField entries of each field are read.
func BuildCSP(d CSPDomains) Policy {
	var p Policy
	resource := p.origins("resourceDomains", d.ResourceDomains)
	connect := p.origins("connectDomains", d.ConnectDomains)
	frame := p.origins("frameDomains", d.FrameDomains)
	base := p.origins("baseUriDomains", d.BaseURIDomains)
	// The fixed sources of each directive come first; a declared origin
	// only ever joins them (an empty list is 'none'). Each fixed source
	// names only the document itself or bytes it already holds.
	with := func(origins []string, fixed ...string) []string { return append(fixed, origins...) }
	p.Header = csp.New().
		Add("default-src").
		Add("script-src", with(resource, csp.Self, csp.UnsafeInline, csp.UnsafeEval, csp.Blob, csp.Data)...).
		Add("style-src", with(resource, csp.Self, csp.UnsafeInline)...).
		Add("img-src", with(resource, csp.Self, csp.Data, csp.Blob)...).
		Add("font-src", with(resource, csp.Self, csp.Data, csp.Blob)...).
		Add("media-src", with(resource, csp.Self, csp.Data, csp.Blob)...).
		Add("worker-src", csp.Self, csp.Blob).
		Add("connect-src", connect...).
		Add("frame-src", frame...).
		Add("object-src").
		Add("base-uri", base...).
		Add("form-action").
		String()
	return p
}

// origins returns the accepted, normalized origins of one field, sorted and
// without duplicates, and records the rest in p.Dropped.
func (p *Policy) origins(field string, entries []string) []string {
	out := make([]string, 0, min(len(entries), MaxDomainsPerField))
	for i, e := range entries {
		if i == MaxDomainsPerField {
			p.Dropped = append(p.Dropped, DroppedEntry{
				Field:  field,
				Value:  fmt.Sprintf("(%d more entries)", len(entries)-i),
				Reason: fmt.Sprintf("only the first %d entries of a field are read", MaxDomainsPerField),
			})
			break
		}
		o, reason := parseOrigin(e)
		if reason != "" {
			p.Dropped = append(p.Dropped, DroppedEntry{Field: field, Value: textclip.Clip(e, maxDroppedValueBytes), Reason: reason})
			continue
		}
		out = append(out, o)
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// parseOrigin checks s against the origin grammar described at BuildCSP. It
// returns the normalized origin, or an empty origin and the reason it was
// refused.
func parseOrigin(s string) (origin, reason string) {
	switch {
	case s == "":
		return "", "empty"
	case len(s) > maxOriginBytes:
		return "", "too long for an origin"
	case s == "*":
		return "", "a bare wildcard allows every origin"
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return "", "contains whitespace or a control character"
		case c == '\'' || c == '"' || c == ';' || c == ',' || c == '\\':
			return "", "contains a quote, ';', ',' or '\\' (a keyword or another directive)"
		case c >= utf8.RuneSelf:
			return "", "contains non-ASCII characters (write the host name in punycode)"
		}
	}

	lower := strings.ToLower(s)
	scheme, rest, ok := strings.Cut(lower, "://")
	switch {
	case !ok && strings.HasSuffix(lower, ":"):
		return "", "a scheme source, not an origin"
	case !ok:
		return "", "not an origin: no https:// scheme"
	case scheme == "https":
	case scheme == "http":
		return "", "http: is not https:"
	default:
		return "", fmt.Sprintf("scheme %.20q is not https", scheme)
	}

	switch {
	case strings.ContainsAny(rest, "?#"):
		return "", "has a query or fragment"
	case strings.Contains(rest, "@"):
		return "", "has user info"
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		if rest[i:] != "/" {
			return "", "has a path"
		}
		rest = rest[:i]
	}

	host, port := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i >= 0 && !strings.HasSuffix(rest, "]") {
		host, port = rest[:i], rest[i+1:]
		if !validPort(port) {
			return "", "invalid port"
		}
		port = ":" + port
	}
	if r := hostReason(host); r != "" {
		return "", r
	}
	return "https://" + host + port, ""
}

// hostReason returns why host is not an acceptable host of an https://
// origin, or "".
func hostReason(host string) string {
	if strings.HasPrefix(host, "[") || strings.Trim(host, "0123456789.") == "" && host != "" {
		return "an IP address, not a host name"
	}
	name, wildcard := strings.CutPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return "a wildcard may only be the whole leftmost label"
	}
	if name == "" || len(name) > 253 {
		return "not a valid host name"
	}
	labels, last := 0, ""
	for l := range strings.SplitSeq(name, ".") {
		if !validLabel(l) {
			return "not a valid host name"
		}
		labels, last = labels+1, l
	}
	switch {
	case last[0] < 'a' || last[0] > 'z':
		// WHATWG URL parsing reads a host whose last label is a number
		// (decimal or 0x hex) as an IPv4 address; no top-level domain
		// starts with a digit.
		return "the last label must start with a letter (no IP addresses)"
	case labels < 2 && wildcard:
		return "a wildcard must stand above at least two labels, not a top-level domain"
	case labels < 2:
		return "a single-label host name names a local machine or network"
	case last == "localhost":
		return "a .localhost name is the person's own machine"
	}
	return ""
}

func validLabel(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func validPort(p string) bool {
	if len(p) == 0 || len(p) > 5 || p[0] == '0' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	n, err := strconv.Atoi(p)
	return err == nil && n <= 65535
}
