package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// chatChunk is what the service reads of a streamed chunk
// (chat.completion.chunk), or of the error object a server sends in its
// place. Its tags say the fields' names as encoding/json would read them,
// which decode matches.
type chatChunk struct {
	Choices []chunkChoice   `json:"choices"`
	Usage   chunkUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

// chunkChoice is one of a chunk's choices.
type chunkChoice struct {
	Index        int64      `json:"index"`
	Delta        chunkDelta `json:"delta"`
	FinishReason string     `json:"finish_reason"`
}

// chunkDelta is what a choice adds to the answer.
type chunkDelta struct {
	Content   string          `json:"content"`
	ToolCalls []chunkToolCall `json:"tool_calls"`
}

// chunkToolCall is a piece of one tool call, found by its index.
type chunkToolCall struct {
	Index    int64         `json:"index"`
	ID       string        `json:"id"`
	Function chunkFunction `json:"function"`
}

// chunkFunction is a piece of a tool call's name and arguments.
type chunkFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chunkUsage is the tokens a streamed answer used, in a chunk of its own.
type chunkUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

// errChunk is a chunk's data that is not JSON, or whose fields have other
// types than the API's.
var errChunk = errors.New("not a chunk")

// maxChunkDepth is how deeply the values a chunk's reader skips may nest,
// as encoding/json bounds it.
const maxChunkDepth = 10000

// decode reads data into c as json.Unmarshal would, names matched with
// case folded, a repeated name decoded again over the first, and an error
// for what is not JSON or has a field of another type.
//
// encoding/json reads a chunk by recursion through reflection, several
// kilobytes of stack deep, and the goroutine that reads a streamed answer
// waits between its chunks: one deep call grows its stack, and Go keeps
// it so until a collection finds it mostly unused. This reader goes a few
// small frames deep, and allocates only the strings it keeps and the
// strings that have escapes.
func (c *chatChunk) decode(data []byte) error {
	s := &chunkScan{b: data}
	if err := s.object(func(name []byte) error {
		switch {
		case fieldIs(name, "choices"):
			return decodeSlice(s, &c.Choices, s.choice)
		case fieldIs(name, "usage"):
			return s.object(func(name []byte) error {
				switch {
				case fieldIs(name, "prompt_tokens"):
					return s.int(&c.Usage.PromptTokens)
				case fieldIs(name, "completion_tokens"):
					return s.int(&c.Usage.CompletionTokens)
				}
				return s.skip()
			})
		case fieldIs(name, "error"):
			start := s.space()
			if err := s.skip(); err != nil {
				return err
			}
			c.Error = append(c.Error[:0], data[start:s.i]...)
			return nil
		}
		return s.skip()
	}); err != nil {
		return err
	}
	if s.space() != len(s.b) {
		return s.fail("after the chunk")
	}
	return nil
}

// choice reads one of a chunk's choices into ch.
func (s *chunkScan) choice(ch *chunkChoice) error {
	return s.object(func(name []byte) error {
		switch {
		case fieldIs(name, "index"):
			return s.int(&ch.Index)
		case fieldIs(name, "delta"):
			return s.delta(&ch.Delta)
		case fieldIs(name, "finish_reason"):
			return s.str(&ch.FinishReason)
		}
		return s.skip()
	})
}

// delta reads a choice's delta into d.
func (s *chunkScan) delta(d *chunkDelta) error {
	return s.object(func(name []byte) error {
		switch {
		case fieldIs(name, "content"):
			return s.str(&d.Content)
		case fieldIs(name, "tool_calls"):
			return decodeSlice(s, &d.ToolCalls, s.toolCall)
		}
		return s.skip()
	})
}

// toolCall reads a piece of a tool call into tc.
func (s *chunkScan) toolCall(tc *chunkToolCall) error {
	return s.object(func(name []byte) error {
		switch {
		case fieldIs(name, "index"):
			return s.int(&tc.Index)
		case fieldIs(name, "id"):
			return s.str(&tc.ID)
		case fieldIs(name, "function"):
			return s.object(func(name []byte) error {
				switch {
				case fieldIs(name, "name"):
					return s.str(&tc.Function.Name)
				case fieldIs(name, "arguments"):
					return s.str(&tc.Function.Arguments)
				}
				return s.skip()
			})
		}
		return s.skip()
	})
}

// fieldIs reports whether a member's name is the field's, as encoding/json
// matches them.
func fieldIs(name []byte, field string) bool {
	return string(name) == field || bytes.EqualFold(name, []byte(field))
}

// chunkScan reads JSON from b, at i.
type chunkScan struct {
	b []byte
	i int
}

func (s *chunkScan) fail(where string) error {
	if s.i >= len(s.b) {
		return fmt.Errorf("%w: unexpected end of JSON input", errChunk)
	}
	return fmt.Errorf("%w: invalid character %q %s at offset %d", errChunk, s.b[s.i], where, s.i)
}

func (s *chunkScan) mismatch(what string) error {
	return fmt.Errorf("%w: %s expected at offset %d", errChunk, what, s.i)
}

// space skips white space and returns where it stopped.
func (s *chunkScan) space() int {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.i
		}
	}
	return s.i
}

