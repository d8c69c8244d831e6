package netaddr

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestIsLoopbackHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.8.9.10", true},
		{"::1", true},
		{"[::1]", true},
		{"::ffff:127.0.0.1", true},
		{"", false},
		{"0.0.0.0", false},
		{"::", false},
		{"[::]", false},
		{"10.0.0.1", false},
		{"192.168.1.1", false},
		{"evil.localhost", false},
		{"localhost.evil.com", false},
		{"127.0.0.1.nip.io", false},
		{"bot.example.com", false},
		{"fe80::1%lo", false},
		{"2130706433", false}, // 127.0.0.1 as a number: a name, not a literal
	} {
		if got := IsLoopbackHost(tc.host); got != tc.want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestIsLoopbackHostPortAndRemote(t *testing.T) {
	for _, tc := range []struct {
		in               string
		hostPort, remote bool
	}{
		{"127.0.0.1:3978", true, true},
		{"[::1]:3978", true, true},
		{"localhost:3978", true, false}, // a peer address is always an IP
		{"localhost", true, false},
		{"10.1.2.3:443", false, false},
		{"bot.example.com:443", false, false},
		{"", false, false},
	} {
		if got := IsLoopbackHostPort(tc.in); got != tc.hostPort {
			t.Errorf("IsLoopbackHostPort(%q) = %v, want %v", tc.in, got, tc.hostPort)
		}
		if got := IsLoopbackRemote(tc.in); got != tc.remote {
			t.Errorf("IsLoopbackRemote(%q) = %v, want %v", tc.in, got, tc.remote)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     string // "" means refused
		why      string // part of the error
		https    bool
		loopback bool
	}{
		{in: "https://bot.example.com", want: "https://bot.example.com", https: true},
		{in: "https://bot.example.com/", want: "https://bot.example.com", https: true},
		{in: "HTTPS://Bot.Example.COM:8443", want: "https://bot.example.com:8443", https: true},
		{in: "https://bot.example.com:443", want: "https://bot.example.com", https: true},
		{in: " https://bot.example.com ", want: "https://bot.example.com", https: true},
		{in: "http://localhost:3978", want: "http://localhost:3978", loopback: true},
		{in: "http://127.0.0.1:3978/", want: "http://127.0.0.1:3978", loopback: true},
		{in: "http://[::1]:3978", want: "http://[::1]:3978", loopback: true},
		{in: "https://localhost:8443", want: "https://localhost:8443", https: true, loopback: true},
		{in: "https://127.0.0.1:8443", want: "https://127.0.0.1:8443", https: true, loopback: true},
		{in: "https://xn--bcher-kva.example", want: "https://xn--bcher-kva.example", https: true},
		{in: "https://10.0.0.5", why: "an IP address"},
		{in: "https://[2001:db8::1]", why: "an IP address"},
		{in: "https://*.example.com", why: "not a valid host name"},
		{in: "https://teamsbot", why: "single-label"},
		{in: "https://bot.example.123", why: "last label must start with a letter"},
		{in: "https://bot.localhost", why: ".localhost"},
		{in: "https://-bot.example.com", why: "not a valid host name"},
		{in: "", why: "empty"},
		{in: "http://bot.example.com", why: "http:// is allowed only for localhost"},
		{in: "http://evil.localhost:3978", why: ".localhost"},
		{in: "http://10.0.0.5:3978", why: "an IP address"},
		{in: "https://bot.example.com/teams", why: "has a path"},
		{in: "https://bot.example.com/?x=1", why: "has a query"},
		{in: "https://bot.example.com?token=s3cret", why: "has a query"},
		{in: "https://bot.example.com#top", why: "fragment"},
		{in: "https://user:pass@bot.example.com", why: "credentials"},
		{in: "ftp://bot.example.com", why: "want an https://"},
		{in: "bot.example.com", why: "want an https://"},
		{in: "https://", why: "no host"},
		{in: "https:bot.example.com", why: "no host"},
		{in: "https://bot.example.com:0", why: "invalid port"},
		{in: "https://bot.example.com:99999", why: "invalid port"},
		{in: "https://bot.example.com:08443", why: "invalid port"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			o, err := ParseOrigin(tc.in)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("ParseOrigin(%q) = %v, want an error", tc.in, o)
				}
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("error %q: want ErrInvalid saying %q", err, tc.why)
				}
				if strings.Contains(err.Error(), "pass") || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("error %q shows a credential", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseOrigin(%q): %v", tc.in, err)
			}
			if o.String() != tc.want || o.HTTPS() != tc.https || o.Loopback() != tc.loopback {
				t.Fatalf("ParseOrigin(%q) = %q https=%v loopback=%v, want %q %v %v",
					tc.in, o, o.HTTPS(), o.Loopback(), tc.want, tc.https, tc.loopback)
			}
			if o.URL("/mcp-apps/x") != tc.want+"/mcp-apps/x" {
				t.Fatalf("URL = %q", o.URL("/mcp-apps/x"))
			}
		})
	}
	var zero Origin
	if !zero.IsZero() || zero.String() != "" || zero.Loopback() || zero.HTTPS() {
		t.Fatal("the zero Origin must be unset, not loopback, not https")
	}
}

