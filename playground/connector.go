package playground

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/web"
	"teamsbot/store"
)

// The Bot Connector the playground's activities name as their serviceUrl.
// It answers the calls the bot makes, as "API reference for the Bot
// Framework Connector service" (Bot Service REST API, Conversations)
// specifies them:
//
//	POST   /v3/conversations/{conversationId}/activities               Send to Conversation → 201 ResourceResponse {id}
//	POST   /v3/conversations/{conversationId}/activities/{activityId}  Reply to Activity → 201 ResourceResponse {id}
//	PUT    /v3/conversations/{conversationId}/activities/{activityId}  Update Activity → 200 ResourceResponse {id}
//	DELETE /v3/conversations/{conversationId}/activities/{activityId}  Delete Activity → 200
//
// A typing activity is shown for a few seconds and gets no id, as Teams
// keeps none. A streaming message ("Stream bot messages", REST API) is a
// typing activity with a streaminfo entity: the first opens a message
// (201 with its id, the stream's id), the later ones (202) and the final
// message (streamType final) replace its text, the final one with its
// attachments too. Local mode sends no Authorization header, and this connector
// asks for none: it answers loopback callers only, never a web page.

// Views of an answer card are looked up this often, for this long: the bot
// records where an answer went just after sending it.
const (
	resolveEvery = 150 * time.Millisecond
	resolveFor   = 15 * time.Second
	resolveRuns  = 20
)

// botActivity is what the bot sends to the connector.
type botActivity struct {
	Type        string       `json:"type"`
	Text        string       `json:"text"`
	Summary     string       `json:"summary"`
	ReplyToID   string       `json:"replyToId"`
	Attachments []attachment `json:"attachments"`
	From        *account     `json:"from"`
	Entities    []entityInfo `json:"entities"`
}

// entityInfo is the part of an activity's entity the connector reads: a
// streaminfo entity's stream, or the root message entity of an AI answer
// ("Bot messages with AI-generated content", Teams platform): its
// AIGeneratedContent label and its citations.
type entityInfo struct {
	Type           string         `json:"type"`
	StreamID       string         `json:"streamId"`
	StreamType     string         `json:"streamType"`
	AtType         string         `json:"@type"`
	AdditionalType []string       `json:"additionalType"`
	Citation       []citationInfo `json:"citation"`
}

// citationInfo is a citation (a Claim) as the bot sends it.
type citationInfo struct {
	Position   int `json:"position"`
	Appearance struct {
		Name     string   `json:"name"`
		URL      string   `json:"url"`
		Abstract string   `json:"abstract"`
		Keywords []string `json:"keywords"`
	} `json:"appearance"`
}

// marks returns what the activity's root message entity says: whether
// Teams labels it "AI generated", and its citations.
func (a botActivity) marks() (ai bool, citations []citationRef) {
	for _, e := range a.Entities {
		if e.Type != "https://schema.org/Message" || e.AtType != "Message" {
			continue
		}
		ai = ai || slices.Contains(e.AdditionalType, "AIGeneratedContent")
		for _, c := range e.Citation {
			citations = append(citations, citationRef{Position: c.Position, Name: c.Appearance.Name, URL: c.Appearance.URL,
				Abstract: c.Appearance.Abstract, Keywords: c.Appearance.Keywords})
		}
	}
	return ai, citations
}

// stream returns the activity's streaminfo entity, if any.
func (a botActivity) stream() (entityInfo, bool) {
	for _, e := range a.Entities {
		if strings.EqualFold(e.Type, "streaminfo") {
			return e, true
		}
	}
	return entityInfo{}, false
}

// resourceResponse is the Bot Connector's answer to a send or an update.
type resourceResponse struct {
	ID string `json:"id"`
}

// fromWebPage refuses what a browser sends: the bot's own calls carry no
// Origin or Sec-Fetch headers, and nothing a web page sends should ever put
// a card in the transcript.
func fromWebPage(r *http.Request) error {
	if r.Header.Get("Origin") != "" || r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Sec-Fetch-Mode") != "" {
		return web.NewError(http.StatusForbidden, "The playground's Bot Connector takes calls from the bot only, not from web pages.").Wrap(ErrNotLoopback)
	}
	return nil
}

// connectorIDs reads the conversation and activity ids of a connector
// call; the bot escapes them as path segments.
func connectorIDs(c echo.Context) (conversation, activity string, err error) {
	conversation, err = url.PathUnescape(c.Param("conversation"))
	if err == nil {
		activity, err = url.PathUnescape(c.Param("activity"))
	}
	if err != nil || conversation == "" {
		return "", "", web.NewError(http.StatusBadRequest, "Malformed conversation or activity id.").Wrap(ErrBadRequest)
	}
	return conversation, activity, nil
}

