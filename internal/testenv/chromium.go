package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium, which ./test.sh installs.
const ChromiumPath = "/usr/bin/chromium"

// NeedChromium skips t under -short, as docs/getting-started.md says `go test -short`
// leaves out the tests that need Chromium, and fails it when Chromium is
// missing otherwise: a test that cannot run must not pass.
func NeedChromium(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs Chromium (-short)")
	}
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Fatalf("this test needs headless Chromium at %s (Debian package chromium): %v", ChromiumPath, err)
	}
}

// chromiumFlags are the flags every test's Chromium runs with: headless,
// in a profile folder of its own, without its own sandbox (tests run in
// containers, often as root), without first-run pages, background
// traffic or component updates; popups allowed (views open links through
// the host); a fake microphone and camera with the permission prompt
// answered yes, so that what a view may use is decided by the frames'
// allow attribute alone; WebGL in software; and sandboxed (opaque-origin)
// frames kept in the page's process, so that one DevTools target sees
// inside them.
func chromiumFlags(dir string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(ChromiumPath),
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
		chromedp.Flag("disable-popup-blocking", true),
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		chromedp.Flag("enable-unsafe-swiftshader", true),
		chromedp.Flag("disable-features", "IsolateSandboxedIframes,SitePerProcess,site-per-process,Translate"),
		chromedp.Flag("disable-site-isolation-trials", true),
	}
}

// StartChromium starts a headless Chromium with chromiumFlags and then
// extra (a flag given again wins). prepare, when set, may write into its
// profile folder before it starts. cancel stops it and removes the folder.
func StartChromium(prepare func(dir string) error, extra ...chromedp.ExecAllocatorOption) (ctx context.Context, cancel func(), err error) {
	dir, err := os.MkdirTemp("", "teamsbot-chromium-")
	if err != nil {
		return nil, nil, err
	}
	if prepare != nil {
		if err := prepare(dir); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromiumFlags(dir), extra...)...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	cancel = func() { cancelCtx(); cancelAlloc(); os.RemoveAll(dir) }
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return bctx, cancel, nil
}

// Chromium starts a Chromium for t alone, stopped when t ends; NeedChromium
// decides first whether t runs.
func Chromium(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	NeedChromium(t)
	ctx, cancel, err := StartChromium(nil, extra...)
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(cancel)
	return ctx
}

// SharedChromium is one Chromium for every test of a test binary, started
// on first use; each test opens its tabs in their own browser contexts
// (their own cookies) in it. The binary's TestMain calls Close.
type SharedChromium struct {
	// Extra are flags added to chromiumFlags.
	Extra []chromedp.ExecAllocatorOption

	once   sync.Once
	ctx    context.Context
	cancel func()
	err    error
}

// Get returns the shared Chromium, starting it on first use; NeedChromium
// decides first whether t runs.
func (s *SharedChromium) Get(t testing.TB) context.Context {
	t.Helper()
	NeedChromium(t)
	s.once.Do(func() { s.ctx, s.cancel, s.err = StartChromium(nil, s.Extra...) })
	if s.err != nil {
		t.Fatalf("start Chromium: %v", s.err)
	}
	return s.ctx
}

// Close stops the shared Chromium, if it was started.
func (s *SharedChromium) Close() {
	if s.cancel != nil {
		s.cancel()
	}
}

// Tab is one page in its own browser context, which can run scripts in
// any of its frames, found by a part of their URL ("" for the page
// itself). It keeps the console messages and exceptions, and prints them
// when the test fails.
type Tab struct {
	T   testing.TB
	Ctx context.Context

	mu       sync.Mutex
	contexts map[cdp.FrameID]string // frame → unique id of its default context
	log      []string
	onLog    func(string)
}

// NewTab opens a tab in browser. onLog, when not nil, gets each console
// message and exception as it comes.
func NewTab(t testing.TB, browser context.Context, onLog func(line string)) *Tab {
	t.Helper()
	tb := &Tab{T: t, contexts: map[cdp.FrameID]string{}, onLog: onLog}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.onEvent))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the log: %v", err)
	}
	tb.Ctx = ctx
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("browser console:\n%s", strings.Join(tb.Log(), "\n"))
		}
	})
	return tb
}

