// Package csp builds the Content-Security-Policy header values of every
// page and document the service serves, the view documents' included.
//
// A Policy is a list of directives written in the order they were added,
// one each, every value checked against the grammar of its directive
// (Content Security Policy Level 3, §2.3.1 "Source Lists", and the
// sandbox, webrtc and Trusted Types directives): a source list is
// de-duplicated and written as 'none' when it is empty, keywords are the
// quoted constants of this package, hashes and nonces are made here, and
// nothing that is not a source expression gets in, so no value can end a
// directive (';'), start a header line (a line break) or smuggle a keyword
// in unquoted. A value that breaks the grammar is a mistake in the code
// that added it, and Add panics; text from outside (a stored policy, a
// configured origin) is read with Parse or CheckSource, which return an
// error instead.
//
// The package is pure and imports nothing of the project, so that mcpapps,
// which builds a view's policy from what its server declared, and the HTTP
// parts build their policies with the same type.
package csp

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Keywords and the scheme sources the service uses, as they are written
// in a policy: quoted, except the schemes.
const (
	None         = "'none'"
	Self         = "'self'"
	UnsafeInline = "'unsafe-inline'"
	UnsafeEval   = "'unsafe-eval'"
	Data         = "data:"
	Blob         = "blob:"
	// Script is the one value of require-trusted-types-for.
	Script = "'script'"
	// Block is the webrtc directive's value that forbids peer connections.
	Block = "'block'"
)

// Hash is the source expression that allows exactly one inline script or
// style whose text is s: its SHA-256, 'sha256-…'.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Nonce is the source expression that allows the inline elements that
// carry nonce="value". value must be base64 (standard or URL alphabet), as
// a fresh random value per response is; anything else panics.
func Nonce(value string) string {
	if !base64Value(value) {
		panic(fmt.Sprintf("csp: nonce %q is not a base64 value", value))
	}
	return "'nonce-" + value + "'"
}

// kind is the grammar of a directive's value.
type kind int

const (
	// sourceList: fetch and navigation directives and base-uri; 'none'
	// alone when there is no source.
	sourceList kind = iota
	// sandboxFlags: sandbox's allow-* tokens; nothing at all (the
	// strictest sandbox) when there is none.
	sandboxFlags
	// webrtcValue: 'allow' or 'block', exactly one.
	webrtcValue
	// sinkGroups: require-trusted-types-for, whose one group is 'script'.
	sinkGroups
	// policyNames: trusted-types, Trusted Types policy names or 'none'.
	policyNames
)

// kindOf returns the grammar of the directive name's value, for the
// directives a Policy may hold: CSP3's fetch directives, base-uri, sandbox,
// form-action, frame-ancestors, webrtc, and Trusted Types' two.
func kindOf(name string) (kind, bool) {
	switch name {
	case "default-src", "child-src", "connect-src", "font-src", "frame-src", "img-src", "manifest-src",
		"media-src", "object-src", "script-src", "script-src-elem", "script-src-attr", "style-src",
		"style-src-elem", "style-src-attr", "worker-src", "base-uri", "form-action", "frame-ancestors":
		return sourceList, true
	case "sandbox":
		return sandboxFlags, true
	case "webrtc":
		return webrtcValue, true
	case "require-trusted-types-for":
		return sinkGroups, true
	case "trusted-types":
		return policyNames, true
	}
	return 0, false
}

// sandboxFlag reports whether s is one of the sandbox directive's flags
// (HTML's iframe sandbox keywords).
func sandboxFlag(s string) bool {
	switch s {
	case "allow-downloads", "allow-forms", "allow-modals", "allow-orientation-lock", "allow-pointer-lock",
		"allow-popups", "allow-popups-to-escape-sandbox", "allow-presentation", "allow-same-origin",
		"allow-scripts", "allow-storage-access-by-user-activation", "allow-top-navigation",
		"allow-top-navigation-by-user-activation", "allow-top-navigation-to-custom-protocols":
		return true
	}
	return false
}

// keyword reports whether s is one of CSP3's keyword-sources, quoted.
func keyword(s string) bool {
	switch s {
	case Self, UnsafeInline, UnsafeEval, "'strict-dynamic'", "'unsafe-hashes'", "'report-sample'",
		"'unsafe-allow-redirects'", "'wasm-unsafe-eval'", "'trusted-types-eval'", "'report-sha256'",
		"'inline-speculation-rules'":
		return true
	}
	return false
}

// Policy is a Content-Security-Policy header value under construction.
// The zero Policy is empty and ready to use.
type Policy struct {
	directives []directive
}

