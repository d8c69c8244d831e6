package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// runBody is a call's body as a handler declares it.
type runBody struct {
	Text         string `json:"text"`
	Conversation string `json:"conversation"`
}

// ruleBody has the kinds of field the admin API takes.
type ruleBody struct {
	DenyTools []string            `json:"denyTools"`
	Perms     map[string][]string `json:"appPermissions"`
	Version   uint64              `json:"version"`
	Count     int                 `json:"count"`
	Ratio     float64             `json:"ratio"`
	On        bool                `json:"on"`
	Maybe     *bool               `json:"maybe"`
	At        time.Time           `json:"at"`
	Sub       struct {
		Name string `json:"name"`
	} `json:"sub"`
	Extra map[string]any `json:"extra"`
	Meta  `json:"meta"`
}

// Meta is embedded with a tag, so it is a field of its own.
type Meta struct {
	Owner string `json:"owner"`
}

// activityBody embeds a struct without a tag, as bot's inbound embeds the
// Bot Framework's activity: its fields are the body's own.
type activityBody struct {
	activityBase
	Entities []string `json:"entities"`
}

type activityBase struct {
	Type        string         `json:"type"`
	ChannelData map[string]any `json:"channelData"`
}

// answerBody answers and takes: only some of its fields are the call's.
type answerBody struct {
	Name      string    `json:"name"`
	Agent     string    `json:"agent"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

func (*answerBody) JSONFields() []string { return []string{"name", "agent"} }

// decodeStrict decodes as ReadJSON does, without the HTTP around it.
func decodeStrict(body string, v any) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Every way a JSON body goes wrong is said in plain words that name the
// field and what it takes, and hold none of encoding/json's own words or
// Go's type names.
func TestJSONWords(t *testing.T) {
	cases := []struct {
		body  string
		shape any
		want  string
	}{
		{`{"txt":"hi"}`, &runBody{}, "`txt` is not a field of this call; did you mean `text`? It takes `text` and `conversation`."},
		{`{"user":"x"}`, &runBody{}, "`user` is not a field of this call; it takes `text` and `conversation`."},
		{`{"createdBy":"x"}`, &answerBody{}, "`createdBy` is not a field of this call; it takes `name` and `agent`."},
		{`{"text":5}`, &runBody{}, "`text` must be a string, not a number."},
		{`{"text":true}`, &runBody{}, "`text` must be a string, not true or false."},
		{`{"text":{}}`, &runBody{}, "`text` must be a string, not an object."},
		{`{"text":[]}`, &runBody{}, "`text` must be a string, not a list."},
		{`{"denyTools":"a"}`, &ruleBody{}, "`denyTools` must be a list of strings, not a string."},
		{`{"denyTools":[1]}`, &ruleBody{}, "Every item of `denyTools` must be a string, not a number."},
		{`{"appPermissions":["camera"]}`, &ruleBody{}, "`appPermissions` must be an object of lists of strings, not a list."},
		{`{"appPermissions":{"demo":"camera"}}`, &ruleBody{}, "Every value in `appPermissions` must be a list of strings, not a string."},
		{`{"appPermissions":{"demo":[1]}}`, &ruleBody{}, "`appPermissions` must be an object of lists of strings; it holds a number where a string belongs."},
		{`{"version":-1}`, &ruleBody{}, "`version` must be a whole number of 0 or more, not -1."},
		{`{"version":1.5}`, &ruleBody{}, "`version` must be a whole number of 0 or more, not 1.5."},
		{`{"version":"1"}`, &ruleBody{}, "`version` must be a whole number of 0 or more, not a string."},
		{`{"count":"x"}`, &ruleBody{}, "`count` must be a whole number, not a string."},
		{`{"ratio":"x"}`, &ruleBody{}, "`ratio` must be a number, not a string."},
		{`{"on":"yes"}`, &ruleBody{}, "`on` must be true or false, not a string."},
		{`{"maybe":"yes"}`, &ruleBody{}, "`maybe` must be true or false, not a string."},
		{`{"sub":{"name":5}}`, &ruleBody{}, "`sub.name` must be a string, not a number."},
		{`{"sub":[]}`, &ruleBody{}, "`sub` must be an object, not a list."},
		{`{"extra":"x"}`, &ruleBody{}, "`extra` must be an object, not a string."},
		{`{"meta":{"owner":1}}`, &ruleBody{}, "`meta.owner` must be a string, not a number."},
		{`{"type":5}`, &activityBody{}, "`type` must be a string, not a number."},
		{`{"channelData":"x"}`, &activityBody{}, "`channelData` must be an object, not a string."},
		{`{"entities":{}}`, &activityBody{}, "`entities` must be a list of strings, not an object."},
		{`[1]`, &runBody{}, "The body must be a JSON object with `text` and `conversation`, not a list."},
		{`"hi"`, &runBody{}, "The body must be a JSON object with `text` and `conversation`, not a string."},
		{``, &runBody{}, "The body is empty: send a JSON object with `text` and `conversation`."},
		{`{"text":`, &runBody{}, "The body is not valid JSON: it ends before its JSON value is complete."},
		{`{"text":}`, &runBody{}, "The body is not valid JSON (at byte 9)."},
		{`{"text" "hi"}`, &runBody{}, "The body is not valid JSON (at byte 9)."},
		{`text=hi`, &runBody{}, "The body is not valid JSON (at byte 2)."},
	}
	for _, c := range cases {
		err := decodeStrict(c.body, c.shape)
		if err == nil {
			t.Fatalf("%s decoded", c.body)
		}
		got := JSONWords(err, c.shape)
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.body, got, c.want)
		}
		for _, bad := range []string{"json:", "Go struct", "Go value", "unmarshal", "map[", "[]string", "uint64", "invalid character", "unexpected EOF", "web."} {
			if strings.Contains(got, bad) {
				t.Errorf("%s: the words hold %q: %s", c.body, bad, got)
			}
		}
	}
	// json.Unmarshal (the bot reads a whole body first) says an empty or
	// cut body with a SyntaxError; the words are the same.
	var in runBody
	if got := JSONWords(json.Unmarshal(nil, &in), &in); got != "The body is empty: send a JSON object with `text` and `conversation`." {
		t.Errorf("Unmarshal of nothing: %s", got)
	}
	if got := JSONWords(json.Unmarshal([]byte(`{"text":"a`), &in), &in); got != "The body is not valid JSON: it ends before its JSON value is complete." {
		t.Errorf("Unmarshal of a cut body: %s", got)
	}
	// A field that refuses its value itself (time.Time's UnmarshalJSON)
	// gets the call's shape, never its error's text.
	if got := JSONWords(decodeStrict(`{"at":"noon"}`, &ruleBody{}), &ruleBody{}); strings.Contains(got, "parsing time") || !strings.Contains(got, "not the JSON this call takes") {
		t.Errorf("a time that does not parse: %s", got)
	}
}

// ReadJSON over HTTP: one object of the call's fields, or a 400 (413 over
// the limit) in plain words, the decoder's error kept as the cause.
func TestReadJSON(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(nil)
	e.POST("/api/runs", func(c echo.Context) error {
		var in runBody
		if err := ReadJSON(c, &in, 64); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, in)
	})
	for _, c := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"text":"hi","conversation":"c"}`, 200, `"text":"hi"`},
		{"{\"text\":\"hi\"}\n  \n", 200, `"text":"hi"`},
		{`{"text":"hi"} {"text":"again"}`, 400, "The body goes on after its JSON object (after byte 13): send one JSON object with `text` and `conversation`."},
		{`{"text":"hi"} x`, 400, "The body goes on after its JSON object (after byte 13)"},
		{`{"text":"` + strings.Repeat("a", 100) + `"}`, 413, "The body is larger than 64 bytes, the most this call takes."},
		{`{"text":"hi"}` + strings.Repeat(" ", 100), 413, "larger than 64 bytes"},
		{`{"txt":"hi"}`, 400, "did you mean `text`?"},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/api/runs", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		e.ServeHTTP(rec, req)
		if rec.Code != c.status || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%.40s: %d %s, want %d with %q", c.body, rec.Code, rec.Body, c.status, c.want)
		}
	}
	// The cause stays for errors.As and the log.
	c := e.NewContext(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"text":5}`)), httptest.NewRecorder())
	var ute *json.UnmarshalTypeError
	if err := ReadJSON(c, &runBody{}, 64); !errors.As(err, &ute) {
		t.Errorf("the decoder's error is not the cause: %v", err)
	}
	c = e.NewContext(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat(" ", 100))), httptest.NewRecorder())
	var mbe *http.MaxBytesError
	if err := ReadJSON(c, &runBody{}, 64); !errors.As(err, &mbe) {
		t.Errorf("a body over the limit is not a MaxBytesError: %v", err)
	}
}

