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

	"go.yaml.in/yaml/v3"

	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/clientcred"
	"teamsbot/internal/guid"
	"teamsbot/internal/netaddr"
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

	// Playground serves /playground and its Bot Connector; only ever true
	// in local mode.
	Playground bool

	// Agents comes from TICKETIQ_CONFIG, or is the built-in demo agent.
	Agents agent.Config
}

// envVar documents one variable of the contract; README's table follows it.
type envVar struct {
	name, def string
	secret    bool
	// fromCloud: unset, the value is TICKETIQ_BOT_CLOUD's.
	fromCloud bool
}

// azureFederatedTokenFile is the variable Azure Workload Identity's
// webhook sets in a pod whose service account uses it: the path of the
// projected service account token.
const azureFederatedTokenFile = "AZURE_FEDERATED_TOKEN_FILE"

// The bot's credential variables, of which exactly one is set for a bot
// with an app id.
var botCredentialVars = []string{"TICKETIQ_BOT_APP_PASSWORD", "TICKETIQ_BOT_CERT_FILE", "TICKETIQ_BOT_FEDERATED_TOKEN_FILE"}

// envVars lists every variable the service reads, in the order README shows.
var envVars = []envVar{
	{name: "TICKETIQ_ADDR", def: ":3978"},
	{name: "TICKETIQ_METRICS_ADDR"},
	{name: "TICKETIQ_PPROF", def: "false"},
	{name: "TICKETIQ_DATA", def: "./data"},
	{name: "TICKETIQ_DATABASE_URL"},
	{name: "TICKETIQ_PUBLIC_BASE_URL", def: "http://localhost:3978"},
	{name: "TICKETIQ_SANDBOX_BASE_URL"},
	{name: "TICKETIQ_MCP_APPS_ENABLED", def: "true"},
	{name: agent.MaxHTMLSetting, def: "8MiB"},
	{name: "TICKETIQ_BOT_APP_ID"},
	{name: "TICKETIQ_BOT_APP_PASSWORD", secret: true},
	{name: "TICKETIQ_BOT_CERT_FILE"},
	{name: "TICKETIQ_BOT_FEDERATED_TOKEN_FILE"},
	{name: "TICKETIQ_BOT_TENANT_ID"},
	{name: "TICKETIQ_BOT_CLOUD", def: bot.CloudPublic},
	{name: "TICKETIQ_BOT_OPENID_METADATA_URL", fromCloud: true},
	{name: "TICKETIQ_BOT_TOKEN_URL"},
	{name: "TICKETIQ_BOT_ALLOWED_TENANTS"},
	{name: "TICKETIQ_OIDC_ISSUER"},
	{name: "TICKETIQ_OIDC_CLIENT_ID"},
	{name: "TICKETIQ_OIDC_CLIENT_SECRET", secret: true},
	{name: "TICKETIQ_OIDC_ALLOWED_TENANTS"},
	{name: "TICKETIQ_TEAMS_TAB", def: "false"},
	{name: "TICKETIQ_GRAPH_BASE_URL", fromCloud: true},
	{name: "TICKETIQ_GRAPH_TOKEN_URL", fromCloud: true},
	{name: "TICKETIQ_CONFIG"},
	{name: "TICKETIQ_AUDIT_RETENTION", def: "90d"},
	{name: "TICKETIQ_RUN_RETENTION", def: "30d"},
	{name: "TICKETIQ_LOG_LEVEL", def: "info"},
	{name: "TICKETIQ_PLAYGROUND", def: "auto"},
}

