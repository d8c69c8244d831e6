package agent_test

import (
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
)

// An MCP server (a real stdio child) that hangs, crashes mid-call or
// writes garbage on its stream: the answer still arrives within the
// server's configured timeout, with a clear note of what happened, and the
// server serves the next call.
func TestFaultyStdioServerAnswerArrivesInTime(t *testing.T) {
	const timeout = 2 * time.Second
	cfg := stdioConfig()
	cfg.Timeout = timeout.String()
	for _, c := range []struct {
		tool string
		want string // in the detail the operator finds under the tool error's reference
	}{
		{"hang", "timed out after 2s"},
		{"crash", "stdio"},
		{"garbage", "stdio"},
	} {
		t.Run(c.tool, func(t *testing.T) {
			st := openStore(t)
			s := newService(t, oneAgent(cfg), agent.Options{Store: st, AppsEnabled: true})
			start := time.Now()
			ans := run(t, s, "/"+c.tool+" {}")
			took := time.Since(start)
			if took > timeout+3*time.Second {
				t.Errorf("the answer took %s, beyond the %s timeout", took, timeout)
			}
			if len(ans.ToolErrors) != 1 || refIn(ans.ToolErrors[0].Message) == "" {
				t.Fatalf("tool errors %+v, want one with a reference; text %q", ans.ToolErrors, ans.Text)
			}
			if d := problem(t, st, ans.RunID, refIn(ans.ToolErrors[0].Message)).Detail; !strings.Contains(d, c.want) {
				t.Errorf("the detail under the reference is %q, want it naming %q", d, c.want)
			}
			if ans.Text == "" {
				t.Errorf("no answer text")
			}
			t.Logf("%s: answered in %s: %s", c.tool, took.Round(time.Millisecond), ans.ToolErrors[0].Message)
			// The next call works: a broken session is replaced.
			if ans := run(t, s, "/good_view {}"); len(ans.Views) != 1 {
				t.Errorf("after %s: views %d, errors %+v, notes %q", c.tool, len(ans.Views), ans.ToolErrors, ans.Notes)
			}
		})
	}
}
