package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/agent/demo"
	"teamsbot/store"
)

// streamableDemo serves the demo server over Streamable HTTP on loopback,
// behind a bearer token check; while down is set it answers 503.
func streamableDemo(t *testing.T, token string, down *atomic.Bool) *httptest.Server {
	t.Helper()
	srv := demo.New(demo.Options{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down != nil && down.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// A Streamable HTTP server gets the configured headers (with ${VAR} taken
// from the environment) on every request, and its views work as any other.
func TestStreamableHTTPServerWithHeaders(t *testing.T) {
	hs := streamableDemo(t, "crm-token", nil)
	cfg, err := agent.LoadConfig([]byte(`
agents:
  - id: default
    servers:
      - name: crm
        url: `+hs.URL+`
        headers: {Authorization: "Bearer ${CRM_TOKEN}"}
        timeout: 10s
`), getenv(map[string]string{"CRM_TOKEN": "crm-token"}))
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, cfg, agent.Options{Store: openStore(t), AppsEnabled: true})
	if err := s.Ready(context.Background()); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	ans := run(t, s, "/sales_report {}")
	if len(ans.Views) != 1 || ans.Views[0].Server != "crm" {
		t.Fatalf("views = %+v, notes %q, errors %+v", ans.Views, ans.Notes, ans.ToolErrors)
	}
}

// A server that cannot be reached at start does not stop the service: New
// succeeds, Ready fails and runs note it; once the server is up, it is
// connected on later use.
func TestUnreachableServerAtStartIsRetried(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	hs := streamableDemo(t, "tok", &down)
	cfg := oneAgent(
		agent.ServerConfig{Name: "demo", Builtin: "demo"},
		agent.ServerConfig{Name: "crm", URL: hs.URL, Headers: map[string]string{"Authorization": "Bearer tok"}},
	)
	s := newService(t, cfg, agent.Options{Store: openStore(t), AppsEnabled: true, ConnectTimeout: 5 * time.Second, RetryInterval: time.Nanosecond, ReadyCacheFor: time.Nanosecond})
	ctx := context.Background()
	err := s.Ready(ctx)
	if !errors.Is(err, agent.ErrUnavailable) || !strings.Contains(err.Error(), "crm") {
		t.Fatalf("Ready with crm down = %v, want ErrUnavailable naming crm", err)
	}
	ans := run(t, s, "/tools")
	if !hasNote(ans.Notes, "the crm server is unavailable", "(ref ") || !strings.Contains(ans.Text, "demo/sales_report") {
		t.Errorf("run with crm down: notes %q, text %q", ans.Notes, ans.Text)
	}

	down.Store(false)
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after crm came up: %v", err)
	}
	if ans := run(t, s, "/crm/lookup_customer {\"customer\": \"Fabrikam\"}"); !strings.Contains(ans.Text, "Fabrikam Inc") {
		t.Errorf("crm after it came up: %q %+v", ans.Text, ans.ToolErrors)
	}
}

// The tool list is cached per server and read again after
// notifications/tools/list_changed.
func TestToolListRefreshedOnListChanged(t *testing.T) {
	var srv *mcp.Server
	newSrv := func() *mcp.Server {
		srv = mcp.NewServer(&mcp.Implementation{Name: "grow", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "first", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("1"), nil })
		return srv
	}
	s := newService(t, oneAgent(agent.ServerConfig{Name: "grow", Builtin: "grow"}),
		agent.Options{AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"grow": newSrv}})
	if ans := run(t, s, "/tools"); strings.Contains(ans.Text, "second") {
		t.Fatalf("second listed before it exists")
	}
	srv.AddTool(&mcp.Tool{Name: "second", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return textResult("2"), nil })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(run(t, s, "/tools").Text, "grow/second") {
		if time.Now().After(deadline) {
			t.Fatal("the new tool never appeared: the tool list was not read again on tools/list_changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close ends the sessions; a stdio child is gone afterwards.
func TestCloseTerminatesStdioChild(t *testing.T) {
	s, err := agent.New(context.Background(), oneAgent(stdioConfig()), agent.Options{AppsEnabled: true})
	if err != nil {
		t.Fatal(err)
	}
	ans := run(t, s, "/pid {}")
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(ans.Text, "pid:")))
	if err != nil {
		t.Fatalf("pid answer %q: %v", ans.Text, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child %d is not running before Close: %v", pid, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the child %d is still there after Close: %v", pid, err)
	}
	if _, err := s.Run(context.Background(), agent.Request{Person: alice, Text: "/pid {}"}); err != nil {
		t.Errorf("Run after Close: %v", err)
	}
}

// A server URL may carry a secret (some services put the key in the path,
// others in the query): when the server cannot be reached, the log, the run
// notes, the audit log and Ready's error name the server and its host, never
// the secret.
func TestServerURLSecretsStayOutOfLogsAndNotes(t *testing.T) {
	var logs bytes.Buffer
	hs := streamableDemo(t, "tok", nil)
	url := hs.URL + "/mcp/s3cret-path?key=s3cret-query"
	hs.Close() // nothing answers there now
	st := openStore(t)
	cfg := oneAgent(agent.ServerConfig{Name: "crm", URL: url})
	s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true, ConnectTimeout: 5 * time.Second, RetryInterval: time.Nanosecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	err := s.Ready(context.Background())
	if !errors.Is(err, agent.ErrUnavailable) {
		t.Fatalf("Ready = %v, want ErrUnavailable", err)
	}
	ans := run(t, s, "/crm/lookup_customer {}")
	recs, aerr := st.Audit(context.Background(), store.AuditQuery{})
	if aerr != nil {
		t.Fatal(aerr)
	}
	var audited bytes.Buffer
	for _, r := range recs {
		b, _ := json.Marshal(r)
		audited.Write(b)
	}
	for what, text := range map[string]string{
		"Ready's error": err.Error(), "the log": logs.String(), "the notes": strings.Join(ans.Notes, "\n"),
		"the tool errors": fmt.Sprint(ans.ToolErrors), "the audit log": audited.String(),
	} {
		if strings.Contains(text, "s3cret") {
			t.Errorf("%s shows the URL's secret: %s", what, text)
		}
	}
	if !strings.Contains(err.Error(), strings.TrimPrefix(hs.URL, "http://")) {
		t.Errorf("Ready's error does not name the host: %v", err)
	}
}