// readActivity reads the bot's activity from a connector call, and its
// bytes as they came, for the inspector.
func readActivity(c echo.Context) (botActivity, []byte, error) {
	var a botActivity
	raw, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxBodyBytes))
	if err != nil {
		return a, nil, web.JSONError(err, &a).Wrap(fmt.Errorf("%w: %w", ErrBadRequest, err))
	}
	// Fields this connector does not read are the Bot Framework's, and
	// welcome: only what it reads is checked.
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&a); err != nil {
		return a, nil, web.JSONError(err, &a).Wrap(fmt.Errorf("%w: %w", ErrBadRequest, err))
	}
	if a.Type == "" {
		return a, nil, web.NewError(http.StatusBadRequest, "The activity has no type.").Wrap(ErrBadRequest)
	}
	return a, raw, nil
}

// call is how the inspector names a connector call: its method and path.
func call(c echo.Context) string {
	return c.Request().Method + " " + c.Request().URL.Path
}

// connectorPost serves Send to Conversation and Reply to Activity.
func (h *Handler) connectorPost(c echo.Context) error {
	if err := fromWebPage(c.Request()); err != nil {
		return err
	}
	convID, replyTo, err := connectorIDs(c)
	if err != nil {
		return err
	}
	a, raw, err := readActivity(c)
	if err != nil {
		return err
	}
	cs := h.chats
	cs.mu.Lock()
	ch := cs.chatLocked(convID, "", "")
	cs.logLocked(ch, "from-bot", call(c), raw)
	if info, ok := a.stream(); ok {
		defer cs.mu.Unlock()
		return h.streamLocked(c, ch, convID, a, info)
	}
	if a.Type == "typing" {
		ch.typingUntil = cs.now().Add(typingFor)
		cs.touchLocked(ch)
		cs.mu.Unlock()
		return c.JSON(http.StatusOK, resourceResponse{})
	}
	id := cs.newIDLocked()
	if a.ReplyToID == "" {
		a.ReplyToID = replyTo
	}
	it := &item{ID: id, From: "bot", Name: h.botName, Text: a.Text, Summary: a.Summary, Attachments: a.Attachments, ReplyToID: a.ReplyToID, conversation: convID}
	it.AI, it.Citations = a.marks()
	// The person sees the message, and the typing indicator ends.
	ch.typingUntil = time.Time{}
	cs.addLocked(ch, it)
	h.resolveLocked(ch, it)
	cs.mu.Unlock()
	return c.JSON(http.StatusCreated, resourceResponse{ID: id})
}

// connectorPut serves Update Activity: the activity is replaced in place.
func (h *Handler) connectorPut(c echo.Context) error {
	if err := fromWebPage(c.Request()); err != nil {
		return err
	}
	convID, id, err := connectorIDs(c)
	if err != nil {
		return err
	}
	a, raw, err := readActivity(c)
	if err != nil {
		return err
	}
	cs := h.chats
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch := cs.chatLocked(convID, "", "")
	cs.logLocked(ch, "from-bot", call(c), raw)
	it := ch.find(id)
	if it == nil || it.From != "bot" || it.Deleted {
		return web.NewError(http.StatusNotFound, "No such activity of the bot in this conversation.").Wrap(fmt.Errorf("%w: activity %.64s", ErrNotFound, id))
	}
	it.Text, it.Summary, it.Attachments = a.Text, a.Summary, a.Attachments
	it.AI, it.Citations = a.marks()
	it.Revision++
	it.Views = nil
	cs.touchLocked(ch)
	h.resolveLocked(ch, it)
	return c.JSON(http.StatusOK, resourceResponse{ID: id})
}

// connectorDelete serves Delete Activity: Teams shows that the message
// was deleted.
func (h *Handler) connectorDelete(c echo.Context) error {
	if err := fromWebPage(c.Request()); err != nil {
		return err
	}
	convID, id, err := connectorIDs(c)
	if err != nil {
		return err
	}
	cs := h.chats
	cs.mu.Lock()
	defer cs.mu.Unlock()
	ch := cs.chatLocked(convID, "", "")
	cs.logLocked(ch, "from-bot", call(c), nil)
	it := ch.find(id)
	if it == nil || it.From != "bot" {
		return web.NewError(http.StatusNotFound, "No such activity of the bot in this conversation.").Wrap(fmt.Errorf("%w: activity %.64s", ErrNotFound, id))
	}
	it.Deleted, it.Text, it.Summary, it.Attachments, it.Views = true, "", "", nil, nil
	it.Revision++
	cs.touchLocked(ch)
	return c.NoContent(http.StatusOK)
}

