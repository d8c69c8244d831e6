package admin

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/internal/web"
	"teamsbot/store"
	"teamsbot/triggers"
)

// errNoTriggers answers the key and trigger routes of a console built
// without them.
var errNoTriggers = web.NewError(http.StatusNotFound, "API keys and scheduled triggers are not set up in this service.")

// triggerProblem turns a refused key or trigger change into words for the
// page, or returns false when it is not the admin's to fix.
func triggerProblem(err error) (string, int, bool) {
	switch {
	case errors.Is(err, triggers.ErrInvalid):
		return refused(err), http.StatusBadRequest, true
	case errors.Is(err, triggers.ErrNotFound):
		words := web.Words(err)
		if words == "" {
			words = "there is no such record any more"
		}
		return web.Sentence(words) + " Reload the page to see what there is now.", http.StatusNotFound, true
	}
	if msg, ok := problemOf(err); ok {
		status := http.StatusBadRequest
		if errors.Is(err, access.ErrDenied) {
			status = http.StatusForbidden
		}
		return msg, status, true
	}
	return "", 0, false
}

// keysPage is /admin/keys: the tenant's API keys, and the secret of one
// just created, shown this once.
type keysPage struct {
	pageData
	Keys   []store.APIKey
	Agents []string
	New    *triggers.NewKey
}

func (h *Handler) keysPage(c echo.Context, p access.Person) error {
	return h.renderKeys(c, http.StatusOK, p, nil, "")
}

func (h *Handler) renderKeys(c echo.Context, status int, p access.Person, nk *triggers.NewKey, problem string) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	keys, err := h.opts.Triggers.Keys(c.Request().Context(), p)
	if err != nil {
		return err
	}
	d := &keysPage{Keys: keys, Agents: h.opts.Triggers.Agents(), New: nk}
	var ids []string
	for _, k := range keys {
		ids = append(ids, k.CreatedBy, k.RevokedBy)
	}
	d.Names = h.names(c.Request().Context(), p, map[string]string{p.UserID: p.Name}, ids...)
	return h.render(c, status, "keys", "API keys", p, d, problem)
}

func (h *Handler) createKey(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	nk, err := h.opts.Triggers.CreateKey(c.Request().Context(), p, c.FormValue("name"), c.FormValue("agent"))
	if err != nil {
		if msg, status, ok := triggerProblem(err); ok {
			return h.renderKeys(c, status, p, nil, msg)
		}
		return err
	}
	// The secret is on this page only: it is not kept, and a redirect
	// would have to carry it in a URL.
	return h.renderKeys(c, http.StatusCreated, p, &nk, "")
}

func (h *Handler) revokeKey(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	q, err := h.keyQuestion(c, p)
	if err != nil {
		return err
	}
	if !confirmed(c, q) {
		return h.ask(c, p, "keys", q)
	}
	if err := h.opts.Triggers.RevokeKey(c.Request().Context(), p, c.Param("id")); err != nil {
		if msg, status, ok := triggerProblem(err); ok {
			return h.renderKeys(c, status, p, nil, msg)
		}
		return err
	}
	return done(c, "/admin/keys", "key-revoked")
}

// keyQuestion is the confirmation a revoke of the key the request names
// needs: nil when there is no such active key.
func (h *Handler) keyQuestion(c echo.Context, p access.Person) (*confirmation, error) {
	keys, err := h.opts.Triggers.Keys(c.Request().Context(), p)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.ID == c.Param("id") && !k.Revoked() {
			q := keyConfirmation(k)
			return &q, nil
		}
	}
	return nil, nil
}

// triggersPage is /admin/triggers: the scheduled triggers, the
// conversations the app was removed from lately, and the form for a new
// trigger.
type triggersPage struct {
	pageData
	Triggers      []triggers.Info
	Notices       []store.AuditRecord
	Agents        []string
	Conversations []store.ConversationRef
	Form          triggers.Spec
	Now           time.Time
}

func (h *Handler) triggersPage(c echo.Context, p access.Person) error {
	return h.renderTriggers(c, http.StatusOK, p, triggers.Spec{TimeZone: "UTC"}, "")
}

