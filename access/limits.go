package access

import (
	"errors"
	"fmt"
	"iter"
	"unicode/utf8"

	"teamsbot/store"
)

// The limits of a policy text. ParsePolicies checks them on the raw text
// before cedar-go's parser sees it, because that parser and the compiler
// behind it recurse once per level of nesting and per chained operator,
// with no bound of their own: a text nested a few million levels deep ends
// the process with a stack overflow, which no recover catches, and a few
// constructs cost memory or time that grows with the square of their
// length (docs/security.md, "The Cedar parser"). No real policy comes near
// any of them.
const (
	// MaxPolicyBytes bounds the whole text, as the store does.
	MaxPolicyBytes = store.MaxPolicySetText
	// MaxPolicyNesting bounds how deep `(`, `[`, `{` and `if … then … else`
	// may be nested in one another: the parser's recursion.
	MaxPolicyNesting = 32
	// MaxPolicyDepth bounds how many operators may be chained one inside
	// another (`a && b && c`, `!!x`, `a.b.c`, `1 + 2 + 3`, brackets
	// included): the depth of the syntax tree, which the compiler and every
	// evaluation walk recursively.
	MaxPolicyDepth = 1024
	// MaxPolicyHasPath bounds the attribute names after one `has`
	// (`context has a.b.c` has three): each adds a test of the whole path
	// before it, so the tree grows with the square of the path.
	MaxPolicyHasPath = 16
	// MaxPolicyNamePath bounds the names joined by `::` in one entity type
	// or function name: the parser builds each prefix anew, so its memory
	// grows with the square of the path.
	MaxPolicyNamePath = 16
	// MaxPolicyPattern bounds a `like` pattern, quotes included: matching
	// a constant string against it is done while parsing, in time that
	// grows with the product of their lengths.
	MaxPolicyPattern = 1024
)

// ErrPolicyLimit is wrapped by the *PolicyError of a text over one of the
// limits above.
var ErrPolicyLimit = errors.New("access: policy text over a limit")

// tokenKind is what a token of a Cedar text is.
type tokenKind uint8

const (
	tokOther  tokenKind = iota // an operator, punctuation or a stray character
	tokIdent                   // a name or a keyword
	tokInt                     // a whole number
	tokString                  // a string literal, quotes included
	tokEOF                     // the end of the text
)

// policyToken is one token of a Cedar text, cut as cedar-go's scanner
// cuts it. Line and col are 1-based; col counts characters, as cedar-go
// does.
type policyToken struct {
	kind      tokenKind
	text      string
	line, col int
}

// end returns the line and column just after t (a token never spans
// lines).
func (t policyToken) end() (int, int) {
	return t.line, t.col + utf8.RuneCountInString(t.text)
}

