package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
	"teamsbot/internal/testenv"
	"teamsbot/mcpapps"
)

// The views are checked here against a minimal host written for this test:
// it frames the view as the service does (sandbox="allow-scripts", opaque
// origin, the CSP mcpapps builds as a header) and speaks the host side of
// the MCP Apps JSON-RPC conversation as specified in
// specification/2026-01-26/apps.mdx of modelcontextprotocol/ext-apps. Its
// tools/call goes to the real demo server through a real go-sdk client. The
// service's own host (viewpage) is tested in its package.

var hostPage = template.Must(template.New("host").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>test host</title></head>
<body>
<script id="cfg" type="application/json">{{.}}</script>
<script>
"use strict";
const cfg = JSON.parse(document.getElementById("cfg").textContent);
window.hostLog = [];
const frame = document.createElement("iframe");
frame.setAttribute("sandbox", cfg.sandbox);
frame.style.cssText = "width:640px;height:100px;border:0";
const send = (m) => frame.contentWindow.postMessage(m, "*");
window.hostSend = send;
window.addEventListener("message", async (ev) => {
  if (ev.source !== frame.contentWindow) return;
  const m = ev.data;
  window.hostLog.push(m);
  const reply = (result) => send({jsonrpc: "2.0", id: m.id, result});
  const fail = (code, message) => send({jsonrpc: "2.0", id: m.id, error: {code, message}});
  switch (m.method) {
  case "ui/initialize":
    reply({protocolVersion: "2026-01-26", hostInfo: {name: "test-host", version: "1.0.0"},
      hostCapabilities: {openLinks: {}, serverTools: {}},
      hostContext: {theme: cfg.theme, locale: "en-US", timeZone: cfg.timeZone, displayMode: "inline", platform: "web"}});
    break;
  case "ui/notifications/initialized":
    send({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: cfg.arguments}});
    send({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: cfg.result});
    break;
  case "ui/notifications/size-changed":
    frame.style.height = m.params.height + "px";
    break;
  case "tools/call": {
    const r = await fetch("/call", {method: "POST", body: JSON.stringify(m.params)});
    if (r.ok) reply(await r.json()); else fail(-32000, await r.text());
    break;
  }
  case "ui/message":
  case "ui/open-link":
    reply({});
    break;
  default:
    if (m.method !== undefined && m.id !== undefined) fail(-32601, "Method not found");
  }
});
document.body.appendChild(frame);
frame.src = cfg.view;
</script>
</body></html>`))

type hostConfig struct {
	View      string          `json:"view"`
	Sandbox   string          `json:"sandbox"`
	Theme     string          `json:"theme"`
	TimeZone  string          `json:"timeZone,omitempty"`
	Arguments map[string]any  `json:"arguments"`
	Result    json.RawMessage `json:"result"`
}

// testHost serves the host page, the views and the tools/call endpoint on
// loopback.
func testHost(t *testing.T, cs *mcp.ClientSession) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /view", func(w http.ResponseWriter, r *http.Request) {
		res, err := cs.ReadResource(r.Context(), &mcp.ReadResourceParams{URI: r.URL.Query().Get("uri")})
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		// The policy the service serves the view under: built by mcpapps
		// from what the resource declared.
		var listMeta mcp.Meta
		if list, err := cs.ListResources(r.Context(), nil); err == nil {
			for _, e := range list.Resources {
				if e.URI == res.Contents[0].URI {
					listMeta = e.Meta
				}
			}
		}
		ui, err := mcpapps.ReadResourceUI(res.Contents[0].Meta, listMeta)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Security-Policy", mcpapps.BuildCSP(ui.CSP).Header)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, res.Contents[0].Text)
	})
	mux.HandleFunc("GET /host", func(w http.ResponseWriter, r *http.Request) {
		var cfg hostConfig
		if err := json.Unmarshal([]byte(r.URL.Query().Get("cfg")), &cfg); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := json.Marshal(cfg)
		hostPage.Execute(w, template.JS(b))
	})
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var p mcp.CallToolParams
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := cs.CallTool(r.Context(), &p)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		json.NewEncoder(w).Encode(res)
	})
	l := testenv.Listen(t)
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// browser is a headless Chromium tab (testenv.Tab) that can run scripts
// inside the view's frame. Sandboxed frames stay in the page's process so
// one DevTools target sees them.
type browser struct {
	tab *testenv.Tab
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	return &browser{tab: testenv.NewTab(t, testenv.Chromium(t), nil)}
}

// exceptions are the uncaught exceptions of the pages so far.
func (b *browser) exceptions() []string {
	var ex []string
	for _, l := range b.tab.Log() {
		if rest, ok := strings.CutPrefix(l, "exception: "); ok {
			ex = append(ex, rest)
		}
	}
	return ex
}

// open loads the host page and returns a function that evaluates an
// expression inside the view's frame.
func (b *browser) open(t *testing.T, srv *httptest.Server, cfg hostConfig) func(expr string) any {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	u := srv.URL + "/host?cfg=" + url.QueryEscape(string(raw))
	if err := chromedp.Do(b.tab.Ctx, chromedp.Navigate(u)); err != nil {
		t.Fatalf("navigate: %v", err)
	}
	view := srv.URL + "/view?"
	b.waitFor(t, "the view's frame", func() bool {
		_, ok := b.tab.Frame(view)
		return ok
	})
	eval := func(expr string) any {
		t.Helper()
		v, err := b.tab.Eval(view, expr)
		if err != nil {
			t.Fatalf("evaluate %q in the view: %v", expr, err)
		}
		return v
	}
	b.waitFor(t, "the view's script context", func() bool {
		v, err := b.tab.Eval(view, `location.pathname`)
		return err == nil && v == "/view"
	})
	return eval
}

// host evaluates an expression in the host page.
func (b *browser) host(t *testing.T, expr string) any {
	t.Helper()
	v, err := b.tab.Eval("", expr)
	if err != nil {
		t.Fatalf("evaluate %q in the host: %v", expr, err)
	}
	return v
}

// waitFor polls cond until it holds; the deadline only stops a hung test.
func (b *browser) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func resultJSON(t *testing.T, res *mcp.CallToolResult) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestViewsInChromium runs each view in one headless Chromium, in a frame
// with an opaque origin, through its whole conversation with a host.
func TestViewsInChromium(t *testing.T) {
	b := newBrowser(t)
	t.Run("sales", func(t *testing.T) { testSalesView(t, b) })
	t.Run("sales text fallback", func(t *testing.T) { testSalesTextFallback(t, b) })
	t.Run("feedback", func(t *testing.T) { testFeedbackView(t, b) })
	if ex := b.exceptions(); len(ex) > 0 {
		t.Errorf("uncaught exceptions in the pages: %q", ex)
	}
}

func testSalesView(t *testing.T, b *browser) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	cs := connect(t, demo.Options{Now: func() time.Time { return now }})
	srv := testHost(t, cs)
	args := map[string]any{"region": "EMEA", "quarter": "2026-Q2"}
	first := call(t, cs, demo.ToolSalesReport, args)
	want := structured[demo.SalesReport](t, first)

	view := b.open(t, srv, hostConfig{
		View: "/view?uri=" + demo.SalesReportURI, Sandbox: "allow-scripts", Theme: "dark", TimeZone: "Asia/Tokyo",
		Arguments: args, Result: resultJSON(t, first),
	})
	state := func() any { return view(`document.body.dataset.state`) }
	b.waitFor(t, "the sales view to render", func() bool { return state() == "ready" })

	// The conversation as the host saw it: initialize first, with the
	// protocol version and app info, then initialized without params.
	log := b.host(t, `JSON.stringify(hostLog.slice(0, 2))`).(string)
	var msgs []struct {
		ID     any            `json:"id"`
		Method string         `json:"method"`
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal([]byte(log), &msgs); err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Method != "ui/initialize" || msgs[0].Params["protocolVersion"] != "2026-01-26" ||
		msgs[0].Params["appInfo"] == nil || msgs[0].Params["appCapabilities"] == nil ||
		msgs[1].Method != "ui/notifications/initialized" || msgs[1].ID != nil || msgs[1].Params != nil {
		t.Errorf("the view began with %s, want ui/initialize {protocolVersion, appInfo, appCapabilities} then ui/notifications/initialized", log)
	}

	// What a person sees: the figures of the result, in the host's theme.
	for expr, want := range map[string]any{
		`document.getElementById("total").dataset.value`:              fmt.Sprint(want.Total),
		`document.getElementById("total").textContent`:                "$" + groupDigits(want.Total),
		`document.getElementById("title").textContent`:                "Sales report · EMEA · 2026-Q2",
		`document.getElementById("top").textContent`:                  want.Top,
		`document.querySelectorAll("#chart rect.bar").length`:         float64(len(want.Lines)),
		`document.querySelector("#chart rect.bar").dataset.value`:     fmt.Sprint(want.Lines[0].Amount),
		`document.querySelector("#chart rect.bar title").textContent`: want.Lines[0].Product + ": $" + groupDigits(want.Lines[0].Amount),
		`document.body.dataset.source`:                                "structured",
		`document.documentElement.dataset.theme`:                      "dark",
		`document.getElementById("summary").textContent`:              text(first),
	} {
		if got := view(expr); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
	if desc := view(`document.getElementById("chart-desc").textContent`).(string); !strings.Contains(desc, want.Lines[0].Product) {
		t.Errorf("chart description %q does not name the products", desc)
	}
	// The host resized the frame to the height the view reported.
	b.waitFor(t, "size-changed", func() bool {
		return b.host(t, `hostLog.some(m => m.method === "ui/notifications/size-changed" && m.params.height > 200 && m.params.width > 0)`) == true
	})

	// A message from any window but the parent is ignored.
	// Messages from one window to another arrive in order, so once the
	// probe posted after the forged result has arrived, the view has seen both.
	view(`new Promise(resolve => {
		window.addEventListener("message", e => { if (e.data === "probe") resolve(true); });
		window.postMessage({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: {structuredContent: {region: "X", quarter: "X", currency: "USD", lines: [], total: 1, top: "X"}}}, "*");
		window.postMessage("probe", "*");
	})`)
	if got := view(`document.getElementById("total").dataset.value`); got != fmt.Sprint(want.Total) {
		t.Errorf("a message posted by the view's own window changed the total to %v", got)
	}

	// Refresh calls the app-only tool through the host and shows its figures.
	view(`document.getElementById("refresh").click(); true`)
	b.waitFor(t, "the refreshed figures", func() bool {
		return view(`document.body.dataset.revision`) == "1" && state() == "ready"
	})
	refreshed := structured[demo.SalesReport](t, call(t, cs, demo.ToolRefreshSales, map[string]any{"region": "EMEA", "quarter": "2026-Q2", "revision": 1}))
	if got := view(`document.getElementById("total").dataset.value`); got != fmt.Sprint(refreshed.Total) {
		t.Errorf("after Refresh the total is %v, want %d", got, refreshed.Total)
	}
	// The time of the figures, in the host's locale and time zone (10:00
	// UTC is 19:00 in Tokyo), and no revision tile.
	subtitle := func() string {
		return strings.ReplaceAll(view(`document.getElementById("subtitle").textContent`).(string), "\u202f", " ")
	}
	if got := subtitle(); got != "Refreshed Dec 2, 2026, 7:00 PM" {
		t.Errorf("the refreshed figures say %q, want Refreshed Dec 2, 2026, 7:00 PM", got)
	}
	if got := view(`document.querySelector("#subtitle time").getAttribute("datetime")`); got != refreshed.RefreshedAt {
		t.Errorf("the time element says %v, want %s", got, refreshed.RefreshedAt)
	}
	if got := view(`document.getElementById("revision") === null && !document.querySelector(".kpis").innerText.includes("Revision")`); got != true {
		t.Errorf("the view still shows a revision tile")
	}
	b.host(t, `hostSend({jsonrpc: "2.0", method: "ui/notifications/host-context-changed", params: {locale: "de-DE"}}); true`)
	b.waitFor(t, "the time in German", func() bool { return subtitle() == "Refreshed 02.12.2026, 19:00" })

	callLog := b.host(t, `JSON.stringify(hostLog.find(m => m.method === "tools/call").params)`).(string)
	if callLog != `{"name":"refresh_sales","arguments":{"revision":1,"region":"EMEA","quarter":"2026-Q2"}}` {
		t.Errorf("tools/call params = %s", callLog)
	}

	// Requests the view does not know get -32601; teardown is answered.
	b.host(t, `hostSend({jsonrpc: "2.0", id: "u1", method: "ui/unknown", params: {}}); hostSend({jsonrpc: "2.0", id: "t1", method: "ui/resource-teardown", params: {}}); true`)
	b.waitFor(t, "the teardown answer", func() bool {
		return b.host(t, `hostLog.some(m => m.id === "t1" && m.result && !m.error)`) == true
	})
	if got := b.host(t, `hostLog.find(m => m.id === "u1").error.code`); got != float64(-32601) {
		t.Errorf("unknown request answered with code %v, want -32601", got)
	}
	if state() != "closed" {
		t.Errorf("after teardown the state is %v, want closed", state())
	}
}

func testSalesTextFallback(t *testing.T, b *browser) {
	cs := connect(t, demo.Options{})
	srv := testHost(t, cs)
	plain := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Sales are up."}}}
	view := b.open(t, srv, hostConfig{
		View: "/view?uri=" + demo.SalesReportURI, Sandbox: "allow-scripts", Theme: "light",
		Arguments: map[string]any{}, Result: resultJSON(t, plain),
	})
	b.waitFor(t, "the text result", func() bool { return view(`document.body.dataset.state`) == "ready" })
	for expr, want := range map[string]any{
		`document.body.dataset.source`:                    "text",
		`document.getElementById("summary").textContent`:  "Sales are up.",
		`document.querySelectorAll("#chart rect").length`: float64(0),
		`document.documentElement.dataset.theme`:          "light",
	} {
		if got := view(expr); got != want {
			t.Errorf("%s = %v, want %v", expr, got, want)
		}
	}
}

func testFeedbackView(t *testing.T, b *browser) {
	var mu sync.Mutex
	var got []demo.Feedback
	cs := connect(t, demo.Options{OnFeedback: func(_ context.Context, f demo.Feedback) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, f)
	}})
	srv := testHost(t, cs)
	args := map[string]any{"topic": "the sales chart"}
	form := call(t, cs, demo.ToolFeedbackForm, args)

	t.Run("with allow-forms", func(t *testing.T) {
		view := b.open(t, srv, hostConfig{
			View: "/view?uri=" + demo.FeedbackFormURI, Sandbox: "allow-scripts allow-forms", Theme: "light",
			Arguments: args, Result: resultJSON(t, form),
		})
		b.waitFor(t, "the form", func() bool { return view(`document.body.dataset.state`) == "ready" })
		if topic := view(`document.getElementById("topic").textContent`); topic != "the sales chart" {
			t.Errorf("topic %v", topic)
		}
		view(`document.getElementById("rating-4").click(); document.getElementById("comment").value = "Clear chart."; document.getElementById("submit").click(); true`)
		b.waitFor(t, "the answer", func() bool { return view(`document.body.dataset.state`) == "submitted" })
		if id := view(`document.getElementById("result").dataset.feedbackId`); id != "FB-0001" {
			t.Errorf("result id %v, want FB-0001", id)
		}
		if txt := view(`document.getElementById("result").textContent`).(string); !strings.Contains(txt, "4 out of 5") {
			t.Errorf("result text %q", txt)
		}
		mu.Lock()
		if len(got) != 1 || got[0].Rating != 4 || got[0].Comment != "Clear chart." || got[0].Topic != "the sales chart" {
			t.Errorf("the server received %+v", got)
		}
		mu.Unlock()

		view(`document.getElementById("thanks").click(); document.getElementById("open-link").click(); true`)
		b.waitFor(t, "ui/message and ui/open-link", func() bool {
			return b.host(t, `hostLog.some(m => m.method === "ui/open-link")`) == true
		})
		msg := b.host(t, `JSON.stringify(hostLog.find(m => m.method === "ui/message").params)`)
		if msg != `{"role":"user","content":[{"type":"text","text":"Thanks for the feedback form about the sales chart!"}]}` {
			t.Errorf("ui/message params %v", msg)
		}
		if link := b.host(t, `hostLog.find(m => m.method === "ui/open-link").params.url`); link != demo.OpenLinkURL {
			t.Errorf("ui/open-link url %v", link)
		}
	})

	// Without allow-forms the browser blocks the form's submission, which is
	// why the resource asks for the forms permission.
	t.Run("without allow-forms", func(t *testing.T) {
		view := b.open(t, srv, hostConfig{
			View: "/view?uri=" + demo.FeedbackFormURI, Sandbox: "allow-scripts", Theme: "light",
			Arguments: args, Result: resultJSON(t, form),
		})
		b.waitFor(t, "the form", func() bool { return view(`document.body.dataset.state`) == "ready" })
		// Messages from one window arrive in order: once the host has the
		// ui/message sent after the click, a tools/call would be there too.
		view(`document.getElementById("rating-5").click(); document.getElementById("submit").click(); document.getElementById("thanks").click(); true`)
		b.waitFor(t, "ui/message", func() bool { return b.host(t, `hostLog.some(m => m.method === "ui/message")`) == true })
		if b.host(t, `hostLog.some(m => m.method === "tools/call")`) != false {
			t.Errorf("the form was submitted in a frame without allow-forms")
		}
	})
}
