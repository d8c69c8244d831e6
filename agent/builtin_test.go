package agent_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"teamsbot/agent"
)

// answerTo asks the built-in model to answer from one tool result.
func answerTo(t *testing.T, result string) string {
	t.Helper()
	turn := agent.Turn{
		Tools: []agent.ToolSpec{{Name: "srv/t", Server: "srv", Tool: "t", Title: "T"}},
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "/t {}"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call-1", Name: "srv/t"}}},
			{Role: agent.RoleTool, ToolCallID: "call-1", ToolName: "srv/t", Text: result},
		},
	}
	msg, err := agent.NewBuiltinModel().Next(context.Background(), turn)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return msg.Text
}

// The built-in model renders a JSON result as "key: value" lines.
func TestBuiltinModelRendersJSONResult(t *testing.T) {
	got := answerTo(t, `{"accountManager":"Dana","open_tickets":2,"tags":["a","b"]}`)
	want := "T:\naccount manager: Dana\nopen tickets: 2\ntags: a, b"
	if got != want {
		t.Errorf("answer =\n%s\nwant\n%s", got, want)
	}
}

// A server's result is not trusted: JSON nested thousands of levels deep
// is shown as written (rendering it would recurse without limit and indent
// each level further), and the answer stays short and valid UTF-8 whatever
// the result's size.
func TestBuiltinModelBoundsHostileResults(t *testing.T) {
	const depth = 5000
	deep := strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth)
	got := answerTo(t, deep)
	if !strings.HasPrefix(got, "T:\n[[[[[[[[") {
		t.Errorf("deeply nested JSON rendered instead of shown as written: %.80q", got)
	}
	for name, result := range map[string]string{
		"deep JSON": deep,
		"huge text": strings.Repeat("é", 1<<20),
		"huge JSON": "[" + strings.Repeat(`"ééé",`, 1<<18) + `"end"]`,
	} {
		got := answerTo(t, result)
		if len(got) > 8100 {
			t.Errorf("%s: answer is %d bytes", name, len(got))
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: answer is not valid UTF-8 (cut inside a character)", name)
		}
	}
}

// With Turn.Stream set, the built-in model sends its final answer in a few
// pieces of whole words, in order, that join into the Text; a reply that
// calls a tool is heard not at all.
func TestBuiltinModelStreamsItsAnswer(t *testing.T) {
	turn := agent.Turn{
		Tools: []agent.ToolSpec{{Name: "srv/t", Server: "srv", Tool: "t", Title: "T"}},
		Messages: []agent.Message{
			{Role: agent.RoleUser, Text: "/t {}"},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call-1", Name: "srv/t"}}},
			{Role: agent.RoleTool, ToolCallID: "call-1", ToolName: "srv/t",
				Text: `{"accountManager":"Dana Whitfield","open_tickets":2,"region":"North  Europe","tags":["enterprise","renewal due"]}`},
		},
	}
	var heard []string
	turn.Stream = func(d string) { heard = append(heard, d) }
	msg, err := agent.NewBuiltinModel().Next(context.Background(), turn)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	if len(heard) < 3 || strings.Join(heard, "") != msg.Text {
		t.Fatalf("heard %q; want several pieces joining into %q", heard, msg.Text)
	}
	for i, d := range heard {
		if n := len(strings.Fields(d)); n == 0 || n > 4 || strings.TrimLeft(d, " \n") != d && i > 0 {
			t.Errorf("piece %d %q: want one to four whole words, each with the spaces after it", i, d)
		}
	}

	heard = nil
	turn.Messages = turn.Messages[:1]
	msg, err = agent.NewBuiltinModel().Next(context.Background(), turn)
	if err != nil || len(msg.ToolCalls) != 1 || len(heard) != 0 {
		t.Errorf("a tool call: %+v, %v, heard %q", msg, err, heard)
	}
}
