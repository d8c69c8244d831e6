package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/guid"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/telemetry"
	"teamsbot/internal/textclip"
)

// config is everything the service reads from its environment and its
// optional configuration file, validated once at start.
type config struct {
	Addr netaddr.Listen
	// MetricsAddr is the optional internal listener of /metrics and
	// /readyz; zero: the main listener serves them.
	MetricsAddr netaddr.Listen
	// Pprof serves Go's profiler under /debug/pprof/ on the internal
	// listener, which it requires: a profile shows request data.
	Pprof   bool
	DataDir string
	// DatabaseURL is TICKETIQ_DATABASE_URL: when set, the store is this
	// PostgreSQL database, shared by every replica, instead of the bbolt
	// file in DataDir. It may hold a password: never print it whole.
	DatabaseURL    string
	PublicBaseURL  netaddr.Origin
	SandboxBaseURL netaddr.Origin // zero: the public base URL serves the frames too
	AppsEnabled    bool
	// MaxHTMLBytes bounds a view's HTML, and each message read from an MCP
	// server (twice it and 1 MiB).
	MaxHTMLBytes int

	BotAppID string
	// botPassword is TICKETIQ_BOT_APP_PASSWORD, read into BotCredential.
	botPassword string
	// BotCredential proves the bot's app registration to Entra ID, for the
	// bot's own token and Graph's: a client secret, a certificate or a
	// federated token file; zero in local mode.
	BotCredential clientcred.Credential
	// BotCertFile and BotFederatedTokenFile are the paths the credential
	// was loaded from, for `teamsbot config`; the one in use is
	// BotCredential.Path().
	BotCertFile, BotFederatedTokenFile string
	// botFederatedFromAzure: BotFederatedTokenFile is workload identity's
	// AZURE_FEDERATED_TOKEN_FILE, not set by hand.
	botFederatedFromAzure bool
	BotTenantID           string
	// BotCloud is Microsoft's cloud of the bot (TICKETIQ_BOT_CLOUD): the
	// defaults of the metadata, token and Graph URLs come from it.
	BotCloud             bot.Cloud
	BotOpenIDMetadataURL string
	BotTokenURL          string // empty: derived from the cloud and the tenant
	// BotAllowedTenants are the tenants whose messages make runs.
	BotAllowedTenants []string

	OIDCIssuer         string
	OIDCClientID       string
	OIDCClientSecret   string // secret
	OIDCAllowedTenants []string

	// TeamsTab opens views inside Teams (TICKETIQ_TEAMS_TAB): Stage View
	// from the card, the page framable by Teams, Teams single sign-on.
	TeamsTab bool

	GraphBaseURL  string
	GraphTokenURL string // with {tenant}
	ConfigPath    string
	LogLevel      string

	// AuditRetention and RunRetention are how long audit records, and runs
	// with their deliveries, are kept.
	AuditRetention, RunRetention time.Duration

	// MaxConcurrentTurns and MaxPendingTurns are the bot's bounds of
	// turns running and turns taken but not answered.
	MaxConcurrentTurns, MaxPendingTurns int
	// ElicitWait is how long a tool call waits for the person's answer
	// to what its server asks (TICKETIQ_ELICITATION_WAIT).
	ElicitWait time.Duration

	// Playground serves /playground and its Bot Connector; only ever true
	// in local mode.
	Playground bool
	// playground is TICKETIQ_PLAYGROUND: "" for auto, "true" or "false".
	playground string

	// Agents comes from TICKETIQ_CONFIG, or is the built-in demo agent.
	Agents agent.Config

	// Traces is what the standard OTEL_* variables say of the service's
	// OpenTelemetry traces: off unless an endpoint is set.
	Traces telemetry.Config
}

// environment is the process's variables, read once at start: a setting
// is looked up by name, and every TICKETIQ_ name is checked against the
// settings.
type environment map[string]string

// environFrom reads os.Environ's NAME=value lines.
func environFrom(lines []string) environment {
	env := environment{}
	for _, l := range lines {
		if name, value, ok := strings.Cut(l, "="); ok && name != "" {
			env[name] = value
		}
	}
	return env
}

// get is the value of a variable, "" when unset.
func (e environment) get(name string) string { return e[name] }

// azureFederatedTokenFile is the variable Azure Workload Identity's
// webhook sets in a pod whose service account uses it: the path of the
// projected service account token.
const azureFederatedTokenFile = "AZURE_FEDERATED_TOKEN_FILE"

