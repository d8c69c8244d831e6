package viewpage

import (
	"errors"
	"net/http"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/web"
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
	// ErrNotConnected: the view's server works as the view's person, and
	// their connection to it has ended.
	ErrNotConnected = errors.New("viewpage: the view's person is not connected to its server")
	// ErrToolFailed: the view's MCP server answered the call with an error
	// rather than a result (502). The agent's audit record says why.
	ErrToolFailed = errors.New("viewpage: the view's server failed the call")
	// ErrQuestionNotFound: no question of that id waits for this person
	// on this view: answered already, out of time, its call ended, or
	// someone else's (404).
	ErrQuestionNotFound = errors.New("viewpage: no such question")
	// ErrBadRequest: the call body is malformed (400).
	ErrBadRequest = errors.New("viewpage: bad request")
)

// publicError carries a message written for the person who sent the
// request, on top of the sentinel that decides the status: the message
// the person reads is the public words alone.
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

// bodyTooLarge is ErrTooLarge naming the limit of the body.
func bodyTooLarge(limit int64, err error) error {
	return &publicError{sentinel: ErrTooLarge, public: "the body is larger than " + web.Bytes(limit) + ", the most this call takes", err: err}
}

// isExpired reports whether a store error says the view existed but has
// expired, as opposed to never having existed.
func isExpired(err error) bool {
	return errors.Is(err, store.ErrExpired)
}

// Classify maps the view page's errors (and those of the packages it calls:
// agent, signin, store) to a status and a message safe to show, or returns
// nil for errors that are not its own. The wiring hands it to
// web.ErrorHandler, the one error handler of the server.
func Classify(err error) *web.Error {
	var pe *publicError
	if errors.As(err, &pe) {
		we := Classify(pe.sentinel)
		if we == nil {
			return nil
		}
		c := *we
		c.Message = web.Sentence(pe.public)
		c.Err = err
		return &c
	}
	status, heading, msg := classify(err)
	if status == 0 {
		return nil
	}
	// Graph's client logs its own failures, once each.
	return &web.Error{Status: status, Heading: heading, Message: msg, Err: err, Logged: errors.Is(err, access.ErrUnavailable)}
}

// classify returns the status, the page heading (empty: chosen from the
// status) and the message of err, or a zero status.
func classify(err error) (int, string, string) {
	var denied *access.DeniedError
	switch {
	case errors.Is(err, ErrExpired):
		return http.StatusGone, "This view has expired", "This view has expired. Views are kept for 7 days; ask the agent again for a new one."
	case errors.Is(err, ErrQuestionNotFound):
		return http.StatusNotFound, "", "This question no longer waits for your answer: it was answered already, its time ran out, or the view's call ended. Go on in the view; it can ask again."
	case errors.Is(err, ErrNotFound), errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, "", "There is no such view. Check the link, or ask the agent again."
	case errors.Is(err, access.ErrUnavailable):
		return http.StatusServiceUnavailable, "", "Your group memberships cannot be checked right now (Microsoft Graph did not answer), so nothing that depends on them is allowed. Try again in a few minutes."
	case errors.As(err, &denied) && denied.Missing == "":
		return http.StatusForbidden, "", "This view is not yours. A view can be opened only by the person the agent answered or, for a run without a person, by the tenant's agent readers."
	case errors.As(err, &denied):
		return http.StatusForbidden, "", web.Sentence(denied.Reason)
	case errors.Is(err, ErrBadToken):
		return http.StatusForbidden, "", "This frame link is missing a valid token or has expired. Reload the page."
	case errors.Is(err, ErrNotFramed):
		return http.StatusForbidden, "", "This document is shown only inside its view page."
	case errors.Is(err, ErrCrossOrigin):
		return http.StatusForbidden, "", "Cross-site requests are not allowed."
	case errors.Is(err, agent.ErrToolNotAllowed):
		return http.StatusForbidden, "", "This view may not call that tool: only tools of its own server made for views can be called."
	case errors.Is(err, agent.ErrDenied):
		return http.StatusForbidden, "", "A policy denied this tool call."
	case errors.Is(err, ErrNotConnected):
		return http.StatusForbidden, "", "This view's server works as the person the view was made for, and their connection to it has ended. They can connect it again by asking the assistant in Teams."
	case errors.Is(err, ErrToolUnavailable):
		return http.StatusBadGateway, "", "The view's server cannot be reached right now. Try again in a moment."
	case errors.Is(err, ErrToolFailed):
		return http.StatusBadGateway, "", "The view's server could not run the tool."
	case errors.Is(err, agent.ErrBadRequest):
		return http.StatusBadRequest, "", "The tool call is not valid."
	case errors.Is(err, agent.ErrNotFound):
		return http.StatusNotFound, "", "There is no such tool."
	case errors.Is(err, ErrNoSession), errors.Is(err, signin.ErrNoSession):
		return http.StatusUnauthorized, "", "Sign in first."
	case errors.Is(err, ErrUnsupportedMediaType):
		return http.StatusUnsupportedMediaType, "", "The request must be sent as Content-Type: application/json."
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge, "", "The request body is too large."
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, "", "The request is not valid"
	}
	return 0, "", ""
}
