package playground_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"teamsbot/internal/testenv"
)

// press sends a key to the element that has the focus, as a person at the
// keyboard does.
func (tb *tab) press(key string) {
	tb.T.Helper()
	if err := chromedp.Do(tb.Ctx, chromedp.KeyEvent(key)); err != nil {
		tb.T.Fatalf("press %q: %v", key, err)
	}
}

// TestBrowserAnswerAsTeamsShowsIt asks /sales_report {} in the playground
// and checks, at the keyboard, what Teams shows of an AI answer and what
// the Agents Playground shows of the exchange: the "AI generated" label
// beside the bot's name; the answer's text with its citation marker in
// place of a bare "[1]", whose pop-up names the tool and server the answer
// relies on and says why; the activity inspector, a labelled region with a
// list of buttons, listing the message the playground posted to the bot
// before what the bot sent back (typing, the stream, the answer with its
// card and its citation entity), each opening its JSON. Then, with the
// transcript scrolled to its top, the bot is added to the chat: its
// welcome card scrolls into view when it arrives.
func TestBrowserAnswerAsTeamsShowsIt(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	tb.send("/sales_report {}")
	tb.Wait(mainFrame, `(() => { const c = document.querySelector('.msg.bot .ac-card'); return c !== null && c.innerText.includes("Interactive view from") && document.querySelector(".msg.bot .cite") !== null; })()`, "the answer with its citation")

	if got := tb.Str(mainFrame, `document.querySelector(".msg.bot .who .ai-label").textContent`); got != "AI generated" {
		t.Errorf("the bot's name is labelled %q, want AI generated", got)
	}
	if got := tb.Str(mainFrame, `document.querySelector(".msg.bot .bubble").innerText`); strings.Contains(got, "[1]") || !strings.Contains(got, "1") {
		t.Errorf("the answer's text reads %q: want its citation as a marker, not [1]", got)
	}

	// The marker's pop-up, opened and closed at the keyboard.
	tb.Must(mainFrame, `document.querySelector(".msg.bot .cite").focus(), true`)
	tb.press(kb.Enter)
	tb.Wait(mainFrame, `document.querySelector(".cite-pop:popover-open") !== null`, "the citation's pop-up")
	pop := tb.Str(mainFrame, `document.querySelector(".cite-pop:popover-open").innerText`)
	for _, want := range []string{"sales_report on demo", "The result of the tool sales_report of the MCP server demo"} {
		if !strings.Contains(pop, want) {
			t.Errorf("the citation's pop-up lacks %q:\n%s", want, pop)
		}
	}
	if got := tb.Str(mainFrame, `document.querySelector(".msg.bot .cite").getAttribute("aria-label")`); got != "Citation 1: sales_report on demo" {
		t.Errorf("the marker is named %q", got)
	}
	inWindow := tb.Must(mainFrame, `(() => { const r = document.querySelector(".cite-pop:popover-open").getBoundingClientRect(); return r.left >= 0 && r.right <= innerWidth && r.top >= 0 && r.bottom <= innerHeight; })()`)
	if inWindow != true {
		t.Errorf("the citation's pop-up is not inside the window")
	}
	tb.press(kb.Escape)
	tb.Wait(mainFrame, `document.querySelector(".cite-pop:popover-open") === null`, "the pop-up to close on Escape")

	// The inspector, opened at the keyboard.
	tb.Must(mainFrame, `document.getElementById("inspector-toggle").focus(), true`)
	tb.press(kb.Enter)
	tb.Wait(mainFrame, `!document.getElementById("inspector").hidden && document.getElementById("inspector-toggle").getAttribute("aria-expanded") === "true"`, "the inspector")
	region := tb.Must(mainFrame, `(() => { const r = document.getElementById("inspector"); return r.tagName + " " + document.getElementById(r.getAttribute("aria-labelledby")).textContent + " " + r.querySelectorAll("ol > li > button[aria-controls]").length; })()`).(string)
	if !strings.HasPrefix(region, "SECTION Activities ") || strings.HasSuffix(region, " 0") {
		t.Errorf("the inspector is %q: want a section labelled Activities with a list of buttons", region)
	}
	tb.Wait(mainFrame, `[...document.querySelectorAll("#activities .activity.from-bot pre")].some(p => p.textContent.includes('"citation"'))`, "the answer in the inspector")
	type entry struct {
		Dir, Head string
		Activity  map[string]any
	}
	var entries []entry
	raw := tb.Str(mainFrame, `JSON.stringify([...document.querySelectorAll("#activities .activity")].map(li => ({
		dir: li.classList.contains("to-bot") ? "to-bot" : "from-bot",
		head: li.querySelector("button").innerText,
		activity: (() => { try { return JSON.parse(li.querySelector("pre").textContent); } catch (e) { return null; } })(),
	})))`)
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) < 3 || entries[0].Dir != "to-bot" || entries[0].Activity["text"] != "/sales_report {}" || entries[0].Activity["type"] != "message" {
		t.Fatalf("the inspector's first entry is not the message posted to the bot: %+v", entries)
	}
	if !strings.Contains(entries[0].Head, "POST /api/messages") {
		t.Errorf("the first entry's button reads %q", entries[0].Head)
	}
	var typing, card bool
	for _, e := range entries[1:] {
		if e.Dir != "from-bot" {
			t.Errorf("after the message, an entry %s: %+v", e.Dir, e.Head)
			continue
		}
		if !strings.Contains(e.Head, "/playground/connector/v3/conversations/") {
			t.Errorf("a connector entry's button reads %q", e.Head)
		}
		typing = typing || e.Activity["type"] == "typing"
		atts, _ := e.Activity["attachments"].([]any)
		ents, _ := json.Marshal(e.Activity["entities"])
		card = card || len(atts) > 0 && strings.Contains(string(ents), `"AIGeneratedContent"`)
	}
	if !typing || !card {
		t.Errorf("the inspector lacks the bot's typing (%v) or its answer card with the AI entity (%v)", typing, card)
	}
	// Each entry's JSON opens from its button, at the keyboard.
	tb.Must(mainFrame, `document.querySelector("#activities .activity button").focus(), true`)
	tb.press(kb.Enter)
	tb.Wait(mainFrame, `(() => { const b = document.querySelector("#activities .activity button"); const p = document.getElementById(b.getAttribute("aria-controls")); return b.getAttribute("aria-expanded") === "true" && !p.hidden && p.offsetHeight > 0 && p.textContent.includes('"text": "/sales_report {}"'); })()`, "the first entry's JSON")

	// The welcome card comes into view, wherever the transcript was.
	tb.Must(mainFrame, `document.getElementById("inspector-close").click(), document.getElementById("transcript").scrollTop = 0, true`)
	tb.Must(mainFrame, `document.getElementById("install").click(), true`)
	welcome := `[...document.querySelectorAll(".msg.bot")].find(m => m.innerText.includes("Hi, I'm Assistant"))`
	tb.Wait(mainFrame, welcome+` !== undefined`, "the welcome card")
	tb.Wait(mainFrame, `(() => { const w = `+welcome+`.getBoundingClientRect(); const t = document.getElementById("transcript").getBoundingClientRect(); return w.top >= t.top - 1 && w.top < t.bottom - 40; })()`, "the welcome card in view")
	if n := tb.Must(mainFrame, `document.getElementById("transcript").scrollTop`); n == float64(0) {
		t.Errorf("the transcript did not scroll to the welcome card")
	}
}

