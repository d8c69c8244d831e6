package cards

import (
	"encoding/json"
	"strings"
	"teamsbot/internal/netaddr"
	"testing"
	"time"
)

// decode returns the card JSON as Teams receives it.
func decode(t *testing.T, c Card) map[string]any {
	t.Helper()
	b, err := json.Marshal(c.Attachment())
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		ContentType string         `json:"contentType"`
		Content     map[string]any `json:"content"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.ContentType != "application/vnd.microsoft.card.adaptive" {
		t.Fatalf("content type %q", a.ContentType)
	}
	return a.Content
}

// find returns every object in v of the given type, in document order.
func find(v any, typ string) []map[string]any {
	var out []map[string]any
	switch v := v.(type) {
	case map[string]any:
		if v["type"] == typ {
			out = append(out, v)
		}
		for _, k := range []string{"body", "items", "inlines", "actions", "columns"} {
			out = append(out, find(v[k], typ)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, find(x, typ)...)
		}
	}
	return out
}

// texts returns the text of every TextBlock and TextRun of v.
func texts(v any) string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["type"] == "TextBlock" || v["type"] == "TextRun" {
				out = append(out, v["text"].(string))
			}
			for _, k := range []string{"body", "items", "inlines", "actions", "columns"} {
				walk(v[k])
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// TestEveryCardIsATeamsCard: version 1.2 (what every Teams client renders,
// mobile too), no positive or destructive button style (Teams shows none), full width, fallback text and a
// summary, within the size limit.
func TestEveryCardIsATeamsCard(t *testing.T) {
	for name, cs := range goldenCases() {
		for i, c := range cs {
			doc := decode(t, c)
			if doc["type"] != "AdaptiveCard" || doc["version"] != "1.2" {
				t.Errorf("%s/%d: type %v version %v", name, i, doc["type"], doc["version"])
			}
			for _, a := range find(doc, "Action.OpenUrl") {
				if _, styled := a["style"]; styled {
					t.Errorf("%s/%d: a button has the style %v, which Teams does not show", name, i, a["style"])
				}
			}
			if w, _ := doc["msteams"].(map[string]any); w["width"] != "Full" {
				t.Errorf("%s/%d: msteams %v", name, i, doc["msteams"])
			}
			if fb, _ := doc["fallbackText"].(string); strings.TrimSpace(fb) == "" {
				t.Errorf("%s/%d: no fallbackText", name, i)
			}
			if strings.TrimSpace(c.Summary) == "" || strings.Contains(c.Summary, "\n") {
				t.Errorf("%s/%d: summary %q", name, i, c.Summary)
			}
			if _, ok := doc["summary"]; ok {
				t.Errorf("%s/%d: summary belongs on the activity, not in the card", name, i)
			}
			if c.Size() > MaxCardSize {
				t.Errorf("%s/%d: %d UTF-16 code units", name, i, c.Size())
			}
		}
	}
}

// TestViewBlockHTTPS: each view is named (title or tool name, server), says
// until when it can be opened, and has an Open button to its page whose
// title names the view, so that a screen reader tells the buttons apart.
func TestViewBlockHTTPS(t *testing.T) {
	doc := decode(t, AnswerCards(Answer{Text: answerText, Views: twoViews()}, Options{PublicBaseURL: netaddr.MustParseOrigin("HTTPS://Teams.Example.com/"), Now: now})[0])
	blocks := find(doc, "Container")
	if len(blocks) != 2 {
		t.Fatalf("%d containers, want one per view", len(blocks))
	}
	for i, want := range []struct{ name, url string }{
		{"Tickets by week", "https://teams.example.com/mcp-apps/v-7f3a"},
		{"ticket_form", "https://teams.example.com/mcp-apps/v-91bc"},
	} {
		txt := texts(blocks[i])
		for _, s := range []string{want.name, "crm", "Can be opened until {{DATE(2026-12-09T12:00:00Z, SHORT)}} at {{TIME(2026-12-09T12:00:00Z)}}."} {
			if !strings.Contains(txt, s) {
				t.Errorf("view %d block lacks %q:\n%s", i, s, txt)
			}
		}
		open := find(blocks[i], "Action.OpenUrl")
		if len(open) != 1 || open[0]["title"] != "Open "+want.name || open[0]["url"] != want.url {
			t.Errorf("view %d buttons %v, want \"Open %s\" to %s", i, open, want.name, want.url)
		}
		if strings.Contains(txt, "can open this view") {
			t.Errorf("view %d of a personal chat says who may open it:\n%s", i, txt)
		}
	}
	if !strings.Contains(texts(doc), "**Contoso**") {
		t.Error("answer text lost its markdown")
	}
}

// TestViewBlockWithoutHTTPS: with an http:// (or no) base URL there is no
// button anywhere, and each block says, as the fallback does, that the view
// can't be opened from Teams until an admin gives the service an https
// address: there is no other way to it for a person in Teams.
func TestViewBlockWithoutHTTPS(t *testing.T) {
	for _, base := range []netaddr.Origin{netaddr.MustParseOrigin("http://localhost:3978"), netaddr.MustParseOrigin("HTTP://127.0.0.1:3978"), {}} {
		cs := AnswerCards(Answer{Text: answerText, Views: twoViews()}, Options{PublicBaseURL: base, Now: now})
		doc := decode(t, cs[0])
		raw, _ := json.Marshal(doc)
		if strings.Contains(string(raw), "Action.OpenUrl") || strings.Contains(string(raw), "/mcp-apps/") {
			t.Errorf("base %q: a button or view address in %s", base, raw)
		}
		for i, b := range find(doc, "Container") {
			if txt := texts(b); !strings.Contains(txt, "can't be opened from Teams yet") || !strings.Contains(txt, "Ask your admin to give this service an https address") {
				t.Errorf("base %q: view %d block does not say how the view can be opened: %s", base, i, txt)
			}
		}
		if fb := cs[0].FallbackText; !strings.Contains(fb, "can't be opened from Teams until your admin gives this service an https address") || strings.Contains(fb, "console") {
			t.Errorf("base %q: fallback %q", base, cs[0].FallbackText)
		}
	}
}

// TestExpiredView: a view past its expiry says so and has no button.
func TestExpiredView(t *testing.T) {
	doc := decode(t, AnswerCards(Answer{Views: twoViews()[:1]}, Options{PublicBaseURL: httpsBase, Now: now.Add(7 * 24 * 3600e9)})[0])
	if len(find(doc, "Action.OpenUrl")) != 0 || !strings.Contains(texts(doc), "can no longer be opened") {
		t.Errorf("expired view: %s", texts(doc))
	}
}

// TestRefusedViewsReadable: each refused view is named with a reason a
// person understands.
func TestRefusedViewsReadable(t *testing.T) {
	want := map[string]string{
		"mime":    "the server sent something that is not an MCP App view",
		"scheme":  "the server gave the view an address that views may not have",
		"size":    "the view is too large to show",
		"read":    "the view could not be read from the server",
		"content": "the server sent a view with no usable content",
		"other":   "the view was refused",
	}
	var rs []Refusal
	for reason := range want {
		rs = append(rs, Refusal{Server: "srv-" + reason, Tool: "tool-" + reason, Reason: reason})
	}
	doc := decode(t, AnswerCards(Answer{Text: "x", Refusals: rs}, Options{PublicBaseURL: httpsBase})[0])
	boxes := find(doc, "Container")
	if len(boxes) != 1 || boxes[0]["style"] != "warning" {
		t.Fatalf("refusals: %v", boxes)
	}
	txt := texts(boxes[0])
	for reason, sentence := range want {
		if !strings.Contains(txt, "tool-"+reason+"\n from \nsrv-"+reason+"\n: "+sentence+".") {
			t.Errorf("no line for %s:\n%s", reason, txt)
		}
	}
	if !strings.Contains(txt, "6 views could not be shown") {
		t.Errorf("no count:\n%s", txt)
	}
}

// TestToolErrorShownAsError: a failed tool call is shown in attention
// colours, named, with its message.
func TestToolErrorShownAsError(t *testing.T) {
	doc := decode(t, AnswerCards(Answer{Text: "x", ToolErrors: []ToolError{{Server: "crm", Tool: "lookup", Message: "timeout"}}}, Options{})[0])
	boxes := find(doc, "Container")
	if len(boxes) != 1 || boxes[0]["style"] != "attention" {
		t.Fatalf("tool error: %v", boxes)
	}
	runs := find(boxes[0], "TextRun")
	last := runs[len(runs)-1]
	if last["text"] != ": timeout" || last["color"] != "Attention" {
		t.Errorf("message run %v", last)
	}
	if !strings.Contains(texts(boxes[0]), "1 tool call failed\nlookup\n from \ncrm") {
		t.Errorf("texts:\n%s", texts(boxes[0]))
	}
}

// TestNotesFolded: run notes sit in a hidden container that a toggle shows.
func TestNotesFolded(t *testing.T) {
	doc := decode(t, AnswerCards(Answer{Text: "x", Notes: []string{"first note", " ", "second note"}}, Options{})[0])
	toggles := find(doc, "Action.ToggleVisibility")
	if len(toggles) != 1 || toggles[0]["title"] != "Run notes (2)" {
		t.Fatalf("toggles %v", toggles)
	}
	target := toggles[0]["targetElements"].([]any)[0]
	var hidden map[string]any
	for _, c := range find(doc, "Container") {
		if c["id"] == target {
			hidden = c
		}
	}
	if hidden == nil || hidden["isVisible"] != false {
		t.Fatalf("toggle target %v: %v", target, hidden)
	}
	if got := texts(hidden); got != "• first note\n• second note" {
		t.Errorf("notes %q", got)
	}
}

// TestHostileNamesStayText: markdown, links and date functions in a tool's
// title, a server's name, a tool error or the answer text never become
// markup, links, evaluated functions or buttons: the answer text takes the
// names' rule. (View HTML, arguments and results cannot reach a card at
// all: View does not carry them.)
func TestHostileNamesStayText(t *testing.T) {
	v := view("v1", "[srv](https://evil.example)", "t", "**[Click](https://evil.example/login)** {{DATE(2020-01-01T00:00:00Z)}}")
	a := Answer{
		Text:       "[ok](https://evil.example/a) {{DATE(2026-01-01T00:00:00Z, SHORT)}}",
		Views:      []View{v},
		ToolErrors: []ToolError{{Server: "s", Tool: "[x](https://evil.example)", Message: "go to www.evil.example"}},
	}
	doc := decode(t, AnswerCards(a, Options{PublicBaseURL: httpsBase, Now: now})[0])
	for _, tb := range find(doc, "TextBlock") {
		s := tb["text"].(string)
		if strings.Contains(s, "](") || strings.Contains(s, "evil.example/login") || strings.Contains(s, "{{DATE(2020") ||
			strings.Contains(s, "://") || strings.Contains(s, "{{DATE(2026-01-01") {
			t.Errorf("TextBlock (read as markdown) carries hostile text: %q", s)
		}
	}
	for _, tr := range find(doc, "TextRun") {
		s := tr["text"].(string)
		if strings.Contains(s, "://") || strings.Contains(s, "www.") || strings.Contains(s, "{{") {
			t.Errorf("TextRun not defused: %q", s)
		}
	}
	for _, o := range find(doc, "Action.OpenUrl") {
		if o["url"] != "https://teams.example.com/mcp-apps/v1" {
			t.Errorf("button to %v", o["url"])
		}
	}
	if got := texts(find(doc, "TextBlock")[0]); got != "ok (https:"+zwsp+"//evil.example/a) {"+zwsp+"{DATE(2026-01-01T00:00:00Z, SHORT)}}" {
		t.Errorf("answer link shown as %q", got)
	}
}

// TestWelcome says what the bot does, how to ask, that views open in the
// browser, and names /tools.
func TestWelcome(t *testing.T) {
	c := Welcome(Options{PublicBaseURL: httpsBase, AgentName: "Help [desk](https://evil.example)"})
	txt := texts(decode(t, c))
	for _, s := range []string{"I answer questions", "How to ask", "**Open** button", "in your browser", "/tools", "7 days", "Help [desk](https:" + zwsp + "//evil.example)"} {
		if !strings.Contains(txt, s) {
			t.Errorf("welcome lacks %q:\n%s", s, txt)
		}
	}
	if !strings.Contains(c.Summary, "/tools") || !strings.Contains(c.FallbackText, "/tools") {
		t.Errorf("summary %q fallback %q", c.Summary, c.FallbackText)
	}
	console := texts(decode(t, Welcome(Options{PublicBaseURL: httpBase})))
	if !strings.Contains(console, "can't be opened from Teams yet") || !strings.Contains(console, "https address") ||
		strings.Contains(console, "Open** button") || strings.Contains(console, "console") || !strings.Contains(console, "Assistant") {
		t.Errorf("welcome without https:\n%s", console)
	}
}

// TestWorking repeats the question, shortened, as plain text.
func TestWorking(t *testing.T) {
	q := strings.Repeat("why is the **sky** blue ", 30)
	c := Working(q)
	txt := texts(decode(t, c))
	if !strings.Contains(txt, "Working on: ") || !strings.Contains(txt, "“why is the **sky** blue") || !strings.HasSuffix(strings.SplitN(txt, "\n", 4)[1], "…”") {
		t.Errorf("working card:\n%s", txt)
	}
	if len([]rune(c.Summary)) > maxSummary || !strings.HasPrefix(c.Summary, "Working on: why is") {
		t.Errorf("summary %q", c.Summary)
	}
	if !strings.Contains(texts(decode(t, Working("  "))), "Working on it") {
		t.Error("empty question")
	}
}

// TestMissingIdentity politely refuses a message without tenant or user id.
func TestMissingIdentity(t *testing.T) {
	c := MissingIdentity()
	txt := texts(decode(t, c))
	for _, s := range []string{"Sorry", "tenant", "user id", "work or school account"} {
		if !strings.Contains(txt, s) {
			t.Errorf("refusal lacks %q:\n%s", s, txt)
		}
	}
}

// TestRunFailed shows a generic error with a reference, in attention colours.
func TestRunFailed(t *testing.T) {
	doc := decode(t, RunFailed("run-42"))
	boxes := find(doc, "Container")
	if len(boxes) != 1 || boxes[0]["style"] != "attention" {
		t.Fatalf("error card: %v", boxes)
	}
	if txt := texts(doc); !strings.Contains(txt, "Sorry, something went wrong") || !strings.Contains(txt, "run-42") {
		t.Errorf("error card:\n%s", txt)
	}
	if strings.Contains(texts(decode(t, RunFailed(""))), "reference") {
		t.Error("empty reference still mentioned")
	}
}

// TestFallbackTimesInLocation: fallback text writes times in the given zone;
// the card itself leaves that to Teams' DATE()/TIME().
func TestFallbackTimesInLocation(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	c := AnswerCards(Answer{Views: twoViews()[:1]}, Options{PublicBaseURL: httpsBase, Location: berlin})[0]
	if !strings.Contains(c.FallbackText, "open until 9 Dec 2026 13:00 CET") {
		t.Errorf("fallback %q", c.FallbackText)
	}
	if !strings.Contains(texts(decode(t, c)), "{{DATE(2026-12-09T12:00:00Z, SHORT)}}") {
		t.Error("card time is not in UTC for DATE()")
	}
}

// TestSharedAnswerSaysWhoMayOpen: in a group chat or a channel, where
// everyone sees the Open button, each view's block names the one person
// who may open it; an expired view says nothing of the kind.
func TestSharedAnswerSaysWhoMayOpen(t *testing.T) {
	for owner, want := range map[string]string{
		"Ada Lovelace":             "Only Ada Lovelace can open this view.",
		"":                         "Only the person who asked can open this view.",
		"Eve **www.evil.example**": "Only " + label("Eve **www.evil.example**", maxName) + " can open this view.",
	} {
		doc := decode(t, AnswerCards(Answer{Text: answerText, Views: twoViews()}, Options{PublicBaseURL: httpsBase, Now: now, Shared: true, Owner: owner})[0])
		blocks := find(doc, "Container")
		for i := range blocks {
			if txt := strings.ReplaceAll(texts(blocks[i]), "\n", ""); !strings.Contains(txt, want) {
				t.Errorf("owner %q, view %d block:\n%s\nwant %q", owner, i, txt, want)
			}
		}
	}
	expired := decode(t, AnswerCards(Answer{Text: answerText, Views: twoViews()}, Options{PublicBaseURL: httpsBase, Now: now.Add(8 * 24 * time.Hour), Shared: true, Owner: "Ada"})[0])
	if strings.Contains(texts(expired), "can open this view") {
		t.Errorf("an expired view says who may open it:\n%s", texts(expired))
	}
}

// A cut right after a list item's marker drops the marker: Teams would
// show an empty numbered item before "…(shortened)".
func TestCutLeavesNoEmptyListItem(t *testing.T) {
	for _, text := range []string{"1. one\n2. two\n3. three", "- one\n- two\n- three"} {
		p := prepare(Answer{Text: text}, Options{})
		cut := strings.LastIndexByte(p.text, '\n') + 3 // just after "3." or "- "
		got := p.shownText(cut)
		if !strings.HasSuffix(got, "two\n\n"+Shortened) {
			t.Errorf("%q cut at %d = %q, want it to end with the second item and the mark", text, cut, got)
		}
	}
}
