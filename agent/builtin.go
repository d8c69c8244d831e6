package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"teamsbot/internal/textclip"
	"unicode"
)

// BuiltinModel is a deterministic model that needs no network. It picks a
// tool by matching the person's words against the offered tools' names,
// titles and descriptions, takes explicit calls ("/tool-name {json}" or
// "/server/tool-name {json}"), lists the offered tools on "/tools", and
// writes the answer from the tools' ordinary results.
type BuiltinModel struct{}

// NewBuiltinModel returns the built-in model.
func NewBuiltinModel() *BuiltinModel { return &BuiltinModel{} }

// Next implements Model. With Turn.Stream set, a final answer is heard in
// groups of a few words, as a model that writes would send it.
func (m *BuiltinModel) Next(_ context.Context, t Turn) (Message, error) {
	msg := m.next(t)
	if t.Stream != nil && len(msg.ToolCalls) == 0 {
		streamWords(msg.Text, t.Stream)
	}
	return msg, nil
}

// wordsPerDelta is how many words the built-in model streams at a time.
const wordsPerDelta = 4

// streamWords hands text to hear in groups of wordsPerDelta words, each
// with the spaces that follow it, so that the pieces join into text.
func streamWords(text string, hear func(string)) {
	start, n, inWord := 0, 0, false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && !inWord {
			if n == wordsPerDelta {
				hear(text[start:i])
				start, n = i, 0
			}
			n++
		}
		inWord = !space
	}
	if start < len(text) {
		hear(text[start:])
	}
}

func (m *BuiltinModel) next(t Turn) Message {
	last := -1
	for i, msg := range t.Messages {
		if msg.Role == RoleUser {
			last = i
		}
	}
	if last < 0 {
		return Message{Role: RoleAssistant, Text: "Ask me something."}
	}
	var results []Message
	for _, msg := range t.Messages[last+1:] {
		if msg.Role == RoleTool {
			results = append(results, msg)
		}
	}
	if len(results) > 0 || t.Final {
		return Message{Role: RoleAssistant, Text: composeAnswer(t.Tools, results)}
	}
	switch strings.TrimSpace(t.Messages[last].Text) {
	case "/again":
		return again(t.Messages[:last], t.Tools)
	case "/history":
		return recall(t.Messages[:last])
	}
	return m.decide(t.Messages[last].Text, t.Tools)
}

// again is the built-in model's follow-up: the last tool call of the
// conversation's earlier turns, made again with the same arguments, so
// that memory shows without a network ("/again").
func again(earlier []Message, tools []ToolSpec) Message {
	for i := len(earlier) - 1; i >= 0; i-- {
		if calls := earlier[i].ToolCalls; earlier[i].Role == RoleAssistant && len(calls) > 0 {
			c := calls[len(calls)-1]
			return Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-1", Name: resolveSpec(tools, c.Name), Arguments: c.Arguments}}}
		}
	}
	return Message{Role: RoleAssistant, Text: "There is nothing earlier in this conversation to do again. " + builtinHelp}
}

// recall lists the earlier questions of the conversation, with who asked
// them where several people share it ("/history").
func recall(earlier []Message) Message {
	var b strings.Builder
	n := 0
	for _, m := range earlier {
		if m.Role != RoleUser {
			continue
		}
		n++
		if n == 1 {
			b.WriteString("Earlier in this conversation:")
		}
		fmt.Fprintf(&b, "\n%d. ", n)
		if m.From != "" {
			b.WriteString(m.From + ": ")
		}
		b.WriteString(textclip.Clip(oneLine(m.Text), 200))
	}
	if n == 0 {
		return Message{Role: RoleAssistant, Text: "I remember nothing earlier in this conversation."}
	}
	return Message{Role: RoleAssistant, Text: b.String()}
}

const builtinHelp = "Write /tools to see what I can use, or call a tool with /tool-name {json arguments}."

// decide turns the person's text into a tool call or a direct answer.
func (m *BuiltinModel) decide(text string, tools []ToolSpec) Message {
	text = strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(text, "/"); ok {
		name, args, _ := strings.Cut(rest, " ")
		if i := strings.IndexAny(name, "\t\n{"); i >= 0 {
			name, args = name[:i], rest[i:]
		}
		args = strings.TrimSpace(args)
		if name == "tools" && args == "" {
			return Message{Role: RoleAssistant, Text: listTools(tools)}
		}
		if name == "" {
			return Message{Role: RoleAssistant, Text: builtinHelp}
		}
		raw := json.RawMessage("{}")
		if args != "" {
			if !json.Valid([]byte(args)) {
				return Message{Role: RoleAssistant, Text: fmt.Sprintf("The arguments for %s are not valid JSON. %s", name, builtinHelp)}
			}
			raw = json.RawMessage(args)
		}
		return Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-1", Name: resolveSpec(tools, name), Arguments: raw}}}
	}
	spec, leftover, ok := bestTool(text, tools)
	if !ok {
		return Message{Role: RoleAssistant, Text: "I found no tool for that. " + builtinHelp}
	}
	return Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call-1", Name: spec.Name, Arguments: inferArgs(spec, leftover)}}}
}

