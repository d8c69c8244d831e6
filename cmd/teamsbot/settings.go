package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/guid"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/suggest"
	"teamsbot/internal/textclip"
)

// setting is one TICKETIQ_* variable, everything about it in one place:
// loadConfig parses with it, `teamsbot config` prints with it, and
// `teamsbot help config` and the table of docs/configuration.md (held to
// it by TestSettingsTableInDocs) describe it.
type setting struct {
	name string
	// kind says what the value is: "true or false", "host:port"...
	kind string
	// def is the value an unset variable takes, as it would be typed;
	// unset says in words what an unset variable means when that is not
	// one value (the documents' table starts its default with these words).
	def, unset string
	// secret values are never printed or logged.
	secret bool
	// fromCloud: unset, the value is TICKETIQ_BOT_CLOUD's.
	fromCloud bool
	// help says what the setting does, in one line.
	help string
	// parse reads the value (def when unset) into the configuration and
	// checks it alone; what it says follows the variable's name. Checks
	// that need several settings are config.check's.
	parse func(c *config, v string) error
	// show is the value as `teamsbot config` prints it; nil hides a URL's
	// user info and query.
	show func(v string) string
}

// settings lists every variable the service reads, in the order of the
// table in docs/configuration.md.
func settings() []setting {
	return []setting{
		{name: "TICKETIQ_ADDR", kind: "host:port", def: ":3978", help: "the listen address (./run.sh: 127.0.0.1:3978)",
			parse: func(c *config, v string) (err error) { c.Addr, err = netaddr.ParseListen(v); return err }},
		{name: "TICKETIQ_METRICS_ADDR", kind: "host:port", help: "an internal listener of /metrics, /readyz, /healthz and (on bbolt) /backup, on its own port",
			parse: optional(func(c *config, v string) (err error) { c.MetricsAddr, err = netaddr.ParseListen(v); return err })},
		boolSetting("TICKETIQ_PPROF", "false", "serve Go's profiler on the internal listener (needs TICKETIQ_METRICS_ADDR)", func(c *config) *bool { return &c.Pprof }),
		{name: "TICKETIQ_DATA", kind: "folder", def: "./data", help: "the folder of the bbolt file and the generated keys",
			parse: func(c *config, v string) (err error) { c.DataDir, err = filepath.Abs(v); return err }},
		{name: "TICKETIQ_DATABASE_URL", kind: "postgres:// URL", help: "a PostgreSQL database for the store instead of the bbolt file, shared by several replicas",
			parse: optional(func(c *config, v string) error { c.DatabaseURL = v; return checkDatabaseURL(v) }),
			show:  netaddr.Redact},
		{name: "TICKETIQ_PUBLIC_BASE_URL", kind: "origin", unset: "`http://localhost:` and the port of `TICKETIQ_ADDR` (3978 when that port is 0)", help: "where people reach the service; cards get an Open button only when it is https://",
			parse: optional(func(c *config, v string) (err error) { c.PublicBaseURL, err = netaddr.ParseOrigin(v); return err })},
		{name: "TICKETIQ_SANDBOX_BASE_URL", kind: "origin", unset: "the public base URL", help: "a separate origin that serves the two frame documents",
			parse: optional(func(c *config, v string) (err error) { c.SandboxBaseURL, err = netaddr.ParseOrigin(v); return err })},
		boolSetting("TICKETIQ_MCP_APPS_ENABLED", "true", "false turns the MCP Apps extension off: every tool offered to the model, no views", func(c *config) *bool { return &c.AppsEnabled }),
		{name: agent.MaxHTMLSetting, kind: "size", def: "8MiB", help: "the largest view HTML kept (64KiB to 64MiB); it also bounds what MCP servers send",
			parse: func(c *config, v string) (err error) { c.MaxHTMLBytes, err = parseByteSize(v); return err }},
		{name: "TICKETIQ_BOT_APP_ID", kind: "GUID", help: "the bot's Entra app registration; unset, local mode",
			parse: func(c *config, v string) error { c.BotAppID = v; return nil }},
		{name: "TICKETIQ_BOT_APP_PASSWORD", kind: "secret", secret: true, help: "credential 1: a client secret of the app registration",
			parse: func(c *config, v string) error { c.botPassword = v; return nil }},
		{name: "TICKETIQ_BOT_CERT_FILE", kind: "file", help: "credential 2: a PEM file with the app's RSA private key and certificate",
			parse: func(c *config, v string) error { c.BotCertFile = v; return nil }},
		{name: "TICKETIQ_BOT_FEDERATED_TOKEN_FILE", kind: "file", unset: "`AZURE_FEDERATED_TOKEN_FILE`", help: "credential 3: a federated token file (workload identity)",
			parse: func(c *config, v string) error { c.BotFederatedTokenFile = v; return nil }},
		{name: "TICKETIQ_BOT_TENANT_ID", kind: "GUID", help: "the tenant of a single-tenant bot",
			parse: func(c *config, v string) error { c.BotTenantID = v; return nil }},
		{name: "TICKETIQ_BOT_ALLOWED_TENANTS", kind: "GUIDs, comma-separated", unset: "`TICKETIQ_BOT_TENANT_ID`", help: "the tenants whose Teams messages make runs",
			parse: func(c *config, v string) error {
				c.BotAllowedTenants = tenantList(v)
				var errs []error
				for _, t := range c.BotAllowedTenants {
					if !guid.Valid(t) {
						errs = append(errs, fmt.Errorf("%q is not a tenant id (a GUID)", textclip.Clip(t, 64)))
					}
				}
				return errors.Join(errs...)
			}},
		{name: "TICKETIQ_BOT_CLOUD", kind: "public, usgov, usgovdod or china", def: bot.CloudPublic, help: "Microsoft's cloud of the bot",
			parse: func(c *config, v string) (err error) { c.BotCloud, err = bot.CloudNamed(v); return err }},
		urlSetting("TICKETIQ_BOT_OPENID_METADATA_URL", "Bot Framework OpenID metadata, for inbound tokens", true, func(c *config) *string { return &c.BotOpenIDMetadataURL }),
		urlSetting("TICKETIQ_BOT_TOKEN_URL", "the token endpoint for replies", false, func(c *config) *string { return &c.BotTokenURL }),
		countSetting("TICKETIQ_MAX_CONCURRENT_TURNS", bot.DefaultMaxConcurrentTurns, 100_000, "agent runs at once; more messages wait for a slot", func(c *config) *int { return &c.MaxConcurrentTurns }),
		// The default is agent.DefaultElicitWait, written as people write it.
		{name: "TICKETIQ_ELICITATION_WAIT", kind: "a duration (90s, 15m)", def: "5m",
			help: "how long a tool call waits for the person's answer to what its MCP server asks (elicitation), from 10s to 1h; then the answer is cancel",
			parse: func(c *config, v string) error {
				d, err := time.ParseDuration(strings.TrimSpace(v))
				if err != nil || d < 10*time.Second || d > time.Hour {
					return fmt.Errorf("%q: want a duration from 10s to 1h, such as 90s or 15m", textclip.Clip(v, 32))
				}
				c.ElicitWait = d
				return nil
			}},
		countSetting("TICKETIQ_MAX_PENDING_TURNS", bot.DefaultMaxPendingTurns, 1_000_000, "messages taken but not yet answered; past it Teams is asked to send again later (503 with Retry-After)", func(c *config) *int { return &c.MaxPendingTurns }),
		urlSetting("TICKETIQ_OIDC_ISSUER", "sign-in with Entra ID: https://login.microsoftonline.com/<tenant>/v2.0", false, func(c *config) *string { return &c.OIDCIssuer }),
		{name: "TICKETIQ_OIDC_CLIENT_ID", kind: "GUID", help: "the sign-in's app registration",
			parse: func(c *config, v string) error { c.OIDCClientID = v; return nil }},
		{name: "TICKETIQ_OIDC_CLIENT_SECRET", kind: "secret", secret: true, help: "the sign-in's client secret",
			parse: func(c *config, v string) error { c.OIDCClientSecret = v; return nil }},
		{name: "TICKETIQ_OIDC_ALLOWED_TENANTS", kind: "tenant ids, comma-separated", help: "the tenants that may sign in; required with a multi-tenant issuer",
			parse: func(c *config, v string) error {
				for _, t := range strings.Split(v, ",") {
					if t = strings.TrimSpace(t); t != "" {
						c.OIDCAllowedTenants = append(c.OIDCAllowedTenants, t)
					}
				}
				return nil
			}},
		boolSetting("TICKETIQ_TEAMS_TAB", "false", "open views inside Teams (Stage View, Teams single sign-on)", func(c *config) *bool { return &c.TeamsTab }),
		urlSetting("TICKETIQ_GRAPH_BASE_URL", "Microsoft Graph, for group membership", true, func(c *config) *string { return &c.GraphBaseURL }),
		urlSetting("TICKETIQ_GRAPH_TOKEN_URL", "the token endpoint for Graph, {tenant} standing for each tenant's id", true, func(c *config) *string { return &c.GraphTokenURL }),
		{name: "TICKETIQ_CONFIG", kind: "file", unset: "the built-in demo agent", help: "a YAML (or JSON) file: agents, their MCP servers, model, data rules and suggested prompts",
			parse: func(c *config, v string) error { c.ConfigPath = v; return nil }},
		retentionSetting("TICKETIQ_AUDIT_RETENTION", "90d", "how long audit records are kept", func(c *config) *time.Duration { return &c.AuditRetention }),
		retentionSetting("TICKETIQ_RUN_RETENTION", "30d", "how long runs, their deliveries and the turns of conversation history are kept", func(c *config) *time.Duration { return &c.RunRetention }),
		{name: "TICKETIQ_LOG_LEVEL", kind: "debug, info, warn or error", def: "info", help: "what the JSON log lines on standard error hold",
			parse: func(c *config, v string) error {
				c.LogLevel = strings.ToLower(v)
				if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
					return fmt.Errorf("%q: want debug, info, warn or error", v)
				}
				return nil
			}},
		{name: "TICKETIQ_PLAYGROUND", kind: "auto, true or false", def: "auto", help: "the playground (/playground): auto is on in local mode only",
			parse: func(c *config, v string) error {
				if strings.EqualFold(v, "auto") {
					c.playground = ""
					return nil
				}
				b, err := parseBool(v)
				if err != nil {
					return fmt.Errorf("%q: want auto, true or false", v)
				}
				c.playground = strconv.FormatBool(b)
				return nil
			}},
	}
}

