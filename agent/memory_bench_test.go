package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"teamsbot/agent"
)

// BenchmarkMemoryCost measures what memory costs a run: the same question
// ("/sales_report {}", the built-in model, the demo server in memory, a
// real bbolt file) asked in a conversation with 50 earlier turns, which
// the run reads and sends the model, and in a new conversation with none.
// Each op is one run of each, one after the other, so that drift on the
// machine hits both alike; each run's CPU time is the process's (user and
// system, all threads) over it. It reports both, and their ratio
// (memory-x: at most 1.3 is the target).
func BenchmarkMemoryCost(b *testing.B) {
	const earlier = 50
	cfg := agent.DefaultConfig()
	// Every one of the 50 turns read (about 2 KB each): the default
	// bounds (20 turns, 8,000 tokens) would read fewer.
	cfg.Agents[0].Memory = agent.MemoryConfig{Turns: earlier, Tokens: 1_000_000}
	st := openStore(b)
	s := newService(b, cfg, agent.Options{Store: st, AppsEnabled: true})
	ctx := context.Background()
	const long = "a:memory-bench"
	ask := func(conv string) time.Duration {
		req := agent.Request{Person: alice, Text: "/sales_report {}", Conversation: conv}
		before := cpuTime()
		ans, err := s.Run(ctx, req)
		d := cpuTime() - before
		if err != nil || len(ans.Views) != 1 {
			b.Fatalf("run: %v, %d views", err, len(ans.Views))
		}
		return d
	}
	for range earlier {
		ask(long)
	}
	if hs, err := st.History(ctx, alice.TenantID, long, cfg.Agents[0].ID, earlier, 1_000_000); err != nil || len(hs) != earlier {
		b.Fatalf("History = %d turns, %v; want %d", len(hs), err, earlier)
	}
	var without, with time.Duration
	b.ResetTimer()
	for i := range b.N {
		without += ask(fmt.Sprintf("a:memory-bench-new-%d", i))
		with += ask(long)
	}
	b.StopTimer()
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "cpu-µs/turn-none")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N), "cpu-µs/turn-50")
	b.ReportMetric(float64(with)/float64(max(without, 1)), "memory-x")
}
