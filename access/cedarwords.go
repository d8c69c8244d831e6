package access

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cedar-policy/cedar-go"
)

// cedar-go's parse errors are plain strings of two shapes, with the
// position as "<input>:line:column":
//
//	parser error: parse error at <input>:3:18 ")": exact got resource want ,
//	parser error: <input>:3:9: literal not terminated
//
// and a few (a whole number out of range, an escape that does not decode)
// carry no position at all. The first shape names the token the parser
// was looking at, which for most faults is the one after the token at
// fault.
var (
	parsePosRE = regexp.MustCompile(`^parse error at <input>:(\d+):(\d+) "(?:[^"\\]|\\.)*": (.*)$`)
	scanPosRE  = regexp.MustCompile(`^<input>:(\d+):(\d+): (.*)$`)
)

// splitParseError returns the position cedar-go gave (0 when none) and the
// message without it.
func splitParseError(err error) (line, col int, msg string) {
	msg = strings.TrimPrefix(err.Error(), "parser error: ")
	m := parsePosRE.FindStringSubmatch(msg)
	if m == nil {
		m = scanPosRE.FindStringSubmatch(msg)
	}
	if m == nil {
		return 0, 0, msg
	}
	line, _ = strconv.Atoi(m[1])
	col, _ = strconv.Atoi(m[2])
	return line, col, m[3]
}

// parseError turns cedar-go's parse error into a *PolicyError that says in
// plain words what was expected and what was found, at the token at fault.
// The text has passed checkPolicyLimits, so cutting it into tokens again
// is cheap.
func parseError(text string, err error) *PolicyError {
	raw := strings.TrimPrefix(err.Error(), "parser error: ")
	if m := scanPosRE.FindStringSubmatch(raw); m != nil {
		// The scanner gives the start of the token it could not read,
		// and no line at all for a bad character in some places: such a
		// character is found here.
		line, _ := strconv.Atoi(m[1])
		col, _ := strconv.Atoi(m[2])
		off := -1
		switch m[3] {
		case "invalid UTF-8 encoding":
			off = badUTF8(text)
		case "invalid character NUL":
			off = strings.IndexByte(text, 0)
		}
		if off >= 0 {
			line, col = positionAt(text, off)
		}
		if line == 0 {
			col = 0
		}
		return &PolicyError{Line: line, Column: col, Msg: scanWords(m[3])}
	}
	line, col, msg := splitParseError(err)
	if line == 0 {
		return unplacedError(text, msg)
	}
	// The tokens up to the one cedar-go names, or to the end of the text;
	// counted first, so that they are kept in one allocation.
	upTo := func(yield func(policyToken) bool) {
		for t := range policyTokens(text) {
			if !yield(t) || t.line > line || (t.line == line && t.col >= col) {
				return
			}
		}
	}
	n := 0
	for range upTo {
		n++
	}
	toks := make([]policyToken, 0, n)
	for t := range upTo {
		toks = append(toks, t)
	}
	at := len(toks)
	if last := len(toks) - 1; last >= 0 && toks[last].line == line && toks[last].col == col {
		at = last
	}
	fault, words := faultWords(msg, toks, at)
	pe := &PolicyError{Msg: words}
	switch {
	case fault < len(toks):
		pe.Line, pe.Column = toks[fault].line, toks[fault].col
	case len(toks) > 0:
		// The end of the text: just after its last token.
		pe.Line, pe.Column = toks[len(toks)-1].end()
	default:
		pe.Line, pe.Column = line, col
	}
	return pe
}

// Patterns of cedar-go's parser messages (internal/parser/cedar_unmarshal.go).
var (
	exactRE     = regexp.MustCompile(`^exact got (.*) want (.*)$`)
	listRE      = regexp.MustCompile(`^got (.*) want ,$`)
	effectRE    = regexp.MustCompile(`^unexpected effect: (.*)$`)
	dupAnnotRE  = regexp.MustCompile(`^duplicate annotation: @(.*)$`)
	dupKeyRE    = regexp.MustCompile(`^duplicate key: (.*)$`)
	notFuncRE   = regexp.MustCompile("^`(.*)` is not a function$")
	isMethodRE  = regexp.MustCompile("^`(.*)` is a method, not a function$")
	notMethodRE = regexp.MustCompile("^`(.*)` is not a method$")
	isFuncRE    = regexp.MustCompile("^`(.*)` is a function, not a method$")
	argsRE      = regexp.MustCompile(`^(\w+) expects (no arguments|one argument)$`)
)

