package main

import (
	"bytes"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/bot"
)

func envOf(m map[string]string) environment { return environment(m) }

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Addr.String() != ":3978" || cfg.Addr.Loopback() || !cfg.AppsEnabled || cfg.PublicBaseURL.String() != "http://localhost:3978" {
		t.Errorf("defaults: addr %q apps %v base %q", cfg.Addr, cfg.AppsEnabled, cfg.PublicBaseURL)
	}
	if cfg.openButtons() {
		t.Error("an http:// base URL must not give Open buttons")
	}
	if len(cfg.Agents.Agents) != 1 {
		t.Errorf("the built-in demo agent is the default, got %d agents", len(cfg.Agents.Agents))
	}
	if !filepath.IsAbs(cfg.DataDir) || filepath.Base(cfg.DataDir) != "data" {
		t.Errorf("data dir %q", cfg.DataDir)
	}
	if cfg.MaxHTMLBytes != 8<<20 {
		t.Errorf("MaxHTMLBytes = %d, want 8 MiB", cfg.MaxHTMLBytes)
	}
}

func TestConfigMaxHTMLBytes(t *testing.T) {
	for in, want := range map[string]int{"8388608": 8 << 20, "16MiB": 16 << 20, "512KiB": 512 << 10, "64KiB": 64 << 10, "64MiB": 64 << 20} {
		cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_MCP_APPS_MAX_HTML_BYTES": in}))
		if err != nil || cfg.MaxHTMLBytes != want {
			t.Errorf("%q: %d, %v; want %d", in, cfg.MaxHTMLBytes, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "8MB", "1.5MiB", "63KiB", "65MiB", "99999999999999999999", "MiB"} {
		_, err := loadConfig(envOf(map[string]string{"TICKETIQ_MCP_APPS_MAX_HTML_BYTES": in}))
		if err == nil || !strings.Contains(err.Error(), "TICKETIQ_MCP_APPS_MAX_HTML_BYTES") {
			t.Errorf("%q accepted or not named: %v", in, err)
		}
	}
}

func TestConfigOpenButtonsOnlyForHTTPS(t *testing.T) {
	for base, want := range map[string]bool{
		"https://bot.example.com":  true,
		"HTTPS://bot.example.com/": true,
		"http://localhost:3978":    false,
		"http://127.0.0.1:3978":    false,
	} {
		cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_PUBLIC_BASE_URL": base}))
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		if got := cfg.openButtons(); got != want {
			t.Errorf("%s: open buttons %v, want %v", base, got, want)
		}
		if strings.HasSuffix(cfg.PublicBaseURL.String(), "/") {
			t.Errorf("%s: trailing slash kept: %s", base, cfg.PublicBaseURL)
		}
	}
}

// A base URL that the server could not serve from is refused by
// `teamsbot config` with exactly the words `teamsbot serve` gives at start,
// so a setting that passes the one passes the other.
func TestConfigAndServeRefuseTheSameBaseURLs(t *testing.T) {
	for _, tc := range []struct{ base, why string }{
		{"https://bot.example.com/teams", "has a path"},
		{"https://bot.example.com/?tenant=1", "has a query"},
		{"https://user:hunter2@bot.example.com", "credentials"},
		{"http://bot.example.com", "http:// is allowed only for localhost"},
		{"https://10.1.2.3", "an IP address"},
	} {
		for _, name := range []string{"TICKETIQ_PUBLIC_BASE_URL", "TICKETIQ_SANDBOX_BASE_URL"} {
			env := envOf(map[string]string{name: tc.base, "TICKETIQ_DATA": t.TempDir()})
			var out, errOut bytes.Buffer
			cfgErr := run(t.Context(), []string{"teamsbot", "config"}, env, &out, &errOut)
			serveErr := run(t.Context(), []string{"teamsbot", "serve"}, env, &out, &errOut)
			if cfgErr == nil || serveErr == nil {
				t.Fatalf("%s=%s: config error %v, serve error %v; want both refused", name, tc.base, cfgErr, serveErr)
			}
			if cfgErr.Error() != serveErr.Error() {
				t.Errorf("%s=%s: config says %q, serve says %q", name, tc.base, cfgErr, serveErr)
			}
			if !strings.Contains(cfgErr.Error(), name) || !strings.Contains(cfgErr.Error(), tc.why) {
				t.Errorf("%s=%s: %q does not name the variable and say %q", name, tc.base, cfgErr, tc.why)
			}
			if strings.Contains(cfgErr.Error(), "hunter2") {
				t.Errorf("%s=%s: the error shows the password: %v", name, tc.base, cfgErr)
			}
		}
	}
}

func TestConfigListenAddress(t *testing.T) {
	for addr, loopback := range map[string]bool{
		":3978": false, "0.0.0.0:3978": false, "192.0.2.1:3978": false,
		"127.0.0.1:3978": true, "localhost:3978": true, "[::1]:3978": true,
	} {
		cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": addr}))
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		if cfg.Addr.Loopback() != loopback || cfg.Addr.String() != addr {
			t.Errorf("%s: parsed as %s, loopback %v; want loopback %v", addr, cfg.Addr, cfg.Addr.Loopback(), loopback)
		}
	}
	if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": "localhost:http"})); err == nil || !strings.Contains(err.Error(), "TICKETIQ_ADDR") {
		t.Errorf("a named port was accepted: %v", err)
	}
}

// Unset, the public base URL follows the listen port, so that the links
// and the local sign-in of a service started on another port lead back to
// it; a base URL that is set is kept as it is.
func TestConfigPublicBaseURLFollowsTheListenPort(t *testing.T) {
	for _, tc := range []struct{ addr, base, want string }{
		{"127.0.0.1:4100", "", "http://localhost:4100"},
		{":8080", "", "http://localhost:8080"},
		{"127.0.0.1:0", "", "http://localhost:3978"},
		{"127.0.0.1:4100", "https://bot.example.com", "https://bot.example.com"},
	} {
		cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": tc.addr, "TICKETIQ_PUBLIC_BASE_URL": tc.base}))
		if err != nil {
			t.Fatalf("%s: %v", tc.addr, err)
		}
		if got := cfg.PublicBaseURL.String(); got != tc.want {
			t.Errorf("listening on %s with base %q: public base URL %s, want %s", tc.addr, tc.base, got, tc.want)
		}
	}
}

func TestConfigReportsEveryMistakeAtOnce(t *testing.T) {
	_, err := loadConfig(envOf(map[string]string{
		"TICKETIQ_ADDR":                    "no-port",
		"TICKETIQ_PUBLIC_BASE_URL":         "ftp://example.com",
		"TICKETIQ_SANDBOX_BASE_URL":        "https://sandbox.example.com/?x=1",
		"TICKETIQ_MCP_APPS_ENABLED":        "maybe",
		"TICKETIQ_BOT_APP_PASSWORD":        "s3cr3t-value",
		"TICKETIQ_BOT_OPENID_METADATA_URL": "not a url",
		"TICKETIQ_OIDC_ISSUER":             "https://login.example.com/t/v2.0",
		"TICKETIQ_LOG_LEVEL":               "loud",
		"TICKETIQ_CONFIG":                  filepath.Join(t.TempDir(), "missing.yaml"),
	}))
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	msg := err.Error()
	for _, want := range []string{
		"TICKETIQ_ADDR", "TICKETIQ_PUBLIC_BASE_URL", "TICKETIQ_SANDBOX_BASE_URL",
		"TICKETIQ_MCP_APPS_ENABLED", "TICKETIQ_BOT_APP_ID and TICKETIQ_BOT_APP_PASSWORD",
		"TICKETIQ_BOT_OPENID_METADATA_URL", "TICKETIQ_OIDC_CLIENT_ID", "TICKETIQ_LOG_LEVEL", "TICKETIQ_CONFIG",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error does not mention %s:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cr3t-value") {
		t.Error("a secret appears in the error")
	}
}

func TestConfigAppsDisabled(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_MCP_APPS_ENABLED": "false"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AppsEnabled {
		t.Error("TICKETIQ_MCP_APPS_ENABLED=false left the extension on")
	}
}

func TestConfigFileRejectsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teamsbot.yaml")
	if err := os.WriteFile(path, []byte("agents:\n  - id: default\n    name: A\n    colour: blue\n    model: {kind: builtin}\n    servers: [{name: demo, builtin: demo}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path}))
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Fatalf("unknown key not named in the error: %v", err)
	}
}

func TestConfigCommandRedactsSecrets(t *testing.T) {
	env := envOf(map[string]string{
		"TICKETIQ_BOT_APP_ID":         "app",
		"TICKETIQ_BOT_APP_PASSWORD":   "bot-password-value",
		"TICKETIQ_BOT_TENANT_ID":      "72f988bf-86f1-41af-91ab-2d7cd011db47",
		"TICKETIQ_OIDC_ISSUER":        "https://login.example.com/t/v2.0",
		"TICKETIQ_OIDC_CLIENT_ID":     "client",
		"TICKETIQ_OIDC_CLIENT_SECRET": "oidc-secret-value",
	})
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"teamsbot", "config"}, env, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "bot-password-value") || strings.Contains(s, "oidc-secret-value") {
		t.Errorf("secret printed:\n%s", s)
	}
	for _, v := range settings() {
		if !strings.Contains(s, v.name+"=") {
			t.Errorf("%s missing from config output", v.name)
		}
	}
	if !strings.Contains(s, `TICKETIQ_BOT_APP_PASSWORD="[redacted]"`) {
		t.Errorf("password not shown as redacted:\n%s", s)
	}
}

