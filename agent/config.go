package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"teamsbot/access"
	"teamsbot/internal/netaddr"
	"teamsbot/mcpapps"
)

// Config is the agents part of the TICKETIQ_CONFIG file.
//
// The file is YAML (so JSON works too). The agent package owns the key
// "agents"; other parts own other top-level keys (roles, for instance). The
// cmd can decode the whole file strictly by embedding Config inline in its
// own file struct and decoding with KnownFields, then calling Resolve:
//
//	type file struct {
//		agent.Config `yaml:",inline"`
//		Roles        access.Roles `yaml:"roles"`
//	}
//
// LoadConfig does the same for the agents key alone and leaves other
// top-level keys to their owners.
//
// The shape of one agent:
//
//	agents:
//	  - id: default            # required, unique; [A-Za-z0-9._-]
//	    name: Assistant        # unique; defaults to the id
//	    model:
//	      kind: builtin        # builtin (default) or openai
//	      # openai only:
//	      baseURL: https://api.openai.com/v1   # default; Azure: https://R.openai.azure.com/openai/deployments/D
//	      model: gpt-4o-mini   # required for openai
//	      apiKeyEnv: OPENAI_API_KEY            # the key is read from this variable
//	      apiVersion: 2024-10-21               # Azure: sent as ?api-version=, and the key goes in api-key
//	      azure: true          # send the key in api-key instead of Authorization: Bearer
//	      timeout: 60s         # per model request
//	      maxToolRounds: 8     # tool rounds before the model must answer
//	    servers:
//	      - name: demo         # unique within the agent; [A-Za-z0-9._-]
//	        builtin: demo      # exactly one of builtin, url, command
//	      - name: crm
//	        url: https://crm.example.com/mcp
//	        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
//	      - name: debug
//	        command: [npx, "@modelcontextprotocol/server-debug", "--stdio"]
//	        env: {DEBUG_LOG_FILE: debug-log.jsonl}
//	        dir: /var/lib/teamsbot   # working directory of the child (optional)
//	        timeout: 30s       # per tool call; default 30s
//	    rules:                 # data rules, applied to the model's and the views' calls
//	      denyTools: [crm/delete_customer, "debug/*", export_all]
//	      redact: ['\b\d{3}-\d{2}-\d{4}\b']  # regular expressions (Go syntax)
//
// ${VAR} in url, headers and env values is replaced from the environment; a
// variable that is not set is an error.
type Config struct {
	Agents []AgentConfig `yaml:"agents" json:"agents"`
}

// AgentConfig is one agent: its model, its MCP servers and its data rules.
type AgentConfig struct {
	ID      string         `yaml:"id" json:"id"`
	Name    string         `yaml:"name" json:"name"`
	Model   ModelConfig    `yaml:"model" json:"model"`
	Servers []ServerConfig `yaml:"servers" json:"servers"`
	Rules   RulesConfig    `yaml:"rules" json:"rules"`
}

// Model kinds.
const (
	ModelBuiltin = "builtin"
	ModelOpenAI  = "openai"
)

// DefaultOpenAIBaseURL is used when an openai model names no baseURL.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1"

// ModelConfig says which model an agent uses.
type ModelConfig struct {
	// Kind is "builtin" (the default) or "openai" (any Chat Completions API).
	Kind string `yaml:"kind" json:"kind"`
	// BaseURL is the API root; "/chat/completions" is appended.
	BaseURL string `yaml:"baseURL" json:"baseURL,omitempty"`
	// Model is the model (or Azure deployment) name.
	Model string `yaml:"model" json:"model,omitempty"`
	// APIKeyEnv names the environment variable holding the key; empty sends
	// no key (local servers).
	APIKeyEnv string `yaml:"apiKeyEnv" json:"apiKeyEnv,omitempty"`
	// APIVersion is Azure OpenAI's api-version query parameter; setting it
	// also sends the key in the api-key header.
	APIVersion string `yaml:"apiVersion" json:"apiVersion,omitempty"`
	// Azure sends the key in the api-key header instead of Authorization.
	Azure bool `yaml:"azure" json:"azure,omitempty"`
	// Timeout bounds one model request (Go duration); default 60s.
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
	// MaxToolRounds bounds the rounds of tool calls in one run; default 8.
	MaxToolRounds int `yaml:"maxToolRounds" json:"maxToolRounds,omitempty"`
}

