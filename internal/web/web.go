// Package web owns the HTTP conventions every part of the service follows:
// an Error that carries the status and a message written for the person,
// the one error handler that turns any error into a response (JSON under
// /api/, a small HTML page elsewhere), the security headers of pages and
// documents that are not to be cached, and the request log.
//
// The parts (bot, signin, viewpage) return errors; only this package
// writes them out. It knows none of the parts' own errors: a part either
// returns an *Error, or hands the wiring a Classifier for its sentinels.
package web

import (
	"bytes"
	_ "embed"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"teamsbot/internal/web/csp"
)

// Error is an error with the status to answer and a message that is safe
// to show the person who sent the request. Err, the cause, is logged for a
// 5xx and never shown.
type Error struct {
	Status int
	// Message is shown as it is: write it for the person.
	Message string
	// Heading titles the HTML page; empty means one chosen from the status.
	Heading string
	// Link, when set, is offered on the HTML page as the next step.
	Link *Link
	// Err is the cause, for errors.Is and the log.
	Err error
	// Logged says the cause was logged where it happened, so a 5xx is
	// not logged again.
	Logged bool
}

// Link is a next step offered on an error page.
type Link struct {
	Href, Text string
}

// NewError returns an Error with a status and a safe message.
func NewError(status int, message string) *Error {
	return &Error{Status: status, Message: message}
}

// Wrap returns a copy of e with err as its cause.
func (e *Error) Wrap(err error) *Error {
	c := *e
	c.Err = err
	return &c
}

// Error is the status, the message and the cause.
func (e *Error) Error() string {
	s := http.StatusText(e.Status) + ": " + e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Worded is an error that says what went wrong in words fit for the
// person whose request it was: no package prefix, no Go type, no record
// key. Its Error may say more, for the log. A package implements it
// without importing this one (the store's ErrInvalid reasons, the
// triggers' refusals), and the part that answers the person reads the
// words with Words.
type Worded interface {
	error
	Words() string
}

// Words returns the words of the Worded errors in err's tree, in order,
// one a line, or "" when it holds none. It reads no further into a Worded
// error, so that the words of a cause it wraps are not said twice; the
// text of the errors around it (the prefixes, the record keys) is left
// out.
func Words(err error) string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		switch x := e.(type) {
		case nil:
		case Worded:
			if w := x.Words(); w != "" {
				out = append(out, w)
			}
		case interface{ Unwrap() []error }:
			for _, c := range x.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			walk(x.Unwrap())
		}
	}
	walk(err)
	return strings.Join(out, "\n")
}

