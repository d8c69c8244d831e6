package agentstoolkit

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// project is m365agents.yml as the toolkit reads it.
type project struct {
	Version               string   `yaml:"version"`
	EnvironmentFolderPath string   `yaml:"environmentFolderPath"`
	Provision             []action `yaml:"provision"`
	Deploy                []action `yaml:"deploy"`
	Publish               []action `yaml:"publish"`
}

type action struct {
	Uses                   string            `yaml:"uses"`
	Name                   string            `yaml:"name"`
	Env                    map[string]string `yaml:"env"`
	With                   map[string]any    `yaml:"with"`
	WriteToEnvironmentFile map[string]string `yaml:"writeToEnvironmentFile"`
}

// actions are the toolkit's actions this project uses, with the
// parameters each takes (required first, marked with !) and what it may
// write to the environment's file, as the toolkit's yaml.schema.json
// v1.11 declares them.
var actions = map[string]struct{ with, writes []string }{
	"teamsApp/create":             {[]string{"name!"}, []string{"teamsAppId!", "teamsAppTenantId"}},
	"arm/deploy":                  {[]string{"subscriptionId!", "resourceGroupName!", "templates!", "bicepCliVersion"}, nil},
	"script":                      {[]string{"run!", "workingDirectory", "shell", "timeout", "redirectTo"}, nil},
	"teamsApp/validateAppPackage": {[]string{"appPackagePath!"}, nil},
	"teamsApp/update":             {[]string{"appPackagePath!"}, nil},
	"teamsApp/publishAppPackage":  {[]string{"appPackagePath!"}, []string{"publishedAppId!"}},
}

func readProject(t *testing.T) project {
	t.Helper()
	raw, err := os.ReadFile("m365agents.yml")
	if err != nil {
		t.Fatal(err)
	}
	var p project
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("m365agents.yml: %v", err)
	}
	return p
}

// readEnv reads an environment file of the toolkit: NAME=value lines.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`).MatchString(k) {
			t.Errorf("%s:%d: %q is not NAME=value", path, n+1, line)
			continue
		}
		env[k] = v
	}
	return env
}

var reference = regexp.MustCompile(`\$\{\{\s*([A-Za-z0-9_]+)\s*\}\}`)

