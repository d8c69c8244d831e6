package mcpapps

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"teamsbot/internal/textclip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The spec's default (specification/2026-01-26/apps.mdx, "Restrictive
// Default") with the sources that stay inside the document ('unsafe-eval',
// blob: and data: for scripts, blob: for images, fonts and media, worker-src), plus
// font-src, worker-src, frame-src, base-uri and form-action, written out
// here again so that a change to DefaultCSP must be made twice on purpose.
const wantDefaultCSP = "default-src 'none'; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data:; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; font-src 'self' data: blob:; media-src 'self' data: blob:; worker-src 'self' blob:; " +
	"connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"

// insideOnly are the only sources besides 'self' and declared https://
// origins that a view's policy may hold: each names the document itself or
// bytes it already holds, never a place outside it.
var insideOnly = []string{"'self'", "'none'", "'unsafe-inline'", "'unsafe-eval'", "data:", "blob:"}

// directive is one parsed CSP directive.
type directive struct {
	Name    string
	Sources []string
}

// parseCSP splits a header the way a browser does (CSP3 "parse a serialized
// CSP"): directives at ';', tokens at ASCII whitespace.
func parseCSP(header string) []directive {
	var out []directive
	for _, d := range strings.Split(header, ";") {
		f := strings.FieldsFunc(d, func(r rune) bool { return strings.ContainsRune(" \t\n\f\r", r) })
		if len(f) == 0 {
			continue
		}
		out = append(out, directive{Name: strings.ToLower(f[0]), Sources: f[1:]})
	}
	return out
}

func sourcesOf(header, name string) []string {
	for _, d := range parseCSP(header) {
		if d.Name == name {
			return d.Sources
		}
	}
	return nil
}

func TestDefaultCSP(t *testing.T) {
	if DefaultCSP != wantDefaultCSP {
		t.Errorf("DefaultCSP =\n%s\nwant\n%s", DefaultCSP, wantDefaultCSP)
	}
	for name, d := range map[string]CSPDomains{
		"nothing declared": {},
		"empty lists":      {ConnectDomains: []string{}, ResourceDomains: []string{}},
		"only bad entries": {ConnectDomains: []string{"http://a.example.com"}, FrameDomains: []string{"*"}, BaseURIDomains: []string{"'self'"}, ResourceDomains: []string{"data:"}},
	} {
		t.Run(name, func(t *testing.T) {
			if got := BuildCSP(d).Header; got != wantDefaultCSP {
				t.Errorf("header =\n%s\nwant the default", got)
			}
		})
	}
	// What the seed promises with nothing declared: nothing outside itself.
	for _, name := range []string{"default-src", "connect-src", "frame-src", "object-src", "base-uri", "form-action"} {
		if got := sourcesOf(DefaultCSP, name); !slices.Equal(got, []string{"'none'"}) {
			t.Errorf("%s = %v, want 'none'", name, got)
		}
	}
	for _, d := range parseCSP(DefaultCSP) {
		for _, src := range d.Sources {
			if !slices.Contains(insideOnly, src) {
				t.Errorf("%s holds %q, which reaches outside the document", d.Name, src)
			}
		}
	}
	// What real views need from inside the document.
	for name, want := range map[string][]string{
		"script-src": {"'unsafe-eval'", "blob:", "data:"}, "img-src": {"blob:"}, "font-src": {"blob:"},
		"media-src": {"blob:"}, "worker-src": {"'self'", "blob:"},
	} {
		for _, w := range want {
			if !slices.Contains(sourcesOf(DefaultCSP, name), w) {
				t.Errorf("%s lacks %s", name, w)
			}
		}
	}
}

