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

// label makes a name or message from a tool, a server or the agent fit one
// line of a TextRun: cleaned, on one line, at most max runes, and with
// nothing Teams would turn into a link or a date function.
func label(s string, max int) string {
	s = strings.Join(strings.Fields(clean(s)), " ")
	s = capRunes(s, max)
	return defuse(s)
}

// defuser breaks what Teams auto-links or formats in text: URLs (scheme
// "://" and "www."), e-mail addresses, and {{DATE()}}/{{TIME()}} functions.
// It is read-only after initialisation (a Replacer is safe for concurrent
// use).
var defuser = strings.NewReplacer(
	"://", ":"+zwsp+"//",
	"www.", "www"+zwsp+".",
	"WWW.", "WWW"+zwsp+".",
	"@", zwsp+"@",
	"{{", "{"+zwsp+"{",
)

// defuse applies defuser.
func defuse(s string) string { return defuser.Replace(s) }

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
// markdown stays (bold, italics, lists), but a link never hides its target:
// [label](url) becomes "label (url)", so a person sees where it leads before
// Teams' own link detection makes the address clickable. Headings, which
// Teams does not render, become bold lines.
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
	return strings.TrimSpace(s)
}

// oneLine is plain text for a summary or fallback: cleaned, on one line,
// at most max runes.
func oneLine(s string, max int) string {
	return capRunes(strings.Join(strings.Fields(clean(s)), " "), max)
}
