package triggers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/bot"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// RunsPath is the runs API's route; {agent} is the agent's id.
const RunsPath = "/api/agents/:agent/runs"

// maxRunBody bounds a runs API request: the text and a conversation id,
// with room for JSON escapes.
const maxRunBody = 4*MaxText + 4096

// Register adds the runs API to e.
func (s *Service) Register(e *echo.Echo) {
	e.POST(RunsPath, s.serveRun)
}

// runRequest is the runs API's body.
type runRequest struct {
	Text         string `json:"text"`
	Conversation string `json:"conversation"`
}

// viewRef is a view in the runs API's answer.
type viewRef struct {
	ID  string `json:"id"`
	URL string `json:"url,omitempty"`
}

// runResponse is the runs API's answer: the run, its views (no person
// owns them; the tenant's agent readers may open them) and the messages
// posted.
type runResponse struct {
	Run          string    `json:"run"`
	Agent        string    `json:"agent"`
	Conversation string    `json:"conversation"`
	Key          string    `json:"key"`
	Views        []viewRef `json:"views"`
	Activities   []string  `json:"activities"`
	// Failed is true when the agent could not answer; a failure card was
	// posted instead.
	Failed bool `json:"failed"`
}

// The runs API's refusals; the key is never named to someone without it.
var (
	errUnauthorized = web.NewError(http.StatusUnauthorized, "A valid API key is required: Authorization: Bearer tbk_... (a tenant admin creates one in the admin console).")
	errWrongAgent   = web.NewError(http.StatusForbidden, "This API key is for another agent.")
	errBodyTooLarge = web.NewError(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is too large: the text may be at most %d bytes.", MaxText))
	errGone         = web.NewError(http.StatusGone, "The app was removed from that conversation: nothing was posted, and the conversation's triggers are paused. Install the app there again, or choose another conversation.")
	errShutdown     = web.NewError(http.StatusServiceUnavailable, "The service is shutting down; try again shortly.")
	errNotPosted    = web.NewError(http.StatusBadGateway, "The run finished, but its answer could not be posted to Teams.")
)

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// serveRun is POST /api/agents/{agent}/runs.
func (s *Service) serveRun(c echo.Context) error {
	r := c.Request()
	ctx := r.Context()
	web.NoStore(c.Response().Header())
	agentID := c.Param("agent")
	k, err := s.authenticate(ctx, bearer(r), agentID)
	var ref *refusal
	if errors.As(err, &ref) {
		return s.refuse(ctx, c, agentID, ref)
	}
	if err != nil {
		return err
	}

	var in runRequest
	if err := web.ReadJSON(c, &in, maxRunBody); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errBodyTooLarge.Wrap(err)
		}
		return err
	}
	text, err := checkText(in.Text)
	if err == nil {
		err = s.checkConversation(ctx, k.TenantID, in.Conversation)
	}
	if err != nil {
		return errorOf(err)
	}
	conv := strings.TrimSpace(in.Conversation)

	// The use is on disk, with LastUsedAt, before the run starts.
	err = s.opts.Store.UseAPIKey(ctx, k.TenantID, k.ID, s.now(), store.AuditRecord{
		Action: AuditKeyUse, Actor: "api-key:" + k.ID, Fields: map[string]any{
			"key": k.ID, "name": k.Name, "agent": k.AgentID, "conversation": textclip.Clip(conv, 256),
		}})
	if errors.Is(err, store.ErrConflict) {
		return s.refuse(ctx, c, agentID, &refusal{why: RefusedRevoked, tenant: k.TenantID, key: k})
	}
	if err != nil {
		return err
	}

	res, err := s.opts.Bot.RunTriggered(ctx, bot.TriggeredRun{
		TenantID: k.TenantID, AgentID: k.AgentID, Text: text, ConversationID: conv,
		Trigger: cards.Trigger{Name: k.Name},
	})
	s.metrics.runs.WithLabelValues("api", runResult(res, err)).Inc()
	switch {
	case errors.Is(err, bot.ErrNoConversation):
		return web.NewError(http.StatusNotFound, "The app is not installed in that conversation of your organisation.").Wrap(err)
	case errors.Is(err, bot.ErrConversationGone):
		return errGone.Wrap(err)
	case errors.Is(err, bot.ErrClosed):
		return errShutdown.Wrap(err)
	case err != nil:
		return errNotPosted.Wrap(err)
	}
	out := runResponse{Run: res.RunID, Agent: k.AgentID, Conversation: conv, Key: k.ID, Views: []viewRef{}, Activities: res.ActivityIDs, Failed: res.Failed}
	if out.Activities == nil {
		out.Activities = []string{}
	}
	for _, id := range res.ViewIDs {
		v := viewRef{ID: id}
		if u, ok := cards.ViewURL(s.opts.PublicBaseURL, id); ok {
			v.URL = u
		}
		out.Views = append(out.Views, v)
	}
	return c.JSON(http.StatusOK, out)
}

// errorOf answers ErrInvalid and ErrNotFound with their words (400 and
// 404), and any other error as it is.
func errorOf(err error) error {
	for _, e := range []struct {
		sentinel error
		status   int
	}{{ErrInvalid, http.StatusBadRequest}, {ErrNotFound, http.StatusNotFound}} {
		if errors.Is(err, e.sentinel) {
			return web.NewError(e.status, web.Sentence(web.Words(err))).Wrap(err)
		}
	}
	return err
}

// refuse audits a refused call and answers it: 401 for a missing, wrong
// or revoked key, 403 for a key of another agent. A refusal whose key is
// known goes to its tenant's log; any other to no tenant's.
func (s *Service) refuse(ctx context.Context, c echo.Context, agentID string, r *refusal) error {
	fields := map[string]any{"reason": r.why, "agent": textclip.Clip(agentID, 128)}
	if r.key.ID != "" {
		fields["key"], fields["name"] = r.key.ID, r.key.Name
	}
	actor := ""
	if r.key.ID != "" {
		actor = "api-key:" + r.key.ID
	}
	// The record outlives the request: a caller that hangs up still
	// leaves its trace.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.opts.Store.Append(actx, store.AuditRecord{TenantID: r.tenant, Action: AuditKeyRefused, Actor: actor, Fields: fields}); err != nil {
		s.log.Error("a refused API key could not be audited", "tenant", r.tenant, "reason", r.why, "err", err)
	}
	s.log.Info("runs API call refused", "tenant", r.tenant, "reason", r.why)
	s.metrics.refusals.WithLabelValues(r.why).Inc()
	if r.why == RefusedAgent {
		return errWrongAgent.Wrap(r)
	}
	c.Response().Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	return errUnauthorized.Wrap(r)
}
