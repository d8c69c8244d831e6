package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/web"

	"github.com/infracloudio/msbotbuilder-go/core/activity"
	"github.com/infracloudio/msbotbuilder-go/schema"
	"github.com/labstack/echo/v4"
)

// inbound is an activity as received. It embeds the library's schema type
// and overrides two fields: schema.Entity keeps only an entity's type, and
// the @mention's id and text are needed to strip it; schema.Activity's
// value must be an object, while activities other than invoke may carry
// any JSON there.
type inbound struct {
	schema.Activity
	Entities []entity        `json:"entities,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
}

type entity struct {
	Type      string `json:"type"`
	ID        string `json:"id,omitempty"`
	Text      string `json:"text,omitempty"`
	Mentioned struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"mentioned"`
}

// invokeResponse is what a handler returns for an invoke: Teams reads the
// status and body from the HTTP response, as the Bot Framework SDKs' "invokeResponse"
// activity carries them.
type invokeResponse struct {
	Status int `json:"status"`
	Body   any `json:"body,omitempty"`
}

const invokeResponseType schema.ActivityTypes = "invokeResponse"

// serve is POST /api/messages.
//
// It does not use msbotbuilder-go's adapter (ParseRequest and
// ProcessActivity): that decodes into schema.Activity, whose Entity type
// drops the @mention's id and text, reads the body without a size limit,
// cannot tell a malformed body (400) from a refused token (401), demands a
// token even in local mode, and sends replies through a path that drops
// the reply id, takes no context and cannot return the id of what it
// sent, which the working card's update needs. The token is checked by
// this package's Validator, the turn dispatched by the library's
// activity.HandlerFuncs.
func (b *Bot) serve(c echo.Context) error {
	req := c.Request()
	if b.local && !netaddr.IsLoopbackRemote(req.RemoteAddr) {
		b.refuse(authErr(ReasonNotLoopback, "local mode takes activities from loopback only, not %s", req.RemoteAddr), req)
		return web.NewError(http.StatusForbidden, "The bot runs in local mode (no app id) and takes activities from this machine only. Send them from the Bot Framework Emulator or curl on this machine, or give the service its app id.")
	}
	if b.local {
		if why := fromBrowserPage(req); why != "" {
			b.refuse(authErr(ReasonNotLoopback, "local mode: %s", why), req)
			return web.NewError(http.StatusForbidden, "The bot runs in local mode (no app id) and takes activities from local tools such as the Bot Framework Emulator or curl, not from web pages.")
		}
	}
	if !b.local && req.Header.Get("Authorization") == "" {
		// Refused before the body is read: no work for anonymous callers.
		ae := authErr(ReasonMissingToken, "no Authorization header")
		b.refuse(ae, req)
		return authRefusal(ae)
	}

	body, err := readBody(http.MaxBytesReader(c.Response(), req.Body, b.opts.MaxBodyBytes), req.ContentLength, b.opts.MaxBodyBytes)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return web.NewError(http.StatusRequestEntityTooLarge, "The activity is larger than "+web.Bytes(b.opts.MaxBodyBytes)+", the most the bot takes.").Wrap(err)
		}
		return web.NewError(http.StatusBadRequest, "The request body could not be read. Send it again.").Wrap(err)
	}
	var in inbound
	if err := json.Unmarshal(body, &in); err != nil {
		return web.JSONError(fmt.Errorf("%w: %w", ErrBadActivity, err), &in)
	}
	if missing := missingFields(&in); len(missing) > 0 {
		return web.NewError(http.StatusBadRequest, "The activity lacks "+strings.Join(missing, ", ")+", which every activity the bot answers must have.").
			Wrap(fmt.Errorf("%w: missing %s", ErrBadActivity, strings.Join(missing, ", ")))
	}

	if !b.local {
		if _, err := b.validator.Validate(req.Context(), req.Header.Get("Authorization"), in.ServiceURL, in.ChannelID); err != nil {
			var ae *AuthError
			if !errors.As(err, &ae) {
				ae = authErr(ReasonMalformed, "%v", err)
			}
			b.refuse(ae, req)
			return authRefusal(ae)
		}
	}

	if fromCopilot(in.Entities) {
		// Microsoft 365 Copilot's chat with the agent is the person's
		// own, whatever conversationType says (if anything): it is
		// answered as a personal chat, streamed and unshared.
		in.Activity.Conversation.ConversationType = "personal"
	}

	switch in.Type {
	case schema.Message:
		in.Activity.Text = stripMentions(in.Activity.Text, in.Entities, in.Recipient.ID, in.Recipient.Name)
		// A card's Action.Submit comes as a message whose value holds the
		// button's data and the card's inputs.
		in.Activity.Value = nil
		if len(in.Value) > 0 && in.Value[0] == '{' {
			_ = json.Unmarshal(in.Value, &in.Activity.Value)
		}
	case schema.Invoke:
		in.Activity.Value = nil
		if len(in.Value) > 0 && in.Value[0] == '{' {
			_ = json.Unmarshal(in.Value, &in.Activity.Value)
		}
	case schema.InstallationUpdate:
		// The library's dispatch has no installationUpdate case.
		if err := b.onInstallationUpdate(req.Context(), &in.Activity); err != nil {
			return err
		}
		return c.NoContent(http.StatusOK)
	case schema.ConversationUpdate:
	default:
		// Every other type (typing, messageReaction, event, ...) is
		// acknowledged and ignored.
		return c.NoContent(http.StatusOK)
	}

	handlers := b.handlers
	handlers.OnMessageFunc = func(t *activity.TurnContext) (schema.Activity, error) { return b.onMessage(req.Context(), t) }
	reply, err := activity.PrepareActivityContext(handlers, &activity.TurnContext{Activity: in.Activity})
	if err != nil {
		switch {
		case errors.Is(err, ErrBusy):
			c.Response().Header().Set("Retry-After", "5")
			return web.NewError(http.StatusServiceUnavailable, "The bot is answering too many messages at once. Send the activity again in a few seconds.").Wrap(err)
		case errors.Is(err, ErrClosed):
			c.Response().Header().Set("Retry-After", "5")
			return web.NewError(http.StatusServiceUnavailable, "The bot is shutting down. Send the activity again in a moment.").Wrap(err)
		default:
			b.logger.Error("handling activity failed", "type", string(in.Type), "conversation", in.Conversation.ID, "err", err)
			we := web.NewError(http.StatusInternalServerError, "The bot could not handle the activity; its log says why.").Wrap(err)
			we.Logged = true
			return we
		}
	}
	if reply.Type == invokeResponseType {
		ir, _ := reply.Value["invokeResponse"].(invokeResponse)
		if ir.Body == nil {
			return c.NoContent(ir.Status)
		}
		return c.JSON(ir.Status, ir.Body)
	}
	if in.Type == schema.Message {
		return c.NoContent(http.StatusAccepted)
	}
	return c.NoContent(http.StatusOK)
}

