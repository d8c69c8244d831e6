package playground

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"teamsbot/bot"
	"teamsbot/internal/web"
	"teamsbot/store"
)

// The activities built here follow what Teams sends a bot, as the Bot
// Framework "Activity schema" and Teams' "Conversation events in your Teams
// bot" and "Channel and group chat conversations with a bot" describe them:
// channelId msteams, channelData.tenant, from.aadObjectId, the @mention
// entity beside "<at>Name</at>" in group chats and channels,
// channelData.team and channel (and eventType for conversation events) in
// channels, installationUpdate with action add or remove.

// botAccountID is the bot's id in the playground's conversations; Teams
// writes "28:" and the app id, and local mode has none.
const botAccountID = "28:teamsbot-playground"

// idPattern is what a tenant or user id may be: the local sign-in takes
// the same, so the person who asks is the one who can sign in.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// who is the person, tenant and conversation kind the page chose.
type who struct {
	Tenant string `json:"tenant"`
	User   string `json:"user"` // Entra object id
	Name   string `json:"name"`
	Kind   string `json:"kind"`
}

func (w *who) check() error {
	w.Tenant, w.User, w.Name = strings.TrimSpace(w.Tenant), strings.TrimSpace(w.User), strings.TrimSpace(w.Name)
	var problems []string
	if !idPattern.MatchString(w.Tenant) {
		problems = append(problems, "the tenant id must be 1 to 128 letters, digits, dots, dashes or underscores")
	}
	if !idPattern.MatchString(w.User) {
		problems = append(problems, "the user's object id must be 1 to 128 letters, digits, dots, dashes or underscores")
	}
	if w.Name == "" || utf8.RuneCountInString(w.Name) > 100 {
		problems = append(problems, "the user's name must be 1 to 100 characters")
	}
	switch w.Kind {
	case kindPersonal, kindGroup, kindChannel:
	default:
		problems = append(problems, "the conversation is personal, groupChat or channel")
	}
	if len(problems) > 0 {
		return web.NewError(http.StatusBadRequest, "Check the form: "+strings.Join(problems, "; ")+".").Wrap(ErrBadRequest)
	}
	return nil
}

// short is a stable short hex name made of parts.
func short(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:12])
}

// conversationID is the conversation Teams would name: one personal chat
// per person and bot, one group chat and one channel (a team's General
// channel, whose id is also the team's) per tenant.
func (w who) conversationID() string {
	switch w.Kind {
	case kindPersonal:
		return "a:1" + short("personal", w.Tenant, w.User)
	case kindGroup:
		return "19:" + short("group", w.Tenant) + "@thread.v2"
	default:
		return "19:" + short("channel", w.Tenant) + "@thread.tacv2"
	}
}

// userAccountID is the person's Teams user id ("29:…"), which Teams
// derives from the Entra object id.
func (w who) userAccountID() string { return "29:1" + short("user", w.Tenant, w.User) }

type account struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	AadObjectID string `json:"aadObjectId,omitempty"`
}

type conversation struct {
	ID               string `json:"id"`
	ConversationType string `json:"conversationType"`
	TenantID         string `json:"tenantId"`
	IsGroup          bool   `json:"isGroup,omitempty"`
	Name             string `json:"name,omitempty"`
}

// activity is an activity as Teams sends it to a bot.
type activity struct {
	Type           string           `json:"type"`
	ID             string           `json:"id"`
	Timestamp      string           `json:"timestamp"`
	LocalTimestamp string           `json:"localTimestamp,omitempty"`
	ServiceURL     string           `json:"serviceUrl"`
	ChannelID      string           `json:"channelId"`
	From           account          `json:"from"`
	Recipient      account          `json:"recipient"`
	Conversation   conversation     `json:"conversation"`
	Text           string           `json:"text,omitempty"`
	TextFormat     string           `json:"textFormat,omitempty"`
	Locale         string           `json:"locale,omitempty"`
	Entities       []map[string]any `json:"entities,omitempty"`
	ChannelData    map[string]any   `json:"channelData"`
	MembersAdded   []account        `json:"membersAdded,omitempty"`
	MembersRemoved []account        `json:"membersRemoved,omitempty"`
	Action         string           `json:"action,omitempty"`
}

