package viewpage

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"teamsbot/agent"
	"teamsbot/signin"
	"teamsbot/store"
)

// Errors the handlers return; ErrorHandler turns each into a status and a
// message that is safe to show.
var (
	// ErrNotFound: no such view (404).
	ErrNotFound = errors.New("viewpage: view not found")
	// ErrExpired: the view's 7 days are over (410).
	ErrExpired = errors.New("viewpage: view expired")
	// ErrForbidden: the view is not the caller's, or the caller may not run
	// its tools (403). Access implementations wrap it.
	ErrForbidden = errors.New("viewpage: forbidden")
	// ErrCallForbidden: the caller may open the view but not run its
	// tools (403). It wraps ErrForbidden.
	ErrCallForbidden = fmt.Errorf("%w: may not run this view's tools", ErrForbidden)
	// ErrMissingRole: the caller may see that the view is theirs (or, for
	// a run without a person, their tenant's) but lacks the app role
	// needed (403). It wraps ErrForbidden.
	ErrMissingRole = fmt.Errorf("%w: missing role", ErrForbidden)
	// ErrNoSession: nobody is signed in (401 for the API; the page
	// redirects to sign-in instead).
	ErrNoSession = errors.New("viewpage: not signed in")
	// ErrBadToken: a frame document was asked for without a valid,
	// unexpired token for it (403).
	ErrBadToken = errors.New("viewpage: bad frame token")
	// ErrNotFramed: a frame document was asked for outside a frame (403).
	ErrNotFramed = errors.New("viewpage: frame document outside a frame")
	// ErrCrossOrigin: a state-changing request came from another site (403).
	ErrCrossOrigin = errors.New("viewpage: cross-origin request")
	// ErrUnsupportedMediaType: the call body is not application/json (415).
	ErrUnsupportedMediaType = errors.New("viewpage: content type must be application/json")
	// ErrTooLarge: the call body exceeds MaxCallBodyBytes (413).
	ErrTooLarge = errors.New("viewpage: request body too large")
	// ErrToolUnavailable: the view's MCP server cannot be reached (502).
	ErrToolUnavailable = errors.New("viewpage: the view's server cannot be reached")
	// ErrToolFailed: the view's MCP server answered the call with an error
	// rather than a result (502). The agent's audit record says why.
	ErrToolFailed = errors.New("viewpage: the view's server failed the call")
	// ErrBadRequest: the call body is malformed (400).
	ErrBadRequest = errors.New("viewpage: bad request")
)

// publicError carries a message written for the person who sent the
// request, on top of the sentinel that decides the status.
type publicError struct {
	sentinel error
	public   string
	err      error
}

func (e *publicError) Error() string {
	if e.err != nil {
		return e.sentinel.Error() + ": " + e.public + ": " + e.err.Error()
	}
	return e.sentinel.Error() + ": " + e.public
}

func (e *publicError) Unwrap() []error {
	if e.err != nil {
		return []error{e.sentinel, e.err}
	}
	return []error{e.sentinel}
}

func badRequest(public string, err error) error {
	return &publicError{sentinel: ErrBadRequest, public: public, err: err}
}

// isExpired reports whether a store error says the view existed but has
// expired, as opposed to never having existed.
func isExpired(err error) bool {
	return errors.Is(err, store.ErrExpired)
}

// classify maps an error to a status and a message safe to show.
func classify(err error) (int, string) {
	var pe *publicError
	if errors.As(err, &pe) {
		status, msg := classify(pe.sentinel)
		return status, msg + ": " + pe.public
	}
	switch {
	case errors.Is(err, ErrExpired):
		return http.StatusGone, "This view has expired. Views are kept for 7 days; ask the agent again for a new one."
	case errors.Is(err, ErrNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "There is no such view. Check the link, or ask the agent again."
	case errors.Is(err, ErrCallForbidden):
		return http.StatusForbidden, "You may open this view but not run its tools."
	case errors.Is(err, ErrMissingRole):
		return http.StatusForbidden, "Your account lacks the role this needs (agents.read to open views, agents.run to run their tools). Ask your administrator."
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, "This view is not yours. A view can be opened only by the person the agent answered or, for a run without a person, by the tenant's agent readers."
	case errors.Is(err, ErrBadToken):
		return http.StatusForbidden, "This frame link is missing a valid token or has expired. Reload the page."
	case errors.Is(err, ErrNotFramed):
		return http.StatusForbidden, "This document is shown only inside its view page."
	case errors.Is(err, ErrCrossOrigin):
		return http.StatusForbidden, "Cross-site requests are not allowed."
	case errors.Is(err, agent.ErrToolNotAllowed):
		return http.StatusForbidden, "This view may not call that tool: only tools of its own server made for views can be called."
	case errors.Is(err, agent.ErrDenied):
		return http.StatusForbidden, "A policy denied this tool call."
	case errors.Is(err, ErrToolUnavailable):
		return http.StatusBadGateway, "The view's server cannot be reached right now. Try again in a moment."
	case errors.Is(err, ErrToolFailed):
		return http.StatusBadGateway, "The view's server could not run the tool."
	case errors.Is(err, agent.ErrBadRequest):
		return http.StatusBadRequest, "The tool call is not valid."
	case errors.Is(err, agent.ErrNotFound):
		return http.StatusNotFound, "There is no such tool."
	case errors.Is(err, ErrNoSession), errors.Is(err, signin.ErrNoSession):
		return http.StatusUnauthorized, "Sign in first."
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, "The request must be sent as Content-Type: application/json."
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "The request body is too large."
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, "The request is not valid"
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok && he.Code < 500 {
			msg = s
		}
		return he.Code, msg
	}
	return http.StatusInternalServerError, "Something went wrong on our side. Try again in a moment."
}

// errorPage is what error.html shows.
type errorPage struct {
	Status              int
	StatusText, Heading string
	Message             string
	CSS                 template.CSS
}

// ErrorHandler is the HTTP error handler for the whole server. It maps an
// error to a status and a safe message: JSON {"error": "..."} for paths
// under /api/, a small HTML page elsewhere. It logs 5xx errors with their
// whole chain; 4xx are the caller's and are not logged. A nil logger
// discards.
func ErrorHandler(logger *slog.Logger) echo.HTTPErrorHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Built once per server; the embedded template is known to parse
	// (TestErrorHandler renders it).
	errorDoc := template.Must(template.New("error").Parse(errorHTML))
	errorCSP := "default-src 'none'; style-src " + hashSource(pageCSS) +
		"; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		r := c.Request()
		status, msg := classify(err)
		if status >= 500 {
			logger.ErrorContext(r.Context(), "request failed",
				"method", r.Method, "path", r.URL.Path, "status", status, "err", err.Error())
		}
		hd := c.Response().Header()
		hd.Set("Cache-Control", "no-store")
		hd.Set("X-Content-Type-Options", "nosniff")
		if r.Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			_ = c.JSON(status, map[string]string{"error": msg})
			return
		}
		heading := http.StatusText(status)
		switch status {
		case http.StatusForbidden:
			heading = "You cannot open this"
		case http.StatusGone:
			heading = "This view has expired"
		case http.StatusNotFound:
			heading = "Not found"
		}
		var b bytes.Buffer
		if err := errorDoc.Execute(&b, errorPage{
			Status: status, StatusText: http.StatusText(status), Heading: heading,
			Message: msg, CSS: template.CSS(pageCSS),
		}); err != nil {
			_ = c.String(status, msg)
			return
		}
		hd.Set("Content-Security-Policy", errorCSP)
		_ = c.HTMLBlob(status, b.Bytes())
	}
}
