package csp_test

import (
	"errors"
	"strings"
	"testing"

	"teamsbot/internal/web/csp"
)

// A policy is written in the order its directives were added, each value
// once, an empty source list as 'none', an empty sandbox as the bare
// directive (the strictest sandbox, not "sandbox 'none'").
func TestPolicyString(t *testing.T) {
	got := csp.New().
		Add("sandbox").
		Add("default-src").
		Add("script-src", csp.Self, csp.Hash("alert(1)"), csp.Self, csp.Nonce("cmFuZG9t"), csp.UnsafeEval).
		Add("img-src", csp.Self, csp.Data, csp.Blob, csp.Data).
		Add("frame-ancestors", "https://b.example", "https://*.a.example", "https://b.example").
		Add("webrtc", csp.Block).
		Add("require-trusted-types-for", csp.Script).
		Add("trusted-types").
		String()
	want := "sandbox; default-src 'none'; " +
		"script-src 'self' 'sha256-bhHHL3z2vDgxUt0W3dWQOrprscmda2Y5pLsLg4GF+pI=' 'nonce-cmFuZG9t' 'unsafe-eval'; " +
		"img-src 'self' data: blob:; frame-ancestors https://b.example https://*.a.example; " +
		"webrtc 'block'; require-trusted-types-for 'script'; trusted-types 'none'"
	if got != want {
		t.Errorf("policy\n%s\nwant\n%s", got, want)
	}
	if got := new(csp.Policy).String(); got != "" {
		t.Errorf("empty policy %q", got)
	}
}

// Every source expression of CSP3's grammar that the service writes, and
// a few more, is taken as it is.
func TestAddAcceptsSourceExpressions(t *testing.T) {
	for _, src := range []string{
		csp.Self, csp.UnsafeInline, "'strict-dynamic'", "'wasm-unsafe-eval'",
		csp.Hash(""), "'sha384-AAAA'", "'sha512-ab+/cd=='", csp.Nonce("a-b_c=="),
		"data:", "blob:", "https:", "web+app:",
		"*", "example.com", "*.example.com", "https://example.com", "https://*.example.com:8443",
		"https://example.com:*", "https://example.com/path/", "https://example.com/a/b.js",
		"http://127.0.0.1:3978", "http://localhost:3978", "http://[::1]:3978", "https://xn--bcher-kva.example",
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%q refused: %v", src, r)
				}
			}()
			if got := csp.New().Add("connect-src", src).String(); got != "connect-src "+src {
				t.Errorf("%q written as %q", src, got)
			}
		}()
	}
}

// Nothing that is not a source expression gets into a policy: above all
// nothing that ends the directive, starts another header line or reads as
// a keyword it is not. Add panics; CheckSource says why.
func TestAddRefusesWhatIsNotASourceExpression(t *testing.T) {
	for _, src := range []string{
		"", " ", "https://a.example; script-src *", "https://a.example;", "https://a.example,https://b.example",
		"https://a.example\r\nSet-Cookie: x=1", "https://a.example\n", "https://a.example https://b.example",
		"self", "none", "unsafe-inline", "'unsafe'", "'self", "self'", `"self"`, "'none' 'self'",
		"'sha256-'", "'sha256-a;b'", "'sha1-AAAA'", "'nonce-a b'", "'nonce-'",
		"https://", "https://a.example:", "https://a.example:8x", "https://a..example", "https://a.example/p;q",
		"https://a.example/p'q", "https://[::1", "https://[zz]:1", "https://a.example//p", "1http://a.example",
		"https://a.exámple", "https://a.example/\x00",
	} {
		if err := csp.CheckSource(src); err == nil || !errors.Is(err, csp.ErrInvalid) {
			t.Errorf("CheckSource(%q) = %v, want ErrInvalid", src, err)
		}
		if !panics(func() { csp.New().Add("script-src", src) }) {
			t.Errorf("Add took %q", src)
		}
	}
}