// at returns the next byte after white space, or 0 at the end.
func (s *chunkScan) at() byte {
	if s.space() < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// null reads null, if that is what comes next.
func (s *chunkScan) null() (bool, error) {
	if s.at() != 'n' {
		return false, nil
	}
	return true, s.literal("null")
}

func (s *chunkScan) literal(lit string) error {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return s.fail("in literal " + lit)
	}
	s.i += len(lit)
	return nil
}

// object reads an object (or null), handing each member's name to member,
// which reads its value.
func (s *chunkScan) object(member func(name []byte) error) error {
	if null, err := s.null(); null || err != nil {
		return err
	}
	if s.at() != '{' {
		return s.mismatch("an object")
	}
	s.i++
	if s.at() == '}' {
		s.i++
		return nil
	}
	for {
		name, err := s.key()
		if err != nil {
			return err
		}
		if err := member(name); err != nil {
			return err
		}
		switch s.at() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.fail("after object key:value pair")
		}
	}
}

// decodeSlice reads an array (or null) into *dst as encoding/json fills a
// slice: null empties it, an empty array makes it a new empty slice, and
// each element is read over the one it had, if any (a name that comes
// again reads into what the first left), then the slice is cut to the
// array's length.
func decodeSlice[T any](s *chunkScan, dst *[]T, each func(*T) error) error {
	if null, err := s.null(); null || err != nil {
		if null {
			*dst = nil
		}
		return err
	}
	if s.at() != '[' {
		return s.mismatch("an array")
	}
	s.i++
	if s.at() == ']' {
		s.i++
		*dst = []T{}
		return nil
	}
	for n := 0; ; {
		if n >= cap(*dst) {
			*dst = slices.Grow(*dst, 1)
		}
		if n >= len(*dst) {
			*dst = (*dst)[:n+1]
		}
		if err := each(&(*dst)[n]); err != nil {
			return err
		}
		n++
		switch s.at() {
		case ',':
			s.i++
		case ']':
			s.i++
			*dst = (*dst)[:n]
			return nil
		default:
			return s.fail("after array element")
		}
	}
}

// str reads a string (or null, which leaves *dst as it was).
func (s *chunkScan) str(dst *string) error {
	if null, err := s.null(); null || err != nil {
		return err
	}
	if s.at() != '"' {
		return s.mismatch("a string")
	}
	b, err := s.text()
	if err != nil {
		return err
	}
	*dst = string(b)
	return nil
}

// int reads a whole number (or null, which leaves *dst as it was).
func (s *chunkScan) int(dst *int64) error {
	if null, err := s.null(); null || err != nil {
		return err
	}
	if c := s.at(); c != '-' && (c < '0' || c > '9') {
		return s.mismatch("a number")
	}
	lit, err := s.number()
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s is not a whole number of 64 bits", errChunk, lit)
	}
	*dst = n
	return nil
}

