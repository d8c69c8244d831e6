// Package elicit reads what an MCP server asks a person for during a tool
// call (elicitation/create, MCP 2025-06-18 and 2025-11-25) and checks the
// person's answer. It is pure: the agent waits for the answer, the bot
// shows a form as an Adaptive Card, the view page shows it in the page.
//
// A form mode request carries a flat JSON Schema object whose properties
// are each a string (with an optional format: email, uri, date,
// date-time), a number or an integer (with bounds), a boolean, a single
// choice (enum, oneOf with const and title, or the older enumNames) or a
// multiple choice (an array whose items are such an enum). Parse turns it
// into a Form, in the server's order of properties, its texts bounded;
// Form.Check turns what a form sent (the strings an Adaptive Card submits,
// or JSON values) into the content the specification asks for, or says in
// the person's words what to correct.
package elicit

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"teamsbot/internal/textclip"
)

// Actions of an answer, as elicitation/create's result names them.
const (
	Accept  = "accept"
	Decline = "decline"
	Cancel  = "cancel"
)

// Modes of a request.
const (
	ModeForm = "form"
	ModeURL  = "url"
)

// Kinds of a field.
const (
	KindText    = "text"
	KindNumber  = "number"
	KindInteger = "integer"
	KindBoolean = "boolean"
	KindChoice  = "choice"  // one of Options
	KindChoices = "choices" // any number of Options, within MinItems and MaxItems
)

// Bounds on what a server may make a person read or fill in: an Adaptive
// Card in Teams holds at most 28 KB, and a form of dozens of fields is
// not a question. What is past them is left out and said (Form.Clipped).
const (
	MaxFields      = 20
	MaxOptions     = 50
	MaxMessage     = 2000 // bytes of the server's message
	MaxTitle       = 120
	MaxDescription = 400
	MaxValue       = 2000 // bytes of one answer, and of a default
	MaxName        = 64   // bytes of a property name
)

// ErrSchema is a requested schema that is not one the specification allows.
var ErrSchema = errors.New("elicit: the requested schema is not a flat form")

// Form is what a form mode request asks for.
type Form struct {
	Fields []Field `json:"fields"`
	// Clipped says what was left out of the server's request to fit the
	// bounds (fields, options, long texts); empty when nothing was.
	Clipped []string `json:"clipped,omitempty"`
}

// Field is one property of the requested schema.
type Field struct {
	Name        string   `json:"name"`
	Title       string   `json:"title,omitempty"`
	Description string   `json:"description,omitempty"`
	Kind        string   `json:"kind"`
	Format      string   `json:"format,omitempty"` // text: email, uri, date, date-time
	Required    bool     `json:"required,omitempty"`
	MinLength   *int     `json:"minLength,omitempty"`
	MaxLength   *int     `json:"maxLength,omitempty"`
	Minimum     *float64 `json:"minimum,omitempty"`
	Maximum     *float64 `json:"maximum,omitempty"`
	MinItems    *int     `json:"minItems,omitempty"`
	MaxItems    *int     `json:"maxItems,omitempty"`
	Options     []Option `json:"options,omitempty"`
	// Default is the schema's default, as a form shows it: a string, a
	// float64, a bool, or a []string of a multiple choice.
	Default any `json:"default,omitempty"`
}

// Label is what a person reads as the field's name.
func (f Field) Label() string {
	if f.Title != "" {
		return f.Title
	}
	return f.Name
}

// Option is one choice of a field.
type Option struct {
	Value string `json:"value"`
	Title string `json:"title"`
}

