package manifest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"teamsbot/internal/testenv"
	"teamsbot/manifest"
)

// manifestDoc is the part of manifest.json these tests read.
type manifestDoc struct {
	Bots []struct {
		BotID        string   `json:"botId"`
		Scopes       []string `json:"scopes"`
		CommandLists []struct {
			Scopes   []string `json:"scopes"`
			Commands []struct {
				Title       string `json:"title"`
				Description string `json:"description"`
				Type        string `json:"type"`
				Prompt      string `json:"prompt"`
			} `json:"commands"`
		} `json:"commandLists"`
	} `json:"bots"`
	CopilotAgents *struct {
		CustomEngineAgents []map[string]any `json:"customEngineAgents"`
	} `json:"copilotAgents"`
}

// checkOfficially passes manifest.json through the official 1.29 schema
// and Microsoft's own validator, and decodes it.
func checkOfficially(t *testing.T, o manifest.Options) ([]byte, manifestDoc) {
	t.Helper()
	pkg, err := manifest.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	mj := unzip(t, pkg)["manifest.json"]
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mj))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema(t).Validate(doc); err != nil {
		t.Fatalf("manifest.json fails the official schema: %v\n%s", err, mj)
	}
	if errs := testenv.ValidateTeamsManifest(t, mj); len(errs) != 0 {
		t.Fatalf("Microsoft's validator refuses manifest.json:\n%s\n%s", strings.Join(errs, "\n"), mj)
	}
	var m manifestDoc
	if err := json.Unmarshal(mj, &m); err != nil {
		t.Fatal(err)
	}
	return mj, m
}

// With prompts, the bot's command list in every scope is the prompts in
// their order, each a prompt command whose text Teams puts in the compose
// box, then /new and /tools, so that a new conversation and the tool list
// stay one pick away; help goes
// (the prompts say what to ask). The package passes the schema and
// Microsoft's validator with the most prompts there is room for.
func TestPromptsAreTheBotsCommands(t *testing.T) {
	o := options()
	for i := range manifest.MaxPrompts {
		o.Prompts = append(o.Prompts, manifest.Prompt{
			Title: fmt.Sprintf("Report %d of %s", i+1, strings.Repeat("q", 20)),
			Text:  fmt.Sprintf("Show me report %d ", i+1) + strings.Repeat("é", 100),
		})
	}
	_, m := checkOfficially(t, o)
	lists := m.Bots[0].CommandLists
	if len(lists) != 3 {
		t.Fatalf("%d command lists, want one per scope", len(lists))
	}
	var scopes []string
	for _, l := range lists {
		scopes = append(scopes, l.Scopes...)
		if len(l.Commands) != manifest.MaxCommands {
			t.Fatalf("scope %v: %d commands, want %d", l.Scopes, len(l.Commands), manifest.MaxCommands)
		}
		for i, p := range o.Prompts {
			c := l.Commands[i]
			if c.Title != p.Title || c.Type != "prompt" || c.Prompt != p.Text || c.Description != p.Text {
				t.Errorf("scope %v, command %d: %+v, want the prompt %+v", l.Scopes, i, c, p)
			}
		}
		if last := l.Commands[len(l.Commands)-2:]; last[0].Title != "/new" || last[1].Title != "/tools" || last[0].Type != "" || last[1].Type != "" {
			t.Errorf("scope %v: the last commands are %+v, want /new and /tools", l.Scopes, last)
		}
	}
	slices.Sort(scopes)
	if !slices.Equal(scopes, []string{"groupChat", "personal", "team"}) {
		t.Errorf("command lists for %v", scopes)
	}

	// Without prompts, the commands are /tools, /new and help.
	_, m = checkOfficially(t, options())
	for _, l := range m.Bots[0].CommandLists {
		if len(l.Commands) != 3 || l.Commands[0].Title != "/tools" || l.Commands[1].Title != "/new" || l.Commands[2].Title != "help" || l.Commands[0].Type != "" {
			t.Errorf("without prompts, scope %v has %+v", l.Scopes, l.Commands)
		}
	}
}

