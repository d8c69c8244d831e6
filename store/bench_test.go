package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"teamsbot/store"
)

// benchTurn is what one bot turn writes: a run, one view whose 20 KB HTML
// every turn shares, and one audit record.
func benchTurn(i int64, now time.Time, html []byte) (store.Run, []store.NewView, []store.AuditRecord) {
	id := fmt.Sprintf("%016x", i)
	run := store.Run{ID: "run-" + id, AgentID: "default", TenantID: "tenant-1", UserID: "user-1",
		Text: "Here is the chart you asked for.", CreatedAt: now}
	v := sampleView("view-"+id, now, 7*24*time.Hour)
	rec := store.AuditRecord{TenantID: "tenant-1", Action: "agent.mcp_app.view", Actor: "user-1",
		Fields: map[string]any{"server": "demo", "tool": "show_chart", "uri": "ui://demo/chart.html"}}
	return run, []store.NewView{{View: v, HTML: html}}, []store.AuditRecord{rec}
}

func benchHTML() []byte {
	return bytes.Repeat([]byte("<div class=\"bar\" style=\"height:42px\"></div>\n"), 20<<10/45)
}

func reportGroups(b *testing.B, s *store.Store, before store.Stats) {
	st := s.Stats()
	if c := st.Commits - before.Commits; c > 0 {
		b.ReportMetric(float64(st.Writes-before.Writes)/float64(c), "writes/commit")
	}
}

// BenchmarkSaveRun measures one turn's write: alone (the latency a single
// idle write sees, with p50 and p99) and with many writers at once (the
// throughput group commit gives; run with -cpu to vary GOMAXPROCS, 25
// writers per CPU).
func BenchmarkSaveRun(b *testing.B) { benchSaveRun(b, boltBackend()) }

// BenchmarkSaveRunPostgres is BenchmarkSaveRun on PostgreSQL (the server
// of pgtest.EnvURL; ./test.sh starts one with fsync off, so measure on a
// server set up as production's).
func BenchmarkSaveRunPostgres(b *testing.B) { benchSaveRun(b, postgresBackend()) }

func benchSaveRun(b *testing.B, bk backend) {
	html := benchHTML()
	ctx := context.Background()
	b.Run("sequential", func(b *testing.B) {
		s, _ := openTemp(b, bk, newClock())
		now := time.Now()
		before := s.Stats()
		lat := make([]time.Duration, 0, 1024)
		var i int64
		for b.Loop() {
			i++
			run, views, audit := benchTurn(i, now, html)
			start := time.Now()
			if err := s.SaveRun(ctx, run, views, audit); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		reportGroups(b, s, before)
	})
	b.Run("parallel", func(b *testing.B) {
		s, _ := openTemp(b, bk, newClock())
		now := time.Now()
		before := s.Stats()
		var n atomic.Int64
		b.SetParallelism(25)
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				run, views, audit := benchTurn(n.Add(1), now, html)
				if err := s.SaveRun(ctx, run, views, audit); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "turns/s")
		reportGroups(b, s, before)
	})
}

// BenchmarkViewRead reads random views among 10,000.
func BenchmarkViewRead(b *testing.B) { benchViewRead(b, boltBackend()) }

// BenchmarkViewReadPostgres is BenchmarkViewRead on PostgreSQL.
func BenchmarkViewReadPostgres(b *testing.B) { benchViewRead(b, postgresBackend()) }