// property is one property of a requested schema as it is sent.
type property struct {
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Format      string          `json:"format"`
	MinLength   *int            `json:"minLength"`
	MaxLength   *int            `json:"maxLength"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
	MinItems    *int            `json:"minItems"`
	MaxItems    *int            `json:"maxItems"`
	Enum        []any           `json:"enum"`
	EnumNames   []string        `json:"enumNames"`
	OneOf       []titled        `json:"oneOf"`
	Items       *items          `json:"items"`
	Default     json.RawMessage `json:"default"`
	Properties  json.RawMessage `json:"properties"`
}

type titled struct {
	Const any    `json:"const"`
	Title string `json:"title"`
}

type items struct {
	Type  string   `json:"type"`
	Enum  []any    `json:"enum"`
	AnyOf []titled `json:"anyOf"`
	OneOf []titled `json:"oneOf"`
}

// Parse reads a requested schema. order is the order of the properties
// as the server wrote them (JSON objects have none once decoded); names
// it lacks follow, the required ones first, then by name. A schema that
// is not a flat object of the kinds above is ErrSchema, saying which
// property and why.
func Parse(schema json.RawMessage, order []string) (Form, error) {
	var root struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if len(schema) == 0 || string(schema) == "null" {
		return Form{}, nil
	}
	if err := json.Unmarshal(schema, &root); err != nil {
		return Form{}, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	if root.Type != "" && root.Type != "object" {
		return Form{}, fmt.Errorf("%w: its type is %q, not object", ErrSchema, root.Type)
	}
	names := make([]string, 0, len(root.Properties))
	for n := range root.Properties {
		names = append(names, n)
	}
	rank := func(n string) int {
		if i := slices.Index(order, n); i >= 0 {
			return i
		}
		if i := slices.Index(root.Required, n); i >= 0 {
			return len(order) + i
		}
		return len(order) + len(root.Required)
	}
	sort.SliceStable(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	var f Form
	for _, n := range names {
		if len(f.Fields) == MaxFields {
			f.Clipped = append(f.Clipped, fmt.Sprintf("%d more fields", len(names)-MaxFields))
			break
		}
		if n == "" || len(n) > MaxName || !utf8.ValidString(n) {
			return Form{}, fmt.Errorf("%w: a property's name is empty, longer than %d bytes or not UTF-8", ErrSchema, MaxName)
		}
		fd, err := parseField(n, root.Properties[n], slices.Contains(root.Required, n), &f)
		if err != nil {
			return Form{}, fmt.Errorf("%w: property %q: %v", ErrSchema, n, err)
		}
		f.Fields = append(f.Fields, fd)
	}
	return f, nil
}

func parseField(name string, raw json.RawMessage, required bool, f *Form) (Field, error) {
	var p property
	if err := json.Unmarshal(raw, &p); err != nil {
		return Field{}, err
	}
	if len(p.Properties) > 0 && string(p.Properties) != "null" {
		return Field{}, errors.New("it has properties of its own; a form is flat")
	}
	fd := Field{Name: name, Required: required,
		Title:       clip(f, name, "title", p.Title, MaxTitle),
		Description: clip(f, name, "description", p.Description, MaxDescription)}
	switch {
	case p.Type == "array":
		fd.Kind = KindChoices
		if p.Items == nil {
			return Field{}, errors.New("an array without items")
		}
		opts, err := options(p.Items.Enum, nil, append(p.Items.AnyOf, p.Items.OneOf...))
		if err != nil {
			return Field{}, err
		}
		fd.Options = opts
		fd.MinItems, fd.MaxItems = p.MinItems, p.MaxItems
	case len(p.Enum) > 0 || len(p.OneOf) > 0:
		if p.Type != "" && p.Type != "string" {
			return Field{}, fmt.Errorf("choices of type %q; they are strings", p.Type)
		}
		fd.Kind = KindChoice
		opts, err := options(p.Enum, p.EnumNames, p.OneOf)
		if err != nil {
			return Field{}, err
		}
		fd.Options = opts
	case p.Type == "string":
		fd.Kind = KindText
		switch p.Format {
		case "", "email", "uri", "date", "date-time":
			fd.Format = p.Format
		default:
			return Field{}, fmt.Errorf("the format %q is none of email, uri, date, date-time", p.Format)
		}
		fd.MinLength, fd.MaxLength = p.MinLength, p.MaxLength
	case p.Type == "number", p.Type == "integer":
		fd.Kind = KindNumber
		if p.Type == "integer" {
			fd.Kind = KindInteger
		}
		fd.Minimum, fd.Maximum = p.Minimum, p.Maximum
	case p.Type == "boolean":
		fd.Kind = KindBoolean
	default:
		return Field{}, fmt.Errorf("the type %q is none of string, number, integer, boolean, array", p.Type)
	}
	if len(fd.Options) > MaxOptions {
		f.Clipped = append(f.Clipped, fmt.Sprintf("%d choices of %s", len(fd.Options)-MaxOptions, fd.Label()))
		fd.Options = fd.Options[:MaxOptions]
	}
	if len(p.Default) > 0 && string(p.Default) != "null" {
		d, err := fd.defaultOf(p.Default)
		if err != nil {
			return Field{}, fmt.Errorf("its default: %v", err)
		}
		fd.Default = d
	}
	return fd, nil
}

// options reads a choice's options from enum (with the older enumNames)
// or from titled entries (oneOf, anyOf: const and title).
func options(enum []any, names []string, entries []titled) ([]Option, error) {
	var out []Option
	seen := map[string]bool{}
	add := func(v any, title string) error {
		s, ok := v.(string)
		if !ok || s == "" {
			return errors.New("a choice that is not a non-empty string")
		}
		if len(s) > MaxValue {
			return fmt.Errorf("a choice longer than %d bytes", MaxValue)
		}
		if seen[s] {
			return fmt.Errorf("the choice %q twice", textclip.Clip(s, 40))
		}
		seen[s] = true
		if title == "" {
			title = s
		}
		out = append(out, Option{Value: s, Title: textclip.Clip(title, MaxTitle)})
		return nil
	}
	if len(names) > 0 && len(names) != len(enum) {
		return nil, fmt.Errorf("%d choices but %d enumNames", len(enum), len(names))
	}
	for i, v := range enum {
		title := ""
		if i < len(names) {
			title = names[i]
		}
		if err := add(v, title); err != nil {
			return nil, err
		}
	}
	for _, e := range entries {
		if e.Title == "" {
			return nil, errors.New("a titled choice without a title")
		}
		if err := add(e.Const, e.Title); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no choices")
	}
	return out, nil
}

func clip(f *Form, name, what, s string, limit int) string {
	if len(s) > limit {
		f.Clipped = append(f.Clipped, fmt.Sprintf("the end of the %s of %s", what, name))
	}
	return textclip.Clip(s, limit)
}

// defaultOf reads a field's default, which must itself be a valid
// answer: a server's default is shown to the person as their answer.
func (fd Field) defaultOf(raw json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	got, msg := fd.check(v)
	if msg != "" {
		return nil, errors.New(msg)
	}
	if n, ok := got.(int64); ok {
		return float64(n), nil
	}
	return got, nil
}

// Problem is what a person must correct in one field.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Check checks what a form sent against the form: values by property
// name, each a string (as an Adaptive Card sends every input; a multiple
// choice as its values joined by commas) or a JSON value of the field's
// type. It returns the content of an accept answer (strings, float64,
// int64, bool, []string; an empty optional field left out) or, when
// anything is wrong, the problems, one per field, in the form's order.
func (f Form) Check(values map[string]any) (map[string]any, []Problem) {
	content := map[string]any{}
	var problems []Problem
	for _, fd := range f.Fields {
		v, msg := fd.check(values[fd.Name])
		switch {
		case msg != "":
			problems = append(problems, Problem{Field: fd.Name, Message: msg})
		case v != nil:
			content[fd.Name] = v
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	return content, nil
}

// check checks one value; nil with no message is an optional field left
// empty.
func (fd Field) check(v any) (any, string) {
	label := fd.Label()
	if s, ok := v.(string); ok {
		if len(s) > MaxValue {
			return nil, fmt.Sprintf("%s: at most %d characters.", label, MaxValue)
		}
		if fd.Kind != KindText {
			s = strings.TrimSpace(s)
		}
		v = s
		if strings.TrimSpace(s) == "" {
			// Blanks are no answer: a required field needs more.
			v = nil
		}
	}
	if v == nil {
		if fd.Required {
			return nil, fmt.Sprintf("%s is required.", label)
		}
		return nil, ""
	}
	switch fd.Kind {
	case KindText:
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Sprintf("%s: enter text.", label)
		}
		return fd.checkText(s)
	case KindNumber, KindInteger:
		return fd.checkNumber(v)
	case KindBoolean:
		switch b := v.(type) {
		case bool:
			return b, ""
		case string:
			if b == "true" || b == "false" {
				return b == "true", ""
			}
		}
		return nil, fmt.Sprintf("%s: choose yes or no.", label)
	case KindChoice:
		s, ok := v.(string)
		if !ok || !fd.hasOption(s) {
			return nil, fmt.Sprintf("%s: choose one of the choices given.", label)
		}
		return s, ""
	case KindChoices:
		var picked []string
		switch x := v.(type) {
		case string:
			for _, p := range strings.Split(x, ",") {
				if p = strings.TrimSpace(p); p != "" {
					picked = append(picked, p)
				}
			}
		case []string:
			picked = x
		case []any:
			for _, e := range x {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Sprintf("%s: choose among the choices given.", label)
				}
				picked = append(picked, s)
			}
		default:
			return nil, fmt.Sprintf("%s: choose among the choices given.", label)
		}
		for _, p := range picked {
			if !fd.hasOption(p) {
				return nil, fmt.Sprintf("%s: choose among the choices given.", label)
			}
		}
		if len(picked) == 0 && fd.Required {
			return nil, fmt.Sprintf("%s is required.", label)
		}
		if fd.MinItems != nil && len(picked) < *fd.MinItems {
			return nil, fmt.Sprintf("%s: choose at least %d.", label, *fd.MinItems)
		}
		if fd.MaxItems != nil && len(picked) > *fd.MaxItems {
			return nil, fmt.Sprintf("%s: choose at most %d.", label, *fd.MaxItems)
		}
		if len(picked) == 0 {
			return nil, ""
		}
		return slices.Clip(picked), ""
	}
	return nil, fmt.Sprintf("%s cannot be answered here.", label)
}

func (fd Field) hasOption(s string) bool {
	return slices.ContainsFunc(fd.Options, func(o Option) bool { return o.Value == s })
}

func (fd Field) checkText(s string) (any, string) {
	label := fd.Label()
	n := utf8.RuneCountInString(s)
	if fd.MinLength != nil && n < *fd.MinLength {
		return nil, fmt.Sprintf("%s: at least %d characters.", label, *fd.MinLength)
	}
	if fd.MaxLength != nil && n > *fd.MaxLength {
		return nil, fmt.Sprintf("%s: at most %d characters.", label, *fd.MaxLength)
	}
	switch fd.Format {
	case "email":
		a, err := mail.ParseAddress(s)
		if err != nil || a.Address != s || a.Name != "" {
			return nil, fmt.Sprintf("%s: enter an email address, such as name@example.com.", label)
		}
	case "uri":
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "") || strings.ContainsAny(s, " \t\r\n") {
			return nil, fmt.Sprintf("%s: enter a full address, such as https://example.com/page.", label)
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return nil, fmt.Sprintf("%s: enter a date as year-month-day, such as 2026-12-31.", label)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return nil, fmt.Sprintf("%s: enter a date and time with its offset, such as 2026-12-31T09:30:00+01:00.", label)
		}
	}
	return s, ""
}

func (fd Field) checkNumber(v any) (any, string) {
	label := fd.Label()
	var x float64
	switch n := v.(type) {
	case float64:
		x = n
	case int64:
		x = float64(n)
	case int:
		x = float64(n)
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return nil, fmt.Sprintf("%s: enter a number.", label)
		}
		x = f
	case string:
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return nil, fmt.Sprintf("%s: enter a number.", label)
		}
		x = f
	default:
		return nil, fmt.Sprintf("%s: enter a number.", label)
	}
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil, fmt.Sprintf("%s: enter a number.", label)
	}
	if fd.Kind == KindInteger && (x != math.Trunc(x) || math.Abs(x) > 1<<53) {
		return nil, fmt.Sprintf("%s: enter a whole number.", label)
	}
	if fd.Minimum != nil && x < *fd.Minimum {
		return nil, fmt.Sprintf("%s: at least %s.", label, num(*fd.Minimum))
	}
	if fd.Maximum != nil && x > *fd.Maximum {
		return nil, fmt.Sprintf("%s: at most %s.", label, num(*fd.Maximum))
	}
	if fd.Kind == KindInteger {
		return int64(x), ""
	}
	return x, ""
}

// num writes a bound as a person reads it: 10, not 10.000000.
func num(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// PageURL is the address of a URL mode request when it may be shown and
// opened: an absolute https URL with a host name and no user name (which
// can make "https://bank.example@evil.example" read as the bank), never
// any other scheme. The agent declines any other address; what shows one
// (a card, the view page) asks again.
func PageURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.Opaque != "" {
		return nil, false
	}
	return u, true
}

// FieldNames are the form's property names, for an audit record (which
// never holds a value).
func (f Form) FieldNames() []string {
	names := make([]string, len(f.Fields))
	for i, fd := range f.Fields {
		names[i] = fd.Name
	}
	return names
}

// PropertyOrder reads the order of the properties of a requested schema
// as written (what Parse's order is), from its raw bytes; nil when it
// has none or does not parse.
func PropertyOrder(schema json.RawMessage) []string {
	dec := json.NewDecoder(strings.NewReader(string(schema)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		if k != "properties" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return nil
		}
		var order []string
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil
			}
			s, _ := name.(string)
			order = append(order, s)
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
		}
		return order
	}
	return nil
}