// Prompts beyond Teams' limits are named, each as the input Prompts, and
// nothing is written.
func TestPromptMistakes(t *testing.T) {
	o := options()
	o.Prompts = []manifest.Prompt{{Title: strings.Repeat("t", 33), Text: strings.Repeat("x", 129)}, {Title: "", Text: "no title"}}
	for range manifest.MaxPrompts {
		o.Prompts = append(o.Prompts, manifest.Prompt{Title: "t", Text: "x"})
	}
	var w bytes.Buffer
	err := manifest.Write(&w, o)
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"10 prompts, at most 8", "prompt 1 title has 33 characters, at most 32", "prompt 1 text has 129 characters, at most 128", "prompt 2 title is required"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
	var inputs []string
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case *manifest.InputError:
			inputs = append(inputs, e.Input)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	if n := len(inputs); n < 4 || slices.ContainsFunc(inputs, func(s string) bool { return s != "Prompts" && s != "Commands" }) {
		t.Errorf("the mistakes name the inputs %v, want Prompts (and Commands)", inputs)
	}
	if w.Len() != 0 {
		t.Errorf("%d bytes written", w.Len())
	}
}

// --copilot: the same bot is a custom engine agent of Microsoft 365
// Copilot. copilotAgents.customEngineAgents names it (type bot, the bot's
// id); the bot keeps its personal scope, which Copilot requires, and gains
// the copilot scope, as does its personal command list (at most three
// lists). The package passes the official schema and Microsoft's
// validator, alone and with prompts and the Teams tab; a custom engine
// agent broken against the schema fails them, so they read it.
func TestCopilotManifestPassesTheOfficialValidator(t *testing.T) {
	o := options()
	o.Copilot = true
	good, m := checkOfficially(t, o)
	b := m.Bots[0]
	if !slices.Contains(b.Scopes, "personal") || !slices.Contains(b.Scopes, "copilot") || len(b.Scopes) != 4 {
		t.Errorf("bot scopes %v, want personal, team, groupChat and copilot", b.Scopes)
	}
	if len(b.CommandLists) != 3 {
		t.Errorf("%d command lists", len(b.CommandLists))
	}
	for _, l := range b.CommandLists {
		if slices.Contains(l.Scopes, "copilot") != slices.Contains(l.Scopes, "personal") {
			t.Errorf("command list scopes %v: copilot goes with personal", l.Scopes)
		}
	}
	if m.CopilotAgents == nil || len(m.CopilotAgents.CustomEngineAgents) != 1 {
		t.Fatalf("copilotAgents %+v", m.CopilotAgents)
	}
	if cea := m.CopilotAgents.CustomEngineAgents[0]; cea["type"] != "bot" || cea["id"] != botID || len(cea) != 2 {
		t.Errorf("custom engine agent %v, want type bot and the bot's id", cea)
	}

	// Without --copilot: no copilot scope and no custom engine agent.
	_, plain := checkOfficially(t, options())
	if plain.CopilotAgents != nil || slices.Contains(plain.Bots[0].Scopes, "copilot") {
		t.Errorf("a Teams-only package reaches Copilot: %+v", plain)
	}

	// Everything at once.
	o.Prompts = []manifest.Prompt{{Title: "Sales report", Text: "Show me this quarter's sales report"}}
	o.TeamsTab = true
	checkOfficially(t, o)

	for name, c := range map[string]struct {
		breakIt func(m map[string]any)
		want    string
	}{
		"an agent id that is no GUID": {func(m map[string]any) {
			m["copilotAgents"].(map[string]any)["customEngineAgents"].([]any)[0].(map[string]any)["id"] = "my-bot"
		}, "copilotAgents"},
		"a type other than bot": {func(m map[string]any) {
			m["copilotAgents"].(map[string]any)["customEngineAgents"].([]any)[0].(map[string]any)["type"] = "api"
		}, "copilotAgents"},
		"two custom engine agents": {func(m map[string]any) {
			cea := m["copilotAgents"].(map[string]any)["customEngineAgents"].([]any)
			m["copilotAgents"].(map[string]any)["customEngineAgents"] = append(cea, cea[0])
		}, "copilotAgents"},
	} {
		var bad map[string]any
		if err := json.Unmarshal(good, &bad); err != nil {
			t.Fatal(err)
		}
		c.breakIt(bad)
		raw, _ := json.Marshal(bad)
		doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err := schema(t).Validate(doc); err == nil {
			t.Errorf("%s: passed the official schema", name)
		}
		if all := strings.Join(testenv.ValidateTeamsManifest(t, raw), "\n"); !strings.Contains(all, c.want) {
			t.Errorf("%s: Microsoft's validator does not name %s:\n%s", name, c.want, all)
		}
	}
}
