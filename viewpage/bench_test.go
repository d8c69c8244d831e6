package viewpage_test

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// benchGet measures GET url over real HTTP on loopback with client's
// session: b.N requests from parallel clients over kept-alive connections.
// It reports requests per second and the 99th percentile latency.
func benchGet(b *testing.B, client *http.Client, url string) {
	b.Helper()
	if r := do(b, client, http.MethodGet, url, nil, ""); r.status != http.StatusOK {
		b.Fatalf("GET %s: %d %s", url, r.status, r.body)
	}
	var mu sync.Mutex
	var all []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			resp, err := client.Get(url)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		mu.Lock()
		all = append(all, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	p99 := all[min(len(all)-1, len(all)*99/100)]
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}

// benchClient is a signed-in client that keeps enough idle connections for
// the parallel clients.
func benchClient(e *env) *http.Client {
	c := e.client(alice())
	c.Transport = &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return c
}

// BenchmarkViewAPI is GET /api/mcp-apps/{id}: the session cookie, the
// store read, the access rule and two fresh frame tokens.
func BenchmarkViewAPI(b *testing.B) {
	e := newEnv(b, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	benchGet(b, benchClient(e), e.base+"/api/mcp-apps/"+v.ID)
}

// BenchmarkProxyDocument is GET /sandbox/proxy with its token.
func BenchmarkProxyDocument(b *testing.B) {
	e := newEnv(b, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	c := benchClient(e)
	info := e.viewInfo(c, v.ID)
	benchGet(b, c, info.ProxyURL)
}

// BenchmarkViewDocument is GET /sandbox/views/{id} with its token: the
// store reads of the view and its HTML, and the CSP header.
func BenchmarkViewDocument(b *testing.B) {
	e := newEnv(b, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	c := benchClient(e)
	info := e.viewInfo(c, v.ID)
	benchGet(b, c, info.ViewURL)
}
