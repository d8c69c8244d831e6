package viewpage_test

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
	if _, err := os.Stat(chromiumPath); err != nil {
		if testing.Short() {
			t.Skipf("no Chromium at %s (-short)", chromiumPath)
		}
		t.Fatalf("this test needs headless Chromium at %s (Debian package chromium): %v", chromiumPath, err)
	}
	sharedBrowser.once.Do(func() {
		sharedBrowser.ctx, sharedBrowser.cancel, sharedBrowser.err = startBrowser(nil)
	})
	if sharedBrowser.err != nil {
		t.Fatalf("start Chromium: %v", sharedBrowser.err)
	}
	return sharedBrowser.ctx
}

// startBrowser starts a headless Chromium with the flags every test here
// uses, plus extra. prepare, when set, may write into its profile folder
// before it starts. cancel stops it and removes the folder.
func startBrowser(prepare func(dir string) error, extra ...chromedp.ExecAllocatorOption) (ctx context.Context, cancel func(), err error) {
	dir, err := os.MkdirTemp("", "viewpage-chromium-")
	if err != nil {
		return nil, nil, err
	}
	if prepare != nil {
		if err := prepare(dir); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
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
		chromedp.Flag("disable-popup-blocking", true),
		// A fake microphone and camera, and the permission prompt
		// answered yes: what a view may use is then decided by the
		// frames' allow attribute alone, which is what the tests check.
		chromedp.Flag("use-fake-ui-for-media-stream", true),
		chromedp.Flag("use-fake-device-for-media-stream", true),
		// WebGL in software, for views that draw in 3D.
		chromedp.Flag("enable-unsafe-swiftshader", true),
		// Keep sandboxed (opaque-origin) frames in the page's process
		// so one DevTools target sees inside them.
		chromedp.Flag("disable-features", "IsolateSandboxedIframes,SitePerProcess,site-per-process,Translate"),
		chromedp.Flag("disable-site-isolation-trials", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	bctx, cancelCtx := chromedp.NewContext(actx)
	cancel = func() { cancelCtx(); cancelAlloc(); os.RemoveAll(dir) }
	if err := chromedp.Do(bctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return bctx, cancel, nil
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
	return newTabIn(t, browser(t))
}

// newTabIn is newTab in browser b.
func newTabIn(t *testing.T, b context.Context) *tab {
	t.Helper()
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
			if len(a.Value) > 0 {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		tb.log = append(tb.log, "console."+string(e.Type)+": "+strings.Join(parts, " "))
	case *cdplog.EventEntryAdded:
		tb.log = append(tb.log, "log."+string(e.Entry.Level)+": "+e.Entry.Text+" "+e.Entry.URL)
	case *runtime.EventExceptionThrown:
		tb.log = append(tb.log, "exception: "+(&chromedp.ExceptionError{ExceptionDetails: e.ExceptionDetails}).Error())
	}
}

// Frames the tests name.
const (
	mainFrame  = ""
	proxyFrame = "/sandbox/proxy?"
	viewFrame  = "/sandbox/views/"
)

// frame returns the id of the first frame whose URL contains urlPart (the
// main frame for "").
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

// eval evaluates expr (awaiting a promise) in the frame whose URL contains
// urlPart and returns its JSON value.
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

// must evaluates expr in a frame and fails the test on error.
func (tb *tab) must(urlPart, expr string) any {
	tb.t.Helper()
	v, err := tb.eval(urlPart, expr)
	if err != nil {
		tb.t.Fatalf("evaluate %q in frame %q: %v", expr, urlPart, err)
	}
	return v
}

// str evaluates expr in a frame and returns it as a string.
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
			tb.t.Fatalf("gave up waiting for %s (%q in frame %q; last error %v)\n%s", what, expr, urlPart, last, tb.dump())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// open signs p in through mockoidc (queued before the navigation) and
// opens the view page, waiting until the view's own document runs.
func (tb *tab) open(e *env, p *person, viewID string) {
	tb.t.Helper()
	if p != nil {
		e.oidc.QueueUser(p)
	}
	if err := chromedp.Do(tb.ctx, chromedp.Navigate(e.base+"/mcp-apps/"+viewID)); err != nil {
		tb.t.Fatalf("navigate: %v", err)
	}
	tb.wait(viewFrame, `document.readyState === "complete"`, "the view document")
}

// navigate loads a URL in the tab.
func (tb *tab) navigate(u string) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, chromedp.Navigate(u)); err != nil {
		tb.t.Fatalf("navigate %s: %v", u, err)
	}
}

// dump describes the frames and the page's text, for a failing test.
func (tb *tab) dump() string {
	var b strings.Builder
	tree, err := chromedp.Call(tb.ctx, page.GetFrameTree, cdp.Empty{})
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
	if v, err := tb.eval(mainFrame, `document.body ? document.body.innerText.slice(0, 500) : ""`); err == nil {
		fmt.Fprintf(&b, "page text: %v\n", v)
	}
	return b.String()
}
