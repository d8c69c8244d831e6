package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/suggest"
)

// JSONFields is implemented by a body type whose struct also carries
// fields of the answer: it names the fields a call takes, for the words
// of a refusal. Without it, every JSON field of the struct is named.
type JSONFields interface {
	JSONFields() []string
}

// ReadJSON decodes the request body, at most limit bytes, into v: one JSON
// value, unknown fields refused, nothing but space after it. A body that
// is not what v takes is answered by JSONError's *Error: 400 (413 over
// the limit) with what is wrong in plain words.
func ReadJSON(c echo.Context, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return JSONError(err, v)
	}
	end := dec.InputOffset()
	var more json.RawMessage
	switch err := dec.Decode(&more); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil && !isSyntax(err):
		return JSONError(err, v)
	}
	return &Error{Status: http.StatusBadRequest, Err: errJSONTrailer,
		Message: fmt.Sprintf("The body goes on after its JSON object (after byte %d): send one JSON object%s.", end, withFields(v))}
}

// errJSONTrailer is the cause of a body that holds more than one value.
var errJSONTrailer = errors.New("JSON body: data after the value")

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF)
}

// JSONError answers an error of decoding a JSON body (encoding/json's,
// or http.MaxBytesReader's) into shape, the value the call takes: 413
// naming the limit for a body over it, else 400 saying what is wrong in
// plain words, Go's own words and type names left for the log (the cause).
func JSONError(err error, shape any) *Error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &Error{Status: http.StatusRequestEntityTooLarge, Err: err,
			Message: "The body is larger than " + Bytes(mbe.Limit) + ", the most this call takes."}
	}
	return &Error{Status: http.StatusBadRequest, Message: JSONWords(err, shape), Err: err}
}

// JSONWords says in plain words what is wrong with a JSON body that did
// not decode into shape: the field that is not one of the call's (with
// the one meant, when one is near, and the ones it takes), the field of
// the wrong kind and the kind it takes, or where the JSON breaks.
func JSONWords(err error, shape any) string {
	t := reflect.TypeOf(shape)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	// json.Unmarshal says of a body that ends early what a Decoder says
	// with io.EOF (nothing at all) or io.ErrUnexpectedEOF.
	truncated := errors.As(err, &se) && se.Error() == "unexpected end of JSON input"
	switch {
	case errors.Is(err, io.EOF), truncated && se.Offset == 0:
		return "The body is empty: send a JSON object" + withFields(shape) + "."
	case errors.Is(err, io.ErrUnexpectedEOF), truncated:
		return "The body is not valid JSON: it ends before its JSON value is complete."
	case se != nil:
		return fmt.Sprintf("The body is not valid JSON (at byte %d).", se.Offset)
	case errors.As(err, &te):
		return typeWords(te, t, shape)
	}
	if name, ok := unknownField(err); ok {
		fields := fieldsOf(shape)
		msg := "`" + name + "` is not a field of this call"
		if near, ok := suggest.Closest(name, fields); ok {
			msg += "; did you mean `" + near + "`?"
			if len(fields) > 0 {
				msg += " It takes " + list(fields) + "."
			}
			return msg
		}
		if len(fields) > 0 {
			msg += "; it takes " + list(fields)
		}
		return msg + "."
	}
	return "The body is not the JSON this call takes: send a JSON object" + withFields(shape) + "."
}

// unknownField returns the field a Decoder with DisallowUnknownFields
// refused. encoding/json has no type for this error, only its text.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), `json: unknown field `)
	if !ok {
		return "", false
	}
	name, uerr := strconv.Unquote(rest)
	if uerr != nil {
		return "", false
	}
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return strings.ToValidUTF8(name, "�"), true
}

// typeWords says which field holds the wrong kind of value, and the kind
// it takes.
func typeWords(te *json.UnmarshalTypeError, t reflect.Type, shape any) string {
	got := valueWords(te.Value)
	if te.Field == "" {
		return "The body must be a JSON object" + withFields(shape) + ", not " + got + "."
	}
	name, declared := fieldPath(t, te.Field)
	// A pointer field (one a call may leave out) takes what it points to:
	// encoding/json reports the type it points to.
	for declared != nil && declared.Kind() == reflect.Pointer {
		declared = declared.Elem()
	}
	switch {
	case declared == nil || declared == te.Type:
		return fmt.Sprintf("`%s` must be %s, not %s.", name, kindWords(te.Type), got)
	case (declared.Kind() == reflect.Slice || declared.Kind() == reflect.Array) && declared.Elem() == te.Type:
		return fmt.Sprintf("Every item of `%s` must be %s, not %s.", name, kindWords(te.Type), got)
	case declared.Kind() == reflect.Map && declared.Elem() == te.Type:
		return fmt.Sprintf("Every value in `%s` must be %s, not %s.", name, kindWords(te.Type), got)
	}
	return fmt.Sprintf("`%s` must be %s; it holds %s where %s belongs.", name, kindWords(declared), got, kindWords(te.Type))
}