// A server cannot declare the host's own sources, nor any other scheme: a
// declared data:, blob:, http: or keyword entry is dropped with a reason
// (which the agent writes to the audit log) and the header stays the
// default, whichever field it was declared in.
func TestBuildCSPHostSourcesAreNotDeclarable(t *testing.T) {
	entries := []string{
		"data:", "blob:", "'unsafe-eval'", "http://cdn.example.com", "data:text/javascript,alert(1)",
		"blob:https://cdn.example.com/3f2a", "HTTP://CDN.EXAMPLE.COM/", "filesystem:", "https://*",
	}
	for _, field := range []string{"resourceDomains", "connectDomains", "frameDomains", "baseUriDomains"} {
		var d CSPDomains
		switch field {
		case "resourceDomains":
			d.ResourceDomains = entries
		case "connectDomains":
			d.ConnectDomains = entries
		case "frameDomains":
			d.FrameDomains = entries
		case "baseUriDomains":
			d.BaseURIDomains = entries
		}
		p := BuildCSP(d)
		if p.Header != DefaultCSP {
			t.Errorf("%s: header changed to\n%s", field, p.Header)
		}
		if len(p.Dropped) != len(entries) {
			t.Fatalf("%s: dropped %d entries, want %d: %+v", field, len(p.Dropped), len(entries), p.Dropped)
		}
		for i, de := range p.Dropped {
			if de.Field != field || de.Value != entries[i] || de.Reason == "" {
				t.Errorf("%s: dropped %+v, want %q with a reason", field, de, entries[i])
			}
		}
	}
}

func TestBuildCSPFullDeclaration(t *testing.T) {
	p := BuildCSP(CSPDomains{
		ResourceDomains: []string{"https://cdn.example.com", "https://*.cloudflare.com"},
		ConnectDomains:  []string{"https://api.example.com", "wss://rt.example.com"},
		FrameDomains:    []string{"https://www.youtube.com"},
		BaseURIDomains:  []string{"https://cdn.example.com"},
	})
	const res = "https://*.cloudflare.com https://cdn.example.com"
	want := "default-src 'none'; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data: " + res + "; style-src 'self' 'unsafe-inline' " + res +
		"; img-src 'self' data: blob: " + res + "; font-src 'self' data: blob: " + res + "; media-src 'self' data: blob: " + res +
		"; worker-src 'self' blob:; connect-src https://api.example.com; frame-src https://www.youtube.com; object-src 'none'" +
		"; base-uri https://cdn.example.com; form-action 'none'"
	if p.Header != want {
		t.Errorf("header =\n%s\nwant\n%s", p.Header, want)
	}
	wantDropped := []DroppedEntry{{Field: "connectDomains", Value: "wss://rt.example.com", Reason: `scheme "wss" is not https`}}
	if diff := cmp.Diff(wantDropped, p.Dropped); diff != "" {
		t.Errorf("Dropped (-want +got):\n%s", diff)
	}
}

// Each field reaches exactly its directives, and replaces 'none' where the
// default has it.
func TestBuildCSPFieldMapping(t *testing.T) {
	const o = "https://x.example.com"
	resourceDirs := []string{"script-src", "style-src", "img-src", "font-src", "media-src"}
	tests := []struct {
		field string
		d     CSPDomains
		dirs  []string
	}{
		{"resourceDomains", CSPDomains{ResourceDomains: []string{o}}, resourceDirs},
		{"connectDomains", CSPDomains{ConnectDomains: []string{o}}, []string{"connect-src"}},
		{"frameDomains", CSPDomains{FrameDomains: []string{o}}, []string{"frame-src"}},
		{"baseUriDomains", CSPDomains{BaseURIDomains: []string{o}}, []string{"base-uri"}},
	}
	def := parseCSP(DefaultCSP)
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			got := parseCSP(BuildCSP(tt.d).Header)
			if len(got) != len(def) {
				t.Fatalf("got %d directives, want %d", len(got), len(def))
			}
			for i, d := range got {
				want := def[i].Sources
				if slices.Contains(tt.dirs, d.Name) {
					want = append(slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == "'none'" }), o)
				}
				if d.Name != def[i].Name || !slices.Equal(d.Sources, want) {
					t.Errorf("directive %d = %v, want %s %v", i, d, def[i].Name, want)
				}
			}
		})
	}
}

