package cards

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Adaptive Card checks run the official renderer library, npm
// adaptivecards@3.0.6, in Node through testdata/validate.cjs: it parses each
// card as a Teams client would (schema 1.5 for desktop and web, 1.2 for
// mobile) and reports every parse and validation event.

// requireNode returns the node binary, or fails the test when it is missing
// (skips only under -short).
func requireNode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Node and npm adaptivecards; skipped under -short")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed, so the cards cannot be checked with the Adaptive Cards renderer: %v "+
			"(install Node 20 and run npm ci at the repository root for adaptivecards@3.0.6)", err)
	}
	return node
}

// validate runs testdata/validate.cjs on files and returns its output and
// exit status. A status of 2 (the script could not run, for example because
// the npm package is missing) fails the test at once.
func validate(t *testing.T, files ...string) (string, int) {
	t.Helper()
	node := requireNode(t)
	cmd := exec.Command(node, filepath.Join("testdata", "validate.cjs"))
	cmd.Args = append(cmd.Args, files...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return string(out), 1
	}
	t.Fatalf("the Adaptive Cards validator could not run (%v):\n%s", err, out)
	return "", 2
}

// writeMessages writes cards as a message file that validate.cjs reads.
func writeMessages(t *testing.T, dir, name string, cs ...Card) string {
	t.Helper()
	b, err := json.Marshal(messages(cs...))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRendererAcceptsGoldenCards parses every golden card with the official
// renderer at 1.5 and 1.2 and fails on any event.
func TestRendererAcceptsGoldenCards(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files (%v)", err)
	}
	out, status := validate(t, files...)
	if status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects golden cards:\n%s", out)
	}
	cards := 0
	for _, f := range files {
		var ms []json.RawMessage
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &ms); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		cards += len(ms)
	}
	if got := strings.Count(out, "ok "); got != cards {
		t.Fatalf("validator checked %d cards, want %d:\n%s", got, cards, out)
	}
}

// TestRendererAcceptsGeneratedCards checks cards made from hostile and
// oversized answers, not only the golden ones.
func TestRendererAcceptsGeneratedCards(t *testing.T) {
	requireNode(t)
	dir := t.TempDir()
	var files []string
	for i, a := range propertyAnswers(12) {
		o := Options{PublicBaseURL: httpsBase, Now: now}
		if i%2 == 1 {
			o.PublicBaseURL = httpBase
		}
		files = append(files, writeMessages(t, dir, "gen"+string(rune('a'+i)), AnswerCards(a, o)...))
	}
	out, status := validate(t, files...)
	if status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects generated cards:\n%s", out)
	}
}