type directive struct {
	name   string
	values []string
}

// New returns an empty Policy, for chaining Add.
func New() *Policy { return &Policy{} }

// Add appends the directive name with values and returns p. Repeated
// values are written once, in the order first given; a source list with
// no value is written as 'none' (and 'none' may only stand alone). Add
// panics when name is no directive this package knows, when p already has
// it (a browser would ignore the second), or when a value is not valid for
// it: every value comes from the code or was checked where it came in.
func (p *Policy) Add(name string, values ...string) *Policy {
	if err := p.add(name, values); err != nil {
		panic("csp: " + err.Error())
	}
	return p
}

func (p *Policy) add(name string, values []string) error {
	k, ok := kindOf(name)
	if !ok {
		return fmt.Errorf("unknown directive %q", name)
	}
	if p.Has(name) {
		return fmt.Errorf("%s twice in one policy", name)
	}
	var vs []string
	for _, v := range values {
		if err := checkValue(k, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	switch {
	case len(vs) > 1 && slices.Contains(vs, None):
		return fmt.Errorf("%s: 'none' with other values (a browser ignores it)", name)
	case len(vs) == 0 && (k == sourceList || k == policyNames):
		vs = []string{None}
	case len(vs) != 1 && (k == webrtcValue || k == sinkGroups):
		return fmt.Errorf("%s takes exactly one value", name)
	}
	p.directives = append(p.directives, directive{name: name, values: vs})
	return nil
}

// Has reports whether p holds the directive name.
func (p *Policy) Has(name string) bool {
	return slices.ContainsFunc(p.directives, func(d directive) bool { return d.name == name })
}

// Append adds q's directives after p's and returns p. A directive p
// already holds is left out: of two directives of one name a browser
// enforces the first and ignores the other (CSP3 §2.2.1, "parse a
// serialized CSP"), so what p says first cannot be loosened by q.
func (p *Policy) Append(q *Policy) *Policy {
	for _, d := range q.directives {
		if !p.Has(d.name) {
			p.directives = append(p.directives, directive{name: d.name, values: slices.Clone(d.values)})
		}
	}
	return p
}

// String is the header value: the directives in the order they were
// added, separated by "; ", each followed by its values.
func (p *Policy) String() string {
	var b strings.Builder
	for i, d := range p.directives {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.name)
		for _, v := range d.values {
			b.WriteByte(' ')
			b.WriteString(v)
		}
	}
	return b.String()
}

// ErrInvalid is wrapped by the errors of Parse and CheckSource.
var ErrInvalid = errors.New("not a valid Content-Security-Policy")

// Parse reads a serialized policy, such as one stored with a view, into a
// Policy whose String is the same text when it was written by String.
// Every directive and value is checked as Add checks it, and the text
// may hold no line break or other control character (a header value
// cannot); a directive repeated later in the text is dropped, as a browser
// ignores it. An empty text is an empty Policy.
func Parse(text string) (*Policy, error) {
	for i := 0; i < len(text); i++ {
		if c := text[i]; c < ' ' && c != '\t' || c == 0x7f || c >= 0x80 {
			return nil, fmt.Errorf("%w: a line break, control or non-ASCII character", ErrInvalid)
		}
	}
	p := New()
	for part := range strings.SplitSeq(text, ";") {
		fields := strings.FieldsFunc(part, isSpace)
		if len(fields) == 0 {
			continue
		}
		name := strings.ToLower(fields[0])
		if p.Has(name) {
			continue
		}
		if err := p.add(name, fields[1:]); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return p, nil
}

// CheckSource returns an error wrapping ErrInvalid when s is not a CSP3
// source expression, for a source that comes from outside the code (a
// configured host) and is checked before it reaches Add.
func CheckSource(s string) error {
	if err := checkSource(s); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' }

// checkValue checks one value of a directive of kind k.
func checkValue(k kind, v string) error {
	switch k {
	case sandboxFlags:
		if !sandboxFlag(v) {
			return fmt.Errorf("%.40q is not a sandbox flag", v)
		}
	case webrtcValue:
		if v != Block && v != "'allow'" {
			return fmt.Errorf("%.40q is not 'allow' or 'block'", v)
		}
	case sinkGroups:
		if v != Script {
			return fmt.Errorf("%.40q is not 'script'", v)
		}
	case policyNames:
		if v != None && v != "'allow-duplicates'" && !policyName(v) {
			return fmt.Errorf("%.40q is not a Trusted Types policy name", v)
		}
	default:
		if v == None {
			return nil
		}
		return checkSource(v)
	}
	return nil
}

// checkSource checks s against CSP3's source-expression: a keyword, a
// nonce or hash, a scheme ("data:"), or a host ("https://*.example.com:8443/p").
// A keyword's name unquoted ("self") is refused: it would be read as a
// host of that name, which is never what was meant.
func checkSource(s string) error {
	switch {
	case s == "":
		return errors.New("an empty source")
	case strings.HasPrefix(s, "'"):
		if keyword(s) || quotedHashOrNonce(s) {
			return nil
		}
		return fmt.Errorf("%.60q is not a keyword, nonce or hash", s)
	case keyword("'"+s+"'") || s == "none":
		return fmt.Errorf("%.40q is a keyword without its quotes", s)
	}
	if scheme, ok := strings.CutSuffix(s, ":"); ok && validScheme(scheme) {
		return nil
	}
	if !hostSource(s) {
		return fmt.Errorf("%.60q is not a source expression", s)
	}
	return nil
}

// quotedHashOrNonce reports whether s is 'nonce-…' or 'sha256-…' (384, 512).
func quotedHashOrNonce(s string) bool {
	inner, ok := strings.CutSuffix(s[1:], "'")
	if !ok {
		return false
	}
	for _, prefix := range []string{"nonce-", "sha256-", "sha384-", "sha512-"} {
		if v, ok := strings.CutPrefix(inner, prefix); ok {
			return base64Value(v)
		}
	}
	return false
}

// base64Value is CSP3's base64-value: 1*( ALPHA / DIGIT / "+" / "/" / "-"
// / "_" ) *2"=".
func base64Value(v string) bool {
	body := strings.TrimRight(v, "=")
	if body == "" || len(v)-len(body) > 2 {
		return false
	}
	for i := 0; i < len(body); i++ {
		if c := body[i]; !alnum(c) && c != '+' && c != '/' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// validScheme is RFC 3986's scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func validScheme(s string) bool {
	if s == "" || !alpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '+' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}

// hostSource is CSP3's host-source: [ scheme "://" ] host [ ":" port ]
// [ path ], where host is "*", or an optional "*." and dot-separated
// labels of letters, digits and '-'. A bracketed IPv6 literal is taken as
// a host too (a loopback origin such as http://[::1]:3978 can be one);
// CSP3's grammar has none, and a browser that does not match it ignores
// the source, which can only allow less.
func hostSource(s string) bool {
	rest := s
	if i := strings.Index(rest, "://"); i >= 0 {
		if !validScheme(rest[:i]) {
			return false
		}
		rest = rest[i+len("://"):]
	}
	hostport, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, path = rest[:i], rest[i:]
	}
	var port string
	if v6, ok := strings.CutPrefix(hostport, "["); ok {
		addr, after, ok := strings.Cut(v6, "]")
		if !ok || !ipv6Literal(addr) {
			return false
		}
		if after != "" {
			if port, ok = strings.CutPrefix(after, ":"); !ok || port == "" {
				return false
			}
		}
	} else {
		var host string
		var hasPort bool
		host, port, hasPort = strings.Cut(hostport, ":")
		if hasPort && port == "" || !hostPart(host) {
			return false
		}
	}
	if port != "" && port != "*" && strings.Trim(port, "0123456789") != "" {
		return false
	}
	return validPath(path)
}

// hostPart is "*" / [ "*." ] 1*host-char *( "." 1*host-char ) [ "." ].
func hostPart(h string) bool {
	if h == "*" {
		return true
	}
	h = strings.TrimPrefix(h, "*.")
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !alnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

func ipv6Literal(s string) bool {
	return s != "" && strings.Trim(s, "0123456789abcdefABCDEF:.") == "" && strings.Contains(s, ":")
}

// validPath is RFC 3986's path-abempty without ';' and ',' (CSP3 keeps
// them out of a path so that a source cannot end its directive or list),
// and without a quote, so that no path reads like a keyword.
func validPath(p string) bool {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if alnum(c) || strings.IndexByte("/-._~!$&()*+=:@%", c) >= 0 {
			continue
		}
		return false
	}
	return !strings.HasPrefix(p, "//")
}

// policyName is Trusted Types' tt-policy-name: 1*( ALPHA / DIGIT / "-" /
// "#" / "=" / "_" / "/" / "@" / "." / "%" ).
func policyName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && strings.IndexByte("-#=_/@.%", c) < 0 {
			return false
		}
	}
	return true
}

func alpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func alnum(c byte) bool { return alpha(c) || c >= '0' && c <= '9' }