func TestBuildCSPAcceptsOrigins(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	tests := []struct{ in, want string }{
		{"https://api.example.com", "https://api.example.com"},
		{"https://API.Example.COM", "https://api.example.com"},
		{"HTTPS://api.example.com", "https://api.example.com"},
		{"https://api.example.com/", "https://api.example.com"},
		{"https://api.example.com:8443", "https://api.example.com:8443"},
		{"https://api.example.com:8443/", "https://api.example.com:8443"},
		{"https://api.example.com:1", "https://api.example.com:1"},
		{"https://api.example.com:65535", "https://api.example.com:65535"},
		{"https://*.example.com", "https://*.example.com"},
		{"https://*.cdn.example.com:443", "https://*.cdn.example.com:443"},
		{"https://a-b.c0.example.com", "https://a-b.c0.example.com"},
		{"https://123.example.com", "https://123.example.com"},
		{"https://xn--bcher-kva.example", "https://xn--bcher-kva.example"},
		{"https://" + label63 + ".example.com", "https://" + label63 + ".example.com"},
		// Documented limitation: no public suffix list, so this passes.
		{"https://*.co.uk", "https://*.co.uk"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p := BuildCSP(CSPDomains{ConnectDomains: []string{tt.in}})
			if len(p.Dropped) != 0 {
				t.Fatalf("dropped: %+v", p.Dropped)
			}
			if got := sourcesOf(p.Header, "connect-src"); !slices.Equal(got, []string{tt.want}) {
				t.Errorf("connect-src = %v, want [%s]", got, tt.want)
			}
		})
	}
}

