package playground_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestBrowserCardsGoldenFiles lays out every golden card of package cards
// (cards/testdata, the cards the bot sends) with the playground's renderer,
// Microsoft's Adaptive Cards renderer with Teams' host configuration, in
// Chromium under the page's own policy, in the light and the dark theme,
// and checks what a person would see: the renderer reports no parse or
// validation problem and the console no warning or error; the card has
// Teams' font and the theme's background; every TextBlock, TextRun and
// action title is shown, markdown markers gone and DATE()/TIME() written
// out; each Action.OpenUrl button opens its URL; nothing is shown as
// unsupported; the run notes are folded away until their
// Action.ToggleVisibility button is pressed.
func TestBrowserCardsGoldenFiles(t *testing.T) {
	files, err := filepath.Glob("../cards/testdata/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("golden cards: %v (%d files)", err, len(files))
	}
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `typeof TeamsbotCards === "object"`, "the renderer")
	// Action.OpenUrl opens a window; here the page notes where instead.
	tb.Must(mainFrame, `window.opened = []; window.open = (u) => { window.opened.push(u); return null; }; true`)
	logged := len(tb.Log())

	backgrounds := map[string]string{"light": "rgb(255, 255, 255)", "dark": "rgb(45, 44, 44)"}
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
			var card map[string]any
			if err := json.Unmarshal(m.Content, &card); err != nil {
				t.Fatalf("%s#%d: %v", f, i, err)
			}
			texts, urls, toggles := expected(card)
			checked++
			if len(urls) > 0 {
				withLinks++
			}
			for _, theme := range []string{"light", "dark"} {
				name := fmt.Sprintf("%s#%d (%s)", filepath.Base(f), i, theme)
				got := tb.Must(mainFrame, `(() => {
					const problems = [];
					const e = TeamsbotCards.render(`+string(m.Content)+`, {theme: "`+theme+`", problems: problems});
					document.getElementById("transcript").replaceChildren(e);
					const root = e.querySelector(".ac-adaptiveCard");
					const notes = e.querySelector('[data-ac-id="runNotes"]');
					const hidden = (n) => getComputedStyle(n).display === "none";
					const folded = notes ? hidden(notes) : null;
					window.opened = [];
					for (const b of e.querySelectorAll("button.ac-pushButton")) b.click();
					return {
						problems: problems,
						text: e.innerText,
						font: root ? getComputedStyle(root).fontFamily : "",
						background: root ? getComputedStyle(root).backgroundColor : "",
						opened: window.opened,
						unsupported: e.querySelectorAll(".ac-unsupported").length + (e.classList.contains("ac-unsupported") ? 1 : 0),
						folded: folded,
						unfolded: notes ? !hidden(notes) : null,
					};
				})()`).(map[string]any)
				if p, _ := got["problems"].([]any); len(p) > 0 {
					t.Errorf("%s: the renderer reports %v", name, p)
				}
				if !strings.Contains(got["font"].(string), "Segoe UI") || got["background"] != backgrounds[theme] {
					t.Errorf("%s: font %q on %v, want Teams' Segoe UI on %s", name, got["font"], got["background"], backgrounds[theme])
				}
				shown := alnum(got["text"].(string))
				for _, want := range texts {
					if !strings.Contains(shown, want) {
						t.Errorf("%s: %q is not shown; the card reads:\n%s", name, want, got["text"])
					}
				}
				var opened []string
				for _, u := range got["opened"].([]any) {
					opened = append(opened, u.(string))
				}
				slices.Sort(opened)
				want := slices.Sorted(slices.Values(urls))
				if !slices.Equal(opened, want) {
					t.Errorf("%s: the Open buttons open %q, want %q", name, opened, want)
				}
				if got["unsupported"] != float64(0) {
					t.Errorf("%s: %v elements shown as unsupported", name, got["unsupported"])
				}
				if toggles && (got["folded"] != true || got["unfolded"] != true) {
					t.Errorf("%s: run notes folded %v, unfolded by their button %v", name, got["folded"], got["unfolded"])
				}
			}
		}
	}
	if checked < len(files)-1 || withLinks == 0 {
		t.Errorf("%d cards checked (%d with Open buttons) of %d files", checked, withLinks, len(files))
	}
	for _, l := range tb.Log()[logged:] {
		if strings.Contains(l, "/favicon.ico") {
			continue // the browser asks for the page's icon, which it has none of
		}
		if strings.HasPrefix(l, "console.warning") || strings.HasPrefix(l, "console.error") || strings.HasPrefix(l, "exception") || strings.HasPrefix(l, "log.error") || strings.HasPrefix(l, "log.warning") {
			t.Errorf("the browser logged, while the cards were laid out: %s", l)
		}
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

// TestBrowserCardActionsAndHostileText: Action.Submit and Action.Execute
// reach the page's handler with their title and data (the playground says
// Teams would send them), and a card's text never becomes markup: tags,
// event handlers and javascript: links in a TextBlock are shown as text,
// only https links are links, and no Trusted Types violation is logged.
func TestBrowserCardActionsAndHostileText(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `typeof TeamsbotCards === "object"`, "the renderer")
	logged := len(tb.Log())
	got := tb.Must(mainFrame, `(() => {
		const seen = [];
		const card = {type: "AdaptiveCard", version: "1.5", body: [
			{type: "TextBlock", wrap: true, text: "<img src=x onerror=alert(1)> **bold** [bad](javascript:alert(1)) [good](https://example.com/a?b=1&c=\"2\") <script>alert(2)</script>"},
		], actions: [
			{type: "Action.Submit", title: "Send it", data: {answer: 42}},
			{type: "Action.Execute", title: "Do it", verb: "go", data: {n: 1}},
		]};
		const e = TeamsbotCards.render(card, {onAction: (a) => seen.push(a)});
		document.getElementById("transcript").replaceChildren(e);
		for (const b of e.querySelectorAll("button.ac-pushButton")) b.click();
		const text = e.querySelector(".ac-textBlock");
		return {
			seen: seen,
			tags: [...text.querySelectorAll("*")].map(n => n.tagName.toLowerCase()).sort().join(" "),
			links: [...text.querySelectorAll("a")].map(a => a.href),
			text: text.textContent,
		};
	})()`).(map[string]any)
	seen, _ := json.Marshal(got["seen"])
	if string(seen) != `[{"data":{"answer":42},"title":"Send it","type":"Action.Submit"},{"data":{"n":1},"title":"Do it","type":"Action.Execute"}]` {
		t.Errorf("the page's handler got %s", seen)
	}
	if got["tags"] != "a p strong" {
		t.Errorf("the text became the elements %q, want only p, strong and one a", got["tags"])
	}
	if links, _ := got["links"].([]any); len(links) != 1 || links[0] != `https://example.com/a?b=1&c=%222%22` {
		t.Errorf("links %v, want only the https one", got["links"])
	}
	for _, want := range []string{"<img src=x onerror=alert(1)>", "<script>alert(2)</script>", "bad"} {
		if !strings.Contains(got["text"].(string), want) {
			t.Errorf("the text %q does not show %q as written", got["text"], want)
		}
	}
	for _, l := range tb.Log()[logged:] {
		if !strings.Contains(l, "/favicon.ico") {
			t.Errorf("the browser logged: %s", l)
		}
	}
}