// Log returns the console messages and exceptions so far.
func (tb *Tab) Log() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.log...)
}

func (tb *Tab) onEvent(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	line := ""
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
			if len(a.Value) > 0 {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		line = "console." + string(e.Type) + ": " + strings.Join(parts, " ")
	case *cdplog.EventEntryAdded:
		line = "log." + string(e.Entry.Level) + ": " + e.Entry.Text + " " + e.Entry.URL
	case *runtime.EventExceptionThrown:
		line = "exception: " + (&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error()
	}
	if line != "" {
		tb.log = append(tb.log, line)
		if tb.onLog != nil {
			tb.onLog(line)
		}
	}
}

// Frame returns the id of the first frame whose URL contains urlPart, the
// page itself for "".
func (tb *Tab) Frame(urlPart string) (cdp.FrameID, bool) {
	tree, err := chromedp.Call(tb.Ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil || tree.FrameTree == nil {
		return "", false
	}
	if urlPart == "" {
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

// Eval evaluates expr (awaiting a promise) in the frame whose URL
// contains urlPart and returns its JSON value.
func (tb *Tab) Eval(urlPart, expr string) (any, error) {
	id, ok := tb.Frame(urlPart)
	if !ok {
		return nil, fmt.Errorf("no frame %q", urlPart)
	}
	tb.mu.Lock()
	uid, ok := tb.contexts[id]
	tb.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no script context in frame %q yet", urlPart)
	}
	return chromedp.Run(tb.Ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise,
		func(p *runtime.EvaluateParams) { p.UniqueContextID = uid }))
}

// Must evaluates expr in a frame and fails the test on error.
func (tb *Tab) Must(urlPart, expr string) any {
	tb.T.Helper()
	v, err := tb.Eval(urlPart, expr)
	if err != nil {
		tb.T.Fatalf("evaluate %q in frame %q: %v", expr, urlPart, err)
	}
	return v
}

// Str evaluates expr in a frame and returns it as a string.
func (tb *Tab) Str(urlPart, expr string) string {
	tb.T.Helper()
	v := tb.Must(urlPart, expr)
	s, ok := v.(string)
	if !ok {
		tb.T.Fatalf("%q in frame %q is %T %v, not a string", expr, urlPart, v, v)
	}
	return s
}

// Wait polls expr in a frame until it is true. The deadline only stops a
// hung test; nothing here measures speed.
func (tb *Tab) Wait(urlPart, expr, what string) {
	tb.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for {
		v, err := tb.Eval(urlPart, expr)
		if err == nil && v == true {
			return
		}
		last = err
		if time.Now().After(deadline) {
			tb.T.Fatalf("gave up waiting for %s (%q in frame %q; last error %v)\n%s", what, expr, urlPart, last, tb.Dump())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Navigate loads a URL in the tab.
func (tb *Tab) Navigate(u string) {
	tb.T.Helper()
	if err := chromedp.Do(tb.Ctx, chromedp.Navigate(u)); err != nil {
		tb.T.Fatalf("navigate %s: %v", u, err)
	}
}

// Dump describes the frames and the page's text, for a failing test.
func (tb *Tab) Dump() string {
	var b strings.Builder
	tree, err := chromedp.Call(tb.Ctx, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		return "frame tree: " + err.Error()
	}
	var walk func(ft *page.FrameTree, depth int)
	walk = func(ft *page.FrameTree, depth int) {
		fmt.Fprintf(&b, "%sframe %s origin %s unreachable %q\n", strings.Repeat("  ", depth), ft.Frame.URL, ft.Frame.SecurityOrigin, ft.Frame.UnreachableURL)
		for _, c := range ft.ChildFrames {
			walk(c, depth+1)
		}
	}
	walk(tree.FrameTree, 0)
	if v, err := tb.Eval("", `document.body ? document.body.innerText.slice(0, 3000) : ""`); err == nil {
		fmt.Fprintf(&b, "page text: %v\n", v)
	}
	return b.String()
}