func TestBuildCSPDropsEntries(t *testing.T) {
	tests := []struct {
		in         string
		wantReason string // a part of the reason, showing which rule fired
	}{
		{"", "empty"},
		{"*", "bare wildcard"},
		{"https:", "scheme source"},
		{"data:", "scheme source"},
		{"blob:", "scheme source"},
		{"'self'", "quote"},
		{"'unsafe-eval'", "quote"},
		{"'unsafe-inline'", "quote"},
		{"'none'", "quote"},
		{"'sha256-AAAA'", "quote"},
		{`"https://a.example.com"`, "quote"},
		{"https://a.example.com; script-src *", "';'"},
		{"https://a.example.com;", "';'"},
		{"https://a.example.com,https://b.example.com", "','"},
		{`https://a.example.com\`, "quote"},
		{"https://a.example.com https://b.example.com", "whitespace"},
		{" https://a.example.com", "whitespace"},
		{"https://a.example.com\n", "whitespace"},
		{"https://a.example.com\x00", "control"},
		{"https://a.example.com\x7f", "control"},
		{"https://bücher.example", "non-ASCII"},
		{"http://api.example.com", "http: is not https:"},
		{"HTTP://api.example.com", "http: is not https:"},
		{"wss://rt.example.com", `scheme "wss"`},
		{"ws://rt.example.com", `scheme "ws"`},
		{"ftp://files.example.com", `scheme "ftp"`},
		{"api.example.com", "no https:// scheme"},
		{"//api.example.com", "no https:// scheme"},
		{"javascript:alert(1)", "no https:// scheme"},
		{"https://api.example.com/v1", "path"},
		{"https://api.example.com/v1/", "path"},
		{"https://api.example.com//", "path"},
		{"https://api.example.com?x=1", "query"},
		{"https://api.example.com/#top", "fragment"},
		{"https://user@api.example.com", "user info"},
		{"https://user:pw@api.example.com", "user info"},
		{"https://api.example.com:0", "port"},
		{"https://api.example.com:65536", "port"},
		{"https://api.example.com:080", "port"},
		{"https://api.example.com:*", "port"},
		{"https://api.example.com:", "port"},
		{"https://api.example.com:44a", "port"},
		{"https://api.example.com:443:443", "host name"},
		{"https://", "host name"},
		{"https:///", "host name"},
		{"https://*", "wildcard"},
		{"https://*.", "host name"},
		{"https://*.com", "top-level domain"},
		{"https://*.*.example.com", "wildcard"},
		{"https://a.*.example.com", "wildcard"},
		{"https://*example.com", "wildcard"},
		{"https://localhost", "single-label"},
		{"https://localhost:3000", "single-label"},
		{"https://intranet", "single-label"},
		{"https://app.localhost", ".localhost"},
		{"https://127.0.0.1", "IP address"},
		// The service's own pages may live on http://localhost; a server's
		// declaration never may.
		{"http://localhost:3978", "http: is not https:"},
		{"http://127.0.0.1:3978", "http: is not https:"},
		{"https://10.0.0.1:8080", "IP address"},
		{"https://[::1]", "IP address"},
		{"https://[2001:db8::1]:443", "IP address"},
		{"https://0x7f.1", "start with a letter"},
		{"https://2130706433", "IP address"},
		{"https://example.123", "start with a letter"},
		{"https://-a.example.com", "host name"},
		{"https://a-.example.com", "host name"},
		{"https://a_b.example.com", "host name"},
		{"https://a..example.com", "host name"},
		{"https://example.com.", "host name"},
		{"https://a.example.com%20", "host name"},
		{"https://" + strings.Repeat("a", 64) + ".example.com", "host name"},
		{"https://" + strings.Repeat("a.", 130) + "com", "too long"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%.40q", tt.in), func(t *testing.T) {
			for _, field := range []string{"resourceDomains", "connectDomains", "frameDomains", "baseUriDomains"} {
				var d CSPDomains
				entries := []string{tt.in}
				switch field {
				case "resourceDomains":
					d.ResourceDomains = entries
				case "connectDomains":
					d.ConnectDomains = entries
				case "frameDomains":
					d.FrameDomains = entries
				case "baseUriDomains":
					d.BaseURIDomains = entries
				}
				p := BuildCSP(d)
				if p.Header != DefaultCSP {
					t.Errorf("%s: header changed to\n%s", field, p.Header)
				}
				if len(p.Dropped) != 1 {
					t.Fatalf("%s: Dropped = %+v, want one entry", field, p.Dropped)
				}
				got := p.Dropped[0]
				if got.Field != field || got.Value != textclip.Clip(tt.in, maxDroppedValueBytes) {
					t.Errorf("%s: dropped %+v, want field %s value %q", field, got, field, tt.in)
				}
				if !strings.Contains(got.Reason, tt.wantReason) {
					t.Errorf("%s: reason %q, want it to mention %q", field, got.Reason, tt.wantReason)
				}
			}
		})
	}
}

func TestBuildCSPDeduplicatesAndSorts(t *testing.T) {
	in := []string{"https://b.example.com", "https://A.example.com/", "http://c.example.com", "https://a.example.com", "https://b.example.com"}
	p := BuildCSP(CSPDomains{ConnectDomains: in})
	if got, want := sourcesOf(p.Header, "connect-src"), []string{"https://a.example.com", "https://b.example.com"}; !slices.Equal(got, want) {
		t.Errorf("connect-src = %v, want %v", got, want)
	}
	if len(p.Dropped) != 1 || p.Dropped[0].Value != "http://c.example.com" {
		t.Errorf("Dropped = %+v, want only the http: entry", p.Dropped)
	}
	slices.Reverse(in)
	if again := BuildCSP(CSPDomains{ConnectDomains: in}); again.Header != p.Header {
		t.Errorf("order of declaration changed the header:\n%s\n%s", p.Header, again.Header)
	}
}

func TestBuildCSPBoundsSize(t *testing.T) {
	var many []string
	for i := range MaxDomainsPerField + 8 {
		many = append(many, fmt.Sprintf("https://h%d.example.com", i))
	}
	p := BuildCSP(CSPDomains{FrameDomains: many})
	if got := len(sourcesOf(p.Header, "frame-src")); got != MaxDomainsPerField {
		t.Errorf("frame-src has %d origins, want %d", got, MaxDomainsPerField)
	}
	want := []DroppedEntry{{Field: "frameDomains", Value: "(8 more entries)", Reason: "only the first 32 entries of a field are read"}}
	if diff := cmp.Diff(want, p.Dropped); diff != "" {
		t.Errorf("Dropped (-want +got):\n%s", diff)
	}

	long := "https://a.example.com/" + strings.Repeat("é", 1000)
	p = BuildCSP(CSPDomains{ConnectDomains: []string{long}})
	if len(p.Dropped) != 1 || len(p.Dropped[0].Value) > maxDroppedValueBytes+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(p.Dropped[0].Value, "…")) {
		t.Errorf("dropped value not cut to %d bytes: %d bytes", maxDroppedValueBytes, len(p.Dropped[0].Value))
	}
}

// originRE is the origin grammar as the fuzz test checks it, written
// independently of parseOrigin.
var originRE = regexp.MustCompile(`^https://(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?(:[1-9][0-9]{0,4})?$`)

// FuzzBuildCSP asserts that no declaration can add a directive or a keyword:
// the header always has exactly the fixed directives in order, each with its
// fixed sources, and anything else is an https:// origin in the grammar that
// came from the matching field. Every entry read is either in the header or
// in Dropped, never both, never neither. Each argument is one field, its
// entries separated by NUL.
func FuzzBuildCSP(f *testing.F) {
	f.Add("https://api.example.com\x00wss://rt.example.com", "https://cdn.example.com\x00https://*.cloudflare.com", "https://www.youtube.com", "https://cdn.example.com")
	f.Add("https://a.example.com; script-src 'unsafe-eval'", "'unsafe-eval'\x00*\x00data:", "https://a.example.com, https://b.example.com", "https://a.example.com/x")
	f.Add("HTTPS://A.EXAMPLE.COM/", "https://*.com\x00https://127.0.0.1", "http://localhost:3978", "https://a.example.com:443\x00https://a.example.com:0443")
	f.Add("https://a.example.com\nscript-src *", "https://[::1]", "https://0x7f.1", "https://a..b")

	def := parseCSP(DefaultCSP)
	resourceDirs := []string{"script-src", "style-src", "img-src", "font-src", "media-src"}
	fieldOf := map[string]string{"connect-src": "connectDomains", "frame-src": "frameDomains", "base-uri": "baseUriDomains"}
	for _, d := range resourceDirs {
		fieldOf[d] = "resourceDomains"
	}
	split := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, "\x00")
	}
	normalize := func(e string) string { return strings.TrimSuffix(strings.ToLower(e), "/") }

	f.Fuzz(func(t *testing.T, connect, resource, frame, base string) {
		d := CSPDomains{ConnectDomains: split(connect), ResourceDomains: split(resource), FrameDomains: split(frame), BaseURIDomains: split(base)}
		p := BuildCSP(d)
		declared := map[string][]string{
			"connectDomains": d.ConnectDomains, "resourceDomains": d.ResourceDomains,
			"frameDomains": d.FrameDomains, "baseUriDomains": d.BaseURIDomains,
		}

		for _, r := range p.Header {
			if r < ' ' || r > '~' {
				t.Fatalf("header holds %q: %q", r, p.Header)
			}
		}
		if strings.Contains(p.Header, ",") {
			t.Fatalf("header holds a ',' (a second policy): %q", p.Header)
		}
		got := parseCSP(p.Header)
		if len(got) != len(def) {
			t.Fatalf("header has %d directives, want %d: %q", len(got), len(def), p.Header)
		}
		accepted := map[string][]string{}
		for i, dir := range got {
			if dir.Name != def[i].Name {
				t.Fatalf("directive %d is %q, want %q: %q", i, dir.Name, def[i].Name, p.Header)
			}
			fixed := def[i].Sources
			field, declarable := fieldOf[dir.Name]
			var origins []string
			switch {
			case !declarable:
				if !slices.Equal(dir.Sources, fixed) {
					t.Fatalf("%s = %v, want %v", dir.Name, dir.Sources, fixed)
				}
			case slices.Equal(fixed, []string{"'none'"}):
				// 'none' is replaced by the origins, never mixed with them.
				if slices.Equal(dir.Sources, fixed) {
					break
				}
				origins = dir.Sources
			default:
				if len(dir.Sources) < len(fixed) || !slices.Equal(dir.Sources[:len(fixed)], fixed) {
					t.Fatalf("%s = %v, want it to start with %v", dir.Name, dir.Sources, fixed)
				}
				origins = dir.Sources[len(fixed):]
			}
			for _, o := range origins {
				if !originRE.MatchString(o) || strings.HasSuffix(o, ".localhost") || strings.Contains(o, "'") {
					t.Fatalf("%s holds %q, not an https origin in the grammar", dir.Name, o)
				}
			}
			if !slices.IsSorted(origins) || len(slices.Compact(slices.Clone(origins))) != len(origins) {
				t.Fatalf("%s origins not sorted and unique: %v", dir.Name, origins)
			}
			if prev, ok := accepted[field]; ok && !slices.Equal(prev, origins) {
				t.Fatalf("resource directives differ: %v and %v", prev, origins)
			}
			if declarable {
				accepted[field] = origins
			}
		}
		if strings.Contains(p.Header, " * ") || strings.HasSuffix(p.Header, " *") {
			t.Fatalf("header widened: %q", p.Header)
		}
		// No input adds an origin that is not declared https://: every
		// source is a fixed one of the default, or an origin that some
		// entry of its field, lower-cased, spells exactly.
		for _, dir := range got {
			for _, src := range dir.Sources {
				if slices.Contains(insideOnly, src) {
					continue
				}
				field, ok := fieldOf[dir.Name]
				if !ok || !strings.HasPrefix(src, "https://") {
					t.Fatalf("%s holds %q, neither a fixed source nor a declarable https origin", dir.Name, src)
				}
				if !slices.ContainsFunc(declared[field], func(e string) bool { return normalize(e) == src && strings.HasPrefix(strings.ToLower(e), "https://") }) {
					t.Fatalf("%s holds %q, which no entry of %s declared", dir.Name, src, field)
				}
			}
		}

		// Accounting: each entry read is accepted (its normalized form is in
		// its directives) or dropped, in order; and nothing else is in either.
		for field, entries := range declared {
			var wantDropped []string
			var wantAccepted []string
			for i, e := range entries {
				if i == MaxDomainsPerField {
					wantDropped = append(wantDropped, fmt.Sprintf("(%d more entries)", len(entries)-i))
					break
				}
				if slices.Contains(accepted[field], normalize(e)) {
					wantAccepted = append(wantAccepted, normalize(e))
				} else {
					wantDropped = append(wantDropped, textclip.Clip(e, maxDroppedValueBytes))
				}
			}
			var gotDropped []string
			for _, de := range p.Dropped {
				if de.Field == field {
					gotDropped = append(gotDropped, de.Value)
					if de.Reason == "" {
						t.Errorf("dropped %q without a reason", de.Value)
					}
				}
			}
			if !slices.Equal(gotDropped, wantDropped) {
				t.Fatalf("%s: dropped %q, want %q", field, gotDropped, wantDropped)
			}
			slices.Sort(wantAccepted)
			if got := accepted[field]; !slices.Equal(got, slices.Compact(wantAccepted)) {
				t.Fatalf("%s: header has %q, but the accepted entries are %q", field, got, wantAccepted)
			}
		}
	})
}

// BenchmarkBuildCSP builds the policy of a typical declaration: six entries
// across the four fields, one of them dropped.
func BenchmarkBuildCSP(b *testing.B) {
	d := CSPDomains{
		ResourceDomains: []string{"https://cdn.jsdelivr.net", "https://*.cloudflare.com", "https://fonts.gstatic.com"},
		ConnectDomains:  []string{"https://api.example.com", "wss://realtime.example.com"},
		FrameDomains:    []string{"https://www.youtube.com"},
	}
	b.ReportAllocs()
	for b.Loop() {
		BuildCSP(d)
	}
}

// BenchmarkBuildCSPDefault is the common case: a view that declares nothing.
func BenchmarkBuildCSPDefault(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		BuildCSP(CSPDomains{})
	}
}
