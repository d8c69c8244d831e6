package cards

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"teamsbot/internal/netaddr"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// now is the moment every golden card is made at.
var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

var (
	httpsBase = netaddr.MustParseOrigin("https://teams.example.com")
	httpBase  = netaddr.MustParseOrigin("http://localhost:3978")
)

// message is one golden message: what the bot puts in one activity.
type message struct {
	Summary     string `json:"summary"`
	ContentType string `json:"contentType"`
	Content     Card   `json:"content"`
}

func messages(cs ...Card) []message {
	out := make([]message, len(cs))
	for i, c := range cs {
		a := c.Attachment()
		out[i] = message{Summary: c.Summary, ContentType: a.ContentType, Content: a.Content}
	}
	return out
}

func view(id, server, tool, title string) View {
	return View{ID: id, Server: server, Tool: tool, Title: title, ExpiresAt: now.Add(7 * 24 * time.Hour)}
}

const answerText = "Here are the open tickets for **Contoso**:\n\n" +
	"- TICK-101: printer on floor 3 is offline\n" +
	"- TICK-102: VPN drops every hour\n\n" +
	"The chart below shows them by week."

func twoViews() []View {
	return []View{
		view("v-7f3a", "crm", "ticket_chart", "Tickets by week"),
		view("v-91bc", "crm", "ticket_form", ""),
	}
}

func longText() string {
	var b strings.Builder
	for i := 1; b.Len() < 60_000; i++ {
		fmt.Fprintf(&b, "%d. Step %d of the migration: move the mailbox, check the rules, tell the user. 🚀\n", i, i)
	}
	return b.String()
}

func manyViews(n int) []View {
	var vs []View
	for i := range n {
		vs = append(vs, view(fmt.Sprintf("v-%03d", i), "monitoring", "chart", fmt.Sprintf("Latency of service %d", i)))
	}
	return vs
}