func TestConfigFileRejectsUnknownTopLevelKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teamsbot.json")
	if err := os.WriteFile(path, []byte(`{"agnets": [{"id": "x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path}))
	if err == nil || !strings.Contains(err.Error(), "line 1, column 2: unknown key `agnets` at the top of the file; did you mean `agents`?") {
		t.Fatalf("a misspelt top-level key must be named, got %v", err)
	}
}

func TestConfigFileJSONAndEnvironmentExpansion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teamsbot.json")
	doc := `{"agents": [{"id": "sales", "name": "Sales", "model": {"kind": "builtin"},
	  "servers": [{"name": "demo", "builtin": "demo"},
	              {"name": "crm", "url": "https://crm.example.com/mcp", "headers": {"Authorization": "Bearer ${CRM_TOKEN}"}}]}]}`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path, "CRM_TOKEN": "tok"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Agents.Agents[0].Servers[1].Headers["Authorization"]; got != "Bearer tok" {
		t.Errorf("header %q, want the variable expanded", got)
	}
	if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path})); err == nil || !strings.Contains(err.Error(), "CRM_TOKEN") {
		t.Errorf("an unset variable must be named: %v", err)
	}
}

func TestWriteTimeoutOutlastsToolTimeouts(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.writeTimeout(); got != bot.DefaultTurnTimeout+15*time.Second {
		t.Errorf("default write timeout %v, want a turn's time and 15 s", got)
	}
	path := filepath.Join(t.TempDir(), "teamsbot.yaml")
	doc := "agents:\n  - id: slow\n    servers:\n      - {name: demo, builtin: demo}\n      - {name: batch, url: 'https://batch.example.com/mcp', timeout: 5m}\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, err = loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path})); err != nil {
		t.Fatal(err)
	}
	if got := cfg.writeTimeout(); got <= 5*time.Minute {
		t.Errorf("write timeout %v does not outlast a 5m tool timeout", got)
	}
}

// The tenants whose messages make runs: the list when given, else the
// bot's own tenant and a single-tenant sign-in's; a bot with an app id
// and none of them is refused at start.
func TestConfigBotAllowedTenants(t *testing.T) {
	const a, b = "72f988bf-86f1-41af-91ab-2d7cd011db47", "0b0b0b0b-0000-4000-8000-00000000000B"
	for _, tc := range []struct {
		env  map[string]string
		want []string
		why  string
	}{
		{env: map[string]string{"TICKETIQ_BOT_ALLOWED_TENANTS": a + ", " + b + "," + a}, want: []string{a, strings.ToLower(b)}},
		{env: map[string]string{"TICKETIQ_BOT_TENANT_ID": a}, want: []string{a}},
		{env: map[string]string{"TICKETIQ_BOT_TENANT_ID": a, "TICKETIQ_OIDC_ISSUER": "https://login.microsoftonline.com/" + b + "/v2.0", "TICKETIQ_OIDC_CLIENT_ID": "c"}, want: []string{a, strings.ToLower(b)}},
		{env: map[string]string{"TICKETIQ_OIDC_ISSUER": "https://login.microsoftonline.com/organizations/v2.0", "TICKETIQ_OIDC_CLIENT_ID": "c"}, want: nil},
		{env: map[string]string{"TICKETIQ_BOT_APP_ID": "app", "TICKETIQ_BOT_APP_PASSWORD": "p"}, why: "TICKETIQ_BOT_ALLOWED_TENANTS is required"},
		{env: map[string]string{"TICKETIQ_BOT_ALLOWED_TENANTS": "contoso.onmicrosoft.com"}, why: "not a tenant id"},
	} {
		cfg, err := loadConfig(envOf(tc.env))
		if tc.why != "" {
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("%v: %v, want an error saying %q", tc.env, err, tc.why)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if strings.Join(cfg.BotAllowedTenants, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: allowed %v, want %v", tc.env, cfg.BotAllowedTenants, tc.want)
		}
	}
}

func TestConfigRetention(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AuditRetention != 90*24*time.Hour || cfg.RunRetention != 30*24*time.Hour {
		t.Errorf("defaults: audit %v, runs %v", cfg.AuditRetention, cfg.RunRetention)
	}
	cfg, err = loadConfig(envOf(map[string]string{"TICKETIQ_AUDIT_RETENTION": "365d", "TICKETIQ_RUN_RETENTION": "168h"}))
	if err != nil || cfg.AuditRetention != 365*24*time.Hour || cfg.RunRetention != 7*24*time.Hour {
		t.Errorf("set: %v %v %v", cfg.AuditRetention, cfg.RunRetention, err)
	}
	for _, bad := range []string{"forever", "12h", "-3d", "3.5d"} {
		if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_AUDIT_RETENTION": bad})); err == nil || !strings.Contains(err.Error(), "TICKETIQ_AUDIT_RETENTION") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// The bot's bounds of turns: the defaults, values set, and mistakes named
// with what is wanted, the pending bound never below the running one.
func TestConfigTurnBounds(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil || cfg.MaxConcurrentTurns != 64 || cfg.MaxPendingTurns != 2048 {
		t.Fatalf("defaults: %d running, %d pending, %v", cfg.MaxConcurrentTurns, cfg.MaxPendingTurns, err)
	}
	cfg, err = loadConfig(envOf(map[string]string{"TICKETIQ_MAX_CONCURRENT_TURNS": "12000", "TICKETIQ_MAX_PENDING_TURNS": " 20000 "}))
	if err != nil || cfg.MaxConcurrentTurns != 12000 || cfg.MaxPendingTurns != 20000 {
		t.Errorf("set: %d running, %d pending, %v", cfg.MaxConcurrentTurns, cfg.MaxPendingTurns, err)
	}
	for env, want := range map[[2]string]string{
		{"TICKETIQ_MAX_CONCURRENT_TURNS", "0"}:       "TICKETIQ_MAX_CONCURRENT_TURNS: \"0\": want a whole number from 1 to 100000",
		{"TICKETIQ_MAX_CONCURRENT_TURNS", "lots"}:    "want a whole number from 1 to 100000",
		{"TICKETIQ_MAX_PENDING_TURNS", "2000000"}:    "want a whole number from 1 to 1000000",
		{"TICKETIQ_MAX_PENDING_TURNS", "10"}:         "TICKETIQ_MAX_PENDING_TURNS: 10 is below TICKETIQ_MAX_CONCURRENT_TURNS (64)",
		{"TICKETIQ_MAX_CONCURRENT_TURNS", "99999.5"}: "want a whole number",
	} {
		if _, err := loadConfig(envOf(map[string]string{env[0]: env[1]})); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%q: %v, want %q", env[0], env[1], err, want)
		}
	}
}

// TICKETIQ_ELICITATION_WAIT: how long a call waits for the person's
// answer; its default is the agent's.
func TestConfigElicitationWait(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil || cfg.ElicitWait != agent.DefaultElicitWait {
		t.Fatalf("default %s, %v; want %s", cfg.ElicitWait, err, agent.DefaultElicitWait)
	}
	if cfg, err = loadConfig(envOf(map[string]string{"TICKETIQ_ELICITATION_WAIT": " 15m "})); err != nil || cfg.ElicitWait != 15*time.Minute {
		t.Errorf("set: %s, %v", cfg.ElicitWait, err)
	}
	for _, v := range []string{"2h", "5s", "soon", "-1m"} {
		if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_ELICITATION_WAIT": v})); err == nil ||
			!strings.Contains(err.Error(), "TICKETIQ_ELICITATION_WAIT") || !strings.Contains(err.Error(), "want a duration from 10s to 1h") {
			t.Errorf("%q: %v", v, err)
		}
	}
}

// TICKETIQ_BOT_CLOUD sets the bot's inbound metadata and the Graph
// endpoints together; a variable set by hand still wins; an unknown cloud
// is named with the choices.
func TestConfigCloud(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"TICKETIQ_BOT_CLOUD": "USGov"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.BotCloud.Issuer != "https://api.botframework.us" || c.BotOpenIDMetadataURL != "https://login.botframework.azure.us/v1/.well-known/openidconfiguration" ||
		c.GraphBaseURL != "https://graph.microsoft.us/v1.0" || c.GraphTokenURL != "https://login.microsoftonline.us/{tenant}/oauth2/v2.0/token" {
		t.Errorf("usgov: %+v", c)
	}
	c, err = loadConfig(envOf(map[string]string{"TICKETIQ_BOT_CLOUD": "china", "TICKETIQ_GRAPH_BASE_URL": "https://graph.example.cn/v1.0"}))
	if err != nil || c.GraphBaseURL != "https://graph.example.cn/v1.0" || c.BotOpenIDMetadataURL != "https://login.botframework.azure.cn/v1/.well-known/openidconfiguration" {
		t.Errorf("china with a Graph URL of its own: %+v, %v", c, err)
	}
	if c, err := loadConfig(envOf(nil)); err != nil || c.BotCloud.Name != "public" || c.GraphBaseURL != "https://graph.microsoft.com/v1.0" {
		t.Errorf("default cloud: %+v, %v", c.BotCloud, err)
	}
	if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_BOT_CLOUD": "gcc"})); err == nil || !strings.Contains(err.Error(), "TICKETIQ_BOT_CLOUD") || !strings.Contains(err.Error(), "usgovdod") {
		t.Errorf("an unknown cloud: %v", err)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"teamsbot", "config"}, envOf(map[string]string{"TICKETIQ_BOT_CLOUD": "usgovdod"}), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `TICKETIQ_GRAPH_BASE_URL="https://dod-graph.microsoft.us/v1.0"`+"\t(default of the usgovdod cloud)") {
		t.Errorf("teamsbot config does not show the cloud's Graph URL:\n%s", out.String())
	}
}

// TestConfigPlaygroundOnlyInLocalMode: the playground is on by default in
// local mode (no bot app id, a loopback listener), can be turned off, and
// asking for it anywhere else is a configuration error that says why.
func TestConfigPlaygroundOnlyInLocalMode(t *testing.T) {
	bot := map[string]string{
		"TICKETIQ_BOT_APP_ID": "00000000-0000-0000-0000-000000000001", "TICKETIQ_BOT_APP_PASSWORD": "pw",
		"TICKETIQ_BOT_TENANT_ID": "00000000-0000-0000-0000-0000000000aa",
	}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for name, c := range map[string]struct {
		env     map[string]string
		want    bool
		wantErr string
	}{
		"local by default":            {env: with(nil, "TICKETIQ_ADDR", "127.0.0.1:3978"), want: true},
		"turned off":                  {env: with(nil, "TICKETIQ_ADDR", "127.0.0.1:3978", "TICKETIQ_PLAYGROUND", "false")},
		"asked for in local mode":     {env: with(nil, "TICKETIQ_ADDR", "[::1]:3978", "TICKETIQ_PLAYGROUND", "true"), want: true},
		"all interfaces":              {env: with(nil, "TICKETIQ_ADDR", ":3978")},
		"a bot with an app id":        {env: with(bot, "TICKETIQ_ADDR", "127.0.0.1:3978")},
		"asked for on all interfaces": {env: with(nil, "TICKETIQ_ADDR", ":3978", "TICKETIQ_PLAYGROUND", "on"), wantErr: "only in local mode"},
		"asked for with an app id":    {env: with(bot, "TICKETIQ_ADDR", "127.0.0.1:3978", "TICKETIQ_PLAYGROUND", "true"), wantErr: "only in local mode"},
		"not a setting":               {env: with(nil, "TICKETIQ_PLAYGROUND", "maybe"), wantErr: "TICKETIQ_PLAYGROUND"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := loadConfig(envOf(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Playground != c.want {
				t.Errorf("playground %v, want %v", cfg.Playground, c.want)
			}
		})
	}
}

// TICKETIQ_TEAMS_TAB is a bool, off by default; on, it needs the OIDC
// sign-in, an https public base URL and known tenants, and each missing one
// is named with the other configuration errors.
func TestConfigTeamsTab(t *testing.T) {
	cfg, err := loadConfig(envOf(nil))
	if err != nil || cfg.TeamsTab {
		t.Fatalf("default: TeamsTab %v, %v", cfg.TeamsTab, err)
	}
	good := map[string]string{
		"TICKETIQ_TEAMS_TAB":       "true",
		"TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example",
		"TICKETIQ_OIDC_ISSUER":     "https://login.microsoftonline.com/11111111-1111-1111-1111-111111111111/v2.0",
		"TICKETIQ_OIDC_CLIENT_ID":  "22222222-2222-2222-2222-222222222222",
	}
	cfg, err = loadConfig(envOf(good))
	if err != nil || !cfg.TeamsTab {
		t.Fatalf("a good Teams tab configuration: TeamsTab %v, %v", cfg.TeamsTab, err)
	}
	if s := teamsSignIn(cfg); s == nil || s.Authority != "https://login.microsoftonline.com" {
		t.Errorf("Teams sign-in options %+v", s)
	}
	if teamsPage(cfg) == nil {
		t.Error("no Teams page options in Teams tab mode")
	}

	_, err = loadConfig(envOf(map[string]string{"TICKETIQ_TEAMS_TAB": "true", "TICKETIQ_LOG_LEVEL": "loud"}))
	for _, want := range []string{"TICKETIQ_TEAMS_TAB: opening views inside Teams needs the OIDC sign-in", "must be an https:// address", "TICKETIQ_LOG_LEVEL"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Teams tab without sign-in and https: %v lacks %q", err, want)
		}
	}
	multi := maps.Clone(good)
	multi["TICKETIQ_OIDC_ISSUER"] = "https://login.microsoftonline.com/organizations/v2.0"
	if _, err := loadConfig(envOf(multi)); err == nil || !strings.Contains(err.Error(), "TICKETIQ_OIDC_ALLOWED_TENANTS") {
		t.Errorf("multi-tenant issuer without tenants: %v", err)
	}
	bad := maps.Clone(good)
	bad["TICKETIQ_TEAMS_TAB"] = "maybe"
	if _, err := loadConfig(envOf(bad)); err == nil || !strings.Contains(err.Error(), `TICKETIQ_TEAMS_TAB: "maybe": want true or false`) {
		t.Errorf("TICKETIQ_TEAMS_TAB=maybe: %v", err)
	}
}

// TestConfigurationFileExampleInDocs loads the example of
// docs/configuration-file.md as the service would: it is a configuration
// the service accepts, with the agent, servers and rules it shows.
func TestConfigurationFileExampleInDocs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration-file.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/configuration-file.md has no yaml example")
	}
	path := filepath.Join(t.TempDir(), "teamsbot.yaml")
	if err := os.WriteFile(path, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_CONFIG": path, "CRM_TOKEN": "crm-token"}))
	if err != nil {
		t.Fatalf("the documented example is refused: %v", err)
	}
	if len(cfg.Agents.Agents) != 1 {
		t.Fatalf("the example gives %d agents, want 1", len(cfg.Agents.Agents))
	}
	a := cfg.Agents.Agents[0]
	var servers []string
	for _, s := range a.Servers {
		servers = append(servers, s.Name)
	}
	if a.ID != "default" || strings.Join(servers, " ") != "demo crm tickets debug" || a.Servers[2].Auth != "person" || len(a.Rules.DenyTools) != 3 {
		t.Errorf("the example reads as agent %q with servers %v and rules %+v", a.ID, servers, a.Rules)
	}
}