// policyTokens cuts text into tokens by cedar-go's rules: spaces, tabs, CR
// and LF separate; `//` comments run to the end of the line and `/* */`
// comments to their end; a string runs to its closing quote, a backslash
// escaping the character after it; names, whole numbers, the two-character
// operators `::`, `==`, `!=`, `<=`, `>=`, `&&`, `||`, and any other
// character alone. So a bracket inside a string or a comment is no token.
// Text cedar-go's scanner refuses (an unclosed string or comment, a bad
// escape) is cut somehow: cedar-go then refuses the text before parsing it.
func policyTokens(text string) iter.Seq[policyToken] {
	return func(yield func(policyToken) bool) {
		i, line, col := 0, 1, 1
		// step moves past one character.
		step := func() {
			r, size := rune(text[i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(text[i:])
			}
			i += size
			if r == '\n' {
				line, col = line+1, 1
			} else {
				col++
			}
		}
		at := func(j int) byte {
			if j < len(text) {
				return text[j]
			}
			return 0
		}
		for i < len(text) {
			c := text[i]
			switch {
			case c == ' ' || c == '\t' || c == '\r' || c == '\n':
				step()
				continue
			case c == '/' && at(i+1) == '/':
				for i < len(text) && text[i] != '\n' {
					step()
				}
				continue
			case c == '/' && at(i+1) == '*':
				step()
				step()
				for i < len(text) && (text[i] != '*' || at(i+1) != '/') {
					step()
				}
				if i < len(text) {
					step()
					step()
				}
				continue
			}
			start, tl, tc := i, line, col
			kind := tokOther
			switch {
			case isIdentByte(c, true):
				kind = tokIdent
				for i < len(text) && isIdentByte(text[i], false) {
					step()
				}
			case c >= '0' && c <= '9':
				kind = tokInt
				for i < len(text) && text[i] >= '0' && text[i] <= '9' {
					step()
				}
			case c == '"':
				kind = tokString
				step()
				for i < len(text) && text[i] != '"' && text[i] != '\n' {
					if text[i] == '\\' && at(i+1) != '\n' && i+1 < len(text) {
						step()
					}
					step()
				}
				if i < len(text) && text[i] == '"' {
					step()
				}
			default:
				switch text[i:min(i+2, len(text))] {
				case "::", "==", "!=", "<=", ">=", "&&", "||":
					step()
				}
				step()
			}
			if !yield(policyToken{kind: kind, text: text[start:i], line: tl, col: tc}) {
				return
			}
		}
	}
}

// isIdentByte reports whether c may be in a name (first: start one), by
// cedar-go's rule: ASCII letters, `_`, and digits after the first.
func isIdentByte(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

// exprDepth bounds the depth of the syntax tree of one expression (an item
// of a list, a record or an if's part) as its tokens go by. cedar-go builds
// each `||` and `&&` chain, and each run of other operators, leaning left,
// so a chain of n operators is n levels above the deepest of its operands.
// The bound counts each `||`, each `&&` in the operand of a `||`, and
// every other operator in the operand of a `&&` (which over-counts mixes
// such as `a.b + c`, never under-counts), plus the depth of each bracket.
type exprDepth struct {
	or, maxOr   int // `||` so far; the deepest operand of them closed
	and, maxAnd int // `&&` in the current `||` operand; the deepest of theirs
	other       int // other operators and brackets in the current `&&` operand
}

func (d exprDepth) value() int { return d.or + max(d.maxOr, d.and+max(d.maxAnd, d.other)) }

func (d *exprDepth) orOp() {
	d.maxOr = max(d.maxOr, d.and+max(d.maxAnd, d.other))
	d.or++
	d.and, d.maxAnd, d.other = 0, 0, 0
}

func (d *exprDepth) andOp() {
	d.maxAnd = max(d.maxAnd, d.other)
	d.and++
	d.other = 0
}

// nestLevel is an open bracket or `if`, or the text outside all of them.
type nestLevel struct {
	open  policyToken
	isIf  bool
	cur   exprDepth // the item being read
	items int       // the deepest item already closed
}

// depth is the deepest item of the level so far.
func (l *nestLevel) depth() int { return max(l.items, l.cur.value()) }

// nextItem closes the item being read (at `,`, `then`, `else`).
func (l *nestLevel) nextItem() {
	l.items = l.depth()
	l.cur = exprDepth{}
}

// checkPolicyLimits refuses a text over one of the limits, naming where it
// is crossed and the limit, before any parser sees it. It reads the text
// once, keeping only the open brackets.
func checkPolicyLimits(text string) *PolicyError {
	if len(text) > MaxPolicyBytes {
		return &PolicyError{Err: ErrPolicyLimit, Msg: fmt.Sprintf(
			"the text is %s long; policies may be at most %s (%d KiB) in all: remove what is not needed",
			bytesWord(len(text)), bytesWord(MaxPolicyBytes), MaxPolicyBytes>>10)}
	}
	refuse := func(t policyToken, format string, args ...any) *PolicyError {
		return &PolicyError{Line: t.line, Column: t.col, Err: ErrPolicyLimit, Msg: fmt.Sprintf(format, args...)}
	}
	levels := []nestLevel{{}}
	// prev is the token before; hasNames counts the names after a `has`
	// (-1: not after one); pathNames the names joined by `::`.
	var prev policyToken
	hasNames, pathNames := -1, 0
	for t := range policyTokens(text) {
		top := &levels[len(levels)-1]
		word := t.text
		if t.kind == tokString {
			word = ""
		}

		// A `has` path: `has a`, then `.b`, `.c`... Each further name
		// also tests the path before it: two levels, not one.
		switch {
		case hasNames == 0 && (t.kind == tokIdent || t.kind == tokString):
			hasNames = 1
		case hasNames > 0 && word == "." && prev.text != ".":
		case hasNames > 0 && t.kind == tokIdent && prev.text == ".":
			hasNames++
			top.cur.other++
			if hasNames > MaxPolicyHasPath {
				return refuse(t, "`has` is followed by more than %d attribute names joined by `.`; at most %d are allowed", MaxPolicyHasPath, MaxPolicyHasPath)
			}
		default:
			hasNames = -1
		}
		// A name path: `A::B::C`.
		switch {
		case word == "::" && prev.kind == tokIdent:
			pathNames++
			if pathNames >= MaxPolicyNamePath {
				return refuse(t, "more than %d names are joined by `::` here; at most %d are allowed", MaxPolicyNamePath, MaxPolicyNamePath)
			}
		case t.kind == tokIdent && prev.text == "::":
		default:
			pathNames = 0
		}
		if n := utf8.RuneCountInString(t.text); t.kind == tokString && prev.text == "like" && n > MaxPolicyPattern {
			return refuse(t, "the `like` pattern is %d characters long; at most %d are allowed", n, MaxPolicyPattern)
		}
		prev = t

		switch word {
		case "(", "[", "{", "if":
			if len(levels)-1 >= MaxPolicyNesting {
				return refuse(t, "`(`, `[`, `{` and `if` are nested more than %d deep here; at most %d levels are allowed", MaxPolicyNesting, MaxPolicyNesting)
			}
			levels = append(levels, nestLevel{open: t, isIf: word == "if"})
			continue
		case ")", "]", "}", ",", ";":
			// An `if`'s last part ends where the list item around it
			// does.
			for len(levels) > 1 && levels[len(levels)-1].isIf {
				levels = closeLevel(levels)
			}
			top = &levels[len(levels)-1]
			switch {
			case word == ",":
				top.nextItem()
			case word == ";" && len(levels) == 1:
				*top = nestLevel{}
			case word != ";" && len(levels) > 1:
				levels = closeLevel(levels)
				top = &levels[len(levels)-1]
			}
		case "then", "else":
			if top.isIf {
				top.nextItem()
			}
		case "||":
			top.cur.orOp()
		case "&&":
			top.cur.andOp()
		case "when", "unless":
			// Outside brackets these start a condition; the conditions
			// of a policy are joined by `&&`, and `unless` negates.
			if len(levels) == 1 {
				top.cur.andOp()
				top.cur.other++
			}
		case "!", "-", "+", "*", "==", "!=", "<", "<=", ">", ">=", "in", "has", "like", "is", ".":
			top.cur.other++
			if word == "has" {
				hasNames = 0
			}
		}
		if d := top.cur.value(); d > MaxPolicyDepth {
			return refuse(t, "more than %d operators (such as `&&`, `||`, `!`, `.`, `==`, brackets) are chained one inside another here; at most %d are allowed: split the condition into several `when` clauses or policies, or list alternatives with `[…].contains(…)`", MaxPolicyDepth, MaxPolicyDepth)
		}
	}
	return nil
}

// closeLevel pops the top level and counts its depth, plus one for the
// bracket or `if` itself, in the operand of the level around it.
func closeLevel(levels []nestLevel) []nestLevel {
	d := levels[len(levels)-1].depth()
	levels = levels[:len(levels)-1]
	levels[len(levels)-1].cur.other += d + 1
	return levels
}

// bytesWord writes a size in bytes with thousands separated.
func bytesWord(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s + " bytes"
}
