// Package cards turns what the agent said into Microsoft Teams Adaptive
// Cards: the answer with one block per MCP App view (and its Open button),
// the views that were refused, failed tool calls and folded run notes, plus
// the small cards the bot sends on install, while it works, and when it must
// refuse or a run fails, the cards of per-person connections to MCP
// servers (the Connect card a run waits on, and a person's list of them),
// and the card of an MCP server's question to the person during a tool
// call (elicitation): a form, or an address to open.
//
// Everything here is a pure function of its input: no I/O, no clock, no
// configuration read from the environment. The bot fills Answer from the
// agent's answer and sends each Card as an attachment; this package does not
// know the Bot Framework or the agent.
//
// The cards declare, and use only, schema version 1.2: Teams desktop and web
// render up to 1.5 ("Types of cards", Teams platform documentation), but
// Teams mobile renders 1.2, and a card declaring a later version can be
// shown there as unsupported.
//
// Every word a person reads in Teams lives in words.go: the cards' texts,
// summaries, fallback texts and button titles, and the words the bot sends
// outside a card (the streaming message's updates, the citation line and
// abstracts), which the bot takes from here. They are English.
//
// Text from tools, MCP servers and the model is treated as hostile: it takes
// one rule on its way in (text.go), which leaves no address Teams would
// link and no text function ({{DATE()}}) Teams would evaluate; names go in
// TextRuns (which Teams never reads as markdown), links in the model's
// answer are shown with their address, and the only URL a button ever
// carries is on the public base URL (a view's or a Connect request's page
// with its escaped id, or the connections page) or, once the person chose
// to go on with a server's URL mode question, the https address it asked
// them to open, which the card writes out in full first. A view's HTML is
// never put in a card.
package cards

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// ContentType is the Bot Framework attachment content type of an Adaptive Card.
const ContentType = "application/vnd.microsoft.card.adaptive"

// SchemaVersion is the Adaptive Card version the cards declare: the one
// every Teams client renders, desktop, web and mobile.
const SchemaVersion = "1.2"

// SchemaURL is the Adaptive Card JSON schema, named in every card.
const SchemaURL = "http://adaptivecards.io/schemas/adaptive-card.json"

// SizeLimit is the most Teams accepts in one message, in UTF-16 code units of
// the serialized activity. Teams measures "the entire message payload encoded
// as UTF-16" (Format your bot messages, Teams platform documentation) against
// 28 KB, and each code unit takes two bytes: 28 KB is 14,336 code units.
const SizeLimit = 28 * 1024 / 2

// MaxCardSize is the most one card takes (UTF-16 code units of its JSON), so
// that the activity around it (summary, addresses, ids: 4 KB in UTF-16 at
// most) still fits in SizeLimit.
const MaxCardSize = SizeLimit - 4*1024/2

// Card is one Adaptive Card. It marshals to the card JSON (the attachment's
// content). Build one with the functions of this package.
type Card struct {
	// Summary is one plain line for notifications and the chat list. It is
	// not part of the card JSON: the bot sets it as the activity's summary.
	Summary string
	// FallbackText is the plain text shown by clients that cannot render the
	// card; it is the card's fallbackText.
	FallbackText string

	body []element
}

// Attachment is a Bot Framework attachment carrying an Adaptive Card, shaped
// like the attachments of a message activity.
type Attachment struct {
	// ContentType is always ContentType.
	ContentType string `json:"contentType"`
	// Content is the card.
	Content Card `json:"content"`
}

// Attachment wraps the card for a Bot Framework message activity.
func (c Card) Attachment() Attachment {
	return Attachment{ContentType: ContentType, Content: c}
}

// msTeams is the Teams-specific part of a card.
type msTeams struct {
	Width string `json:"width"`
}

// wireCard is the card as Teams reads it.
type wireCard struct {
	Type         string    `json:"type"`
	Schema       string    `json:"$schema"`
	Version      string    `json:"version"`
	FallbackText string    `json:"fallbackText"`
	MSTeams      msTeams   `json:"msteams"`
	Body         []element `json:"body"`
}

// MarshalJSON writes the Adaptive Card. Full width, because answers with
// lists and view blocks read badly in Teams' default narrow bubble.
func (c Card) MarshalJSON() ([]byte, error) {
	body := c.body
	if body == nil {
		body = []element{} // the renderer wants an array, even an empty one
	}
	return json.Marshal(wireCard{
		Type:         "AdaptiveCard",
		Schema:       SchemaURL,
		Version:      SchemaVersion,
		FallbackText: c.FallbackText,
		MSTeams:      msTeams{Width: "Full"},
		Body:         body,
	})
}

// Size is the length of the card's JSON in UTF-16 code units: half its size
// in bytes encoded as UTF-16, which is how Teams measures its message limit.
// It uses encoding/json's default escaping, the same as any caller that
// marshals the card inside an activity (which gives the same bytes as
// MarshalJSON).
func (c Card) Size() int {
	b, err := c.MarshalJSON()
	if err != nil {
		// Only plain strings and bools are marshalled; this cannot happen.
		panic("cards: marshal card: " + err.Error())
	}
	return utf16Len(b)
}

