package agent_test

import (
	"errors"
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

// Unknown keys are rejected with the key, its line and column, and the
// key meant when one is near.
func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	_, err := agent.LoadConfig([]byte("agents:\n  - id: a\n    servers:\n      - name: s\n        builtin: demo\n        tiemout: 3s\n"), nil)
	if err == nil || err.Error() != "line 6, column 9: unknown key `tiemout` in agents[0].servers[0]; did you mean `timeout`?" {
		t.Errorf("err = %v", err)
	}
	_, err = agent.LoadConfig([]byte("agents:\n  - id: a\n    colour: blue\n"), nil)
	if err == nil || err.Error() != "line 3, column 5: unknown key `colour` in agents[0] (known: id, name, model, servers, rules, memory, prompts)" {
		t.Errorf("err = %v", err)
	}
}

// One pass shows every mistake of a file, each with its line and column,
// in the order of the file: unknown keys, values of the wrong kind, keys
// given twice and values that fail their checks, together.
func TestLoadConfigEveryMistakeWithItsPlace(t *testing.T) {
	data := `agents:
  - id: sales
    modle:
      kind: openai
    model:
      kind: openai
      maxToolRounds: many
    servers:
      - name: crm
        url: ftp://crm.example.com/mcp
        tiemout: 3s
      - name: crm
        builtin: demo
        builtin: demo
    rules:
      denyTools: oops
`
	_, err := agent.LoadConfig([]byte(data), nil)
	if err == nil {
		t.Fatal("no error")
	}
	want := strings.Join([]string{
		"line 3, column 5: unknown key `modle` in agents[0]; did you mean `model`?",
		"line 5, column 5: agents[0].model.model: missing (kind openai needs the model or deployment name)",
		"line 7, column 22: agents[0].model.maxToolRounds: want a whole number, not `many`",
		"line 10, column 14: agents[0].servers[0] (crm).url: invalid address: want an absolute http:// or https:// URL",
		"line 11, column 9: unknown key `tiemout` in agents[0].servers[0]; did you mean `timeout`?",
		"line 12, column 15: agents[0].servers[1] (crm).name \"crm\": already used by servers[0]",
		"line 14, column 9: agents[0].servers[1]: the key `builtin` is given twice (first on line 13): keep one",
		"line 16, column 18: agents[0].rules.denyTools: want a list (lines starting with `- `, or [a, b]), not `oops`",
	}, "\n")
	if got := err.Error(); got != want {
		t.Errorf("mistakes:\n%s\nwant:\n%s", got, want)
	}
	var ce *agent.ConfigError
	if !errors.As(err, &ce) || ce.Line != 3 || ce.Column != 5 || ce.Path != "agents[0].modle" {
		t.Errorf("the first mistake as a ConfigError: %+v", ce)
	}
}

// LoadConfigFile also refuses top-level keys that nothing owns, with the
// one meant.
func TestLoadConfigFileTopLevelKeys(t *testing.T) {
	_, err := agent.LoadConfigFile([]byte("agnets:\n  - id: a\nroles: {}\n"), nil, "roles")
	if err == nil || err.Error() != "line 1, column 1: unknown key `agnets` at the top of the file; did you mean `agents`?" {
		t.Errorf("err = %v", err)
	}
	if _, err := agent.LoadConfigFile([]byte("agents:\n  - id: a\n    servers: [{name: d, builtin: demo}]\nroles: {}\n"), nil, "roles"); err != nil {
		t.Errorf("a key another part owns: %v", err)
	}
	_, err = agent.LoadConfigFile([]byte("- a\n- b\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "line 1, column 1: the file must hold keys and values, starting with `agents:`") {
		t.Errorf("a list as the file: %v", err)
	}
}

// go.yaml.in/yaml/v3 names the line where the block around a syntax
// mistake began, sometimes counted from 0; the error names the line of
// the mistake itself.
func TestLoadConfigSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct {
		data, want string
	}{
		{"agents:\n  - id: a\n    name: b\n  model: c\n", "line 4: not valid YAML: did not find expected '-' indicator (check this line's indentation"},
		{"agents:\n  - id: a\n   name: b\n", "line 3: not valid YAML: did not find expected '-' indicator"},
		{"agents:\n  - id: a\n    name: [x\n    model: y\n", "line 3: not valid YAML: did not find expected ',' or ']'"},
		{"agents:\n  - id: a\n    name: \"x\n    model: y\n", "line 3: not valid YAML: found unexpected end of stream (a quote or a bracket opened on this line is not closed)"},
		{"agents:\n\t- id: a\n", "line 2: not valid YAML: found character that cannot start any token (YAML indents with spaces, and this line has a tab)"},
		{"agents:\n  - id: a\n    name: b: c\n", `line 3: not valid YAML: mapping values are not allowed in this context (a value that holds ": " must be in quotes)`},
		{"x: @y\n", "line 1: not valid YAML: found character that cannot start any token"},
		// A list over several lines above the mistake does not mislead.
		{"agents:\n  - id: a\n    servers: [\n      {name: d, builtin: demo}]\n    name: b\n   rules: {}\n", "line 6: not valid YAML"},
	} {
		_, err := agent.LoadConfig([]byte(c.data), nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s...", c.data, err, c.want)
		}
	}
}

