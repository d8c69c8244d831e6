package agent

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"teamsbot/access"
	"teamsbot/internal/netaddr"
	"teamsbot/mcpapps"
)

// Checking a configuration once it is read: ${VAR} references resolved
// from the environment, then every agent, model and server validated, all
// mistakes reported together.

// Resolve expands ${VAR} in url, headers and env values from getenv (nil
// means no variables are set) and validates the configuration, reporting
// every mistake together. Call it once: it changes the values in place.
func (c *Config) Resolve(getenv func(string) string) error {
	errs := append(c.resolve(getenv, false), c.validate(func(name string) bool { return name == BuiltinDemo })...)
	if err := configErrors(errs); err != nil {
		return fmt.Errorf("agent: config: %w", err)
	}
	return nil
}

// resolve expands ${VAR} in url, headers and env values. With keepUnset,
// a value that names a variable getenv does not set stays as written, and
// its mistake is marked unresolved (for LoadConfigFileUnresolved to pass
// over); otherwise the value is emptied.
func (c *Config) resolve(getenv func(string) string, keepUnset bool) []*ConfigError {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	var errs []*ConfigError
	expand := func(v, path string) string {
		x, err := expandEnv(v, getenv)
		if err == nil {
			return x
		}
		unset := errors.Is(err, errUnsetVariable)
		errs = append(errs, &ConfigError{Path: path, Msg: fmt.Sprintf("%s: %v", path, err), unresolved: unset})
		if unset && keepUnset {
			return v
		}
		return x
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		for j := range a.Servers {
			s := &a.Servers[j]
			where := fmt.Sprintf("agents[%d].servers[%d]", i, j)
			s.URL = expand(s.URL, where+".url")
			s.Headers = expandMap(s.Headers, where+".headers", expand)
			s.Env = expandMap(s.Env, where+".env", expand)
		}
	}
	return errs
}

func expandMap(m map[string]string, where string, expand func(v, path string) string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = expand(v, where+"."+k)
	}
	return out
}

// errUnsetVariable is expandEnv's mistake for a variable that is not set.
var errUnsetVariable = errors.New("not set")

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
			return "", fmt.Errorf("uses ${%s}, which is %w", name, errUnsetVariable)
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
		if a.Memory.Turns < -1 || a.Memory.Turns > 1000 {
			p.add(where+".memory.turns", "%s.memory.turns %d: use 1 to 1000 earlier turns, or -1 for no memory", where, a.Memory.Turns)
		}
		if a.Memory.Tokens < 0 || a.Memory.Tokens > 1_000_000 {
			p.add(where+".memory.tokens", "%s.memory.tokens %d: use 1 to 1000000 tokens", where, a.Memory.Tokens)
		}
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
		validatePrompts(&p, where, a.Prompts)
	}
	return p
}

// validatePrompts checks an agent's suggested prompts against what Teams
// takes of a bot command: a title and a text each on one line, within
// MaxPromptTitle and MaxPromptText characters, at most MaxPrompts of
// them, no title twice (Teams would show two alike).
func validatePrompts(p *problems, where string, prompts []PromptConfig) {
	if len(prompts) > MaxPrompts {
		p.add(where+".prompts", "%s.prompts: %d prompts, at most %d (Teams lists at most 10 commands, and two of them are /new and /tools)", where, len(prompts), MaxPrompts)
	}
	titles := map[string]int{}
	for k, pr := range prompts {
		path := fmt.Sprintf("%s.prompts[%d]", where, k)
		check := func(key, value string, most int) {
			switch n := utf8.RuneCountInString(value); {
			case strings.TrimSpace(value) == "":
				p.add(path+"."+key, "%s.%s: missing", path, key)
			case n > most:
				p.add(path+"."+key, "%s.%s has %d characters; Teams takes at most %d", path, key, n, most)
			case strings.ContainsAny(value, "\r\n"):
				p.add(path+"."+key, "%s.%s: write it on one line (Teams shows one line)", path, key)
			}
		}
		check("title", pr.Title, MaxPromptTitle)
		check("text", pr.Text, MaxPromptText)
		title := strings.ToLower(strings.TrimSpace(pr.Title))
		if title == "" {
			continue
		}
		if j, dup := titles[title]; dup {
			p.add(path+".title", "%s.title %q: already used by prompts[%d]", path, pr.Title, j)
		} else {
			titles[title] = k
		}
	}
}

func (m ModelConfig) validate(p *problems, where string) {
	switch m.Kind {
	case "", ModelBuiltin:
		if m.BaseURL != "" || m.Model != "" || m.APIKeyEnv != "" || m.APIVersion != "" || m.Entra {
			p.add(where, "%s: baseURL, model, apiKeyEnv, apiVersion and entra are for kind openai", where)
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
		if m.Entra && m.APIKeyEnv != "" {
			p.add(where+".entra", "%s.entra: signs in with an Entra ID token instead of a key; remove apiKeyEnv (or entra)", where)
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
	s.validateAuth(p, path, where)
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

// validateAuth checks how a url server is authorized.
func (s ServerConfig) validateAuth(p *problems, path, where string) {
	switch s.Auth {
	case "", AuthNone:
		if s.ClientID != "" || s.ClientSecretEnv != "" || len(s.Scopes) > 0 || s.Audience != "" || s.Entra || s.Authority != "" {
			p.add(path+".auth", "%s: clientId, clientSecretEnv, scopes, audience, entra and authority are for auth person or service", where)
		}
		return
	case AuthPerson, AuthService:
	default:
		p.add(path+".auth", "%s.auth %q: use none, person or service", where, s.Auth)
		return
	}
	if s.URL == "" {
		p.add(path+".auth", "%s.auth %s: only for a url server", where, s.Auth)
	}
	for k := range s.Headers {
		if strings.EqualFold(k, "Authorization") {
			p.add(path+".headers", "%s.headers: Authorization is set by auth %s; remove it", where, s.Auth)
		}
	}
	if s.ClientSecretEnv != "" && !envName.MatchString(s.ClientSecretEnv) {
		p.add(path+".clientSecretEnv", "%s.clientSecretEnv %q: not a variable name", where, s.ClientSecretEnv)
	}
	if s.ClientSecretEnv != "" && s.ClientID == "" {
		p.add(path+".clientId", "%s.clientId: missing (clientSecretEnv is the secret of a client id)", where)
	}
	if s.Auth == AuthService && (s.ClientID == "" || s.ClientSecretEnv == "") {
		p.add(path, "%s: auth service needs clientId and clientSecretEnv (the client credentials grant)", where)
	}
	if s.Entra && (s.Auth != AuthPerson || s.ClientID == "" || s.ClientSecretEnv == "" || len(s.Scopes) == 0) {
		p.add(path+".entra", "%s.entra: needs auth person, clientId, clientSecretEnv and scopes (such as api://<server app>/.default and offline_access): Entra ID registers no clients itself", where)
	}
	if s.Authority != "" {
		if err := checkHTTPURL(s.Authority); err != nil {
			p.add(path+".authority", "%s.authority: %v", where, err)
		} else if !s.Entra {
			p.add(path+".authority", "%s.authority: only with entra: true", where)
		}
	}
	for k, sc := range s.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
			p.add(fmt.Sprintf("%s.scopes[%d]", path, k), "%s.scopes[%d] %q: a scope is one word", where, k, sc)
		}
	}
}