// loadConfig reads and validates the configuration, reporting every mistake
// at once so an operator fixes them in one go.
func loadConfig(getenv func(string) string) (config, error) {
	get := func(name string) string {
		for _, v := range envVars {
			if v.name == name {
				if s := strings.TrimSpace(getenv(name)); s != "" {
					return s
				}
				return v.def
			}
		}
		panic("loadConfig: undeclared variable " + name) // a programming error, caught by tests
	}
	var errs []error
	c := config{
		DataDir:               get("TICKETIQ_DATA"),
		DatabaseURL:           get("TICKETIQ_DATABASE_URL"),
		BotAppID:              get("TICKETIQ_BOT_APP_ID"),
		BotCertFile:           get("TICKETIQ_BOT_CERT_FILE"),
		BotFederatedTokenFile: get("TICKETIQ_BOT_FEDERATED_TOKEN_FILE"),
		BotTenantID:           get("TICKETIQ_BOT_TENANT_ID"),
		BotOpenIDMetadataURL:  get("TICKETIQ_BOT_OPENID_METADATA_URL"),
		BotTokenURL:           get("TICKETIQ_BOT_TOKEN_URL"),
		OIDCIssuer:            get("TICKETIQ_OIDC_ISSUER"),
		OIDCClientID:          get("TICKETIQ_OIDC_CLIENT_ID"),
		OIDCClientSecret:      get("TICKETIQ_OIDC_CLIENT_SECRET"),
		GraphBaseURL:          get("TICKETIQ_GRAPH_BASE_URL"),
		GraphTokenURL:         get("TICKETIQ_GRAPH_TOKEN_URL"),
		ConfigPath:            get("TICKETIQ_CONFIG"),
		LogLevel:              strings.ToLower(get("TICKETIQ_LOG_LEVEL")),
	}

	var err error
	if c.BotCloud, err = bot.CloudNamed(get("TICKETIQ_BOT_CLOUD")); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_BOT_CLOUD: %w", err))
	} else {
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
	}
	if c.Addr, err = netaddr.ParseListen(get("TICKETIQ_ADDR")); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_ADDR: %w", err))
	}
	if s := get("TICKETIQ_METRICS_ADDR"); s != "" {
		if c.MetricsAddr, err = netaddr.ParseListen(s); err != nil {
			errs = append(errs, fmt.Errorf("TICKETIQ_METRICS_ADDR: %w", err))
		} else if c.MetricsAddr == c.Addr && !strings.HasSuffix(s, ":0") {
			errs = append(errs, fmt.Errorf("TICKETIQ_METRICS_ADDR %q: the same as TICKETIQ_ADDR: the internal listener needs its own port", s))
		}
	}
	switch v := strings.ToLower(get("TICKETIQ_PPROF")); v {
	case "true", "1", "yes", "on":
		c.Pprof = true
		if c.MetricsAddr.IsZero() {
			errs = append(errs, errors.New("TICKETIQ_PPROF: needs TICKETIQ_METRICS_ADDR: the profiler is served on the internal listener only"))
		}
	case "false", "0", "no", "off":
	default:
		errs = append(errs, fmt.Errorf("TICKETIQ_PPROF %q: want true or false", v))
	}
	if abs, err := filepath.Abs(c.DataDir); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_DATA %q: %w", c.DataDir, err))
	} else {
		c.DataDir = abs
	}

	if c.PublicBaseURL, err = netaddr.ParseOrigin(get("TICKETIQ_PUBLIC_BASE_URL")); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_PUBLIC_BASE_URL: %w", err))
	}
	if s := get("TICKETIQ_SANDBOX_BASE_URL"); s != "" {
		if c.SandboxBaseURL, err = netaddr.ParseOrigin(s); err != nil {
			errs = append(errs, fmt.Errorf("TICKETIQ_SANDBOX_BASE_URL: %w", err))
		}
	}

	switch v := strings.ToLower(get("TICKETIQ_MCP_APPS_ENABLED")); v {
	case "true", "1", "yes", "on":
		c.AppsEnabled = true
	case "false", "0", "no", "off":
		c.AppsEnabled = false
	default:
		errs = append(errs, fmt.Errorf("TICKETIQ_MCP_APPS_ENABLED %q: want true or false", v))
	}

	if err := c.loadBotCredential(get("TICKETIQ_BOT_APP_PASSWORD"), getenv, time.Now()); err != nil {
		errs = append(errs, err)
	}
	for _, u := range []struct {
		name  string
		value *string
	}{
		{"TICKETIQ_BOT_OPENID_METADATA_URL", &c.BotOpenIDMetadataURL},
		{"TICKETIQ_BOT_TOKEN_URL", &c.BotTokenURL},
		{"TICKETIQ_OIDC_ISSUER", &c.OIDCIssuer},
		{"TICKETIQ_GRAPH_BASE_URL", &c.GraphBaseURL},
		{"TICKETIQ_GRAPH_TOKEN_URL", &c.GraphTokenURL},
	} {
		// Checked, not rewritten: a token URL keeps its {tenant} as written.
		if *u.value == "" {
			continue
		}
		if _, err := netaddr.ParseURL(*u.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.name, err))
		}
	}
	if c.GraphTokenURL != "" && !strings.Contains(c.GraphTokenURL, "{tenant}") {
		errs = append(errs, errors.New("TICKETIQ_GRAPH_TOKEN_URL: must name the tenant as {tenant}: each tenant's token comes from its own endpoint"))
	}
	c.BotAllowedTenants = tenantList(get("TICKETIQ_BOT_ALLOWED_TENANTS"))
	if len(c.BotAllowedTenants) == 0 {
		// The bot's own tenant, and the sign-in's when it is one tenant.
		c.BotAllowedTenants = tenantList(c.BotTenantID + "," + issuerTenant(c.OIDCIssuer))
	}
	for _, t := range c.BotAllowedTenants {
		if !guid.Valid(t) {
			errs = append(errs, fmt.Errorf("TICKETIQ_BOT_ALLOWED_TENANTS: %q is not a tenant id (a GUID)", textclip.Clip(t, 64)))
		}
	}
	if c.BotAppID != "" && len(c.BotAllowedTenants) == 0 {
		errs = append(errs, errors.New("TICKETIQ_BOT_ALLOWED_TENANTS is required for a bot without TICKETIQ_BOT_TENANT_ID: list the tenants whose messages may run the agent"))
	}
	if c.OIDCIssuer != "" && c.OIDCClientID == "" {
		errs = append(errs, errors.New("TICKETIQ_OIDC_CLIENT_ID is required with TICKETIQ_OIDC_ISSUER"))
	}
	for _, t := range strings.Split(get("TICKETIQ_OIDC_ALLOWED_TENANTS"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.OIDCAllowedTenants = append(c.OIDCAllowedTenants, t)
		}
	}
	switch v := strings.ToLower(get("TICKETIQ_TEAMS_TAB")); v {
	case "true", "1", "yes", "on":
		c.TeamsTab = true
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
	case "false", "0", "no", "off":
	default:
		errs = append(errs, fmt.Errorf("TICKETIQ_TEAMS_TAB %q: want true or false", v))
	}
	if c.MaxHTMLBytes, err = parseByteSize(get(agent.MaxHTMLSetting)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", agent.MaxHTMLSetting, err))
	}
	for _, r := range []struct {
		name string
		to   *time.Duration
	}{{"TICKETIQ_AUDIT_RETENTION", &c.AuditRetention}, {"TICKETIQ_RUN_RETENTION", &c.RunRetention}} {
		d, err := parseRetention(get(r.name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
		}
		*r.to = d
	}
	// The playground posts unauthenticated activities and answers as a Bot
	// Connector: it exists only where the bot does the same (local mode,
	// no app id) and only this machine can reach it (a loopback listener).
	local := c.BotAppID == "" && c.Addr.Loopback()
	switch v := strings.ToLower(get("TICKETIQ_PLAYGROUND")); v {
	case "auto":
		c.Playground = local
	case "true", "1", "yes", "on":
		if !local {
			errs = append(errs, errors.New("TICKETIQ_PLAYGROUND: the playground runs only in local mode: no TICKETIQ_BOT_APP_ID and a loopback TICKETIQ_ADDR such as 127.0.0.1:3978"))
		}
		c.Playground = local
	case "false", "0", "no", "off":
		c.Playground = false
	default:
		errs = append(errs, fmt.Errorf("TICKETIQ_PLAYGROUND %q: want true, false or auto", v))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("TICKETIQ_LOG_LEVEL %q: want debug, info, warn or error", c.LogLevel))
	}

	if c.ConfigPath == "" {
		c.Agents = agent.DefaultConfig()
	} else if data, err := os.ReadFile(c.ConfigPath); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_CONFIG: %w", err))
	} else if c.Agents, err = loadConfigFile(data, getenv); err != nil {
		errs = append(errs, fmt.Errorf("TICKETIQ_CONFIG %s: %w", c.ConfigPath, err))
	}

	if c.DatabaseURL != "" {
		if err := checkDatabaseURL(c.DatabaseURL); err != nil {
			errs = append(errs, fmt.Errorf("TICKETIQ_DATABASE_URL %s: %w", netaddr.Redact(c.DatabaseURL), err))
		}
	}

	if len(errs) > 0 {
		return config{}, fmt.Errorf("configuration: %w", errors.Join(errs...))
	}
	return c, nil
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
func (c *config) loadBotCredential(password string, getenv func(string) string, now time.Time) error {
	var set []string // the variables set, in botCredentialVars' order
	for i, v := range []string{password, c.BotCertFile, c.BotFederatedTokenFile} {
		if v != "" {
			set = append(set, botCredentialVars[i])
		}
	}
	if c.BotAppID == "" {
		if len(set) > 0 {
			return fmt.Errorf("TICKETIQ_BOT_APP_ID and %s must be set together", strings.Join(set, " and "))
		}
		return nil // local mode
	}
	if len(set) == 0 {
		if f := strings.TrimSpace(getenv(azureFederatedTokenFile)); f != "" {
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
		return errors.Join(errs...)
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

// fileKeys are the top-level keys of the TICKETIQ_CONFIG file and the part
// that owns each; any other key is a mistake (a typo would otherwise be
// silently ignored and the defaults would run instead).
var fileKeys = map[string]string{"agents": "agent"}

// loadConfigFile checks the top-level keys of the configuration file, then
// hands each part its own.
func loadConfigFile(data []byte, getenv func(string) string) (agent.Config, error) {
	var top map[string]yaml.Node
	if err := yaml.Unmarshal(data, &top); err != nil {
		return agent.Config{}, fmt.Errorf("not YAML or JSON: %w", err)
	}
	var errs []error
	for key, node := range top {
		if _, ok := fileKeys[key]; !ok {
			errs = append(errs, fmt.Errorf("line %d: unknown key %q (known: agents)", node.Line, key))
		}
	}
	if len(errs) > 0 {
		return agent.Config{}, errors.Join(errs...)
	}
	return agent.LoadConfig(data, getenv)
}

// The bounds of TICKETIQ_MCP_APPS_MAX_HTML_BYTES: below the smallest real
// view, or so large that one server's message could take a good part of
// the service's memory, is a mistake.
const (
	minHTMLBytes = 64 << 10
	maxHTMLBytes = 64 << 20
)

// parseByteSize reads a size: whole bytes ("8388608") or whole KiB or MiB
// ("512KiB", "8MiB"), from 64 KiB to 64 MiB.
func parseByteSize(s string) (int, error) {
	num, unit := s, 1
	for suffix, u := range map[string]int{"KiB": 1 << 10, "MiB": 1 << 20} {
		if n, ok := strings.CutSuffix(s, suffix); ok {
			num, unit = strings.TrimSpace(n), u
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a number of bytes, or of KiB or MiB such as 8MiB", s)
	}
	if n > maxHTMLBytes/unit || n*unit < minHTMLBytes {
		return 0, fmt.Errorf("%q: want from 64KiB to 64MiB", s)
	}
	return n * unit, nil
}

// parseRetention reads a retention: whole days ("90d") or a Go duration
// ("720h"), at least one day.
func parseRetention(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("%q: want whole days such as 90d, or a duration such as 720h", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("%q: want whole days such as 90d, or a duration such as 720h", s)
		}
	}
	if d < 24*time.Hour {
		return 0, fmt.Errorf("%q: at least one day", s)
	}
	return d, nil
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
	return max(bot.DefaultTurnTimeout+15*time.Second, longest+15*time.Second)
}

// openButtons reports whether cards may carry Open buttons: Teams opens only
// https addresses, and the product shows the button only then.
func (c config) openButtons() bool { return c.PublicBaseURL.HTTPS() }

// write prints the effective configuration with secrets redacted, one
// variable a line, sorted, for `teamsbot config`.
func (c config) write(w io.Writer, getenv func(string) string) error {
	lines := make([]string, 0, len(envVars))
	for _, v := range envVars {
		val := strings.TrimSpace(getenv(v.name))
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
		if v.name == "TICKETIQ_DATABASE_URL" {
			// Its password may be in the query too: the host alone.
			val = netaddr.Redact(val)
		}
		val = netaddr.RedactURLCredentials(val)
		lines = append(lines, fmt.Sprintf("%s=%s\t(%s)", v.name, strconv.Quote(val), src))
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

// signInMode names how people sign in to open views.
func (c config) signInMode() string {
	switch {
	case c.OIDCIssuer != "":
		return "OpenID Connect"
	case c.Addr.Loopback():
		return "local development"
	default:
		return "off (no OIDC issuer, not on loopback)"
	}
}

// logAttrs is what the start-up log line prints for the configuration: no secrets, ever.
func (c config) logAttrs() []any {
	return []any{
		"addr", c.Addr.String(),
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
		"signin", c.signInMode(),
		"teams_tab", c.TeamsTab,
		"agents", len(c.Agents.Agents),
		"open_buttons", c.openButtons(),
		"playground", c.Playground,
		"config_file", c.ConfigPath,
	}
}