// resolveSpec maps what the person typed to an offered tool's name; a name
// that matches nothing is passed on as typed, for the run to refuse.
func resolveSpec(tools []ToolSpec, name string) string {
	match := ""
	for _, s := range tools {
		if s.Name == name {
			return s.Name
		}
		if s.Tool == name {
			if match != "" {
				return name // ambiguous: the run says so
			}
			match = s.Name
		}
	}
	if match != "" {
		return match
	}
	return name
}

func listTools(tools []ToolSpec) string {
	if len(tools) == 0 {
		return "No tools are offered to me in this run."
	}
	var b strings.Builder
	b.WriteString("Tools I can use:")
	for _, s := range tools {
		fmt.Fprintf(&b, "\n- %s", s.Name)
		if s.Title != "" && s.Title != s.Tool {
			fmt.Fprintf(&b, " (%s)", s.Title)
		}
		if s.Description != "" {
			fmt.Fprintf(&b, ": %s", firstLine(s.Description))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return textclip.Clip(s, 160)
}

// stopword reports words that say nothing about which tool to use.
func stopword(w string) bool {
	switch w {
	case "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "doe", "does", "for",
		"from", "get", "give", "have", "how", "i", "in", "is", "it", "me", "my", "of", "on", "or",
		"our", "please", "show", "tell", "that", "the", "thi", "this", "to", "us", "want", "we", "what",
		"which", "who", "will", "with", "would", "you", "your", "i'd", "let", "see":
		return true
	}
	return false
}

// words splits text into lower-case words with their original spelling.
func words(text string) (norm, orig []string) {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '\''
	}) {
		w = strings.Trim(w, "-'")
		if w == "" {
			continue
		}
		n := stem(strings.ToLower(w))
		norm = append(norm, n)
		orig = append(orig, w)
	}
	return norm, orig
}

// stem folds a plural onto its singular, so "sales" meets "sale".
func stem(w string) string {
	if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
		return w[:len(w)-1]
	}
	return w
}

func tokenSet(texts ...string) map[string]bool {
	set := map[string]bool{}
	for _, t := range texts {
		t = strings.NewReplacer("_", " ", "-", " ", "/", " ", ".", " ").Replace(t)
		n, _ := words(t)
		for _, w := range n {
			if !stopword(w) {
				set[w] = true
			}
		}
	}
	return set
}

// bestTool scores each tool by the person's words it shares: a word of its
// name counts 3, of its title 2, of its description 1. It returns the best
// tool (the first on a tie) and the person's words that matched no tool
// word, which may fill the tool's one required argument.
func bestTool(text string, tools []ToolSpec) (ToolSpec, []string, bool) {
	norm, orig := words(text)
	best, bestScore := -1, 0
	var bestLeft []string
	for i, s := range tools {
		name := tokenSet(s.Tool)
		title := tokenSet(s.Title)
		desc := tokenSet(s.Description)
		score := 0
		var left []string
		seen := map[string]bool{}
		for j, w := range norm {
			if stopword(w) {
				continue
			}
			hit := name[w] || title[w] || desc[w]
			if !hit {
				left = append(left, orig[j])
			}
			if seen[w] {
				continue
			}
			seen[w] = true
			switch {
			case name[w]:
				score += 3
			case title[w]:
				score += 2
			case desc[w]:
				score++
			}
		}
		if score > bestScore {
			best, bestScore, bestLeft = i, score, left
		}
	}
	if best < 0 || bestScore < 2 {
		return ToolSpec{}, nil, false
	}
	return tools[best], bestLeft, true
}

