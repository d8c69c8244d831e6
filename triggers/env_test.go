package triggers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/store"
	"teamsbot/triggers"
)

const (
	tenantA = "tenant-a"
	tenantB = "tenant-b"
	convA   = "19:team-a@thread.tacv2"
)

var admin = access.Person{TenantID: tenantA, UserID: "admin-oid", Name: "Ada Admin", Roles: []string{access.PermAdmin}}

// env is the service's parts that triggered runs go through, on a real
// bbolt file: access, the agent with the demo server, the bot in local
// mode posting to a Bot Connector on loopback, and the triggers Service
// behind an Echo server on loopback. stop and start again reopen the same
// file, as a restart does.
type env struct {
	t     *testing.T
	path  string
	clock *testenv.Clock
	conn  *testenv.Connector
	logs  testenv.LogBuffer

	store *store.Store
	trig  *triggers.Service
	reg   *prometheus.Registry
	url   string
	stop  func()
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, path: filepath.Join(t.TempDir(), "teamsbot.db"), clock: testenv.NewClock(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)), conn: testenv.StartConnector(t)}
	e.start()
	t.Cleanup(func() {
		if e.stop != nil {
			e.stop()
		}
		if t.Failed() {
			t.Logf("logs:\n%s", e.logs.String())
		}
	})
	return e
}

func (e *env) start() {
	t := e.t
	t.Helper()
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(&e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st, err := store.Open(ctx, e.path, store.Options{Now: e.clock.Now, OpenTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ax, err := access.New(access.Options{Store: st, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(ctx, agent.DefaultConfig(), agent.Options{Store: st, Access: ax, AppsEnabled: true, Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(bot.Options{Agent: ag, Store: st, Access: ax, Logger: logger, Now: e.clock.Now,
		PublicBaseURL: netaddr.MustParseOrigin("https://teams.example.test")})
	if err != nil {
		t.Fatal(err)
	}
	e.reg = prometheus.NewRegistry()
	tr, err := triggers.New(triggers.Options{Store: st, Bot: b, Access: ax, Agents: ag.Agents(), Logger: logger, Now: e.clock.Now,
		PublicBaseURL: netaddr.MustParseOrigin("https://teams.example.test"), Registerer: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	ech := echo.New()
	ech.HTTPErrorHandler = web.ErrorHandler(logger)
	tr.Register(ech)
	srv := httptest.NewServer(ech)
	e.store, e.trig, e.url = st, tr, srv.URL
	e.stop = func() {
		srv.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := b.Shutdown(sctx); err != nil {
			t.Errorf("bot shutdown: %v", err)
		}
		ag.Close()
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
		e.stop = nil
	}
}

// restart stops every part and starts them again on the same file.
func (e *env) restart() {
	e.stop()
	e.start()
}

// install stores the conversation reference the bot keeps at install.
func (e *env) install(tenant, conv string) {
	e.t.Helper()
	err := e.store.PutConversation(context.Background(), store.ConversationRef{
		Key: bot.ConversationKey(tenant, conv), TenantID: tenant, ConversationID: conv,
		ServiceURL: e.conn.URL, ChannelID: "msteams", BotID: "28:bot",
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// post calls the runs API.
func (e *env) post(agentID, token string, body any) (int, map[string]any) {
	e.t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	default:
		b, _ = json.Marshal(v)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/api/agents/"+agentID+"/runs", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		e.t.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

// audit returns a tenant's records of an action ("" tenant: no tenant's).
func (e *env) audit(tenant, action string) []store.AuditRecord {
	e.t.Helper()
	recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenant, Action: action})
	if err != nil {
		e.t.Fatal(err)
	}
	if tenant == "" {
		var out []store.AuditRecord
		for _, r := range recs {
			if r.TenantID == "" {
				out = append(out, r)
			}
		}
		return out
	}
	return recs
}

// counter reads one series of a counter from the env's registry.
func (e *env) counter(name string, labels map[string]string) float64 {
	e.t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