// faultWords finds the token at fault for msg, given the index of the
// token cedar-go named (len(toks) for the end of the text), and says in
// words what was wrong there.
func faultWords(msg string, toks []policyToken, at int) (int, string) {
	// before is the token the parser had just read when it failed: most
	// messages are about it.
	before := max(at-1, 0)
	text := func(i int) string {
		if i < len(toks) {
			return toks[i].text
		}
		return ""
	}
	// back finds the last token up to at that is name (quoted or not).
	back := func(name string) int {
		for i := min(at, len(toks)-1); i >= 0; i-- {
			if toks[i].text == name || toks[i].text == strconv.Quote(name) {
				return i
			}
		}
		return before
	}
	if m := exactRE.FindStringSubmatch(msg); m != nil {
		got, want := m[1], m[2]
		fault := at
		switch {
		case got == "":
			fault = len(toks)
		case text(before) == got:
			fault = before
		}
		return fault, expectedWords(want) + "; " + found(text(fault))
	}
	if m := listRE.FindStringSubmatch(msg); m != nil {
		return at, "expected `,` between two items, or the bracket that closes the list; " + found(text(at))
	}
	if m := effectRE.FindStringSubmatch(msg); m != nil {
		return before, "expected `permit` or `forbid` to start a policy; " + found(text(before))
	}
	if m := dupAnnotRE.FindStringSubmatch(msg); m != nil {
		return before, fmt.Sprintf("the annotation `@%s` is given twice on one policy", m[1])
	}
	if m := dupKeyRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("the record has the key `%s` twice", m[1])
	}
	if m := notFuncRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("`%s` is not a function Cedar knows (such as `ip`, `decimal`, `datetime` or `duration`)", m[1])
	}
	if m := isMethodRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("`%s` is a method: write it after a value, as in `value.%s()`", m[1], m[1])
	}
	if m := notMethodRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("`%s` is not a method Cedar knows (such as `contains`, `containsAll`, `containsAny` or `isEmpty`)", m[1])
	}
	if m := isFuncRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("`%s` is a function: write it before its argument, as in `%s(\"…\")`", m[1], m[1])
	}
	if m := argsRE.FindStringSubmatch(msg); m != nil {
		return back(m[1]), fmt.Sprintf("`%s` takes %s", m[1], map[string]string{"no arguments": "no argument", "one argument": "one argument"}[m[2]])
	}
	what, ok := map[string]string{
		"expected ident or reserved keyword": "expected the annotation's name after `@`, as in `@id(\"…\")`",
		"expected string":                    "expected the annotation's value as a quoted string, as in `@id(\"no-deletes\")`",
		"expected ident":                     "expected a name",
		"unexpected token":                   "expected a name or a quoted id after `::`, as in `Group::\"…\"`",
		"expected ident after dot":           "expected an attribute name after `.`",
		"expected ident or string":           "expected an attribute name or a quoted string",
		"expected string literal":            "expected a quoted pattern after `like`, as in `like \"*@contoso.com\"`",
		"invalid primary":                    "expected a value here: `principal`, `action`, `resource`, `context`, a quoted string, a number, `true`, `false`, an entity such as `Group::\"…\"`, or an expression in brackets",
	}[msg]
	if ok {
		return before, what + "; " + found(text(before))
	}
	return at, msg
}

// expectedWords says what a missing token is for.
func expectedWords(want string) string {
	if w, ok := map[string]string{
		";":         "expected `;` after the policy's closing `)` or `}`",
		",":         "expected `,` between principal, action and resource",
		"(":         "expected `(` after `permit` or `forbid`",
		")":         "expected `)` to close the bracket",
		"{":         "expected `{` after `when` or `unless`",
		"}":         "expected `}` to close the condition",
		"]":         "expected `]` to close the bracket",
		"::":        "expected `::` in an entity, as in `User::\"…\"`",
		":":         "expected `:` after the record's key",
		"then":      "expected `then`: an `if` needs `then` and `else`",
		"else":      "expected `else`: an `if` needs `then` and `else`",
		"principal": "expected `principal`: a policy's scope names principal, action and resource, in this order",
		"action":    "expected `action`: a policy's scope names principal, action and resource, in this order",
		"resource":  "expected `resource`: a policy's scope names principal, action and resource, in this order",
	}[want]; ok {
		return w
	}
	return fmt.Sprintf("expected `%s`", want)
}

// found names the token found, or the end of the text.
func found(tok string) string {
	if tok == "" {
		return "found the end of the text"
	}
	if r := []rune(tok); len(r) > 40 {
		tok = string(r[:40]) + "…"
	}
	return "found `" + tok + "`"
}

// scanWords says a scanner fault in plain words.
func scanWords(msg string) string {
	if w, ok := map[string]string{
		"literal not terminated": "the string is not closed: add its closing `\"` on the same line",
		"invalid char escape":    "the string holds an escape Cedar does not know; the escapes are `\\n`, `\\r`, `\\t`, `\\0`, `\\\\`, `\\'`, `\\\"`, `\\*`, `\\x41` and `\\u{1F600}`",
		"comment not terminated": "the comment opened with `/*` is not closed with `*/`",
		"invalid character NUL":  "the text holds a NUL character: remove it",
		"invalid UTF-8 encoding": "the text is not valid UTF-8",
	}[msg]; ok {
		return w
	}
	return msg
}

