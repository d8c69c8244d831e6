package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"teamsbot/agent"
)

// An agent's suggested prompts are read with the rest of the file, in
// the order given.
func TestLoadConfigPrompts(t *testing.T) {
	data := `agents:
  - id: default
    servers: [{name: demo, builtin: demo}]
    prompts:
      - title: Sales report
        text: Show me this quarter's sales report
      - title: Ventes du trimestre
        text: "Montre-moi les ventes du trimestre, s'il te plaît"
`
	cfg, err := agent.LoadConfig([]byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Agents[0].Prompts
	want := []agent.PromptConfig{
		{Title: "Sales report", Text: "Show me this quarter's sales report"},
		{Title: "Ventes du trimestre", Text: "Montre-moi les ventes du trimestre, s'il te plaît"},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("prompts %+v, want %+v", got, want)
	}
}

// Every mistake in the prompts is said in words with its line and column,
// beside the file's other mistakes: Teams' limits (32 characters for a
// title, 128 for a text, counted in characters, not bytes), a missing
// title or text, a line break, a title given twice, too many prompts, an
// unknown key and a value of the wrong kind.
func TestLoadConfigPromptMistakes(t *testing.T) {
	long := strings.Repeat("é", agent.MaxPromptTitle+1)
	var many []string
	for i := range agent.MaxPrompts + 1 {
		many = append(many, fmt.Sprintf("{title: t%d, text: t}", i))
	}
	data := `agents:
  - id: default
    servers: [{name: demo, builtin: demo}]
    prompts:
      - title: ` + long + `
        text: ` + strings.Repeat("x", agent.MaxPromptText+1) + `
      - title: Sales report
      - text: Who am I?
      - title: sales report
        text: "two\nlines"
      - titel: Typo
        text: t
      - title: [a, list]
        text: t
  - id: other
    prompts: [` + strings.Join(many, ", ") + `]
`
	_, err := agent.LoadConfig([]byte(data), nil)
	if err == nil {
		t.Fatal("no error")
	}
	want := strings.Join([]string{
		"line 5, column 16: agents[0].prompts[0].title has 33 characters; Teams takes at most 32",
		"line 6, column 15: agents[0].prompts[0].text has 129 characters; Teams takes at most 128",
		"line 7, column 9: agents[0].prompts[1].text: missing",
		"line 8, column 9: agents[0].prompts[2].title: missing",
		"line 9, column 16: agents[0].prompts[3].title \"sales report\": already used by prompts[1]",
		"line 10, column 15: agents[0].prompts[3].text: write it on one line (Teams shows one line)",
		"line 11, column 9: unknown key `titel` in agents[0].prompts[4]; did you mean `title`?",
		"line 11, column 9: agents[0].prompts[4].title: missing",
		"line 13, column 16: agents[0].prompts[5].title: want text, not a list",
		"line 16, column 14: agents[1].prompts: 9 prompts, at most 8 (Teams lists at most 10 commands, and two of them are /new and /tools)",
	}, "\n")
	if got := err.Error(); got != want {
		t.Errorf("mistakes:\n%s\nwant:\n%s", got, want)
	}
}

// LoadConfigFileUnresolved reads what the file says without the variables
// it names: a value with an unset ${VAR} stays as written and is no
// mistake, while every other mistake still is. LoadConfigFile refuses the
// same file for the unset variable.
func TestLoadConfigFileUnresolved(t *testing.T) {
	data := `agents:
  - id: default
    servers:
      - name: crm
        url: ${CRM_URL}
        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
      - name: tickets
        url: https://${TICKETS_HOST}/mcp
    prompts:
      - title: Open tickets
        text: Which tickets are open?
`
	if _, err := agent.LoadConfigFile([]byte(data), nil); err == nil || !strings.Contains(err.Error(), "uses ${CRM_URL}, which is not set") {
		t.Errorf("LoadConfigFile took unset variables: %v", err)
	}
	cfg, err := agent.LoadConfigFileUnresolved([]byte(data), nil)
	if err != nil {
		t.Fatalf("unset variables are mistakes: %v", err)
	}
	if p := cfg.Agents[0].Prompts; len(p) != 1 || p[0].Title != "Open tickets" {
		t.Errorf("prompts %+v", p)
	}
	if u := cfg.Agents[0].Servers[0].URL; u != "${CRM_URL}" {
		t.Errorf("an unresolved URL became %q, want it as written", u)
	}
	// A set variable is expanded and its value checked as always.
	_, err = agent.LoadConfigFileUnresolved([]byte(data), getenv(map[string]string{"CRM_URL": "ftp://crm.example.com"}))
	if err == nil || !strings.Contains(err.Error(), "line 5, column 14: agents[0].servers[0] (crm).url: invalid address") {
		t.Errorf("a set variable's bad value: %v", err)
	}
	// Other mistakes are reported.
	_, err = agent.LoadConfigFileUnresolved([]byte(data+"    modle: {}\n"), nil)
	if err == nil || err.Error() != "line 12, column 5: unknown key `modle` in agents[0]; did you mean `model`?" {
		t.Errorf("another mistake: %v", err)
	}
}