// number reads a number's literal.
func (s *chunkScan) number() ([]byte, error) {
	start := s.i
	digits := func() bool {
		from := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > from
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case !digits():
		return nil, s.fail("in numeric literal")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !digits() {
			return nil, s.fail("after decimal point in numeric literal")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !digits() {
			return nil, s.fail("in exponent of numeric literal")
		}
	}
	return s.b[start:s.i], nil
}

// skip reads one value of any kind, as deeply nested as maxChunkDepth,
// without recursion.
func (s *chunkScan) skip() error {
	var closers []byte // of the arrays and objects open, innermost last
	for {
		switch c := s.at(); {
		case c == '{':
			s.i++
			if s.at() == '}' {
				s.i++
				break
			}
			closers = append(closers, '}')
			if _, err := s.key(); err != nil {
				return err
			}
			continue
		case c == '[':
			s.i++
			if s.at() == ']' {
				s.i++
				break
			}
			closers = append(closers, ']')
			continue
		case c == '"':
			if _, err := s.text(); err != nil {
				return err
			}
		case c == 't':
			if err := s.literal("true"); err != nil {
				return err
			}
		case c == 'f':
			if err := s.literal("false"); err != nil {
				return err
			}
		case c == 'n':
			if err := s.literal("null"); err != nil {
				return err
			}
		case c == '-' || c >= '0' && c <= '9':
			if _, err := s.number(); err != nil {
				return err
			}
		default:
			return s.fail("looking for beginning of value")
		}
		if len(closers) > maxChunkDepth {
			return fmt.Errorf("%w: exceeded max depth", errChunk)
		}
		// A value was read: close what it ended, or go on to the next.
	closing:
		for {
			if len(closers) == 0 {
				return nil
			}
			closer := closers[len(closers)-1]
			switch s.at() {
			case ',':
				s.i++
				if closer == '}' {
					if _, err := s.key(); err != nil {
						return err
					}
				}
				break closing
			case closer:
				s.i++
				closers = closers[:len(closers)-1]
			default:
				return s.fail("after a value")
			}
		}
	}
}

// key reads an object member's name and the colon after it.
func (s *chunkScan) key() ([]byte, error) {
	if s.at() != '"' {
		return nil, s.fail("looking for beginning of object key string")
	}
	name, err := s.text()
	if err != nil {
		return nil, err
	}
	if s.at() != ':' {
		return nil, s.fail("after object key")
	}
	s.i++
	return name, nil
}

// text reads a string, s at its opening quote, and returns its text: b's
// own bytes when it has no escapes and is ASCII, else a copy with the
// escapes decoded and what is not UTF-8 replaced by U+FFFD, as
// encoding/json does.
func (s *chunkScan) text() ([]byte, error) {
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			s.i++
			return s.b[start : s.i-1], nil
		}
		if c == '\\' || c < ' ' || c >= utf8.RuneSelf {
			break
		}
		s.i++
	}
	out := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return out, nil
		case c < ' ':
			return nil, s.fail("in string literal")
		case c == '\\':
			s.i++
			if s.i >= len(s.b) {
				return nil, s.fail("in string escape code")
			}
			switch e := s.b[s.i]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(s.b[s.i+1:])
				if !ok {
					return nil, s.fail("in \\u hexadecimal character escape")
				}
				s.i += 4
				if utf16.IsSurrogate(r) {
					// The pair's second half, when it is one, is taken
					// with it; else U+FFFD stands for the first.
					r2, ok := rune(-1), false
					if s.i+2 < len(s.b) && s.b[s.i+1] == '\\' && s.b[s.i+2] == 'u' {
						r2, ok = hex4(s.b[s.i+3:])
					}
					if dec := utf16.DecodeRune(r, r2); ok && dec != utf8.RuneError {
						s.i += 6
						r = dec
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return nil, s.fail("in string escape code")
			}
			s.i++
		case c < utf8.RuneSelf:
			out = append(out, c)
			s.i++
		default:
			r, n := utf8.DecodeRune(s.b[s.i:])
			out = utf8.AppendRune(out, r)
			s.i += n
		}
	}
	return nil, s.fail("in string literal")
}

// hex4 reads the four hexadecimal digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