func (h *Handler) renderTriggers(c echo.Context, status int, p access.Person, form triggers.Spec, problem string) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	ctx := c.Request().Context()
	list, err := h.opts.Triggers.Triggers(ctx, p)
	if err != nil {
		return err
	}
	notices, err := h.opts.Triggers.Notices(ctx, p)
	if err != nil {
		return err
	}
	convs, err := h.opts.Store.Conversations(ctx, p.TenantID)
	if err != nil {
		return err
	}
	d := &triggersPage{Triggers: list, Notices: notices, Agents: h.opts.Triggers.Agents(), Conversations: convs, Form: form, Now: h.now()}
	d.Convs = map[string]store.ConversationRef{}
	for _, c := range convs {
		d.Convs[c.ConversationID] = c
	}
	var ids []string
	for _, t := range list {
		ids = append(ids, t.CreatedBy)
	}
	d.Names = h.names(ctx, p, map[string]string{p.UserID: p.Name}, ids...)
	return h.render(c, status, "triggers", "Scheduled triggers", p, d, problem)
}

func (h *Handler) createTrigger(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	sp := triggers.Spec{Name: c.FormValue("name"), Agent: c.FormValue("agent"), Cron: c.FormValue("cron"),
		TimeZone: c.FormValue("timeZone"), Text: c.FormValue("text"), Conversation: c.FormValue("conversation")}
	if _, err := h.opts.Triggers.CreateTrigger(c.Request().Context(), p, sp); err != nil {
		if msg, status, ok := triggerProblem(err); ok {
			return h.renderTriggers(c, status, p, sp, msg)
		}
		return err
	}
	return done(c, "/admin/triggers", "trigger-created")
}

// deleteTriggerForm deletes a trigger once the admin confirmed it.
func (h *Handler) deleteTriggerForm(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	list, err := h.opts.Triggers.Triggers(c.Request().Context(), p)
	if err != nil {
		return err
	}
	var q *confirmation
	for _, t := range list {
		if t.ID == c.Param("id") {
			q = new(triggerConfirmation(t))
		}
	}
	if !confirmed(c, q) {
		return h.ask(c, p, "triggers", q)
	}
	return h.triggerAction("trigger-deleted", deleteTrigger)(c, p)
}

// triggerAction runs one of the buttons of a trigger's row.
func (h *Handler) triggerAction(notice string, act func(*triggers.Service) func(echo.Context, access.Person, string) error) func(echo.Context, access.Person) error {
	return func(c echo.Context, p access.Person) error {
		if h.opts.Triggers == nil {
			return errNoTriggers
		}
		if err := act(h.opts.Triggers)(c, p, c.Param("id")); err != nil {
			if msg, status, ok := triggerProblem(err); ok {
				return h.renderTriggers(c, status, p, triggers.Spec{TimeZone: "UTC"}, msg)
			}
			return err
		}
		return done(c, "/admin/triggers", notice)
	}
}

func pauseTrigger(s *triggers.Service) func(echo.Context, access.Person, string) error {
	return func(c echo.Context, p access.Person, id string) error {
		return s.PauseTrigger(c.Request().Context(), p, id)
	}
}

func resumeTrigger(s *triggers.Service) func(echo.Context, access.Person, string) error {
	return func(c echo.Context, p access.Person, id string) error {
		return s.ResumeTrigger(c.Request().Context(), p, id)
	}
}

func deleteTrigger(s *triggers.Service) func(echo.Context, access.Person, string) error {
	return func(c echo.Context, p access.Person, id string) error {
		return s.DeleteTrigger(c.Request().Context(), p, id)
	}
}

// apiTriggerError answers a refused change in the admin API.
func apiTriggerError(err error) error {
	if msg, status, ok := triggerProblem(err); ok {
		return web.NewError(status, msg).Wrap(err)
	}
	return err
}

// apiKey is an API key as the admin API gives it; never its hash.
type apiKey struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Agent      string    `json:"agent"`
	CreatedBy  string    `json:"createdBy"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	Revoked    bool      `json:"revoked"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
	RevokedBy  string    `json:"revokedBy,omitempty"`
	// Secret is in the answer of the creation only.
	Secret string `json:"secret,omitempty"`
}

func apiKeyOf(k store.APIKey) apiKey {
	return apiKey{ID: k.ID, Name: k.Name, Agent: k.AgentID, CreatedBy: k.CreatedBy, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, Revoked: k.Revoked(), RevokedAt: k.RevokedAt, RevokedBy: k.RevokedBy}
}

func (h *Handler) apiKeys(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	keys, err := h.opts.Triggers.Keys(c.Request().Context(), p)
	if err != nil {
		return err
	}
	out := make([]apiKey, 0, len(keys))
	for _, k := range keys {
		out = append(out, apiKeyOf(k))
	}
	return c.JSON(http.StatusOK, map[string]any{"keys": out})
}

