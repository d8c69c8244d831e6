package playground_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestBrowserCardsGoldenFiles lays out every golden card of package cards
// (cards/testdata, the cards the bot sends) with the playground's renderer
// in Chromium, and checks what a person would see: every TextBlock, TextRun
// and action title, markdown markers gone and DATE()/TIME() written out;
// each Action.OpenUrl a link to its URL; nothing shown as unsupported; the
// run notes folded away until their Action.ToggleVisibility button is
// pressed.
func TestBrowserCardsGoldenFiles(t *testing.T) {
	files, err := filepath.Glob("../cards/testdata/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("golden cards: %v (%d files)", err, len(files))
	}
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `typeof TeamsbotCards === "object"`, "the renderer")

	checked, withLinks := 0, 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(data, &msgs) != nil || len(msgs) == 0 {
			continue // not a list of cards (validate.cjs and the like)
		}
		for i, m := range msgs {
			name := filepath.Base(f) + "#" + string(rune('0'+i))
			var card map[string]any
			if err := json.Unmarshal(m.Content, &card); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			texts, urls, toggles := expected(card)
			checked++
			if len(urls) > 0 {
				withLinks++
			}
			got := tb.Must(mainFrame, `(() => {
				const e = TeamsbotCards.render(`+string(m.Content)+`);
				document.getElementById("transcript").replaceChildren(e);
				const notes = e.querySelector('[data-ac-id="runNotes"]');
				const folded = notes ? notes.hidden : null;
				for (const b of e.querySelectorAll("button.ac-action")) b.click();
				return {
					text: e.innerText,
					links: [...e.querySelectorAll("a.ac-action")].map(a => a.href),
					unsupported: e.querySelectorAll(".ac-unsupported").length,
					folded: folded,
					unfolded: notes ? !notes.hidden : null,
				};
			})()`).(map[string]any)
			shown := alnum(got["text"].(string))
			for _, want := range texts {
				if !strings.Contains(shown, want) {
					t.Errorf("%s: %q is not shown; the card reads:\n%s", name, want, got["text"])
				}
			}
			links, _ := got["links"].([]any)
			if len(links) != len(urls) {
				t.Errorf("%s: %d links, want %d (%v)", name, len(links), len(urls), urls)
			}
			for j := range min(len(links), len(urls)) {
				if links[j] != urls[j] {
					t.Errorf("%s: link %d goes to %v, want %s", name, j, links[j], urls[j])
				}
			}
			if got["unsupported"] != float64(0) {
				t.Errorf("%s: %v elements shown as unsupported", name, got["unsupported"])
			}
			if toggles && (got["folded"] != true || got["unfolded"] != true) {
				t.Errorf("%s: run notes folded %v, unfolded by their button %v", name, got["folded"], got["unfolded"])
			}
		}
	}
	if checked < len(files)-1 || withLinks == 0 {
		t.Errorf("%d cards checked (%d with Open buttons) of %d files", checked, withLinks, len(files))
	}
}

var (
	template   = regexp.MustCompile(`\{\{(DATE|TIME)\([^)]*\)\}\}`)
	listMarker = regexp.MustCompile(`(?m)^\s*(?:[-*+]|\d{1,3}[.)])\s+`)
)

// expected walks a card for the texts a person must see (each piece
// between DATE()/TIME() functions, reduced to letters and digits), the
// URLs of its Action.OpenUrl buttons, and whether it folds run notes.
func expected(card map[string]any) (texts, urls []string, toggles bool) {
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			typ, _ := x["type"].(string)
			if s, ok := x["text"].(string); ok && (typ == "TextBlock" || typ == "TextRun") {
				if typ == "TextBlock" {
					s = listMarker.ReplaceAllString(s, "")
				}
				for _, piece := range template.Split(s, -1) {
					if p := alnum(piece); p != "" {
						texts = append(texts, p)
					}
				}
			}
			if t, ok := x["title"].(string); ok && strings.HasPrefix(typ, "Action.") {
				texts = append(texts, alnum(t))
			}
			if typ == "Action.OpenUrl" {
				urls = append(urls, x["url"].(string))
			}
			if typ == "Action.ToggleVisibility" {
				toggles = true
			}
			for _, c := range x {
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(card["body"])
	walk(card["actions"])
	return texts, urls, toggles
}

// alnum keeps the letters and digits of s, lower-cased: what is left of a
// text whatever its markdown.
func alnum(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}
