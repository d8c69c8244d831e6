package cards

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/elicit"
)

// ticketSchema is a server's requested schema with a field of every kind a
// form can hold, as a help desk's create_ticket tool could ask for it.
const ticketSchema = `{
  "type": "object",
  "properties": {
    "project":  {"type": "string", "title": "Project", "description": "Where the ticket goes.",
                 "enum": ["ops", "web", "data"], "enumNames": ["Operations", "Website", "Data platform"], "default": "web"},
    "summary":  {"type": "string", "title": "Summary", "minLength": 5, "maxLength": 120},
    "reply":    {"type": "string", "format": "email", "title": "Reply to", "description": "Who hears back when it is solved."},
    "page":     {"type": "string", "format": "uri", "title": "Related page"},
    "due":      {"type": "string", "format": "date", "title": "Due date"},
    "start":    {"type": "string", "format": "date-time", "title": "Work may start at"},
    "hours":    {"type": "number", "title": "Estimate in hours", "minimum": 0.5, "maximum": 40},
    "priority": {"type": "integer", "title": "Priority", "minimum": 1, "maximum": 5, "default": 3},
    "urgent":   {"type": "boolean", "title": "Urgent", "default": false},
    "labels":   {"type": "array", "title": "Labels", "maxItems": 3, "default": ["bug", "api"],
                 "items": {"type": "string", "enum": ["bug", "feature", "docs", "security", "ui", "api", "infra"]}},
    "team":     {"type": "string", "title": "Team", "oneOf": [
                 {"const": "a", "title": "Alpha"}, {"const": "b", "title": "Bravo"}, {"const": "c", "title": "Charlie"},
                 {"const": "d", "title": "Delta"}, {"const": "e", "title": "Echo"}, {"const": "f", "title": "Foxtrot"}]},
    "notes":    {"type": "string"}
  },
  "required": ["project", "summary", "priority"]
}`

// mustForm parses a requested schema as the agent does, or panics: the
// schemas of these tests are valid.
func mustForm(schema string) elicit.Form {
	f, err := elicit.Parse(json.RawMessage(schema), elicit.PropertyOrder(json.RawMessage(schema)))
	if err != nil {
		panic(err)
	}
	return f
}

// ticketQuestion is the form question of the golden cards, in state s.
func ticketQuestion(s ElicitState) Elicitation {
	return Elicitation{
		ID: "el-9Q2X", Server: "helpdesk", Tool: "create_ticket", AgentName: "Assistant", PersonName: "Ada Lovelace",
		Mode: elicit.ModeForm, Message: "A few details are missing to open the ticket.",
		Form: mustForm(ticketSchema), Wait: 5 * time.Minute, Deadline: now.Add(5 * time.Minute), State: s,
	}
}

// wrongTicket is what a person sent that the form turns down: the values
// as Teams sends them, and the problems Form.Check finds.
func wrongTicket() (map[string]string, []elicit.Problem) {
	values := map[string]string{
		"project": "ops", "summary": "VPN", "reply": "ada at example", "hours": "41",
		"priority": "2", "urgent": "true", "labels": "bug,security", "team": "c", "notes": "since Monday",
	}
	sent := map[string]any{}
	for k, v := range values {
		sent[k] = v
	}
	_, problems := mustForm(ticketSchema).Check(sent)
	return values, problems
}

// pageQuestion is the URL mode question of the golden cards, in state s.
func pageQuestion(s ElicitState, u string) Elicitation {
	return Elicitation{
		ID: "el-7HWM", Server: "payments", Tool: "refund", AgentName: "Assistant", PersonName: "Ada Lovelace",
		Mode: elicit.ModeURL, Message: "Confirm the refund of order 1042 with your bank.",
		URL: u, Wait: 10 * time.Minute, State: s,
	}
}

const bankURL = "https://pay.example.com/confirm?order=1042&session=7f3a"

