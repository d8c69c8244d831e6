package viewpage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/internal/web"
	"teamsbot/signin"
	"teamsbot/store"
)

// A view's tool call (POST /api/mcp-apps/{id}/call), made by the page
// with the person's session and run through the agent's governed path.

// MaxCallBodyBytes bounds the body of POST /api/mcp-apps/{id}/call.
const MaxCallBodyBytes = 1 << 20

// MaxToolNameBytes bounds the tool name of a call: MCP tool names are 1 to
// 128 characters, and the name is written to the audit log.
const MaxToolNameBytes = 128

// callRequest is the body of POST /api/mcp-apps/{id}/call.
type callRequest struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// sameOriginJSON is what every POST of the page's own script must be.
// Cross-site requests never reach a handler: Sec-Fetch-Site or Origin must
// say same origin, and the Lax session cookie is a second line. The body
// is application/json only: a cross-site form cannot send it without a
// preflight, which this service never answers.
func sameOriginJSON(cop *http.CrossOriginProtection, r *http.Request) error {
	if err := cop.Check(r); err != nil {
		return fmt.Errorf("%w: %w", ErrCrossOrigin, err)
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return ErrUnsupportedMediaType
	}
	return nil
}

// call serves POST /api/mcp-apps/{id}/call: the view's tools/call, made by
// the page with the person's session and run through the agent's governed
// path.
func (h *Handler) call(c echo.Context) error {
	// The wall clock's start, from which the server's write timeout
	// counts (h.now may be a test's clock).
	start := time.Now()
	r := c.Request()
	if err := sameOriginJSON(h.cop, r); err != nil {
		return err
	}
	s, err := h.session(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	// Access is decided before anything of the view or the body is read:
	// another tenant's id is answered as an unknown one, and the refusal
	// is recorded in the caller's own tenant.
	id := c.Param("id")
	v, err := h.viewFor(ctx, id, s)
	if errors.Is(err, ErrNotFound) && validID(id) {
		h.metrics.calls.WithLabelValues("refused").Inc()
		h.auditRefusal(ctx, s, store.View{ID: id}, "", "access: no view of the caller's tenant has this id")
	}
	if err != nil {
		return err
	}
	if err := h.access.CanCall(ctx, personOf(s), accessView(v)); err != nil {
		err = refusal(err)
		if errors.Is(err, access.ErrDenied) {
			// The caller's own tenant, the caller's own words: the tool
			// they asked for is recorded, clipped, for their admins.
			h.metrics.calls.WithLabelValues("refused").Inc()
			req, _, _ := readCall(c)
			h.auditRefusal(ctx, s, v, req.Name, err.Error())
		}
		return err
	}
	req, args, err := readCall(c)
	if err != nil {
		return err
	}
	caller := agentPersonOf(s)
	if r.Header.Get(QuestionsHeader) == "page" {
		// The page shows what the server asks during the call
		// (questions.go); without it a question is declined at once.
		ctx = agent.WithElicitor(ctx, &viewElicitor{h: h, who: askerOf(s, v.ID), write: newWriteDeadline(c.Response(), r, start)})
	}
	res, err := h.agent.CallFromView(ctx, v, caller, req.Name, json.RawMessage(args))
	switch {
	case err == nil:
	case errors.Is(err, agent.ErrToolNotAllowed), errors.Is(err, agent.ErrDenied), errors.Is(err, agent.ErrBadRequest):
		h.metrics.calls.WithLabelValues("refused").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, err)
	case errors.Is(err, agent.ErrNotConnected):
		// The view can say so: its person connects the server again
		// from Teams.
		h.metrics.calls.WithLabelValues("refused").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, ErrNotConnected)
	case errors.Is(err, agent.ErrUnavailable):
		h.metrics.calls.WithLabelValues("error").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, ErrToolUnavailable)
	default:
		// What the server said (a JSON-RPC error, which may repeat the
		// arguments) stays in the agent's audit record; the error that
		// reaches the log says only where the call failed.
		h.metrics.calls.WithLabelValues("error").Inc()
		return fmt.Errorf("view %s: tool %q: %w", v.ID, req.Name, ErrToolFailed)
	}
	h.metrics.calls.WithLabelValues("ok").Inc()
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, res)
}

// readCall reads and checks the body of a view's tool call: one JSON
// object {name, arguments}, the arguments an object ({} when absent).
func readCall(c echo.Context) (callRequest, []byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, MaxCallBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return callRequest{}, nil, bodyTooLarge(MaxCallBodyBytes, err)
		}
		return callRequest{}, nil, fmt.Errorf("%w: reading the body: %w", ErrBadRequest, err)
	}
	// The keys are matched exactly: encoding/json alone would take "NAME"
	// or "nAme" for name, and a body that means one thing here and another
	// to a proxy or a log reader is refused instead. Nothing but space may
	// follow the object (a decoder alone stops at a stray "}").
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return callRequest{}, nil, badRequest(web.JSONWords(err, callRequest{}), err)
	}
	if fields == nil {
		return callRequest{}, nil, badRequest("the body must be a JSON object with `name` and `arguments`, not null", nil)
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return callRequest{}, nil, badRequest(fmt.Sprintf("the body goes on after its JSON object (after byte %d): send one JSON object with `name` and `arguments`", dec.InputOffset()), nil)
	}
	var req callRequest
	if raw, ok := fields["name"]; ok {
		if err := json.Unmarshal(raw, &req.Name); err != nil {
			return callRequest{}, nil, badRequest("`name` must be a string: the name of the tool to call", nil)
		}
	}
	req.Arguments = fields["arguments"]
	if req.Name == "" {
		return callRequest{}, nil, badRequest("`name` is missing: name the tool to call", nil)
	}
	if len(req.Name) > MaxToolNameBytes {
		return callRequest{}, nil, badRequest(fmt.Sprintf("`name` is %d bytes long; a tool's name is at most %d", len(req.Name), MaxToolNameBytes), nil)
	}
	args := bytes.TrimSpace(req.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
		args = []byte(`{}`)
	case args[0] != '{':
		return callRequest{}, nil, badRequest("`arguments` must be a JSON object (or left out), the tool's arguments by name", nil)
	}
	return req, args, nil
}

// auditRefusal has the agent record a call refused by the access rule, in
// the caller's own tenant; why is the refusal's own text.
func (h *Handler) auditRefusal(ctx context.Context, s signin.Session, v store.View, tool, why string) {
	if err := h.agent.RefuseViewCall(ctx, v, agentPersonOf(s), tool, why); err != nil {
		h.logger.ErrorContext(ctx, "audit of a refused view call failed", "view", v.ID, "err", err)
	}
}
