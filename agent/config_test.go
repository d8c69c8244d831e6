package agent_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"teamsbot/agent"
)

// The example of DESIGN.md "The configuration file", with rules added.
const designExample = `
agents:
  - id: default
    name: Assistant
    model:
      kind: builtin
    servers:
      - name: demo
        builtin: demo
      - name: crm
        url: https://crm.example.com/mcp
        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
      - name: debug
        command: [npx, "@modelcontextprotocol/server-debug", "--stdio"]
        env: {DEBUG_LOG_FILE: debug-log.jsonl}
        timeout: 30s
    rules:
      denyTools: [crm/delete_customer]
      redact: ['\b\d{3}-\d{2}-\d{4}\b']
  - id: sales
    name: Sales bot
    model: {kind: openai, baseURL: "https://example.openai.azure.com/openai/deployments/gpt4o", model: gpt-4o, apiKeyEnv: AZURE_OPENAI_KEY, apiVersion: "2024-10-21"}
    servers:
      - {name: demo, builtin: demo}
roles:
  admins: [someone]
`

func TestLoadConfigDesignExample(t *testing.T) {
	cfg, err := agent.LoadConfig([]byte(designExample), getenv(map[string]string{"CRM_TOKEN": "s3cret"}))
	if err != nil {
		t.Fatalf("LoadConfig: %v", err)
	}
	if len(cfg.Agents) != 2 {
		t.Fatalf("agents = %d", len(cfg.Agents))
	}
	a := cfg.Agents[0]
	if got := a.Servers[1].Headers["Authorization"]; got != "Bearer s3cret" {
		t.Errorf("header = %q, want ${CRM_TOKEN} expanded", got)
	}
	if a.Servers[2].Command[1] != "@modelcontextprotocol/server-debug" || a.Servers[2].Env["DEBUG_LOG_FILE"] != "debug-log.jsonl" || a.Servers[2].Timeout != "30s" {
		t.Errorf("stdio server = %+v", a.Servers[2])
	}
	if diff := cmp.Diff(agent.RulesConfig{DenyTools: []string{"crm/delete_customer"}, Redact: []string{`\b\d{3}-\d{2}-\d{4}\b`}}, a.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if m := cfg.Agents[1].Model; m.Kind != "openai" || m.APIVersion != "2024-10-21" || m.Model != "gpt-4o" {
		t.Errorf("model = %+v", m)
	}
	if h := cfg.Redacted().Agents[0].Servers[1].Headers["Authorization"]; strings.Contains(h, "s3cret") {
		t.Errorf("Redacted keeps the header: %q", h)
	}
	if cfg.Agents[0].Servers[1].Headers["Authorization"] != "Bearer s3cret" {
		t.Errorf("Redacted changed the original")
	}
}

// The cmd decodes the whole file strictly by embedding Config inline.
func TestConfigEmbedsInWholeFile(t *testing.T) {
	var file struct {
		agent.Config `yaml:",inline"`
		Roles        map[string][]string `yaml:"roles"`
	}
	dec := yaml.NewDecoder(strings.NewReader(designExample))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("decode: %v", err)
	}
	if err := file.Config.Resolve(getenv(map[string]string{"CRM_TOKEN": "x"})); err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if len(file.Agents) != 2 || len(file.Roles["admins"]) != 1 {
		t.Errorf("decoded %+v", file)
	}
}

func TestLoadConfigWithoutAgentsIsDefault(t *testing.T) {
	for _, data := range []string{"", "roles: {}\n"} {
		cfg, err := agent.LoadConfig([]byte(data), nil)
		if err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if diff := cmp.Diff(agent.DefaultConfig(), cfg); diff != "" {
			t.Errorf("%q (-want +got):\n%s", data, diff)
		}
	}
	d := agent.DefaultConfig().Agents[0]
	if d.ID != "default" || d.Name != "Assistant" || d.Model.Kind != "builtin" || d.Servers[0].Builtin != "demo" {
		t.Errorf("DefaultConfig = %+v", d)
	}
}