func (h *Handler) apiCreateKey(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	var in struct {
		Name  string `json:"name"`
		Agent string `json:"agent"`
	}
	if err := readJSON(c, &in); err != nil {
		return err
	}
	nk, err := h.opts.Triggers.CreateKey(c.Request().Context(), p, in.Name, in.Agent)
	if err != nil {
		return apiTriggerError(err)
	}
	out := apiKeyOf(nk.Key)
	out.Secret = nk.Secret
	return c.JSON(http.StatusCreated, out)
}

func (h *Handler) apiRevokeKey(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	if err := h.opts.Triggers.RevokeKey(c.Request().Context(), p, c.Param("id")); err != nil {
		return apiTriggerError(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// apiTrigger is a trigger as the admin API takes and gives it.
type apiTrigger struct {
	ID           string    `json:"id,omitempty"`
	Name         string    `json:"name"`
	Agent        string    `json:"agent"`
	Cron         string    `json:"cron"`
	TimeZone     string    `json:"timeZone"`
	Text         string    `json:"text"`
	Conversation string    `json:"conversation"`
	CreatedBy    string    `json:"createdBy,omitempty"`
	CreatedAt    time.Time `json:"createdAt,omitzero"`
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"pausedReason,omitempty"`
	LastRunAt    time.Time `json:"lastRunAt,omitzero"`
	LastResult   string    `json:"lastResult,omitempty"`
	LastError    string    `json:"lastError,omitempty"`
	LastRunID    string    `json:"lastRun,omitempty"`
	NextRunAt    time.Time `json:"nextRunAt,omitzero"`
}

// JSONFields are the fields the creation takes; the others are the
// answer's (and are taken back without complaint).
func (*apiTrigger) JSONFields() []string {
	return []string{"name", "agent", "cron", "timeZone", "text", "conversation"}
}

func apiTriggerOf(in triggers.Info) apiTrigger {
	t := in.Trigger
	return apiTrigger{ID: t.ID, Name: t.Name, Agent: t.AgentID, Cron: t.Cron, TimeZone: t.TimeZone, Text: t.Text,
		Conversation: t.ConversationID, CreatedBy: t.CreatedBy, CreatedAt: t.CreatedAt, Paused: t.Paused,
		PausedReason: t.PausedReason, LastRunAt: t.LastRunAt, LastResult: t.LastResult, LastError: t.LastError,
		LastRunID: t.LastRunID, NextRunAt: in.Next}
}

func (h *Handler) apiTriggers(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	ctx := c.Request().Context()
	list, err := h.opts.Triggers.Triggers(ctx, p)
	if err != nil {
		return err
	}
	notices, err := h.opts.Triggers.Notices(ctx, p)
	if err != nil {
		return err
	}
	out := make([]apiTrigger, 0, len(list))
	for _, in := range list {
		out = append(out, apiTriggerOf(in))
	}
	if notices == nil {
		notices = []store.AuditRecord{}
	}
	return c.JSON(http.StatusOK, map[string]any{"triggers": out, "removedConversations": notices})
}

func (h *Handler) apiCreateTrigger(c echo.Context, p access.Person) error {
	if h.opts.Triggers == nil {
		return errNoTriggers
	}
	var in apiTrigger
	if err := readJSON(c, &in); err != nil {
		return err
	}
	t, err := h.opts.Triggers.CreateTrigger(c.Request().Context(), p, triggers.Spec{Name: in.Name, Agent: in.Agent,
		Cron: in.Cron, TimeZone: in.TimeZone, Text: in.Text, Conversation: strings.TrimSpace(in.Conversation)})
	if err != nil {
		return apiTriggerError(err)
	}
	return c.JSON(http.StatusCreated, apiTriggerOf(triggers.Info{Trigger: t}))
}

// apiTriggerAction answers a trigger's pause, resume or delete.
func (h *Handler) apiTriggerAction(act func(*triggers.Service) func(echo.Context, access.Person, string) error) func(echo.Context, access.Person) error {
	return func(c echo.Context, p access.Person) error {
		if h.opts.Triggers == nil {
			return errNoTriggers
		}
		if err := act(h.opts.Triggers)(c, p, c.Param("id")); err != nil {
			return apiTriggerError(err)
		}
		return c.NoContent(http.StatusNoContent)
	}
}
