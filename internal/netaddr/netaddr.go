// Package netaddr holds the service's two network settings as typed
// values, each with the one rule that judges it: an Origin (where people,
// or the sandbox frames, reach the service) and a Listen address. It also
// owns the service's single definition of "loopback", which the local
// development modes of the bot and the sign-in rely on.
//
// cmd/teamsbot parses each setting once with these functions and hands the
// values to the parts, so that `teamsbot config` and the server refuse the
// same inputs with the same words. The package imports only the standard
// library, so that any package may use it; it does no I/O (no name is ever
// resolved: a host is loopback by its spelling alone).
package netaddr

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by every parse error of this package.
var ErrInvalid = errors.New("invalid address")

// IsLoopbackHost reports whether host names this machine's loopback
// interface by its spelling: "localhost" (in any case) or an IPv4 or IPv6
// loopback literal (127.0.0.0/8, ::1), with or without the brackets of an
// IPv6 host. Names under .localhost and names that merely resolve to
// loopback do not count: the rule must hold without a DNS answer an
// attacker could control.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Zone() == "" && ip.Unmap().IsLoopback()
}

// IsLoopbackHostPort is IsLoopbackHost for a host with an optional port,
// as in a Host header or a URL's authority.
func IsLoopbackHostPort(hostport string) bool {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return IsLoopbackHost(h)
	}
	return IsLoopbackHost(hostport)
}

// IsLoopbackRemote reports whether a TCP peer address (an
// http.Request.RemoteAddr, "ip:port") is a loopback IP. It never trusts a
// header a caller could set.
func IsLoopbackRemote(remoteAddr string) bool {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	return ap.Addr().Unmap().IsLoopback()
}

// Origin is a scheme, host and port, such as https://bot.example.com or
// http://localhost:3978: what a browser compares, and what the service is
// served from (always at its root). The zero Origin is "not set".
type Origin struct {
	scheme string // "https" or "http"
	host   string // lower case; IPv6 in brackets
	port   string // "" for the scheme's default
}

// ParseOrigin parses an origin. It accepts https:// with any host name or
// IP address, and http:// only for a loopback host (see IsLoopbackHost),
// since anything sent over plain http to another machine can be read and
// changed on the way. A trailing slash is allowed; a path, a query, a
// fragment or user info is refused, because the service is served from the
// root and credentials never belong in an address. The errors never quote
// user info.
func ParseOrigin(s string) (Origin, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Origin{}, fmt.Errorf("%w: empty", ErrInvalid)
	}
	u, err := url.Parse(s)
	if err != nil {
		return Origin{}, fmt.Errorf("%w: not a URL", ErrInvalid)
	}
	if u.User != nil {
		return Origin{}, fmt.Errorf("%w: %s://%s: credentials do not belong in an address", ErrInvalid, u.Scheme, u.Host)
	}
	shown := strconv.Quote(s)
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return Origin{}, fmt.Errorf("%w: %s: want an https:// address (http:// only for localhost)", ErrInvalid, shown)
	case u.Opaque != "" || u.Host == "":
		return Origin{}, fmt.Errorf("%w: %s: no host", ErrInvalid, shown)
	case u.Path != "" && u.Path != "/":
		return Origin{}, fmt.Errorf("%w: %s: has a path; the service is served from the root, so give only scheme://host[:port]", ErrInvalid, shown)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(s, "#"):
		// The query is not quoted: it is where tokens go.
		return Origin{}, fmt.Errorf("%w: %s://%s: has a query or fragment", ErrInvalid, scheme, u.Host)
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" {
		return Origin{}, fmt.Errorf("%w: %s: no host", ErrInvalid, shown)
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return Origin{}, fmt.Errorf("%w: %s: invalid port", ErrInvalid, shown)
		}
	}
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	o := Origin{scheme: scheme, host: host, port: port}
	if !o.Loopback() {
		if why := hostNameProblem(host); why != "" {
			return Origin{}, fmt.Errorf("%w: %s: %s", ErrInvalid, shown, why)
		}
	}
	if scheme == "http" && !o.Loopback() {
		return Origin{}, fmt.Errorf("%w: %s: http:// is allowed only for localhost and loopback addresses; use https://", ErrInvalid, shown)
	}
	return o, nil
}

// hostNameProblem says why host cannot be the name people reach the
// service by, or "". An address other than loopback is refused: browsers,
// Teams' valid domains and certificates all work with names. So are
// wildcards, single labels (a name of the local network) and names whose
// last label starts with a digit (browsers read those as IPv4 addresses).
func hostNameProblem(host string) string {
	if strings.HasPrefix(host, "[") {
		return "an IP address: give the host name people reach the service by"
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "an IP address: give the host name people reach the service by"
	}
	if len(host) > 253 {
		return "the host name is too long"
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "not a valid host name"
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "not a valid host name (letters, digits and '-' only; write other names in punycode)"
			}
		}
	}
	last := labels[len(labels)-1]
	switch {
	case len(labels) < 2:
		return "a single-label host name names a machine of the local network; give the full name"
	case last[0] < 'a' || last[0] > 'z':
		return "not a valid host name: the last label must start with a letter"
	case last == "localhost":
		return "a .localhost name is not a loopback address this service can rely on"
	}
	return ""
}

// MustParseOrigin is ParseOrigin for constants in tests and defaults; it
// panics on an invalid origin.
func MustParseOrigin(s string) Origin {
	o, err := ParseOrigin(s)
	if err != nil {
		panic(err)
	}
	return o
}

// IsZero reports whether the origin is unset.
func (o Origin) IsZero() bool { return o.scheme == "" }