// activity starts an activity of typ from the person in their chosen
// conversation.
func (h *Handler) activity(typ, id string, w who) activity {
	now := h.now()
	a := activity{
		Type:           typ,
		ID:             id,
		Timestamp:      now.UTC().Format(time.RFC3339Nano),
		LocalTimestamp: now.Format(time.RFC3339Nano),
		ServiceURL:     h.self.URL(ConnectorPath + "/"),
		ChannelID:      "msteams",
		From:           account{ID: w.userAccountID(), Name: w.Name, AadObjectID: w.User},
		Recipient:      account{ID: botAccountID, Name: h.botName},
		Conversation:   conversation{ID: w.conversationID(), ConversationType: w.Kind, TenantID: w.Tenant},
		ChannelData:    map[string]any{"tenant": map[string]any{"id": w.Tenant}},
	}
	switch w.Kind {
	case kindGroup:
		a.Conversation.IsGroup = true
	case kindChannel:
		a.Conversation.IsGroup = true
		a.Conversation.Name = "General"
		team := w.conversationID()
		a.ChannelData["team"] = map[string]any{"id": team, "name": "Playground team", "aadGroupId": short("team", w.Tenant)}
		a.ChannelData["channel"] = map[string]any{"id": team, "name": "General"}
		a.ChannelData["teamsTeamId"] = team
		a.ChannelData["teamsChannelId"] = team
	}
	return a
}

// sendRequest is the body of POST /playground/api/send.
type sendRequest struct {
	who
	Text string `json:"text"`
	// Mention @mentions the bot, as a person must in a group chat or a
	// channel for Teams to hand the bot the message.
	Mention bool `json:"mention"`
}

// sendResponse tells the page what became of its message.
type sendResponse struct {
	ID        string `json:"id"`
	Delivered bool   `json:"delivered"`
	Status    int    `json:"status,omitempty"`
}

// maxTextRunes bounds a message; Teams' own limit is about 28 KB.
const maxTextRunes = 4000