// unplacedError places a fault cedar-go gave no position for. A whole
// number out of range and an escape that does not decode are at the first
// token that has them: the parser stops at the first, and it has read
// every token before. Any other is put on the first line whose prefix of
// the text already fails with the same message: the parser reads the same
// tokens up to the fault, whatever follows it, and a cut at a line end
// never splits a token (a Cedar string cannot hold a newline).
func unplacedError(text, msg string) *PolicyError {
	var prev policyToken
	words := msg
	switch {
	case strings.HasPrefix(msg, "strconv.ParseInt: "):
		for t := range policyTokens(text) {
			neg := prev.text == "-"
			prev = t
			if t.kind != tokInt {
				continue
			}
			if _, err := strconv.ParseInt(t.text, 10, 64); err == nil || (neg && t.text == "9223372036854775808") {
				continue
			}
			return &PolicyError{Line: t.line, Column: t.col, Msg: fmt.Sprintf(
				"the number `%s` is out of range: Cedar's whole numbers go from -9223372036854775808 to 9223372036854775807", t.text)}
		}
	case strings.HasPrefix(msg, "bad "):
		words = "the string holds an escape Cedar cannot read: `\\*` is for `like` patterns only, `\\x` takes 00 to 7F, and `\\u{…}` one to six hex digits of a Unicode character"
		for t := range policyTokens(text) {
			pattern := prev.text == "like"
			prev = t
			if t.kind == tokString && !escapesRead(t.text, pattern) {
				return &PolicyError{Line: t.line, Column: t.col, Msg: words}
			}
		}
	}
	sameFault := func(prefix string) bool {
		_, err := cedar.NewPolicyListFromBytes("", []byte(prefix))
		if err == nil {
			return false
		}
		_, _, m := splitParseError(err)
		return m == msg
	}
	lines := strings.Count(text, "\n") + 1
	if !sameFault(firstLines(text, lines)) {
		return &PolicyError{Msg: words}
	}
	found := 1 + sort.Search(lines-1, func(i int) bool { return sameFault(firstLines(text, i+1)) })
	return &PolicyError{Line: found, Msg: words}
}

// escapesRead reports whether cedar-go can read the escapes of a string
// token (quotes included): `\n`, `\r`, `\t`, `\\`, `\0`, `\'`, `\"`, `\x`
// and two hex digits up to 7F, `\u{…}` with one to six hex digits (`_`
// between them) of a Unicode scalar value, and `\*` in a pattern only.
func escapesRead(tok string, pattern bool) bool {
	s := strings.TrimSuffix(strings.TrimPrefix(tok, `"`), `"`)
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			continue
		}
		if i++; i >= len(s) {
			return false
		}
		switch s[i] {
		case 'n', 'r', 't', '\\', '0', '\'', '"':
		case '*':
			if !pattern {
				return false
			}
		case 'x':
			if i+3 > len(s) {
				return false
			}
			v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
			if err != nil || v > 0x7f {
				return false
			}
			i += 2
		case 'u':
			end := strings.IndexByte(s[i:], '}')
			if !strings.HasPrefix(s[i:], "u{") || end < 0 {
				return false
			}
			digits := s[i+2 : i+end]
			hex := strings.ReplaceAll(digits, "_", "")
			v, err := strconv.ParseUint(hex, 16, 32)
			if err != nil || strings.HasPrefix(digits, "_") || len(hex) == 0 || len(hex) > 6 || !utf8.ValidRune(rune(v)) {
				return false
			}
			i += end
		default:
			return false
		}
	}
	return true
}

// badUTF8 returns the offset of the first byte of text that is not valid
// UTF-8, or -1.
func badUTF8(text string) int {
	for i, r := range text {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(text[i:]); size == 1 {
				return i
			}
		}
	}
	return -1
}

// positionAt returns the 1-based line and column of a byte offset, the
// column counted in characters (a byte that is not UTF-8 counts as one),
// as cedar-go counts them.
func positionAt(text string, off int) (int, int) {
	before := text[:off]
	lineStart := strings.LastIndexByte(before, '\n') + 1
	return strings.Count(before, "\n") + 1, utf8.RuneCountInString(before[lineStart:]) + 1
}

// firstLines returns the first n lines of text.
func firstLines(text string, n int) string {
	end := 0
	for range n {
		i := strings.IndexByte(text[end:], '\n')
		if i < 0 {
			return text
		}
		end += i + 1
	}
	return text[:end]
}