// The bot's credential variables, of which exactly one is set for a bot
// with an app id.
var botCredentialVars = []string{"TICKETIQ_BOT_APP_PASSWORD", "TICKETIQ_BOT_CERT_FILE", "TICKETIQ_BOT_FEDERATED_TOKEN_FILE"}

// mistakes is every mistake of the configuration, reported together so
// that an operator fixes them in one go.
type mistakes []error

func (m mistakes) Error() string {
	if len(m) == 1 {
		return "the configuration has a mistake: " + m[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the configuration has %d mistakes:", len(m))
	for _, e := range m {
		b.WriteString("\n  - ")
		b.WriteString(strings.ReplaceAll(e.Error(), "\n", "\n    "))
	}
	return b.String()
}

func (m mistakes) Unwrap() []error { return m }

// loadConfig reads and validates the whole configuration: every setting,
// the checks between them, the bot's credential and the configuration
// file. Every mistake is reported at once.
func loadConfig(env environment) (config, error) {
	c, errs := loadSettings(env)
	errs = append(errs, c.check(env, time.Now())...)
	if len(errs) > 0 {
		return config{}, errs
	}
	return c, nil
}

// loadSettings parses the named settings (every one when none is named),
// and names each TICKETIQ_ variable that is no setting. Each mistake
// starts with the variable's name.
func loadSettings(env environment, names ...string) (config, mistakes) {
	errs := mistakes(unknownSettings(env))
	var c config
	for _, s := range settings() {
		if len(names) > 0 && !slices.Contains(names, s.name) {
			continue
		}
		v := strings.TrimSpace(env.get(s.name))
		if v == "" {
			v = s.def
		}
		if err := s.parse(&c, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
	}
	return c, errs
}

// check applies the rules between settings, loads the bot's credential
// and reads the configuration file.
func (c *config) check(env environment, now time.Time) []error {
	var errs []error
	if c.MaxPendingTurns < c.MaxConcurrentTurns {
		errs = append(errs, fmt.Errorf("TICKETIQ_MAX_PENDING_TURNS: %d is below TICKETIQ_MAX_CONCURRENT_TURNS (%d): the turns waiting include those running", c.MaxPendingTurns, c.MaxConcurrentTurns))
	}
	// Each URL the operator left unset is the cloud's.
	for _, d := range []struct {
		value *string
		cloud string
	}{
		{&c.BotOpenIDMetadataURL, c.BotCloud.OpenIDMetadataURL},
		{&c.GraphBaseURL, c.BotCloud.GraphBaseURL},
		{&c.GraphTokenURL, c.BotCloud.GraphTokenURL()},
	} {
		if *d.value == "" {
			*d.value = d.cloud
		}
	}
	if c.PublicBaseURL.IsZero() {
		// Unset, people reach the service where it listens, so that
		// links and the sign-in work on another port too.
		port := c.Addr.Port()
		if port == "" || port == "0" {
			port = "3978"
		}
		c.PublicBaseURL = netaddr.MustParseOrigin("http://localhost:" + port)
	}
	if c.GraphTokenURL != "" && !strings.Contains(c.GraphTokenURL, "{tenant}") {
		errs = append(errs, errors.New("TICKETIQ_GRAPH_TOKEN_URL: must name the tenant as {tenant}: each tenant's token comes from its own endpoint"))
	}
	if !c.MetricsAddr.IsZero() && c.MetricsAddr == c.Addr && !strings.HasSuffix(c.Addr.String(), ":0") {
		errs = append(errs, fmt.Errorf("TICKETIQ_METRICS_ADDR %q: the same as TICKETIQ_ADDR: the internal listener needs its own port", c.MetricsAddr.String()))
	}
	if c.Pprof && c.MetricsAddr.IsZero() {
		errs = append(errs, errors.New("TICKETIQ_PPROF: needs TICKETIQ_METRICS_ADDR: the profiler is served on the internal listener only"))
	}
	errs = append(errs, c.loadBotCredential(env, now)...)
	var traceErrs []error
	c.Traces, traceErrs = telemetry.Load(env.get)
	errs = append(errs, traceErrs...)
	if len(c.BotAllowedTenants) == 0 {
		// The bot's own tenant, and the sign-in's when it is one tenant.
		c.BotAllowedTenants = tenantList(c.BotTenantID + "," + issuerTenant(c.OIDCIssuer))
		for _, t := range c.BotAllowedTenants {
			if !guid.Valid(t) {
				errs = append(errs, fmt.Errorf("TICKETIQ_BOT_TENANT_ID: %q is not a tenant id (a GUID)", textclip.Clip(t, 64)))
			}
		}
	}
	if c.BotAppID != "" && len(c.BotAllowedTenants) == 0 {
		errs = append(errs, errors.New("TICKETIQ_BOT_ALLOWED_TENANTS is required for a bot without TICKETIQ_BOT_TENANT_ID: list the tenants whose messages may run the agent"))
	}
	if c.OIDCIssuer != "" && c.OIDCClientID == "" {
		errs = append(errs, errors.New("TICKETIQ_OIDC_CLIENT_ID is required with TICKETIQ_OIDC_ISSUER"))
	}
	if c.TeamsTab {
		// Teams shows only https pages, and the view page inside it signs
		// in with a token of the OIDC sign-in's app registration.
		if c.OIDCIssuer == "" || c.OIDCClientID == "" {
			errs = append(errs, errors.New("TICKETIQ_TEAMS_TAB: opening views inside Teams needs the OIDC sign-in (TICKETIQ_OIDC_ISSUER and TICKETIQ_OIDC_CLIENT_ID): Teams single sign-on asks Entra ID for a token of that app registration"))
		}
		if !c.PublicBaseURL.IsZero() && !c.PublicBaseURL.HTTPS() {
			errs = append(errs, errors.New("TICKETIQ_TEAMS_TAB: Teams opens only https pages: TICKETIQ_PUBLIC_BASE_URL must be an https:// address"))
		}
		if c.OIDCIssuer != "" && len(c.OIDCAllowedTenants) == 0 && !guid.Valid(issuerTenant(c.OIDCIssuer)) {
			errs = append(errs, errors.New("TICKETIQ_TEAMS_TAB: with a multi-tenant issuer, list the tenants whose Teams tokens are taken in TICKETIQ_OIDC_ALLOWED_TENANTS"))
		}
	}
	// The playground posts unauthenticated activities and answers as a Bot
	// Connector: it exists only where the bot does the same (local mode,
	// no app id) and only this machine can reach it (a loopback listener).
	local := c.BotAppID == "" && c.Addr.Loopback()
	switch c.playground {
	case "":
		c.Playground = local
	case "true":
		if !local {
			errs = append(errs, errors.New("TICKETIQ_PLAYGROUND: the playground runs only in local mode: no TICKETIQ_BOT_APP_ID and a loopback TICKETIQ_ADDR such as 127.0.0.1:3978"))
		}
		c.Playground = local
	}
	if c.ConfigPath == "" {
		c.Agents = agent.DefaultConfig()
	} else if data, err := os.ReadFile(c.ConfigPath); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_CONFIG: %w", err))
	} else if c.Agents, err = loadConfigFile(data, env); err != nil {
		errs = append(errs, configFileMistakes(c.ConfigPath, err)...)
	}
	return errs
}

// configFileMistakes puts each mistake of the configuration file on a line
// of its own, named by the file and its place in it.
func configFileMistakes(path string, err error) []error {
	var list interface{ Unwrap() []error }
	var one *agent.ConfigError
	switch {
	case errors.As(err, &one) && one == err:
		return []error{fmt.Errorf("TICKETIQ_CONFIG %s, %w", path, err)}
	case !errors.As(err, &list):
		return []error{fmt.Errorf("TICKETIQ_CONFIG %s: %w", path, err)}
	}
	var errs []error
	for _, e := range list.Unwrap() {
		errs = append(errs, fmt.Errorf("TICKETIQ_CONFIG %s, %w", path, e))
	}
	return errs
}

// checkDatabaseURL checks TICKETIQ_DATABASE_URL's form: a postgres:// or
// postgresql:// URL. Its errors never quote it, since it may hold a
// password; the database itself is checked when the store opens it.
func checkDatabaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return errors.New("want a postgres:// or postgresql:// URL")
	}
	if u.Opaque != "" {
		return errors.New("want postgres://host/database, not postgres:host")
	}
	return nil
}