func TestLoadConfigJSON(t *testing.T) {
	cfg, err := agent.LoadConfig([]byte(`{"agents": [{"id": "a", "servers": [{"name": "s", "url": "http://127.0.0.1:9/mcp", "timeout": "5s"}]}]}`), nil)
	if err != nil || cfg.Agents[0].Servers[0].URL != "http://127.0.0.1:9/mcp" {
		t.Errorf("LoadConfig JSON: %+v, %v", cfg, err)
	}
}

// Unknown keys are rejected with the key and its line.
func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	_, err := agent.LoadConfig([]byte("agents:\n  - id: a\n    servers:\n      - name: s\n        builtin: demo\n        tiemout: 3s\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `line 6: unknown key "tiemout" in server`) {
		t.Errorf("err = %v", err)
	}
}

// Every mistake is reported at once.
func TestLoadConfigReportsAllMistakes(t *testing.T) {
	data := `
agents:
  - id: a
    name: Same
    model: {kind: openai}
    servers:
      - name: s
      - name: s
        builtin: demo
        url: https://x.example/mcp
      - name: t
        builtin: nope
      - name: u
        url: "ftp://x.example"
      - name: v
        command: [prog]
        timeout: soon
      - name: w
        url: https://x.example/mcp
        headers: {Authorization: "Bearer ${MISSING}"}
    rules:
      redact: ['(']
  - id: a
    name: Same
    model: {kind: magic}
`
	_, err := agent.LoadConfig([]byte(data), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		"agents[0].model.model: missing",
		"servers[0] (s): set one of builtin, url or command",
		`servers[1] (s).name "s": already used`,
		"servers[1] (s): set only one of builtin, url or command",
		`builtin "nope": unknown`,
		"want an absolute http:// or https:// URL",
		`bad timeout "soon"`,
		"${MISSING}, which is not set",
		"rules.redact[0]",
		`agents[1].id "a": already used`,
		`agents[1].name "Same": already used`,
		`kind "magic"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// A URL may carry a secret once ${VAR} is expanded (a token in its query or
// path, a password): a mistake in it is reported without the URL, and
// Redacted shows only its scheme and host.
func TestConfigNeverShowsURLSecrets(t *testing.T) {
	env := getenv(map[string]string{"TOKEN": "s3cret"})
	for _, url := range []string{"ftp://crm.example.com/mcp?key=${TOKEN}", "https://user:${TOKEN}@/mcp", "https://a b.example/%zz?k=${TOKEN}", "https://user:${TOKEN}@crm.example.com/mcp"} {
		data := "agents:\n  - id: a\n    servers:\n      - name: crm\n        url: \"" + url + "\"\n"
		_, err := agent.LoadConfig([]byte(data), env)
		if err == nil || !strings.Contains(err.Error(), "invalid address") {
			t.Errorf("%s: err = %v, want a bad URL", url, err)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the secret: %v", url, err)
		}
	}

	data := `
agents:
  - id: a
    model: {kind: openai, model: m, baseURL: "https://llm.example.com/v1?api-key=s3cret"}
    servers:
      - name: crm
        url: "https://crm.example.com/mcp/${TOKEN}?key=${TOKEN}&tenant=t1"
`
	cfg, err := agent.LoadConfig([]byte(data), env)
	if err != nil {
		t.Fatal(err)
	}
	red := cfg.Redacted()
	printed, _ := yaml.Marshal(red)
	if strings.Contains(string(printed), "s3cret") {
		t.Errorf("Redacted shows the secret:\n%s", printed)
	}
	if u := red.Agents[0].Servers[0].URL; u != "https://crm.example.com/[redacted]" {
		t.Errorf("Redacted URL = %q, want its scheme and host only", u)
	}
	if !strings.Contains(cfg.Agents[0].Servers[0].URL, "s3cret") {
		t.Errorf("Redacted changed the original")
	}
}
