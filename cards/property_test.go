package cards

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"teamsbot/internal/netaddr"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// inspected is what a person could see and click in a card.
type inspected struct {
	texts    []string // TextBlock and TextRun texts, in order
	openURLs []string
	toggles  int
	raw      string
}

func inspect(t *testing.T, c Card) inspected {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	in := inspected{raw: string(b)}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			switch v["type"] {
			case "TextBlock", "TextRun":
				in.texts = append(in.texts, v["text"].(string))
			case "Action.OpenUrl":
				in.openURLs = append(in.openURLs, v["url"].(string))
			case "Action.ToggleVisibility":
				in.toggles++
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return in
}

func (in inspected) allText() string { return strings.Join(in.texts, "\n") }

// randomText mixes ASCII, markdown, accented letters, CJK, emoji outside the
// Basic Multilingual Plane, and control characters.
func randomText(r *rand.Rand, n int) string {
	pieces := []string{"word ", "**bold** ", "\n", "- item\n", "[link](https://x.example/a) ", "é", "漢字", "😀", "𝒳", "\u202e", "\x00", "\"quote\" ", "<b>", "{{DATE(2020-01-01T00:00:00Z)}}", "\\", "\t",
		"{", "www.x.example ", "<https://y.example> ", "a@b.example ", "{{TIME(2020-01-01T00:00:00Z)}}"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// propertyAnswers makes answers at the edges: huge text, many views, many
// notes, long names, non-BMP characters everywhere.
func propertyAnswers(n int) []Answer {
	r := rand.New(rand.NewPCG(1, 2))
	var out []Answer
	for i := range n {
		a := Answer{}
		switch i % 4 {
		case 0:
			a.Text = randomText(r, 200_000+r.IntN(200_000))
		case 1:
			a.Text = strings.Repeat("😀", 30_000)
		case 2:
			a.Text = randomText(r, 2_000)
		case 3:
			a.Text = ""
		}
		for j := range r.IntN(60) {
			v := view(fmt.Sprintf("v-%d-%d", i, j), randomText(r, r.IntN(300)), randomText(r, r.IntN(300)), randomText(r, r.IntN(500)))
			a.Views = append(a.Views, v)
		}
		for range r.IntN(200) {
			a.Notes = append(a.Notes, randomText(r, r.IntN(3_000)))
		}
		for range r.IntN(30) {
			a.Refusals = append(a.Refusals, Refusal{Server: randomText(r, 50), Tool: randomText(r, 50), Reason: []string{"mime", "scheme", "size", "read", "content", "??"}[r.IntN(6)], Ref: randomText(r, 100)})
		}
		for range r.IntN(30) {
			a.ToolErrors = append(a.ToolErrors, ToolError{Server: randomText(r, 50), Tool: randomText(r, 50), Message: randomText(r, 5_000)})
		}
		out = append(out, a)
	}
	return out
}

// TestAnswerCardsProperties checks, for hostile and oversized answers, that
// every card fits in one Teams message, that no view loses its block or its
// button, that cuts are marked, and that nothing but our view URLs becomes a
// button.
func TestAnswerCardsProperties(t *testing.T) {
	for i, a := range propertyAnswers(40) {
		for _, base := range []netaddr.Origin{httpsBase, httpBase} {
			t.Run(fmt.Sprintf("%d/%s", i, base.Scheme()), func(t *testing.T) {
				cs := AnswerCards(a, Options{PublicBaseURL: base, Now: now})
				var urls []string
				viewBlocks := 0
				for k, c := range cs {
					if size := c.Size(); size > MaxCardSize || size > SizeLimit {
						t.Fatalf("card %d is %d UTF-16 code units, limit %d", k, size, MaxCardSize)
					}
					if c.Summary == "" || c.FallbackText == "" {
						t.Errorf("card %d: empty summary or fallback text", k)
					}
					if !utf8.ValidString(c.Summary) || !utf8.ValidString(c.FallbackText) {
						t.Errorf("card %d: invalid UTF-8", k)
					}
					in := inspect(t, c)
					urls = append(urls, in.openURLs...)
					checkNeutral(t, k, c, a.Views, base)
					viewBlocks += strings.Count(in.raw, `"Interactive view from "`)
					for _, bad := range []string{"\u202e", `\u0000`} {
						if strings.Contains(in.raw, bad) {
							t.Errorf("card %d contains %q", k, bad)
						}
					}
					if k == 0 && len(a.Notes) > 0 && in.toggles != 1 {
						t.Errorf("first card has %d note toggles, want 1", in.toggles)
					}
				}
				if viewBlocks != len(a.Views) {
					t.Errorf("%d view blocks for %d views", viewBlocks, len(a.Views))
				}
				var want []string
				if base == httpsBase {
					for _, v := range a.Views {
						u, _ := ViewURL(base, v.ID)
						want = append(want, u)
					}
				}
				if strings.Join(urls, " ") != strings.Join(want, " ") {
					t.Errorf("Open buttons %q, want %q", urls, want)
				}
				first := inspect(t, cs[0]).allText()
				if len(a.Text) > 30_000 && !strings.Contains(first, Shortened) {
					t.Errorf("a %d-byte answer was cut without the %q mark", len(a.Text), Shortened)
				}
			})
		}
	}
}

// ownTimes are the card's own text functions: a view's expiry.
var ownTimes = regexp.MustCompile(`\{\{(?:DATE|TIME)\(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ(?:, SHORT)?\)\}\}`)

// checkNeutral fails when anything a person reads in card c (the texts of
// TextBlocks and TextRuns, button titles, the summary, the fallback text)
// holds a live link, e-mail address or text function that did not come
// from the card itself: every outside string takes the one rule of names.
// The card's own are the view addresses it builds and the expiry times.
func checkNeutral(t *testing.T, k int, c Card, views []View, base netaddr.Origin) {
	t.Helper()
	var own []string
	for _, v := range views {
		if u, ok := ViewURL(base, v.ID); ok {
			own = append(own, u)
		}
	}
	checkShownNeutral(t, k, c, own...)
}

// checkShownNeutral is checkNeutral for any card whose own addresses are
// own: they and the card's own times are all it may show live.
func checkShownNeutral(t *testing.T, k int, c Card, own ...string) {
	t.Helper()
	in := inspect(t, c)
	shown := append([]string{c.Summary, c.FallbackText}, in.texts...)
	var titles []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				titles = append(titles, title)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var doc any
	_ = json.Unmarshal([]byte(in.raw), &doc)
	walk(doc)
	shown = append(shown, titles...)
	for _, s := range shown {
		for _, u := range own {
			s = strings.ReplaceAll(s, u, "")
		}
		s = ownTimes.ReplaceAllString(s, "")
		for _, live := range []string{"{{", "://", "www.", "WWW."} {
			if strings.Contains(s, live) {
				t.Fatalf("card %d shows a live %q: %q", k, live, s)
			}
		}
		if i := strings.Index(strings.ReplaceAll(s, zwsp+"@", ""), "@"); i >= 0 {
			t.Fatalf("card %d shows a live e-mail address: %q", k, s)
		}
	}
}

// TestShortensNotesBeforeText: with a long answer and many notes, notes give
// way first; the text keeps as much as fits and says it was shortened.
func TestShortensNotesBeforeText(t *testing.T) {
	var notes []string
	for i := range 300 {
		notes = append(notes, fmt.Sprintf("Note %d: %s", i, strings.Repeat("details ", 60)))
	}
	a := Answer{Text: strings.Repeat("The answer goes on. ", 3_000), Views: twoViews(), Notes: notes}
	cs := AnswerCards(a, Options{PublicBaseURL: httpsBase, Now: now})
	if len(cs) != 1 {
		t.Fatalf("%d cards, want 1", len(cs))
	}
	in := inspect(t, cs[0])
	all := in.allText()
	if !strings.Contains(all, "\n\n"+Shortened) {
		t.Error("answer text not marked as shortened")
	}
	if !strings.Contains(all, Shortened+": 295 more notes not shown.") {
		t.Errorf("expected 5 notes kept and the rest counted; got texts %q", in.texts[len(in.texts)-3:])
	}
	if len(in.openURLs) != 2 {
		t.Errorf("Open buttons %q, want 2", in.openURLs)
	}
	if cs[0].Size() > MaxCardSize {
		t.Errorf("card is %d UTF-16 code units", cs[0].Size())
	}
	// The text keeps most of the room: well over half of the card.
	if n := len(in.texts[0]); n < MaxCardSize/2 {
		t.Errorf("only %d bytes of answer text kept", n)
	}
}

// TestSmallAnswerIsNotShortened: an ordinary answer comes through whole.
func TestSmallAnswerIsNotShortened(t *testing.T) {
	cs := AnswerCards(Answer{Text: answerText, Views: twoViews(), Notes: []string{"a", "b"}}, Options{PublicBaseURL: httpsBase})
	if len(cs) != 1 {
		t.Fatalf("%d cards", len(cs))
	}
	if all := inspect(t, cs[0]).raw; strings.Contains(all, "shortened") {
		t.Errorf("small answer marked as shortened: %s", all)
	}
}

// TestManyViewsContinue: views that do not fit in one message continue in
// the next, each with its button, in order, and the first card says so.
func TestManyViewsContinue(t *testing.T) {
	vs := manyViews(100)
	cs := AnswerCards(Answer{Text: "All of them:", Views: vs}, Options{PublicBaseURL: httpsBase, Now: now})
	if len(cs) < 2 {
		t.Fatalf("%d cards for 100 views", len(cs))
	}
	var urls []string
	for _, c := range cs {
		urls = append(urls, inspect(t, c).openURLs...)
	}
	for i, v := range vs {
		want, _ := ViewURL(httpsBase, v.ID)
		if i >= len(urls) || urls[i] != want {
			t.Fatalf("button %d is %q, want %q", i, urls[min(i, len(urls)-1)], want)
		}
	}
	if !strings.Contains(inspect(t, cs[0]).allText(), "follow in the next message") {
		t.Error("first card does not say more views follow")
	}
	if !strings.HasPrefix(cs[1].Summary, "More views (") {
		t.Errorf("continuation summary %q", cs[1].Summary)
	}
}

// TestNonBMPSize: the size counts UTF-16 code units, two for each character
// outside the Basic Multilingual Plane.
func TestNonBMPSize(t *testing.T) {
	a := newCard("s", "😀")
	b := newCard("s", "a")
	if d := a.Size() - b.Size(); d != 1 {
		t.Errorf("😀 costs %d more code units than a, want 1 more (2 in all)", d)
	}
	if got := utf16Len([]byte("a😀é漢")); got != 5 {
		t.Errorf("utf16Len = %d, want 5", got)
	}
}

// TestViewWithoutExpiry: a view with no times still gets its block.
func TestViewWithoutExpiry(t *testing.T) {
	v := View{ID: "v1", Server: "s", Tool: "t"}
	in := inspect(t, AnswerCards(Answer{Views: []View{v}}, Options{PublicBaseURL: httpsBase, Now: now})[0])
	if len(in.openURLs) != 1 || strings.Contains(in.allText(), "{{DATE") {
		t.Errorf("got %q / %q", in.openURLs, in.texts)
	}
}

// TestLongTextAndManyViews: the answer keeps half a card of text; the views
// that do not fit beside it continue in the next messages.
func TestLongTextAndManyViews(t *testing.T) {
	cs := AnswerCards(Answer{Text: strings.Repeat("A long answer. ", 10_000), Views: manyViews(60)}, Options{PublicBaseURL: httpsBase, Now: now})
	first := inspect(t, cs[0])
	if n := len(first.texts[0]); n < MaxCardSize/2 {
		t.Errorf("first card kept %d bytes of text", n)
	}
	if !strings.HasSuffix(first.texts[0], Shortened) {
		t.Error("text not marked as shortened")
	}
	buttons := 0
	for _, c := range cs {
		if c.Size() > MaxCardSize {
			t.Errorf("card of %d code units", c.Size())
		}
		buttons += len(inspect(t, c).openURLs)
	}
	if buttons != 60 {
		t.Errorf("%d Open buttons for 60 views", buttons)
	}
}

// utf16Bytes is the size of b encoded as UTF-16, which is how Teams measures
// a message ("the entire message payload encoded as UTF-16", Format your bot
// messages, Microsoft Teams platform documentation). It is computed here
// independently of Card.Size.
func utf16Bytes(b []byte) int { return 2 * len(utf16.Encode([]rune(string(b)))) }

// TestMessagesFitTeamsLimit: every message the bot sends, a card inside a
// Bot Framework activity (addresses, ids, summary), stays within 28 KB
// encoded as UTF-16, for the golden answers and the hostile, oversized ones.
func TestMessagesFitTeamsLimit(t *testing.T) {
	var all [][]Card
	for _, cs := range goldenCases() {
		all = append(all, cs)
	}
	for _, a := range propertyAnswers(40) {
		all = append(all, AnswerCards(a, Options{PublicBaseURL: httpsBase, Now: now}))
	}
	for _, cs := range all {
		for _, c := range cs {
			// The envelope the bot puts around a card, with ids as long as
			// Teams makes them.
			activity := map[string]any{
				"type":         "message",
				"from":         map[string]any{"id": "28:" + strings.Repeat("b", 36), "name": "TicketIQ"},
				"recipient":    map[string]any{"id": "29:" + strings.Repeat("u", 120), "name": "Ada Lovelace"},
				"conversation": map[string]any{"id": "19:" + strings.Repeat("c", 60) + "@thread.tacv2;messageid=1700000000000"},
				"replyToId":    "1700000000000",
				"summary":      c.Summary,
				"attachments":  []any{c.Attachment()},
			}
			b, err := json.Marshal(activity)
			if err != nil {
				t.Fatal(err)
			}
			if n := utf16Bytes(b); n > 28*1024 {
				t.Fatalf("a message of %d bytes in UTF-16, over Teams' 28 KB (summary %q)", n, c.Summary)
			}
		}
	}
}
