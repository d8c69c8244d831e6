package elicit_test

import (
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"teamsbot/elicit"
)

// FuzzParseAndCheck: any requested schema a server sends is read into a
// form within the bounds or refused with ErrSchema, never a panic; and
// any answer to a form read is either content of the form's own fields,
// each of its kind, or one problem per field in words.
func FuzzParseAndCheck(f *testing.F) {
	f.Add([]byte(everyKind), []byte(`{"name":"Ada","email":"a@example.com","confirm":"true","plan":"pro","tags":"a,b"}`))
	f.Add([]byte(`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"const":"x","title":"X"}]}}}}`), []byte(`{"a":["x","x"]}`))
	f.Add([]byte(`{"properties":{"n":{"type":"integer","minimum":1e308,"default":1e309}}}`), []byte(`{"n":"NaN"}`))
	f.Fuzz(func(t *testing.T, schema, answer []byte) {
		form, err := elicit.Parse(json.RawMessage(schema), elicit.PropertyOrder(schema))
		if err != nil {
			if !errors.Is(err, elicit.ErrSchema) {
				t.Fatalf("Parse: %v, not ErrSchema", err)
			}
			return
		}
		if len(form.Fields) > elicit.MaxFields {
			t.Fatalf("%d fields", len(form.Fields))
		}
		kinds := map[string]string{}
		for _, fd := range form.Fields {
			if len(fd.Options) > elicit.MaxOptions || len(fd.Title) > elicit.MaxTitle+len("…") || !utf8.ValidString(fd.Title) {
				t.Fatalf("field %q out of bounds", fd.Name)
			}
			kinds[fd.Name] = fd.Kind
		}
		var values map[string]any
		if json.Unmarshal(answer, &values) != nil {
			return
		}
		content, problems := form.Check(values)
		if problems != nil {
			if content != nil || len(problems) > len(form.Fields) {
				t.Fatalf("content %v with problems %v", content, problems)
			}
			for _, p := range problems {
				if _, ok := kinds[p.Field]; !ok || p.Message == "" {
					t.Fatalf("problem %+v", p)
				}
			}
			return
		}
		for name, v := range content {
			ok := false
			switch kinds[name] {
			case elicit.KindText, elicit.KindChoice:
				_, ok = v.(string)
			case elicit.KindNumber:
				_, ok = v.(float64)
			case elicit.KindInteger:
				_, ok = v.(int64)
			case elicit.KindBoolean:
				_, ok = v.(bool)
			case elicit.KindChoices:
				_, ok = v.([]string)
			}
			if !ok {
				t.Fatalf("content %q = %#v for a field of kind %q", name, v, kinds[name])
			}
		}
	})
}
