package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

type namedValue struct {
	name  string
	value int64
}

// report gathers the rounds and writes them as Markdown.
type report struct {
	rounds         int
	dur            time.Duration
	started        time.Time
	elapsed        time.Duration
	results        []result
	rss            []namedValue
	connectorCalls float64 // connector calls per answered turn, all bots together
	restart        time.Duration
	store          *storeResult
}

func (r *report) add(x result) { r.results = append(r.results, x) }

// summary is the median over the rounds of one target at one load, with
// the range of the throughput.
type summary struct {
	rate, lo, hi float64
	p50, p99     time.Duration
	cpu          time.Duration
	errors       int
}

func (r *report) summary(target, load string) (summary, bool) {
	var rates []float64
	var p50, p99, cpu []time.Duration
	var s summary
	for _, x := range r.results {
		if x.Target == target && x.Load == load {
			rates = append(rates, x.PerSecond())
			p50, p99, cpu = append(p50, x.P50), append(p99, x.P99), append(cpu, x.CPUPer())
			s.errors += x.Errors
		}
	}
	if len(rates) == 0 {
		return s, false
	}
	slices.Sort(rates)
	slices.Sort(p50)
	slices.Sort(p99)
	slices.Sort(cpu)
	s.rate, s.lo, s.hi = rates[len(rates)/2], rates[0], rates[len(rates)-1]
	s.p50, s.p99, s.cpu = p50[len(p50)/2], p99[len(p99)/2], cpu[len(cpu)/2]
	return s, true
}

func yesNo(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**not met**"
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Side-by-side results\n\n")
	fmt.Fprintf(&b, "Machine: %s. %d rounds, each target %s per load, in turn; medians of the rounds (throughput range in brackets). Run took %s.\n\n",
		machine(), r.rounds, r.dur, r.elapsed.Round(time.Second))
	fmt.Fprintf(&b, "### Bot turns (`POST /api/messages` to the answer at the fake connector over https)\n\n")
	fmt.Fprintf(&b, "| in flight | bot | turns/s | p50 ms | p99 ms | CPU ms/turn | × botbuilder | × floor | failed |\n|---|---|---|---|---|---|---|---|---|\n")
	bots := []string{"teamsbot", "botbuilder", "floor bot"}
	for _, n := range []int{1, 50, 200} {
		load := fmt.Sprintf("turns@%d", n)
		ref, _ := r.summary("botbuilder", load)
		fl, _ := r.summary("floor bot", load)
		for _, t := range bots {
			s, ok := r.summary(t, load)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %d | %s | %.0f (%.0f–%.0f) | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", n, t, s.rate, s.lo, s.hi,
				ms(s.p50), ms(s.p99), ms(s.cpu), ratio(s.rate, ref.rate), ratio(s.rate, fl.rate), s.errors)
		}
	}
	fmt.Fprintf(&b, "\nPeak RSS (VmHWM) over the whole run:")
	for _, v := range r.rss {
		fmt.Fprintf(&b, " %s %.0f MiB;", v.name, float64(v.value)/(1<<20))
	}
	fmt.Fprintf(&b, " connector calls per answered turn (all bots): %.2f.\n\n", r.connectorCalls)

	svc50, _ := r.summary("teamsbot", "turns@50")
	ref50, _ := r.summary("botbuilder", "turns@50")
	fl50, _ := r.summary("floor bot", "turns@50")
	svc1, _ := r.summary("teamsbot", "turns@1")
	ref1, _ := r.summary("botbuilder", "turns@1")
	fmt.Fprintf(&b, "| target | measured | |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| turns at 50 in flight ≥ 5× botbuilder | %.2f× | %s |\n", ratio(svc50.rate, ref50.rate), yesNo(svc50.rate >= 5*ref50.rate))
	fmt.Fprintf(&b, "| turns at 50 in flight ≥ ½ floor bot | %.2f× | %s |\n", ratio(svc50.rate, fl50.rate), yesNo(svc50.rate >= 0.5*fl50.rate))
	fmt.Fprintf(&b, "| p99 at 50 in flight < 100 ms | %.1f ms | %s |\n", ms(svc50.p99), yesNo(svc50.p99 < 100*time.Millisecond))
	fmt.Fprintf(&b, "| p50 at 1 in flight below botbuilder's | %.2f ms vs %.2f ms | %s |\n", ms(svc1.p50), ms(ref1.p50), yesNo(svc1.p50 < ref1.p50))

	fmt.Fprintf(&b, "\n### View path (50 in flight, signed in) against a no-op Go handler answering as many bytes\n\n")
	fmt.Fprintf(&b, "| request | teamsbot req/s | p50 ms | p99 ms | CPU µs/req | no-op req/s | no-op p99 ms | no-op ÷ teamsbot | within 2× |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, path := range []string{"view API", "proxy document", "view document", "tool call"} {
		s, ok := r.summary("teamsbot", path)
		f, _ := r.summary("no-op", path)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f (%.0f–%.0f) | %.2f | %.2f | %.0f | %.0f | %.2f | %.2f | %s |\n", path, s.rate, s.lo, s.hi, ms(s.p50), ms(s.p99),
			float64(s.cpu.Microseconds()), f.rate, ms(f.p99), ratio(f.rate, s.rate), yesNo(f.rate <= 2*s.rate))
	}
	fmt.Fprintf(&b, "\nThe service restarted on the turns' file in %.0f ms (exec to the first `/healthz` answer).\n", ms(r.restart))
	if r.store != nil {
		b.WriteString("\n")
		b.WriteString(storeTable(*r.store))
	}
	return b.String()
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func storeTable(s storeResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Store with %d views (%d shared 20 KB HTML documents)\n\n| what | measured | target |\n|---|---|---|\n", s.Views, s.Docs)
	fmt.Fprintf(&b, "| filling it (runs of 2,000 views, two writers) | %.1f s | — |\n", s.Fill.Seconds())
	fmt.Fprintf(&b, "| file size | %.0f MiB (%.0f bytes a view) | — |\n", float64(s.FileBytes)/(1<<20), float64(s.FileBytes)/float64(max(1, s.Views)))
	fmt.Fprintf(&b, "| `store.Open` after a clean close (the free list kept) | %.1f ms | — |\n", ms(s.Open))
	if s.OpenAfterKill > 0 {
		fmt.Fprintf(&b, "| `store.Open` after a writer ended without closing (every page walked) | %.1f ms | — |\n", ms(s.OpenAfterKill))
	}
	if s.ServiceStart > 0 {
		fmt.Fprintf(&b, "| `teamsbot serve` on it, exec to the first `/healthz` answer | %.0f ms | < 1 s %s |\n", ms(s.ServiceStart), yesNo(s.ServiceStart < time.Second))
	}
	fmt.Fprintf(&b, "| view lookup, %d random ids | p50 %.1f µs, p99 %.1f µs | — |\n", s.Lookups, float64(s.LookupP50.Nanoseconds())/1000, float64(s.LookupP99.Nanoseconds())/1000)
	fmt.Fprintf(&b, "| sweep, nothing expired | %.1f ms | — |\n", ms(s.SweepIdle))
	fmt.Fprintf(&b, "| sweep of %d expired views | %.2f s in %d transactions, the longest %.1f ms | no write transaction over 50 ms %s |\n",
		s.SweepExpired, s.Sweep.Seconds(), s.SweepTxs, ms(s.SweepLongest), yesNo(s.SweepLongest <= 50*time.Millisecond))
	return b.String()
}
