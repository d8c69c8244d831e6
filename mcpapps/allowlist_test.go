package mcpapps

import (
	"regexp"
	"testing"
)

// A view's Connection-Allowlist names its own origin and exactly the
// origins its CSP lets it load from, connect to or frame: nothing for a
// view that declared nothing, and never a base-uri origin (no connection)
// or a dropped entry.
func TestConnectionAllowlist(t *testing.T) {
	cases := []struct {
		name string
		csp  string
		want string
	}{
		{"nothing declared", DefaultCSP, "(response-origin)"},
		{"every field", BuildCSP(CSPDomains{
			ResourceDomains: []string{"https://cdn.example.com", "https://*.fonts.example"},
			ConnectDomains:  []string{"https://api.example.com:8443", "http://insecure.example.com"},
			FrameDomains:    []string{"https://player.example"},
			BaseURIDomains:  []string{"https://base.example"},
		}).Header, `(response-origin "https://*.fonts.example" "https://api.example.com:8443" "https://cdn.example.com" "https://player.example")`},
		{"one origin in several directives is listed once", BuildCSP(CSPDomains{
			ResourceDomains: []string{"https://same.example"}, ConnectDomains: []string{"https://same.example"},
		}).Header, `(response-origin "https://same.example")`},
		// A stored policy is the service's own, but the header is a
		// structured field: nothing but a checked origin may reach it.
		{"hostile sources in a stored policy", `default-src 'none'; connect-src https://ok.example https://x.example") ; webrtc=allow ("; ` +
			`img-src https://a"b.example https://c.example/path https://10.0.0.1 https://*.example; base-uri https://base.example`,
			`(response-origin "https://ok.example")`},
	}
	shape := regexp.MustCompile(`^\(response-origin( "https://(\*\.)?[a-z0-9.-]+(:[0-9]+)?")*\)$`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ConnectionAllowlist(c.csp)
			if got != c.want {
				t.Errorf("ConnectionAllowlist(%q)\n got %s\nwant %s", c.csp, got, c.want)
			}
			if !shape.MatchString(got) {
				t.Errorf("%s is not an inner list of origins", got)
			}
		})
	}
}

// Whatever a server declares, the allowlist is an inner list of checked
// origins, each of which the view's CSP allows.
func FuzzConnectionAllowlist(f *testing.F) {
	f.Add("https://cdn.example.com", "https://api.example.com:8443", "https://*.player.example")
	f.Add(`https://a.example") ; webrtc=allow`, "javascript:alert(1)", "https://b.example/(")
	shape := regexp.MustCompile(`^\(response-origin( "https://(\*\.)?[a-z0-9.-]+(:[0-9]+)?")*\)$`)
	f.Fuzz(func(t *testing.T, resource, connect, frame string) {
		p := BuildCSP(CSPDomains{ResourceDomains: []string{resource}, ConnectDomains: []string{connect}, FrameDomains: []string{frame}})
		got := ConnectionAllowlist(p.Header)
		if !shape.MatchString(got) {
			t.Fatalf("allowlist %q from policy %q", got, p.Header)
		}
	})
}
