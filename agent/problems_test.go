package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"teamsbot/agent"
	"teamsbot/internal/testenv"
)

// secretCommand is a stdio server's command under a path an operator would
// not show anyone; it does not exist, so the server cannot start.
const secretCommand = "/opt/internal/secret-path/mcp-server"

// internals are what must never reach a person: the path, the exec error
// and the Go error chain's prefixes.
var internals = []string{"/opt/internal", "secret-path", "fork/exec", "no such file", "agent: ", "starting "}

// A stdio server that cannot start: the note says so in a person's words
// with a reference, and so do the tool error and the model's answer for a
// call of its tool; the path and the exec error are in the log line, the
// run record and the audit record under that reference, and nowhere a
// person reads.
func TestServerThatCannotStartIsNotedForPeople(t *testing.T) {
	st := openStore(t)
	var logs testenv.LogBuffer
	cfg := oneAgent(
		agent.ServerConfig{Name: "demo", Builtin: agent.BuiltinDemo},
		agent.ServerConfig{Name: "crm", Command: []string{secretCommand, "--stdio"}},
	)
	s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true, RetryInterval: 1,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})

	ans := run(t, s, "/crm/sales_report {}")
	var note string
	for _, n := range ans.Notes {
		if strings.HasPrefix(n, "the crm server is unavailable, so its tools were not offered (ref ") {
			note = n
		}
	}
	if note == "" {
		t.Fatalf("no note says the crm server is unavailable: %q", ans.Notes)
	}
	if len(ans.ToolErrors) != 1 || !strings.HasPrefix(ans.ToolErrors[0].Message, "the crm server is unavailable (ref ") {
		t.Fatalf("tool errors %+v, want the crm server unavailable with a reference", ans.ToolErrors)
	}
	read, _ := json.Marshal(map[string]any{"text": ans.Text, "notes": ans.Notes, "errors": ans.ToolErrors, "refusals": ans.Refusals})
	for _, bad := range internals {
		if strings.Contains(string(read), bad) {
			t.Errorf("what a person reads holds %q: %s", bad, read)
		}
	}
	if !strings.Contains(ans.Text, "the crm server is unavailable") {
		t.Errorf("the answer does not say what failed: %q", ans.Text)
	}

	for _, ref := range []string{refIn(note), refIn(ans.ToolErrors[0].Message)} {
		p := problem(t, st, ans.RunID, ref)
		if !strings.Contains(p.Detail, secretCommand) || !strings.Contains(p.Detail, "no such file") {
			t.Errorf("the run record's detail under %s is %q, want the path and the exec error", ref, p.Detail)
		}
		line := jsonLine(logs.String(), func(m map[string]any) bool { return m["msg"] == "run problem" && m["ref"] == ref })
		if line == nil || !strings.Contains(fmt.Sprint(line["err"]), secretCommand) || line["run"] != ans.RunID {
			t.Errorf("no log line holds the detail under %s: %v\n%s", ref, line, logs.String())
		}
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "ref") != refIn(ans.ToolErrors[0].Message) || !strings.Contains(field(recs[0], "why"), secretCommand) {
		t.Errorf("the call's audit record does not hold the detail under the reference: %+v", recs)
	}
	if run, err := st.GetRun(context.Background(), ans.RunID); err != nil || strings.Join(run.Notes, "\n") != strings.Join(ans.Notes, "\n") {
		t.Errorf("the run record's notes %q, %v; want the person's", run.Notes, err)
	}
}

// jsonLine returns the first of the JSON log lines in logs that match.
func jsonLine(logs string, match func(map[string]any) bool) map[string]any {
	for _, l := range strings.Split(logs, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && match(m) {
			return m
		}
	}
	return nil
}