// resolveLocked starts looking up the views a bot card names, unless a
// lookup for it is under way. The card itself carries no view ids (it
// names views by title, and has an Open button only under https); the bot
// records, for each run, the ids of the activities that carry its answer,
// and the run holds its views' ids.
func (h *Handler) resolveLocked(ch *chat, it *item) {
	if it.resolving || len(it.Attachments) == 0 || ch.tenant == "" || h.life.Err() != nil {
		return
	}
	it.resolving = true
	chatID, itemID, tenant := ch.id, it.ID, ch.tenant
	h.jobs.Add(1)
	go func() {
		defer h.jobs.Done()
		ctx, cancel := context.WithTimeout(h.life, resolveFor)
		defer cancel()
		views, found := h.findViews(ctx, tenant, itemID)
		cs := h.chats
		cs.mu.Lock()
		defer cs.mu.Unlock()
		ch := cs.byID[chatID]
		if ch == nil {
			return
		}
		it := ch.find(itemID)
		if it == nil {
			return
		}
		it.resolving = false
		if found && len(views) > 0 {
			it.Views = views
			cs.touchLocked(ch)
		}
	}()
}

// findViews polls the tenant's recent runs until one's delivery names the
// activity, and returns the run's views when the activity carries the
// answer's first card (later cards continue the same answer). found is
// false when no run names it before ctx ends: a welcome or a refusal card
// belongs to no run.
func (h *Handler) findViews(ctx context.Context, tenant, activityID string) (views []viewRef, found bool) {
	tick := time.NewTicker(resolveEvery)
	defer tick.Stop()
	for {
		runs, err := h.store.RecentRuns(ctx, tenant, resolveRuns)
		if err != nil && ctx.Err() == nil {
			h.logger.Warn("playground: reading recent runs failed", "tenant", tenant, "err", err)
		}
		for _, r := range runs {
			d, err := h.store.Delivery(ctx, r.ID)
			if err != nil {
				if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
					h.logger.Warn("playground: reading a delivery failed", "run", r.ID, "err", err)
				}
				continue
			}
			if !slices.Contains(d.ActivityIDs, activityID) {
				continue
			}
			if d.ActivityIDs[0] != activityID {
				return nil, true
			}
			for _, id := range r.ViewIDs {
				ref := viewRef{ID: id}
				if v, err := h.store.View(ctx, id); err == nil {
					ref.Title, ref.Tool, ref.Server = v.ToolTitle, v.Tool, v.Server
				}
				if ref.Title == "" {
					ref.Title = ref.Tool
				}
				views = append(views, ref)
			}
			return views, true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-tick.C:
		}
	}
}

// streamLocked serves one activity of a streaming message: the first opens
// the message, the others replace its text (and the final one its
// attachments), as Teams shows a stream.
func (h *Handler) streamLocked(c echo.Context, ch *chat, convID string, a botActivity, info entityInfo) error {
	cs := h.chats
	if info.StreamID == "" {
		if a.Type != "typing" || a.Text == "" {
			return web.NewError(http.StatusBadRequest, "Start streaming activities should include text.").Wrap(ErrBadRequest)
		}
		it := &item{ID: cs.newIDLocked(), From: "bot", Name: h.botName, Text: a.Text, Streaming: true, conversation: convID}
		ch.typingUntil = time.Time{}
		cs.addLocked(ch, it)
		return c.JSON(http.StatusCreated, resourceResponse{ID: it.ID})
	}
	it := ch.find(info.StreamID)
	if it == nil || it.From != "bot" || !it.Streaming {
		return web.NewError(http.StatusForbidden, "Content stream is not allowed on an already completed streamed message.").Wrap(fmt.Errorf("%w: stream %.64s", ErrNotFound, info.StreamID))
	}
	it.Text = a.Text
	if info.StreamType == "final" {
		it.Streaming = false
		it.Summary, it.Attachments = a.Summary, a.Attachments
		it.AI, it.Citations = a.marks()
	}
	it.Revision++
	cs.touchLocked(ch)
	if !it.Streaming {
		h.resolveLocked(ch, it)
	}
	return c.JSON(http.StatusAccepted, struct{}{})
}