func benchViewRead(b *testing.B, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(b, bk, clk)
	html := benchHTML()
	const n = 10_000
	for r := range n / 100 {
		var views []store.NewView
		for i := range 100 {
			views = append(views, store.NewView{View: sampleView(fmt.Sprintf("view-%05d", r*100+i), clk.Now(), time.Hour), HTML: html})
		}
		if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%d", r)}, views, nil); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("view-%05d", (i*7919)%n)
	}
	b.Run("sequential", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := s.View(ctx, ids[i%n]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.View(ctx, ids[next.Add(1)%n]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkSweep sweeps 100,000 expired views (sharing 100 documents) and
// reports the longest write transaction, which every other write of the
// service waits behind.
func BenchmarkSweep(b *testing.B) {
	ctx := context.Background()
	const total, perRun, docs = 100_000, 1000, 100
	var longest time.Duration
	var transactions int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clk := newClock()
		s, _ := openTemp(b, boltBackend(), clk)
		start := clk.Now()
		for r := range total / perRun {
			views := make([]store.NewView, 0, perRun)
			for j := range perRun {
				n := r*perRun + j
				views = append(views, store.NewView{
					View: sampleView(fmt.Sprintf("view-%06d", n), start, time.Duration(n%1000+1)*time.Second),
					HTML: fmt.Appendf(nil, "<!doctype html><p>document %d</p>", n%docs),
				})
			}
			if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%d", r)}, views, nil); err != nil {
				b.Fatal(err)
			}
		}
		clk.Set(start.Add(time.Hour))
		b.StartTimer()
		st, err := s.Sweep(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if st.Views != total || st.HTML != docs {
			b.Fatalf("Sweep = %+v, want %d views and %d documents", st, total, docs)
		}
		longest = max(longest, st.Longest)
		transactions += st.Transactions
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(longest.Microseconds())/1000, "longest-tx-ms")
	b.ReportMetric(float64(transactions)/float64(b.N), "tx/sweep")
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sweep")
}

// BenchmarkBindingsFor is the lookup of every access decision: a user and
// five of its groups on one agent of a tenant with 1,000 bindings (ten
// agents and all agents; 400 users, 200 groups), beside another tenant
// with as many on the same ids.
func BenchmarkBindingsFor(b *testing.B) {
	ctx := context.Background()
	s, _ := openTemp(b, boltBackend(), newClock())
	agents := []string{store.AllAgents}
	for i := range 10 {
		agents = append(agents, fmt.Sprintf("agent-%d", i))
	}
	roles := []string{store.RoleReader, store.RoleRunner, store.RoleAdmin}
	binding := func(tenant string, i int) store.Binding {
		bd := store.Binding{TenantID: tenant, AgentID: agents[i%len(agents)], Role: roles[i%len(roles)],
			Kind: store.KindUser, Subject: fmt.Sprintf("user-%03d", i%400)}
		if i%5 < 3 {
			bd.Kind, bd.Subject = store.KindGroup, fmt.Sprintf("group-%03d", i%200)
		}
		return bd
	}
	const n = 1000
	var wg sync.WaitGroup
	sem := make(chan struct{}, 100) // puts at once, sharing commits
	for _, tenant := range []string{"tenant-1", "tenant-2"} {
		for i := range n {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := s.PutBinding(ctx, binding(tenant, i)); err != nil {
					b.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if all, err := s.Bindings(ctx, "tenant-1", ""); err != nil || len(all) != n {
		b.Fatalf("tenant-1 has %d bindings (%v), want %d", len(all), err, n)
	}

	const agent = "agent-3"
	subjects := []string{"user-014", "group-003", "group-014", "group-025", "group-036", "group-047"}
	want := 0
	for i := range n {
		bd := binding("tenant-1", i)
		if (bd.AgentID == agent || bd.AgentID == store.AllAgents) && slices.Contains(subjects, bd.Subject) {
			want++
		}
	}
	if got, err := s.BindingsFor(ctx, "tenant-1", agent, subjects); err != nil || len(got) != want || want == 0 {
		b.Fatalf("BindingsFor = %d bindings, %v; want %d (and some)", len(got), err, want)
	}
	b.Logf("%d of %d bindings match", want, n)

	b.Run("sequential", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.BindingsFor(ctx, "tenant-1", agent, subjects); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.BindingsFor(ctx, "tenant-1", agent, subjects); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// benchAuditLog opens a store holding n audit records of one tenant (and as
// many of another), a tenth of them refusals, written in large batches.
func benchAuditLog(b *testing.B, n int, tenants ...string) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "teamsbot.db"), store.Options{AuditRetention: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const batch = 20_000
	recs := make([]store.AuditRecord, 0, batch)
	for i := 0; i < n; i++ {
		tenant := tenants[i%len(tenants)]
		result := "ok"
		if i%10 == 0 {
			result = "refused"
		}
		recs = append(recs, store.AuditRecord{TenantID: tenant, Action: "agent.mcp_app.call", Actor: "user-1",
			Time: start.Add(time.Duration(i) * time.Second), Fields: map[string]any{"tool": "refresh_sales", "result": result, "view": "v1"}})
		if len(recs) == batch || i == n-1 {
			if err := st.Append(context.Background(), recs...); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	return st
}

// auditSize is 1,000,000 records when the benchmark runs for real
// (-benchtime above 1x), and a small log for the suite's one run.
func auditSize(b *testing.B) int {
	if b.N > 1 {
		return 1_000_000
	}
	return 20_000
}

// BenchmarkAuditFirstPage is the audit page an admin opens first: 50
// records of their tenant, newest first, filtered by action. Target:
// under 50 ms over 1,000,000 records.
func BenchmarkAuditFirstPage(b *testing.B) {
	st := benchAuditLog(b, auditSize(b), "tenant-a", "tenant-b")
	q := store.AuditFilter{TenantID: "tenant-a", Action: "agent.mcp_app.call"}
	b.ResetTimer()
	for range b.N {
		recs, _, err := st.AuditPage(context.Background(), q, "", 50)
		if err != nil || len(recs) != 50 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}

// BenchmarkAuditExport streams a tenant's whole log of 1,000,000 records
// as JSON Lines and reports how much the heap grew meanwhile, and the
// process's peak resident memory during the export (Linux: the peak is
// reset when the export starts, so the log's making is not counted): the
// export must run in constant memory, whatever the log's size.
func BenchmarkAuditExport(b *testing.B) {
	n := auditSize(b)
	st := benchAuditLog(b, n, "tenant-a")
	q := store.AuditFilter{TenantID: "tenant-a"}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak, peakAnon uint64
	rssReset := resetPeakRSS()
	b.ResetTimer()
	for range b.N {
		enc := json.NewEncoder(io.Discard)
		count := 0
		err := st.ExportAudit(context.Background(), q, func(r store.AuditRecord) error {
			if count++; count%50_000 == 0 {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				peak = max(peak, m.HeapInuse)
				if anon, ok := procStatus("RssAnon:"); ok {
					peakAnon = max(peakAnon, anon)
				}
			}
			return enc.Encode(r)
		})
		if err != nil || count != n {
			b.Fatalf("%d records, %v", count, err)
		}
	}
	b.StopTimer()
	if peak > before.HeapInuse {
		b.ReportMetric(float64(peak-before.HeapInuse)/(1<<20), "heap-growth-MiB")
	} else {
		b.ReportMetric(0, "heap-growth-MiB")
	}
	// The peak counts the pages of the mapped file the export read, which
	// the kernel takes back under pressure; the anonymous part is the
	// process's own memory.
	if hwm, ok := procStatus("VmHWM:"); ok && rssReset {
		b.ReportMetric(float64(hwm)/(1<<20), "peak-RSS-MiB")
	}
	if peakAnon > 0 {
		b.ReportMetric(float64(peakAnon)/(1<<20), "peak-anon-RSS-MiB")
	}
}

// resetPeakRSS resets the kernel's record of this process's peak resident
// memory (Linux 4.0 and later), and reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatus reads one memory figure of /proc/self/status (VmHWM: the
// peak resident memory since start or resetPeakRSS; RssAnon: resident
// memory not backed by a file), in bytes.
func procStatus(key string) (uint64, bool) {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}

// bigAuditRecord is the i-th record of the benchmarks' large audit log,
// one a second from t0: two tenants in turn, and, drawn from i as if at
// random, one of six actions, fifty people, twenty tools, and a result
// ok (80 %), error or refused (10 % each).
func bigAuditRecord(i int, t0 time.Time) store.AuditRecord {
	h := uint64(i)*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	actions := []string{"agent.mcp_app.call", "agent.tool.call", "agent.mcp_app.view", "bot.feedback", "admin.binding.add", "trigger.apikey.use"}
	result := "ok"
	switch h % 10 {
	case 0:
		result = "error"
	case 1:
		result = "refused"
	}
	return store.AuditRecord{
		Time:     t0.Add(time.Duration(i) * time.Second),
		TenantID: []string{"tenant-a", "tenant-b"}[i%2],
		Action:   actions[h/10%6],
		Actor:    fmt.Sprintf("user-%02d", h/60%50),
		Fields: map[string]any{"tool": fmt.Sprintf("tool_%02d", h/3000%20), "result": result, "server": "demo",
			"caller": "model", "why": "", "view": fmt.Sprintf("view-%d", i)},
	}
}

// buildAuditLog fills s with n records of bigAuditRecord in batches of
// 50,000, each one commit on bbolt and one COPY on PostgreSQL
// (store.BulkAppend), then on PostgreSQL vacuums and analyses the table,
// as autovacuum would after such a load. It returns how long it took.
func buildAuditLog(b *testing.B, s *store.Store, bk backend, location string, n int) time.Duration {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const batch = 50_000
	recs := make([]store.AuditRecord, 0, batch)
	for i := range n {
		recs = append(recs, bigAuditRecord(i, t0))
		if len(recs) == batch || i == n-1 {
			if err := store.BulkAppend(ctx, s, recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	if bk.name == "postgres" {
		pgQuery(b, location, `VACUUM ANALYZE audit`)
	}
	return time.Since(start)
}

// bigLogSize is 1,000,000 records when the benchmarks run for real, and
// 20,000 for the suite's one run of each (-benchtime=1x, in ./test.sh), so
// that the benchmark does not rot and the suite does not wait a minute.
func bigLogSize() int {
	if f := flag.Lookup("test.benchtime"); f != nil && f.Value.String() == "1x" {
		return 20_000
	}
	return 1_000_000
}

// BenchmarkAuditMillion is a page of 50 of a tenant's audit records among
// 1,000,000 (two tenants), newest first, on each backend, with the
// filters an admin's console sends: by action, by person and result (ok,
// which a person has often; refused, rarely), and an export of a tenant's
// whole log (500,000 records). It builds the log once per run, which on
// the 2-core test machine takes about 40 s on bbolt and 50 s on
// PostgreSQL (COPY, then VACUUM ANALYZE). Target: PostgreSQL answers each
// page from an index (TestAuditPagePlanUsesAnIndex) within twice
// bbolt's time. On bbolt the person and result are checked on each record
// of the tenant, at most 5,000 per page, so the rare result's page comes
// back short with a cursor; on PostgreSQL the person is an index, and its
// page is full.
func BenchmarkAuditMillion(b *testing.B) {
	n := bigLogSize()
	ctx := context.Background()
	pages := []struct {
		name string
		q    store.AuditFilter
		want int // records on the page, 0: any
	}{
		{"tenant+action", store.AuditFilter{TenantID: "tenant-a", Action: "agent.mcp_app.call"}, 50},
		{"tenant+person+ok", store.AuditFilter{TenantID: "tenant-a", Actor: "user-07", Result: "ok"}, 50},
		{"tenant+person+refused", store.AuditFilter{TenantID: "tenant-a", Actor: "user-07", Result: "refused"}, 0},
	}
	for _, bk := range []backend{boltBackend(), postgresBackend()} {
		b.Run(bk.name, func(b *testing.B) {
			location := bk.location(b)
			s := openOpts(b, bk, location, store.Options{AuditRetention: -1})
			b.Logf("%d records built in %s", n, buildAuditLog(b, s, bk, location, n).Round(time.Second))
			for _, p := range pages {
				b.Run("page/"+p.name, func(b *testing.B) {
					for b.Loop() {
						recs, _, err := s.AuditPage(ctx, p.q, "", 50)
						if err != nil || p.want > 0 && len(recs) != p.want {
							b.Fatalf("%d records, %v; want %d", len(recs), err, p.want)
						}
					}
				})
			}
			b.Run("export/tenant", func(b *testing.B) {
				for b.Loop() {
					count := 0
					if err := s.ExportAudit(ctx, store.AuditFilter{TenantID: "tenant-a"}, func(store.AuditRecord) error {
						count++
						return nil
					}); err != nil || count != n/2 {
						b.Fatalf("%d records, %v", count, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/export")
			})
		})
	}
}

// historyTurn is a turn of about 2 KiB of messages: the person's
// question, a tool call and its result, and the answer.
func historyTurn(tenant, conv string, i int) store.HistoryTurn {
	filler := strings.Repeat(fmt.Sprintf("row %d of the quarterly figures, ", i), 1700/(len("row  of the quarterly figures, ")+5))
	msgs := fmt.Sprintf(`[{"role":"user","content":"What changed in turn %d?"},`+
		`{"role":"assistant","toolCalls":[{"id":"call-%d","name":"crm_report","arguments":{"quarter":"Q%d"}}]},`+
		`{"role":"tool","toolCallId":"call-%d","content":%q},{"role":"assistant","content":"Here is what changed in turn %d."}]`,
		i, i, i%4+1, i, filler, i)
	return store.HistoryTurn{TenantID: tenant, ConversationID: conv, AgentID: "default", RunID: fmt.Sprintf("run-%s-%d", conv, i),
		UserID: "user-1", UserName: "Ada", Messages: json.RawMessage(msgs), Tokens: len(msgs) / 4}
}

// BenchmarkHistory reads the newest 50 turns (about 2 KiB each) of one
// conversation whose turns were appended among those of 10,000 other
// conversations (one turn each, of the same tenant and agent), on each
// backend: what a run reads before it starts.
func BenchmarkHistory(b *testing.B) {
	for _, bk := range []backend{boltBackend(), postgresBackend()} {
		b.Run(bk.name, func(b *testing.B) { benchHistory(b, bk) })
	}
}

func benchHistory(b *testing.B, bk backend) {
	ctx := context.Background()
	s, _ := openTemp(b, bk, newClock())
	const others, mine = 10_000, 50
	const conv = "19:benchmark@thread.v2"
	// Appended by 32 writers at once, as busy conversations would: the
	// conversation's turns are spread among the others'.
	jobs := make(chan store.HistoryTurn)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 32 {
		wg.Go(func() {
			for tr := range jobs {
				if _, err := s.AppendTurn(ctx, tr); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := range others {
		if i%(others/mine) == 0 {
			jobs <- historyTurn("tenant-1", conv, i/(others/mine))
		}
		jobs <- historyTurn("tenant-1", fmt.Sprintf("a:personal-chat-%05d", i), i)
	}
	close(jobs)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	var bytes int
	for b.Loop() {
		turns, err := s.History(ctx, "tenant-1", conv, "default", mine, 1<<30)
		if err != nil || len(turns) != mine {
			b.Fatalf("History = %d turns, %v; want %d", len(turns), err, mine)
		}
		bytes = 0
		for _, tr := range turns {
			bytes += len(tr.Messages)
		}
	}
	b.ReportMetric(float64(bytes)/mine, "B/turn")
}

// overviewRecords is how many audit records BenchmarkOverview stores.
const overviewRecords = 1_000_000

// BenchmarkOverview is the console's overview of a tenant over 90 days on
// a bbolt store holding 1,000,000 audit records of 90 days (5 tenants,
// 200 people, 40 tools of 4 servers): ns/op is one Overview.
func BenchmarkOverview(b *testing.B) { benchOverview(b, boltBackend()) }

// BenchmarkOverviewPostgres is BenchmarkOverview on PostgreSQL.
func BenchmarkOverviewPostgres(b *testing.B) { benchOverview(b, postgresBackend()) }

func benchOverview(b *testing.B, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(b, bk, clk)
	start := clk.Now().AddDate(0, 0, -90)
	step := 90 * 24 * time.Hour / overviewRecords
	const batch = 10_000
	for n := 0; n < overviewRecords; n += batch {
		recs := make([]store.AuditRecord, 0, batch)
		for i := n; i < n+batch; i++ {
			action := []string{"agent.tool.call", "agent.tool.call", "agent.mcp_app.call", "agent.mcp_app.view", "agent.mcp_app.open", "bot.refused", "admin.binding.add"}[i%7]
			recs = append(recs, store.AuditRecord{
				Time: start.Add(time.Duration(i) * step), TenantID: fmt.Sprintf("tenant-%d", i%5), Action: action,
				Actor: fmt.Sprintf("user-%03d", i/5%200),
				Fields: map[string]any{"server": fmt.Sprintf("server-%d", i%4), "tool": fmt.Sprintf("tool_%02d", i/3%40),
					"result": []string{"ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "error", "refused"}[i/2%10], "reason": "permission",
					"decision": "deny", "agent": "default", "run": fmt.Sprintf("run-%d", i)},
			})
		}
		if err := store.BulkAppend(ctx, s, recs); err != nil {
			b.Fatal(err)
		}
	}
	from := start.Truncate(24 * time.Hour)
	to := clk.Now().Truncate(24*time.Hour).AddDate(0, 0, 1)
	var o store.Overview
	for b.Loop() {
		var err error
		if o, err = s.Overview(ctx, "tenant-0", from, to); err != nil {
			b.Fatal(err)
		}
	}
	total := o.Totals.CallsOK + o.Totals.CallsError + o.Totals.CallsRefused
	if total < overviewRecords/5/7*3-10 || o.People != 200 {
		b.Fatalf("the overview counted %d calls and %d people", total, o.People)
	}
	b.ReportMetric(float64(len(o.Days)), "days")
}
