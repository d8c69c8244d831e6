package viewpage_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"teamsbot/internal/testenv"
)

// sharedBrowser is the one headless Chromium of this test binary
// (testenv.SharedChromium); each test gets its own browser context (its own
// cookies) in it.
var sharedBrowser testenv.SharedChromium

func TestMain(m *testing.M) {
	code := m.Run()
	sharedBrowser.Close()
	os.Exit(code)
}

// browser returns the shared browser, starting it on first use. A missing
// Chromium fails the test; -short skips it.
func browser(t *testing.T) context.Context {
	t.Helper()
	return sharedBrowser.Get(t)
}

// startBrowser starts a headless Chromium of its own with the flags every
// test here uses, plus extra (testenv.StartChromium).
func startBrowser(prepare func(dir string) error, extra ...chromedp.ExecAllocatorOption) (ctx context.Context, cancel func(), err error) {
	return testenv.StartChromium(prepare, extra...)
}

// tab is one page in its own browser context (testenv.Tab), which can run
// scripts in any of its frames; log holds its console messages and
// exceptions as they come, under mu.
type tab struct {
	*testenv.Tab
	t   *testing.T
	ctx context.Context

	mu  sync.Mutex
	log []string
}

func newTab(t *testing.T) *tab {
	t.Helper()
	return newTabIn(t, browser(t))
}

// newTabIn is newTab in browser b.
func newTabIn(t *testing.T, b context.Context) *tab {
	t.Helper()
	tb := &tab{t: t}
	tb.Tab = testenv.NewTab(t, b, func(line string) {
		tb.mu.Lock()
		tb.log = append(tb.log, line)
		tb.mu.Unlock()
	})
	tb.ctx = tb.Tab.Ctx
	return tb
}

// Frames the tests name.
const (
	mainFrame  = ""
	proxyFrame = "/sandbox/proxy?"
	viewFrame  = "/sandbox/views/"
)

// frame returns the id of the first frame whose URL contains urlPart (the
// main frame for "").
func (tb *tab) frame(urlPart string) (cdp.FrameID, bool) { return tb.Frame(urlPart) }

// eval evaluates expr (awaiting a promise) in the frame whose URL contains
// urlPart and returns its JSON value.
func (tb *tab) eval(urlPart, expr string) (any, error) { return tb.Eval(urlPart, expr) }

// must evaluates expr in a frame and fails the test on error.
func (tb *tab) must(urlPart, expr string) any {
	tb.t.Helper()
	return tb.Must(urlPart, expr)
}

// str evaluates expr in a frame and returns it as a string.
func (tb *tab) str(urlPart, expr string) string {
	tb.t.Helper()
	return tb.Str(urlPart, expr)
}

// wait polls expr in a frame until it is true. The deadline only stops a
// hung test; nothing here measures speed.
func (tb *tab) wait(urlPart, expr, what string) {
	tb.t.Helper()
	tb.Wait(urlPart, expr, what)
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
	tb.Navigate(u)
}

// dump describes the frames and the page's text, for a failing test.
func (tb *tab) dump() string { return tb.Dump() }
