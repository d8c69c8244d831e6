package agent_test

import (
	"context"
	"errors"
	"testing"

	"teamsbot/agent"
	"teamsbot/store"
)

// A run is saved with its turn of the conversation's memory; when the
// store refuses the turn (here a conversation id with a NUL byte, which no
// key may hold) the run, its views and its audit records are saved all the
// same and the answer is given: the memory is lost, never the run.
func TestRunSavedWhenItsTurnIsRefused(t *testing.T) {
	cfg := agent.DefaultConfig()
	st := openStore(t)
	s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true})
	ctx := context.Background()
	for _, c := range []struct {
		conv     string
		wantKept bool
	}{
		{"a:kept-chat", true},
		{"a:broken\x00chat", false},
	} {
		ans, err := s.Run(ctx, agent.Request{Person: alice, Text: "/sales_report {}", Conversation: c.conv})
		if err != nil || len(ans.Views) != 1 {
			t.Fatalf("%q: run = %d views, %v; want 1 view and no error", c.conv, len(ans.Views), err)
		}
		run, err := st.GetRun(ctx, ans.RunID)
		if err != nil {
			t.Fatalf("%q: the run was not saved: %v", c.conv, err)
		}
		if _, err := st.View(ctx, run.ViewIDs[0]); err != nil {
			t.Errorf("%q: the run's view was not saved: %v", c.conv, err)
		}
		hs, err := st.History(ctx, alice.TenantID, c.conv, cfg.Agents[0].ID, 10, 100_000)
		if c.wantKept && (err != nil || len(hs) != 1 || hs[0].RunID != ans.RunID) {
			t.Errorf("%q: History = %+v, %v; want the run's turn", c.conv, hs, err)
		}
		if !c.wantKept && !errors.Is(err, store.ErrInvalid) && len(hs) != 0 {
			t.Errorf("%q: History = %d turns, %v; want none", c.conv, len(hs), err)
		}
	}
}
