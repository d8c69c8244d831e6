package testenv

import (
	"encoding/json"
	"html"
	"regexp"
	"strings"
)

// internals are what no message a person reads may hold: the service's
// package prefixes, Go's own error words and type names, the sentinels'
// texts. Operators read them in the log; people never do.
func internals() []string {
	return []string{
		"store:", "access:", "triggers:", "agent:", "bot:", "viewpage:", "signin:", "playground:", "admin:",
		"graph:", "web:", "json:", "http:", "demo:", "mcpapps:", "clientcred:", "oidc:", "oauth2:",
		"Go struct", "Go value", "struct field", "map[string]", "interface {}", "[]string", "uint64", "int64",
		"unmarshal", "looking for beginning", "unexpected EOF", "unexpected end of JSON", "invalid character", "MaxBytes",
		"version conflict", "not found:", "invalid:", "%!",
	}
}

// Leaks returns the internals msg holds: none, for a message fit for a
// person.
func Leaks(msg string) []string {
	var out []string
	for _, w := range internals() {
		if strings.Contains(msg, w) {
			out = append(out, w)
		}
	}
	return out
}

// alertRe finds the message of an HTML page: the error page's and the
// admin console's alert alike.
var alertRe = regexp.MustCompile(`(?s)role="alert">(.*?)</p>`)

// AnswerWords is the message an HTTP answer gives a person: a JSON body's
// error and problems, or an HTML page's alert, as text; "" when it has
// none.
func AnswerWords(contentType string, body []byte) string {
	if strings.HasPrefix(contentType, "application/json") {
		var e struct {
			Error    string   `json:"error"`
			Problems []string `json:"problems"`
		}
		_ = json.Unmarshal(body, &e)
		return strings.TrimSpace(strings.Join(append([]string{e.Error}, e.Problems...), "\n"))
	}
	if m := alertRe.FindSubmatch(body); m != nil {
		return html.UnescapeString(string(m[1]))
	}
	return ""
}