// The other directives take only their own values, and a policy holds
// each directive once.
func TestAddRefusesMisuse(t *testing.T) {
	for name, add := range map[string]func(){
		"unknown directive":          func() { csp.New().Add("scripts-src", csp.Self) },
		"a directive twice":          func() { csp.New().Add("img-src", csp.Self).Add("img-src", csp.Data) },
		"'none' with other sources":  func() { csp.New().Add("img-src", csp.None, csp.Self) },
		"an unknown sandbox flag":    func() { csp.New().Add("sandbox", "allow-everything") },
		"a source as a sandbox flag": func() { csp.New().Add("sandbox", csp.Self) },
		"webrtc without a value":     func() { csp.New().Add("webrtc") },
		"webrtc 'maybe'":             func() { csp.New().Add("webrtc", "'maybe'") },
		"webrtc twice over":          func() { csp.New().Add("webrtc", csp.Block, "'allow'") },
		"trusted types for 'style'":  func() { csp.New().Add("require-trusted-types-for", "'style'") },
		"a policy name with ';'":     func() { csp.New().Add("trusted-types", "a;b") },
		"a nonce that is no base64":  func() { csp.Nonce("a'b") },
		"a name in upper case":       func() { csp.New().Add("Default-Src") },
	} {
		if !panics(add) {
			t.Errorf("%s: no panic", name)
		}
	}
}

// Parse reads back what String wrote, byte for byte, and checks what it
// reads as Add does.
func TestParse(t *testing.T) {
	text := "default-src 'none'; script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data: https://cdn.example.com; " +
		"connect-src https://api.example.com:8443; frame-src 'none'; sandbox allow-scripts allow-forms; webrtc 'block'"
	p, err := csp.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != text {
		t.Errorf("Parse then String:\n%s\nwant\n%s", p.String(), text)
	}
	p, err = csp.Parse("  DEFAULT-SRC   'none' ;; img-src\t'self'  data: ; ")
	if err != nil || p.String() != "default-src 'none'; img-src 'self' data:" {
		t.Errorf("Parse of spaced text: %q %v", p, err)
	}
	if p, err := csp.Parse(""); err != nil || p.String() != "" {
		t.Errorf("Parse of nothing: %q %v", p, err)
	}
	for _, bad := range []string{
		"default-src 'none'\r\nX-Injected: 1", "default-src 'none'; script-src self", "default-src 'none'; report-uri /r",
		"img-src 'none' data:", "sandbox allow-all", "default-src 'none'; script-src https://a.example/\x00",
		"default-src 'nonë'", "default-src 'none';\nscript-src 'self'", "img-src 'self'\rdata:",
	} {
		if _, err := csp.Parse(bad); !errors.Is(err, csp.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

// Of two directives of one name a browser keeps the first, and so do
// Parse and Append: what a policy says first cannot be loosened by what
// comes after it.
func TestFirstDirectiveWins(t *testing.T) {
	stored, err := csp.Parse("default-src 'none'; sandbox allow-scripts allow-same-origin; default-src *")
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.String(); got != "default-src 'none'; sandbox allow-scripts allow-same-origin" {
		t.Errorf("parsed %q", got)
	}
	got := csp.New().Add("sandbox", "allow-scripts").Add("webrtc", csp.Block).Append(stored).String()
	if got != "sandbox allow-scripts; webrtc 'block'; default-src 'none'" {
		t.Errorf("appended %q", got)
	}
}

// Whatever Parse accepts is written back as a policy with no line break
// or control character, each directive once, and reads back the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"default-src 'none'; script-src 'self' https://cdn.example.com",
		"sandbox allow-scripts; webrtc 'block'; default-src 'none'",
		"img-src data: blob: https://*.example.com:443/a/b; trusted-types a#b 'allow-duplicates'",
		"script-src 'sha256-AAAA' 'nonce-abc=='; frame-ancestors 'none'",
		"default-src 'none'\nx", "connect-src https://a.example;script-src *",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := csp.Parse(text)
		if err != nil {
			return
		}
		out := p.String()
		seen := map[string]bool{}
		for d := range strings.SplitSeq(out, "; ") {
			name, _, _ := strings.Cut(d, " ")
			if seen[name] {
				t.Fatalf("%q twice in %q", name, out)
			}
			seen[name] = true
		}
		for i := 0; i < len(out); i++ {
			if out[i] < ' ' || out[i] >= 0x7f || out[i] == ',' {
				t.Fatalf("byte %#x in %q (from %q)", out[i], out, text)
			}
		}
		again, err := csp.Parse(out)
		if err != nil || again.String() != out {
			t.Fatalf("%q read back as %v %v", out, again, err)
		}
	})
}

func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}
