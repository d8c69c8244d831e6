package elicit_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"teamsbot/elicit"
)

// everyKind is a requested schema with a property of every kind the
// specification allows, each with a default where it may have one.
const everyKind = `{
  "type": "object",
  "properties": {
    "name":     {"type": "string", "title": "Your name", "minLength": 2, "maxLength": 20, "default": "Ada"},
    "email":    {"type": "string", "format": "email", "description": "Where the receipt goes"},
    "site":     {"type": "string", "format": "uri"},
    "day":      {"type": "string", "format": "date", "default": "2026-12-24"},
    "at":       {"type": "string", "format": "date-time"},
    "amount":   {"type": "number", "minimum": 0.5, "maximum": 100, "default": 12.5},
    "count":    {"type": "integer", "minimum": 1, "maximum": 9},
    "confirm":  {"type": "boolean", "title": "Confirm the refund", "default": false},
    "size":     {"type": "string", "enum": ["s", "m", "l"], "enumNames": ["Small", "Medium", "Large"], "default": "m"},
    "colour":   {"type": "string", "enum": ["red", "green"]},
    "plan":     {"type": "string", "oneOf": [{"const": "free", "title": "Free"}, {"const": "pro", "title": "Pro"}]},
    "tags":     {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 2, "default": ["a"]},
    "teams":    {"type": "array", "items": {"anyOf": [{"const": "x", "title": "Team X"}, {"const": "y", "title": "Team Y"}]}}
  },
  "required": ["name", "email", "confirm", "plan"]
}`

func ptr[T any](v T) *T { return &v }

