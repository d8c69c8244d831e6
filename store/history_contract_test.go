package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

// channel is a Teams channel's conversation id; its threads' ids follow
// it with ";messageid=".
const channel = "19:0a1b2c@thread.tacv2"

// turn is a turn of tenant-a's conversation conv by agent, its messages
// naming text and tokens its estimate.
func turn(conv, agent, text string, tokens int) store.HistoryTurn {
	return store.HistoryTurn{
		TenantID: "tenant-a", ConversationID: conv, RunID: "run-" + text, AgentID: agent,
		UserID: "ada-oid", UserName: "Ada Lovelace", Tokens: tokens,
		Messages: json.RawMessage(fmt.Sprintf(`[{"role":"user","content":%q},{"role":"assistant","content":"answer to %s"}]`, text, text)),
	}
}

// appendTurns appends each turn in order and returns them as stored.
func appendTurns(t *testing.T, s *store.Store, turns ...store.HistoryTurn) []store.HistoryTurn {
	t.Helper()
	out := make([]store.HistoryTurn, 0, len(turns))
	for _, tr := range turns {
		got, err := s.AppendTurn(context.Background(), tr)
		if err != nil {
			t.Fatalf("AppendTurn %s: %v", tr.RunID, err)
		}
		out = append(out, got)
	}
	return out
}

// history reads History, failing the test on an error.
func history(t *testing.T, s *store.Store, tenant, conv, agent string, maxTurns, maxTokens int) []store.HistoryTurn {
	t.Helper()
	got, err := s.History(context.Background(), tenant, conv, agent, maxTurns, maxTokens)
	if err != nil {
		t.Fatalf("History(%s, %s, %s): %v", tenant, conv, agent, err)
	}
	return got
}

// runIDsOf names turns by their run ids, in the order given.
func runIDsOf(turns []store.HistoryTurn) []string {
	out := []string{}
	for _, tr := range turns {
		out = append(out, tr.RunID)
	}
	return out
}

// Turns read back as appended, oldest first, numbered in order, with a
// zero At stamped by the store's clock; the turns of another
// conversation, tenant or agent are never read.
func testHistoryAppendAndRead(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	const conv = "a:1personal-chat"
	var mine []store.HistoryTurn
	for i := range 5 {
		tr := turn(conv, "default", fmt.Sprintf("q%d", i), 10*(i+1))
		if i == 2 {
			tr.UserID, tr.UserName = "", "" // a run without a person
		}
		if i == 3 {
			tr.At = clk.Now().Add(-time.Hour) // given: kept as given
		}
		tr.Seq = 999 // the store numbers turns itself
		mine = append(mine, appendTurns(t, s, tr)[0])
		clk.Advance(time.Minute)
		// Between this conversation's turns, others': another
		// conversation (one whose id starts with this one's too),
		// another tenant (one whose id starts with tenant-a), another
		// agent.
		other := turn(conv+"0", "default", fmt.Sprintf("other conversation %d", i), 1)
		tenant := turn(conv, "default", fmt.Sprintf("other tenant %d", i), 1)
		tenant.TenantID = "tenant-ab"
		agent := turn(conv, "sales", fmt.Sprintf("other agent %d", i), 1)
		appendTurns(t, s, other, tenant, agent)
	}
	for i, tr := range mine {
		if i > 0 && tr.Seq <= mine[i-1].Seq {
			t.Errorf("turn %d has Seq %d, not above the one before (%d)", i, tr.Seq, mine[i-1].Seq)
		}
		want := clk.Now().Add(time.Duration(i-5) * time.Minute)
		if i == 3 {
			want = clk.Now().Add(-2*time.Minute - time.Hour)
		}
		if !tr.At.Equal(want) {
			t.Errorf("turn %d At %s, want %s", i, tr.At, want)
		}
	}
	got := history(t, s, "tenant-a", conv, "default", 50, 1_000_000)
	if diff := cmp.Diff(mine, got); diff != "" {
		t.Errorf("History (-appended +read):\n%s", diff)
	}
	if len(got) > 0 && got[2].UserID != "" {
		t.Errorf("a run without a person read back with user %q", got[2].UserID)
	}
	for _, c := range []struct{ tenant, conv, agent string }{
		{"tenant-ab", conv, "default"}, {"tenant-a", conv + "0", "default"}, {"tenant-a", conv, "sales"},
	} {
		got := history(t, s, c.tenant, c.conv, c.agent, 50, 1_000_000)
		if len(got) != 5 || got[0].TenantID != c.tenant || got[0].ConversationID != c.conv || got[0].AgentID != c.agent {
			t.Errorf("History(%+v) = %v, want its own 5 turns", c, runIDsOf(got))
		}
	}
	for _, c := range []struct{ tenant, conv, agent string }{
		{"tenant", conv, "default"}, {"tenant-a", "a:1personal", "default"}, {"tenant-a", conv, "def"}, {"tenant-b", conv, "default"},
	} {
		if got := history(t, s, c.tenant, c.conv, c.agent, 50, 1_000_000); len(got) != 0 {
			t.Errorf("History(%+v) = %v, want none", c, runIDsOf(got))
		}
	}

	// Messages are kept byte for byte, white space, escapes and all.
	spaced := turn(conv, "default", "spaced", 1)
	spaced.Messages = json.RawMessage("[ {\"role\" : \"user\",\n \"content\": \"a <b> & \\u00e9 \\u0000\"} ]")
	appendTurns(t, s, spaced)
	last := history(t, s, "tenant-a", conv, "default", 1, 10)
	if len(last) != 1 || string(last[0].Messages) != string(spaced.Messages) {
		t.Errorf("the last turn read back as %+v, want messages %q", last, spaced.Messages)
	}
}

