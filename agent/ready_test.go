package agent_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/agent"
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
