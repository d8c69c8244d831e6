package viewpage_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"teamsbot/agent/demo"
	"teamsbot/internal/testenv"
)

// The demo's sales view renders with its data on the page the Open button
// lands on: "/sales_report {}" run through the real agent, demo server and
// bbolt store, then the page opened in Chromium after signing in through
// the OIDC provider. Its refresh button's tools/call goes through the page
// and the governed path.
func TestBrowserDemoSalesView(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)

	tb.wait(viewFrame, `document.body.dataset.state === "ready"`, "the sales view to show its result")
	if got := tb.str(mainFrame, `document.getElementById("tool-title").textContent`); got != "Sales report" {
		t.Errorf("page title %q", got)
	}
	if got := tb.str(mainFrame, `document.getElementById("server").textContent`); got != "demo" {
		t.Errorf("page server %q", got)
	}
	if got := tb.must(viewFrame, `document.querySelectorAll("#chart rect.bar").length`); got != float64(len(demo.Products())) {
		t.Errorf("%v bars in the chart, want %d", got, len(demo.Products()))
	}
	if got := tb.str(viewFrame, `document.getElementById("title").textContent`); !strings.Contains(got, demo.DefaultRegion) || !strings.Contains(got, demo.DefaultQuarter) {
		t.Errorf("view title %q", got)
	}
	total := tb.str(viewFrame, `document.getElementById("total").dataset.value`)
	if total == "" || total == "0" {
		t.Errorf("total %q", total)
	}

	// The exact sandbox attributes of both frames.
	if got := tb.str(mainFrame, `document.getElementById("proxy").getAttribute("sandbox")`); got != "allow-scripts" {
		t.Errorf("proxy frame sandbox %q, want allow-scripts", got)
	}
	if got := tb.str(proxyFrame, `document.getElementById("view").getAttribute("sandbox")`); got != "allow-scripts" {
		t.Errorf("view frame sandbox %q, want allow-scripts", got)
	}

	// tools/call from the view: refresh_sales (app-only) through the page.
	tb.must(viewFrame, `document.getElementById("refresh").click()`)
	tb.wait(viewFrame, `document.body.dataset.revision === "1" && document.body.dataset.state === "ready"`, "the refreshed figures")
	ok := false
	for _, r := range e.callAudit(tenantA) {
		if r.Fields["tool"] == demo.ToolRefreshSales && r.Fields["result"] == "ok" {
			ok = true
		}
	}
	if !ok {
		t.Errorf("no audit record of the view's refresh_sales call: %+v", e.callAudit(tenantA))
	}
}

// "It adds allow-forms only when the server asks for that permission": the
// feedback view asks, and its form is sent; its ui/message is shown on the
// page as text and never reaches the model; its ui/open-link of an https
// page opens a new tab with noopener,noreferrer.
func TestBrowserDemoFeedbackView(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/feedback_form {\"topic\": \"the page\"}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `document.body.dataset.state === "ready"`, "the feedback form")

	if got := tb.str(mainFrame, `document.getElementById("proxy").getAttribute("sandbox")`); got != "allow-scripts allow-forms" {
		t.Errorf("proxy frame sandbox %q, want allow-scripts allow-forms", got)
	}
	if got := tb.str(proxyFrame, `document.getElementById("view").getAttribute("sandbox")`); got != "allow-scripts allow-forms" {
		t.Errorf("view frame sandbox %q, want allow-scripts allow-forms", got)
	}

	tb.must(viewFrame, `document.getElementById("rating-4").click(); document.getElementById("comment").value = "Nice"; document.getElementById("submit").click()`)
	tb.wait(viewFrame, `document.body.dataset.state === "submitted"`, "the form to be sent")

	// ui/message: shown on the page as text, and sent nowhere: the
	// server gets no request for it, so no model can see it.
	before := e.requestCount()
	tb.must(viewFrame, `document.getElementById("thanks").click()`)
	tb.wait(mainFrame, `document.querySelectorAll("#message-list li").length === 1`, "the view's message on the page")
	if tb.must(mainFrame, `document.getElementById("messages").hidden`) != false {
		t.Error("the messages section stays hidden")
	}
	if got := tb.str(mainFrame, `document.querySelector("#message-list li").textContent`); got == "" {
		t.Error("the message is empty")
	}
	reqs := slices.DeleteFunc(e.requestsSince(before), func(r string) bool { return r == "GET /favicon.ico" })
	if len(reqs) != 0 {
		t.Errorf("ui/message made requests %v", reqs)
	}

	// ui/open-link: record what the page asks of window.open.
	tb.must(mainFrame, `window.__opened = []; window.open = function (u, t, f) { window.__opened.push([u, t, f]); return null; }; true`)
	tb.must(viewFrame, `document.getElementById("open-link").click()`)
	tb.wait(mainFrame, `window.__opened.length === 1`, "the link to be opened")
	opened := tb.must(mainFrame, `window.__opened[0]`).([]any)
	if opened[0] != demo.OpenLinkURL || opened[1] != "_blank" || opened[2] != "noopener,noreferrer" {
		t.Errorf("window.open%v, want (%s, _blank, noopener,noreferrer)", opened, demo.OpenLinkURL)
	}

}

// The view page's chrome (its heading, the arguments, the Close the view
// button), in light, dark and forced colours, in a desktop window and a
// phone's, and in each of Teams' themes: axe-core finds nothing serious
// or critical on the page itself (the view in its frames is the server's
// own), nothing scrolls sideways, and the Close button wears Fluent's
// theme. The style variables the view is told are Fluent's of the theme.
func TestBrowserViewPageChromeAccessible(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `document.body.dataset.state === "ready"`, "the sales view")
	for _, w := range testenv.WindowSizes {
		for _, th := range testenv.Themes {
			tb.Emulate(w, th)
			what := "the view page, " + string(th) + ", " + w.Name
			tb.CheckAxe(what)
			tb.CheckNoSidewaysScroll(what)
		}
	}
	tb.Emulate(testenv.WindowSizes[0], testenv.Light)
	for _, c := range []struct{ theme, bg string }{{"", "rgb(255, 255, 255)"}, {"dark", "rgb(41, 41, 41)"}, {"contrast", "rgb(0, 0, 0)"}, {"default", "rgb(255, 255, 255)"}} {
		tb.must(mainFrame, `(() => { const r = document.documentElement; `+js(c.theme)+` ? r.setAttribute("data-theme", `+js(c.theme)+`) : r.removeAttribute("data-theme"); return true; })()`)
		what := "the view page in Teams' theme " + c.theme
		if c.theme != "" {
			tb.CheckAxe(what)
		}
		if bg := tb.str(mainFrame, `getComputedStyle(document.getElementById("close")).backgroundColor`); bg != c.bg {
			t.Errorf("%s: the Close button is %s, want %s", what, bg, c.bg)
		}
		if got := tb.str(mainFrame, `getComputedStyle(document.documentElement).getPropertyValue("--color-background-primary").trim()`); "rgb("+hexRGB(got)+")" != c.bg {
			t.Errorf("%s: the view is told --color-background-primary %q, want %s", what, got, c.bg)
		}
	}
}

// hexRGB writes #rrggbb as "r, g, b".
func hexRGB(hex string) string {
	var r, g, b int
	if _, err := fmt.Sscanf(hex, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return hex
	}
	return fmt.Sprintf("%d, %d, %d", r, g, b)
}
