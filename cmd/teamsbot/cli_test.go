package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// runText runs teamsbot with args and returns what it printed and its error.
func runText(t *testing.T, env map[string]string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = run(context.Background(), append([]string{"teamsbot"}, args...), envOf(env), &out, &errOut)
	return out.String(), errOut.String(), err
}

// Help is asked for in every way a person tries, on every command: each
// succeeds (exit 0), prints the command's usage and an example on
// standard output, and starts nothing.
func TestHelpOnEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}, {"-help"}} {
		out, errOut, err := runText(t, nil, args...)
		if err != nil || errOut != "" {
			t.Errorf("teamsbot %v: %v, stderr %q", args, err, errOut)
		}
		for _, c := range commands() {
			if !strings.Contains(out, c.usage) || !strings.Contains(out, c.summary) {
				t.Errorf("teamsbot %v does not list %s:\n%s", args, c.name, out)
			}
		}
		if !strings.Contains(out, "Examples:") {
			t.Errorf("teamsbot %v has no example:\n%s", args, out)
		}
	}
	for _, c := range commands() {
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}, {c.name, "--help"}, {c.name, "-help"}} {
			// A TICKETIQ_ mistake stops nothing here: help reads no setting.
			out, errOut, err := runText(t, map[string]string{"TICKETIQ_ADDR": "nonsense"}, args...)
			if err != nil || errOut != "" {
				t.Errorf("teamsbot %v: %v, stderr %q", args, err, errOut)
				continue
			}
			if !strings.HasPrefix(out, "Usage: "+c.usage+"\n") || !strings.Contains(out, "Example") {
				t.Errorf("teamsbot %v: no usage and example:\n%s", args, out)
			}
		}
	}
	out, _, _ := runText(t, nil, "help", "config")
	for _, s := range settings() {
		if !strings.Contains(out, "  "+s.name+" (") {
			t.Errorf("teamsbot help config does not describe %s", s.name)
		}
	}
	out, _, _ = runText(t, nil, "manifest", "--help")
	for _, flag := range []string{"--bot-id GUID", "--public-base-url URL", "--developer NAME", "-o FILE"} {
		if !strings.Contains(out, flag) {
			t.Errorf("teamsbot manifest --help does not show %s:\n%s", flag, out)
		}
	}
}

// A mistyped command or flag is named, with the one meant, and how to
// see them all.
func TestUnknownCommandsAndFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"manfest"}, "unknown command `manfest`; did you mean `manifest`? Run `teamsbot help`"},
		{[]string{"confg"}, "unknown command `confg`; did you mean `config`? Run `teamsbot help`"},
		{[]string{"frobnicate"}, "unknown command `frobnicate`. Run `teamsbot help` for the list of commands"},
		{[]string{"help", "manfest"}, "unknown command `manfest`; did you mean `manifest`? Run `teamsbot help`"},
		{[]string{"config", "extra"}, "`teamsbot config` takes no arguments, and got [\"extra\"]. Run `teamsbot help config`"},
		{[]string{"manifest", "--develper", "x"}, "`teamsbot manifest` has no flag --develper; did you mean --developer? Run `teamsbot help manifest`"},
		{[]string{"config", "--verbose"}, "`teamsbot config` takes no flags, and got --verbose. Run `teamsbot help config`"},
	} {
		_, _, err := runText(t, nil, c.args...)
		if err == nil || err.Error() != c.want {
			t.Errorf("teamsbot %v:\n got %v\nwant %s", c.args, err, c.want)
		}
	}
}

// A TICKETIQ_ variable that is no setting is a mistake, reported with the
// others and with the setting meant: ignored, its default would run
// without a word. serve refuses to start with it.
func TestUnknownSettingVariable(t *testing.T) {
	env := map[string]string{
		"TICKETIQ_PUBLIC_BASEURL": "https://bot.example.com",
		"TICKETIQ_LOGLEVEL":       "debug",
		"TICKETIQ_FROBNICATE":     "1",
		"TICKETIQ_ADDR":           "no-port",
		"TICKETIQ_DATA":           t.TempDir(),
		"HOME":                    "/root", // not a setting's prefix: none of its business
	}
	for _, cmd := range []string{"config", "serve"} {
		_, _, err := runText(t, env, cmd)
		if err == nil {
			t.Fatalf("%s accepted a misspelt setting", cmd)
		}
		for _, want := range []string{
			"the configuration has 4 mistakes:",
			"\n  - unknown setting TICKETIQ_FROBNICATE: no setting has this name (`teamsbot help config` lists them); unset it",
			"\n  - unknown setting TICKETIQ_LOGLEVEL; did you mean TICKETIQ_LOG_LEVEL?",
			"\n  - unknown setting TICKETIQ_PUBLIC_BASEURL; did you mean TICKETIQ_PUBLIC_BASE_URL?",
			"\n  - TICKETIQ_ADDR: ",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error lacks %q:\n%v", cmd, want, err)
			}
		}
	}
	if _, _, err := runText(t, map[string]string{"TICKETIQ_DATA": t.TempDir()}, "config"); err != nil {
		t.Errorf("no unknown variable: %v", err)
	}
}