// Scheme is "https" or "http".
func (o Origin) Scheme() string { return o.scheme }

// HTTPS reports whether the origin is https://; cards carry Open buttons
// and cookies are Secure only then.
func (o Origin) HTTPS() bool { return o.scheme == "https" }

// Hostname is the host without the port (IPv6 in brackets).
func (o Origin) Hostname() string { return o.host }

// Host is the host with its port when it is not the scheme's default, as
// in a Host header.
func (o Origin) Host() string {
	if o.port == "" {
		return o.host
	}
	return o.host + ":" + o.port
}

// Loopback reports whether the origin's host is a loopback one.
func (o Origin) Loopback() bool { return !o.IsZero() && IsLoopbackHost(o.host) }

// String is scheme://host[:port], without a trailing slash, so that paths
// can be appended; "" for the zero Origin.
func (o Origin) String() string {
	if o.IsZero() {
		return ""
	}
	return o.scheme + "://" + o.Host()
}

// URL returns the origin followed by path, which must start with "/".
func (o Origin) URL(path string) string { return o.String() + path }

// ParseURL parses an absolute http:// or https:// URL of a service this one
// talks to (an OpenID metadata document, a token endpoint, an issuer, an
// MCP server). Unlike an Origin it may have a path and a query, and plain
// http is allowed (a server on an internal network). User info is refused:
// credentials belong in headers, where they are redacted. The errors show
// the scheme and host only, since by now a query or path may carry a token.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("%w: not a URL", ErrInvalid)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return nil, fmt.Errorf("%w: want an absolute http:// or https:// URL", ErrInvalid)
	case u.Opaque != "" || u.Hostname() == "":
		return nil, fmt.Errorf("%w: %s: no host", ErrInvalid, scheme+"://")
	case u.User != nil:
		return nil, fmt.Errorf("%w: %s://%s: credentials do not belong in a URL (use a header)", ErrInvalid, scheme, u.Host)
	}
	u.Scheme = scheme
	return u, nil
}

// Redact shows a URL's scheme and host only, followed by "/[redacted]"
// when it has anything more (user info, a path, a query), since each of
// them often carries a secret. A URL that does not parse is hidden whole.
func Redact(raw string) string {
	if raw == "" {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "[redacted]"
	}
	shown := u.Scheme + "://" + u.Host
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		shown += "/[redacted]"
	}
	return shown
}

// Listen is a TCP listen address, such as :3978 or 127.0.0.1:3978.
type Listen struct {
	host string // "" for every interface
	port string
}

// ParseListen parses host:port. The host may be empty (every interface), a
// name or an IP literal; the port is a number from 0 to 65535.
func ParseListen(s string) (Listen, error) {
	s = strings.TrimSpace(s)
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return Listen{}, fmt.Errorf("%w: %q is not host:port", ErrInvalid, s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return Listen{}, fmt.Errorf("%w: %q: the port must be a number from 0 to 65535", ErrInvalid, s)
	}
	// The port as a number writes it: ":0080" listens on 80, and every
	// address made of it (the default public base URL) parses.
	return Listen{host: host, port: strconv.Itoa(n)}, nil
}

// IsZero reports an address that was never set.
func (l Listen) IsZero() bool { return l.port == "" }

// String is the address in the form net.Listen takes.
func (l Listen) String() string { return net.JoinHostPort(l.host, l.port) }

// Port is the address's port, "0" when the system picks one.
func (l Listen) Port() string { return l.port }

// Loopback reports whether the address accepts loopback connections only.
// An empty host, 0.0.0.0 or [::] listen on every interface and are not.
func (l Listen) Loopback() bool { return IsLoopbackHost(l.host) }

// SameOrigin reports whether two URLs have the same scheme, host name and
// port (a missing port being the scheme's default). Credentials meant for
// one service are sent to its origin only: Go's HTTP client counts another
// port of the same host as the same host, and copies every header but a
// few to any host a redirect names.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && portOf(a) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// ErrCrossOriginRedirect is a redirect to another origin, refused because
// the request carries credentials meant for its own.
var ErrCrossOriginRedirect = errors.New("redirect to another origin refused: credentials are sent to the configured origin only")

// SameOriginRedirects is an http.Client CheckRedirect that follows
// redirects within the first request's origin (at most 10) and refuses any
// other, naming its scheme and host only.
func SameOriginRedirects(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if !SameOrigin(via[0].URL, req.URL) {
		return fmt.Errorf("%w (to %s://%s)", ErrCrossOriginRedirect, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// userinfo finds the user info of every URL in a text: a scheme, "://",
// then anything up to an "@" that is not a path, a query, a space or a
// quote.
var userinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@"'<>\\]+@`)

// RedactUserinfo hides the user info (user:password@) of every URL found
// in a free text, such as an error message that quotes what an operator
// typed in the wrong place. The rest of the text is unchanged.
func RedactUserinfo(text string) string {
	if !strings.Contains(text, "@") || !strings.Contains(text, "://") {
		return text
	}
	return userinfo.ReplaceAllString(text, "${1}[redacted]@")
}

// RedactURLCredentials shows a URL with its user info and its query
// hidden, and its scheme, host and path kept: what an operator needs to
// recognise a setting, without what often carries a secret. A text that is
// not a URL has the user info of any URL in it hidden.
func RedactURLCredentials(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return RedactUserinfo(raw)
	}
	if u.User == nil && u.RawQuery == "" {
		return raw
	}
	shown := u.Scheme + "://"
	if u.User != nil {
		shown += "[redacted]@"
	}
	shown += u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		shown += "?[redacted]"
	}
	return shown
}