// inferArgs fills a tool's arguments from the person's leftover words when
// the tool has exactly one required string argument; otherwise {}.
func inferArgs(s ToolSpec, leftover []string) json.RawMessage {
	schema, _ := s.InputSchema.(map[string]any)
	req, _ := schema["required"].([]any)
	props, _ := schema["properties"].(map[string]any)
	if len(req) != 1 || len(leftover) == 0 {
		return json.RawMessage("{}")
	}
	name, _ := req[0].(string)
	prop, _ := props[name].(map[string]any)
	if typ, _ := prop["type"].(string); name == "" || typ != "string" {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(map[string]string{name: strings.Join(leftover, " ")})
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// composeAnswer writes the answer from the tool messages of this turn.
func composeAnswer(tools []ToolSpec, results []Message) string {
	if len(results) == 0 {
		return "I have nothing to report."
	}
	var b strings.Builder
	for i, r := range results {
		if i > 0 {
			b.WriteString("\n\n")
		}
		title := r.ToolName
		for _, s := range tools {
			if s.Name == r.ToolName {
				title = s.Title
			}
		}
		if r.IsError {
			fmt.Fprintf(&b, "%s could not be used: %s", title, textclip.Clip(strings.TrimSpace(r.Text), 500))
			continue
		}
		text := textclip.Clip(readable(r.Text), maxAnswerBytes)
		if text == "" {
			fmt.Fprintf(&b, "%s returned nothing to show.", title)
			continue
		}
		fmt.Fprintf(&b, "%s:\n%s", title, text)
	}
	return textclip.Clip(b.String(), maxAnswerBytes)
}

// Bounds of readable. A tool's text comes from a server the service does
// not control: without them, deeply nested JSON would recurse without limit
// and indent each level further (memory quadratic in the depth), and a huge
// document would be rendered in full only to be clipped to maxAnswerBytes.
const (
	maxReadableBytes = 64 << 10
	maxReadableDepth = 16
	maxAnswerBytes   = 8000
)

// errTooDeep stops decodeOrdered at maxReadableDepth.
var errTooDeep = errors.New("JSON nested too deeply to render")

// readable renders a tool's text for a person: JSON becomes indented
// "key: value" lines, other text is kept as it is. JSON larger than
// maxReadableBytes or nested deeper than maxReadableDepth is kept as it is
// too.
func readable(text string) string {
	text = strings.TrimSpace(text)
	if text == "" || (text[0] != '{' && text[0] != '[') || len(text) > maxReadableBytes {
		return text
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	v, err := decodeOrdered(dec, 0)
	if err != nil {
		return text
	}
	if _, err := dec.Token(); err != io.EOF {
		return text // more than one JSON value: leave it alone
	}
	var b bytes.Buffer
	writeValue(&b, v, 0)
	return strings.TrimRight(b.String(), "\n")
}

// field is one key of a JSON object, in the order the server wrote them.
type field struct {
	key string
	val any
}

// decodeOrdered decodes a JSON value keeping object keys in order; depth
// is how many arrays and objects enclose it.
func decodeOrdered(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') && depth >= maxReadableDepth {
		return nil, errTooDeep
	}
	switch tok {
	case json.Delim('{'):
		var obj []field
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj = append(obj, field{fmt.Sprint(k), v})
		}
		_, err := dec.Token()
		return obj, err
	case json.Delim('['):
		var arr []any
		for dec.More() {
			v, err := decodeOrdered(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token()
		return arr, err
	default:
		return tok, nil
	}
}

func scalar(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "none", true
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		if v {
			return "yes", true
		}
		return "no", true
	}
	return "", false
}

func writeValue(b *bytes.Buffer, v any, depth int) {
	pad := strings.Repeat("  ", depth)
	switch v := v.(type) {
	case []field:
		for _, f := range v {
			key := humanKey(f.key)
			if s, ok := scalar(f.val); ok {
				fmt.Fprintf(b, "%s%s: %s\n", pad, key, s)
				continue
			}
			if line, ok := inline(f.val); ok {
				fmt.Fprintf(b, "%s%s: %s\n", pad, key, line)
				continue
			}
			fmt.Fprintf(b, "%s%s:\n", pad, key)
			writeValue(b, f.val, depth+1)
		}
	case []any:
		for _, x := range v {
			if s, ok := scalar(x); ok {
				fmt.Fprintf(b, "%s- %s\n", pad, s)
			} else if line, ok := inline(x); ok {
				fmt.Fprintf(b, "%s- %s\n", pad, line)
			} else {
				fmt.Fprintf(b, "%s-\n", pad)
				writeValue(b, x, depth+1)
			}
		}
	default:
		s, _ := scalar(v)
		fmt.Fprintf(b, "%s%s\n", pad, s)
	}
}

// inline renders an array of scalars, or an object of scalars, on one line.
func inline(v any) (string, bool) {
	var parts []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			s, ok := scalar(x)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
	case []field:
		for _, f := range v {
			s, ok := scalar(f.val)
			if !ok {
				return "", false
			}
			parts = append(parts, humanKey(f.key)+": "+s)
		}
	default:
		return "", false
	}
	return strings.Join(parts, ", "), true
}

// humanKey turns "accountManager" or "open_tickets" into "account manager"
// and "open tickets".
func humanKey(k string) string {
	var b strings.Builder
	prevLower := false
	for _, r := range k {
		switch {
		case r == '_' || r == '-':
			b.WriteByte(' ')
			prevLower = false
		case unicode.IsUpper(r):
			if prevLower {
				b.WriteByte(' ')
			}
			b.WriteRune(unicode.ToLower(r))
			prevLower = false
		default:
			b.WriteRune(r)
			prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
		}
	}
	return b.String()
}
