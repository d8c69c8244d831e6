package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"teamsbot/internal/testenv"
)

// teamsbot manifest writes the package from the settings and the flags,
// and names every mistake at once without writing anything.
func TestManifestCommand(t *testing.T) {
	env := envOf(map[string]string{
		"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_BOT_APP_PASSWORD": "p",
		"TICKETIQ_BOT_TENANT_ID": "72f988bf-86f1-41af-91ab-2d7cd011db47", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example",
	})
	out := filepath.Join(t.TempDir(), "teamsbot.zip")
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), []string{"teamsbot", "manifest", "-o", out, "-developer", "Contoso IT",
		"-website", "https://bot.contoso.example", "-privacy", "https://bot.contoso.example/privacy", "-terms", "https://bot.contoso.example/terms"}, env, &stdout, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 3 || !strings.Contains(stdout.String(), "wrote "+out) {
		t.Errorf("%d files; said %q", len(zr.File), stdout.String())
	}

	bad := filepath.Join(t.TempDir(), "bad.zip")
	err = run(t.Context(), []string{"teamsbot", "manifest", "-o", bad, "-website", "http://insecure.example", "-accent", "blue"}, env, &stdout, &stderr)
	if err == nil {
		t.Fatal("a package without developer, privacy and terms was written")
	}
	for _, want := range []string{"developer name is required", "website URL", "privacy URL", "terms of use URL", "accent color"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if _, serr := os.Stat(bad); !os.IsNotExist(serr) {
		t.Errorf("a file was written despite the errors")
	}
}

