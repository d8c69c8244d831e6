package playground_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web"
	"teamsbot/playground"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// env is the whole service as the playground needs it, wired as
// cmd/teamsbot wires it in local mode: a real bbolt store, access, the agent
// with the built-in model and demo MCP server, the local development
// sign-in, the view page, the bot in local mode and the playground, served
// by Echo on 127.0.0.1. The bot's activities and replies travel over real
// loopback HTTP.
type env struct {
	t     testing.TB
	store *store.Store
	teams *bot.Bot
	// signIn and views are the sign-in and the view page the playground
	// is given.
	signIn *signin.Service
	views  *viewpage.Handler
	pg     *playground.Handler
	e      *echo.Echo
	base   string // http://127.0.0.1:port
	logs   testenv.LogBuffer
}

// The tenant and person the page starts with: the first of the local
// people, whom the local sign-in lists too.
var (
	pageTenant = signin.LocalTenant
	pageUser   = signin.LocalPeople()[0].UserID
)

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := context.Background()
	ln := testenv.Listen(t)
	en := &env{t: t, base: "http://" + ln.Addr().String()}
	dir := t.TempDir()
	logger := slog.New(slog.NewTextHandler(&en.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", en.logs.String())
		}
	})

	var err error
	en.store, err = store.Open(ctx, filepath.Join(dir, "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { en.store.Close() })
	decide, err := access.New(access.Options{Store: en.store})
	if err != nil {
		t.Fatalf("access.New: %v", err)
	}
	agents, err := agent.New(ctx, agent.DefaultConfig(), agent.Options{Store: en.store, Access: decide, AppsEnabled: true, Logger: logger})
	if err != nil {
		t.Fatalf("agent.New: %v", err)
	}
	t.Cleanup(func() { agents.Close() })
	origin := netaddr.MustParseOrigin(en.base)
	signIn, err := signin.New(ctx, signin.Options{PublicBaseURL: origin, DataDir: dir, Loopback: true, Logger: logger})
	if err != nil {
		t.Fatalf("signin.New: %v", err)
	}
	views, err := viewpage.New(viewpage.Options{Store: en.store, Agent: agents, SignIn: signIn, Access: decide, PublicBaseURL: origin, DataDir: dir, Logger: logger})
	if err != nil {
		t.Fatalf("viewpage.New: %v", err)
	}
	teams, err := bot.New(bot.Options{
		Agent: agents, Store: en.store, Access: decide, PublicBaseURL: origin, Logger: logger,
		// The "working on it" card goes out at once, so every answer
		// replaces it, as a slow run's does.
		WorkingAfter: time.Nanosecond,
	})
	if err != nil {
		t.Fatalf("bot.New: %v", err)
	}
	t.Cleanup(func() { teams.Shutdown(context.Background()) })
	en.teams, en.signIn, en.views = teams, signIn, views
	pg, err := playground.New(playground.Options{Self: origin, Bot: teams, Store: en.store, SignIn: signIn, Views: views, Logger: logger})
	if err != nil {
		t.Fatalf("playground.New: %v", err)
	}
	t.Cleanup(pg.Close)
	en.pg = pg

	en.e = echo.New()
	en.e.HideBanner, en.e.HidePort = true, true
	en.e.HTTPErrorHandler = web.ErrorHandler(logger, viewpage.Classify)
	en.e.GET("/", pg.Home)
	teams.Register(en.e)
	signIn.Register(en.e)
	views.Register(en.e)
	pg.Register(en.e)
	srv := &http.Server{Handler: en.e, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return en
}

// auditCalls returns the tenant's agent.mcp_app.call records.
func (en *env) auditCalls(tenant string) []store.AuditRecord {
	en.t.Helper()
	recs, err := en.store.Audit(context.Background(), store.AuditQuery{TenantID: tenant, Action: "agent.mcp_app.call"})
	if err != nil {
		en.t.Fatalf("audit: %v", err)
	}
	return recs
}

// sharedBrowser is the one headless Chromium of this test binary
// (testenv.SharedChromium), with scrollbars hidden and font hinting off so
// that the cards lay out alike everywhere; each test gets its own browser
// context (its own cookies) in it.
var sharedBrowser = testenv.SharedChromium{Extra: []chromedp.ExecAllocatorOption{
	chromedp.Flag("hide-scrollbars", true),
	chromedp.Flag("font-render-hinting", "none"),
}}

func TestMain(m *testing.M) {
	code := m.Run()
	sharedBrowser.Close()
	os.Exit(code)
}

// tab is one page in its own browser context (testenv.Tab), which can run
// scripts in any of its frames.
type tab struct{ *testenv.Tab }

func newTab(t *testing.T) *tab {
	t.Helper()
	return &tab{testenv.NewTab(t, sharedBrowser.Get(t), nil)}
}

// Frames the tests name: the page, and the first frame whose URL contains
// the part.
const (
	mainFrame = ""
	viewFrame = "/sandbox/views/"
)

// send types text into the playground's message box and sends it.
func (tb *tab) send(text string) {
	tb.T.Helper()
	q := strconv.Quote(text)
	tb.Must(mainFrame, `(() => { document.getElementById("text").value = `+q+`; document.getElementById("send").click(); return true; })()`)
}

// nonLoopbackIP returns an address of this machine that is not loopback,
// or "" when it has none.
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}