// ServerConfig is one MCP server of an agent. Exactly one of Builtin, URL
// and Command is set.
type ServerConfig struct {
	Name string `yaml:"name" json:"name"`
	// Builtin names an in-memory server shipped with the service ("demo").
	Builtin string `yaml:"builtin" json:"builtin,omitempty"`
	// URL is a Streamable HTTP endpoint.
	URL string `yaml:"url" json:"url,omitempty"`
	// Headers are sent with every HTTP request to URL.
	Headers map[string]string `yaml:"headers" json:"headers,omitempty"`
	// Command starts a stdio server: the program and its arguments.
	Command []string `yaml:"command" json:"command,omitempty"`
	// Env is the child's environment, beside PATH, HOME, USER, LOGNAME,
	// SHELL, TERM, LANG, LC_ALL, LC_CTYPE, TZ and TMPDIR taken from the
	// service's: nothing else of the service's environment (its secrets)
	// reaches a third-party server.
	Env map[string]string `yaml:"env" json:"env,omitempty"`
	// Dir is the child's working directory; empty means the service's.
	Dir string `yaml:"dir" json:"dir,omitempty"`
	// Timeout bounds one tool call (Go duration); default 30s.
	Timeout string `yaml:"timeout" json:"timeout,omitempty"`
	// Permissions are what the server's views may be granted of what they
	// ask for in _meta.ui.permissions: camera, microphone, geolocation,
	// clipboardWrite, for every tenant. A tenant's admin may allow more
	// for their own tenant; by default a view gets nothing beyond forms.
	Permissions []string `yaml:"permissions" json:"permissions,omitempty"`
}

// RulesConfig holds an agent's data rules.
type RulesConfig struct {
	// DenyTools lists tools that may not be called, by the model or a view:
	// "server/tool", "server/*" or a bare tool name (any server).
	DenyTools []string `yaml:"denyTools" json:"denyTools,omitempty"`
	// Redact lists regular expressions; matching text in tool results (text
	// content and structuredContent strings) is replaced before the model or
	// a view sees it.
	Redact []string `yaml:"redact" json:"redact,omitempty"`
}

// DefaultServerTimeout bounds a tool call when a server sets no timeout.
const DefaultServerTimeout = 30 * time.Second

// Defaults of a model: the openai request timeout, and the rounds of tool
// calls in one run (any model).
const (
	DefaultModelTimeout  = 60 * time.Second
	DefaultMaxToolRounds = 8
)

// BuiltinDemo names the built-in demo MCP App server.
const BuiltinDemo = "demo"

// DefaultConfig is what the service runs without a configuration file: the
// agent "default" with the built-in model and the built-in demo server.
func DefaultConfig() Config {
	return Config{Agents: []AgentConfig{{
		ID:      "default",
		Name:    "Assistant",
		Model:   ModelConfig{Kind: ModelBuiltin},
		Servers: []ServerConfig{{Name: "demo", Builtin: BuiltinDemo}},
	}}}
}

