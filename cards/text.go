package cards

import (
	"regexp"
	"strings"
	"teamsbot/internal/textclip"
	"unicode"
	"unicode/utf8"
)

// zwsp (zero-width space) breaks patterns that Teams would otherwise turn
// into links or date functions, without changing what a person reads.
const zwsp = "\u200b"

// Caps on what one name or message may take, in runes. They keep one view
// block small enough that many fit in one message, whatever a server sends.
const (
	maxTitle    = 120
	maxName     = 80
	maxMessage  = 300
	maxNote     = 400
	maxQuestion = 200
	maxSummary  = 150
	maxFallback = 400
)

// clean makes s safe to show at all: valid UTF-8, no control characters
// other than newline and tab, and no bidirectional overrides, which could
// make a name read differently from what it is.
func clean(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n' || r == '\t':
			return r
		case r == '\r':
			return -1
		case unicode.IsControl(r):
			return -1
		case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
			return -1
		}
		return r
	}, s)
}

// Text from outside (names and messages from tools, servers and the
// agent, the model's answer, a trigger's name, the person's question)
// enters a card through one of label, answerMarkdown and oneLine, and each
// of them ends with defuse: one rule for all of it, whatever becomes of it
// (a TextRun, a TextBlock read as markdown, a button's title, the summary
// or the fallback text). Only our own words and what we build (cardTime's
// functions, a view's address) reach a card without it.

// label makes a name or message from a tool, a server or the agent fit one
// line of a TextRun: cleaned, on one line, at most max runes, and with
// nothing Teams would turn into a link or a date function.
func label(s string, max int) string {
	s = strings.Join(strings.Fields(clean(s)), " ")
	s = capRunes(s, max)
	return defuse(s)
}

// defuser breaks what Teams turns into a link in text: URLs (scheme "://"
// and "www.") and e-mail addresses. A zero-width space already in front of
// "@" is kept as it is, so that defusing twice changes nothing. It is
// read-only after initialisation (a Replacer is safe for concurrent use).
var defuser = strings.NewReplacer(
	"://", ":"+zwsp+"//",
	"www.", "www"+zwsp+".",
	"WWW.", "WWW"+zwsp+".",
	zwsp+"@", zwsp+"@",
	"@", zwsp+"@",
)

// defuse applies defuser, and breaks every "{{" so that no Adaptive Card
// text function ({{DATE()}}, {{TIME()}}), which Teams evaluates in every
// TextBlock and TextRun, is left: a zero-width space goes between any two
// braces in a row. Replacing "{{" alone would not do: in "{{{DATE(" it
// leaves "{" + zwsp + "{{DATE(", which still is one.
func defuse(s string) string {
	s = defuser.Replace(s)
	if !strings.Contains(s, "{{") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		if s[i] == '{' && i+1 < len(s) && s[i+1] == '{' {
			b.WriteString(zwsp)
		}
	}
	return b.String()
}

// capRunes cuts s to at most max runes, ending with "…" when cut.
// It reads no further than it needs, so it is cheap on long text.
func capRunes(s string, max int) string {
	i, n, cut := 0, 0, len(s)
	for i < len(s) {
		if n == max-1 {
			cut = i
		}
		if n == max {
			return strings.TrimRightFunc(s[:cut], unicode.IsSpace) + "…"
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s
}

// cutBytes returns the longest prefix of s of at most n bytes that ends on a
// rune boundary, preferring to end at a space or line break near the cut so
// a word is not split.
func cutBytes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	p := textclip.Prefix(s, n)
	if i := strings.LastIndexAny(p, " \n\t"); i >= 0 && len(p)-i <= 40 {
		p = p[:i]
	}
	return strings.TrimRightFunc(p, unicode.IsSpace)
}

// Markdown links and images: [label](target "title") and ![alt](target).
var (
	mdLink     = regexp.MustCompile(`!?\[([^\[\]\n]*)\]\(\s*<?([^()<>\s]*)>?(?:\s+"[^"\n]*")?\s*\)`)
	mdAutolink = regexp.MustCompile(`<((?:[A-Za-z][A-Za-z0-9+.-]*:|www\.)[^<>\s]*)>`)
	mdHeading  = regexp.MustCompile(`(?m)^[ ]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$`)
)

// answerMarkdown prepares the model's answer for a TextBlock. The model's
// markdown stays (bold, italics, lists), but links follow the rule for
// names: [label](url) becomes "label (url)" and <url> its address, and
// defuse then keeps every address from becoming a link, so the only thing
// a person can click in an answer card is its Open buttons. Text functions
// ({{DATE()}}) from a tool or the model stay text. Headings, which Teams
// does not render, become bold lines.
func answerMarkdown(s string) string {
	s = clean(s)
	s = mdLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := mdLink.FindStringSubmatch(m)
		lbl, target := strings.TrimSpace(sub[1]), sub[2]
		switch {
		case target == "":
			return lbl
		case lbl == "" || lbl == target:
			return target
		}
		return lbl + " (" + target + ")"
	})
	s = mdAutolink.ReplaceAllString(s, "$1")
	// Whatever link syntax is left (nested brackets, reference links) is
	// broken apart so that it shows as text.
	s = strings.ReplaceAll(s, "](", "] (")
	s = strings.ReplaceAll(s, "]:", "] :")
	s = mdHeading.ReplaceAllString(s, "**$1**")
	return defuse(strings.TrimSpace(s))
}

// oneLine is plain text for a summary or fallback: cleaned, on one line,
// at most max runes, defused like a label.
func oneLine(s string, max int) string {
	return defuse(capRunes(strings.Join(strings.Fields(clean(s)), " "), max))
}
