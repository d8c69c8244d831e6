package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"teamsbot/internal/telemetry"
)

// benchTenants is how many tenants BenchmarkTurns' messages come from.
const benchTenants = 1000

// BenchmarkTurns measures whole turns: a signed POST /api/messages with
// "/sales_report {}" until the answer card reaches the fake Bot Connector on
// loopback. Each turn runs the built-in model, calls the demo server's tool,
// makes a view and stores it in a real bbolt file. It reports turns/s and
// the p50 and p99 latency of a turn.
func BenchmarkTurns(b *testing.B) { benchTurns(b, nil) }

// benchTurns is BenchmarkTurns, with the spans of traces when it is set.
func benchTurns(b *testing.B, traces *telemetry.Provider) {
	for _, inflight := range []int{1, 50} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			// Teams allows an app 30 requests a second per tenant, and the
			// bot paces each tenant below that; the load comes from many
			// tenants, as a multi-tenant bot's does, so that it measures
			// the service and not the pacing.
			// As many chats as there will be turns, up to benchTenants:
			// the suite's single run stays short.
			chats := min(benchTenants, max(b.N, 20))
			tenants := make([]string, chats)
			for i := range tenants {
				tenants[i] = fmt.Sprintf("%08x-0000-4000-8000-0000000000bb", i)
			}
			h := newHarness(b, setup{realClock: true, quietLogs: true, moreTenants: tenants, typingAfter: DefaultTypingAfter, traces: traces})
			h.conn.mu.Lock()
			h.conn.recordAll = false // keep memory flat: the waiters say when a turn is done
			h.conn.mu.Unlock()
			auth := "Bearer " + h.token(h.claims()) // the Bot Connector reuses its token too
			// The turns come from the personal chats of many people, one
			// per tenant, as real traffic does: Teams limits (and the bot
			// paces) each conversation to a few operations a second.
			template, err := json.Marshal(h.message("personal", "a:bench-CONV", "ID", "/sales_report {}"))
			if err != nil {
				b.Fatal(err)
			}
			var seq atomic.Int64
			turn := func() time.Duration {
				id := fmt.Sprintf("bench-%d", seq.Add(1))
				n := seq.Load() % int64(chats)
				body := bytes.ReplaceAll(template, []byte(`"ID"`), []byte(`"`+id+`"`))
				body = bytes.Replace(body, []byte(`"a:bench-CONV"`), []byte(fmt.Sprintf(`"a:bench-%d"`, n)), 1)
				body = bytes.ReplaceAll(body, []byte(testTenant), []byte(tenants[n]))
				done := h.conn.expectReply(id)
				start := time.Now()
				req, _ := http.NewRequest(http.MethodPost, h.url+Path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", auth)
				resp, err := h.client.Do(req)
				if err != nil {
					b.Error(err)
					return 0
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					b.Errorf("status %d", resp.StatusCode)
					return 0
				}
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					b.Error("no answer within 30s")
					return 0
				}
				return time.Since(start)
			}
			// Warm up: keys, bot token, connections, MCP session, and one
			// turn in each chat, which stores its conversation reference.
			var warm sync.WaitGroup
			for range 10 {
				warm.Go(func() {
					for seq.Load() < int64(chats) {
						turn()
					}
				})
			}
			warm.Wait()

			lat := make([]time.Duration, 0, b.N)
			var mu sync.Mutex
			var next atomic.Int64
			b.ResetTimer()
			st0 := h.store.Stats()
			cpu0 := cpuTime()
			start := time.Now()
			var wg sync.WaitGroup
			for range inflight {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						d := turn()
						mu.Lock()
						lat = append(lat, d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			cpu := cpuTime() - cpu0
			b.StopTimer()
			// Turns still recording their delivery finish before the
			// store's counters are read.
			h.idle()
			st := h.store.Stats()
			slices.Sort(lat)
			pct := func(p float64) float64 {
				if len(lat) == 0 {
					return 0
				}
				return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			// CPU per turn of the whole process (client, bot, agent, store
			// and fake connector): what the throughput would be on an
			// otherwise idle machine is cores / this.
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/turn")
			// bbolt commits per turn: each turn writes its run and, once
			// the answer is out, its delivery; below 2 they share commits.
			b.ReportMetric(float64(st.Commits-st0.Commits)/float64(b.N), "commits/turn")
			if n := h.tokens.callCount(); n != 1 {
				b.Errorf("%d bot token fetches, want 1", n)
			}
		})
	}
}

// cpuTime is the user and system CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
