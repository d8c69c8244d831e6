package agent

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"teamsbot/internal/suggest"
	"teamsbot/internal/textclip"
)

// Reading the configuration file: YAML walked as nodes against the
// configuration's types, every mistake placed at its line and column, and
// yaml.v3's syntax errors said in plain words.

// loadFile parses the file into nodes (which keep every value's place),
// walks them beside the Go types they decode into, decodes, expands and
// validates, and reports every mistake found on the way together.
func loadFile(data []byte, getenv func(string) string, strictTop bool, others []string, keepUnset bool) (Config, error) {
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
	resolved := cfg.resolve(getenv, keepUnset)
	if keepUnset {
		// A value left as written is nobody's mistake here: neither it nor
		// what validate says of it is reported.
		resolved = slices.DeleteFunc(resolved, func(e *ConfigError) bool {
			if e.unresolved {
				fc.bad = append(fc.bad, e.Path)
			}
			return e.unresolved
		})
	}
	for _, e := range append(resolved, cfg.validate(func(name string) bool { return name == BuiltinDemo })...) {
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
