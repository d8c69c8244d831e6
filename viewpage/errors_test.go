package viewpage_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/web"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// Classify gives each error of the view page (and of the packages it
// calls) its status and a message for the person; web.ErrorHandler, tested
// in its own package, writes them out. Errors it does not know are left to
// the handler's 500.
func TestClassify(t *testing.T) {
	cases := []struct {
		err    error
		status int
		says   string
	}{
		{fmt.Errorf("view x: %w", viewpage.ErrNotFound), 404, "no such view"},
		{fmt.Errorf("view x: %w", store.ErrNotFound), 404, "no such view"},
		{fmt.Errorf("view x: %w", viewpage.ErrExpired), 410, "expired"},
		{fmt.Errorf("view x: %w", &access.DeniedError{Reason: "this view is not yours"}), 403, "not yours"},
		{fmt.Errorf("view x: %w", &access.DeniedError{Missing: access.PermRead, Reason: "opening your views needs the agents.read role"}), 403, "Opening your views needs the agents.read role"},
		{fmt.Errorf("view x: %w", access.ErrUnavailable), 503, "cannot be checked"},
		{fmt.Errorf("call: %w: %w", agent.ErrDenied, access.ErrUnavailable), 503, "cannot be checked"},
		{fmt.Errorf("proxy: %w", viewpage.ErrBadToken), 403, "token"},
		{fmt.Errorf("call: %w", agent.ErrToolNotAllowed), 403, "may not call that tool"},
		{fmt.Errorf("call: %w", agent.ErrDenied), 403, "policy denied"},
		{viewpage.ErrUnsupportedMediaType, 415, "application/json"},
		{fmt.Errorf("call: %w", viewpage.ErrToolUnavailable), 502, "cannot be reached"},
		{fmt.Errorf("call: %w", viewpage.ErrToolFailed), 502, "could not run the tool"},
		{fmt.Errorf("call: %w", viewpage.ErrNotConnected), 403, "connect it again by asking the assistant in Teams"},
		{fmt.Errorf("call: %w", agent.ErrBadRequest), 400, "not valid"},
		{fmt.Errorf("page: %w", signin.ErrNoSession), 401, "Sign in first"},
	}
	for _, c := range cases {
		we := viewpage.Classify(c.err)
		if we == nil {
			t.Errorf("%v: not classified", c.err)
			continue
		}
		if we.Status != c.status || !strings.Contains(we.Message, c.says) {
			t.Errorf("%v: %d %q, want %d saying %q", c.err, we.Status, we.Message, c.status, c.says)
		}
		if !errors.Is(we, errors.Unwrap(c.err)) && !errors.Is(we, c.err) {
			t.Errorf("%v: the classified error lost its cause", c.err)
		}
	}
	if we := viewpage.Classify(errors.New("bbolt: page 42 corrupt")); we != nil {
		t.Errorf("an unknown error was classified as %d %q; it must reach the handler's 500", we.Status, we.Message)
	}
	if we := web.Classify(errors.New("bbolt: page 42 corrupt"), viewpage.Classify); we.Status != 500 || strings.Contains(we.Message, "bbolt") {
		t.Errorf("unknown error answered %d %q", we.Status, we.Message)
	}
}