// TestBrowserPlaygroundAccessible opens the playground with an answer, its
// citation's pop-up and the activity inspector, in each theme (light,
// dark, high contrast) and both window sizes (1400×1000 and 390×844), and
// runs axe-core on it: no serious or critical violation, and the page
// never scrolls sideways.
func TestBrowserPlaygroundAccessible(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	answered := false
	for _, w := range testenv.WindowSizes {
		for _, th := range testenv.Themes {
			what := fmt.Sprintf("the playground, %s, %s", th, w.Name)
			tb.Emulate(w, th)
			tb.Navigate(en.base + "/playground")
			tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
			if !answered {
				tb.send("/sales_report {}")
				answered = true
			}
			tb.Wait(mainFrame, `document.querySelector(".msg.bot .ac-card") !== null && document.querySelector(".msg.bot .cite") !== null`, "the answer")
			wantTheme := map[testenv.Theme]string{testenv.Light: "default", testenv.Dark: "dark", testenv.HighContrast: "dark"}[th]
			if got := tb.Str(mainFrame, `document.documentElement.dataset.theme`); got != wantTheme {
				t.Errorf("%s: html data-theme %q, want %q", what, got, wantTheme)
			}
			tb.CheckAxe(what)
			tb.CheckNoSidewaysScroll(what)

			tb.Must(mainFrame, `document.querySelector(".msg.bot .cite").click(), true`)
			tb.Wait(mainFrame, `document.querySelector(".cite-pop:popover-open") !== null`, "the citation's pop-up")
			tb.CheckAxe(what + ", the citation's pop-up open")
			tb.Must(mainFrame, `document.querySelector(".cite-pop:popover-open").hidePopover(), true`)

			tb.Must(mainFrame, `document.getElementById("inspector-toggle").click(), true`)
			tb.Wait(mainFrame, `document.querySelectorAll("#activities li").length > 2`, "the inspector's list")
			tb.Must(mainFrame, `document.querySelector("#activities li button").click(), true`)
			tb.CheckAxe(what + ", the inspector open")
			tb.CheckNoSidewaysScroll(what + ", the inspector open")
		}
	}
}
