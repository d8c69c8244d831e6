package agent

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"teamsbot/access"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/suggest"
	"teamsbot/internal/textclip"
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
// from getenv and validates it, reporting every mistake at once, each a
// *ConfigError with its line and column. Unknown keys inside agents are
// mistakes; other top-level keys belong to other parts and are left alone
// (LoadConfigFile refuses them). A file without agents gives DefaultConfig.
func LoadConfig(data []byte, getenv func(string) string) (Config, error) {
	return loadFile(data, getenv, false, nil)
}

// LoadConfigFile is LoadConfig for a whole file whose top-level keys are
// agents and others (the keys other parts own): any other top-level key is
// a mistake too, reported with the rest.
func LoadConfigFile(data []byte, getenv func(string) string, others ...string) (Config, error) {
	return loadFile(data, getenv, true, others)
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

// loadFile parses the file into nodes (which keep every value's place),
// walks them beside the Go types they decode into, decodes, expands and
// validates, and reports every mistake found on the way together.
func loadFile(data []byte, getenv func(string) string, strictTop bool, others []string) (Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Config{}, syntaxError(data, err)
	}
	doc := &root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	if doc.Kind == 0 || doc.Kind == yaml.DocumentNode || isNull(doc) {
		return DefaultConfig(), nil // an empty file simply has no agents
	}
	fc := &fileChecker{nodes: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	if doc.Kind != yaml.MappingNode {
		fc.add(doc, "", "the file must hold keys and values, starting with `agents:`, not %s", describe(doc))
		return Config{}, configErrors(fc.errs)
	}
	var agentsNode *yaml.Node
	fc.pairs(doc, "", func(key, value *yaml.Node) {
		switch {
		case key.Value == "agents":
			agentsNode = value
			fc.walk(value, reflect.TypeFor[[]AgentConfig](), "agents")
		case strictTop && !slices.Contains(others, key.Value):
			fc.unknownKey(key, "", append([]string{"agents"}, others...))
		}
	})
	if agentsNode == nil || isNull(agentsNode) {
		if len(fc.errs) > 0 {
			return Config{}, configErrors(fc.errs)
		}
		return DefaultConfig(), nil
	}
	var cfg Config
	if err := agentsNode.Decode(&cfg.Agents); err != nil {
		var te *yaml.TypeError
		typeErr := errors.As(err, &te)
		if !typeErr || len(fc.errs) == 0 {
			// The walk finds every mismatch the decoder does; this is
			// what it did not foresee, said as the decoder says it.
			fc.errs = append(fc.errs, &ConfigError{Line: agentsNode.Line, Column: agentsNode.Column, Path: "agents",
				Msg: "agents: " + strings.TrimPrefix(err.Error(), "yaml: ")})
		}
		if !typeErr {
			return Config{}, configErrors(fc.errs)
		}
	}
	// The values are checked even when keys were wrong, so that one pass
	// shows every mistake; a value whose own place was already found wrong
	// is not reported again as missing or empty.
	for _, e := range append(cfg.resolve(getenv), cfg.validate(func(name string) bool { return name == BuiltinDemo })...) {
		if fc.covers(e.Path) {
			continue
		}
		fc.place(e)
		fc.errs = append(fc.errs, e)
	}
	if err := configErrors(fc.errs); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// maxFileValues bounds the values walked in one file, aliases followed
// included: a few lines of aliases can name billions of values.
const maxFileValues = 100_000

// fileChecker walks a parsed file beside the Go types it decodes into and
// finds, with their places, the mistakes the decoder would skip or stop
// at: unknown and repeated keys, and values of the wrong kind. It keeps
// each value's node by path, for the places of the mistakes found later.
type fileChecker struct {
	errs  []*ConfigError
	nodes map[string]*yaml.Node
	// keys are the key nodes of the values in nodes: a mistake about a
	// value missing inside one points at its key.
	keys map[string]*yaml.Node
	// bad are the paths of values found wrong here.
	bad     []string
	visited int
	// following are the aliases being walked, to stop one that holds itself.
	following []*yaml.Node
}

func (fc *fileChecker) add(n *yaml.Node, path, format string, args ...any) {
	fc.errs = append(fc.errs, &ConfigError{Line: n.Line, Column: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
	fc.bad = append(fc.bad, path)
}

// covers reports whether path is, or is inside, a value already found wrong.
func (fc *fileChecker) covers(path string) bool {
	for _, b := range fc.bad {
		if path == b || strings.HasPrefix(path, b+".") || strings.HasPrefix(path, b+"[") {
			return true
		}
	}
	return false
}

// place gives e the line and column of its value, or of the key of the
// nearest value that holds it when the value is missing.
func (fc *fileChecker) place(e *ConfigError) {
	for p := e.Path; ; {
		n, ok := fc.nodes[p]
		if k := fc.keys[p]; k != nil && p != e.Path {
			n, ok = k, true
		}
		if ok {
			e.Line, e.Column = n.Line, n.Column
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			return
		}
		p = p[:i]
	}
}

// pairs calls f for each key and value of a mapping, after reporting a key
// that is not plain text or that appears twice. A merge key (<<) brings
// the keys of the mappings it names.
func (fc *fileChecker) pairs(n *yaml.Node, path string, f func(key, value *yaml.Node)) {
	first := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		if key.Kind == yaml.ScalarNode && key.Tag == "!!merge" {
			for _, m := range fc.mergeSources(value, 0) {
				fc.pairs(m, path, f)
			}
			continue
		}
		if key.Kind != yaml.ScalarNode {
			fc.add(key, path, "%s: a key must be a plain word, not %s", where(path), describe(key))
			continue
		}
		if prev, dup := first[key.Value]; dup {
			fc.add(key, join(path, key.Value), "%s: the key `%s` is given twice (first on line %d): keep one", where(path), key.Value, prev.Line)
			// The decoder would drop the whole mapping; without the
			// second key the rest of it is still checked.
			n.Content = slices.Delete(n.Content, i, i+2)
			i -= 2
			continue
		}
		first[key.Value] = key
		f(key, value)
	}
}

// mergeSources are the mappings a merge key names: one, or a list of them.
func (fc *fileChecker) mergeSources(v *yaml.Node, depth int) []*yaml.Node {
	fc.visited++
	if depth > 16 || fc.visited > maxFileValues {
		return nil
	}
	if v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	switch v.Kind {
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range v.Content {
			out = append(out, fc.mergeSources(item, depth+1)...)
		}
		return out
	case yaml.MappingNode:
		if slices.Contains(fc.following, v) {
			return nil
		}
		return []*yaml.Node{v}
	}
	return nil
}

// unknownKey reports a key that is not one of known, with the one meant
// when it is near one.
func (fc *fileChecker) unknownKey(key *yaml.Node, path string, known []string) {
	if meant, ok := suggest.Closest(key.Value, known); ok {
		fc.add(key, join(path, key.Value), "unknown key `%s` %s; did you mean `%s`?", textclip.Clip(key.Value, 64), in(path), meant)
		return
	}
	fc.add(key, join(path, key.Value), "unknown key `%s` %s (known: %s)", textclip.Clip(key.Value, 64), in(path), strings.Join(known, ", "))
}

// walk checks n against the Go type t it decodes into.
func (fc *fileChecker) walk(n *yaml.Node, t reflect.Type, path string) {
	fc.visited++
	if fc.visited > maxFileValues {
		if fc.visited == maxFileValues+1 {
			fc.add(n, path, "the file holds more than %d values once its aliases are expanded", maxFileValues)
		}
		return
	}
	if _, ok := fc.nodes[path]; !ok {
		fc.nodes[path] = n
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil || slices.Contains(fc.following, n.Alias) {
			fc.add(n, path, "%s: the alias *%s holds itself", where(path), n.Value)
			return
		}
		fc.following = append(fc.following, n.Alias)
		defer func() { fc.following = fc.following[:len(fc.following)-1] }()
		n = n.Alias
	}
	if isNull(n) {
		return // an empty value leaves the default
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := yamlFields(t)
		if n.Kind != yaml.MappingNode {
			fc.add(n, path, "%s: want keys and values (such as `%s:` on the lines below), not %s", where(path), fields[0].name, describeAt(n, path))
			return
		}
		names := make([]string, len(fields))
		for i, f := range fields {
			names[i] = f.name
		}
		fc.following = append(fc.following, n)
		defer func() { fc.following = fc.following[:len(fc.following)-1] }()
		fc.pairs(n, path, func(key, value *yaml.Node) {
			i := slices.Index(names, key.Value)
			if i < 0 {
				fc.unknownKey(key, path, names)
				return
			}
			fc.keys[join(path, key.Value)] = key
			fc.walk(value, fields[i].typ, join(path, key.Value))
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			fc.add(n, path, "%s: want a list (lines starting with `- `, or [a, b]), not %s", where(path), describeAt(n, path))
			return
		}
		for i, item := range n.Content {
			fc.walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			fc.add(n, path, "%s: want keys and values (such as {NAME: value}), not %s", where(path), describeAt(n, path))
			return
		}
		fc.pairs(n, path, func(key, value *yaml.Node) {
			fc.walk(value, t.Elem(), join(path, key.Value))
		})
	default:
		want := map[reflect.Kind]string{reflect.Bool: "true or false", reflect.Int: "a whole number", reflect.String: "text"}[t.Kind()]
		if n.Kind != yaml.ScalarNode || n.Decode(reflect.New(t).Interface()) != nil {
			fc.add(n, path, "%s: want %s, not %s", where(path), want, describeAt(n, path))
		}
	}
}

// yamlField is a struct field as the file names it.
type yamlField struct {
	name string
	typ  reflect.Type
}

// yamlFields are the keys of a struct in the file, in the struct's order.
func yamlFields(t reflect.Type) []yamlField {
	var out []yamlField
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, yamlField{name: name, typ: f.Type})
	}
	return out
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names what a node is, for "want ..., not ..." mistakes.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "keys and values"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	return fmt.Sprintf("`%s`", textclip.Clip(n.Value, 64))
}

// describeAt is describe for the value at path, without the value itself
// where values are secrets as often as not (headers and env).
func describeAt(n *yaml.Node, path string) string {
	if n.Kind == yaml.ScalarNode && (strings.Contains(path, ".headers") || strings.Contains(path, ".env")) {
		return "a single value"
	}
	return describe(n)
}

// join adds a key to a path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// where is a path as mistakes show it.
func where(path string) string {
	if path == "" {
		return "the top of the file"
	}
	return path
}

// in says where an unknown key was found.
func in(path string) string {
	if path == "" {
		return "at the top of the file"
	}
	return "in " + path
}

// maxSyntaxSearch bounds the lines problemLine searches, each one parse.
const maxSyntaxSearch = 400

var yamlSyntax = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxError says where a file that is not YAML stops being YAML.
// go.yaml.in/yaml/v3 names the line where the block around the mistake
// began (for a parser's mistake counted from 0, one too few) rather than
// the line of the mistake: for
//
//	agents:
//	  - id: a
//	    name: b
//	  model: c
//
// it says "line 1: did not find expected '-' indicator", and the mistake
// is on line 4. problemLine finds the line itself.
func syntaxError(data []byte, err error) error {
	m := yamlSyntax.FindStringSubmatch(err.Error())
	if m == nil {
		return &ConfigError{Msg: "not YAML or JSON: " + err.Error()}
	}
	line := problemLine(data)
	if line == 0 && m[1] != "" {
		line, _ = strconv.Atoi(m[1])
	}
	msg := "not valid YAML: " + m[2]
	text := ""
	if lines := strings.Split(string(data), "\n"); line > 0 && line <= len(lines) {
		text = lines[line-1]
	}
	indent := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	switch {
	case strings.Contains(indent, "\t"):
		msg += " (YAML indents with spaces, and this line has a tab)"
	case strings.Contains(m[2], "mapping values are not allowed"):
		msg += ` (a value that holds ": " must be in quotes)`
	case strings.Contains(m[2], "did not find expected"):
		msg += " (check this line's indentation against the lines above, and that every [ or { before it is closed)"
	case strings.Contains(m[2], "unexpected end of stream"):
		msg += " (a quote or a bracket opened on this line is not closed)"
	}
	return &ConfigError{Line: line, Msg: msg}
}

// problemLine is the line where data stops being YAML: the first line
// from which every longer beginning of the file fails to parse too. (A
// shorter beginning may fail only because it ends inside a list written
// over several lines; the search goes back from the end, so such a list
// above the mistake does not matter.) 0 when the file is too long to
// search.
func problemLine(data []byte) int {
	lines := strings.SplitAfter(string(data), "\n")
	if len(lines) > maxSyntaxSearch {
		return 0
	}
	k := len(lines)
	for k > 1 {
		var n yaml.Node
		if yaml.Unmarshal([]byte(strings.Join(lines[:k-1], "")), &n) == nil {
			break
		}
		k--
	}
	return k
}

// Resolve expands ${VAR} in url, headers and env values from getenv (nil
// means no variables are set) and validates the configuration, reporting
// every mistake together. Call it once: it changes the values in place.
func (c *Config) Resolve(getenv func(string) string) error {
	errs := append(c.resolve(getenv), c.validate(func(name string) bool { return name == BuiltinDemo })...)
	if err := configErrors(errs); err != nil {
		return fmt.Errorf("agent: config: %w", err)
	}
	return nil
}

// resolve expands ${VAR} in url, headers and env values.
func (c *Config) resolve(getenv func(string) string) []*ConfigError {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var errs []*ConfigError
	for i := range c.Agents {
		a := &c.Agents[i]
		for j := range a.Servers {
			s := &a.Servers[j]
			where := fmt.Sprintf("agents[%d].servers[%d]", i, j)
			var err error
			if s.URL, err = expandEnv(s.URL, getenv); err != nil {
				errs = append(errs, &ConfigError{Path: where + ".url", Msg: fmt.Sprintf("%s.url: %v", where, err)})
			}
			s.Headers = expandMap(s.Headers, getenv, where+".headers", &errs)
			s.Env = expandMap(s.Env, getenv, where+".env", &errs)
		}
	}
	return errs
}

func expandMap(m map[string]string, getenv func(string) string, where string, errs *[]*ConfigError) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		x, err := expandEnv(v, getenv)
		if err != nil {
			*errs = append(*errs, &ConfigError{Path: where + "." + k, Msg: fmt.Sprintf("%s.%s: %v", where, k, err)})
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

// problems gathers the mistakes validate finds, each with the path of its
// value.
type problems []*ConfigError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &ConfigError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

// validate checks the configuration; known says which builtin servers
// exist.
func (c Config) validate(known func(string) bool) []*ConfigError {
	var p problems
	if len(c.Agents) == 0 {
		p.add("agents", "agents: at least one agent is needed")
	}
	ids := map[string]int{}
	names := map[string]int{}
	for i, a := range c.Agents {
		where := fmt.Sprintf("agents[%d]", i)
		switch {
		case a.ID == "":
			p.add(where+".id", "%s.id: missing", where)
		case !namePattn.MatchString(a.ID):
			p.add(where+".id", "%s.id %q: use letters, digits, '.', '_' or '-' (at most 64)", where, a.ID)
		}
		if a.ID != "" {
			if j, dup := ids[a.ID]; dup {
				p.add(where+".id", "%s.id %q: already used by agents[%d]", where, a.ID, j)
			} else {
				ids[a.ID] = i
			}
		}
		name := a.DisplayName()
		if name != "" {
			if j, dup := names[name]; dup {
				p.add(where+".name", "%s.name %q: already used by agents[%d]", where, name, j)
			} else {
				names[name] = i
			}
		}
		a.Model.validate(&p, where+".model")
		servers := map[string]int{}
		for j, s := range a.Servers {
			path := fmt.Sprintf("%s.servers[%d]", where, j)
			sw := path
			if s.Name != "" {
				sw += " (" + s.Name + ")"
			}
			switch {
			case s.Name == "":
				p.add(path+".name", "%s.name: missing", sw)
			case !namePattn.MatchString(s.Name):
				p.add(path+".name", "%s.name %q: use letters, digits, '.', '_' or '-' (at most 64)", sw, s.Name)
			default:
				if k, dup := servers[s.Name]; dup {
					p.add(path+".name", "%s.name %q: already used by servers[%d]", sw, s.Name, k)
				} else {
					servers[s.Name] = j
				}
			}
			s.validate(&p, path, sw, known)
		}
		for k, d := range a.Rules.DenyTools {
			if err := access.CheckDenyRule(d); err != nil {
				p.add(fmt.Sprintf("%s.rules.denyTools[%d]", where, k), "%s.rules.denyTools[%d] %q: %v", where, k, d, err)
			}
		}
		for k, r := range a.Rules.Redact {
			if _, err := access.CompileRedactPattern(r); err != nil {
				p.add(fmt.Sprintf("%s.rules.redact[%d]", where, k), "%s.rules.redact[%d] %q: %v", where, k, r, err)
			}
		}
	}
	return p
}

// DisplayName is the agent's name, or its id when it has none.
func (a AgentConfig) DisplayName() string {
	if a.Name != "" {
		return a.Name
	}
	return a.ID
}

func (m ModelConfig) validate(p *problems, where string) {
	switch m.Kind {
	case "", ModelBuiltin:
		if m.BaseURL != "" || m.Model != "" || m.APIKeyEnv != "" || m.APIVersion != "" {
			p.add(where, "%s: baseURL, model, apiKeyEnv and apiVersion are for kind openai", where)
		}
	case ModelOpenAI:
		if m.Model == "" {
			p.add(where+".model", "%s.model: missing (kind openai needs the model or deployment name)", where)
		}
		if m.BaseURL != "" {
			if err := checkHTTPURL(m.BaseURL); err != nil {
				p.add(where+".baseURL", "%s.baseURL: %v", where, err)
			}
		}
		if m.APIKeyEnv != "" && !envName.MatchString(m.APIKeyEnv) {
			p.add(where+".apiKeyEnv", "%s.apiKeyEnv %q: not a variable name", where, m.APIKeyEnv)
		}
	default:
		p.add(where+".kind", "%s.kind %q: use builtin or openai", where, m.Kind)
	}
	if _, err := parseTimeout(m.Timeout, DefaultModelTimeout); err != nil {
		p.add(where+".timeout", "%s.timeout: %v", where, err)
	}
	if m.MaxToolRounds < 0 {
		p.add(where+".maxToolRounds", "%s.maxToolRounds: must not be negative", where)
	}
}

// validate checks one server; path is where it is in the file, where how
// mistakes name it (with its name).
func (s ServerConfig) validate(p *problems, path, where string, known func(string) bool) {
	kinds := 0
	if s.Builtin != "" {
		kinds++
		if !known(s.Builtin) {
			p.add(path+".builtin", "%s.builtin %q: unknown (known: %s)", where, s.Builtin, BuiltinDemo)
		}
	}
	if s.URL != "" {
		kinds++
		if err := checkHTTPURL(s.URL); err != nil {
			p.add(path+".url", "%s.url: %v", where, err)
		}
	}
	if len(s.Command) > 0 {
		kinds++
		if s.Command[0] == "" {
			p.add(path+".command", "%s.command: the program is empty", where)
		}
	}
	switch kinds {
	case 0:
		p.add(path, "%s: set one of builtin, url or command", where)
	case 1:
	default:
		p.add(path, "%s: set only one of builtin, url or command", where)
	}
	if len(s.Headers) > 0 && s.URL == "" {
		p.add(path+".headers", "%s.headers: only for a url server", where)
	}
	if (len(s.Env) > 0 || s.Dir != "") && len(s.Command) == 0 {
		p.add(path, "%s: env and dir are only for a command server", where)
	}
	if _, err := parseTimeout(s.Timeout, DefaultServerTimeout); err != nil {
		p.add(path+".timeout", "%s.timeout: %v", where, err)
	}
	if _, err := mcpapps.ParsePermissions(s.Permissions); err != nil {
		p.add(path+".permissions", "%s.permissions: %v", where, err)
	}
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
