package cards

import "testing"

// TestViewURL: the Open button's address comes only from an https:// public
// base URL and the escaped view id.
func TestViewURL(t *testing.T) {
	cases := []struct {
		base, id string
		want     string // "" means no button
	}{
		{"https://bot.example.com", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"https://bot.example.com/", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"https://bot.example.com///", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"https://bot.example.com/teams/", "v1", "https://bot.example.com/teams/mcp-apps/v1"},
		{"HTTPS://bot.example.com", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"HtTpS://bot.example.com:8443/", "v1", "https://bot.example.com:8443/mcp-apps/v1"},
		{"  https://bot.example.com  ", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"https://[::1]:8443", "v1", "https://[::1]:8443/mcp-apps/v1"},
		{"https://bot.example.com/a%20b/", "v1", "https://bot.example.com/a%20b/mcp-apps/v1"},
		// The id is one path segment, whatever it holds.
		{"https://bot.example.com", "../admin", "https://bot.example.com/mcp-apps/..%2Fadmin"},
		{"https://bot.example.com", "a?b#c", "https://bot.example.com/mcp-apps/a%3Fb%23c"},
		{"https://bot.example.com", "a/b", "https://bot.example.com/mcp-apps/a%2Fb"},
		{"https://bot.example.com", "..", ""},
		{"https://bot.example.com", ".", ""},
		{"https://bot.example.com", "", ""},
		// Not an https address with a host: no button.
		{"http://localhost:3978", "v1", ""},
		{"http://bot.example.com", "v1", ""},
		{"https:", "v1", ""},
		{"https://", "v1", ""},
		{"https:///path", "v1", ""},
		{"https://:443", "v1", ""},
		{"https:bot.example.com", "v1", ""},
		{"bot.example.com", "v1", ""},
		{"//bot.example.com", "v1", ""},
		{"", "v1", ""},
		{"ftp://bot.example.com", "v1", ""},
		{"javascript:alert(1)", "v1", ""},
		{"https://user:pass@bot.example.com", "v1", ""},
		{"https://bot.example.com/?x=1", "v1", ""},
		{"https://bot.example.com/?", "v1", ""},
		{"https://bot.example.com/#frag", "v1", ""},
		{"https://bot.example.com:port", "v1", ""},
		{"https://bot example.com", "v1", ""},
	}
	for _, c := range cases {
		got, ok := ViewURL(c.base, c.id)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ViewURL(%q, %q) = %q, %v; want %q", c.base, c.id, got, ok, c.want)
		}
	}
}