// LoadConfig reads the agents key of a configuration file, expands ${VAR}
// from getenv and validates it, reporting every mistake at once. Unknown keys
// inside agents are rejected with their line; other top-level keys belong to
// other parts and are left alone. A file without agents gives DefaultConfig.
func LoadConfig(data []byte, getenv func(string) string) (Config, error) {
	var doc struct {
		Agents *[]AgentConfig       `yaml:"agents"`
		Rest   map[string]yaml.Node `yaml:",inline"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty file decodes as io.EOF: it simply has no agents.
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("agent: config: %w", friendlyYAMLError(err))
	}
	if doc.Agents == nil {
		return DefaultConfig(), nil
	}
	cfg := Config{Agents: *doc.Agents}
	if err := cfg.Resolve(getenv); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

var yamlUnknownField = regexp.MustCompile(`line (\d+): field (\S+) not found in type (\S+)`)

// friendlyYAMLError rewrites yaml's "field x not found in type agent.T" into
// words a person editing the file understands.
func friendlyYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]error, 0, len(te.Errors))
	for _, e := range te.Errors {
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			where := strings.TrimPrefix(m[3], "agent.")
			where = strings.TrimSuffix(where, "Config")
			msgs = append(msgs, fmt.Errorf("line %s: unknown key %q in %s", m[1], m[2], strings.ToLower(where)))
			continue
		}
		msgs = append(msgs, errors.New(e))
	}
	return errors.Join(msgs...)
}

// Resolve expands ${VAR} in url, headers and env values from getenv (nil
// means no variables are set) and validates the configuration, reporting
// every mistake together. Call it once: it changes the values in place.
func (c *Config) Resolve(getenv func(string) string) error {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var errs []error
	for i := range c.Agents {
		a := &c.Agents[i]
		for j := range a.Servers {
			s := &a.Servers[j]
			where := fmt.Sprintf("agents[%d].servers[%d]", i, j)
			var err error
			if s.URL, err = expandEnv(s.URL, getenv); err != nil {
				errs = append(errs, fmt.Errorf("%s.url: %w", where, err))
			}
			s.Headers = expandMap(s.Headers, getenv, where+".headers", &errs)
			s.Env = expandMap(s.Env, getenv, where+".env", &errs)
		}
	}
	errs = append(errs, c.validate(func(name string) bool { return name == BuiltinDemo }))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("agent: config: %w", err)
	}
	return nil
}

func expandMap(m map[string]string, getenv func(string) string, where string, errs *[]error) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expandEnv(v, getenv)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s.%s: %w", where, k, err))
		}
		out[k] = x
	}
	return out
}

// expandEnv replaces ${NAME} with getenv(NAME). Only the braced form is
// expanded, so a literal "$" in a header value stays as written.
func expandEnv(s string, getenv func(string) string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New(`unterminated "${"`)
		}
		name := s[i+2 : i+end]
		if !envName.MatchString(name) {
			return "", fmt.Errorf("bad variable name %q", name)
		}
		v := getenv(name)
		if v == "" {
			return "", fmt.Errorf("uses ${%s}, which is not set", name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

var (
	envName   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	namePattn = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// validate checks the configuration; known says which builtin servers exist.
func (c Config) validate(known func(string) bool) error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Agents) == 0 {
		add("agents: at least one agent is needed")
	}
	ids := map[string]int{}
	names := map[string]int{}
	for i, a := range c.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.ID == "":
			add("%s.id: missing", where)
		case !namePattn.MatchString(a.ID):
			add("%s.id %q: use letters, digits, '.', '_' or '-' (at most 64)", where, a.ID)
		}
		if a.ID != "" {
			if j, dup := ids[a.ID]; dup {
				add("%s.id %q: already used by agents[%d]", where, a.ID, j)
			} else {
				ids[a.ID] = i
			}
		}
		name := a.DisplayName()
		if name != "" {
			if j, dup := names[name]; dup {
				add("%s.name %q: already used by agents[%d]", where, name, j)
			} else {
				names[name] = i
			}
		}
		errs = append(errs, a.Model.validate(where+".model"))
		servers := map[string]int{}
		for j, s := range a.Servers {
			sw := fmt.Sprintf("%s.servers[%d]", where, j)
			if s.Name != "" {
				sw += " (" + s.Name + ")"
			}
			switch {
			case s.Name == "":
				add("%s.name: missing", sw)
			case !namePattn.MatchString(s.Name):
				add("%s.name %q: use letters, digits, '.', '_' or '-' (at most 64)", sw, s.Name)
			default:
				if k, dup := servers[s.Name]; dup {
					add("%s.name %q: already used by servers[%d]", sw, s.Name, k)
				} else {
					servers[s.Name] = j
				}
			}
			errs = append(errs, s.validate(sw, known))
		}
		for k, d := range a.Rules.DenyTools {
			if err := access.CheckDenyRule(d); err != nil {
				add("%s.rules.denyTools[%d] %q: %w", where, k, d, err)
			}
		}
		for k, r := range a.Rules.Redact {
			if _, err := access.CompileRedactPattern(r); err != nil {
				add("%s.rules.redact[%d] %q: %w", where, k, r, err)
			}
		}
	}
	return errors.Join(errs...)
}

// DisplayName is the agent's name, or its id when it has none.
func (a AgentConfig) DisplayName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.ID
}

func (m ModelConfig) validate(where string) error {
	var errs []error
	switch m.Kind {
	case "", ModelBuiltin:
		if m.BaseURL != "" || m.Model != "" || m.APIKeyEnv != "" || m.APIVersion != "" {
			errs = append(errs, fmt.Errorf("%s: baseURL, model, apiKeyEnv and apiVersion are for kind openai", where))
		}
	case ModelOpenAI:
		if m.Model == "" {
			errs = append(errs, fmt.Errorf("%s.model: missing (kind openai needs the model or deployment name)", where))
		}
		if m.BaseURL != "" {
			if err := checkHTTPURL(m.BaseURL); err != nil {
				errs = append(errs, fmt.Errorf("%s.baseURL: %w", where, err))
			}
		}
		if m.APIKeyEnv != "" && !envName.MatchString(m.APIKeyEnv) {
			errs = append(errs, fmt.Errorf("%s.apiKeyEnv %q: not a variable name", where, m.APIKeyEnv))
		}
	default:
		errs = append(errs, fmt.Errorf("%s.kind %q: use builtin or openai", where, m.Kind))
	}
	if _, err := parseTimeout(m.Timeout, DefaultModelTimeout); err != nil {
		errs = append(errs, fmt.Errorf("%s.timeout: %w", where, err))
	}
	if m.MaxToolRounds < 0 {
		errs = append(errs, fmt.Errorf("%s.maxToolRounds: must not be negative", where))
	}
	return errors.Join(errs...)
}

func (s ServerConfig) validate(where string, known func(string) bool) error {
	var errs []error
	kinds := 0
	if s.Builtin != "" {
		kinds++
		if !known(s.Builtin) {
			errs = append(errs, fmt.Errorf("%s.builtin %q: unknown (known: %s)", where, s.Builtin, BuiltinDemo))
		}
	}
	if s.URL != "" {
		kinds++
		if err := checkHTTPURL(s.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s.url: %w", where, err))
		}
	}
	if len(s.Command) > 0 {
		kinds++
		if s.Command[0] == "" {
			errs = append(errs, fmt.Errorf("%s.command: the program is empty", where))
		}
	}
	switch kinds {
	case 0:
		errs = append(errs, fmt.Errorf("%s: set one of builtin, url or command", where))
	case 1:
	default:
		errs = append(errs, fmt.Errorf("%s: set only one of builtin, url or command", where))
	}
	if len(s.Headers) > 0 && s.URL == "" {
		errs = append(errs, fmt.Errorf("%s.headers: only for a url server", where))
	}
	if (len(s.Env) > 0 || s.Dir != "") && len(s.Command) == 0 {
		errs = append(errs, fmt.Errorf("%s: env and dir are only for a command server", where))
	}
	if _, err := parseTimeout(s.Timeout, DefaultServerTimeout); err != nil {
		errs = append(errs, fmt.Errorf("%s.timeout: %w", where, err))
	}
	if _, err := mcpapps.ParsePermissions(s.Permissions); err != nil {
		errs = append(errs, fmt.Errorf("%s.permissions: %w", where, err))
	}
	return errors.Join(errs...)
}

// checkHTTPURL checks an http(s) URL by the service's one rule for the
// addresses it talks to (netaddr.ParseURL), whose errors never quote more
// than the scheme and host: by now ${VAR} is expanded, and a token in the
// URL would reach the log.
func checkHTTPURL(raw string) error {
	_, err := netaddr.ParseURL(raw)
	return err
}

// parseTimeout parses a Go duration; empty gives def.
func parseTimeout(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad timeout %q: %w", s, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("bad timeout %q: must be positive", s)
	}
	return d, nil
}

// Redacted returns a copy safe to print: header and env values, and all
// of a URL but its scheme and host, are hidden, since they often carry
// secrets.
func (c Config) Redacted() Config {
	out := Config{Agents: make([]AgentConfig, len(c.Agents))}
	for i, a := range c.Agents {
		a.Model.BaseURL = netaddr.Redact(a.Model.BaseURL)
		a.Servers = append([]ServerConfig(nil), a.Servers...)
		for j := range a.Servers {
			s := &a.Servers[j]
			s.URL = netaddr.Redact(s.URL)
			s.Headers = hideValues(s.Headers)
			s.Env = hideValues(s.Env)
		}
		out.Agents[i] = a
	}
	return out
}

func hideValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k := range m {
		out[k] = "[redacted]"
	}
	return out
}
