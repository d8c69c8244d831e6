package viewpage_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// A server's question during a view's tools/call is shown by the page, in
// a dialog of the top document and in no frame: the view (the test's own
// server over Streamable HTTP) calls its tool, the page shows the form
// with the server, the tool and the message as text, the defaults filled
// and the required fields marked; a wrong answer marks the field with
// what to correct; the corrected answer reaches the server, whose result
// the view shows. Nothing of the question or the dialog ever reaches the
// view's frames, and axe-core finds nothing serious on the page with the
// dialog open.
func TestBrowserQuestionDuringViewCall(t *testing.T) {
	e := newAskEnv(t, envOptions{})
	v := e.run(alice(), "/ask_view {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `document.body.dataset.state === "ready"`, "the view to be initialized")

	tb.must(viewFrame, `ask(), true`)
	tb.wait(mainFrame, `!!document.querySelector("dialog#question[open]")`, "the question's dialog")

	// The dialog, its form and its inputs are in the top document only.
	if got := tb.must(mainFrame, `(() => { const d = document.getElementById("question"); return d.parentElement === document.body && window.top === window && d.querySelectorAll("input").length; })()`); got != float64(6) {
		t.Errorf("%v inputs in the top document's dialog, want 6 (name, count, urgent, three colours)", got)
	}
	for _, f := range []string{proxyFrame, viewFrame} {
		if got := tb.must(f, `document.querySelectorAll("dialog, form, [id^=question]").length`); got != float64(0) {
			t.Errorf("frame %s holds %v elements of the question", f, got)
		}
		if tb.must(f, `document.documentElement.textContent.includes("Which colour")`) != false {
			t.Errorf("frame %s shows the question's text", f)
		}
	}
	if got := tb.str(mainFrame, `document.getElementById("question-title").textContent`); got != "A question from asker" {
		t.Errorf("title %q", got)
	}
	if got := tb.str(mainFrame, `document.querySelector("#question .meta").textContent`); !strings.Contains(got, "call of ask.") || !strings.Contains(got, "Answer by") {
		t.Errorf("the dialog says %q, want the tool and the time to answer by", got)
	}
	// The message is text, its line break kept.
	if got := tb.str(mainFrame, `document.getElementById("question-message").textContent`); got != askMessage {
		t.Errorf("message %q", got)
	}
	if got := tb.str(mainFrame, `document.getElementById("question").getAttribute("aria-describedby")`); got != "question-message" {
		t.Errorf("aria-describedby %q", got)
	}
	fields := tb.str(mainFrame, `JSON.stringify(Array.from(document.querySelectorAll("#question input")).map(i => [i.type, i.value, i.required, i.min, i.max, i.step, i.checked, (i.labels[0] || {}).textContent]))`)
	want := `[["text","",true,"","","",false,"Your name (required)"],` +
		`["number","2",true,"1","10","1",false,"How many (required)"],` +
		`["checkbox","on",false,"","","",false,"Urgent"],` +
		`["radio","red",false,"","","",false,"red"],["radio","green",false,"","","",false,"green"],["radio","blue",false,"","","",false,"blue"]]`
	if fields != want {
		t.Errorf("inputs\n%s\nwant\n%s", fields, want)
	}
	if got := tb.str(mainFrame, `document.querySelector("#question fieldset legend").textContent`); got != "Colour" {
		t.Errorf("the choice's legend %q", got)
	}
	if got := tb.str(mainFrame, `document.activeElement.id`); got != "question-field-0" {
		t.Errorf("focus on %q, want the first field", got)
	}

	// A wrong answer: the count over its maximum.
	tb.must(mainFrame, `(() => {
		document.getElementById("question-field-0").value = "Ada";
		document.getElementById("question-field-1").value = "20";
		document.getElementById("question-field-2").click();
		document.getElementById("question-field-3-1").click();
		document.getElementById("question-submit").click();
		return true;
	})()`)
	tb.wait(mainFrame, `!document.getElementById("question-field-1-problem").hidden`, "the problem of the count")
	if got := tb.str(mainFrame, `document.getElementById("question-field-1-problem").textContent`); got != "How many: at most 10." {
		t.Errorf("problem %q", got)
	}
	count := tb.str(mainFrame, `(() => { const i = document.getElementById("question-field-1"); return i.getAttribute("aria-invalid") + " " + i.getAttribute("aria-describedby") + " " + (document.activeElement === i); })()`)
	if count != "true question-field-1-problem true" {
		t.Errorf("the count after the problem: aria-invalid, aria-describedby, focused = %q", count)
	}
	if got := tb.str(mainFrame, `document.getElementById("question-problem").textContent`); !strings.Contains(got, "Correct the fields marked") {
		t.Errorf("the dialog's alert says %q", got)
	}
	if tb.must(mainFrame, `document.getElementById("question-field-0").hasAttribute("aria-invalid")`) != false {
		t.Error("the name is marked though it is right")
	}
	tb.CheckAxe("the view page with a server's question and a problem")

	tb.must(mainFrame, `document.getElementById("question-field-1").value = "3"; document.getElementById("question-submit").click(); true`)
	tb.wait(mainFrame, `!document.querySelector("dialog#question[open]")`, "the dialog to close")
	tb.wait(viewFrame, `document.body.dataset.state === "answered"`, "the tool's result in the view")
	var got struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal([]byte(tb.str(viewFrame, `document.body.dataset.result`)), &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"name": "Ada", "count": float64(3), "urgent": true, "colour": "green"}; got.Action != "accept" || !mapsEqual(got.Content, want) {
		t.Errorf("the view shows %+v, want accept %v", got, want)
	}
	if s := tb.str(mainFrame, `document.getElementById("status").textContent`); s != "Your answer was sent to asker." {
		t.Errorf("status %q", s)
	}
	// The view was told nothing but its own messages' answers: not the
	// question, not the problem, not the dialog.
	received := tb.str(viewFrame, `JSON.stringify(window.received)`)
	for _, leak := range []string{"Which colour", "at most 10", "elicit", "question"} {
		if strings.Contains(received, leak) {
			t.Errorf("the view received %q: %s", leak, received)
		}
	}

	// A URL question: the address in full, an Open link to it in a new
	// tab without an opener, and Decline.
	tb.must(viewFrame, `ask("ask_url"), true`)
	tb.wait(mainFrame, `!!document.querySelector("dialog#question[open]")`, "the URL question's dialog")
	if got := tb.str(mainFrame, `document.getElementById("question-url").textContent`); got != askURL {
		t.Errorf("the address shown %q, want %q", got, askURL)
	}
	open := tb.str(mainFrame, `(() => { const a = document.getElementById("question-open"); return [a.href, a.target, a.rel, a.textContent].join(" "); })()`)
	if open != askURL+" _blank noopener noreferrer Open" {
		t.Errorf("the Open link: %q", open)
	}
	if got := tb.str(mainFrame, `document.getElementById("question-submit").textContent`); got != "Continue" {
		t.Errorf("the URL question's primary button %q", got)
	}
	tb.must(mainFrame, `document.getElementById("question-decline").click(), true`)
	tb.wait(viewFrame, `document.body.dataset.state === "answered"`, "the URL question's result in the view")
	if got := tb.str(viewFrame, `document.body.dataset.result`); got != `{"action":"decline","content":null}` {
		t.Errorf("the view shows %s", got)
	}
	if s := tb.str(mainFrame, `document.getElementById("status").textContent`); s != "You declined; asker was told." {
		t.Errorf("status %q", s)
	}

	// Two questions at once are shown one after the other: declining the
	// first opens the second, which stays open until the person answers
	// it, here with Escape (cancel).
	tb.must(viewFrame, `window.results = []; Promise.all([ask(), ask()]), true`)
	tb.wait(mainFrame, `!!document.querySelector("dialog#question[open]")`, "the first of two questions")
	tb.wait(mainFrame, `(() => { return fetch(location.pathname.replace("/mcp-apps/", "/api/mcp-apps/") + "/questions").then(r => r.json()).then(j => j.questions.length === 2); })()`, "both questions to wait")
	tb.must(mainFrame, `document.getElementById("question-decline").click(), true`)
	tb.wait(mainFrame, `document.getElementById("status").textContent === "You declined; asker was told." && !!document.querySelector("dialog#question[open] #question-field-0")`, "the second question")
	time.Sleep(300 * time.Millisecond)
	if tb.must(mainFrame, `document.getElementById("question").open`) != true {
		t.Fatal("the second question's dialog closed by itself")
	}
	if _, err := chromedp.Run(tb.ctx, chromedp.KeyEvent(kb.Escape)); err != nil {
		t.Fatal(err)
	}
	tb.wait(viewFrame, `window.results.length === 2`, "both results in the view")
	results := tb.str(viewFrame, `JSON.stringify(window.results.map(r => JSON.parse(r).action).sort())`)
	if results != `["cancel","decline"]` {
		t.Errorf("the server got %s, want a decline and a cancel", results)
	}
	if s := tb.str(mainFrame, `document.getElementById("status").textContent`); s != "You dismissed the question; asker was told." {
		t.Errorf("status %q", s)
	}

	// A question that ends without the person (here the server says the
	// interaction is complete): the dialog closes and the page says so.
	tb.must(viewFrame, `ask("ask_url_done"), true`)
	tb.wait(viewFrame, `document.body.dataset.state === "answered"`, "the completed question's result in the view")
	tb.wait(mainFrame, `document.getElementById("status").textContent.includes("no longer waits")`, "the page to say the question ended")
	if tb.must(mainFrame, `document.getElementById("question").open`) != false {
		t.Error("the dialog stays open after its question ended")
	}

	for _, l := range tb.Log() {
		if strings.Contains(l, "Content Security Policy") || strings.Contains(l, "Trusted Type") || strings.Contains(l, "exception") {
			t.Errorf("browser: %s", l)
		}
	}
}