// worded is an error with words for a person, as the store's and the
// triggers' refusals are.
type worded struct{ text, words string }

func (w *worded) Error() string { return w.text }
func (w *worded) Words() string { return w.words }

// Words reads the words of every Worded error in a tree, through
// wrapping and joining, and never the text around them.
func TestWords(t *testing.T) {
	name := &worded{"triggers: invalid: the name is empty", "give it a name"}
	cron := &worded{"triggers: invalid: schedule", "schedule `x`: it has 1 field"}
	err := fmt.Errorf("triggers: admin.trigger.create: %w", errors.Join(name, fmt.Errorf("store: put: %w", cron), errors.New("store: invalid")))
	if got, want := Words(err), "give it a name\nschedule `x`: it has 1 field"; got != want {
		t.Errorf("Words = %q, want %q", got, want)
	}
	if got := Words(errors.New("store: not found")); got != "" {
		t.Errorf("Words of an error without words = %q", got)
	}
	if got := Words(nil); got != "" {
		t.Errorf("Words(nil) = %q", got)
	}
	if got, want := Sentence("give it a name\nschedule `x`: it has 1 field"), "Give it a name.\nSchedule `x`: it has 1 field."; got != want {
		t.Errorf("Sentence = %q, want %q", got, want)
	}
	if got := Sentence("é déjà vu?"); got != "É déjà vu?" {
		t.Errorf("Sentence keeps its own punctuation and capitalises any letter: %q", got)
	}
}

// The router's own refusals are said in words: an address with nothing
// behind it, and a method the address does not take, named with those it
// does.
func TestRouterRefusalsInWords(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(nil)
	ok := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	e.GET("/api/things", ok)
	e.POST("/api/things", ok)
	e.GET("/page", ok)
	for _, c := range []struct {
		method, path string
		status       int
		want         string
	}{
		{http.MethodGet, "/api/nothing", 404, "There is nothing at this address. Check the link"},
		{http.MethodGet, "/nothing", 404, "There is nothing at this address. Check the link"},
		{http.MethodPut, "/api/things", 405, "This address does not take a PUT request; it takes GET and POST."},
		{http.MethodDelete, "/page", 405, "This address does not take a DELETE request; it takes GET."},
		{"BREW-COFFEE", "/page", 405, "This address does not take this kind of request; it takes GET."},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		body, _ := io.ReadAll(rec.Body)
		if rec.Code != c.status || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.path, rec.Code, body, c.status, c.want)
		}
	}
}