// utf16Len counts UTF-16 code units of UTF-8 text.
func utf16Len(b []byte) int {
	n := 0
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		b = b[size:]
		n += utf16.RuneLen(r)
	}
	return n
}

// element is anything that can sit in a card's body.
type element interface{ isElement() }

// textBlock is a TextBlock. Its text is read as markdown by Teams, so only
// our own words and the model's neutralised answer go into one.
type textBlock struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Wrap      bool   `json:"wrap"`
	Weight    string `json:"weight,omitempty"`
	Size      string `json:"size,omitempty"`
	Color     string `json:"color,omitempty"`
	IsSubtle  bool   `json:"isSubtle,omitempty"`
	Spacing   string `json:"spacing,omitempty"`
	Separator bool   `json:"separator,omitempty"`
}

// richText is a RichTextBlock: TextRuns are never read as markdown, which
// makes them the place for names and messages from tools and servers.
type richText struct {
	Type    string    `json:"type"`
	Inlines []textRun `json:"inlines"`
	Spacing string    `json:"spacing,omitempty"`
}

// textRun is one run of plain text inside a richText.
type textRun struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Weight   string `json:"weight,omitempty"`
	Size     string `json:"size,omitempty"`
	Color    string `json:"color,omitempty"`
	IsSubtle bool   `json:"isSubtle,omitempty"`
	Italic   bool   `json:"italic,omitempty"`
	FontType string `json:"fontType,omitempty"`
}

// container groups elements; a hidden one is shown by a toggle action.
type container struct {
	Type      string    `json:"type"`
	ID        string    `json:"id,omitempty"`
	Style     string    `json:"style,omitempty"`
	IsVisible *bool     `json:"isVisible,omitempty"`
	Spacing   string    `json:"spacing,omitempty"`
	Separator bool      `json:"separator,omitempty"`
	Items     []element `json:"items"`
}

// actionSet puts buttons inside the body, next to what they act on.
type actionSet struct {
	Type    string `json:"type"`
	Actions []any  `json:"actions"`
	Spacing string `json:"spacing,omitempty"`
}

// openURL is an Action.OpenUrl button.
type openURL struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	URL   string `json:"url"`
	Style string `json:"style,omitempty"`
}

// submit is an Action.Submit button.
type submit struct {
	Type  string `json:"type"`
	Title string `json:"title"`
	Data  any    `json:"data"`
}

// stageView is a view's Open button inside Teams: the Stage View action of
// Microsoft's "Open content in Stageview" ("Invoke from Adaptive Card"):
// an Action.Submit whose data.msteams is an invoke of type
// tab/tabInfoAction, which Teams itself answers by opening contentUrl in
// Stage View (a Collaborative Stage View window on desktop, a Stage View
// modal on the web; mobile clients of apps not optimized for them open
// websiteUrl in the browser). The browser's Action.OpenUrl to the same
// page goes next to it, for the clients that show no Stage View; it is not
// the action's Adaptive Card "fallback", which a host uses only for an
// action type it does not know, and every host knows Action.Submit (the
// official renderer drops such a fallback).
func stageView(v viewInfo, open openURL) submit {
	return submit{
		Type:  "Action.Submit",
		Title: open.Title,
		Data: map[string]any{"msteams": map[string]any{
			"type": "invoke",
			"value": map[string]any{
				"type": "tab/tabInfoAction",
				"tabInfo": map[string]string{
					"contentUrl": v.url,
					"websiteUrl": v.url,
					"name":       v.title,
					"entityId":   "view-" + v.id,
				},
			},
		}},
	}
}

// toggle is an Action.ToggleVisibility button.
type toggle struct {
	Type           string   `json:"type"`
	Title          string   `json:"title"`
	TargetElements []string `json:"targetElements"`
}

func (textBlock) isElement() {}
func (richText) isElement()  {}
func (container) isElement() {}
func (actionSet) isElement() {}

// text returns a wrapping TextBlock.
func text(s string) textBlock { return textBlock{Type: "TextBlock", Text: s, Wrap: true} }

// heading returns a bold TextBlock; the 1.5 "heading" style is left out
// because Teams mobile (1.2) would drop it.
func heading(s string) textBlock {
	t := text(s)
	t.Weight = "Bolder"
	t.Size = "Medium"
	return t
}

// run returns a plain TextRun.
func run(s string) textRun { return textRun{Type: "TextRun", Text: s} }

// bold returns a bold TextRun.
func bold(s string) textRun { r := run(s); r.Weight = "Bolder"; return r }

// subtle returns a subtle TextRun.
func subtle(s string) textRun { r := run(s); r.IsSubtle = true; return r }

// rich returns a RichTextBlock of the given runs.
func rich(runs ...textRun) richText { return richText{Type: "RichTextBlock", Inlines: runs} }

// box returns a container.
func box(style string, items ...element) container {
	return container{Type: "Container", Style: style, Items: items}
}

// buttons returns an ActionSet.
func buttons(actions ...any) actionSet { return actionSet{Type: "ActionSet", Actions: actions} }

// newCard assembles a card.
func newCard(summary, fallback string, body ...element) Card {
	return Card{Summary: summary, FallbackText: fallback, body: body}
}
