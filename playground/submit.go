package playground

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
)

// A card's Action.Submit, as Teams posts it ("Card actions", Teams
// platform): when a person presses an Action.Submit button of one of the
// bot's Adaptive Cards, Teams posts the bot a message activity from that
// person with no text, replying to the card's activity (replyToId), whose
// value is the button's data with the value of each of the card's inputs
// added under the input's id, as text: a toggle's valueOn or valueOff, a
// multiple choice's values joined by commas. Nothing shows in the chat.
// The page lays the card out with the renderer, which gathers that object
// when the button is pressed; this side checks that the card is one of
// the bot's in the person's conversation and posts the activity. A
// button whose data carries msteams (a Stage View invoke, an imBack or a
// messageBack) is Teams' own to handle, and not sent here.

// submitRequest is the body of POST /playground/api/submit.
type submitRequest struct {
	who
	// ReplyToID is the activity of the card whose button was pressed.
	ReplyToID string `json:"replyToId"`
	// Value is the button's data and the card's inputs.
	Value map[string]any `json:"value"`
}

// submitActivity is a card's Action.Submit as Teams posts it: the text
// written, and empty.
type submitActivity struct {
	activity
	Text      string         `json:"text"`
	ReplyToID string         `json:"replyToId"`
	Value     map[string]any `json:"value"`
}

// submit serves POST /playground/api/submit: a card's Action.Submit from
// the chosen person, posted to /api/messages.
func (h *Handler) submit(c echo.Context) error {
	r := c.Request()
	if err := h.pageRequest(r); err != nil {
		return err
	}
	var req submitRequest
	if err := readJSON(c, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	if req.Value == nil {
		return web.NewError(http.StatusBadRequest, "The card's action carries no value.").Wrap(ErrBadRequest)
	}
	if _, ok := req.Value["msteams"]; ok {
		return web.NewError(http.StatusBadRequest, "Teams handles an action whose data carries msteams itself; it posts no such message.").Wrap(ErrBadRequest)
	}
	cs := h.chats
	cs.mu.Lock()
	ch := cs.chatLocked(req.conversationID(), req.Kind, req.Tenant)
	it := ch.find(req.ReplyToID)
	card := it != nil && it.From == "bot" && !it.Deleted && len(it.Attachments) > 0
	var conversation string
	if card {
		conversation = it.conversation
	}
	id := cs.newIDLocked()
	cs.mu.Unlock()
	if !card {
		return web.NewError(http.StatusNotFound, "No card of the bot in this conversation has that id.").Wrap(ErrNotFound)
	}

	a := h.activity("message", id, req.who)
	if conversation != "" {
		// A card in a channel's thread: the action names the thread.
		a.Conversation.ID = conversation
	}
	a.TextFormat, a.Locale = "plain", "en-US"
	a.Entities = []map[string]any{{"type": "clientInfo", "locale": "en-US", "platform": "Web"}}
	status, err := h.postBody(r.Context(), a.Conversation, submitActivity{activity: a, ReplyToID: req.ReplyToID, Value: req.Value})
	if err != nil {
		said := h.notTaken("card's action", err)
		h.chats.note(req.conversationID(), req.Kind, req.Tenant, said)
		return web.NewError(http.StatusBadGateway, said).Wrap(err)
	}
	return c.JSON(http.StatusOK, sendResponse{ID: id, Delivered: true, Status: status})
}
