package agent

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"teamsbot/internal/netaddr"
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
//	      entra: true          # Azure OpenAI: an Entra ID token of the app registration instead of a key
//	      timeout: 60s         # per attempt of a model request (at most 3 attempts)
//	      maxToolRounds: 8     # tool rounds before the model must answer
//	    servers:
//	      - name: demo         # unique within the agent; [A-Za-z0-9._-]
//	        builtin: demo      # exactly one of builtin, url, command
//	      - name: crm
//	        url: https://crm.example.com/mcp
//	        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
//	      - name: tickets      # each person signs in (the MCP specification's OAuth)
//	        url: https://tickets.example.com/mcp
//	        auth: person       # none (default), person or service
//	        clientId: 7f1c...  # optional: a pre-registered client (Entra ID)
//	        clientSecretEnv: TICKETS_CLIENT_SECRET
//	        scopes: [api://7f1c.../.default, offline_access]
//	        entra: true        # Microsoft Entra ID: no resource parameter, single sign-on on behalf of the person
//	      - name: debug
//	        command: [npx, "@modelcontextprotocol/server-debug", "--stdio"]
//	        env: {DEBUG_LOG_FILE: debug-log.jsonl}
//	        dir: /var/lib/teamsbot   # working directory of the child (optional)
//	        timeout: 30s       # per tool call; default 30s
//	    memory:                # earlier turns of the conversation a run reads
//	      turns: 20            # default 20; -1 turns memory off
//	      tokens: 8000         # budget in model tokens (estimated); default 8000
//	    rules:                 # data rules, applied to the model's and the views' calls
//	      denyTools: [crm/delete_customer, "debug/*", export_all]
//	      redact: ['\b\d{3}-\d{2}-\d{4}\b']  # regular expressions (Go syntax)
//	    prompts:               # suggested prompts of the Teams app (teamsbot manifest)
//	      - title: Sales report          # at most 32 characters
//	        text: Show me this quarter's sales report   # at most 128
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
	// Memory bounds what a run reads of its conversation's earlier turns.
	Memory MemoryConfig `yaml:"memory" json:"memory"`
	// Prompts are what Teams offers a person to ask the agent (its
	// prompt starters and the bot's command menu); `teamsbot manifest`
	// writes the first agent's into the app package.
	Prompts []PromptConfig `yaml:"prompts" json:"prompts,omitempty"`
}

// PromptConfig is one suggested prompt: the title Teams shows and the
// text it puts in the compose box when the person picks it.
type PromptConfig struct {
	Title string `yaml:"title" json:"title"`
	Text  string `yaml:"text" json:"text"`
}

// The limits of suggested prompts. A prompt is a command of the bot in
// the app manifest: Teams' command title holds at most 32 characters and
// its description, which carries the text, 128 ("Create prompt
// suggestions" and the app manifest schema reference); a command list
// holds at most 10 commands ("The command property supports up to 10
// commands"), of which the bot keeps two, for /new and /tools.
const (
	MaxPrompts     = 8
	MaxPromptTitle = 32
	MaxPromptText  = 128
)

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
	// Entra signs in to Azure OpenAI with an Entra ID token of the
	// service's own app registration (Options.ModelToken, for
	// CognitiveServicesScope) instead of a key: sent as Authorization:
	// Bearer. Not with APIKeyEnv.
	Entra bool `yaml:"entra" json:"entra,omitempty"`
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
	// Auth says how the server is reached: AuthNone (the default: Headers
	// only), AuthPerson (each person's own authorization, the MCP
	// specification's OAuth, per person), or AuthService (the client
	// credentials grant: the service itself). A url server only.
	Auth string `yaml:"auth" json:"auth,omitempty"`
	// ClientID is a client pre-registered with the server's
	// authorization server (the only way for Microsoft Entra ID);
	// ClientSecretEnv names the variable holding its secret.
	ClientID        string `yaml:"clientId" json:"clientId,omitempty"`
	ClientSecretEnv string `yaml:"clientSecretEnv" json:"clientSecretEnv,omitempty"`
	// Scopes, when set, are asked instead of those the server names.
	Scopes []string `yaml:"scopes" json:"scopes,omitempty"`
	// Audience is the audience the server's tokens carry besides its URL
	// (Entra ID's api://<app id>), so that a token for it is told from a
	// token for another resource.
	Audience string `yaml:"audience" json:"audience,omitempty"`
	// Entra says the server's authorization server is Microsoft Entra ID:
	// no resource parameter is sent (its v2.0 endpoints refuse one; the
	// scopes name the resource), and a person who signs in to this
	// service with Entra ID is connected on their behalf (the on-behalf-of
	// flow), without a prompt of the server's own. Needs clientId,
	// clientSecretEnv and scopes.
	Entra bool `yaml:"entra" json:"entra,omitempty"`
	// Authority is Entra ID's sign-in host for the on-behalf-of flow;
	// empty means https://login.microsoftonline.com (other clouds: their
	// own host).
	Authority string `yaml:"authority" json:"authority,omitempty"`
	// Permissions are what the server's views may be granted of what they
	// ask for in _meta.ui.permissions: camera, microphone, geolocation,
	// clipboardWrite, for every tenant. A tenant's admin may allow more
	// for their own tenant; by default a view gets nothing beyond forms.
	Permissions []string `yaml:"permissions" json:"permissions,omitempty"`
}