// settingNamed is the setting of a name; false for none.
func settingNamed(name string) (setting, bool) {
	all := settings()
	i := slices.IndexFunc(all, func(s setting) bool { return s.name == name })
	if i < 0 {
		return setting{}, false
	}
	return all[i], true
}

// parseBool reads a switch: true, 1, yes, on or false, 0, no, off, in any
// case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "true", "1", "yes", "on":
		return true, nil
	case "false", "0", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%q: want true or false", v)
}

func boolSetting(name, def, help string, field func(*config) *bool) setting {
	return setting{name: name, kind: "true or false", def: def, help: help,
		parse: func(c *config, v string) (err error) { *field(c), err = parseBool(v); return err }}
}

// urlSetting is an absolute http(s) URL, checked and kept as written (a
// token URL keeps its {tenant}).
func urlSetting(name, help string, fromCloud bool, field func(*config) *string) setting {
	s := setting{name: name, kind: "URL", fromCloud: fromCloud, help: help,
		parse: optional(func(c *config, v string) error {
			*field(c) = v
			_, err := netaddr.ParseURL(v)
			return err
		})}
	switch {
	case fromCloud:
		s.unset = "the cloud's"
	case name == "TICKETIQ_BOT_TOKEN_URL":
		s.unset = "the cloud's login host"
	}
	return s
}