// A package holds the bot's app id and the public base URL, not the bot's
// credential or its tenants: `teamsbot manifest` writes one without them,
// and the package passes Microsoft's own validator (as manifest's tests
// run it). The Teams tab's package needs the sign-in's client id too, and
// the flags may stand for the variables.
func TestManifestNeedsOnlyWhatThePackageHolds(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		env  map[string]string
		args []string
	}{
		"from the variables": {env: map[string]string{
			"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example",
		}},
		"from the flags, views inside Teams": {args: []string{"--bot-id", "00000000-0000-4000-8000-0000000000b0", "--public-base-url", "https://bot.contoso.example",
			"--teams-tab", "true", "--sign-in-client-id", "11111111-2222-4333-8444-555555555555"}},
	} {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".zip")
			args := append([]string{"manifest", "-o", out, "--developer", "Contoso IT", "--website", "https://www.contoso.example",
				"--privacy", "https://www.contoso.example/privacy", "--terms", "https://www.contoso.example/terms"}, c.args...)
			stdout, _, err := runText(t, c.env, args...)
			if err != nil {
				t.Fatalf("no package without a credential or tenants: %v", err)
			}
			if !strings.Contains(stdout, "wrote "+out) {
				t.Errorf("said %q", stdout)
			}
			mj := zipFile(t, out, "manifest.json")
			var m struct {
				Bots               []struct{ BotID string }
				ValidDomains       []string
				WebApplicationInfo map[string]string
			}
			if err := json.Unmarshal(mj, &m); err != nil || len(m.Bots) != 1 || m.Bots[0].BotID != "00000000-0000-4000-8000-0000000000b0" || m.ValidDomains[0] != "bot.contoso.example" {
				t.Errorf("manifest.json: %+v %v", m, err)
			}
			if c.args != nil && m.WebApplicationInfo["resource"] != "api://bot.contoso.example/11111111-2222-4333-8444-555555555555" {
				t.Errorf("webApplicationInfo %v", m.WebApplicationInfo)
			}
			if errs := testenv.ValidateTeamsManifest(t, mj); len(errs) != 0 {
				t.Errorf("Microsoft's validator refuses the package:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

// With nothing given, every missing input is named with the flag or the
// variable that gives it and an example, and nothing is written.
func TestManifestNamesEveryMissingInput(t *testing.T) {
	out := filepath.Join(t.TempDir(), "teamsbot.zip")
	_, _, err := runText(t, map[string]string{"TICKETIQ_TEAMS_TAB": "true", "TICKETIQ_PUBLIC_BASEURL": "https://bot.contoso.example"}, "manifest", "-o", out)
	if err == nil {
		t.Fatal("a package was written")
	}
	for _, want := range []string{
		"the package was not written:\n",
		"  - unknown setting TICKETIQ_PUBLIC_BASEURL; did you mean TICKETIQ_PUBLIC_BASE_URL?",
		"  - the bot's app id is required: set TICKETIQ_BOT_APP_ID=00000000-0000-0000-0000-000000000000 or pass --bot-id 00000000-0000-0000-0000-000000000000",
		"  - public base URL: required: set TICKETIQ_PUBLIC_BASE_URL=https://bot.example.com or pass --public-base-url https://bot.example.com",
		"  - developer name is required: pass --developer \"Contoso IT\"",
		"  - website URL: required: pass --website https://www.contoso.example",
		"  - privacy URL: required: pass --privacy https://www.contoso.example/privacy",
		"  - terms of use URL: required: pass --terms https://www.contoso.example/terms",
		"  - opening views inside Teams needs webApplicationInfo: set the sign-in client id (TICKETIQ_OIDC_CLIENT_ID) for Teams single sign-on: set TICKETIQ_OIDC_CLIENT_ID=00000000-0000-0000-0000-000000000000 or pass --sign-in-client-id 00000000-0000-0000-0000-000000000000",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "PASSWORD") || strings.Contains(err.Error(), "ALLOWED_TENANTS") {
		t.Errorf("the package asks for what it does not hold:\n%v", err)
	}
	if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
		t.Error("a file was written despite the errors")
	}
	_, _, err = runText(t, map[string]string{"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example"},
		"manifest", "--developer", "Contoso IT", "--website", "https://www.contoso.example", "--privacy", "https://www.contoso.example/privacy", "--terms", "https://www.contoso.example/terms")
	if err == nil || !strings.Contains(err.Error(), "the file to write is missing: pass -o teamsbot.zip (or -o - for standard output)") {
		t.Errorf("without -o: %v", err)
	}
}

// zipFile reads one file of a zip.
func zipFile(t *testing.T, path, name string) []byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	f, err := zr.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The first agent of the configuration file (TICKETIQ_CONFIG or --config)
// gives the bot's suggested prompts, read without the variables its
// servers name (the package holds no secret); --copilot makes the bot a
// custom engine agent of Microsoft 365 Copilot too. The package passes
// Microsoft's validator, and the command says what it holds.
func TestManifestPromptsAndCopilot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(file, []byte(`agents:
  - id: default
    servers:
      - name: crm
        url: https://crm.example.com/mcp
        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
    prompts:
      - title: Sales report
        text: Show me this quarter's sales report
      - title: Open tickets
        text: Which of my tickets are still open?
  - id: other
    prompts:
      - title: Not the bot's
        text: The bot serves the first agent
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "teamsbot.zip")
	stdout, _, err := runText(t, map[string]string{"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example", "TICKETIQ_CONFIG": file},
		"manifest", "-o", out, "--copilot", "--developer", "Contoso IT", "--website", "https://www.contoso.example",
		"--privacy", "https://www.contoso.example/privacy", "--terms", "https://www.contoso.example/terms")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "; 2 suggested prompts, in Microsoft 365 Copilot too)") {
		t.Errorf("said %q", stdout)
	}
	mj := zipFile(t, out, "manifest.json")
	var m struct {
		Bots []struct {
			Scopes       []string
			CommandLists []struct {
				Scopes   []string
				Commands []struct{ Title, Type, Prompt string }
			}
		}
		CopilotAgents struct {
			CustomEngineAgents []struct{ ID, Type string }
		}
	}
	if err := json.Unmarshal(mj, &m); err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Bots[0].CommandLists {
		var titles []string
		for _, c := range l.Commands {
			titles = append(titles, c.Title)
		}
		if strings.Join(titles, "|") != "Sales report|Open tickets|/new|/tools" || l.Commands[1].Type != "prompt" || l.Commands[1].Prompt != "Which of my tickets are still open?" {
			t.Errorf("scope %v: commands %+v", l.Scopes, l.Commands)
		}
	}
	if cea := m.CopilotAgents.CustomEngineAgents; len(cea) != 1 || cea[0].ID != "00000000-0000-4000-8000-0000000000b0" || cea[0].Type != "bot" {
		t.Errorf("custom engine agents %+v", cea)
	}
	if errs := testenv.ValidateTeamsManifest(t, mj); len(errs) != 0 {
		t.Errorf("Microsoft's validator refuses the package:\n%s", strings.Join(errs, "\n"))
	}

	// A prompt beyond Teams' limits is named at its place in the file,
	// with the file, and nothing is written; --config stands for the
	// variable.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("agents:\n  - id: default\n    prompts:\n      - title: "+strings.Repeat("t", 40)+"\n        text: fine\n"), 0o600)
	out2 := filepath.Join(dir, "bad.zip")
	_, _, err = runText(t, map[string]string{"TICKETIQ_BOT_APP_ID": "00000000-0000-4000-8000-0000000000b0", "TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example"},
		"manifest", "-o", out2, "--config", bad, "--developer", "Contoso IT", "--website", "https://www.contoso.example",
		"--privacy", "https://www.contoso.example/privacy", "--terms", "https://www.contoso.example/terms")
	want := "  - TICKETIQ_CONFIG " + bad + ", line 4, column 16: agents[0].prompts[0].title has 40 characters; Teams takes at most 32"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a prompt too long: %v\nwant a line %q", err, want)
	}
	if _, serr := os.Stat(out2); !errors.Is(serr, os.ErrNotExist) {
		t.Error("a file was written despite the mistake")
	}
}
