package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// WindowSize is a browser window the pages are checked at.
type WindowSize struct {
	Name          string
	Width, Height int64
}

// WindowSizes are the two windows every page is checked at: a desktop
// browser and a phone (an iPhone's 390×844).
var WindowSizes = []WindowSize{{"1400×1000", 1400, 1000}, {"390×844", 390, 844}}

// Theme is a colour scheme the pages are checked in.
type Theme string

// The themes of the pages: the system's light or dark colour scheme, and
// forced colours (Windows high contrast, on a dark scheme).
const (
	Light        Theme = "light"
	Dark         Theme = "dark"
	HighContrast Theme = "high contrast"
)

// Themes are every Theme.
var Themes = []Theme{Light, Dark, HighContrast}

// Emulate makes the tab's window w and its colour scheme th, as a browser
// of that size on a system in that theme would be (CSS media features
// prefers-color-scheme and forced-colors); it lasts across navigations.
// The window is a desktop one of that size (no mobile viewport of 980 px
// for a page that has no viewport meta), so that a page too wide for it
// shows.
func (tb *Tab) Emulate(w WindowSize, th Theme) {
	tb.T.Helper()
	scheme, forced := "light", "none"
	switch th {
	case Dark:
		scheme = "dark"
	case HighContrast:
		scheme, forced = "dark", "active"
	}
	if _, err := chromedp.Call(tb.Ctx, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
		Width: w.Width, Height: w.Height, DeviceScaleFactor: 1,
	}); err != nil {
		tb.T.Fatalf("window %s: %v", w.Name, err)
	}
	if _, err := chromedp.Call(tb.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{
		{Name: "prefers-color-scheme", Value: scheme}, {Name: "forced-colors", Value: forced},
	}}); err != nil {
		tb.T.Fatalf("theme %s: %v", th, err)
	}
}

// AxeViolation is one rule of axe-core a page breaks, with the elements
// that break it.
type AxeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"` // each element's selector and what is wrong with it
}

func (v AxeViolation) String() string {
	return fmt.Sprintf("%s (%s): %s\n    %s", v.ID, v.Impact, v.Help, strings.Join(v.Nodes, "\n    "))
}

var axeScript = sync.OnceValues(func() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(root, "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		return "", fmt.Errorf("axe-core (npm ci at the repository root installs it): %w", err)
	}
	return string(b), nil
})

// ModuleRoot is the folder of the project's go.mod, found from the test's
// working directory up.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// axeRun runs axe-core on the document, once its animations and
// transitions (a dialog fading in, its buttons' colours) are over, those
// of components' shadow trees included; the page's own document, not the
// documents of its frames (a view, checked on its own); and keeps the serious and
// critical violations, each element by its selector and axe's summary.
const axeRun = `Promise.all([document, ...[...document.querySelectorAll("*")].filter(e => e.shadowRoot).map(e => e.shadowRoot)]
    .flatMap(r => r.getAnimations()).map(a => a.finished.catch(() => 0)))
  .then(() => axe.run(document, {resultTypes: ["violations"], iframes: false}).then(r => r.violations
  .filter(v => v.impact === "serious" || v.impact === "critical")
  .map(v => ({id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => n.target.join(" ") + ": " + (n.failureSummary || "").replace(/\s+/g, " "))}))))`

// Axe runs axe-core (node_modules/axe-core, the version of the lock file)
// on the tab's page and returns its serious and critical violations. The
// script is put in through DevTools, as the page's own code never could
// be: the page's Content-Security-Policy, which allows no such script, is
// not loosened for it.
func (tb *Tab) Axe() ([]AxeViolation, error) {
	src, err := axeScript()
	if err != nil {
		return nil, err
	}
	// The source itself is what DevTools evaluates: an eval in the page
	// would need 'unsafe-eval', which no page of the service allows.
	loaded, err := chromedp.Run(tb.Ctx, chromedp.Evaluate[bool](`typeof window.axe === "object"`))
	if err != nil {
		return nil, err
	}
	if !loaded {
		if _, err := chromedp.Run(tb.Ctx, chromedp.Evaluate[chromedp.Void](src)); err != nil {
			return nil, fmt.Errorf("axe-core did not load: %w", err)
		}
	}
	// A page whose scripts are off (emulated) never finishes axe's run.
	ctx, cancel := context.WithTimeout(tb.Ctx, 2*time.Minute)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, err
	}
	var vs []AxeViolation
	if err := json.Unmarshal(raw, &vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// CheckAxe fails the test for each serious or critical violation of
// axe-core on the tab's page; what names the page, theme and size.
func (tb *Tab) CheckAxe(what string) {
	tb.T.Helper()
	vs, err := tb.Axe()
	if err != nil {
		tb.T.Errorf("%s: axe-core: %v", what, err)
		return
	}
	for _, v := range vs {
		tb.T.Errorf("%s: %s", what, v)
	}
}

// SidewaysScroll returns how wide the page's content is and how wide its
// window: a page scrolls sideways when the first is larger.
func (tb *Tab) SidewaysScroll() (scrollWidth, clientWidth int, err error) {
	r, err := chromedp.Run(tb.Ctx, chromedp.Evaluate[struct{ S, C int }](
		`(() => { const e = document.scrollingElement; return {S: e.scrollWidth, C: e.clientWidth}; })()`))
	return r.S, r.C, err
}

// CheckNoSidewaysScroll fails the test when the tab's page scrolls
// sideways, naming the elements that stick out of the window.
func (tb *Tab) CheckNoSidewaysScroll(what string) {
	tb.T.Helper()
	s, c, err := tb.SidewaysScroll()
	if err != nil {
		tb.T.Errorf("%s: %v", what, err)
		return
	}
	if s <= c {
		return
	}
	wide, _ := chromedp.Run(tb.Ctx, chromedp.Evaluate[[]string](`[...document.body.querySelectorAll("*")]
  .filter(e => e.getBoundingClientRect().right > document.scrollingElement.clientWidth + 1)
  .filter(e => { for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) { if (getComputedStyle(p).overflowX !== "visible") return false; } return true; })
  .slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : "") + " right=" + Math.round(e.getBoundingClientRect().right))`))
	tb.T.Errorf("%s: the page scrolls sideways (%d px of content in a %d px window); sticking out: %s", what, s, c, strings.Join(wide, ", "))
}