// TestProjectIsWellFormed holds m365agents.yml, env/.env.dev and the
// Bicep parameters to what the toolkit takes: the schema version, known
// actions with their parameters and no others, and every ${{VAR}} defined
// by the environment's file, by an action before it or by the template's
// outputs.
func TestProjectIsWellFormed(t *testing.T) {
	p := readProject(t)
	if p.Version != "v1.11" || p.EnvironmentFolderPath != "./env" {
		t.Errorf("version %q, environmentFolderPath %q: want v1.11 and ./env", p.Version, p.EnvironmentFolderPath)
	}
	env := readEnv(t, filepath.Join("env", ".env.dev"))
	defined := map[string]bool{}
	for k := range env {
		defined[k] = true
	}
	for _, out := range bicepOutputs(t) {
		defined[out] = true
	}
	raw, _ := os.ReadFile("m365agents.yml")
	params, err := os.ReadFile(filepath.Join("infra", "azure.parameters.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{string(raw), string(params)} {
		for _, m := range reference.FindAllStringSubmatch(text, -1) {
			if !defined[m[1]] {
				t.Errorf("${{%s}} is defined neither in env/.env.dev nor by the template's outputs", m[1])
			}
		}
	}
	for life, list := range map[string][]action{"provision": p.Provision, "deploy": p.Deploy, "publish": p.Publish} {
		if len(list) == 0 {
			t.Errorf("%s has no action", life)
		}
		for i, a := range list {
			where := fmt.Sprintf("%s[%d] (%s)", life, i, a.Uses)
			spec, ok := actions[a.Uses]
			if !ok {
				t.Errorf("%s: the toolkit has no action %q", where, a.Uses)
				continue
			}
			checkKeys(t, where+" with", keys(a.With), spec.with)
			checkKeys(t, where+" writeToEnvironmentFile", keys(a.WriteToEnvironmentFile), spec.writes)
			for _, v := range a.WriteToEnvironmentFile {
				if _, ok := env[v]; !ok {
					t.Errorf("%s writes %s, which env/.env.dev does not list", where, v)
				}
			}
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkKeys fails on a parameter the action does not take, and on a
// required one missing.
func checkKeys(t *testing.T, where string, got, spec []string) {
	t.Helper()
	for _, k := range got {
		if !slices.Contains(spec, k) && !slices.Contains(spec, k+"!") {
			t.Errorf("%s: %q is no parameter of this action", where, k)
		}
	}
	for _, s := range spec {
		if k, required := strings.CutSuffix(s, "!"); required && !slices.Contains(got, k) {
			t.Errorf("%s: the required %q is missing", where, k)
		}
	}
}

// TestParametersMatchTheTemplate checks that the parameters file is JSON
// and names each parameter the template declares without a default, and
// none it does not declare.
func TestParametersMatchTheTemplate(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("infra", "azure.parameters.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Schema         string                     `json:"$schema"`
		ContentVersion string                     `json:"contentVersion"`
		Parameters     map[string]json.RawMessage `json:"parameters"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("azure.parameters.json: %v", err)
	}
	declared := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^param (\w+) \w+( =)?`).FindAllStringSubmatch(bicep(t), -1) {
		declared[m[1]] = true
		if _, given := file.Parameters[m[1]]; !given && m[2] == "" {
			t.Errorf("the template's parameter %s has no default, and the parameters file does not give it", m[1])
		}
	}
	for name := range file.Parameters {
		if !declared[name] {
			t.Errorf("the parameters file gives %s, which the template does not declare", name)
		}
	}
}

func bicep(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("infra", "azure.bicep"))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func bicepOutputs(t *testing.T) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^output (\w+) `).FindAllStringSubmatch(bicep(t), -1) {
		out = append(out, m[1])
	}
	return out
}

// TestTemplateAgreesWithTheService checks the container the template runs:
// each variable it sets is a setting of the service (the table of
// docs/configuration.md, which TestSettingsTableInDocs holds to the
// code), the ingress reaches TICKETIQ_ADDR's port, and the probes ask
// /healthz and /readyz on TICKETIQ_METRICS_ADDR's.
func TestTemplateAgreesWithTheService(t *testing.T) {
	b := bicep(t)
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `((?:TICKETIQ|OTEL)_[A-Z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		known[m[1]] = true
	}
	if len(known) < 20 {
		t.Fatalf("only %d settings read from docs/configuration.md", len(known))
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`\{ name: '([A-Z0-9_]+)', (value|secretRef): ([^}]*)\}`).FindAllStringSubmatch(b, -1) {
		env[m[1]] = strings.Trim(strings.TrimSpace(m[3]), "'")
		if !known[m[1]] && (strings.HasPrefix(m[1], "TICKETIQ_") || strings.HasPrefix(m[1], "OTEL_")) {
			t.Errorf("the template sets %s, which is no setting of the service", m[1])
		}
	}
	port := func(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }
	if env["TICKETIQ_ADDR"] == "" || env["TICKETIQ_METRICS_ADDR"] == "" {
		t.Fatalf("the template does not set both listeners: %v", env)
	}
	if m := regexp.MustCompile(`targetPort: (\d+)`).FindStringSubmatch(b); m == nil || m[1] != port(env["TICKETIQ_ADDR"]) {
		t.Errorf("the ingress's targetPort %v is not TICKETIQ_ADDR's port %s", m, port(env["TICKETIQ_ADDR"]))
	}
	probes := regexp.MustCompile(`type: '(\w+)'\s+httpGet: \{ path: '([^']+)', port: (\d+) \}`).FindAllStringSubmatch(b, -1)
	want := map[string]string{"Startup": "/healthz", "Liveness": "/healthz", "Readiness": "/readyz"}
	if len(probes) != len(want) {
		t.Errorf("the template has %d probes; want startup, liveness and readiness", len(probes))
	}
	for _, p := range probes {
		if want[p[1]] != p[2] || p[3] != port(env["TICKETIQ_METRICS_ADDR"]) {
			t.Errorf("the %s probe asks %s on %s; want %s on the internal port %s", p[1], p[2], p[3], want[p[1]], port(env["TICKETIQ_METRICS_ADDR"]))
		}
	}
	// The key files are mounted into TICKETIQ_DATA under the service's
	// names, and the certificate where TICKETIQ_BOT_CERT_FILE says.
	for _, f := range []string{"frame-token-keys.json", "signin-cookie.key", "mcp-token.key"} {
		if !strings.Contains(b, "path: '"+f+"'") {
			t.Errorf("the template does not mount the key file %s", f)
		}
	}
	if !strings.Contains(b, "mountPath: '"+env["TICKETIQ_DATA"]+"'") || !strings.Contains(b, "mountPath: '"+filepath.Dir(env["TICKETIQ_BOT_CERT_FILE"])+"'") {
		t.Errorf("the template mounts neither TICKETIQ_DATA %s nor the folder of TICKETIQ_BOT_CERT_FILE %s", env["TICKETIQ_DATA"], env["TICKETIQ_BOT_CERT_FILE"])
	}
}

// TestPackagingStepBuildsTheAppPackage runs provision's script step as the
// toolkit would, in this folder with the environment's values (and the
// values provision writes), and checks the package it builds: the
// toolkit's Teams app id, the bot, the public host.
func TestPackagingStepBuildsTheAppPackage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds teamsbot")
	}
	p := readProject(t)
	env := readEnv(t, filepath.Join("env", ".env.dev"))
	// What provision writes before the step: the Developer Portal's app id
	// and the template's outputs. The environment's name is the test's, so
	// that the package it writes is its own.
	env["TEAMSFX_ENV"] = fmt.Sprintf("test%d", os.Getpid())
	env["TEAMS_APP_ID"] = "3f2c8e4a-9b1d-4c6e-8f0a-1b2c3d4e5f60"
	env["BOT_ID"] = "5c8f0a2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b"
	env["PUBLIC_BASE_URL"] = "https://teamsbot-app.example.westeurope.azurecontainerapps.io"
	var run string
	for _, a := range p.Provision {
		if a.Uses == "script" && strings.Contains(fmt.Sprint(a.With["run"]), "teamsbot manifest") {
			run = fmt.Sprint(a.With["run"])
		}
	}
	if run == "" {
		t.Fatal("provision has no script step that runs teamsbot manifest")
	}
	for _, a := range p.Publish {
		if a.Uses == "script" && strings.Contains(fmt.Sprint(a.With["run"]), "teamsbot manifest") && fmt.Sprint(a.With["run"]) != run {
			t.Error("publish packages the app otherwise than provision")
		}
	}
	cmd := reference.ReplaceAllStringFunc(run, func(m string) string { return env[reference.FindStringSubmatch(m)[1]] })
	zipPath := filepath.Join("appPackage", "build", "appPackage."+env["TEAMSFX_ENV"]+".zip")
	t.Cleanup(func() {
		// The package, and the folders the step made when they are empty.
		os.Remove(zipPath)
		os.Remove(filepath.Dir(zipPath))
		os.Remove(filepath.Dir(filepath.Dir(zipPath)))
	})
	sh := exec.Command("bash", "-c", cmd)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	z, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatalf("the step wrote no package at %s: %v", zipPath, err)
	}
	defer z.Close()
	var m struct {
		ID   string `json:"id"`
		Bots []struct {
			BotID string `json:"botId"`
		} `json:"bots"`
		ValidDomains []string `json:"validDomains"`
		Version      string   `json:"version"`
		Developer    struct {
			Name string `json:"name"`
		} `json:"developer"`
	}
	var files []string
	for _, f := range z.File {
		files = append(files, f.Name)
		if f.Name != "manifest.json" {
			continue
		}
		r, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(r)
		r.Close()
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatalf("manifest.json: %v", err)
		}
	}
	slices.Sort(files)
	if !slices.Equal(files, []string{"color.png", "manifest.json", "outline.png"}) {
		t.Errorf("the package holds %v", files)
	}
	if m.ID != env["TEAMS_APP_ID"] || len(m.Bots) != 1 || m.Bots[0].BotID != env["BOT_ID"] {
		t.Errorf("the package's app id %q and bot %+v; want the toolkit's TEAMS_APP_ID %s and BOT_ID %s", m.ID, m.Bots, env["TEAMS_APP_ID"], env["BOT_ID"])
	}
	if !slices.Contains(m.ValidDomains, "teamsbot-app.example.westeurope.azurecontainerapps.io") {
		t.Errorf("validDomains %v lacks the public host", m.ValidDomains)
	}
	if m.Version != env["APP_VERSION"] || m.Developer.Name != env["DEVELOPER_NAME"] {
		t.Errorf("version %q and developer %q; want the environment's %q and %q", m.Version, m.Developer.Name, env["APP_VERSION"], env["DEVELOPER_NAME"])
	}
}