// storeName says where the store is, for the start-up log: the bbolt
// file, or the database's host without user, password or options.
func (c config) storeName() string {
	if c.DatabaseURL == "" {
		return "bbolt " + filepath.Join(c.DataDir, "teamsbot.db")
	}
	return "postgres " + netaddr.Redact(c.DatabaseURL)
}

// loadBotCredential checks that a bot with an app id has exactly one
// credential, loads it into c.BotCredential, and checks each file that is
// named whether or not it is the one used, so that every mistake shows at
// once. Unset, the credential is workload identity's token file, when its
// webhook set AZURE_FEDERATED_TOKEN_FILE. Its errors name the variables and
// paths, never the secret or the key.
func (c *config) loadBotCredential(env environment, now time.Time) []error {
	password := c.botPassword
	var set []string // the variables set, in botCredentialVars' order
	for i, v := range []string{password, c.BotCertFile, c.BotFederatedTokenFile} {
		if v != "" {
			set = append(set, botCredentialVars[i])
		}
	}
	if c.BotAppID == "" {
		if len(set) > 0 {
			return []error{fmt.Errorf("TICKETIQ_BOT_APP_ID and %s must be set together", strings.Join(set, " and "))}
		}
		return nil // local mode
	}
	if len(set) == 0 {
		if f := strings.TrimSpace(env.get(azureFederatedTokenFile)); f != "" {
			c.BotFederatedTokenFile, c.botFederatedFromAzure = f, true
			set = []string{"TICKETIQ_BOT_FEDERATED_TOKEN_FILE"}
		}
	}
	var errs []error
	switch len(set) {
	case 0:
		errs = append(errs, fmt.Errorf("TICKETIQ_BOT_APP_ID needs a credential: set one of %s (or run with Azure workload identity, whose %s is then used)", strings.Join(botCredentialVars, ", "), azureFederatedTokenFile))
	case 1:
	default:
		errs = append(errs, fmt.Errorf("%s are all set: set exactly one of %s", strings.Join(set, " and "), strings.Join(botCredentialVars, ", ")))
	}
	var cert, federated clientcred.Credential
	if c.BotCertFile != "" {
		var err error
		if cert, err = clientcred.LoadCertificate(c.BotCertFile, now); err != nil {
			errs = append(errs, fmt.Errorf("TICKETIQ_BOT_CERT_FILE: %w", err))
		}
	}
	if c.BotFederatedTokenFile != "" {
		name := "TICKETIQ_BOT_FEDERATED_TOKEN_FILE"
		if c.botFederatedFromAzure {
			name = azureFederatedTokenFile + " (TICKETIQ_BOT_FEDERATED_TOKEN_FILE unset)"
		}
		var err error
		if federated, err = clientcred.FederatedTokenFile(c.BotFederatedTokenFile); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	switch set[0] {
	case "TICKETIQ_BOT_APP_PASSWORD":
		c.BotCredential = clientcred.Secret(password)
	case "TICKETIQ_BOT_CERT_FILE":
		c.BotCredential = cert
	default:
		c.BotCredential = federated
	}
	return nil
}

// loadConfigFile reads the configuration file. Its only top-level key
// today is agents; any other is a mistake (a typo would otherwise be
// silently ignored and the defaults would run instead). A part that owns
// another key adds it here.
func loadConfigFile(data []byte, env environment) (agent.Config, error) {
	return agent.LoadConfigFile(data, env.get)
}

// readConfigFile is loadConfigFile for reading what the file says, for
// `teamsbot manifest`: a ${VAR} that is not set is left as written, since
// the package holds none of the servers' secrets. Its top-level keys are
// loadConfigFile's.
func readConfigFile(data []byte, env environment) (agent.Config, error) {
	return agent.LoadConfigFileUnresolved(data, env.get)
}

// tenantList splits a comma-separated list of tenant ids, lower-cased,
// without blanks or repeats.
func tenantList(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// issuerTenant is the tenant of a single-tenant Entra issuer
// (https://login.microsoftonline.com/<tenant GUID>/v2.0), or "".
func issuerTenant(issuer string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return ""
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) == 2 && parts[1] == "v2.0" && guid.Valid(parts[0]) {
		return parts[0]
	}
	return ""
}

// writeTimeout bounds writing one response. A view's tool call answers
// only when the tool does, so it must outlast the longest tool timeout of
// any configured server; the runs API answers once its run is posted, so
// it must outlast a turn.
func (c config) writeTimeout() time.Duration {
	longest := agent.DefaultServerTimeout
	for _, a := range c.Agents.Agents {
		for _, s := range a.Servers {
			if d, err := time.ParseDuration(s.Timeout); err == nil && d > longest {
				longest = d
			}
		}
	}
	// A view's call that waits for the person's answer to what its server
	// asks moves its own write deadline (viewpage).
	return max(bot.DefaultTurnTimeout+15*time.Second, longest+15*time.Second)
}

// openButtons reports whether cards may carry Open buttons: Teams opens only
// https addresses, and the product shows the button only then.
func (c config) openButtons() bool { return c.PublicBaseURL.HTTPS() }

// write prints the effective configuration with secrets redacted, one
// variable a line, sorted, for `teamsbot config`.
func (c config) write(w io.Writer, env environment) error {
	var lines []string
	for _, v := range settings() {
		val := strings.TrimSpace(env.get(v.name))
		src := "set"
		switch {
		case val != "":
		case v.name == "TICKETIQ_BOT_FEDERATED_TOKEN_FILE" && c.botFederatedFromAzure:
			val, src = c.BotFederatedTokenFile, "from "+azureFederatedTokenFile+", set by Azure workload identity"
		case v.fromCloud:
			val, src = c.cloudDefault(v.name), "default of the "+c.BotCloud.Name+" cloud"
		default:
			val, src = v.def, "default"
		}
		if v.secret && val != "" {
			val = "[redacted]"
		}
		if v.show != nil {
			val = v.show(val)
		}
		val = netaddr.RedactURLCredentials(val)
		lines = append(lines, fmt.Sprintf("%s=%s\t(%s)", v.name, strconv.Quote(val), src))
	}
	for _, v := range telemetry.Variables() {
		for i, name := range v.Names {
			val := strings.TrimSpace(env.get(name))
			src := "set"
			switch {
			case val != "":
			case i > 0:
				src = "unset: " + v.Names[0] + " applies"
			case v.Default != "":
				val, src = v.Default, "default"
			case v.Unset != "":
				src = "unset: " + strings.TrimPrefix(v.Unset, "empty: ")
			default:
				src = "unset"
			}
			if v.Secret && val != "" {
				val = "[redacted]"
			}
			lines = append(lines, fmt.Sprintf("%s=%s\t(%s)", name, strconv.Quote(netaddr.RedactURLCredentials(val)), src))
		}
	}
	sort.Strings(lines)
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// cloudDefault is the value a fromCloud variable takes when unset.
func (c config) cloudDefault(name string) string {
	switch name {
	case "TICKETIQ_BOT_OPENID_METADATA_URL":
		return c.BotCloud.OpenIDMetadataURL
	case "TICKETIQ_GRAPH_BASE_URL":
		return c.BotCloud.GraphBaseURL
	case "TICKETIQ_GRAPH_TOKEN_URL":
		return c.BotCloud.GraphTokenURL()
	}
	panic("cloudDefault: " + name + " has no cloud default") // a programming error, caught by tests
}

// metricsAddr names where /metrics and /readyz are served, for the log.
func (c config) metricsAddr() string {
	if c.MetricsAddr.IsZero() {
		return "the main listener"
	}
	return c.MetricsAddr.String()
}

// logAttrs is what the start-up log line prints for the configuration:
// no secrets, ever. The address really listened on and the sign-in really
// in force come with the "listening" line.
func (c config) logAttrs() []any {
	return []any{
		"metrics_addr", c.metricsAddr(),
		"data", c.DataDir,
		"store", c.storeName(),
		"public_base_url", c.PublicBaseURL.String(),
		"bot_cloud", c.BotCloud.Name,
		"mcp_apps", c.AppsEnabled,
		"mcp_apps_max_html_bytes", c.MaxHTMLBytes,
		"bot_mode", map[bool]string{true: "local (loopback only)", false: "Bot Framework"}[c.BotAppID == ""],
		"bot_credential", c.BotCredential,
		"bot_tenants", c.BotAllowedTenants,
		"teams_tab", c.TeamsTab,
		"agents", len(c.Agents.Agents),
		"open_buttons", c.openButtons(),
		"playground", c.Playground,
		"config_file", c.ConfigPath,
		"traces", c.tracesInForce(),
	}
}

// tracesInForce says where the spans go, or why none are made, for the
// start-up log: the endpoint without its user info or query, never the
// headers.
func (c config) tracesInForce() string {
	if c.Traces.Off != "" {
		return "off: " + c.Traces.Off
	}
	return fmt.Sprintf("OTLP/HTTP to %s, sampler %s", netaddr.RedactURLCredentials(c.Traces.Endpoint), c.Traces.Sampler)
}
