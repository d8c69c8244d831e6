package viewpage_test

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

	"teamsbot/agent"
	"teamsbot/internal/web"
	"teamsbot/viewpage"
)

// One error handler for the whole server: each error becomes a status and
// a safe message, JSON {"error": ...} under /api/ and a small HTML page
// elsewhere; a 5xx is logged with its whole chain, and its details never
// reach the person.
func TestErrorHandler(t *testing.T) {
	var logs bytes.Buffer
	e := echo.New()
	e.HTTPErrorHandler = web.ErrorHandler(slog.New(slog.NewTextHandler(&logs, nil)), viewpage.Classify)
	secret := errors.New("bbolt: page 42 corrupt at /var/lib/teamsbot/teamsbot.db")
	cases := []struct {
		err    error
		status int
		says   string
	}{
		{fmt.Errorf("view x: %w", viewpage.ErrNotFound), 404, "no such view"},
		{fmt.Errorf("view x: %w", viewpage.ErrExpired), 410, "expired"},
		{fmt.Errorf("view x: %w", viewpage.ErrForbidden), 403, "not yours"},
		{fmt.Errorf("view x: %w", viewpage.ErrMissingRole), 403, "agents.read"},
		{fmt.Errorf("tool x: %w: %w", viewpage.ErrCallForbidden, viewpage.ErrMissingRole), 403, "not run its tools"},
		{fmt.Errorf("proxy: %w", viewpage.ErrBadToken), 403, "token"},
		{fmt.Errorf("call: %w", agent.ErrToolNotAllowed), 403, "may not call that tool"},
		{fmt.Errorf("call: %w", agent.ErrDenied), 403, "policy denied"},
		{viewpage.ErrUnsupportedMediaType, 415, "application/json"},
		{fmt.Errorf("call: %w", viewpage.ErrToolUnavailable), 502, "cannot be reached"},
		{fmt.Errorf("call: %w", viewpage.ErrToolFailed), 502, "could not run the tool"},
		{fmt.Errorf("call: %w", agent.ErrBadRequest), 400, "not valid"},
		{echo.NewHTTPError(http.StatusMethodNotAllowed, "Method Not Allowed"), 405, "Method Not Allowed"},
		{fmt.Errorf("load: %w", secret), 500, "went wrong on our side"},
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
			ct := rec.Header().Get("Content-Type")
			if strings.HasPrefix(path, "/api/") {
				if !strings.HasPrefix(ct, "application/json") || !strings.HasPrefix(body, `{"error":`) {
					t.Errorf("%s: %s %s, want JSON {\"error\": ...}", path, ct, body)
				}
			} else if !strings.HasPrefix(ct, "text/html") || !strings.Contains(rec.Header().Get("Content-Security-Policy"), "default-src 'none'") {
				t.Errorf("%s: %s, CSP %q, want an HTML page under a strict CSP", path, ct, rec.Header().Get("Content-Security-Policy"))
			}
		}
	}
	out := logs.String()
	if !strings.Contains(out, "page 42 corrupt") || !strings.Contains(out, "load:") {
		t.Errorf("the 5xx was not logged with its chain: %q", out)
	}
	if strings.Contains(out, "status=403") || strings.Contains(out, "status=404") {
		t.Errorf("4xx errors were logged: %q", out)
	}
}