// countSetting is a whole number from 1 to most.
func countSetting(name string, def, most int, help string, field func(*config) *int) setting {
	return setting{name: name, kind: "a whole number", def: strconv.Itoa(def), help: help,
		parse: func(c *config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || n < 1 || n > most {
				return fmt.Errorf("%q: want a whole number from 1 to %d", textclip.Clip(v, 32), most)
			}
			*field(c) = n
			return nil
		}}
}

func retentionSetting(name, def, help string, field func(*config) *time.Duration) setting {
	return setting{name: name, kind: "days (90d) or a duration (720h)", def: def, help: help,
		parse: func(c *config, v string) (err error) { *field(c), err = parseRetention(v); return err }}
}

// optional parses a value only when there is one.
func optional(parse func(c *config, v string) error) func(c *config, v string) error {
	return func(c *config, v string) error {
		if v == "" {
			return nil
		}
		return parse(c, v)
	}
}

// settingPrefix starts the name of every setting.
const settingPrefix = "TICKETIQ_"

// unknownSettings names each variable of env that looks like a setting and
// is none, with the one meant when it is near one: a misspelt setting
// would otherwise be ignored, and its default used, without a word.
func unknownSettings(env environment) []error {
	var known []string
	for _, s := range settings() {
		known = append(known, s.name)
	}
	var names []string
	for name := range env {
		if strings.HasPrefix(strings.ToUpper(name), settingPrefix) && !slices.Contains(known, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var errs []error
	for _, name := range names {
		shown := textclip.Clip(name, 64)
		if meant, ok := suggest.Closest(name, known); ok {
			errs = append(errs, fmt.Errorf("unknown setting %s; did you mean %s?", shown, meant))
		} else {
			errs = append(errs, fmt.Errorf("unknown setting %s: no setting has this name (`teamsbot help config` lists them); unset it", shown))
		}
	}
	return errs
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
