package cards

import (
	"math"
	"strconv"
	"strings"
	"time"

	"teamsbot/elicit"
	"teamsbot/internal/textclip"
)

// The form of a question: one Adaptive Card 1.2 input per field, and how
// the form gives way when it does not fit in one message.

// maxExpanded is the most choices shown as radio buttons or check boxes;
// more make a drop-down list.
const maxExpanded = 5

// squeeze is how far a form gives way to fit in one message: the runes
// kept of each field's description (0 leaves them out), of each choice's
// name, of the server's message, of each field's name and of what the
// server asked for that the form leaves out (and of the list of fields in
// the fallback text), and how many choices of each field are shown (0:
// all).
type squeeze struct{ description, choiceName, message, name, leftOut, choices int }

// shortening is what a squeeze actually changed, for the card to say.
type shortening struct {
	descriptionsCut, descriptionsLeftOut, choiceNames, message, names bool
	hiddenChoices                                                     int
}

// parts are the words of what gave way, for elicitShortened.
func (s shortening) parts() []string {
	var parts []string
	switch {
	case s.descriptionsLeftOut:
		parts = append(parts, elicitDescriptionsLeftOut)
	case s.descriptionsCut:
		parts = append(parts, elicitDescriptionsCut)
	}
	if s.choiceNames {
		parts = append(parts, elicitChoiceNamesCut)
	}
	if s.names {
		parts = append(parts, elicitNamesCut)
	}
	if s.message {
		parts = append(parts, elicitMessageCut)
	}
	if s.hiddenChoices > 0 {
		parts = append(parts, elicitChoicesHidden(s.hiddenChoices))
	}
	return parts
}

// askForm is the card of a form that waits, as whole as fits.
func (q question) askForm() Card {
	steps := []squeeze{
		{elicit.MaxDescription, elicit.MaxTitle, elicit.MaxMessage, elicit.MaxTitle, maxNote, 0},
		{100, elicit.MaxTitle, elicit.MaxMessage, elicit.MaxTitle, maxNote, 0},
		{0, elicit.MaxTitle, elicit.MaxMessage, elicit.MaxTitle, maxNote, 0},
		{0, 40, elicit.MaxMessage, elicit.MaxTitle, maxNote, 0},
		{0, 20, maxMessage, 40, maxNote, 0},
		{0, 20, maxMessage / 2, 24, maxNote / 4, 0},
	}
	for _, s := range steps {
		if c := q.form(s); c.Size() <= q.limit {
			return c
		}
	}
	last := steps[len(steps)-1]
	fits := func(n int) bool {
		s := last
		s.choices = n
		return q.form(s).Size() <= q.limit
	}
	if n := largest(1, elicit.MaxOptions, fits); n >= 1 {
		last.choices = n
		return q.form(last)
	}
	return q.tooLarge()
}

// form is the card of a form, squeezed by s.
func (q question) form(s squeeze) Card {
	els, lines, messageCut := q.intro(s.message)
	cut := shortening{message: messageCut && s.message < elicit.MaxMessage}
	problems := map[string]string{}
	for _, f := range q.e.Form.Fields {
		problems[f.Name] = ""
	}
	var stray []string // problems of no field of the form
	for _, p := range q.e.Problems {
		if _, ok := problems[p.Field]; ok {
			problems[p.Field] = p.Message
		} else {
			stray = append(stray, p.Message)
		}
	}
	if len(q.e.Problems) > 0 {
		els = append(els, rich(attention(elicitCorrect)))
		lines = append(lines, elicitCorrect)
		for _, m := range stray {
			els = append(els, rich(attention(label(m, maxNote))))
		}
	}
	var names []string
	for _, f := range q.e.Form.Fields {
		els = append(els, q.field(f, s, problems[f.Name], &cut)...)
		names = append(names, label(f.Label(), maxName))
	}
	if len(names) > 0 {
		lines = append(lines, capRunes(elicitFields(names), s.leftOut))
	}
	if len(q.e.Form.Clipped) > 0 {
		what := elicitLeftOut(q.server, label(strings.Join(q.e.Form.Clipped, "; "), s.leftOut))
		r := rich(subtle(what))
		r.Spacing = "Medium"
		els = append(els, r)
		lines = append(lines, what)
	}
	if parts := cut.parts(); len(parts) > 0 {
		els = append(els, subtleText(elicitShortened(parts)))
	}
	return q.asking(els, lines, elicitSubmit)
}

