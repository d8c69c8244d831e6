package playground_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// questionCard waits for a question card of the demo server other than
// those named in seen, and returns its activity id.
func (tb *tab) questionCard(seen ...string) string {
	tb.T.Helper()
	b, _ := json.Marshal(append([]string{}, seen...))
	find := `[...document.querySelectorAll(".msg.bot")].filter(m => m.innerText.includes("demo asks for your input") && !` + string(b) + `.includes(m.dataset.activityId)).pop()`
	tb.Wait(mainFrame, find+` !== undefined`, "the question card")
	return tb.Str(mainFrame, find+`.dataset.activityId`)
}

// card is the expression of the message holding the card of activity id.
func card(id string) string {
	return `document.querySelector('.msg[data-activity-id=` + strconv.Quote(id) + `]')`
}

// pressButton presses the button of a card with the given title, as a
// person does.
func (tb *tab) pressButton(id, title string) {
	tb.T.Helper()
	tb.Must(mainFrame, `[...`+card(id)+`.querySelectorAll("button.ac-pushButton")].find(b => b.title === `+strconv.Quote(title)+`).click(), true`)
}

// TestBrowserQuestionAnsweredInThePlayground asks the demo's
// request_refund from the page's suggestion and answers its question card
// as a person does in Teams: the card asks for the refund's fields in the
// server's order, with the defaults filled in; Submit with a required
// field left empty posts, as Teams does, a message from the person with
// no text whose value is the button's data and the inputs' values as text,
// and the bot shows the same card again, in place, with what to correct
// and what was entered; corrected and submitted, the card says the answer
// was sent and shows none of it, and the answer says what the tool got
// (the amount, the reason, that details were given, not the details). The
// inspector lists both card actions and the bot's updates of the card.
// Another question declined says so on its card and in the answer. A Stage
// View button (an Action.Submit whose data.msteams is an invoke) is still
// Teams' own: the page says so and posts nothing.
func TestBrowserQuestionAnsweredInThePlayground(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	logged := len(tb.Log())

	tb.Must(mainFrame, `document.querySelector('button.try[data-text="/request_refund {}"]').click(), true`)
	q := tb.questionCard()
	// Every input of the card has a name a screen reader says.
	tb.CheckAxe("the playground with a question card")
	asked := tb.Str(mainFrame, card(q)+`.innerText`)
	at := -1
	for _, want := range []string{"demo asks for your input", "request_refund", "Refund order A-1042: which refund should I make?",
		"Amount (EUR)", "Reason (required)", "Arrived damaged", "Arrived late", "Wrong item", "Something else", "Details",
		"Refund to", "Original payment", "Store credit", "Email me a receipt", "I confirm this refund (required)", "Submit", "Decline", "Cancel"} {
		i := strings.Index(asked, want)
		if i < at {
			t.Errorf("the question card does not show %q after what comes before it:\n%s", want, asked)
		}
		at = max(at, i)
	}
	defaults := tb.Must(mainFrame, `(() => { const c = `+card(q)+`; const boxes = c.querySelectorAll('input[type=checkbox]'); return [
		c.querySelector('input[type=number]').value,
		c.querySelector('input[name="field:reason"]:checked') === null,
		c.querySelector('input[name="field:refund_to"]:checked').value,
		boxes[0].checked, boxes[1].checked]; })()`)
	if b, _ := json.Marshal(defaults); string(b) != `["49.9",true,"original",true,false]` {
		t.Errorf("the card's inputs start as %s, want the schema's defaults: 49.9, no reason, original, a receipt, not confirmed", b)
	}

	// A wrong answer: the amount changed, confirmed, but no reason.
	tb.Must(mainFrame, `(() => { const c = `+card(q)+`;
		const n = c.querySelector('input[type=number]'); n.value = "42.5"; n.dispatchEvent(new Event("input", {bubbles: true}));
		c.querySelectorAll('input[type=checkbox]')[1].click(); return true; })()`)
	tb.pressButton(q, "Submit")
	tb.Wait(mainFrame, card(q)+`.dataset.revision === "2"`, "the card shown again")
	again := tb.Str(mainFrame, card(q)+`.innerText`)
	for _, want := range []string{"Please correct what is marked below, then submit again.", "Reason is required."} {
		if !strings.Contains(again, want) {
			t.Errorf("the card after a wrong answer lacks %q:\n%s", want, again)
		}
	}
	kept := tb.Must(mainFrame, `(() => { const c = `+card(q)+`; return [c.querySelector('input[type=number]').value, c.querySelectorAll('input[type=checkbox]')[1].checked]; })()`)
	if b, _ := json.Marshal(kept); string(b) != `["42.5",true]` {
		t.Errorf("the card shown again holds %s, want what was entered (42.5, confirmed)", b)
	}

	// Corrected: a reason and details.
	const details = "The parcel came a week late."
	tb.Must(mainFrame, `(() => { const c = `+card(q)+`;
		c.querySelector('input[name="field:reason"][value="late"]').click();
		const d = c.querySelector('input.ac-textInput'); d.value = `+strconv.Quote(details)+`; d.dispatchEvent(new Event("input", {bubbles: true}));
		return true; })()`)
	tb.pressButton(q, "Submit")
	tb.Wait(mainFrame, card(q)+`.dataset.revision === "3"`, "the card saying the answer was sent")
	sent := tb.Str(mainFrame, card(q)+`.innerText`)
	if !strings.Contains(sent, "Your answer was sent to demo") || strings.Contains(sent, "42.5") || strings.Contains(sent, "parcel") ||
		tb.Must(mainFrame, card(q)+`.querySelectorAll("input, button.ac-pushButton").length`) != float64(0) {
		t.Errorf("the answered card shows more than that the answer was sent:\n%s", sent)
	}
	answer := `[...document.querySelectorAll(".msg.bot")].find(m => m.innerText.includes("Refunded EUR"))`
	tb.Wait(mainFrame, answer+` !== undefined`, "the answer")
	said := tb.Str(mainFrame, answer+`.innerText`)
	for _, want := range []string{"Refunded EUR 42.50 for order A-1042 (Arrived late) to the original payment.", "A receipt is emailed to the person.", "The person gave details (28 characters)."} {
		if !strings.Contains(said, want) {
			t.Errorf("the answer does not say %q:\n%s", want, said)
		}
	}
	if s := tb.Str(mainFrame, `document.getElementById("transcript").innerText`); strings.Contains(s, "parcel") {
		t.Errorf("the transcript shows the details:\n%s", s)
	}

	// The inspector: the two card actions, as Teams posts them, and the
	// bot's updates of the card.
	tb.Must(mainFrame, `document.getElementById("inspector-toggle").click(), true`)
	type entry struct {
		Dir, Head, Call string
		Activity        struct {
			Type      string            `json:"type"`
			Text      *string           `json:"text"`
			ReplyToID string            `json:"replyToId"`
			Value     map[string]string `json:"value"`
			From      struct {
				AadObjectID string `json:"aadObjectId"`
			} `json:"from"`
		}
	}
	var actions, updates []entry
	tb.Wait(mainFrame, `[...document.querySelectorAll("#activities .activity.to-bot pre")].filter(p => p.textContent.includes('"value"')).length === 2`, "the card actions in the inspector")
	raw := tb.Str(mainFrame, `JSON.stringify([...document.querySelectorAll("#activities .activity")].map(li => ({
		dir: li.classList.contains("to-bot") ? "to-bot" : "from-bot",
		head: li.querySelector("button").innerText,
		call: li.querySelector(".activity-call").textContent,
		activity: (() => { try { const a = JSON.parse(li.querySelector("pre").textContent); if (a.value) { for (const k in a.value) a.value[k] = String(a.value[k]); } return a; } catch (e) { return null; } })(),
	})))`)
	var entries []entry
	if err := json.Unmarshal([]byte(raw), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch {
		case e.Dir == "to-bot" && e.Activity.Value != nil:
			actions = append(actions, e)
		case e.Dir == "from-bot" && strings.HasPrefix(e.Call, "PUT ") && strings.HasSuffix(e.Call, "/activities/"+q):
			updates = append(updates, e)
		}
	}
	if len(actions) != 2 || len(updates) != 2 {
		t.Fatalf("the inspector lists %d card actions and %d updates of the card, want 2 and 2: %+v", len(actions), len(updates), entries)
	}
	for i, a := range actions {
		v := a.Activity.Value
		if a.Activity.Type != "message" || a.Activity.Text == nil || *a.Activity.Text != "" || a.Activity.ReplyToID != q || a.Activity.From.AadObjectID != pageUser {
			t.Errorf("card action %d is not a message of the person with no text replying to the card: %+v", i, a.Activity)
		}
		if !strings.Contains(a.Head, "card action") || !strings.Contains(a.Head, "POST /api/messages") {
			t.Errorf("card action %d is listed as %q", i, a.Head)
		}
		if v["teamsbot"] != "elicit" || v["action"] != "accept" || v["elicitation"] == "" || v["field:amount"] != "42.5" ||
			v["field:confirm"] != "true" || v["field:notify"] != "true" || v["field:refund_to"] != "original" {
			t.Errorf("card action %d's value %v, want the Submit button's data and the inputs as text", i, v)
		}
	}
	if _, ok := actions[0].Activity.Value["field:reason"]; ok || actions[1].Activity.Value["field:reason"] != "late" || actions[1].Activity.Value["field:details"] != details {
		t.Errorf("the card actions' values: %v then %v", actions[0].Activity.Value, actions[1].Activity.Value)
	}
	tb.Must(mainFrame, `document.getElementById("inspector-close").click(), true`)

	// Another question, declined.
	tb.send("/request_refund {}")
	d := tb.questionCard(q)
	tb.pressButton(d, "Decline")
	tb.Wait(mainFrame, card(d)+`.innerText.includes("The question was declined, and demo was told so.")`, "the declined card")
	tb.Wait(mainFrame, `[...document.querySelectorAll(".msg.bot")].some(m => m.innerText.includes("No refund was made for order A-1042: the person declined to give its details."))`, "the answer to the declined question")

	// A Stage View button is Teams' own: said, not sent.
	conv := tb.Str(mainFrame, `document.getElementById("conversation-id").textContent`)
	stage := `{"type":"message","attachments":[{"contentType":"application/vnd.microsoft.card.adaptive","content":{"type":"AdaptiveCard","version":"1.5",
		"body":[{"type":"TextBlock","text":"A view"}],
		"actions":[{"type":"Action.Submit","title":"Open in Teams","data":{"msteams":{"type":"invoke","value":{"type":"tab/tabInfoAction","tabInfo":{"contentUrl":"https://example.com/v","websiteUrl":"https://example.com/v","name":"View","entityId":"v"}}}}}]}}]}`
	r := do(t, http.MethodPost, en.base+"/playground/connector/v3/conversations/"+url.PathEscape(conv)+"/activities", map[string]string{"Content-Type": "application/json"}, stage)
	var posted struct {
		ID string `json:"id"`
	}
	if r.status != http.StatusCreated || json.Unmarshal([]byte(r.body), &posted) != nil {
		t.Fatalf("the Stage View card: %d %s", r.status, r.body)
	}
	tb.Wait(mainFrame, card(posted.ID)+` !== null`, "the Stage View card")
	toBot := `document.querySelectorAll("#activities .activity.to-bot").length`
	before := tb.Must(mainFrame, toBot)
	tb.pressButton(posted.ID, "Open in Teams")
	tb.Wait(mainFrame, `!document.getElementById("error").hidden && document.getElementById("error").textContent === "Teams would send “Open in Teams” to the bot; the playground does not."`, "the word that Teams handles it")
	if after := tb.Must(mainFrame, toBot); after != before {
		t.Errorf("the Stage View button posted to the bot: %v activities to the bot, %v before", after, before)
	}

	for _, l := range tb.Log()[logged:] {
		if strings.Contains(l, "/favicon.ico") {
			continue
		}
		if strings.HasPrefix(l, "console.warning") || strings.HasPrefix(l, "console.error") || strings.HasPrefix(l, "exception") {
			t.Errorf("the browser logged: %s", l)
		}
	}
}