// A header or env value of the wrong kind is named without its value:
// it is a secret as often as not.
func TestLoadConfigHidesHeaderValues(t *testing.T) {
	_, err := agent.LoadConfig([]byte("agents:\n  - id: a\n    servers:\n      - name: crm\n        url: https://crm.example.com/mcp\n        headers: Bearer s3cret\n"), nil)
	if err == nil || err.Error() != "line 6, column 18: agents[0].servers[0].headers: want keys and values (such as {NAME: value}), not a single value" {
		t.Errorf("err = %v", err)
	}
}

// Aliases are followed, and one that holds itself is a mistake, not a
// hang.
func TestLoadConfigAliases(t *testing.T) {
	cfg, err := agent.LoadConfig([]byte("x: &demo {name: d, builtin: demo}\nagents:\n  - id: a\n    servers: [*demo]\n  - id: b\n    servers: [*demo]\n"), nil)
	if err != nil || len(cfg.Agents) != 2 || cfg.Agents[1].Servers[0].Builtin != "demo" {
		t.Errorf("aliases: %+v, %v", cfg, err)
	}
	_, err = agent.LoadConfig([]byte("agents: &a\n  - id: a\n    servers: *a\n"), nil)
	if err == nil {
		t.Error("an alias that holds itself was accepted")
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

// How a server is authorized is checked with the rest: a value auth does
// not take, an Authorization header beside auth, service without its
// client, entra without what Entra ID needs, keys of auth on a server
// without it.
func TestLoadConfigAuthMistakes(t *testing.T) {
	data := `agents:
  - id: sales
    servers:
      - name: a
        url: https://a.example.com/mcp
        auth: everyone
      - name: b
        url: https://b.example.com/mcp
        auth: person
        headers: {Authorization: "Bearer x"}
      - name: c
        url: https://c.example.com/mcp
        auth: service
      - name: d
        url: https://d.example.com/mcp
        auth: person
        entra: true
      - name: e
        url: https://e.example.com/mcp
        scopes: [x]
      - name: f
        builtin: demo
        auth: person
`
	_, err := agent.LoadConfig([]byte(data), nil)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`agents[0].servers[0] (a).auth "everyone": use none, person or service`,
		"agents[0].servers[1] (b).headers: Authorization is set by auth person; remove it",
		"agents[0].servers[2] (c): auth service needs clientId and clientSecretEnv",
		"agents[0].servers[3] (d).entra: needs auth person, clientId, clientSecretEnv and scopes",
		"agents[0].servers[4] (e): clientId, clientSecretEnv, scopes, audience, entra and authority are for auth person or service",
		"agents[0].servers[5] (f).auth person: only for a url server",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("mistakes lack %q:\n%s", want, err)
		}
	}
}

// Memory's bounds are checked with the rest of the file.
func TestLoadConfigMemoryMistakes(t *testing.T) {
	_, err := agent.LoadConfig([]byte("agents:\n  - id: a\n    memory:\n      turns: -5\n      tokens: -1\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "agents[0].memory.turns -5: use 1 to 1000 earlier turns, or -1 for no memory") ||
		!strings.Contains(err.Error(), "agents[0].memory.tokens -1: use 1 to 1000000 tokens") {
		t.Errorf("err = %v", err)
	}
	if _, err := agent.LoadConfig([]byte("agents:\n  - id: a\n    memory: {turns: -1}\n"), nil); err != nil {
		t.Errorf("memory off: %v", err)
	}
}