// bigSchema is the biggest form the bounds of elicit allow, and more: n
// properties (elicit keeps MaxFields), each a choice of MaxOptions+5
// options with names of MaxTitle bytes and values of valueBytes, a title
// and a description longer than the bounds, and the longest message.
func bigSchema(n, valueBytes int) string {
	props := map[string]any{}
	var required []string
	for i := range n {
		var oneOf []map[string]string
		for j := range elicit.MaxOptions + 5 {
			v := fmt.Sprintf("%02d-%02d-", i, j)
			v += strings.Repeat("v", max(valueBytes-len(v), 0))
			oneOf = append(oneOf, map[string]string{"const": v, "title": fmt.Sprintf("Option %d of field %d ", j, i) + strings.Repeat("é", elicit.MaxTitle)})
		}
		name := fmt.Sprintf("field_%02d", i)
		props[name] = map[string]any{
			"type":        "string",
			"title":       fmt.Sprintf("Field %d ", i) + strings.Repeat("title ", 30),
			"description": fmt.Sprintf("Description %d ", i) + strings.Repeat("words ", 100),
			"oneOf":       oneOf,
		}
		if i%2 == 0 {
			required = append(required, name)
		}
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// bigQuestion asks bigSchema(n, valueBytes), with the longest message.
func bigQuestion(n, valueBytes int) Elicitation {
	q := ticketQuestion(ElicitAsking)
	q.Form = mustForm(bigSchema(n, valueBytes))
	q.Message = strings.Repeat("Please read this long message. ", elicit.MaxMessage/30)
	return q
}

// elicitGoldenCases are the golden cards of questions: every state, both
// modes, a wrong answer, a group chat, and forms too large for a message.
func elicitGoldenCases() map[string][]Card {
	personal := Options{}
	shared := Options{Shared: true}
	values, problems := wrongTicket()
	wrong := ticketQuestion(ElicitAsking)
	wrong.Values, wrong.Problems = values, problems
	tooLarge := ticketQuestion(ElicitAsking)
	tooLarge.Form = mustForm(bigSchema(elicit.MaxFields, elicit.MaxValue))
	http := pageQuestion(ElicitAsking, "http://pay.example.com/confirm")
	return map[string][]Card{
		"elicit_form":             {ElicitationCard(ticketQuestion(ElicitAsking), personal)},
		"elicit_form_problems":    {ElicitationCard(wrong, personal)},
		"elicit_form_shared":      {ElicitationCard(ticketQuestion(ElicitAsking), shared)},
		"elicit_form_large":       {ElicitationCard(bigQuestion(elicit.MaxFields+5, 12), personal)},
		"elicit_form_too_large":   {ElicitationCard(tooLarge, personal)},
		"elicit_sent":             {ElicitationCard(ticketQuestion(ElicitAccepted), personal)},
		"elicit_declined":         {ElicitationCard(ticketQuestion(ElicitDeclined), shared)},
		"elicit_cancelled":        {ElicitationCard(ticketQuestion(ElicitCancelled), personal)},
		"elicit_timed_out":        {ElicitationCard(ticketQuestion(ElicitTimedOut), personal)},
		"elicit_unanswerable":     {ElicitationCard(ticketQuestion(ElicitUnanswerable), personal)},
		"elicit_url":              {ElicitationCard(pageQuestion(ElicitAsking, bankURL), shared)},
		"elicit_url_not_https":    {ElicitationCard(http, personal)},
		"elicit_url_accepted":     {ElicitationCard(pageQuestion(ElicitAccepted, bankURL), personal)},
		"elicit_url_completed":    {ElicitationCard(pageQuestion(ElicitCompleted, bankURL), personal)},
		"elicit_url_unicode_host": {ElicitationCard(pageQuestion(ElicitAccepted, "https://pаy.example.com/confirm"), personal)},
	}
}

// inputsOf returns the inputs of a card, in order.
func inputsOf(t *testing.T, c Card) []map[string]any {
	t.Helper()
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if typ, _ := v["type"].(string); strings.HasPrefix(typ, "Input.") {
				out = append(out, v)
			}
			for _, k := range []string{"body", "items"} {
				walk(v[k])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(decode(t, c))
	return out
}

// TestElicitFormInputs: one input per field in the server's order, each
// of the kind its field asks for, with its bounds and its default, under
// its name, marked when required; nothing of schema 1.3 or later.
func TestElicitFormInputs(t *testing.T) {
	card := ElicitationCard(ticketQuestion(ElicitAsking), Options{})
	ins := inputsOf(t, card)
	var ids []string
	for _, in := range ins {
		ids = append(ids, in["id"].(string))
	}
	want := []string{"field:project", "field:summary", "field:reply", "field:page", "field:due", "field:start",
		"field:hours", "field:priority", "field:urgent", "field:labels", "field:team", "field:notes"}
	if !slices.Equal(ids, want) {
		t.Fatalf("inputs %q, want %q", ids, want)
	}
	byID := map[string]map[string]any{}
	for _, in := range ins {
		byID[strings.TrimPrefix(in["id"].(string), ElicitFieldPrefix)] = in
	}
	titles := func(in map[string]any) []string {
		var out []string
		for _, c := range in["choices"].([]any) {
			out = append(out, c.(map[string]any)["title"].(string)+"="+c.(map[string]any)["value"].(string))
		}
		return out
	}
	tests := []struct {
		field string
		check func(map[string]any) bool
	}{
		{"project", func(in map[string]any) bool {
			return in["type"] == "Input.ChoiceSet" && in["style"] == "expanded" && in["isMultiSelect"] == nil && in["value"] == "web" &&
				slices.Equal(titles(in), []string{"Operations=ops", "Website=web", "Data platform=data"})
		}},
		{"summary", func(in map[string]any) bool {
			return in["type"] == "Input.Text" && in["maxLength"] == 120.0 && in["value"] == nil && in["style"] == nil
		}},
		{"reply", func(in map[string]any) bool { return in["type"] == "Input.Text" && in["style"] == "Email" }},
		{"page", func(in map[string]any) bool { return in["type"] == "Input.Text" && in["style"] == "Url" }},
		{"due", func(in map[string]any) bool { return in["type"] == "Input.Date" }},
		{"start", func(in map[string]any) bool {
			return in["type"] == "Input.Text" && in["placeholder"] == "Work may start at, such as 2026-12-31T09:30:00+01:00"
		}},
		{"hours", func(in map[string]any) bool {
			// No min and max: the renderer would check them on Decline
			// and Cancel too; the hint says the bounds.
			return in["type"] == "Input.Number" && in["min"] == nil && in["max"] == nil && in["value"] == nil && in["placeholder"] == "Estimate in hours"
		}},
		{"priority", func(in map[string]any) bool {
			return in["type"] == "Input.Number" && in["min"] == nil && in["value"] == 3.0 && in["placeholder"] == "Priority"
		}},
		{"urgent", func(in map[string]any) bool {
			return in["type"] == "Input.Toggle" && in["value"] == "false" && in["valueOn"] == "true" && in["valueOff"] == "false" && in["title"] == "Yes"
		}},
		{"labels", func(in map[string]any) bool {
			return in["type"] == "Input.ChoiceSet" && in["style"] == "compact" && in["isMultiSelect"] == true && in["value"] == "bug,api" && len(in["choices"].([]any)) == 7
		}},
		{"team", func(in map[string]any) bool {
			return in["type"] == "Input.ChoiceSet" && in["style"] == "compact" && in["isMultiSelect"] == nil && in["value"] == nil &&
				titles(in)[5] == "Foxtrot=f"
		}},
		// A 1.2 input's placeholder is its accessible name.
		{"notes", func(in map[string]any) bool {
			return in["type"] == "Input.Text" && len(in) == 3 && in["placeholder"] == "notes"
		}},
	}
	for _, tt := range tests {
		if !tt.check(byID[tt.field]) {
			t.Errorf("%s: input %v", tt.field, byID[tt.field])
		}
	}

	// Each input follows its name: the field's title (else its name),
	// " (required)" when it must be filled in, what it takes, and the
	// description, subtle, under it.
	body := decode(t, card)["body"].([]any)
	above := map[string]string{}
	for i, el := range body {
		in := el.(map[string]any)
		if id, ok := in["id"].(string); ok && strings.HasPrefix(in["type"].(string), "Input.") {
			var s []string
			for j := i - 1; j >= 0; j-- {
				prev := body[j].(map[string]any)
				if prev["type"] != "RichTextBlock" {
					break
				}
				s = append([]string{texts(prev)}, s...)
				if prev["spacing"] == "Medium" {
					break
				}
			}
			above[id] = strings.Join(s, "|")
		}
	}
	for id, want := range map[string]string{
		"field:project":  "Project\n (required)|Where the ticket goes.",
		"field:summary":  "Summary\n (required)\n · 5 to 120 characters",
		"field:reply":    "Reply to|Who hears back when it is solved.",
		"field:hours":    "Estimate in hours\n · a number from 0.5 to 40",
		"field:priority": "Priority\n (required)\n · a whole number from 1 to 5",
		"field:urgent":   "Urgent",
		"field:labels":   "Labels\n · choose at most 3",
		"field:notes":    "notes",
	} {
		if above[id] != want {
			t.Errorf("%s: above it %q, want %q", id, above[id], want)
		}
	}
	for _, el := range find(decode(t, card), "TextRun") {
		if el["text"] == "Where the ticket goes." && el["isSubtle"] != true {
			t.Errorf("the description is not subtle: %v", el)
		}
	}
	raw := inspect(t, card).raw
	for _, later := range []string{`"label"`, `"isRequired"`, `"errorMessage"`, `"regex"`, `"inlineAction"`, `"associatedInputs"`} {
		if strings.Contains(raw, later) {
			t.Errorf("the card has %s, which Teams mobile (1.2) does not know", later)
		}
	}
	if strings.Contains(inspect(t, card).allText(), "To fit in one message") {
		t.Errorf("an ordinary form was shortened:\n%s", inspect(t, card).allText())
	}
	if card.Summary != "A question from helpdesk waits for your answer" || !strings.Contains(card.FallbackText, "It asks for: Project, Summary, Reply to,") {
		t.Errorf("summary %q, fallback %q", card.Summary, card.FallbackText)
	}
}

// TestElicitButtons: every button of a waiting question is an
// Action.Submit carrying exactly the question's id and its action, in the
// order Submit (Continue), Decline, Cancel; a question that can't be
// answered here keeps Decline and Cancel only.
func TestElicitButtons(t *testing.T) {
	tooLarge := ticketQuestion(ElicitAsking)
	tooLarge.Form = mustForm(bigSchema(elicit.MaxFields, elicit.MaxValue))
	tests := []struct {
		name string
		q    Elicitation
		want []string // title=action
	}{
		{"form", ticketQuestion(ElicitAsking), []string{"Submit=accept", "Decline=decline", "Cancel=cancel"}},
		{"url", pageQuestion(ElicitAsking, bankURL), []string{"Continue=accept", "Decline=decline", "Cancel=cancel"}},
		{"url not https", pageQuestion(ElicitAsking, "http://pay.example.com/"), []string{"Decline=decline", "Cancel=cancel"}},
		{"form too large", tooLarge, []string{"Decline=decline", "Cancel=cancel"}},
	}
	for _, tt := range tests {
		card := ElicitationCard(tt.q, Options{Shared: true})
		var got []string
		for _, a := range actionsOf(t, card) {
			if a["type"] != "Action.Submit" {
				t.Errorf("%s: a %v button", tt.name, a["type"])
				continue
			}
			data := a["data"].(map[string]any)
			action, _ := data[ElicitActionKey].(string)
			if len(data) != 3 || data[ElicitKey] != ElicitKind || data[ElicitIDKey] != tt.q.ID {
				t.Errorf("%s: %s carries %v", tt.name, a["title"], data)
			}
			got = append(got, a["title"].(string)+"="+action)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: buttons %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestElicitProblems: after a wrong answer, the form holds what the
// person entered again, says to correct it, and puts each problem under
// its field in the colour of attention; a problem of no field of the form
// is said at the top.
func TestElicitProblems(t *testing.T) {
	values, problems := wrongTicket()
	if len(problems) != 3 {
		t.Fatalf("the wrong ticket has %d problems, want 3: %v", len(problems), problems)
	}
	q := ticketQuestion(ElicitAsking)
	q.Values, q.Problems = values, append(problems, elicit.Problem{Field: "gone", Message: "The server no longer asks for gone."})
	card := ElicitationCard(q, Options{})
	body := decode(t, card)["body"].([]any)
	under := map[string]string{}
	var attention []string
	for i, el := range body {
		m := el.(map[string]any)
		for _, r := range find(m, "TextRun") {
			if r["color"] == "Attention" {
				attention = append(attention, r["text"].(string))
			}
		}
		if id, ok := m["id"].(string); ok && i+1 < len(body) {
			next := body[i+1].(map[string]any)
			if runs := find(next, "TextRun"); len(runs) == 1 && runs[0]["color"] == "Attention" {
				under[id] = runs[0]["text"].(string)
			}
		}
	}
	wantUnder := map[string]string{
		"field:summary": "Summary: at least 5 characters.",
		"field:reply":   "Reply to: enter an email address, such as name" + zwsp + "@example.com.",
		"field:hours":   "Estimate in hours: at most 40.",
	}
	if len(under) != len(wantUnder) {
		t.Errorf("problems under %v, want %v", under, wantUnder)
	}
	for id, want := range wantUnder {
		if under[id] != want {
			t.Errorf("under %s: %q, want %q", id, under[id], want)
		}
	}
	if len(attention) < 2 || attention[0] != elicitCorrect || attention[1] != "The server no longer asks for gone." {
		t.Errorf("attention runs %q", attention)
	}
	got := map[string]any{}
	for _, in := range inputsOf(t, card) {
		got[in["id"].(string)] = in["value"]
	}
	for id, want := range map[string]any{
		"field:project": "ops", "field:summary": "VPN", "field:reply": "ada at example", "field:hours": 41.0,
		"field:priority": 2.0, "field:urgent": "true", "field:labels": "bug,security", "field:team": "c",
		"field:notes": "since Monday", "field:page": nil,
	} {
		if got[id] != want {
			t.Errorf("%s holds %#v, want %#v", id, got[id], want)
		}
	}
	// What no input of its kind can hold is not shown as if it could.
	q.Values = map[string]string{"hours": "many", "due": "tomorrow", "team": "zulu", "labels": "bug,nope"}
	got = map[string]any{}
	for _, in := range inputsOf(t, ElicitationCard(q, Options{})) {
		got[in["id"].(string)] = in["value"]
	}
	if got["field:hours"] != nil || got["field:due"] != nil || got["field:team"] != nil || got["field:labels"] != "bug" {
		t.Errorf("values %v", got)
	}
}

// endedStates are the states in which a question no longer waits.
var endedStates = []ElicitState{ElicitAccepted, ElicitDeclined, ElicitCancelled, ElicitTimedOut, ElicitCompleted, ElicitUnanswerable, ElicitState(99)}

// TestElicitEndedShowsNoValue: once a question has ended, its card shows
// nothing that was entered or pre-filled, in any state and either mode:
// no input, and none of the values anywhere in the card, its summary or
// its fallback text. The same search finds them while the question waits.
func TestElicitEndedShowsNoValue(t *testing.T) {
	const schema = `{"type":"object","properties":{
		"code": {"type":"string","default":"default-7d1f"},
		"pick": {"type":"string","enum":["choice-5b2e","choice-0c9a"],"default":"choice-5b2e"},
		"many": {"type":"integer","default":918273},
		"note": {"type":"string"}}}`
	secrets := []string{"entered-3f8a", "entered-91c2", "default-7d1f", "choice-5b2e", "918273", "554433"}
	for _, mode := range []string{elicit.ModeForm, elicit.ModeURL} {
		for _, s := range append([]ElicitState{ElicitAsking}, endedStates...) {
			q := ticketQuestion(s)
			q.Mode, q.URL, q.Form = mode, bankURL, mustForm(schema)
			q.Values = map[string]string{"note": "entered-3f8a", "other": "entered-91c2", "many": "554433"}
			q.Problems = []elicit.Problem{{Field: "note", Message: "note: entered-3f8a is wrong."}}
			for _, o := range []Options{{}, {Shared: true}} {
				card := ElicitationCard(q, o)
				all := inspect(t, card).raw + card.Summary + card.FallbackText
				var shown []string
				for _, v := range secrets {
					if strings.Contains(all, v) {
						shown = append(shown, v)
					}
				}
				name := fmt.Sprintf("%s, state %d, shared %v", mode, s, o.Shared)
				if s == ElicitAsking {
					if want := []string{"entered-3f8a", "default-7d1f", "choice-5b2e", "554433"}; mode == elicit.ModeForm && !slices.Equal(shown, want) {
						t.Errorf("%s: the control search finds only %q in %s", name, shown, all)
					}
					continue
				}
				if len(shown) > 0 || len(inputsOf(t, card)) > 0 {
					t.Errorf("%s: the card shows %q: %s", name, shown, all)
				}
				acts := actionsOf(t, card)
				wantActs := 0
				if s == ElicitAccepted && mode == elicit.ModeURL {
					wantActs = 1
				}
				if len(acts) != wantActs {
					t.Errorf("%s: actions %v", name, acts)
				}
			}
		}
	}
}

// TestElicitEnded: each way a question ends is one sentence under a
// heading that says it, and the heading is the notification line.
func TestElicitEnded(t *testing.T) {
	tests := []struct {
		q        Elicitation
		heading  string
		sentence string
	}{
		{ticketQuestion(ElicitAccepted), "Answer sent to helpdesk", "Your answer was sent to helpdesk. This card does not show it, so that nobody else reads it here."},
		{pageQuestion(ElicitCompleted, bankURL), "Question from payments: done", "Done: payments says it is done with its page, and the tool goes on."},
		{ticketQuestion(ElicitDeclined), "Question from helpdesk: declined", "The question was declined, and helpdesk was told so."},
		{ticketQuestion(ElicitCancelled), "Question from helpdesk: cancelled", "The question was cancelled, and helpdesk was told so."},
		{ticketQuestion(ElicitTimedOut), "Question from helpdesk: no answer", "No answer came within 5 minutes, so helpdesk was told the question was cancelled."},
		{ticketQuestion(ElicitUnanswerable), "Question from helpdesk: ended", "This question from helpdesk can no longer be answered."},
		{ticketQuestion(ElicitState(-1)), "Question from helpdesk: ended", "This question from helpdesk can no longer be answered."},
	}
	for _, tt := range tests {
		card := ElicitationCard(tt.q, Options{Shared: true})
		in := inspect(t, card)
		if !slices.Equal(in.texts, []string{tt.heading, tt.sentence}) || card.Summary != tt.heading || card.FallbackText != tt.heading+". "+tt.sentence {
			t.Errorf("state %d: texts %q, summary %q, fallback %q", tt.q.State, in.texts, card.Summary, card.FallbackText)
		}
	}
	q := ticketQuestion(ElicitTimedOut)
	q.Wait = 0
	if got := inspect(t, ElicitationCard(q, Options{})).texts[1]; got != "No answer came in time, so helpdesk was told the question was cancelled." {
		t.Errorf("timed out with no wait: %q", got)
	}
}

// TestElicitURLOnlyHTTPS: the only address a question's card leads to is
// the server's absolute https address, with no user name, written out in
// full before anyone can open it; anything else reaches no Action.OpenUrl,
// is not written out, and the card says it can't be answered here.
func TestElicitURLOnlyHTTPS(t *testing.T) {
	refused := []string{
		"http://pay.example.com/confirm",
		"javascript:alert(document.cookie)",
		"JavaScript:alert(1)",
		"data:text/html,<script>alert(1)</script>",
		"file:///etc/passwd",
		"ftp://pay.example.com/x",
		"mailto:ada@example.com",
		"//pay.example.com/confirm",
		"/mcp-apps/v1",
		"https:pay.example.com",
		"https:///path",
		"https://:443/x",
		"https://bank.example@evil.example/login",
		"https://user:pass@pay.example.com/",
		" https://pay.example.com/",
		"https://pay.example.com/\x00",
		"https://pay.exa mple.com/",
		"https://" + strings.Repeat("a", 300) + ".example/",
		"https://pay.example.com/" + strings.Repeat("x", maxPageURL),
		"",
	}
	for _, u := range refused {
		for _, s := range []ElicitState{ElicitAsking, ElicitAccepted} {
			for _, mode := range []string{elicit.ModeURL, elicit.ModeForm} {
				q := pageQuestion(s, u)
				q.Mode = mode
				card := ElicitationCard(q, Options{})
				in := inspect(t, card)
				if len(in.openURLs) > 0 {
					t.Errorf("%q (state %d, %s): buttons to %q", u, s, mode, in.openURLs)
				}
				if mode != elicit.ModeURL {
					continue
				}
				all := in.allText()
				if strings.Contains(all, "Continue") || !strings.Contains(all, "so this question can't be answered here") {
					t.Errorf("%q (state %d): %s", u, s, all)
				}
				if host := strings.TrimPrefix(u, "http://"); u != "" && strings.Contains(all, host) {
					t.Errorf("%q (state %d): the address is written out: %s", u, s, all)
				}
			}
		}
	}
	for u, want := range map[string]string{
		bankURL:                              bankURL,
		"HTTPS://Pay.Example.com:8443/a b?x": "https://Pay.Example.com:8443/a%20b?x",
		"https://pаy.example.com/confirm":    "https://xn--py-7kc.example.com/confirm",
		"https://[2001:db8::1]/confirm":      "https://[2001:db8::1]/confirm",
	} {
		asking := ElicitationCard(pageQuestion(ElicitAsking, u), Options{})
		if in := inspect(t, asking); len(in.openURLs) > 0 || !strings.Contains(strings.ReplaceAll(in.allText(), zwsp, ""), want) {
			t.Errorf("%q asking: buttons %q, texts %s", u, in.openURLs, in.allText())
		}
		accepted := ElicitationCard(pageQuestion(ElicitAccepted, u), Options{})
		in := inspect(t, accepted)
		if !slices.Equal(in.openURLs, []string{want}) || !strings.Contains(strings.ReplaceAll(in.allText(), zwsp, ""), want) {
			t.Errorf("%q accepted: buttons %q, want %q; texts %s", u, in.openURLs, want, in.allText())
		}
		checkShownNeutral(t, 0, accepted)
	}
	// Any address a server could send: a button leads only to https.
	r := rand.New(rand.NewPCG(5, 6))
	parts := []string{"https://", "http://", "javascript:", "//", "pay.example.com", "@", "evil.example", "/", "%2F", ":", "\\", "?", "#",
		"\t", " ", "é", "xn--", "[", "]", "..", "{{DATE(2020-01-01T00:00:00Z)}}"}
	var cs []Card
	for range 500 {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		card := ElicitationCard(pageQuestion(ElicitAccepted, b.String()), Options{})
		for _, u := range inspect(t, card).openURLs {
			if p, err := url.Parse(u); err != nil || p.Scheme != "https" || p.Host == "" || p.User != nil || !strings.HasPrefix(u, "https://") {
				t.Errorf("%q: a button to %q", b.String(), u)
			}
		}
		checkShownNeutral(t, 0, card, inspect(t, card).openURLs...)
		cs = append(cs, card)
	}
	if out, status := validate(t, writeMessages(t, t.TempDir(), "urls", cs...)); status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects URL mode cards:\n%s", out)
	}
}

// TestElicitBiggestForm: the biggest form the bounds of elicit allow
// stays within one message. With short values it is shown, every field
// with an input and some of its choices, and the card says what gave
// way; with the longest values even one choice a field does not fit, and
// the card says the question can't be answered here.
func TestElicitBiggestForm(t *testing.T) {
	big := bigQuestion(elicit.MaxFields+5, 12)
	if len(big.Form.Fields) != elicit.MaxFields || len(big.Form.Fields[0].Options) != elicit.MaxOptions {
		t.Fatalf("the form has %d fields of %d choices", len(big.Form.Fields), len(big.Form.Fields[0].Options))
	}
	// After a wrong answer, every field also holds a value (its last
	// choice) and a problem, in elicit's words.
	wrong := big
	wrong.Values, wrong.Problems = map[string]string{}, nil
	for _, f := range big.Form.Fields {
		wrong.Values[f.Name] = f.Options[elicit.MaxOptions-1].Value
		wrong.Problems = append(wrong.Problems, elicit.Problem{Field: f.Name, Message: f.Label() + ": choose one of the choices given."})
	}
	var cs []Card
	for _, q := range []Elicitation{big, wrong} {
		for _, o := range []Options{{}, {Shared: true}} {
			card := ElicitationCard(q, o)
			if size := card.Size(); size > MaxCardSize {
				t.Fatalf("options %+v: %d UTF-16 code units, limit %d", o, size, MaxCardSize)
			}
			ins := inputsOf(t, card)
			all := inspect(t, card).allText()
			if len(ins) != elicit.MaxFields {
				t.Errorf("options %+v: %d inputs", o, len(ins))
			}
			for _, in := range ins {
				if n := len(in["choices"].([]any)); n < 1 || n == elicit.MaxOptions {
					t.Errorf("options %+v: %s has %d choices", o, in["id"], n)
				}
			}
			for _, want := range []string{"To fit in one message, the fields' descriptions are left out, the names of choices are shortened", "choices are not shown",
				"helpdesk asked for more than a question here holds. Left out: the end of the title of field_00;"} {
				if !strings.Contains(all, want) {
					t.Errorf("options %+v: the card does not say %q:\n%s", o, want, all)
				}
			}
			if q.Values != nil {
				// A picked choice stays among those shown.
				for _, in := range ins {
					if in["value"] == nil {
						t.Errorf("options %+v: %s lost its value", o, in["id"])
					}
				}
			}
			checkShownNeutral(t, 0, card)
			cs = append(cs, card)
		}
	}

	for name, q := range map[string]Elicitation{
		"longest values": bigQuestion(elicit.MaxFields, elicit.MaxValue),
		"longest defaults": func() Elicitation {
			props := map[string]any{}
			for i := range elicit.MaxFields {
				props[fmt.Sprintf("f%02d", i)] = map[string]any{"type": "string", "default": strings.Repeat("😀", elicit.MaxValue/4)}
			}
			b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
			q := ticketQuestion(ElicitAsking)
			q.Form = mustForm(string(b))
			return q
		}(),
	} {
		card := ElicitationCard(q, Options{})
		if size := card.Size(); size > MaxCardSize {
			t.Fatalf("%s: %d UTF-16 code units", name, size)
		}
		all := inspect(t, card).allText()
		if len(inputsOf(t, card)) != 0 || !strings.Contains(all, "is too large to show in one Teams message, so it can't be answered here.") {
			t.Errorf("%s: %d inputs:\n%s", name, len(inputsOf(t, card)), all)
		}
		cs = append(cs, card)
	}
	if out, status := validate(t, writeMessages(t, t.TempDir(), "big", cs...)); status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects the biggest forms:\n%s", out)
	}
}

// TestElicitShortensInOrder: as a form's room shrinks, the descriptions
// give way first, then the names of choices; the card says which.
func TestElicitShortensInOrder(t *testing.T) {
	q := ticketQuestion(ElicitAsking)
	for i := range q.Form.Fields {
		q.Form.Fields[i].Description = strings.Repeat("A long description. ", 20)
	}
	whole := ElicitationCard(q, Options{})
	var said []string
	for size := whole.Size(); size > 2000; size -= 250 {
		card := ElicitationCard(q, Options{MaxSize: size})
		if card.Size() > size {
			t.Fatalf("MaxSize %d: %d UTF-16 code units", size, card.Size())
		}
		all := inspect(t, card).allText()
		i := strings.Index(all, "To fit in one message, ")
		if i < 0 {
			continue
		}
		line := all[i:]
		line = line[:strings.Index(line, ".")]
		if len(said) == 0 || said[len(said)-1] != line {
			said = append(said, line)
		}
	}
	want := []string{
		"To fit in one message, the fields' descriptions are shortened",
		"To fit in one message, the fields' descriptions are left out",
	}
	if len(said) < 2 || !slices.Equal(said[:2], want) {
		t.Errorf("as the room shrinks the card says:\n%s", strings.Join(said, "\n"))
	}
}

// TestElicitSaysWhose: in a group chat or a channel the card says whose
// answer it is and its notification line names them; in a personal chat
// it says neither.
func TestElicitSaysWhose(t *testing.T) {
	for _, q := range []Elicitation{ticketQuestion(ElicitAsking), pageQuestion(ElicitAsking, bankURL)} {
		shared := ElicitationCard(q, Options{Shared: true})
		if !slices.Contains(inspect(t, shared).texts, "Only Ada Lovelace can answer this.") || !strings.HasPrefix(shared.Summary, "Ada Lovelace, a question from ") {
			t.Errorf("%s shared: summary %q, texts %q", q.Mode, shared.Summary, inspect(t, shared).texts)
		}
		personal := ElicitationCard(q, Options{})
		if strings.Contains(inspect(t, personal).allText(), "Only ") || strings.Contains(personal.Summary, "Ada") {
			t.Errorf("%s personal: summary %q, texts %q", q.Mode, personal.Summary, inspect(t, personal).texts)
		}
		q.PersonName = " "
		if got := inspect(t, ElicitationCard(q, Options{Shared: true})).texts; !slices.Contains(got, elicitOnlyAsker) {
			t.Errorf("%s shared without a name: %q", q.Mode, got)
		}
	}
}

// TestElicitWaits: the card says how long the question waits and, with
// its deadline, until when: a DATE() and TIME() in the card, which Teams
// shows in the reader's zone, and the person's zone and locale in the
// fallback text.
func TestElicitWaits(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	card := ElicitationCard(ticketQuestion(ElicitAsking), Options{Location: berlin, Locale: "en-US"})
	const want = "The tool waits 5 minutes for your answer, until {{DATE(2026-12-02T12:05:00Z, SHORT)}} at {{TIME(2026-12-02T12:05:00Z)}}; after that it goes on as if you cancelled."
	if !slices.Contains(inspect(t, card).texts, want) {
		t.Errorf("texts %q", inspect(t, card).texts)
	}
	if !strings.Contains(card.FallbackText, "until Dec 2, 2026 1:05 PM CET;") {
		t.Errorf("fallback %q", card.FallbackText)
	}
	q := ticketQuestion(ElicitAsking)
	q.Deadline = time.Time{}
	if all := inspect(t, ElicitationCard(q, Options{})).allText(); !strings.Contains(all, "The tool waits 5 minutes for your answer; after that it goes on as if you cancelled.") {
		t.Errorf("without a deadline:\n%s", all)
	}
	q.Wait = 0
	if all := inspect(t, ElicitationCard(q, Options{})).allText(); strings.Contains(all, "waits") {
		t.Errorf("without a wait:\n%s", all)
	}
}

// hostileForm is a requested schema whose every text is hostile: names,
// titles, descriptions and choices.
func hostileForm(r *rand.Rand) elicit.Form {
	pick := func() string {
		if r.IntN(3) == 0 {
			return randomText(r, r.IntN(300))
		}
		return hostileNames[r.IntN(len(hostileNames))]
	}
	props := map[string]any{}
	for i := range 1 + r.IntN(8) {
		p := map[string]any{"title": pick(), "description": pick()}
		switch i % 4 {
		case 0:
			p["type"] = "string"
			p["format"] = []string{"", "email", "uri", "date", "date-time"}[r.IntN(5)]
		case 1:
			p["type"] = "number"
			p["minimum"] = -1.5
		case 2:
			var oneOf []map[string]string
			for j := range 1 + r.IntN(9) {
				oneOf = append(oneOf, map[string]string{"const": fmt.Sprintf("%d%s", j, pick()), "title": "t" + pick()})
			}
			p["oneOf"] = oneOf
		case 3:
			p["type"] = "boolean"
		}
		props[fmt.Sprintf("p%d %s", i, propertyName(pick()))] = p
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	return mustForm(string(b))
}

// propertyName keeps a property name within elicit's bounds.
func propertyName(s string) string {
	for len(s) > elicit.MaxName-4 {
		s = s[:len(s)-1]
	}
	return strings.ToValidUTF8(s, "")
}

// TestElicitHostile: whatever the server's texts, the person's name and
// what they entered hold, a question's card stays within a message, shows
// no live link, address or text function, keeps the server's texts out of
// markdown (every TextBlock holds our own words; the names of choices
// lose their link syntax), and leads nowhere but to the https address.
func TestElicitHostile(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pick := func() string {
		if r.IntN(3) == 0 {
			return randomText(r, r.IntN(3000))
		}
		return hostileNames[r.IntN(len(hostileNames))]
	}
	ours := []string{elicitDeclineOrCancel, "To fit in one message, ", "The tool waits "}
	var cs []Card
	for i := range 200 {
		q := Elicitation{
			ID: fmt.Sprintf("el-%d", i), Server: pick(), Tool: pick(), AgentName: pick(), PersonName: pick(),
			Mode: []string{elicit.ModeForm, elicit.ModeURL, "other"}[r.IntN(3)], Message: pick(),
			Form: hostileForm(r), URL: []string{bankURL, pick(), "https://evil.example/" + pick()}[r.IntN(3)],
			Values: map[string]string{}, Wait: time.Duration(r.IntN(4000)) * time.Second,
			State: ElicitState(r.IntN(8)),
		}
		for _, f := range q.Form.Fields {
			if r.IntN(2) == 0 {
				q.Values[f.Name] = pick()
				q.Problems = append(q.Problems, elicit.Problem{Field: f.Name, Message: pick()})
			}
		}
		card := ElicitationCard(q, Options{Shared: r.IntN(2) == 0, AgentName: pick()})
		name := fmt.Sprintf("%d (state %d, %s)", i, q.State, q.Mode)
		if size := card.Size(); size > MaxCardSize {
			t.Fatalf("%s: %d UTF-16 code units", name, size)
		}
		if card.Summary == "" || strings.Contains(card.Summary, "\n") || card.FallbackText == "" {
			t.Errorf("%s: summary %q, fallback %q", name, card.Summary, card.FallbackText)
		}
		in := inspect(t, card)
		shownText := strings.Join(append(in.texts, card.Summary, card.FallbackText), "\n")
		for _, cs := range find(decode(t, card), "Input.ChoiceSet") {
			for _, c := range cs["choices"].([]any) {
				shownText += "\n" + c.(map[string]any)["title"].(string)
			}
		}
		for _, bad := range []string{"\u202e", "\x00", "\r"} {
			if strings.Contains(shownText, bad) {
				t.Errorf("%s: the card shows %q", name, bad)
			}
		}
		checkShownNeutral(t, i, card, in.openURLs...)
		for _, u := range in.openURLs {
			if !strings.HasPrefix(u, "https://") || q.State != ElicitAccepted || q.Mode != elicit.ModeURL {
				t.Errorf("%s: a button to %q", name, u)
			}
		}
		for _, tb := range find(decode(t, card), "TextBlock") {
			s := tb["text"].(string)
			if !slices.ContainsFunc(ours, func(w string) bool { return strings.HasPrefix(s, w) }) {
				t.Errorf("%s: a TextBlock, read as markdown, holds %q", name, s)
			}
		}
		for _, cs := range find(decode(t, card), "Input.ChoiceSet") {
			for _, c := range cs["choices"].([]any) {
				if title := c.(map[string]any)["title"].(string); strings.Contains(title, "](") || title == "" {
					t.Errorf("%s: a choice named %q", name, title)
				}
			}
		}
		cs = append(cs, card)
	}
	if out, status := validate(t, writeMessages(t, t.TempDir(), "hostile", cs...)); status != 0 {
		t.Fatalf("the Adaptive Cards renderer rejects hostile question cards:\n%s", out)
	}
}

// TestRendererShowsElicitTextAsText: the official renderer shows a text
// function in a server's message, a field's name and description and the
// person's name as the text it is, and the card's own deadline as a time.
func TestRendererShowsElicitTextAsText(t *testing.T) {
	const fn = "{{DATE(2020-01-01T00:00:00Z, SHORT)}}"
	q := ticketQuestion(ElicitAsking)
	q.Message, q.PersonName = "Due "+fn+".", "Eve "+fn
	q.Form.Fields[0].Title, q.Form.Fields[0].Description = "Project "+fn, "Where "+fn
	got := shown(t, ElicitationCard(q, Options{Shared: true}))
	all := strings.ReplaceAll(strings.Join(got[0], "\n"), zwsp, "")
	for _, want := range []string{"Due " + fn + ".", "Only Eve " + fn + " can answer this.", "Project " + fn, "Where " + fn, "until Wed, Dec 2, 2026 at"} {
		if !strings.Contains(all, want) {
			t.Errorf("the renderer does not show %q; it shows:\n%s", want, all)
		}
	}
	if strings.Contains(all, "Jan 1, 2020") {
		t.Errorf("the renderer evaluated a function from outside:\n%s", all)
	}
}
