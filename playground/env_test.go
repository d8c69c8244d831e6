package playground_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
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

const chromiumPath = "/usr/bin/chromium"

// sharedBrowser is the one headless Chromium of this test binary; each test
// gets its own browser context (its own cookies) in it.
var sharedBrowser struct {
	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedBrowser.cancel != nil {
		sharedBrowser.cancel()
	}
	os.Exit(code)
}

// browser returns the shared browser, starting it on first use. A missing
// Chromium fails the test, except under -short.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium (-short)")
	}
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("this test needs headless Chromium at %s (Debian package chromium): %v", chromiumPath, err)
	}
	sharedBrowser.once.Do(func() {
		dir, err := os.MkdirTemp("", "playground-chromium-")
		if err != nil {
			sharedBrowser.err = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(chromiumPath),
			chromedp.UserDataDir(dir),
			chromedp.Flag("headless", true),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.Flag("hide-scrollbars", true),
			chromedp.Flag("font-render-hinting", "none"),
			// Keep sandboxed (opaque-origin) frames in the page's process
			// so one DevTools target sees inside them.
			chromedp.Flag("disable-features", "IsolateSandboxedIframes,SitePerProcess,site-per-process,Translate"),
			chromedp.Flag("disable-site-isolation-trials", true),
		}
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		sharedBrowser.ctx = ctx
		sharedBrowser.cancel = func() { cancel(); cancelAlloc(); os.RemoveAll(dir) }
		sharedBrowser.err = chromedp.Do(ctx)
	})
	if sharedBrowser.err != nil {
		t.Fatalf("start Chromium: %v", sharedBrowser.err)
	}
	return sharedBrowser.ctx
}

// tab is one page in its own browser context, which can run scripts in
// any of its frames.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu       sync.Mutex
	contexts map[cdp.FrameID]string // frame → unique id of its default context
	log      []string               // console messages and exceptions, for failures
}

func newTab(t *testing.T) *tab {
	t.Helper()
	b := browser(t)
	tb := &tab{t: t, contexts: map[cdp.FrameID]string{}}
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.onEvent))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log: %v", err)
	}
	tb.ctx = ctx
	t.Cleanup(func() {
		if t.Failed() {
			tb.mu.Lock()
			defer tb.mu.Unlock()
			t.Logf("browser console:\n%s", strings.Join(tb.log, "\n"))
		}
	})
	return tb
}

func (tb *tab) onEvent(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventExecutionContextCreated:
		var aux struct {
			FrameID   cdp.FrameID `json:"frameId"`
			IsDefault bool        `json:"isDefault"`
		}
		if json.Unmarshal(e.Context.AuxData, &aux) == nil && aux.IsDefault {
			tb.contexts[aux.FrameID] = e.Context.UniqueID
		}
	case *runtime.EventExecutionContextDestroyed:
		for f, id := range tb.contexts {
			if id == e.ExecutionContextUniqueID {
				delete(tb.contexts, f)
			}
		}
	case *runtime.EventExecutionContextsCleared:
		clear(tb.contexts)
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range e.Args {
			parts = append(parts, string(a.Value)+a.Description)
		}
		tb.log = append(tb.log, "console."+string(e.Type)+": "+strings.Join(parts, " "))
	case *cdplog.EventEntryAdded:
		tb.log = append(tb.log, "log."+string(e.Entry.Level)+": "+e.Entry.Text+" "+e.Entry.URL)
	case *runtime.EventExceptionThrown:
		tb.log = append(tb.log, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
	}
}

// Frames the tests name: the page, and the first frame whose URL contains
// the part.
const (
	mainFrame = ""
	viewFrame = "/sandbox/views/"
)

func (tb *tab) frame(urlPart string) (cdp.FrameID, bool) {
	tree, err := chromedp.Call(tb.ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil || tree.FrameTree == nil {
		return "", false
	}
	if urlPart == mainFrame {
		return tree.FrameTree.Frame.ID, true
	}
	var walk func(*page.FrameTree) (cdp.FrameID, bool)
	walk = func(ft *page.FrameTree) (cdp.FrameID, bool) {
		for _, c := range ft.ChildFrames {
			if strings.Contains(c.Frame.URL, urlPart) {
				return c.Frame.ID, true
			}
			if id, ok := walk(c); ok {
				return id, ok
			}
		}
		return "", false
	}
	return walk(tree.FrameTree)
}

// eval evaluates expr (awaiting a promise) in a frame and returns its JSON
// value.
func (tb *tab) eval(urlPart, expr string) (any, error) {
	id, ok := tb.frame(urlPart)
	if !ok {
		return nil, fmt.Errorf("no frame %q", urlPart)
	}
	tb.mu.Lock()
	uid, ok := tb.contexts[id]
	tb.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no script context in frame %q yet", urlPart)
	}
	return chromedp.Run(tb.ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise,
		func(p *runtime.EvaluateParams) { p.UniqueContextID = uid }))
}

func (tb *tab) must(urlPart, expr string) any {
	tb.t.Helper()
	v, err := tb.eval(urlPart, expr)
	if err != nil {
		tb.t.Fatalf("evaluate %q in frame %q: %v", expr, urlPart, err)
	}
	return v
}

func (tb *tab) str(urlPart, expr string) string {
	tb.t.Helper()
	v := tb.must(urlPart, expr)
	s, ok := v.(string)
	if !ok {
		tb.t.Fatalf("%q in frame %q is %T %v, not a string", expr, urlPart, v, v)
	}
	return s
}

// wait polls expr in a frame until it is true. The deadline only stops a
// hung test; nothing here measures speed.
func (tb *tab) wait(urlPart, expr, what string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for {
		v, err := tb.eval(urlPart, expr)
		if err == nil && v == true {
			return
		}
		last = err
		if time.Now().After(deadline) {
			text, _ := tb.eval(mainFrame, `document.body ? document.body.innerText.slice(0, 3000) : ""`)
			tb.t.Fatalf("gave up waiting for %s (%q in frame %q; last error %v)\npage text: %v", what, expr, urlPart, last, text)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (tb *tab) navigate(u string) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, chromedp.Navigate(u)); err != nil {
		tb.t.Fatalf("navigate %s: %v", u, err)
	}
}

// send types text into the playground's message box and sends it.
func (tb *tab) send(text string) {
	tb.t.Helper()
	q := strconv.Quote(text)
	tb.must(mainFrame, `(() => { document.getElementById("text").value = `+q+`; document.getElementById("send").click(); return true; })()`)
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