// The newest whole turns are read: at most maxTurns, and as many as fit
// maxTokens, counted from the newest; the first that does not fit ends
// the list, however small the older ones; none for a budget of zero.
func testHistoryBudgets(t *testing.T, bk backend) {
	s, _ := openTemp(t, bk, newClock())
	const conv = "19:group-chat@thread.v2"
	for i, tokens := range []int{100, 0, 200, 300, 400, 500} {
		appendTurns(t, s, turn(conv, "default", fmt.Sprintf("t%d", i), tokens))
	}
	for _, c := range []struct {
		maxTurns, maxTokens int
		want                []string
	}{
		{50, 1_000_000, []string{"run-t0", "run-t1", "run-t2", "run-t3", "run-t4", "run-t5"}},
		{2, 1_000_000, []string{"run-t4", "run-t5"}},
		{1, 1_000_000, []string{"run-t5"}},
		{50, 900, []string{"run-t4", "run-t5"}},                                // 500 + 400 = 900 fits
		{50, 899, []string{"run-t5"}},                                          // 400 more would pass 899
		{50, 1400, []string{"run-t1", "run-t2", "run-t3", "run-t4", "run-t5"}}, // t1's 0 fits, t0's 100 does not
		{50, 1500, []string{"run-t0", "run-t1", "run-t2", "run-t3", "run-t4", "run-t5"}},
		{50, 499, []string{}}, // the newest passes it: nothing, not the small ones before
		{3, 1400, []string{"run-t3", "run-t4", "run-t5"}},
		{1 << 40, 1 << 40, []string{"run-t0", "run-t1", "run-t2", "run-t3", "run-t4", "run-t5"}},
		{0, 1000, []string{}}, {50, 0, []string{}}, {-1, 1000, []string{}}, {50, -1, []string{}},
	} {
		got := history(t, s, "tenant-a", conv, "default", c.maxTurns, c.maxTokens)
		if diff := cmp.Diff(c.want, runIDsOf(got)); diff != "" {
			t.Errorf("History(maxTurns %d, maxTokens %d) (-want +got):\n%s", c.maxTurns, c.maxTokens, diff)
		}
	}
}