func TestParseListen(t *testing.T) {
	for _, tc := range []struct {
		in       string
		ok       bool
		loopback bool
		str      string
	}{
		{":3978", true, false, ":3978"},
		{"0.0.0.0:3978", true, false, "0.0.0.0:3978"},
		{"[::]:3978", true, false, "[::]:3978"},
		{"127.0.0.1:3978", true, true, "127.0.0.1:3978"},
		{"localhost:0", true, true, "localhost:0"},
		{"[::1]:3978", true, true, "[::1]:3978"},
		{"10.0.0.1:80", true, false, "10.0.0.1:80"},
		{"127.0.0.1:0080", true, true, "127.0.0.1:80"},
		{":00", true, false, ":0"},
		{"3978", false, false, ""},
		{"localhost:http", false, false, ""},
		{"localhost:70000", false, false, ""},
		{"", false, false, ""},
	} {
		l, err := ParseListen(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("ParseListen(%q) error = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("ParseListen(%q): %v does not wrap ErrInvalid", tc.in, err)
			}
			continue
		}
		if l.Loopback() != tc.loopback || l.String() != tc.str {
			t.Errorf("ParseListen(%q) = %q loopback=%v, want %q %v", tc.in, l, l.Loopback(), tc.str, tc.loopback)
		}
	}
}

func TestParseURLAndRedact(t *testing.T) {
	for _, tc := range []struct {
		in, why, redacted string
	}{
		{in: "https://login.botframework.com/v1/.well-known/openidconfiguration", redacted: "https://login.botframework.com/[redacted]"},
		{in: "http://crm.internal:8080/mcp", redacted: "http://crm.internal:8080/[redacted]"},
		{in: "https://graph.microsoft.com", redacted: "https://graph.microsoft.com"},
		{in: "https://user:pass@host.example.com/x", why: "credentials", redacted: "https://host.example.com/[redacted]"},
		{in: "ftp://host.example.com", why: "want an absolute", redacted: "ftp://host.example.com"},
		{in: "/relative", why: "want an absolute", redacted: "[redacted]"},
		{in: "https:///nohost", why: "no host", redacted: "[redacted]"},
	} {
		_, err := ParseURL(tc.in)
		switch {
		case tc.why == "" && err != nil:
			t.Errorf("ParseURL(%q): %v", tc.in, err)
		case tc.why != "" && (err == nil || !strings.Contains(err.Error(), tc.why)):
			t.Errorf("ParseURL(%q) = %v, want an error saying %q", tc.in, err, tc.why)
		case err != nil && strings.Contains(err.Error(), "pass"):
			t.Errorf("ParseURL(%q) error %q shows the password", tc.in, err)
		}
		if got := Redact(tc.in); got != tc.redacted {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.redacted)
		}
	}
}

func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"https://crm.example.com/mcp", "https://crm.example.com/other?x=1", true},
		{"https://crm.example.com/mcp", "https://CRM.example.com:443/mcp", true},
		{"http://127.0.0.1/x", "http://127.0.0.1:80/y", true},
		{"http://127.0.0.1:8080/x", "http://127.0.0.1:8081/x", false},
		{"https://crm.example.com/mcp", "http://crm.example.com/mcp", false},
		{"https://crm.example.com/mcp", "https://evil.example.com/mcp", false},
		{"https://crm.example.com/mcp", "https://sub.crm.example.com/mcp", false},
		{"http://127.0.0.1:8080/", "http://localhost:8080/", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := SameOrigin(a, b); got != c.want {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestSameOriginRedirects(t *testing.T) {
	first, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/x", nil)
	same, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v2/x", nil)
	other, _ := http.NewRequest(http.MethodGet, "https://api.example.com:8443/v1/x?key=secret", nil)
	if err := SameOriginRedirects(same, []*http.Request{first}); err != nil {
		t.Errorf("same origin: %v", err)
	}
	err := SameOriginRedirects(other, []*http.Request{first})
	if !errors.Is(err, ErrCrossOriginRedirect) || strings.Contains(err.Error(), "secret") {
		t.Errorf("another port: %v", err)
	}
	many := make([]*http.Request, 10)
	for i := range many {
		many[i] = first
	}
	if err := SameOriginRedirects(same, many); err == nil {
		t.Errorf("the 11th redirect was followed")
	}
}

func TestRedactUserinfo(t *testing.T) {
	for in, want := range map[string]string{
		`TICKETIQ_ADDR: "https://admin:pa55@db.example.com:5432/x" is not host:port`: `TICKETIQ_ADDR: "https://[redacted]@db.example.com:5432/x" is not host:port`,
		"open postgres://u:p@h/db: no such file":                                     "open postgres://[redacted]@h/db: no such file",
		"two: http://a:b@x and https://c@y/z?q=1":                                    "two: http://[redacted]@x and https://[redacted]@y/z?q=1",
		"mail me: ann@example.com, see https://example.com/@ann":                     "mail me: ann@example.com, see https://example.com/@ann",
		"no url here": "no url here",
	} {
		if got := RedactUserinfo(in); got != want {
			t.Errorf("RedactUserinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactURLCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://login.example.com/token?client_secret=s": "https://login.example.com/token?[redacted]",
		"https://u:p@crm.example.com/mcp":                 "https://[redacted]@crm.example.com/mcp",
		"https://graph.example.com/v1.0":                  "https://graph.example.com/v1.0",
		"https://login.example.com/{tenant}/token":        "https://login.example.com/{tenant}/token",
		"not a url, x://u:p@h":                            "not a url, x://[redacted]@h",
		"":                                                "",
	} {
		if got := RedactURLCredentials(in); got != want {
			t.Errorf("RedactURLCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}
