package bot

import (
	"context"
	"encoding/json"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// What an AI answer carries in Teams, as Microsoft's "Bot messages with
// AI-generated content" (Teams platform, bots/how-to) describes it: a root
// message entity with additionalType AIGeneratedContent (the "AI
// generated" label), citations as Claim objects whose positions match
// [n] in the message text (at most 20; a title of at most 80 characters,
// an abstract of at most 160, at most three keywords of 28), and feedback
// buttons enabled by channelData.feedbackLoop, whose answers arrive as a
// message/submitAction invoke that must be answered 200 with an empty
// object.
const (
	maxCitations        = 20
	maxCitationName     = 80
	maxCitationAbstract = 160
	maxCitationKeywords = 3
	maxCitationKeyword  = 28
)

// AuditFeedback is the audit action of a person's feedback on an answer,
// Teams' thumbs up or down with their words: the in-app way to report
// harmful AI content.
const AuditFeedback = "bot.feedback"

// maxFeedbackText bounds the words of one feedback kept in the audit log.
const maxFeedbackText = 2000

// messageEntity is the root message entity of an AI answer.
type messageEntity struct {
	Type           string     `json:"type"`
	AtType         string     `json:"@type"`
	AtContext      string     `json:"@context"`
	AdditionalType []string   `json:"additionalType"`
	Citation       []citation `json:"citation,omitempty"`
}

type citation struct {
	AtType     string     `json:"@type"`
	Position   int        `json:"position"`
	Appearance appearance `json:"appearance"`
}

type appearance struct {
	AtType   string   `json:"@type"`
	Name     string   `json:"name"`
	URL      string   `json:"url,omitempty"`
	Abstract string   `json:"abstract,omitempty"`
	Keywords []string `json:"keywords,omitempty"`
}

// aiAnswer is what the messages of one AI answer carry besides their card:
// the citation line and the citations go on the first message only, the
// label and the feedback buttons on every one.
type aiAnswer struct {
	text      string
	citations []citation
}

// aiMarks builds the label and the citations of an answer: one citation
// per tool whose result the answer relies on, naming the tool and its
// server, linked to the view's page when the tool made a view that the
// card can open (an https public base URL).
func (b *Bot) aiMarks(ans agent.Answer) *aiAnswer {
	out := &aiAnswer{}
	for i, src := range ans.Sources {
		if i == maxCitations {
			break
		}
		app := appearance{
			AtType:   "DigitalDocument",
			Name:     textclip.Clip(cards.CitationName(src.Tool, src.Server), maxCitationName),
			Keywords: []string{textclip.Clip(src.Tool, maxCitationKeyword), textclip.Clip(src.Server, maxCitationKeyword)},
		}
		abstract := cards.CitationAbstract(src.Tool, src.Server)
		if src.ViewID != "" {
			if u, ok := cards.ViewURL(b.opts.PublicBaseURL, src.ViewID); ok {
				app.URL = u
				abstract = cards.CitationAbstractView(src.Tool, src.Server)
			}
		}
		app.Abstract = textclip.Clip(abstract, maxCitationAbstract)
		app.Keywords = app.Keywords[:min(len(app.Keywords), maxCitationKeywords)]
		out.citations = append(out.citations, citation{AtType: "Claim", Position: i + 1, Appearance: app})
	}
	out.text = cards.SourcesLine(len(out.citations))
	return out
}

// mark labels one message of an AI answer; first carries the citations.
func (ai *aiAnswer) mark(out *outActivity, first bool) {
	e := messageEntity{Type: "https://schema.org/Message", AtType: "Message", AtContext: "https://schema.org", AdditionalType: []string{"AIGeneratedContent"}}
	if first {
		e.Citation = ai.citations
		out.Text = ai.text
	}
	out.Entities = []any{e}
	if out.ChannelData == nil {
		out.ChannelData = map[string]any{}
	}
	out.ChannelData["feedbackLoop"] = map[string]any{"type": "default"}
}

// onFeedback stores a person's feedback on an answer in the audit log of
// their tenant (bot.feedback: the reaction, their words, the message it
// is about). Feedback from a channel or tenant the bot does not serve is
// not kept, as their messages make no run.
func (b *Bot) onFeedback(ctx context.Context, a *schema.Activity) {
	p := personOf(a)
	if r := b.gateIdentity(a, p); r != nil {
		b.logger.Info("feedback ignored", "reason", r.reason, "tenant", clipID(p.TenantID))
		return
	}
	// The invoke's value: {"actionName": "feedback", "actionValue":
	// {"reaction": "like" or "dislike", "feedback": "{\"feedbackText\": ...}"}}.
	if name, _ := a.Value["actionName"].(string); name != "feedback" {
		return
	}
	value, _ := a.Value["actionValue"].(map[string]any)
	reaction, _ := value["reaction"].(string)
	if reaction != "like" && reaction != "dislike" {
		reaction = "unknown"
	}
	// Teams sends the form's words as a JSON text; anything else is kept
	// as it came.
	text, _ := value["feedback"].(string)
	var form struct {
		FeedbackText string `json:"feedbackText"`
	}
	if json.Unmarshal([]byte(text), &form) == nil {
		text = form.FeedbackText
	}
	b.audit(ctx, store.AuditRecord{TenantID: p.TenantID, Action: AuditFeedback, Actor: p.UserID, Fields: map[string]any{
		"reaction": reaction, "text": textclip.Clip(text, maxFeedbackText),
		"activity": clipID(a.ReplyToID), "conversation": clipID(a.Conversation.ID),
	}})
	b.metrics.feedback.WithLabelValues(reaction).Inc()
}