// One run shows every mistake of the configuration at once: the file's
// unknown keys with the key meant, its wrong values, each with its line
// and column, and the environment's mistakes beside them.
func TestConfigurationMistakesAllAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(path, []byte(`agents:
  - id: sales
    modle:
      kind: openai
    servers:
      - name: crm
        url: https://crm.example.com/mcp
        timeout: soon
      - name: debug
        comand: [npx, server-debug]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runText(t, map[string]string{"TICKETIQ_CONFIG": path, "TICKETIQ_LOG_LEVEL": "loud", "TICKETIQ_DATA": t.TempDir()}, "config")
	if err == nil {
		t.Fatal("accepted")
	}
	want := "the configuration has 5 mistakes:\n" +
		"  - TICKETIQ_LOG_LEVEL: \"loud\": want debug, info, warn or error\n" +
		"  - TICKETIQ_CONFIG " + path + ", line 3, column 5: unknown key `modle` in agents[0]; did you mean `model`?\n" +
		"  - TICKETIQ_CONFIG " + path + ", line 8, column 18: agents[0].servers[0] (crm).timeout: bad timeout \"soon\": time: invalid duration \"soon\"\n" +
		"  - TICKETIQ_CONFIG " + path + ", line 9, column 9: agents[0].servers[1] (debug): set one of builtin, url or command\n" +
		"  - TICKETIQ_CONFIG " + path + ", line 10, column 9: unknown key `comand` in agents[0].servers[1]; did you mean `command`?"
	if err.Error() != want {
		t.Errorf("mistakes:\n%v\nwant:\n%s", err, want)
	}

	// A syntax mistake names the line it is on.
	if err := os.WriteFile(path, []byte("agents:\n  - id: sales\n    name: Sales\n  servers: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = runText(t, map[string]string{"TICKETIQ_CONFIG": path}, "config")
	if err == nil || !strings.Contains(err.Error(), "TICKETIQ_CONFIG "+path+", line 4: not valid YAML: did not find expected '-' indicator") {
		t.Errorf("syntax mistake: %v", err)
	}
}

// The booleans are read by one parser: every switch takes the same words,
// in any case, and refuses anything else with the same message.
func TestBooleanSettingsShareOneParser(t *testing.T) {
	var bools []string
	for _, s := range settings() {
		if s.kind == "true or false" {
			bools = append(bools, s.name)
		}
	}
	if len(bools) < 3 {
		t.Fatalf("only %v are switches", bools)
	}
	for _, name := range bools {
		s, _ := settingNamed(name)
		for v, want := range map[string]bool{"true": true, "1": true, "yes": true, "ON": true, "False": false, "0": false, "no": false, "off": false} {
			var c config
			if err := s.parse(&c, v); err != nil {
				t.Errorf("%s=%s: %v", name, v, err)
			}
			got := map[string]bool{"TICKETIQ_PPROF": c.Pprof, "TICKETIQ_MCP_APPS_ENABLED": c.AppsEnabled, "TICKETIQ_TEAMS_TAB": c.TeamsTab}[name]
			if got != want {
				t.Errorf("%s=%s read as %v", name, v, got)
			}
		}
		_, err := loadConfig(envOf(map[string]string{name: "maybe"}))
		if err == nil || !strings.Contains(err.Error(), name+`: "maybe": want true or false`) {
			t.Errorf("%s=maybe: %v", name, err)
		}
	}
}

// The settings table of docs/configuration.md is the code's: every setting
// is a row of its own, with the default the code has (or, for a default
// that is not one value, the same words), and the table names no variable
// the code lacks.
func TestSettingsTableInDocs(t *testing.T) {
	checkSettingsTable(t, filepath.Join("..", "..", "docs", "configuration.md"), settings())
}

// checkSettingsTable holds the settings table of the document at path to
// the settings ss, reporting each difference on t.
func checkSettingsTable(t testing.TB, path string, ss []setting) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("| variable | meaning | default |"))
	if i < 0 {
		t.Fatalf("%s has no settings table", path)
	}
	rows := map[string]string{} // variable → default cell
	var order []string
	for _, line := range strings.Split(string(doc[i:]), "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := splitRow(line)
		if len(cells) != 3 {
			t.Errorf("a row of %d cells: %s", len(cells), line)
			continue
		}
		name := strings.Trim(cells[0], "` ")
		if !regexp.MustCompile(`^TICKETIQ_[A-Z0-9_]+$`).MatchString(name) {
			t.Errorf("the first cell names %q, not one variable", cells[0])
			continue
		}
		rows[name] = strings.TrimSpace(cells[2])
		order = append(order, name)
	}
	var names []string
	for _, s := range ss {
		names = append(names, s.name)
		cell, ok := rows[s.name]
		switch {
		case !ok:
			t.Errorf("%s: the settings table lacks %s", path, s.name)
		case s.def != "" && !strings.HasPrefix(cell, "`"+s.def+"`"):
			t.Errorf("%s gives %s the default %q, the code `%s`", path, s.name, cell, s.def)
		case s.def == "" && s.unset != "" && !strings.HasPrefix(cell, s.unset):
			t.Errorf("%s gives %s the default %q, the code says %q", path, s.name, cell, s.unset)
		case s.def == "" && s.unset == "" && !strings.HasPrefix(cell, "empty"):
			t.Errorf("%s gives %s the default %q; the code has none (\"empty\")", path, s.name, cell)
		}
	}
	for _, name := range order {
		if !slices.Contains(names, name) {
			t.Errorf("%s: the settings table names %s, which is no setting", path, name)
		}
	}
	if !slices.Equal(order, names) {
		t.Errorf("%s: the settings table's order differs from the code's:\n%v\n%v", path, order, names)
	}
}