// goldenCases are every card shape the bot sends.
func goldenCases() map[string][]Card {
	https := Options{PublicBaseURL: httpsBase, Now: now}
	stage := Options{PublicBaseURL: httpsBase, Now: now, StageView: true}
	http := Options{PublicBaseURL: httpBase, Now: now}
	cases := map[string][]Card{
		"answer_views_https": AnswerCards(Answer{Text: answerText, Views: twoViews()}, https),
		// Inside Teams (TICKETIQ_TEAMS_TAB): Stage View first, the browser second.
		"answer_views_stage": AnswerCards(Answer{Text: answerText, Views: twoViews()}, stage),
		"welcome_stage":      {Welcome(stage)},
		"answer_views_http":  AnswerCards(Answer{Text: answerText, Views: twoViews()}, http),
		"answer_group_chat": AnswerCards(Answer{Text: answerText, Views: twoViews()},
			Options{PublicBaseURL: httpsBase, Now: now, Shared: true, Owner: "Ada Lovelace"}),
		"answer_refused": AnswerCards(Answer{
			Text:  "I found two dashboards; one of them could be shown.",
			Views: twoViews()[:1],
			Refusals: []Refusal{
				{Server: "crm", Tool: "pipeline", ResourceURI: "ui://crm/pipeline", Reason: "mime", Ref: "7KQ2M9XD"},
				{Server: "crm", Tool: "legacy", ResourceURI: "https://crm.example.com/view", Reason: "scheme", Ref: "H3V8TN4W"},
				{Server: "bi", Tool: "report", ResourceURI: "ui://bi/report", Reason: "size", Ref: "Q0ZC6R1P"},
				{Server: "bi", Tool: "map", ResourceURI: "ui://bi/map", Reason: "read", Ref: "B5MX2KJ9"},
				{Server: "bi", Tool: "blank", ResourceURI: "ui://bi/blank", Reason: "content", Ref: "N8DT3FYA"},
			},
		}, https),
		"answer_tool_error": AnswerCards(Answer{
			Text:       "I could not look up the ticket history.",
			ToolErrors: []ToolError{{Server: "crm", Tool: "ticket_history", Message: "upstream timeout after 30s"}},
		}, https),
		"answer_notes": AnswerCards(Answer{
			Text:  "Done.",
			Views: twoViews()[:1],
			Notes: []string{
				`Tool "debug-log" of server "debug" is only for views (visibility ["app"]); it was not offered to the model.`,
				"The model called 2 tools in 1.4 s.",
			},
		}, https),
		"answer_long_text": AnswerCards(Answer{
			Text:  longText(),
			Views: twoViews(),
			Notes: []string{"The answer was long."},
		}, https),
		"answer_many_views": AnswerCards(Answer{Text: "Latency of every service:", Views: manyViews(40)}, https),
		"answer_hostile": AnswerCards(Answer{
			Text: "See [the report](https://evil.example/login) or ![img](https://evil.example/p.png) " +
				"or <https://evil.example/auto> or www.evil.example or mail@evil.example.\n# Urgent\n[ref]: https://evil.example/ref\n" +
				"Due {{DATE(2026-01-01T00:00:00Z, SHORT)}} at {{TIME(2026-01-01T00:00:00Z)}}.",
			Views: []View{
				view("../../admin?x=1#frag", "www.evil.example", "x{{DATE(2020-01-01T00:00:00Z)}}",
					"[Click here](https://evil.example) **now** <b>bold</b>\u202Egnp.exe\n\nsecond line"),
				view("..", "crm", "chart", "Chart"),
			},
			ToolErrors: []ToolError{{Server: "mail@evil.example", Tool: "fetch", Message: "see http://evil.example/x for details, due {{DATE(2026-01-01T00:00:00Z, SHORT)}}"}},
		}, https),
		"answer_expired": AnswerCards(Answer{Text: "An old answer.", Views: twoViews()[:1]},
			Options{PublicBaseURL: httpsBase, Now: now.Add(8 * 24 * time.Hour)}),
		"answer_empty": AnswerCards(Answer{}, https),
		"answer_scheduled": AnswerCards(Answer{Text: answerText, Views: twoViews()[:1],
			Trigger: &Trigger{Name: "Monday sales report", Scheduled: true}}, https),
		"answer_api_key": AnswerCards(Answer{Text: "Nightly build summary.",
			Trigger: &Trigger{Name: "CI [pipeline](https://evil.example) **bold**"}}, https),
		"welcome":            {Welcome(Options{PublicBaseURL: httpsBase, AgentName: "Contoso Helpdesk"})},
		"welcome_http":       {Welcome(Options{PublicBaseURL: httpBase})},
		"working":            {Working("Which tickets did **Contoso** open last week, and which are still waiting for a reply from the second-level support team in Lisbon, grouped by priority and sorted by age, oldest first, please, with links?")},
		"answered":           {Answered()},
		"missing_identity":   {MissingIdentity()},
		"not_served":         {NotServed()},
		"not_allowed":        {NotAllowed("using default needs the agents.run role. Ask an administrator of your organisation's Teams app to give you the role.")},
		"access_unavailable": {AccessUnavailable()},
		"error":              {RunFailed("run-01JEXAMPLE")},
		// A run waits for a person to connect an MCP server, and the card's
		// updates: connected, timed out, refused.
		"connect_waiting":          {ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: httpsBase, Shared: true})},
		"connect_waiting_personal": {ConnectCard(Connect{Server: "crm", RequestID: "c-4d2e", Wait: 90 * time.Second}, Options{PublicBaseURL: httpsBase, AgentName: "Contoso Helpdesk"})},
		"connect_waiting_http":     {ConnectCard(crmConnect(ConnectWaiting), Options{PublicBaseURL: httpBase, Shared: true})},
		"connect_connected":        {ConnectCard(crmConnect(ConnectConnected), Options{PublicBaseURL: httpsBase, Shared: true})},
		"connect_timed_out":        {ConnectCard(crmConnect(ConnectTimedOut), Options{PublicBaseURL: httpsBase, Shared: true})},
		"connect_refused":          {ConnectCard(crmConnect(ConnectRefused), Options{PublicBaseURL: httpsBase, Shared: true})},
		"connections":              {Connections(twoConnections(), httpsBase.URL("/mcp-auth/connections"), Options{PublicBaseURL: httpsBase})},
		"connections_empty":        {Connections(nil, httpsBase.URL("/mcp-auth/connections"), Options{PublicBaseURL: httpsBase})},
		"connections_http":         {Connections(twoConnections(), httpBase.URL("/mcp-auth/connections"), Options{PublicBaseURL: httpBase})},
		"disconnected":             {Disconnected("CRM", true)},
		"disconnected_not_found":   {Disconnected("billing", false)},
	}
	for name, cs := range elicitGoldenCases() {
		cases[name] = cs
	}
	return cases
}

// crmConnect is the request of the golden Connect cards, in state s.
func crmConnect(s ConnectState) Connect {
	return Connect{Server: "crm", ServerTitle: "CRM", AgentName: "Assistant", PersonName: "Ada Lovelace",
		RequestID: "c-4d2e", Wait: 5 * time.Minute, State: s}
}

// twoConnections are a person's connections: one in use, one never used.
func twoConnections() []ConnectionItem {
	return []ConnectionItem{
		{Agent: "Assistant", Server: "crm", ConnectedAt: now.Add(-30 * 24 * time.Hour), LastUsedAt: now.Add(-2 * time.Hour)},
		{Agent: "Assistant", Server: "billing", ConnectedAt: now.Add(-24 * time.Hour)},
	}
}

// TestGolden compares every card shape with its file in testdata/.
// Run with -update to rewrite them after a deliberate change.
func TestGolden(t *testing.T) {
	for name, cs := range goldenCases() {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(messages(cs...), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./cards -run TestGolden -update to create it)", err)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if d := cmp.Diff(w, g); d != "" {
				t.Errorf("%s differs (-file +got):\n%s", path, d)
			}
		})
	}
}

// TestGoldenFilesHaveCases keeps testdata/ free of cards nobody makes any more.
func TestGoldenFilesHaveCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := goldenCases()
	for _, f := range files {
		if _, ok := cases[strings.TrimSuffix(filepath.Base(f), ".json")]; !ok {
			t.Errorf("%s has no golden case", f)
		}
	}
	if len(files) != len(cases) {
		t.Errorf("%d golden files for %d cases", len(files), len(cases))
	}
}