// readBody reads the whole body, sized from Content-Length when it is
// given, to spare io.ReadAll's regrowing.
func readBody(r io.Reader, length, limit int64) ([]byte, error) {
	if length <= 0 || length > limit {
		return io.ReadAll(r)
	}
	buf := bytes.NewBuffer(make([]byte, 0, length+1))
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// refuse logs and counts a refused request; it never logs the token.
func (b *Bot) refuse(ae *AuthError, req *http.Request) {
	b.metrics.authFailures.WithLabelValues(ae.Reason).Inc()
	b.logger.Warn("refused activity", "reason", ae.Reason, "detail", ae.Detail, "status", ae.Status, "remote", req.RemoteAddr)
}

// fromBrowserPage says why a local-mode request looks like it was sent by a
// web page, or "" when it does not. Without a token, the loopback check is
// the only guard, and a page can pass it: any site can POST to 127.0.0.1
// from the person's browser, and a site whose name an attacker points at
// 127.0.0.1 (DNS rebinding) even reads the answers. The Bot Framework
// Emulator, curl and the Bot Connector send none of the headers browsers add
// to such requests, and they address the service by a loopback name.
func fromBrowserPage(req *http.Request) string {
	if req.Header.Get("Origin") != "" || req.Header.Get("Sec-Fetch-Site") != "" || req.Header.Get("Sec-Fetch-Mode") != "" {
		return "the request comes from a web page (Origin or Sec-Fetch headers)"
	}
	if netaddr.IsLoopbackHostPort(req.Host) {
		return ""
	}
	return fmt.Sprintf("Host %.100q is not a loopback name", req.Host)
}

// authRefusal is the answer to a refused request: what was wrong with
// its token in plain words (the detail is in the log, never the token).
func authRefusal(ae *AuthError) error {
	var we *web.Error
	switch ae.Reason {
	case ReasonMissingToken:
		we = web.NewError(ae.Status, "The request has no Authorization bearer token: the Bot Framework signs every activity it sends to the bot.")
	case ReasonExpired, ReasonNotYetValid, ReasonMissingExpiry:
		we = web.NewError(ae.Status, "The bearer token is expired or not valid yet. Send the activity again with a fresh token.")
	case ReasonIssuer, ReasonAudience:
		we = web.NewError(ae.Status, "The bearer token is not one the Bot Framework issued for this bot (its issuer or audience is another). Check the bot's app id and cloud.")
	case ReasonServiceURL:
		we = web.NewError(ae.Status, "The bearer token was issued for another serviceUrl than the activity's.")
	case ReasonEndorsement:
		we = web.NewError(ae.Status, "The token's signing key is not endorsed for the activity's channel.")
	case ReasonKeysUnusable:
		we = web.NewError(ae.Status, "The Bot Framework's signing keys cannot be fetched right now, so no token can be checked. Send the activity again in a moment.")
	default:
		we = web.NewError(ae.Status, "The bearer token was refused: it is not a token the Bot Framework signed for this bot.")
	}
	return we.Wrap(ae)
}

// missingFields names the fields every reply needs that the activity
// lacks.
func missingFields(in *inbound) []string {
	var missing []string
	if in.Type == "" {
		missing = append(missing, "type")
	}
	if in.ServiceURL == "" {
		missing = append(missing, "serviceUrl")
	}
	if in.Conversation.ID == "" {
		missing = append(missing, "conversation.id")
	}
	if in.ChannelID == "" {
		missing = append(missing, "channelId")
	}
	if in.Type == schema.Message && in.Recipient.ID == "" {
		missing = append(missing, "recipient.id")
	}
	return missing
}

// stripMentions removes the bot's own @mention (an entity of type mention
// whose mentioned.id is the recipient), which Teams puts in the text of
// channel and group chat messages as "<at>Name</at>". Only the mention and
// one space beside it go: the rest of the text, its line breaks and the
// spaces inside a tool's JSON arguments, reaches the agent as written.
//
// Teams does not always fill the entity's text. Then, as the Teams SDK's
// stripMentionsText does (microsoft/teams.ts, @microsoft/teams.api), the
// <at> tag around the mentioned account's name goes, or around the bot's
// own name (botName) when the entity names nobody, whatever the case of
// its letters (Teams docs, "Channel and group chat conversations with a
// bot": the bot is mentioned as <at>name</at> in the text).
func stripMentions(text string, entities []entity, botID, botName string) string {
	for _, e := range entities {
		if e.Type != "mention" || e.Mentioned.ID != botID {
			continue
		}
		find := func(s string) (int, int) {
			i := strings.Index(s, e.Text)
			return i, i + len(e.Text)
		}
		if e.Text == "" {
			name := strings.TrimSpace(e.Mentioned.Name)
			if name == "" {
				name = strings.TrimSpace(botName)
			}
			if name == "" {
				continue
			}
			tag := regexp.MustCompile(`(?i)<at>\s*` + regexp.QuoteMeta(name) + `\s*</at>`)
			find = func(s string) (int, int) {
				if m := tag.FindStringIndex(s); m != nil {
					return m[0], m[1]
				}
				return -1, -1
			}
		}
		var b strings.Builder
		for {
			start, end := find(text)
			if start < 0 {
				b.WriteString(text)
				break
			}
			before, after := text[:start], text[end:]
			if strings.HasSuffix(before, " ") && strings.HasPrefix(after, " ") {
				after = after[1:]
			}
			b.WriteString(before)
			text = after
		}
		text = b.String()
	}
	return strings.TrimSpace(text)
}

// fromCopilot reports whether an activity comes from Microsoft 365
// Copilot's chat rather than from Teams' own. Both come on the msteams
// channel; Copilot's carry an entity of type ProductInfo whose id is
// COPILOT, the "sub-channel" of the Microsoft 365 Agents SDK
// (Channels.M365CopilotSubChannel and its ProductInfo entity, in the
// SDK's reference and its ProductInfo tests).
func fromCopilot(entities []entity) bool {
	for _, e := range entities {
		if strings.EqualFold(e.Type, "ProductInfo") && strings.EqualFold(e.ID, "COPILOT") {
			return true
		}
	}
	return false
}

// channelTenant returns channelData.tenant.id.
func channelTenant(a *schema.Activity) string {
	t, _ := a.ChannelData["tenant"].(map[string]interface{})
	id, _ := t["id"].(string)
	return id
}

// personOf returns who wrote: the tenant, the Entra object id and the name.
func personOf(a *schema.Activity) agent.Person {
	return agent.Person{TenantID: channelTenant(a), UserID: a.From.AadObjectID, Name: a.From.Name}
}

// onInvoke answers invokes in the HTTP response. The cards carry no
// Action.Execute, so an adaptiveCard/action gets a short message.
func (b *Bot) onInvoke(t *activity.TurnContext) (schema.Activity, error) {
	var ir invokeResponse
	switch t.Activity.Name {
	case "adaptiveCard/action":
		// "Universal Actions for Adaptive Cards": a message response.
		ir = invokeResponse{Status: http.StatusOK, Body: map[string]any{
			"statusCode": http.StatusOK,
			"type":       "application/vnd.microsoft.activity.message",
			"value":      cards.CardActionReply,
		}}
	case "message/submitAction":
		// Feedback on an answer; Teams wants 200 and an empty object.
		b.onFeedback(b.ctx, &t.Activity)
		ir = invokeResponse{Status: http.StatusOK, Body: map[string]any{}}
	default:
		ir = invokeResponse{Status: http.StatusOK, Body: map[string]any{}}
	}
	return schema.Activity{Type: invokeResponseType, Value: map[string]interface{}{"invokeResponse": ir}}, nil
}
