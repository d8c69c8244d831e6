package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3},
		{"model", "model", 0}, {"modle", "model", 1}, {"mdoel", "model", 1},
		{"kitten", "sitting", 3}, {"manfest", "manifest", 1},
		{"TICKETIQ_PUBLIC_BASEURL", "TICKETIQ_PUBLIC_BASE_URL", 1},
		{"ca", "abc", 3}, {"héllo", "hello", 1},
	} {
		if got := Distance(c.a, c.b); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := Distance(c.b, c.a); got != c.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}

func TestClosest(t *testing.T) {
	keys := []string{"kind", "baseURL", "model", "apiKeyEnv", "apiVersion", "azure", "timeout", "maxToolRounds"}
	for typed, want := range map[string]string{
		"modle": "model", "Model": "model", "baseurl": "baseURL", "base_url": "baseURL", "tiemout": "timeout",
		"maxToolRound": "maxToolRounds", "apikeyenv": "apiKeyEnv",
		"x": "", "colour": "", "servers": "", "kidn": "kind",
	} {
		got, ok := Closest(typed, keys)
		if got != want || ok != (want != "") {
			t.Errorf("Closest(%q) = %q, %v; want %q", typed, got, ok, want)
		}
	}
	if got, _ := Closest("manfest", []string{"serve", "config", "manifest", "keys", "migrate", "version", "help"}); got != "manifest" {
		t.Errorf("Closest(manfest) = %q", got)
	}
	if got, ok := Closest("model", []string{"model"}); ok {
		t.Errorf("a known word suggests itself: %q", got)
	}
}
