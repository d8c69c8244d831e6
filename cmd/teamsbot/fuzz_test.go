package main

import (
	"os"
	"path/filepath"
	"testing"

	"teamsbot/internal/netaddr"
)

// Whatever the configuration file and the address variables hold, the
// parser answers with a configuration or an error, never a panic; an
// accepted configuration has an agent, and the error as printed shows no
// URL's user info.
func FuzzConfig(f *testing.F) {
	path := filepath.Join(f.TempDir(), "agents.yaml")
	f.Add("agents:\n  - id: default\n    servers:\n      - name: demo\n        builtin: demo\n", ":3978", "")
	f.Add("agents:\n  - id: a\n    model: {kind: openai, baseURL: \"https://u:pa55@h.example.com/v1\", model: m, apiKeyEnv: K}\n    servers:\n      - name: crm\n        url: https://crm.example.com/mcp\n        headers: {Authorization: \"Bearer ${TOKEN}\"}\n        timeout: 30s\n", "127.0.0.1:0", "127.0.0.1:9090")
	f.Add("agents:\n  - id: a\n    servers:\n      - name: s\n        command: [npx, x]\n        env: {A: b}\n    rules: {denyTools: [s/x], redact: [\"(\"]}\n", "host", "https://a:b@c:1")
	f.Add("{\"agents\": [{\"id\": \"x\", \"servers\": [{\"name\": \"a\", \"url\": \"ftp://x\"}]}]}", ":99999", ":3978")
	f.Add("agents: &a [*a]\n", "", "")
	f.Add("unknown: 1\nagents: []\n", "[::1]:0", "")
	f.Add("\t- : :\n", "::", "x:y")
	// The walk beside the Go types, and the search for a syntax mistake's
	// line: repeated keys, merge keys, aliases into lists and maps, kinds
	// that do not fit, a mistake below a list over several lines.
	f.Add("agents:\n  - id: a\n    id: b\n    modle: {kind: openai}\n    model: {maxToolRounds: many, timeout: [1]}\n", "127.0.0.1:0", "")
	f.Add("base: &b {name: d, builtin: demo}\nagents:\n  - id: a\n    servers:\n      - <<: *b\n        timeout: 5s\n      - <<: [*b, {name: e}]\n", "", "")
	f.Add("agents: &a\n  - id: a\n    servers: *a\n    rules: {denyTools: *a}\n", "", "")
	f.Add("agents:\n  - id: a\n    servers: [\n      {name: d, builtin: demo}]\n    name: b\n   rules: {}\n", "", "")
	f.Add("agents:\n  - {id: a, servers: {name: d}, rules: [x], model: openai}\n  - 5\n  - [a]\n", "", "")
	f.Add("agents:\n  - id: a\n    servers:\n      - name: s\n        url: https://h.example/mcp\n        headers: {A: [1], ? [k] : v}\n", "", "")
	f.Fuzz(func(t *testing.T, file, addr, metricsAddr string) {
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"TICKETIQ_CONFIG": path, "TICKETIQ_ADDR": addr, "TICKETIQ_METRICS_ADDR": metricsAddr, "TOKEN": "t", "K": "k"}
		cfg, err := loadConfig(envOf(env))
		if err != nil {
			shown := redactedError(err).Error()
			if netaddr.RedactUserinfo(shown) != shown {
				t.Fatalf("the error shows a URL's user info: %s", shown)
			}
			return
		}
		if len(cfg.Agents.Agents) == 0 {
			t.Fatalf("accepted a configuration without agents: %q", file)
		}
	})
}