// TestRendererRejectsInvalidCards is the negative control: the validator
// must catch a missing required property, an element that Teams mobile (1.2)
// would drop, a 1.5-only property, an input's label (1.3), an input value
// the parse drops, a toggle with no target and a non-https button. If it did not, the checks above would prove nothing.
func TestRendererRejectsInvalidCards(t *testing.T) {
	dir := t.TempDir()
	good, err := json.Marshal(Working("is the validator awake?"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		card string
		want string
	}{
		"open url without url": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"ActionSet","actions":[{"type":"Action.OpenUrl","title":"Open"}]}]}`,
			`PropertyCantBeNull: Property "url" must be set`,
		},
		"table vanishes on mobile": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"Table","columns":[{"width":1}],"rows":[]}]}`,
			`v1.2 parse: UnknownElementType: Unknown element type "Table"`,
		},
		"heading style is 1.5 only": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"TextBlock","text":"x","style":"heading"}]}`,
			`v1.2 parse: UnsupportedProperty: Property "style" is supported in version 1.5`,
		},
		"unknown element": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"Frame","html":"<script></script>"}]}`,
			`v1.5 parse: UnknownElementType: Unknown element type "Frame"`,
		},
		"toggle without target": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"ActionSet","actions":[{"type":"Action.ToggleVisibility","title":"t","targetElements":["nope"]}]}]}`,
			`ToggleVisibility target "nope" does not exist`,
		},
		"input label is 1.3": {
			`{"type":"AdaptiveCard","version":"1.2","body":[{"type":"Input.Text","id":"field:name","label":"Name"}]}`,
			`v1.2 parse: UnsupportedProperty: Property "label" is supported in version 1.3`,
		},
		"number input with a string value": {
			`{"type":"AdaptiveCard","version":"1.2","body":[{"type":"Input.Number","id":"field:age","value":"42"}]}`,
			`v1.2: Input.Number "field:age": its value "42" is dropped by the parse`,
		},
		"http button": {
			`{"type":"AdaptiveCard","version":"1.5","body":[{"type":"ActionSet","actions":[{"type":"Action.OpenUrl","title":"Open","url":"http://x.example/mcp-apps/1"}]}]}`,
			`Action.OpenUrl to a non-https address`,
		},
	}
	var files []string
	for name, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		doc := `[{"summary":"s","contentType":"` + ContentType + `","content":` + string(good) + `},` +
			`{"summary":"s","contentType":"` + ContentType + `","content":` + c.card + `}]`
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	// One run of the validator for all of them: Node takes a while to start.
	out, status := validate(t, files...)
	if status != 1 {
		t.Fatalf("validator accepted invalid cards (status %d):\n%s", status, out)
	}
	for name, c := range cases {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		if !strings.Contains(out, "ok "+path+" card 0") {
			t.Errorf("%s: validator rejected the valid card next to the invalid one:\n%s", name, out)
		}
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "FAIL "+path+" card 1: ") {
				lines = append(lines, l)
			}
		}
		if !strings.Contains(strings.Join(lines, "\n"), c.want) {
			t.Errorf("%s: validator output lacks %q:\n%s", name, c.want, out)
		}
	}
}

// shown runs testdata/shown.cjs on cards and returns, for each card, the
// texts of its TextBlocks and TextRuns as the official renderer shows them
// (its text functions evaluated).
func shown(t *testing.T, cs ...Card) [][]string {
	t.Helper()
	node := requireNode(t)
	path := writeMessages(t, t.TempDir(), "shown", cs...)
	out, err := exec.Command(node, filepath.Join("testdata", "shown.cjs"), path).Output()
	if err != nil {
		t.Fatalf("shown.cjs: %v", err)
	}
	var got map[string][][]string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("shown.cjs printed %s: %v", out, err)
	}
	return got[path]
}

// TestRendererShowsOutsideFunctionsAsText: a {{DATE()}} function in the
// answer text, a tool's error or a view's title, all text a tool or the
// model wrote, is shown as the text it is by the official renderer, while
// the card's own expiry time is still written out as a date. The negative
// control shows the renderer does evaluate a function left as it came.
func TestRendererShowsOutsideFunctionsAsText(t *testing.T) {
	const fn = "{{DATE(2026-01-01T00:00:00Z, SHORT)}}"
	a := Answer{
		Text:       "Sales report:\nDue " + fn + ".",
		Views:      []View{view("v1", "crm", "report", "Report "+fn)},
		ToolErrors: []ToolError{{Server: "crm", Tool: "lookup", Message: "retry after " + fn}},
	}
	raw := newCard("s", "f", text("Due "+fn+"."))
	got := shown(t, append(AnswerCards(a, Options{PublicBaseURL: httpsBase, Now: now}), raw)...)
	if len(got) != 2 {
		t.Fatalf("%d cards shown, want 2", len(got))
	}
	all := strings.ReplaceAll(strings.Join(got[0], "\n"), zwsp, "")
	for _, want := range []string{"Due " + fn + ".", "Report " + fn, ": retry after " + fn, "Can be opened until Wed, Dec 9, 2026 at"} {
		if !strings.Contains(all, want) {
			t.Errorf("the renderer does not show %q; it shows:\n%s", want, all)
		}
	}
	if strings.Contains(all, "Jan 1, 2026") {
		t.Errorf("the renderer evaluated a function from outside:\n%s", all)
	}
	if control := strings.Join(got[1], "\n"); control != "Due Thu, Jan 1, 2026." {
		t.Errorf("negative control: the renderer shows %q, want the function evaluated", control)
	}
}