// tooLarge is the card of a form that does not fit in one message: the
// question can only be declined or cancelled.
func (q question) tooLarge() Card {
	els, lines, _ := q.intro(maxMessage)
	s := elicitTooLarge(q.server)
	els = append(els, rich(run(s)), text(elicitDeclineOrCancel))
	lines = append(lines, s, elicitDeclineOrCancel)
	return q.asking(els, lines, "")
}

// field is one field of a form: its name (marked when required, with
// what it takes), its description, its input and what to correct.
func (q question) field(f elicit.Field, s squeeze, problem string, cut *shortening) []element {
	name := label(f.Label(), s.name)
	cut.names = cut.names || name != label(f.Label(), elicit.MaxTitle)
	runs := []textRun{bold(name)}
	if f.Required {
		runs = append(runs, run(elicitRequired))
	}
	if h := fieldHint(f); h != "" {
		runs = append(runs, subtle(elicitHint(h)))
	}
	head := rich(runs...)
	head.Spacing = "Medium"
	els := []element{head}
	if d := label(f.Description, elicit.MaxDescription); d != "" {
		if s.description == 0 {
			cut.descriptionsLeftOut = true
		} else {
			short := label(f.Description, s.description)
			cut.descriptionsCut = cut.descriptionsCut || short != d
			r := rich(subtle(short))
			r.Spacing = "None"
			els = append(els, r)
		}
	}
	els = append(els, q.input(f, s, cut))
	if problem != "" {
		// elicit's messages start with the field's name, which is just
		// above: shortened there, it is shortened here too.
		if rest, ok := strings.CutPrefix(problem, f.Label()); ok {
			problem = name + rest
		}
		els = append(els, rich(attention(label(problem, maxNote))))
	}
	return els
}

// fieldHint says what a field takes beyond what its input shows: how
// long a text, which numbers, how many choices; "" when nothing.
func fieldHint(f elicit.Field) string {
	switch f.Kind {
	case elicit.KindText:
		return elicitLengthHint(f.MinLength, f.MaxLength)
	case elicit.KindNumber, elicit.KindInteger:
		if f.Kind == elicit.KindNumber && f.Minimum == nil && f.Maximum == nil {
			return ""
		}
		return elicitNumberHint(f.Kind == elicit.KindInteger, bound(f.Minimum), bound(f.Maximum))
	case elicit.KindChoices:
		return elicitItemsHint(f.MinItems, f.MaxItems)
	}
	return ""
}

// bound writes a number's bound as a person reads it: 10, not 1e+01;
// "" for none.
func bound(x *float64) string {
	if x == nil {
		return ""
	}
	return strconv.FormatFloat(*x, 'f', -1, 64)
}

// attention returns a TextRun in the colour of what must be corrected.
func attention(s string) textRun { r := run(s); r.Color = "Attention"; return r }

// input is an Adaptive Card 1.2 input: Input.Text, Input.Number,
// Input.Date, Input.Toggle or Input.ChoiceSet. Value is a number for
// Input.Number (the renderer drops a string there), a string otherwise.
type input struct {
	Type          string   `json:"type"`
	ID            string   `json:"id"`
	Value         any      `json:"value,omitempty"`
	Placeholder   string   `json:"placeholder,omitempty"`
	Style         string   `json:"style,omitempty"`
	MaxLength     int      `json:"maxLength,omitempty"`
	Title         string   `json:"title,omitempty"`
	ValueOn       string   `json:"valueOn,omitempty"`
	ValueOff      string   `json:"valueOff,omitempty"`
	Choices       []choice `json:"choices,omitempty"`
	IsMultiSelect bool     `json:"isMultiSelect,omitempty"`
	Wrap          bool     `json:"wrap,omitempty"`
}

// choice is one choice of an Input.ChoiceSet.
type choice struct {
	Title string `json:"title"`
	Value string `json:"value"`
}

func (input) isElement() {}