// send serves POST /playground/api/send: the person's message is shown
// and, unless Teams would keep it from the bot (a group chat or channel
// message without the @mention), posted to /api/messages.
func (h *Handler) send(c echo.Context) error {
	r := c.Request()
	if err := h.pageRequest(r); err != nil {
		return err
	}
	var req sendRequest
	if err := readJSON(c, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	text := strings.TrimSpace(req.Text)
	if text == "" || utf8.RuneCountInString(text) > maxTextRunes {
		return web.NewError(http.StatusBadRequest, fmt.Sprintf("Write a message of 1 to %d characters.", maxTextRunes)).Wrap(ErrBadRequest)
	}
	// A personal chat needs no @mention: the page offers none there.
	mention := req.Mention && req.Kind != kindPersonal
	var entities []map[string]any
	if mention {
		tag := "<at>" + h.botName + "</at>"
		text = tag + " " + strings.TrimSpace(strings.ReplaceAll(text, tag, ""))
		entities = append(entities, map[string]any{
			"type": "mention", "text": tag,
			"mentioned": map[string]any{"id": botAccountID, "name": h.botName},
		})
	}

	h.chats.mu.Lock()
	id := h.chats.newIDLocked()
	ch := h.chats.chatLocked(req.conversationID(), req.Kind, req.Tenant)
	h.chats.addLocked(ch, &item{ID: id, From: "user", Name: req.Name, Text: text})
	h.chats.mu.Unlock()

	if req.Kind != kindPersonal && !mention {
		h.chats.note(req.conversationID(), req.Kind, req.Tenant,
			"Teams does not hand this message to "+h.botName+": in a group chat or a channel a bot gets only the messages that @mention it.")
		return c.JSON(http.StatusOK, sendResponse{ID: id})
	}

	a := h.activity("message", id, req.who)
	a.Text, a.TextFormat, a.Locale = text, "plain", "en-US"
	a.Entities = append(entities, map[string]any{"type": "clientInfo", "locale": "en-US", "platform": "Web"})
	if req.Kind == kindChannel {
		// A new post in a channel starts a thread, which Teams names by
		// the post's id; the bot answers in that thread.
		a.Conversation.ID += ";messageid=" + id
	}
	status, err := h.post(r.Context(), a)
	if err != nil {
		said := h.notTaken("message", err)
		h.chats.note(req.conversationID(), req.Kind, req.Tenant, said)
		return web.NewError(http.StatusBadGateway, said).Wrap(err)
	}
	return c.JSON(http.StatusOK, sendResponse{ID: id, Delivered: true, Status: status})
}

// installRequest is the body of POST /playground/api/install.
type installRequest struct {
	who
	// Action is "add" or "remove".
	Action string `json:"action"`
}

// install serves POST /playground/api/install: what Teams sends when the
// person adds the bot to the conversation, or removes it. Teams announces
// either twice, as an installationUpdate and as a conversationUpdate with
// the bot among membersAdded or membersRemoved (for a team with
// channelData.eventType teamMemberAdded or teamMemberRemoved); the bot
// must cope with both, so both are sent.
func (h *Handler) install(c echo.Context) error {
	r := c.Request()
	if err := h.pageRequest(r); err != nil {
		return err
	}
	var req installRequest
	if err := readJSON(c, &req); err != nil {
		return err
	}
	if err := req.check(); err != nil {
		return err
	}
	if req.Action != "add" && req.Action != "remove" {
		return web.NewError(http.StatusBadRequest, "The action is add or remove.").Wrap(ErrBadRequest)
	}
	h.chats.mu.Lock()
	installID, updateID := h.chats.newIDLocked(), h.chats.newIDLocked()
	h.chats.chatLocked(req.conversationID(), req.Kind, req.Tenant)
	h.chats.mu.Unlock()

	iu := h.activity("installationUpdate", installID, req.who)
	iu.Action = req.Action
	cu := h.activity("conversationUpdate", updateID, req.who)
	botAccount := []account{{ID: botAccountID, Name: h.botName}}
	verb := "added"
	if req.Action == "add" {
		cu.MembersAdded = botAccount
		if req.Kind == kindChannel {
			cu.ChannelData["eventType"] = "teamMemberAdded"
		}
	} else {
		verb = "removed"
		cu.MembersRemoved = botAccount
		if req.Kind == kindChannel {
			cu.ChannelData["eventType"] = "teamMemberRemoved"
		}
	}
	h.chats.note(req.conversationID(), req.Kind, req.Tenant, fmt.Sprintf("%s %s %s (installationUpdate %s, conversationUpdate).", req.Name, verb, h.botName, req.Action))
	for _, a := range []activity{iu, cu} {
		if _, err := h.post(r.Context(), a); err != nil {
			said := h.notTaken(a.Type, err)
			h.chats.note(req.conversationID(), req.Kind, req.Tenant, said)
			return web.NewError(http.StatusBadGateway, said).Wrap(err)
		}
	}
	// The bot has stored or forgotten the conversation by now (it answers
	// these activities once done): the page reads it again.
	h.chats.mu.Lock()
	h.chats.touchLocked(h.chats.chatLocked(req.conversationID(), req.Kind, req.Tenant))
	h.chats.mu.Unlock()
	return c.JSON(http.StatusOK, map[string]bool{"ok": true})
}

// post sends an activity to the service's own /api/messages over loopback
// HTTP, as the Bot Connector would, and returns the status. The activity
// is in the conversation's inspector list before the bot answers it: its
// replies come while it is being answered.
func (h *Handler) post(ctx context.Context, a activity) (int, error) {
	return h.postBody(ctx, a.Conversation, a)
}

// postBody is post of an activity of conversation conv written as body.
func (h *Handler) postBody(ctx context.Context, conv conversation, body any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, fmt.Errorf("%w: encoding the activity: %w", ErrBot, err)
	}
	cs := h.chats
	cs.mu.Lock()
	cs.logLocked(cs.chatLocked(conv.ID, conv.ConversationType, conv.TenantID), "to-bot", "POST "+bot.Path, raw)
	cs.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.self.URL(bot.Path), bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBot, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBot, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(msg, &e)
		return resp.StatusCode, &botRefusal{status: resp.StatusCode, message: e.Error}
	}
	return resp.StatusCode, nil
}