// Sentence makes words a sentence for a page or an answer: each line
// starts with a capital letter and ends with a full stop unless it ends
// with other punctuation already.
func Sentence(words string) string {
	lines := strings.Split(words, "\n")
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		r, n := utf8.DecodeRuneInString(l)
		l = string(unicode.ToUpper(r)) + l[n:]
		if !strings.ContainsAny(l[len(l)-1:], ".?!") {
			l += "."
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

// Classifier maps errors of one part (its sentinels) to an *Error, or
// returns nil for errors that are not its own.
type Classifier func(error) *Error

// internalMessage is all a person learns of an error that is not theirs.
const internalMessage = "Something went wrong on our side. Try again in a moment."

// The words of the router's own refusals, which Echo gives as the bare
// status text.
const (
	notFoundMessage = "There is nothing at this address. Check the link, or start again from the home page."
	methodMessage   = "This address does not take that kind of request."
)

// Classify returns the Error that answers err: the first *Error in its
// chain, else the first classifier's, else an Echo HTTP error's status and
// (below 500) message, else a 500 with a message that gives nothing away.
func Classify(err error, classifiers ...Classifier) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	for _, c := range classifiers {
		if we := c(err); we != nil {
			return we
		}
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		msg := http.StatusText(he.Code)
		if s, ok := he.Message.(string); ok && he.Code < 500 {
			msg = s
		}
		switch {
		case errors.Is(err, echo.ErrNotFound):
			msg = notFoundMessage
		case errors.Is(err, echo.ErrMethodNotAllowed):
			msg = methodMessage
		}
		return &Error{Status: he.Code, Message: msg, Err: err}
	}
	return &Error{Status: http.StatusInternalServerError, Message: internalMessage, Err: err}
}

var (
	//go:embed error.html
	errorHTML string
	//go:embed error.css
	errorCSS string
)

// errorPage is what error.html shows.
type errorPage struct {
	Status              int
	StatusText, Heading string
	Message             string
	Link                *Link
	CSS                 template.CSS
}

// CSPHash is the CSP source that allows exactly one inline script or
// style: its SHA-256 (csp.Hash, for code that writes no policy itself).
func CSPHash(s string) string { return csp.Hash(s) }

// NoStore sets the headers every page and document of this service
// carries that must not be cached or sniffed.
func NoStore(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// ErrorHandler is the HTTP error handler for the whole server. It answers
// with Classify's status and message: JSON {"error": "..."} for paths under
// /api/, a small HTML page elsewhere, nothing for HEAD. It logs 5xx errors
// with their whole chain; 4xx are the caller's and are not logged. A nil
// logger discards.
func ErrorHandler(logger *slog.Logger, classifiers ...Classifier) echo.HTTPErrorHandler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// Built once per server; the embedded template is known to parse
	// (the package's tests render it).
	doc := template.Must(template.New("error").Parse(errorHTML))
	policy := csp.New().Add("default-src").Add("style-src", csp.Hash(errorCSS)).
		Add("base-uri").Add("form-action").Add("frame-ancestors").String()
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		r := c.Request()
		we := Classify(err, classifiers...)
		if we.Message == methodMessage {
			we = methodError(we, r.Method, c.Response().Header().Get("Allow"))
		}
		status := we.Status
		if status < 400 || status > 599 {
			status = http.StatusInternalServerError
		}
		if status >= 500 && !we.Logged {
			logger.ErrorContext(r.Context(), "request failed",
				"method", r.Method, "path", r.URL.Path, "status", status, "err", err.Error())
		}
		hd := c.Response().Header()
		NoStore(hd)
		if r.Method == http.MethodHead {
			_ = c.NoContent(status)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			_ = c.JSON(status, map[string]string{"error": we.Message})
			return
		}
		heading := we.Heading
		if heading == "" {
			heading = http.StatusText(status)
			switch status {
			case http.StatusForbidden:
				heading = "You cannot open this"
			case http.StatusNotFound:
				heading = "Not found"
			}
		}
		var b bytes.Buffer
		if err := doc.Execute(&b, errorPage{
			Status: status, StatusText: http.StatusText(status), Heading: heading,
			Message: we.Message, Link: we.Link, CSS: template.CSS(errorCSS),
		}); err != nil {
			_ = c.String(status, we.Message)
			return
		}
		hd.Set("Content-Security-Policy", policy)
		_ = c.HTMLBlob(status, b.Bytes())
	}
}

// methodError names the method a route refused and those it takes (the
// Allow header Echo's router sets), but OPTIONS, which no person sends.
// A method that is not a short upper-case token is not repeated.
func methodError(we *Error, method, allow string) *Error {
	c := *we
	var takes []string
	for m := range strings.SplitSeq(allow, ",") {
		if m = strings.TrimSpace(m); m != "" && m != http.MethodOptions {
			takes = append(takes, m)
		}
	}
	if len(method) <= 16 && !strings.ContainsFunc(method, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		c.Message = "This address does not take a " + method + " request"
	} else {
		c.Message = "This address does not take this kind of request"
	}
	if len(takes) > 0 {
		c.Message += "; it takes " + strings.Join(takes, " and ")
	}
	c.Message += "."
	return &c
}

// RequestLog logs one line per request. It logs the path without the
// query: frame URLs carry tokens there, and the sign-in callback its code.
func RequestLog(logger *slog.Logger) echo.MiddlewareFunc {
	return middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogMethod:   true,
		LogURIPath:  true,
		LogStatus:   true,
		LogLatency:  true,
		LogRemoteIP: true,
		LogError:    true,
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			level := slog.LevelInfo
			if v.Status >= 500 {
				level = slog.LevelError
			}
			logger.LogAttrs(c.Request().Context(), level, "request",
				slog.String("method", v.Method),
				slog.String("path", v.URIPath),
				slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency),
				slog.String("remote", v.RemoteIP),
			)
			return nil
		},
	})
}
