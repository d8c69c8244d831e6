package agent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/agent/demo"
)

// failingStdio is a stdio server that exits at once, leaving a line in
// log for each time it was started.
func failingStdio(log string) agent.ServerConfig {
	return agent.ServerConfig{
		Name:    "broken",
		Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{stdioServerEnv: "fail", spawnLogEnv: log},
	}
}

func spawns(t *testing.T, log string) int {
	t.Helper()
	b, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// readyBurst asks Ready n times at once and returns the errors.
func readyBurst(s *agent.Service, n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = s.Ready(context.Background()) })
	}
	wg.Wait()
	return errs
}

// Readiness is asked by anyone who reaches /readyz, without signing in: a
// burst of checks against a server that cannot start must not start a
// child for each. Concurrent checks share one (single flight), a result is
// kept for ReadyCacheFor, and a server that failed is not tried again
// before RetryInterval.
func TestReadyBurstStartsAtMostOneChild(t *testing.T) {
	t.Run("backoff", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "spawns")
		s := newService(t, oneAgent(failingStdio(log)), agent.Options{AppsEnabled: true, ReadyCacheFor: time.Nanosecond})
		before := spawns(t, log) // the attempt at start
		for i, err := range readyBurst(s, 20) {
			if !errors.Is(err, agent.ErrUnavailable) || !strings.Contains(err.Error(), "broken") {
				t.Errorf("Ready #%d = %v, want ErrUnavailable naming the server", i, err)
			}
		}
		if n := spawns(t, log) - before; n != 0 {
			t.Errorf("20 readiness checks within the retry interval started %d children, want 0", n)
		}
	})
	t.Run("single flight and cache", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "spawns")
		s := newService(t, oneAgent(failingStdio(log)), agent.Options{AppsEnabled: true, RetryInterval: time.Nanosecond, ReadyCacheFor: time.Minute})
		before := spawns(t, log)
		for i, err := range readyBurst(s, 20) {
			if !errors.Is(err, agent.ErrUnavailable) {
				t.Errorf("Ready #%d = %v, want ErrUnavailable", i, err)
			}
		}
		if n := spawns(t, log) - before; n > 1 {
			t.Errorf("20 concurrent readiness checks started %d children, want at most 1", n)
		}
		mid := spawns(t, log)
		for range 20 {
			if err := s.Ready(context.Background()); !errors.Is(err, agent.ErrUnavailable) {
				t.Errorf("cached Ready = %v", err)
			}
		}
		if n := spawns(t, log) - mid; n != 0 {
			t.Errorf("20 readiness checks within the cache time started %d children, want 0", n)
		}
	})
}

// A caller that gives up waiting gets its own context's error at once,
// and the check still completes for the next caller.
func TestReadyCallerGivesUp(t *testing.T) {
	log := filepath.Join(t.TempDir(), "spawns")
	s := newService(t, oneAgent(failingStdio(log)), agent.Options{AppsEnabled: true, RetryInterval: time.Nanosecond, ReadyCacheFor: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Ready(ctx); !errors.Is(err, agent.ErrUnavailable) {
		t.Errorf("Ready with an ended context = %v", err)
	}
	if err := s.Ready(context.Background()); !errors.Is(err, agent.ErrUnavailable) || !strings.Contains(err.Error(), "broken") {
		t.Errorf("Ready = %v, want the server's failure", err)
	}
}

// gatedDemo serves the demo server over Streamable HTTP on loopback, and
// answers nothing (not even initialize) until the returned func is called.
func gatedDemo(t *testing.T) (url string, open func()) {
	t.Helper()
	srv := demo.New(demo.Options{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	gate := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(hs.Close)
	t.Cleanup(open)
	return hs.URL, open
}

// With Options.Background, New returns before the servers are connected
// and Start connects them: Ready names the servers still starting without
// waiting for them, a run that comes meanwhile waits for the first attempt
// and gets the server's tools, and a run whose context ends first is
// answered without them, saying why.
func TestBackgroundStart(t *testing.T) {
	url, open := gatedDemo(t)
	s := newService(t, oneAgent(agent.ServerConfig{Name: "crm", URL: url}), agent.Options{AppsEnabled: true, Background: true})
	s.Start(context.Background())
	if got := s.Starting(); len(got) != 1 || got[0] != "crm" {
		t.Errorf("Starting = %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := s.Ready(ctx)
	cancel()
	if !errors.Is(err, agent.ErrStarting) || err.Error() != "MCP servers still starting: crm" {
		t.Errorf("Ready while starting = %v", err)
	}

	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	ans, _ := s.Run(short, agent.Request{Person: alice, Text: "/lookup_customer {\"customer\": \"Contoso\"}"})
	cancel()
	if !strings.Contains(strings.Join(ans.Notes, "\n"), "the crm server is still starting, so its tools were not offered (ref ") {
		t.Errorf("a run that could not wait: notes %q", ans.Notes)
	}

	done := make(chan agent.Answer, 1)
	go func() { done <- run(t, s, "/lookup_customer {\"customer\": \"Contoso\"}") }()
	select {
	case ans := <-done:
		t.Fatalf("the run did not wait for the server: %q %q", ans.Text, ans.Notes)
	case <-time.After(300 * time.Millisecond):
	}
	open()
	select {
	case ans := <-done:
		if !strings.Contains(ans.Text, "Contoso Ltd") || strings.Contains(strings.Join(ans.Notes, "\n"), "unavailable") {
			t.Errorf("the run that waited: %q %q", ans.Text, ans.Notes)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end once the server started")
	}
	if got := s.Starting(); len(got) != 0 {
		t.Errorf("Starting after the first attempt = %v", got)
	}
	if err := s.Ready(context.Background()); err != nil {
		t.Errorf("Ready once started = %v", err)
	}
}