// valueWords names the kind of JSON value encoding/json found: its
// UnmarshalTypeError.Value ("number", "number -1", "string", "array"...).
func valueWords(v string) string {
	switch {
	case v == "array":
		return "a list"
	case v == "object":
		return "an object"
	case v == "bool":
		return "true or false"
	case v == "number", v == "string":
		return "a " + v
	case strings.HasPrefix(v, "number "):
		n := strings.TrimPrefix(v, "number ")
		if len(n) > 32 {
			n = n[:32] + "…"
		}
		return n
	}
	return "a value of another kind"
}

// kindWords names the kind of JSON value a Go type takes.
func kindWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number of 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a string" // base64
		}
		if s := pluralWords(t.Elem()); s != "" {
			return "a list of " + s
		}
		return "a list"
	case reflect.Map:
		if s := pluralWords(t.Elem()); s != "" {
			return "an object of " + s
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	}
	return "a JSON value"
}

var textUnmarshaler = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()

// pluralWords names many values of a Go type, or "" for any value.
func pluralWords(t reflect.Type) string {
	if t.Kind() == reflect.Interface {
		return ""
	}
	w := kindWords(t)
	switch {
	case w == "true or false":
		return "true or false values"
	case w == "a JSON value":
		return ""
	case strings.HasPrefix(w, "a list"):
		return "lists" + strings.TrimPrefix(w, "a list")
	case strings.HasPrefix(w, "an object"):
		return "objects" + strings.TrimPrefix(w, "an object")
	case strings.HasPrefix(w, "a whole number"):
		return "whole numbers" + strings.TrimPrefix(w, "a whole number")
	}
	return strings.TrimPrefix(w, "a ") + "s"
}

// fieldPath finds the field of struct type t that encoding/json's dotted
// path names, and returns its JSON name path and its type (nil when it
// cannot be found). The Go names of embedded structs in the path are
// left out of the name.
func fieldPath(t reflect.Type, path string) (string, reflect.Type) {
	var names []string
	cur := t
	for seg := range strings.SplitSeq(path, ".") {
		for cur != nil && cur.Kind() == reflect.Pointer {
			cur = cur.Elem()
		}
		if cur == nil || cur.Kind() != reflect.Struct {
			return strings.Join(append(names, seg), "."), nil
		}
		f, embedded, ok := jsonField(cur, seg)
		if !ok {
			return strings.Join(append(names, seg), "."), nil
		}
		if !embedded {
			names = append(names, seg)
		}
		cur = f.Type
	}
	return strings.Join(names, "."), cur
}

// jsonField finds the field of struct type t named name in JSON, or the
// embedded struct whose Go name it is (embedded true).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous && f.Name == name {
			return f, true, true
		}
		if n, ok := jsonName(f); ok && n == name {
			return f, false, true
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && ft.Kind() == reflect.Struct {
			if _, tagged := f.Tag.Lookup("json"); !tagged {
				if g, _, ok := jsonField(ft, name); ok {
					return g, false, true
				}
			}
		}
	}
	return reflect.StructField{}, false, false
}

// jsonName is the name of a struct field in JSON, or false for a field
// JSON leaves out.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() && !f.Anonymous {
		return "", false
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		if f.Anonymous {
			return "", false
		}
		name = f.Name
	}
	return name, true
}

// maxNamedFields is the most fields a refusal lists; a larger shape (an
// activity of the Bot Framework) is not listed.
const maxNamedFields = 8

// fieldsOf lists the JSON fields shape takes: its JSONFields, or those of
// its struct type, embedded structs' included.
func fieldsOf(shape any) []string {
	if f, ok := shape.(JSONFields); ok {
		return f.JSONFields()
	}
	t := reflect.TypeOf(shape)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if n, ok := jsonName(f); ok {
				out = append(out, n)
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if f.Anonymous && ft.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
				walk(ft)
			}
		}
	}
	walk(t)
	return out
}

// withFields is " with `a`, `b` and `c`" for the fields shape takes, or
// "" when there are none or too many to list.
func withFields(shape any) string {
	fields := fieldsOf(shape)
	if len(fields) == 0 || len(fields) > maxNamedFields {
		return ""
	}
	return " with " + list(fields)
}

// list writes names as "`a`, `b` and `c`".
func list(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// Bytes writes a size for a person: whole KiB or MiB when it is one,
// else bytes.
func Bytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