func TestParseEveryKindInTheServersOrder(t *testing.T) {
	raw := json.RawMessage(everyKind)
	form, err := elicit.Parse(raw, elicit.PropertyOrder(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := []elicit.Field{
		{Name: "name", Title: "Your name", Kind: elicit.KindText, Required: true, MinLength: ptr(2), MaxLength: ptr(20), Default: "Ada"},
		{Name: "email", Description: "Where the receipt goes", Kind: elicit.KindText, Format: "email", Required: true},
		{Name: "site", Kind: elicit.KindText, Format: "uri"},
		{Name: "day", Kind: elicit.KindText, Format: "date", Default: "2026-12-24"},
		{Name: "at", Kind: elicit.KindText, Format: "date-time"},
		{Name: "amount", Kind: elicit.KindNumber, Minimum: ptr(0.5), Maximum: ptr(100.0), Default: 12.5},
		{Name: "count", Kind: elicit.KindInteger, Minimum: ptr(1.0), Maximum: ptr(9.0)},
		{Name: "confirm", Title: "Confirm the refund", Kind: elicit.KindBoolean, Required: true, Default: false},
		{Name: "size", Kind: elicit.KindChoice, Options: []elicit.Option{{"s", "Small"}, {"m", "Medium"}, {"l", "Large"}}, Default: "m"},
		{Name: "colour", Kind: elicit.KindChoice, Options: []elicit.Option{{"red", "red"}, {"green", "green"}}},
		{Name: "plan", Kind: elicit.KindChoice, Required: true, Options: []elicit.Option{{"free", "Free"}, {"pro", "Pro"}}},
		{Name: "tags", Kind: elicit.KindChoices, MinItems: ptr(1), MaxItems: ptr(2), Options: []elicit.Option{{"a", "a"}, {"b", "b"}, {"c", "c"}}, Default: []string{"a"}},
		{Name: "teams", Kind: elicit.KindChoices, Options: []elicit.Option{{"x", "Team X"}, {"y", "Team Y"}}},
	}
	if diff := cmp.Diff(want, form.Fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if len(form.Clipped) != 0 {
		t.Errorf("clipped %q from a small form", form.Clipped)
	}
	if got := strings.Join(form.FieldNames(), ","); got != "name,email,site,day,at,amount,count,confirm,size,colour,plan,tags,teams" {
		t.Errorf("field names %s", got)
	}
}

func TestWithoutTheServersOrderRequiredFieldsComeFirst(t *testing.T) {
	form, err := elicit.Parse(json.RawMessage(everyKind), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(form.FieldNames()[:5], ","); got != "name,email,confirm,plan,amount" {
		t.Errorf("first fields %s, want the required ones in their order, then by name", got)
	}
}

func TestSchemasOutsideTheSpecificationAreRefused(t *testing.T) {
	for _, s := range []string{
		`{"type": "array"}`,
		`{"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "format": "password"}}}`,
		`{"type": "object", "properties": {"a": {"type": "null"}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "x"]}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "enum": ["x", "y"], "enumNames": ["X"]}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "oneOf": [{"const": "x"}]}}}`,
		`{"type": "object", "properties": {"a": {"type": "array"}}}`,
		`{"type": "object", "properties": {"a": {"type": "integer", "default": 1.5}}}`,
		`{"type": "object", "properties": {"a": {"type": "string", "format": "email", "default": "nope"}}}`,
		`{"type": "object", "properties": {"a": {"type": "number", "maximum": 3, "default": 4}}}`,
		`{"type": "object", "properties": {"": {"type": "string"}}}`,
		`[1]`,
	} {
		if _, err := elicit.Parse(json.RawMessage(s), nil); !errors.Is(err, elicit.ErrSchema) {
			t.Errorf("%s: %v, want ErrSchema", s, err)
		}
	}
}

func TestLargeRequestsAreClippedAndSaySo(t *testing.T) {
	var props []string
	for i := range 30 {
		props = append(props, fmt.Sprintf(`"f%02d": {"type": "string", "title": %q}`, i, strings.Repeat("t", 300)))
	}
	var opts []string
	for i := range 80 {
		opts = append(opts, fmt.Sprintf(`"o%d"`, i))
	}
	props = append(props, `"a": {"type": "string", "enum": [`+strings.Join(opts, ",")+`]}`)
	raw := json.RawMessage(`{"type":"object","required":["a"],"properties":{` + strings.Join(props, ",") + `}}`)
	form, err := elicit.Parse(raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(form.Fields) != elicit.MaxFields || form.Fields[0].Name != "a" || len(form.Fields[0].Options) != elicit.MaxOptions {
		t.Fatalf("%d fields, first %s with %d options", len(form.Fields), form.Fields[0].Name, len(form.Fields[0].Options))
	}
	if form.Fields[1].Title != strings.Repeat("t", elicit.MaxTitle)+"…" {
		t.Errorf("a title of %d bytes kept", len(form.Fields[1].Title))
	}
	said := strings.Join(form.Clipped, "; ")
	for _, want := range []string{"11 more fields", "30 choices of a", "the end of the title of f00"} {
		if !strings.Contains(said, want) {
			t.Errorf("clipped %q does not say %q", said, want)
		}
	}
}

func TestCheckTurnsCardValuesIntoContent(t *testing.T) {
	raw := json.RawMessage(everyKind)
	form, err := elicit.Parse(raw, elicit.PropertyOrder(raw))
	if err != nil {
		t.Fatal(err)
	}
	// What an Adaptive Card sends: every input a string, a multi-select
	// its values joined by commas, empty inputs empty.
	got, problems := form.Check(map[string]any{
		"name": "Grace", "email": "grace@example.com", "site": "", "day": "2026-12-31", "at": "2026-12-31T09:30:00+01:00",
		"amount": "7.25", "count": "3", "confirm": "true", "size": "l", "colour": "", "plan": "pro", "tags": "a,c", "teams": "",
	})
	if problems != nil {
		t.Fatalf("problems %v", problems)
	}
	want := map[string]any{"name": "Grace", "email": "grace@example.com", "day": "2026-12-31", "at": "2026-12-31T09:30:00+01:00",
		"amount": 7.25, "count": int64(3), "confirm": true, "size": "l", "plan": "pro", "tags": []string{"a", "c"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}
	// JSON values (the view page's form) are taken as well.
	if _, problems := form.Check(map[string]any{"name": "Al", "email": "al@example.com", "confirm": false, "plan": "free", "amount": 1.0, "tags": []any{"b"}}); problems != nil {
		t.Errorf("JSON values: %v", problems)
	}
}

func TestCheckSaysWhatToCorrect(t *testing.T) {
	raw := json.RawMessage(everyKind)
	form, _ := elicit.Parse(raw, elicit.PropertyOrder(raw))
	_, problems := form.Check(map[string]any{
		"name": "A", "email": "not an address", "site": "example.com", "day": "31/12/2026", "at": "tomorrow",
		"amount": "1000", "count": "2.5", "confirm": "maybe", "size": "xl", "plan": "", "tags": "a,b,c", "teams": "z",
	})
	want := []elicit.Problem{
		{"name", "Your name: at least 2 characters."},
		{"email", "email: enter an email address, such as name@example.com."},
		{"site", "site: enter a full address, such as https://example.com/page."},
		{"day", "day: enter a date as year-month-day, such as 2026-12-31."},
		{"at", "at: enter a date and time with its offset, such as 2026-12-31T09:30:00+01:00."},
		{"amount", "amount: at most 100."},
		{"count", "count: enter a whole number."},
		{"confirm", "Confirm the refund: choose yes or no."},
		{"size", "size: choose one of the choices given."},
		{"plan", "plan is required."},
		{"tags", "tags: choose at most 2."},
		{"teams", "teams: choose among the choices given."},
	}
	if diff := cmp.Diff(want, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if _, problems := form.Check(map[string]any{"name": "   "}); problems[0].Message != "Your name is required." {
		t.Errorf("blanks for a required text: %v", problems[0])
	}
	if _, problems := form.Check(map[string]any{"name": strings.Repeat("x", elicit.MaxValue+1)}); problems[0].Message != "Your name: at most 2000 characters." {
		t.Errorf("an over-long value: %v", problems[0])
	}
}
