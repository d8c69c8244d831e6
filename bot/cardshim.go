package bot

// Temporary: these stand in for package cards until its functions land,
// and are replaced by calls to it then.

import (
	"net/url"
	"strings"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
)

const adaptiveCardType = "application/vnd.microsoft.card.adaptive"

func shimCard(body ...map[string]any) schema.Attachment {
	return schema.Attachment{ContentType: adaptiveCardType, Content: map[string]any{
		"type": "AdaptiveCard", "version": "1.5",
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"body":    body,
	}}
}

func shimText(s string) map[string]any {
	return map[string]any{"type": "TextBlock", "text": s, "wrap": true}
}

func answerAttachments(ans agent.Answer, publicBaseURL string) []schema.Attachment {
	body := []map[string]any{shimText(ans.Text)}
	https := strings.HasPrefix(publicBaseURL, "https://")
	for _, v := range ans.Views {
		body = append(body, shimText(v.Tool))
		if https {
			body = append(body, map[string]any{"type": "ActionSet", "actions": []any{map[string]any{
				"type": "Action.OpenUrl", "title": "Open",
				"url": strings.TrimSuffix(publicBaseURL, "/") + "/mcp-apps/" + url.PathEscape(v.ID),
			}}})
		}
	}
	return []schema.Attachment{shimCard(body...)}
}

func welcomeAttachment() schema.Attachment { return shimCard(shimText("Hello")) }
func workingAttachment() schema.Attachment { return shimCard(shimText("Working on it")) }
func refusalAttachment(reason string) schema.Attachment {
	return shimCard(shimText("Sorry: " + reason))
}
func errorAttachment() schema.Attachment { return shimCard(shimText("Something went wrong")) }
