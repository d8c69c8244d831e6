package cards

import (
	"testing"

	"teamsbot/internal/netaddr"
)

// TestViewURL: the Open button's address comes only from an https:// public
// base URL and the escaped view id. What counts as a valid base URL is
// netaddr's rule, tested there; the configuration refuses everything else
// before a card is ever made.
func TestViewURL(t *testing.T) {
	cases := []struct {
		base, id string
		want     string // "" means no button
	}{
		{"https://bot.example.com", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"https://bot.example.com/", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"HTTPS://Bot.Example.com", "v1", "https://bot.example.com/mcp-apps/v1"},
		{"HtTpS://bot.example.com:8443/", "v1", "https://bot.example.com:8443/mcp-apps/v1"},
		{"https://[::1]:8443", "v1", "https://[::1]:8443/mcp-apps/v1"},
		// The id is one path segment, whatever it holds.
		{"https://bot.example.com", "../admin", "https://bot.example.com/mcp-apps/..%2Fadmin"},
		{"https://bot.example.com", "a?b#c", "https://bot.example.com/mcp-apps/a%3Fb%23c"},
		{"https://bot.example.com", "a/b", "https://bot.example.com/mcp-apps/a%2Fb"},
		{"https://bot.example.com", "..", ""},
		{"https://bot.example.com", ".", ""},
		{"https://bot.example.com", "", ""},
		// Not https: no button.
		{"http://localhost:3978", "v1", ""},
		{"http://127.0.0.1:3978", "v1", ""},
		{"", "v1", ""},
	}
	for _, c := range cases {
		var base netaddr.Origin
		if c.base != "" {
			base = netaddr.MustParseOrigin(c.base)
		}
		got, ok := ViewURL(base, c.id)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ViewURL(%q, %q) = %q, %v; want %q", c.base, c.id, got, ok, c.want)
		}
	}
}

// TestConnectURL: the Connect button's address follows ViewURL's rule:
// only an https:// public base URL, and the request id as one escaped path
// segment under /mcp-auth/connect/.
func TestConnectURL(t *testing.T) {
	cases := []struct {
		base, id string
		want     string // "" means no button
	}{
		{"https://bot.example.com", "c-4d2e", "https://bot.example.com/mcp-auth/connect/c-4d2e"},
		{"HTTPS://Bot.Example.com:8443/", "c1", "https://bot.example.com:8443/mcp-auth/connect/c1"},
		{"https://bot.example.com", "../../mcp-apps/v1", "https://bot.example.com/mcp-auth/connect/..%2F..%2Fmcp-apps%2Fv1"},
		{"https://bot.example.com", "a?next=https://evil.example#x", "https://bot.example.com/mcp-auth/connect/a%3Fnext=https:%2F%2Fevil.example%23x"},
		{"https://bot.example.com", "a b\u00e9", "https://bot.example.com/mcp-auth/connect/a%20b%C3%A9"},
		{"https://bot.example.com", "..", ""},
		{"https://bot.example.com", ".", ""},
		{"https://bot.example.com", "", ""},
		{"http://localhost:3978", "c1", ""},
		{"", "c1", ""},
	}
	for _, c := range cases {
		var base netaddr.Origin
		if c.base != "" {
			base = netaddr.MustParseOrigin(c.base)
		}
		got, ok := ConnectURL(base, c.id)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ConnectURL(%q, %q) = %q, %v; want %q", c.base, c.id, got, ok, c.want)
		}
	}
}