// How a url server is reached (ServerConfig.Auth).
const (
	AuthNone    = "none"
	AuthPerson  = "person"
	AuthService = "service"
)

// MemoryConfig bounds an agent's memory of a conversation: the earlier
// turns a run reads, newest first, whole turns only, until either bound.
type MemoryConfig struct {
	// Turns is how many earlier turns at most; 0 means DefaultMemoryTurns,
	// and -1 turns memory off for the agent.
	Turns int `yaml:"turns" json:"turns,omitempty"`
	// Tokens is the budget of those turns in model tokens (estimated);
	// 0 means DefaultMemoryTokens.
	Tokens int `yaml:"tokens" json:"tokens,omitempty"`
}

// Defaults of an agent's memory.
const (
	DefaultMemoryTurns  = 20
	DefaultMemoryTokens = 8000
)

// bounds returns the memory's bounds with their defaults; zero turns when
// memory is off.
func (m MemoryConfig) bounds() (turns, tokens int) {
	turns, tokens = m.Turns, m.Tokens
	if turns == 0 {
		turns = DefaultMemoryTurns
	}
	if turns < 0 {
		return 0, 0
	}
	if tokens == 0 {
		tokens = DefaultMemoryTokens
	}
	return turns, tokens
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
// from getenv and validates it, reporting every mistake at once, each a
// *ConfigError with its line and column. Unknown keys inside agents are
// mistakes; other top-level keys belong to other parts and are left alone
// (LoadConfigFile refuses them). A file without agents gives DefaultConfig.
func LoadConfig(data []byte, getenv func(string) string) (Config, error) {
	return loadFile(data, getenv, false, nil, false)
}

// LoadConfigFile is LoadConfig for a whole file whose top-level keys are
// agents and others (the keys other parts own): any other top-level key is
// a mistake too, reported with the rest.
func LoadConfigFile(data []byte, getenv func(string) string, others ...string) (Config, error) {
	return loadFile(data, getenv, true, others, false)
}

// LoadConfigFileUnresolved is LoadConfigFile for reading what the file
// says without the environment it names: a value with a ${VAR} that getenv
// does not set stays as written and is not checked further, and that is
// no mistake. `teamsbot manifest` reads the agents' prompts so, without
// the servers' secrets. Every other mistake is reported as LoadConfigFile
// reports it; the configuration it returns is not one to run.
func LoadConfigFileUnresolved(data []byte, getenv func(string) string, others ...string) (Config, error) {
	return loadFile(data, getenv, true, others, true)
}

// ConfigError is one mistake in the configuration file: where it is and
// what is wrong, in words for the person who edits the file.
type ConfigError struct {
	// Line and Column are 1-based; 0 when the mistake has no one place
	// (Column is 0 for a YAML syntax error, whose column is not known).
	Line, Column int
	// Path names the value, as agents[0].servers[1].url; empty for the
	// file as a whole.
	Path string
	// Msg says what is wrong, naming the value.
	Msg string
	// unresolved marks a ${VAR} whose variable is not set.
	unresolved bool
}

func (e *ConfigError) Error() string {
	switch {
	case e.Line > 0 && e.Column > 0:
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// configErrors joins mistakes into one error, in the order of the file
// (those without a place last), or nil.
func configErrors(list []*ConfigError) error {
	slices.SortStableFunc(list, func(a, b *ConfigError) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line) // placed first
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	errs := make([]error, len(list))
	for i, e := range list {
		errs[i] = e
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
