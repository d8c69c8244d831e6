package main

import (
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"
)

// A burst of unauthenticated /readyz requests against a stdio server
// that cannot start answers 503 to each and starts no child for them:
// readiness is cached, shared by concurrent requests, and keeps the
// reconnect backoff.
func TestReadyzBurstStartsNoChildren(t *testing.T) {
	dir := t.TempDir()
	spawnLog := filepath.Join(dir, "spawns")
	cfgPath := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(cfgPath, []byte(`
agents:
  - id: default
    servers:
      - name: broken
        command: [/bin/sh, -c, "echo started >> `+spawnLog+`; exit 1"]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_CONFIG": cfgPath})
	started := func() int {
		b, _ := os.ReadFile(spawnLog)
		return strings.Count(string(b), "\n")
	}
	// The server starts after the listener: wait for its first attempt.
	for deadline := time.Now().Add(20 * time.Second); logs.logLine("MCP server not connected; will retry") == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server's first attempt did not end:\n%s", logs)
		}
	}
	before := started()
	if before != 1 {
		t.Fatalf("%d children at start, want 1", before)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Go(func() {
			resp, err := c.Get(base + "/readyz")
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusServiceUnavailable {
			t.Errorf("/readyz #%d: %d, want 503", i, code)
		}
	}
	if n := started() - before; n > 1 {
		t.Errorf("20 requests to /readyz started %d children of the failing server, want at most 1", n)
	}
	// Anyone may ask: the burst must not flood the log either.
	if n := strings.Count(logs.String(), `"msg":"not ready"`); n != 1 {
		t.Errorf("20 requests to /readyz wrote %d \"not ready\" lines, want 1", n)
	}
}

// internalURL is the base URL of the internal listener the service logged.
func internalURL(t *testing.T, logs *lockedBuffer) string {
	t.Helper()
	l := logs.logLine("internal listener")
	if l == nil {
		t.Fatalf("no internal listener logged:\n%s", logs)
	}
	return "http://" + l["addr"].(string)
}

// With TICKETIQ_METRICS_ADDR, readiness and metrics are served on the
// internal listener only; liveness is on both.
func TestMetricsAddrMovesReadinessAndMetrics(t *testing.T) {
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_METRICS_ADDR": "127.0.0.1:0"})
	internal := internalURL(t, logs)
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		url  string
		want int
	}{
		{base + "/healthz", 200},
		{base + "/readyz", 404},
		{base + "/metrics", 404},
		{internal + "/healthz", 200},
		{internal + "/readyz", 200},
		{internal + "/metrics", 200},
		{internal + "/api/messages", 404},
		{internal + "/", 404},
	} {
		if code, body := get(t, c, tc.url); code != tc.want {
			t.Errorf("GET %s: %d, want %d (%s)", tc.url, code, tc.want, body)
		}
	}
	if _, body := get(t, c, internal+"/metrics"); !strings.Contains(body, "go_goroutines") {
		t.Errorf("the internal /metrics has no Go metrics")
	}
}

func TestConfigMetricsAddr(t *testing.T) {
	cfg, err := loadConfig(envOf(map[string]string{"TICKETIQ_METRICS_ADDR": "127.0.0.1:9090"}))
	if err != nil || cfg.MetricsAddr.String() != "127.0.0.1:9090" {
		t.Errorf("loadConfig = %v, %v", cfg.MetricsAddr, err)
	}
	if cfg, err := loadConfig(envOf(nil)); err != nil || !cfg.MetricsAddr.IsZero() {
		t.Errorf("unset: %v, %v", cfg.MetricsAddr, err)
	}
	for _, bad := range []string{"9090", "host:port", "127.0.0.1:70000"} {
		_, err := loadConfig(envOf(map[string]string{"TICKETIQ_METRICS_ADDR": bad, "TICKETIQ_LOG_LEVEL": "loud"}))
		if err == nil || !strings.Contains(err.Error(), "TICKETIQ_METRICS_ADDR") || !strings.Contains(err.Error(), "TICKETIQ_LOG_LEVEL") {
			t.Errorf("TICKETIQ_METRICS_ADDR=%q: %v, want both mistakes named", bad, err)
		}
	}
	_, err = loadConfig(envOf(map[string]string{"TICKETIQ_ADDR": ":3978", "TICKETIQ_METRICS_ADDR": ":3978"}))
	if err == nil || !strings.Contains(err.Error(), "its own port") {
		t.Errorf("the same address twice: %v", err)
	}
}

// TICKETIQ_PPROF serves Go's profiler on the internal listener, never on
// the public one, and is refused without an internal listener.
func TestPprofOnTheInternalListenerOnly(t *testing.T) {
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_METRICS_ADDR": "127.0.0.1:0", "TICKETIQ_PPROF": "true"})
	internal := internalURL(t, logs)
	c := &http.Client{Timeout: 10 * time.Second}
	for _, tc := range []struct {
		url  string
		want int
	}{
		{internal + "/debug/pprof/", 200},
		{internal + "/debug/pprof/heap?debug=1", 200},
		{internal + "/debug/pprof/goroutine?debug=1", 200},
		{internal + "/debug/pprof/profile?seconds=1", 200},
		{base + "/debug/pprof/", 404},
		{base + "/debug/pprof/heap", 404},
	} {
		if code, body := get(t, c, tc.url); code != tc.want {
			t.Errorf("GET %s: %d, want %d (%.200s)", tc.url, code, tc.want, body)
		}
	}
	if _, body := get(t, c, internal+"/debug/pprof/heap?debug=1"); !strings.Contains(body, "heap profile") {
		t.Errorf("the heap profile is not a heap profile: %.200s", body)
	}

	// Off by default, and a plain internal listener has no profiler.
	base2, logs2, _ := startService(t, map[string]string{"TICKETIQ_METRICS_ADDR": "127.0.0.1:0"})
	internal2 := internalURL(t, logs2)
	for _, u := range []string{internal2 + "/debug/pprof/", base2 + "/debug/pprof/"} {
		if code, _ := get(t, c, u); code != 404 {
			t.Errorf("GET %s without TICKETIQ_PPROF: %d, want 404", u, code)
		}
	}

	_, err := loadConfig(envOf(map[string]string{"TICKETIQ_PPROF": "true"}))
	if err == nil || !strings.Contains(err.Error(), "TICKETIQ_PPROF: needs TICKETIQ_METRICS_ADDR") {
		t.Errorf("TICKETIQ_PPROF without an internal listener: %v", err)
	}
	_, err = loadConfig(envOf(map[string]string{"TICKETIQ_PPROF": "maybe", "TICKETIQ_LOG_LEVEL": "loud"}))
	if err == nil || !strings.Contains(err.Error(), `TICKETIQ_PPROF: "maybe": want true or false`) || !strings.Contains(err.Error(), "TICKETIQ_LOG_LEVEL") {
		t.Errorf("TICKETIQ_PPROF=maybe: %v, want both mistakes named", err)
	}
}

// The service collects garbage at three times the live heap unless the
// operator set GOGC, which it leaves alone. (Not parallel: the setting is
// the process's.)
func TestGarbageCollectorTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	debug.SetGCPercent(77)
	_, _, stop := startService(t, map[string]string{"GOGC": "77"})
	stop()
	if got := debug.SetGCPercent(100); got != 77 {
		t.Errorf("with GOGC set the collector's target became %d, want the operator's 77", got)
	}
	_, _, stop = startService(t, map[string]string{})
	stop()
	if got := debug.SetGCPercent(100); got != defaultGCPercent {
		t.Errorf("without GOGC the collector's target is %d, want %d", got, defaultGCPercent)
	}
}
