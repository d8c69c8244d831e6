package web

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

var errMine = errors.New("mine")

// One handler for every part: an *Error anywhere in the chain decides, then
// the classifiers, then Echo's own errors, then a 500 that gives nothing
// away. JSON under /api/, an HTML page under a strict CSP elsewhere.
func TestErrorHandler(t *testing.T) {
	var logs bytes.Buffer
	classify := func(err error) *Error {
		if errors.Is(err, errMine) {
			return &Error{Status: http.StatusConflict, Message: "Mine, classified.", Heading: "Conflict here"}
		}
		return nil
	}
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(slog.New(slog.NewTextHandler(&logs, nil)), classify)
	secret := errors.New("bbolt: page 42 corrupt at /var/lib/teamsbot/teamsbot.db")
	cases := []struct {
		err     error
		status  int
		says    string
		heading string
	}{
		{fmt.Errorf("wrapped: %w", NewError(http.StatusForbidden, "Not for you.")), 403, "Not for you.", "You cannot open this"},
		{NewError(http.StatusBadGateway, "Upstream is down.").Wrap(secret), 502, "Upstream is down.", "Bad Gateway"},
		{&Error{Status: 400, Message: "Try again.", Link: &Link{Href: "/signin?return=%2Fx", Text: "Start again"}}, 400, "Try again.", "Bad Request"},
		{fmt.Errorf("x: %w", errMine), 409, "Mine, classified.", "Conflict here"},
		{echo.NewHTTPError(http.StatusMethodNotAllowed, "Method Not Allowed"), 405, "Method Not Allowed", "Method Not Allowed"},
		{echo.ErrNotFound, 404, "There is nothing at this address. Check the link", "Not found"},
		{&Error{Status: 200, Message: "not an error status"}, 500, "not an error status", "Internal Server Error"},
		{fmt.Errorf("load: %w", secret), 500, "went wrong on our side", "Internal Server Error"},
	}
	for i, c := range cases {
		for _, prefix := range []string{"/api/case", "/page/case"} {
			path := fmt.Sprintf("%s%d", prefix, i)
			e.GET(path, func(echo.Context) error { return c.err })
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			body := rec.Body.String()
			if rec.Code != c.status {
				t.Errorf("%s (%v): status %d, want %d", path, c.err, rec.Code, c.status)
			}
			if !strings.Contains(body, c.says) {
				t.Errorf("%s: body %q does not say %q", path, body, c.says)
			}
			if strings.Contains(body, "bbolt") || strings.Contains(body, "/var/lib") {
				t.Errorf("%s: body leaks the error chain: %s", path, body)
			}
			if rec.Header().Get("Cache-Control") != "no-store" || rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: headers %v", path, rec.Header())
			}
			ct := rec.Header().Get("Content-Type")
			if strings.HasPrefix(path, "/api/") {
				if !strings.HasPrefix(ct, "application/json") || !strings.HasPrefix(body, `{"error":`) {
					t.Errorf("%s: %s %s, want JSON {\"error\": ...}", path, ct, body)
				}
				continue
			}
			csp := rec.Header().Get("Content-Security-Policy")
			if !strings.HasPrefix(ct, "text/html") || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: %s, CSP %q, want an HTML page under a strict CSP", path, ct, csp)
			}
			if we := Classify(c.err); we.Link != nil && !strings.Contains(body, `<a href="`+we.Link.Href+`">`+we.Link.Text+`</a>`) {
				t.Errorf("%s: the page does not offer %+v: %s", path, *we.Link, body)
			}
			if !strings.Contains(body, "<h1>"+c.heading+"</h1>") {
				t.Errorf("%s: heading is not %q: %s", path, c.heading, body)
			}
		}
	}
	out := logs.String()
	if !strings.Contains(out, "page 42 corrupt") || !strings.Contains(out, "load:") {
		t.Errorf("the 5xx was not logged with its chain: %q", out)
	}
	if strings.Contains(out, "status=403") || strings.Contains(out, "status=409") {
		t.Errorf("4xx errors were logged: %q", out)
	}

	// HEAD gets the status alone.
	e.HEAD("/head", func(echo.Context) error { return NewError(http.StatusGone, "gone") })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodHead, "/head", nil))
	if rec.Code != http.StatusGone || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d %q", rec.Code, rec.Body.String())
	}
}

// A page's message and link are text: markup in them is escaped.
func TestErrorPageEscapes(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(nil)
	e.GET("/x", func(echo.Context) error {
		return &Error{Status: 400, Message: "<script>alert(1)</script>", Link: &Link{Href: "javascript:alert(1)", Text: "<b>go</b>"}}
	})
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	body := rec.Body.String()
	if strings.Contains(body, "<script>") || strings.Contains(body, "<b>go") || strings.Contains(body, `href="javascript:`) {
		t.Errorf("markup reached the page: %s", body)
	}
}

func TestErrorUnwraps(t *testing.T) {
	err := fmt.Errorf("outer: %w", NewError(http.StatusTeapot, "short and stout").Wrap(errMine))
	if !errors.Is(err, errMine) {
		t.Error("the cause is lost")
	}
	if got := Classify(err); got.Status != http.StatusTeapot || got.Message != "short and stout" {
		t.Errorf("Classify = %+v", got)
	}
}