// ClearHistory deletes a conversation's turns, every agent's, and those
// of its threads, with its audit record in the same commit; a
// conversation whose id merely starts with the channel's keeps its own,
// as does another tenant's.
func testClearHistory(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	kept := []string{
		channel + "x",                  // another channel, a longer id
		channel + ";other=1",           // not a thread of it
		channel + "messageid=1",        // nor this
		"19:0a1b2c@thread.tacv",        // a shorter id
		"x" + channel + ";messageid=1", // a thread of another channel
		channel[:len(channel)-1] + ";messageid=1",
	}
	cleared := []string{channel, channel + ";messageid=1700000000001", channel + ";messageid=1700000000002"}
	for _, conv := range append(slices.Clone(kept), cleared...) {
		appendTurns(t, s, turn(conv, "default", conv+" 1", 5), turn(conv, "sales", conv+" 2", 5), turn(conv, "default", conv+" 3", 5))
	}
	other := turn(channel, "default", "other tenant", 5)
	other.TenantID = "tenant-ab"
	appendTurns(t, s, other)

	// An audit record of another tenant is refused, and nothing goes.
	if _, err := s.ClearHistory(ctx, "tenant-a", channel, store.AuditRecord{TenantID: "tenant-b", Action: "bot.history.clear"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("ClearHistory with another tenant's audit record: %v, want ErrInvalid", err)
	}
	if got := history(t, s, "tenant-a", channel, "default", 50, 1000); len(got) != 2 {
		t.Fatalf("after a refused clear: %v, want the 2 turns kept", runIDsOf(got))
	}

	n, err := s.ClearHistory(ctx, "tenant-a", channel, store.AuditRecord{Action: "bot.history.clear", Actor: "ada-oid"})
	if err != nil || n != 9 {
		t.Fatalf("ClearHistory = %d, %v; want the 9 turns of the channel and its two threads", n, err)
	}
	for _, conv := range cleared {
		for _, agent := range []string{"default", "sales"} {
			if got := history(t, s, "tenant-a", conv, agent, 50, 1000); len(got) != 0 {
				t.Errorf("%s of %s after the clear: %v", conv, agent, runIDsOf(got))
			}
		}
	}
	for _, conv := range kept {
		if got := history(t, s, "tenant-a", conv, "default", 50, 1000); len(got) != 2 {
			t.Errorf("%s after the channel's clear: %v, want its 2 turns", conv, runIDsOf(got))
		}
		if got := history(t, s, "tenant-a", conv, "sales", 50, 1000); len(got) != 1 {
			t.Errorf("%s of sales after the channel's clear: %v, want its turn", conv, runIDsOf(got))
		}
	}
	if got := history(t, s, "tenant-ab", channel, "default", 50, 1000); len(got) != 1 {
		t.Errorf("the other tenant's turn after the clear: %v", runIDsOf(got))
	}
	recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a", Action: "bot.history.clear"})
	if err != nil || len(recs) != 1 || recs[0].Actor != "ada-oid" || !recs[0].Time.Equal(clk.Now()) {
		t.Errorf("the clear's audit record: %+v %v", recs, err)
	}

	// A thread alone; then nothing left to clear, the record written
	// still; the numbers go on after a clear.
	thread := channel + "x;messageid=5"
	before := appendTurns(t, s, turn(thread, "default", "in a thread", 5))[0]
	if n, err := s.ClearHistory(ctx, "tenant-a", thread); err != nil || n != 1 {
		t.Errorf("ClearHistory of a thread = %d, %v; want 1", n, err)
	}
	if got := history(t, s, "tenant-a", channel+"x", "default", 50, 1000); len(got) != 2 {
		t.Errorf("the thread's channel after the thread's clear: %v, want its 2 turns", runIDsOf(got))
	}
	if n, err := s.ClearHistory(ctx, "tenant-a", channel, store.AuditRecord{Action: "bot.history.clear"}); err != nil || n != 0 {
		t.Errorf("ClearHistory again = %d, %v; want 0", n, err)
	}
	if recs, _ := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a", Action: "bot.history.clear"}); len(recs) != 2 {
		t.Errorf("audit records of the clears: %d, want 2", len(recs))
	}
	if after := appendTurns(t, s, turn(channel, "default", "after", 5))[0]; after.Seq <= before.Seq {
		t.Errorf("a turn after the clear has Seq %d, not above %d", after.Seq, before.Seq)
	}
}

