package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"teamsbot/agent"
)

// debugServer returns the command of the official
// @modelcontextprotocol/server-debug@2.0.3 from the project's node_modules.
// Without Node it fails (skips under -short): the test is about a real peer.
func debugServer(t *testing.T) []string {
	t.Helper()
	bin, err := filepath.Abs("../node_modules/.bin/mcp-server-debug")
	if err != nil {
		t.Fatal(err)
	}
	_, nodeErr := exec.LookPath("node")
	_, binErr := os.Stat(bin)
	if nodeErr != nil || binErr != nil {
		if testing.Short() {
			t.Skip("node or @modelcontextprotocol/server-debug missing (-short)")
		}
		t.Fatalf("this test needs node and @modelcontextprotocol/server-debug@2.0.3 in node_modules (npm ci): node: %v, server: %v", nodeErr, binErr)
	}
	return []string{bin, "--stdio"}
}

// The official debug server: its debug-tool makes a view; debug-log and
// debug-refresh are app-only, so the model neither sees them nor may call
// them; the view may call debug-log (which writes to DEBUG_LOG_FILE); a
// view's call of a tool that is not an app tool of its own server is
// refused and audited.
func TestOfficialDebugServer(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "debug-log.jsonl")
	cfg := oneAgent(
		agent.ServerConfig{Name: "debug", Command: debugServer(t), Env: map[string]string{"DEBUG_LOG_FILE": logFile}, Timeout: "20s"},
		agent.ServerConfig{Name: "demo", Builtin: "demo"},
	)
	st := openStore(t)
	s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true})
	ctx := context.Background()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}

	ans := run(t, s, "/tools")
	for _, appOnly := range []string{"debug-log", "debug-refresh"} {
		if strings.Contains(ans.Text, appOnly) {
			t.Errorf("/tools lists %s:\n%s", appOnly, ans.Text)
		}
		if !hasNote(ans.Notes, "debug/"+appOnly, "not offered to the model") {
			t.Errorf("notes do not say why %s is left out: %q", appOnly, ans.Notes)
		}
	}
	if !strings.Contains(ans.Text, "debug/debug-tool") {
		t.Errorf("/tools lacks debug-tool:\n%s", ans.Text)
	}

	ans = run(t, s, `/debug-log {"type": "from-model", "payload": {}}`)
	if len(ans.ToolErrors) != 1 || !strings.Contains(ans.ToolErrors[0].Message, "not offered to the model") {
		t.Errorf("the model's debug-log call was not refused: %+v", ans.ToolErrors)
	}

	ans = run(t, s, "/debug-tool {}")
	if len(ans.Views) != 1 {
		t.Fatalf("debug-tool: views %d, refusals %+v, notes %q", len(ans.Views), ans.Refusals, ans.Notes)
	}
	v := ans.Views[0]
	if v.Server != "debug" || v.ResourceURI != "ui://debug-tool/mcp-app.html" {
		t.Errorf("view: %s %s", v.Server, v.ResourceURI)
	}
	if strings.Contains(ans.Text, "<html") || strings.Contains(ans.Text, "<script") {
		t.Errorf("the answer holds the view's HTML: %q", ans.Text)
	}

	res, err := s.CallFromView(ctx, v, alice, "debug-log", json.RawMessage(`{"type": "from-view", "payload": {"n": 1}}`))
	if err != nil || res.IsError {
		t.Fatalf("debug-log from the view: %v %+v", err, res)
	}
	logged, err := os.ReadFile(logFile)
	if err != nil || !strings.Contains(string(logged), "from-view") {
		t.Errorf("DEBUG_LOG_FILE does not hold the view's event: %v %q", err, logged)
	}
	if strings.Contains(string(logged), "from-model") {
		t.Errorf("the model's refused call reached the server: %q", logged)
	}

	for _, name := range []string{"lookup_customer", "demo/lookup_customer"} {
		if _, err := s.CallFromView(ctx, v, alice, name, json.RawMessage(`{"customer": "Contoso"}`)); !errors.Is(err, agent.ErrToolNotAllowed) {
			t.Errorf("CallFromView(%s) = %v, want ErrToolNotAllowed", name, err)
		}
	}
	var got []string
	for _, r := range audit(t, st, agent.AuditAppCall) {
		got = append(got, field(r, "tool")+":"+field(r, "result"))
	}
	want := []string{"debug-log:ok", "lookup_customer:refused", "demo/lookup_customer:refused"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agent.mcp_app.call records (-want +got):\n%s", diff)
	}
}