// errorsOf is a testing.TB that keeps what a check reports instead of
// failing the test that runs it.
type errorsOf struct {
	testing.TB
	said []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.said = append(e.said, fmt.Sprintf(format, args...))
}

// TestSettingsTableCheckFails holds the check itself to account: a copy of
// docs/configuration.md with a setting's row left out, a row of no
// setting, or another default each fail it, with words that name the
// setting.
func TestSettingsTableCheckFails(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := func(name string) string {
		i := bytes.Index(doc, []byte("| `"+name+"` |"))
		if i < 0 {
			t.Fatalf("docs/configuration.md has no row for %s", name)
		}
		return string(doc[i : i+bytes.IndexByte(doc[i:], '\n')+1])
	}
	pprof := row("TICKETIQ_PPROF")
	for _, c := range []struct{ name, from, to, want string }{
		{"a setting left out", pprof, "", "lacks TICKETIQ_PPROF"},
		{"a row of no setting", pprof, pprof + "| `TICKETIQ_PROFILE` | nothing | `false` |\n", "names TICKETIQ_PROFILE, which is no setting"},
		{"another default", pprof, strings.Replace(pprof, "| `false` |", "| `true` |", 1), "gives TICKETIQ_PPROF the default"},
	} {
		changed := strings.Replace(string(doc), c.from, c.to, 1)
		if changed == string(doc) {
			t.Fatalf("%s: the copy did not change", c.name)
		}
		path := filepath.Join(t.TempDir(), "configuration.md")
		if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
			t.Fatal(err)
		}
		rec := &errorsOf{TB: t}
		checkSettingsTable(rec, path, settings())
		if !slices.ContainsFunc(rec.said, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s: the check said %q, want %q", c.name, rec.said, c.want)
		}
	}
	rec := &errorsOf{TB: t}
	checkSettingsTable(rec, filepath.Join("..", "..", "docs", "configuration.md"), settings())
	if len(rec.said) != 0 {
		t.Errorf("the table as committed fails the check: %q", rec.said)
	}
}

// splitRow splits a Markdown table row into its cells, leaving a | inside
// backticks alone.
func splitRow(line string) []string {
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(line), "|"), "|") {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// The configuration's mistakes come as one error that lists each.
func TestMistakesAreOneList(t *testing.T) {
	_, err := loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": "x", "TICKETIQ_LOG_LEVEL": "loud"}))
	var list interface{ Unwrap() []error }
	if !errors.As(err, &list) || len(list.Unwrap()) != 2 {
		t.Fatalf("%v", err)
	}
	_, err = loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": "x"}))
	if err == nil || !strings.HasPrefix(err.Error(), "the configuration has a mistake: TICKETIQ_ADDR: ") {
		t.Errorf("one mistake: %v", err)
	}
	_ = io.Discard
}
