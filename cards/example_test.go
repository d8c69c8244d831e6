package cards_test

import (
	"encoding/json"
	"fmt"
	"time"

	"teamsbot/cards"
	"teamsbot/elicit"
	"teamsbot/internal/netaddr"
)

// The bot fills cards.Answer from the agent's answer (Refusal and ToolError
// convert directly: cards.Refusal(r)) and sends each card as the attachment
// of its own message, with the card's Summary as the activity's summary.
func ExampleAnswerCards() {
	made := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	answer := cards.Answer{
		Text: "Here is the chart.",
		Views: []cards.View{{
			ID: "v-1", Server: "crm", Tool: "ticket_chart", Title: "Tickets by week",
			ExpiresAt: made.Add(7 * 24 * time.Hour),
		}},
	}
	for _, c := range cards.AnswerCards(answer, cards.Options{PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"), Now: made}) {
		b, _ := json.Marshal(c.Attachment())
		fmt.Println(c.Summary)
		fmt.Println(c.FallbackText)
		fmt.Println(len(b) > 0, c.Attachment().ContentType)
	}
	// Output:
	// Here is the chart.
	// Here is the chart.
	// View: Tickets by week (crm), open until 9 Dec 2026 12:00 UTC: https://bot.example.com/mcp-apps/v-1
	// true application/vnd.microsoft.card.adaptive
}

// The bot sends the Connect card while a run waits for the person to
// connect an MCP server, then updates the same message with the card of
// the state the request ended in.
func ExampleConnectCard() {
	o := cards.Options{PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"), Shared: true}
	req := cards.Connect{Server: "crm", ServerTitle: "CRM", AgentName: "Assistant", PersonName: "Ada Lovelace",
		RequestID: "c-1", Wait: 5 * time.Minute}
	waiting := cards.ConnectCard(req, o)
	fmt.Println(waiting.Summary)
	fmt.Println(waiting.FallbackText)
	req.State = cards.ConnectConnected
	fmt.Println(cards.ConnectCard(req, o).FallbackText)
	// Output:
	// Ada Lovelace, connect CRM to get your answer
	// Connect CRM. Hi Ada Lovelace, to answer your question, Assistant needs you to connect CRM. Select Connect and sign in to let Assistant use CRM as you. Only Ada Lovelace can connect, with their own account. Your question waits 5 minutes for this. After that, Assistant answers without CRM. Connect: https://bot.example.com/mcp-auth/connect/c-1
	// Connected to CRM. Done: Ada Lovelace connected CRM, and Assistant now uses it to answer the question.
}

// The bot sends a server's question while the tool call waits for the
// person's answer, and updates the same message once it has ended; the
// card of an ended question shows nothing that was entered.
func ExampleElicitationCard() {
	schema := json.RawMessage(`{"type":"object","properties":{"project":{"type":"string","title":"Project","enum":["ops","web"]}},"required":["project"]}`)
	form, err := elicit.Parse(schema, elicit.PropertyOrder(schema))
	if err != nil {
		fmt.Println(err)
		return
	}
	q := cards.Elicitation{ID: "el-1", Server: "helpdesk", Tool: "create_ticket", AgentName: "Assistant", PersonName: "Ada Lovelace",
		Mode: elicit.ModeForm, Message: "Which project is the ticket for?", Form: form, Wait: 5 * time.Minute}
	asking := cards.ElicitationCard(q, cards.Options{Shared: true})
	fmt.Println(asking.Summary)
	fmt.Println(asking.FallbackText)
	q.State = cards.ElicitAccepted
	fmt.Println(cards.ElicitationCard(q, cards.Options{Shared: true}).FallbackText)
	// Output:
	// Ada Lovelace, a question from helpdesk waits for your answer
	// helpdesk asks for your input. Asked while Assistant calls the tool create_ticket. Which project is the ticket for? Only Ada Lovelace can answer this. It asks for: Project. The tool waits 5 minutes for your answer; after that it goes on as if you cancelled. Open this chat in Microsoft Teams to answer.
	// Answer sent to helpdesk. Your answer was sent to helpdesk. This card does not show it, so that nobody else reads it here.
}
