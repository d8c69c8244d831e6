package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/mcpapps"
)

// hugeMarker stands for hugeBytes of HTML in what a hostile server sends:
// the server's own writer puts the bytes in as it writes, so the server
// never holds them and the test measures only the service.
const (
	hugeMarker = "@@HUGE-HTML@@"
	hugeBytes  = 200 << 20
	hugeEnv    = "AGENT_TEST_HUGE_SERVER"
)

// hugeServer is a real go-sdk server whose ui://huge/view.html answers
// resources/read with 200 MiB of HTML.
func hugeServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "huge", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "huge_view", InputSchema: map[string]any{"type": "object"},
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://huge/view.html"}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return textResult("the answer stands"), nil
		})
	srv.AddResource(&mcp.Resource{URI: "ui://huge/view.html", Name: "huge", MIMEType: mcpapps.MIMEType},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: "ui://huge/view.html", MIMEType: mcpapps.MIMEType, Text: "<!doctype html>" + hugeMarker,
			}}}, nil
		})
	return srv
}

// expander writes through to w, replacing hugeMarker by hugeBytes of
// HTML written a chunk at a time.
type expander struct{ w io.Writer }

func (e expander) Write(p []byte) (int, error) {
	before, after, found := bytes.Cut(p, []byte(hugeMarker))
	if !found {
		return e.w.Write(p)
	}
	if _, err := e.w.Write(before); err != nil {
		return 0, err
	}
	chunk := bytes.Repeat([]byte("<p>hostile</p>"), 1<<16/14)
	for n := 0; n < hugeBytes; n += len(chunk) {
		if _, err := e.w.Write(chunk); err != nil {
			return 0, err
		}
	}
	if _, err := e.w.Write(after); err != nil {
		return 0, err
	}
	return len(p), nil
}

// serveHugeStdio runs hugeServer on stdin and stdout, in the child process.
func serveHugeStdio() error {
	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	t := &mcp.IOTransport{Reader: os.Stdin, Writer: nopCloser{expander{flushing{out}}}}
	return hugeServer().Run(context.Background(), t)
}

type flushing struct{ w *bufio.Writer }

func (f flushing) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err == nil {
		err = f.w.Flush()
	}
	return n, err
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// peakHeap samples the Go heap while f runs and returns how far it rose
// above where it started, and how many bytes were allocated in all.
func peakHeap(f func()) (peak, allocated uint64) {
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var (
		mu   sync.Mutex
		high = base.HeapAlloc
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			mu.Lock()
			high = max(high, m.HeapAlloc)
			mu.Unlock()
		}
	}()
	f()
	close(done)
	wg.Wait()
	var end runtime.MemStats
	runtime.ReadMemStats(&end)
	return max(high, end.HeapAlloc) - base.HeapAlloc, end.TotalAlloc - base.TotalAlloc
}

// A hostile server that answers one resources/read with 200 MiB of HTML
// costs the service a few times the message limit, not the 200 MiB: the
// stdio line and the HTTP body are cut at the transport, the view is
// refused as "size" naming the setting, the answer stands, and the server
// is used again afterwards. The peak is logged (go test -v -run
// TestHugeResourceReadMemory ./agent).
func TestHugeResourceReadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MiB through a real stdio child and HTTP")
	}
	// Over HTTP the answer is a JSON body, or an event of an event stream.
	serve := func(json bool) string {
		srv := hugeServer()
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: json})
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(expandingWriter{w}, r)
		}))
		t.Cleanup(hs.Close)
		return hs.URL
	}

	limit := mcpapps.DefaultMaxResourceBytes
	for name, sc := range map[string]agent.ServerConfig{
		"stdio":     {Name: "huge", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{hugeEnv: "1"}, Timeout: "60s"},
		"http-json": {Name: "huge", URL: serve(true), Timeout: "60s"},
		"http-sse":  {Name: "huge", URL: serve(false), Timeout: "60s"},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			s := newService(t, oneAgent(sc), agent.Options{Store: st, AppsEnabled: true})
			if err := s.Ready(context.Background()); err != nil {
				t.Fatal(err)
			}
			var ans agent.Answer
			peak, allocated := peakHeap(func() { ans = run(t, s, "/huge_view {}") })
			t.Logf("%s: 200 MiB resources/read with a %d MiB HTML limit: heap peak +%.1f MiB, %.1f MiB allocated in all",
				name, limit>>20, float64(peak)/(1<<20), float64(allocated)/(1<<20))
			if len(ans.Views) != 0 || len(ans.Refusals) != 1 {
				t.Fatalf("views %d, refusals %+v", len(ans.Views), ans.Refusals)
			}
			rf := ans.Refusals[0]
			if rf.Reason != mcpapps.ReasonSize || !strings.Contains(problem(t, st, ans.RunID, rf.Ref).Detail, agent.MaxHTMLSetting) {
				t.Errorf("refusal %+v, want size naming %s", rf, agent.MaxHTMLSetting)
			}
			if !strings.Contains(ans.Text, "the answer stands") {
				t.Errorf("the answer does not stand: %q", ans.Text)
			}
			// Everything read is bounded by the message limit (17 MiB at
			// the default: twice the HTML limit and 1 MiB); the JSON
			// decoder's buffer grows by doubling, which allocates up to
			// four times that in all.
			if msg := uint64(2*limit + 1<<20); allocated > 4*msg || peak > 4*msg {
				t.Errorf("heap peak %d, allocated %d: more than %d", peak, allocated, 4*msg)
			}
			if recs := audit(t, st, agent.AuditRefused); len(recs) != 1 || field(recs[0], "reason") != mcpapps.ReasonSize {
				t.Errorf("refusal audit = %+v", recs)
			}
			if ans := run(t, s, "/huge_view {}"); !strings.Contains(ans.Text, "the answer stands") {
				t.Errorf("the server is not used again: %q %q", ans.Text, ans.Notes)
			}
		})
	}
}

// expandingWriter is an http.ResponseWriter that expands hugeMarker.
type expandingWriter struct{ http.ResponseWriter }

func (w expandingWriter) Write(p []byte) (int, error) {
	w.ResponseWriter.Header().Del("Content-Length")
	return expander{w.ResponseWriter}.Write(p)
}

func (w expandingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