// The sweep deletes the turns whose At is at or before now minus the run
// retention, counted, and keeps the others; kept forever when the runs
// are.
func testSweepHistory(t *testing.T, bk backend) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	s := openOpts(t, bk, bk.location(t), store.Options{Now: func() time.Time { return now }, RunRetention: 24 * time.Hour})
	forever := openOpts(t, bk, bk.location(t), store.Options{Now: func() time.Time { return now }, RunRetention: -1})
	var want []string
	for i := range 30 {
		at := now.Add(time.Duration(i-20) * 2 * time.Hour) // from 40 hours ago to 18 hours ahead
		tr := turn(fmt.Sprintf("conv-%d", i%3), "default", fmt.Sprintf("%02d", i), 1)
		tr.At = at
		appendTurns(t, s, tr)
		appendTurns(t, forever, tr)
		if at.After(now.Add(-24 * time.Hour)) {
			want = append(want, tr.RunID)
		}
	}
	st, err := s.Sweep(ctx)
	if err != nil || st.HistoryTurns != 30-len(want) || len(want) != 21 {
		t.Fatalf("Sweep = %+v, %v; want %d turns", st, err, 30-len(want))
	}
	var got []string
	for i := range 3 {
		got = append(got, runIDsOf(history(t, s, "tenant-a", fmt.Sprintf("conv-%d", i), "default", 50, 1000))...)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turns after the sweep (-want +got):\n%s", diff)
	}
	if st, err := s.Sweep(ctx); err != nil || st.HistoryTurns != 0 {
		t.Errorf("a second sweep: %+v %v", st, err)
	}
	if st, err := forever.Sweep(ctx); err != nil || st.HistoryTurns != 0 {
		t.Errorf("sweep with runs kept forever: %+v %v", st, err)
	}
	if got := history(t, forever, "tenant-a", "conv-0", "default", 50, 1000); len(got) != 10 {
		t.Errorf("turns kept forever: %d, want 10", len(got))
	}
}

