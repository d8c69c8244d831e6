package agent_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	"teamsbot/agent"
)

// BenchmarkRunCreatesView is a full run of "/sales_report {}" on the demo
// server in memory, with the tool list and the resource cached (one run
// first fills them), saving the run, its view and its audit records into a
// real bbolt file. Runs go in parallel, as the bot's turns do (many at once,
// waiting on the store's shared commits).
//
// Besides ns/op it reports cpu-µs/op, the process's CPU time (user and
// system, all threads) per run: on a shared machine wall time depends on
// the neighbours, CPU time much less. 2 cores give 2e6 cpu-µs per second,
// so ~1,300 runs/s needs at most ~1,500 cpu-µs per run.
func BenchmarkRunCreatesView(b *testing.B) {
	st := openStore(b)
	s := newService(b, agent.DefaultConfig(), agent.Options{Store: st, AppsEnabled: true})
	ctx := context.Background()
	req := agent.Request{Person: alice, Text: "/sales_report {}"}
	if ans, err := s.Run(ctx, req); err != nil || len(ans.Views) != 1 {
		b.Fatalf("warm-up run: %v, %d views", err, len(ans.Views))
	}
	b.SetParallelism(32)
	b.ReportAllocs()
	before := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ans, err := s.Run(ctx, req)
			if err != nil || len(ans.Views) != 1 {
				b.Errorf("run: %v, %d views", err, len(ans.Views))
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
