package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"teamsbot/store"
)

// storeResult is what the store does with many views in its file.
type storeResult struct {
	Views, Docs   int
	Fill          time.Duration
	FileBytes     int64
	Open          time.Duration // after a clean close
	OpenAfterKill time.Duration // after a writer ended without closing
	LookupP50     time.Duration
	LookupP99     time.Duration
	Lookups       int
	SweepIdle     time.Duration // a sweep with nothing expired
	SweepExpired  int
	Sweep         time.Duration
	SweepLongest  time.Duration
	SweepTxs      int
	ServiceStart  time.Duration // teamsbot serve on this file, to /healthz
	viewIDExample string
}

// benchStore fills a store at path with n views sharing docs HTML
// documents of 20 KB (the way a tool's views share one resource), then
// measures its open, random lookups and sweeps; a tenth of the views
// expire an hour in, for the second sweep.
func benchStore(ctx context.Context, path string, n, docs int) (storeResult, error) {
	r := storeResult{Views: n, Docs: docs}
	start := time.Now().UTC().Truncate(time.Second)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	opts := store.Options{Now: now}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return r, fmt.Errorf("data folder: %w", err)
	}
	s, err := store.Open(ctx, path, opts)
	if err != nil {
		return r, fmt.Errorf("open: %w", err)
	}
	html := make([][]byte, docs)
	for i := range html {
		html[i] = append(fmt.Appendf(nil, "<!doctype html><title>document %d</title>\n", i),
			bytes.Repeat([]byte("<div class=\"bar\" style=\"height:42px\"></div>\n"), 20<<10/45)...)
	}
	const perRun = 2000
	t0 := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 2)
	// Two writers, so that one encodes while the other commits.
	for range 2 {
		wg.Go(func() {
			for {
				run := int(next.Add(1) - 1)
				if run*perRun >= n {
					return
				}
				views := make([]store.NewView, 0, perRun)
				for j := range perRun {
					i := run*perRun + j
					if i >= n {
						break
					}
					life := 7 * 24 * time.Hour
					if i%10 == 0 {
						life = 30 * time.Minute
					}
					views = append(views, store.NewView{View: benchView(viewID(i), start, life), HTML: html[i%docs]})
				}
				if err := s.SaveRun(ctx, store.Run{ID: fmt.Sprintf("run-%07d", run), AgentID: "default", TenantID: homeTenant,
					UserID: userOID, CreatedAt: start}, views, nil); err != nil {
					errs <- fmt.Errorf("fill: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		s.Close()
		return r, err
	}
	r.Fill = time.Since(t0)
	if err := s.Close(); err != nil {
		return r, fmt.Errorf("close: %w", err)
	}
	st, err := os.Stat(path)
	if err != nil {
		return r, fmt.Errorf("file size: %w", err)
	}
	r.FileBytes = st.Size()

	t0 = time.Now()
	s, err = store.Open(ctx, path, opts)
	if err != nil {
		return r, fmt.Errorf("reopen: %w", err)
	}
	r.Open = time.Since(t0)
	defer func() { s.Close() }()

	rng := rand.New(rand.NewPCG(1, 2))
	r.Lookups = 100_000
	lat := make([]time.Duration, 0, r.Lookups)
	for range r.Lookups {
		id := viewID(rng.IntN(n))
		t := time.Now()
		if _, err := s.View(ctx, id); err != nil {
			return r, fmt.Errorf("lookup %s: %w", id, err)
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	r.LookupP50, r.LookupP99 = percentile(lat, 0.5), percentile(lat, 0.99)

	t0 = time.Now()
	if _, err := s.Sweep(ctx); err != nil {
		return r, fmt.Errorf("idle sweep: %w", err)
	}
	r.SweepIdle = time.Since(t0)
	clock.Store(start.Add(time.Hour).UnixNano())
	t0 = time.Now()
	sw, err := s.Sweep(ctx)
	if err != nil {
		return r, fmt.Errorf("sweep: %w", err)
	}
	r.Sweep = time.Since(t0)
	r.SweepExpired, r.SweepLongest, r.SweepTxs = sw.Views, sw.Longest, sw.Transactions
	r.viewIDExample = viewID(1)

	// The open after a crash: a writer commits and ends without closing,
	// which leaves no free list in the file, so the open walks every page.
	if err := s.Close(); err != nil {
		return r, fmt.Errorf("close: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	if out, err := exec.CommandContext(ctx, self, "crashwrite", "-path", path).CombinedOutput(); err != nil {
		return r, fmt.Errorf("crashwrite: %w: %s", err, out)
	}
	t0 = time.Now()
	s, err = store.Open(ctx, path, opts)
	if err != nil {
		return r, fmt.Errorf("open after the writer's end: %w", err)
	}
	r.OpenAfterKill = time.Since(t0)
	return r, nil
}

// crashWrite opens the store at path, commits one record and ends the
// process without closing the store.
func crashWrite(ctx context.Context, path string) error {
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return err
	}
	if err := s.RecordArrival(ctx, "bench\x00crash", time.Minute); err != nil {
		return err
	}
	os.Exit(0)
	return nil
}

func viewID(i int) string { return fmt.Sprintf("v%015d", i) }

// benchView is a view as a turn of the demo server stores it.
func benchView(id string, created time.Time, life time.Duration) store.View {
	return store.View{
		ID: id, AgentID: "default", TenantID: homeTenant, UserID: userOID, UserName: "Ada Lovelace",
		Server: "demo", Tool: "sales_report", ToolTitle: "Sales report", ResourceURI: "ui://demo/sales-report.html",
		CSP:       "default-src 'none'; script-src 'self' 'unsafe-inline'; connect-src https://api.example.com",
		Arguments: json.RawMessage(`{}`),
		Result:    json.RawMessage(`{"content":[{"type":"text","text":"Sales by region for Q3: EMEA 4.2M, Americas 6.1M, APAC 3.3M."}]}`),
		CreatedAt: created, ExpiresAt: created.Add(life),
	}
}