// A turn that could never be stored is refused in words, and nothing of
// it is written; so are reads and clears of ids that cannot be.
func testHistoryRefusals(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	for _, c := range []struct {
		change func(*store.HistoryTurn)
		words  string
	}{
		{func(tr *store.HistoryTurn) { tr.TenantID = "" }, "the tenant id is empty"},
		{func(tr *store.HistoryTurn) { tr.ConversationID = "" }, "the conversation id is empty"},
		{func(tr *store.HistoryTurn) { tr.ConversationID = "conv\x00x" }, "the conversation id contains a NUL byte"},
		{func(tr *store.HistoryTurn) { tr.ConversationID = strings.Repeat("c", 513) }, "the conversation id is 513 bytes long, at most 512"},
		{func(tr *store.HistoryTurn) { tr.AgentID = "" }, "the agent id is empty"},
		{func(tr *store.HistoryTurn) { tr.AgentID = "\xff" }, "the agent id is not valid UTF-8"},
		{func(tr *store.HistoryTurn) { tr.RunID = "" }, "the run id is empty"},
		{func(tr *store.HistoryTurn) { tr.UserID = strings.Repeat("u", 513) }, "the user id is 513 bytes long, at most 512"},
		{func(tr *store.HistoryTurn) { tr.UserName = "A\x00da" }, "the user name contains a NUL byte"},
		{func(tr *store.HistoryTurn) { tr.Messages = nil }, "the turn has no messages"},
		{func(tr *store.HistoryTurn) { tr.Messages = json.RawMessage(`[{"role":"user"`) }, "the messages are not valid JSON"},
		{func(tr *store.HistoryTurn) {
			tr.Messages = json.RawMessage(`"` + strings.Repeat("x", store.MaxTurnMessages-1) + `"`)
		}, "the messages are 262145 bytes long, at most 262144"},
		{func(tr *store.HistoryTurn) { tr.Tokens = -1 }, "the token count is -1, below zero"},
	} {
		tr := turn("conv-1", "default", "refused", 1)
		c.change(&tr)
		got, err := s.AppendTurn(ctx, tr)
		if !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("AppendTurn with %q: %+v, %v (words %q), want ErrInvalid in words", c.words, got.Seq, err, words(err))
		}
	}
	if got := history(t, s, "tenant-a", "conv-1", "default", 50, 1000); len(got) != 0 {
		t.Errorf("refused turns stored: %v", runIDsOf(got))
	}
	// At the bound exactly, a turn is kept.
	big := turn("conv-1", "default", "big", 1)
	big.Messages = json.RawMessage(`"` + strings.Repeat("x", store.MaxTurnMessages-2) + `"`)
	if _, err := s.AppendTurn(ctx, big); err != nil {
		t.Errorf("a turn of %d bytes of messages: %v", store.MaxTurnMessages, err)
	}

	for _, c := range []struct {
		tenant, conv, agent, words string
	}{
		{"", "conv-1", "default", "the tenant id is empty"},
		{"tenant-a", "", "default", "the conversation id is empty"},
		{"tenant-a", "conv-1", "", "the agent id is empty"},
		{"tenant-a\x00", "conv-1", "default", "the tenant id contains a NUL byte"},
	} {
		if _, err := s.History(ctx, c.tenant, c.conv, c.agent, 50, 1000); !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("History(%q, %q, %q): %v, want %q", c.tenant, c.conv, c.agent, err, c.words)
		}
		if c.agent == "" {
			continue
		}
		if _, err := s.ClearHistory(ctx, c.tenant, c.conv); !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("ClearHistory(%q, %q): %v, want %q", c.tenant, c.conv, err, c.words)
		}
	}
}