// input is a field's input, holding what the person entered (after a
// wrong answer) or else the schema's default.
func (q question) input(f elicit.Field, s squeeze, cut *shortening) input {
	v, entered := q.e.Values[f.Name]
	if !entered {
		v = defaultText(f.Default)
	}
	v = textclip.Prefix(clean(v), elicit.MaxValue)
	// A 1.2 input has no label: its placeholder is its accessible name
	// (the renderer makes it the aria-label).
	name := label(f.Label(), s.name)
	in := input{ID: ElicitFieldPrefix + f.Name, Placeholder: name}
	switch f.Kind {
	case elicit.KindNumber, elicit.KindInteger:
		// No min and max: the renderer checks them on every button,
		// Decline and Cancel too, and would keep a person with a number
		// out of bounds from declining; the hint says the bounds and the
		// answer is checked when it comes.
		in.Type = "Input.Number"
		if x, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && !math.IsInf(x, 0) && !math.IsNaN(x) {
			in.Value = x
		}
		return in
	case elicit.KindBoolean:
		// The field's name is above; the toggle says what checking it means.
		in = input{Type: "Input.Toggle", ID: in.ID, Title: elicitYes, ValueOn: "true", ValueOff: "false", Value: "false"}
		if strings.TrimSpace(v) == "true" {
			in.Value = "true"
		}
		return in
	case elicit.KindChoice, elicit.KindChoices:
		return choiceSet(in, f, v, s, cut)
	}
	in.Type = "Input.Text"
	switch f.Format {
	case "email":
		in.Style = "Email"
	case "uri":
		in.Style = "Url"
	case "date":
		// Input.Date takes year-month-day only.
		in.Type = "Input.Date"
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			v = ""
		}
	case "date-time":
		// 1.2 has no input of a date and a time together; the answer
		// is RFC 3339 text, and the placeholder shows its form.
		in.Placeholder = elicitDateTimePlaceholder(name)
	}
	if v != "" {
		in.Value = v
	}
	if f.MaxLength != nil && *f.MaxLength > 0 && in.Type == "Input.Text" {
		in.MaxLength = *f.MaxLength
	}
	return in
}

// choiceSet makes in the input of a choice field: radio buttons or check
// boxes for a few choices, a drop-down list for more. A multiple choice's
// value is its choices' values joined by commas, as Teams sends it.
func choiceSet(in input, f elicit.Field, v string, s squeeze, cut *shortening) input {
	// Its choices name themselves; a drop-down's placeholder is set below.
	in.Type, in.IsMultiSelect, in.Wrap, in.Placeholder = "Input.ChoiceSet", f.Kind == elicit.KindChoices, true, ""
	picked := map[string]bool{}
	if in.IsMultiSelect {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				picked[p] = true
			}
		}
	} else if v = strings.TrimSpace(v); v != "" {
		picked[v] = true
	}
	shown := f.Options
	if s.choices > 0 && len(shown) > s.choices {
		// The picked choices stay, and the first others up to the
		// number, in the server's order.
		room := s.choices
		for _, op := range f.Options {
			if picked[op.Value] {
				room--
			}
		}
		shown = nil
		for _, op := range f.Options {
			if picked[op.Value] || room > 0 {
				if !picked[op.Value] {
					room--
				}
				shown = append(shown, op)
			}
		}
		cut.hiddenChoices += len(f.Options) - len(shown)
	}
	var values []string
	for _, op := range shown {
		title := choiceName(op, s.choiceName)
		cut.choiceNames = cut.choiceNames || title != choiceName(op, elicit.MaxTitle)
		in.Choices = append(in.Choices, choice{Title: title, Value: op.Value})
		if picked[op.Value] && (in.IsMultiSelect || len(values) == 0) {
			values = append(values, op.Value)
		}
	}
	if len(values) > 0 {
		in.Value = strings.Join(values, ",")
	}
	in.Style = "expanded"
	if len(shown) > maxExpanded {
		in.Style, in.Placeholder = "compact", elicitChoose
	}
	return in
}

// unlinker breaks the markdown of a link and of a link's definition,
// which a renderer may read in the name of a radio button or check box.
var unlinker = strings.NewReplacer("](", "] (", "]:", "] :")

// choiceName is a choice's name made safe, at most max runes: its title,
// else its value.
func choiceName(op elicit.Option, max int) string {
	for _, s := range []string{op.Title, op.Value} {
		if t := unlinker.Replace(label(s, max)); t != "" {
			return t
		}
	}
	return elicitUnnamedChoice
}

// defaultText is a schema default as an input's value.
func defaultText(d any) string {
	switch v := d.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []string:
		return strings.Join(v, ",")
	}
	return ""
}