// botRefusal is /api/messages answering an activity with an error status,
// and the message it gave, which the service's one error handler words
// for people.
type botRefusal struct {
	status  int
	message string
}

func (e *botRefusal) Error() string {
	return fmt.Sprintf("%s: %s answered %d %s", ErrBot, bot.Path, e.status, e.message)
}

func (e *botRefusal) Unwrap() error { return ErrBot }

// notTaken says in the chat, in a person's words, that the bot did not
// take an activity of kind what: the status /api/messages answered, or
// that it could not be reached. What the bot or the transport said
// (error texts of the service) goes to the log, never into the chat.
func (h *Handler) notTaken(what string, err error) string {
	h.logger.Warn("the bot did not take an activity", "activity", what, "err", err)
	var r *botRefusal
	if errors.As(err, &r) {
		return fmt.Sprintf("The bot did not take the %s: it answered %d %s. The service log says why.", what, r.status, http.StatusText(r.status))
	}
	return "The bot did not take the " + what + ": it could not be reached. The service log says why."
}

// stateResponse is the answer of GET /playground/api/state.
type stateResponse struct {
	snapshot
	Conversation string `json:"conversation"`
	// Installed says whether the bot keeps this conversation's reference,
	// as it does once installed there.
	Installed bool `json:"installed"`
}

// state serves GET /playground/api/state?tenant=&user=&name=&kind=&since=&after=:
// the chosen conversation, with the inspector's entries after N "after",
// once it has changed since seq "since"; it waits
// for a change up to maxLongPoll. Without since (the page's first read) it
// answers at once; since=0 waits for the first change of an empty
// conversation, whose seq is 0.
func (h *Handler) state(c echo.Context) error {
	q := c.QueryParams()
	w := who{Tenant: q.Get("tenant"), User: q.Get("user"), Name: q.Get("name"), Kind: q.Get("kind")}
	if err := w.check(); err != nil {
		return err
	}
	first := !q.Has("since")
	since, _ := strconv.ParseUint(q.Get("since"), 10, 64)
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	id := w.conversationID()
	ctx := c.Request().Context()
	timer := time.NewTimer(maxLongPoll)
	defer timer.Stop()
	var snap snapshot
	for {
		h.chats.mu.Lock()
		ch := h.chats.chatLocked(id, w.Kind, w.Tenant)
		// A first read, a change, or a page that knew a later state (the
		// service restarted) is answered at once.
		if first || ch.seq > since || since > h.chats.seq {
			snap = h.chats.snapshotLocked(ch, after)
			h.chats.mu.Unlock()
			break
		}
		wake := h.chats.changed
		h.chats.mu.Unlock()
		select {
		case <-wake:
			continue
		case <-timer.C:
		case <-h.life.Done():
			// Shutting down: the page gets what there is now, and the
			// server need not wait for the poll.
		case <-ctx.Done():
			// The page went away, or asked for another conversation:
			// nobody reads an answer, and nothing failed.
			return nil
		}
		h.chats.mu.Lock()
		snap = h.chats.snapshotLocked(h.chats.chatLocked(id, w.Kind, w.Tenant), after)
		h.chats.mu.Unlock()
		break
	}
	_, err := h.store.Conversation(ctx, bot.ConversationKey(w.Tenant, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("playground: conversation %s: %w", id, err)
	}
	web.NoStore(c.Response().Header())
	return c.JSON(http.StatusOK, stateResponse{snapshot: snap, Conversation: id, Installed: err == nil})
}

// readJSON decodes one JSON object of the fields v takes from the request
// body, refused in plain words otherwise (web.ReadJSON).
func readJSON(c echo.Context, v any) error {
	err := web.ReadJSON(c, v, maxBodyBytes)
	if we, ok := err.(*web.Error); ok {
		return we.Wrap(fmt.Errorf("%w: %w", ErrBadRequest, we.Err))
	}
	return err
}