// Concurrent appends to one conversation each get a Seq of their own,
// increasing in each writer's order, and History reads them all in Seq
// order.
func testHistoryConcurrentAppends(t *testing.T, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(t, bk, newClock())
	const writers, each = 8, 10
	seqs := make([][]uint64, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				tr, err := s.AppendTurn(ctx, turn(channel, "default", fmt.Sprintf("w%d-%d", w, i), 1))
				if err != nil {
					errs <- err
					return
				}
				seqs[w] = append(seqs[w], tr.Seq)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for w, ss := range seqs {
		for i, seq := range ss {
			if seen[seq] {
				t.Errorf("Seq %d given twice", seq)
			}
			seen[seq] = true
			if i > 0 && seq <= ss[i-1] {
				t.Errorf("writer %d: Seq %d after %d", w, seq, ss[i-1])
			}
		}
	}
	got := history(t, s, "tenant-a", channel, "default", 1000, 1_000_000)
	if len(got) != writers*each {
		t.Fatalf("History read %d turns, want %d", len(got), writers*each)
	}
	for i, tr := range got {
		if !seen[tr.Seq] {
			t.Errorf("History read Seq %d, which no append returned", tr.Seq)
		}
		if i > 0 && tr.Seq <= got[i-1].Seq {
			t.Errorf("History out of order: %d after %d", tr.Seq, got[i-1].Seq)
		}
	}
}

// A run saved with its turn keeps both or neither: the turn is numbered
// after the conversation's earlier ones and read back with the run; a turn
// the store refuses, a run it refuses and a commit that fails (a revoked
// view saved again) leave no run and no turn behind.
func testSaveRunWithTurn(t *testing.T, bk backend) {
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	ctx := context.Background()
	const conv = "a:1personal-chat"
	appendTurns(t, s, turn(conv, "default", "q0", 10))
	html := []byte("<p>chart</p>")
	run := func(id string) store.Run {
		return store.Run{ID: id, AgentID: "default", TenantID: "tenant-a", UserID: "ada-oid", Text: "answer to " + id}
	}
	view := sampleView("view-1", clk.Now(), store.ViewLifetime)
	view.TenantID = "tenant-a"
	audit := []store.AuditRecord{{TenantID: "tenant-a", Action: "agent.run", Actor: "ada-oid"}}

	got, err := s.SaveRunWithTurn(ctx, run("run-q1"), []store.NewView{{View: view, HTML: html}}, audit, turn(conv, "default", "q1", 20))
	if err != nil {
		t.Fatalf("SaveRunWithTurn: %v", err)
	}
	if got.Seq != 2 || got.At.IsZero() {
		t.Errorf("SaveRunWithTurn returned Seq %d At %v, want Seq 2 and the store's clock", got.Seq, got.At)
	}
	if _, err := s.GetRun(ctx, "run-q1"); err != nil {
		t.Errorf("GetRun after SaveRunWithTurn: %v", err)
	}
	if _, err := s.View(ctx, "view-1"); err != nil {
		t.Errorf("View after SaveRunWithTurn: %v", err)
	}
	if recs, err := s.Audit(ctx, store.AuditQuery{TenantID: "tenant-a"}); err != nil || len(recs) != 1 {
		t.Errorf("Audit after SaveRunWithTurn = %d records, %v; want 1", len(recs), err)
	}
	if diff := cmp.Diff([]string{"run-q0", "run-q1"}, runIDsOf(history(t, s, "tenant-a", conv, "default", 10, 1000))); diff != "" {
		t.Errorf("History after SaveRunWithTurn (-want +got):\n%s", diff)
	}

	badTurn := turn(conv, "default", "q2", 5)
	badTurn.Messages = json.RawMessage(`[{"role":`)
	noConv := turn("", "default", "q3", 5)
	twice := []store.NewView{{View: sampleView("view-2", clk.Now(), time.Hour), HTML: html}, {View: sampleView("view-2", clk.Now(), time.Hour), HTML: html}}
	for _, c := range []struct {
		name  string
		run   store.Run
		views []store.NewView
		turn  store.HistoryTurn
	}{
		{"turn with broken JSON", run("run-q2"), nil, badTurn},
		{"turn without a conversation", run("run-q3"), nil, noConv},
		{"run with a view twice", run("run-q4"), twice, turn(conv, "default", "q4", 5)},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.SaveRunWithTurn(ctx, c.run, c.views, nil, c.turn)
			if !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("SaveRunWithTurn = %v, want ErrInvalid", err)
			}
			if _, err := s.GetRun(ctx, c.run.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("GetRun after a refused SaveRunWithTurn = %v, want ErrNotFound", err)
			}
		})
	}

	// The view is revoked; a run saving it again fails in the commit, and
	// its turn goes with it.
	if err := s.RevokeView(ctx, "tenant-a", "view-1", "admin-1"); err != nil {
		t.Fatalf("RevokeView: %v", err)
	}
	if _, err := s.SaveRunWithTurn(ctx, run("run-q5"), []store.NewView{{View: view, HTML: html}}, nil, turn(conv, "default", "q5", 5)); !errors.Is(err, store.ErrRevoked) {
		t.Fatalf("SaveRunWithTurn of a revoked view = %v, want ErrRevoked", err)
	}
	if _, err := s.GetRun(ctx, "run-q5"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun after a failed commit = %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff([]string{"run-q0", "run-q1"}, runIDsOf(history(t, s, "tenant-a", conv, "default", 10, 1000))); diff != "" {
		t.Errorf("History after refused saves (-want +got):\n%s", diff)
	}
}
