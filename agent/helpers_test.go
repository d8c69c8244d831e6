package agent_test

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/store"
)

// tenant and person of the tests.
var alice = agent.Person{TenantID: "tenant-1", UserID: "user-alice", Name: "Alice"}

// openStore opens a real bbolt file in the test's temporary folder.
func openStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newService starts the service and closes it when the test ends.
func newService(t testing.TB, cfg agent.Config, opts agent.Options) *agent.Service {
	t.Helper()
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 20 * time.Second
	}
	s, err := agent.New(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// oneAgent is a configuration with one agent on the builtin model.
func oneAgent(servers ...agent.ServerConfig) agent.Config {
	return agent.Config{Agents: []agent.AgentConfig{{ID: "default", Name: "Assistant", Servers: servers}}}
}

func run(t testing.TB, s *agent.Service, text string) agent.Answer {
	t.Helper()
	ans, err := s.Run(context.Background(), agent.Request{Person: alice, Text: text})
	if err != nil {
		t.Fatalf("Run(%q): %v", text, err)
	}
	return ans
}

// audit returns the audit records of one action in tenant-1.
func audit(t testing.TB, st *store.Store, action string) []store.AuditRecord {
	t.Helper()
	recs, err := st.Audit(context.Background(), store.AuditQuery{TenantID: alice.TenantID, Action: action})
	if err != nil {
		t.Fatalf("Audit(%s): %v", action, err)
	}
	return recs
}

func hasNote(notes []string, parts ...string) bool {
	return slices.ContainsFunc(notes, func(n string) bool {
		for _, p := range parts {
			if !strings.Contains(n, p) {
				return false
			}
		}
		return true
	})
}

// refIn is the reference that ends text ("… (ref 7KQ2M9XD)"), or "".
func refIn(text string) string {
	m := refPattern.FindStringSubmatch(text)
	if m == nil {
		return ""
	}
	return m[1]
}

var refPattern = regexp.MustCompile(`\(ref ([0-9A-Z]{8})\)$`)

// problem returns the run record's problem under ref: what an operator
// finds with the reference a person was shown.
func problem(t *testing.T, st *store.Store, runID, ref string) store.RunProblem {
	t.Helper()
	run, err := st.GetRun(context.Background(), runID)
	if err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
	for _, p := range run.Problems {
		if p.Ref == ref {
			return p
		}
	}
	t.Fatalf("run %s has no problem under ref %q: %+v", runID, ref, run.Problems)
	return store.RunProblem{}
}

func field(r store.AuditRecord, k string) string {
	v, _ := r.Fields[k].(string)
	return v
}
