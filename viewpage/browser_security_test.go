package viewpage_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"teamsbot/viewpage"
)

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// asMap decodes a value returned from the browser into a map.
func asMap(t *testing.T, v any) map[string]any {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%T %v is not an object", v, v)
	}
	return m
}

// errorCode returns the JSON-RPC error code of an answer, or 0.
func errorCode(v any) float64 {
	m, _ := v.(map[string]any)
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// The host bridge, driven from inside a view's own frame in Chromium: the
// conversation of the MCP Apps specification as the product specification
// narrows it, and each security rule of the page, the proxy and the frames.
func TestBrowserBridge(t *testing.T) {
	e := newLabEnv(t)
	v := e.run(alice(), "/lab_view {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `typeof window.rpc === "function"`, "the lab view's script")
	rpc := func(method string, params any) any {
		t.Helper()
		p, _ := json.Marshal(params)
		return tb.must(viewFrame, fmt.Sprintf(`rpc(%s, %s)`, js(method), p))
	}
	notify := func(method string, params any) {
		t.Helper()
		p, _ := json.Marshal(params)
		tb.must(viewFrame, fmt.Sprintf(`notify(%s, %s); true`, js(method), p))
	}
	received := func() []any {
		t.Helper()
		v, _ := tb.must(viewFrame, `window.received`).([]any)
		return v
	}
	methods := func() []string {
		var out []string
		for _, m := range received() {
			if mm, ok := m.(map[string]any); ok {
				if s, ok := mm["method"].(string); ok {
					out = append(out, s)
				}
			}
		}
		return out
	}

	// "Nothing goes to the view before it [initialized]."
	t.Run("nothing before initialized", func(t *testing.T) {
		if _, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}}); err != nil {
			t.Fatalf("emulate a light scheme: %v", err)
		}
		if got := errorCode(rpc("ping", nil)); got != -32601 {
			t.Fatalf("ping answered with code %v, want -32601", got)
		}
		init := asMap(t, tb.must(viewFrame, `rpc("ui/initialize", {appInfo: {name: "lab", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"}, "init-1")`))
		if init["id"] != "init-1" {
			t.Errorf("initialize answered with id %#v, want the string \"init-1\"", init["id"])
		}
		res := asMap(t, init["result"])
		if res["protocolVersion"] != "2026-01-26" {
			t.Errorf("protocolVersion %v", res["protocolVersion"])
		}
		hi := asMap(t, res["hostInfo"])
		if hi["name"] != viewpage.HostName || hi["version"] == "" || hi["version"] == nil {
			t.Errorf("hostInfo %v", hi)
		}
		caps := asMap(t, res["hostCapabilities"])
		perms := asMap(t, asMap(t, caps["sandbox"])["permissions"])
		if len(perms) != 0 {
			t.Errorf("sandbox permissions %v, want none granted", perms)
		}
		for _, k := range []string{"openLinks", "serverTools", "message"} {
			if _, ok := caps[k]; !ok {
				t.Errorf("hostCapabilities lacks %s: %v", k, caps)
			}
		}
		hc := asMap(t, res["hostContext"])
		if hc["theme"] != "light" {
			t.Errorf("theme %v under a light scheme", hc["theme"])
		}
		if hc["displayMode"] != "inline" || hc["platform"] != "web" || hc["locale"] == "" || hc["timeZone"] == "" {
			t.Errorf("hostContext %v", hc)
		}
		if dims := asMap(t, hc["containerDimensions"]); dims["maxHeight"] == nil {
			t.Errorf("containerDimensions %v", dims)
		}
		if vars := asMap(t, asMap(t, hc["styles"])["variables"]); vars["--color-background-primary"] == nil {
			t.Errorf("styles.variables %v", vars)
		}

		// A second initialize is answered again, its numeric id echoed as
		// a number. Its context follows the browser: the theme and the
		// style variables from prefers-color-scheme, the locale and the
		// time zone. (The first answer came under the default light scheme.)
		for _, c := range []struct {
			cmd  func() error
			what string
		}{
			{func() error {
				_, err := chromedp.Call(tb.ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
					Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
				return err
			}, "dark scheme"},
			{func() error {
				_, err := chromedp.Call(tb.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
				return err
			}, "time zone"},
		} {
			if err := c.cmd(); err != nil {
				t.Fatalf("emulate the %s: %v", c.what, err)
			}
		}
		again := asMap(t, tb.must(viewFrame, `rpc("ui/initialize", {appInfo: {name: "lab", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"}, 7)`))
		if again["id"] != float64(7) || again["result"] == nil {
			t.Fatalf("second initialize: %v", again)
		}
		hc2 := asMap(t, asMap(t, again["result"])["hostContext"])
		if hc2["theme"] != "dark" || hc2["timeZone"] != "Asia/Tokyo" {
			t.Errorf("hostContext under a dark scheme in Tokyo: theme %v, timeZone %v", hc2["theme"], hc2["timeZone"])
		}
		if lang := tb.must(mainFrame, `navigator.language`); hc2["locale"] != lang {
			t.Errorf("hostContext locale %v, want the browser's %v", hc2["locale"], lang)
		}
		vars1 := asMap(t, asMap(t, hc["styles"])["variables"])
		vars2 := asMap(t, asMap(t, hc2["styles"])["variables"])
		if vars1["--color-background-primary"] == vars2["--color-background-primary"] {
			t.Errorf("style variables did not follow the dark scheme: %v", vars2)
		}
		rpc("ping", nil) // a round trip: anything queued has arrived
		if m := methods(); len(m) != 0 {
			t.Fatalf("the view got %v before it sent initialized", m)
		}

		notify("ui/notifications/initialized", nil)
		tb.wait(viewFrame, `window.received.filter(m => m.method === "ui/notifications/tool-result").length === 1`, "tool-result")
		if m := methods(); len(m) != 2 || m[0] != "ui/notifications/tool-input" || m[1] != "ui/notifications/tool-result" {
			t.Fatalf("after initialized the view got %v, want tool-input then tool-result", m)
		}
		var input, result map[string]any
		for _, m := range received() {
			mm, _ := m.(map[string]any)
			switch mm["method"] {
			case "ui/notifications/tool-input":
				input = asMap(t, mm["params"])
			case "ui/notifications/tool-result":
				result = asMap(t, mm["params"])
			}
		}
		if args, ok := input["arguments"].(map[string]any); !ok || len(args) != 0 {
			t.Errorf("tool-input arguments %#v, want {}", input["arguments"])
		}
		content, ok := result["content"].([]any)
		if !ok || len(content) != 1 || asMap(t, content[0])["text"] != "lab result" {
			t.Errorf("tool-result %v", result)
		}
	})

	// "Any other request gets -32601 (method not found)", at once.
	t.Run("other requests get -32601", func(t *testing.T) {
		for _, m := range []string{"ping", "resources/read", "ui/request-display-mode", "tools/list", "ui/update-model-context", "no/such-method"} {
			if got := errorCode(rpc(m, map[string]any{})); got != -32601 {
				t.Errorf("%s: code %v, want -32601", m, got)
			}
		}
	})

	// JSON-RPC garbage from the view gets no answer and breaks nothing:
	// the next request is answered as before.
	t.Run("garbage is ignored", func(t *testing.T) {
		before := len(received())
		tb.must(viewFrame, `[
			"ping", 42, null, true, [1, 2], {}, {jsonrpc: "1.0", id: 1, method: "ping"},
			{jsonrpc: "2.0", id: 2, method: 5}, {jsonrpc: "2.0", id: {}, method: "ping"},
			{jsonrpc: "2.0", id: null, method: "ping"}, {jsonrpc: "2.0", id: [3], method: "ui/initialize"},
			{jsonrpc: "2.0", id: 4, result: {}}, {jsonrpc: "2.0", id: 5, error: {code: 1, message: "x"}},
			{jsonrpc: "2.0", id: 6, method: "tools/call", params: "not an object"},
			{jsonrpc: "2.0", id: 7, method: "ui/notifications/sandbox-resource-ready", params: {url: "https://evil.example/", sandbox: "allow-scripts allow-same-origin"}}
		].forEach(m => window.parent.postMessage(m, "*")); true`)
		if got := errorCode(rpc("ping", nil)); got != -32601 {
			t.Fatalf("ping after garbage: code %v, want -32601", got)
		}
		var answers []any
		for _, m := range received()[before:] {
			if mm, _ := m.(map[string]any); mm != nil && mm["id"] != nil {
				if id, _ := mm["id"].(string); !strings.HasPrefix(id, "lab-") {
					answers = append(answers, mm)
				}
			}
		}
		// Only the request with a proper id and a bad tools/call (id 6,
		// answered with invalid params) and the proxy-only method (id 7,
		// which the proxy drops) are requests at all.
		if len(answers) != 1 || asMap(t, answers[0])["id"] != float64(6) || errorCode(answers[0]) != -32602 {
			t.Errorf("answers to garbage: %v, want only id 6 with -32602", answers)
		}
		if n := tb.must(proxyFrame, `document.querySelectorAll("iframe").length`); n != float64(1) {
			t.Errorf("the proxy has %v frames after a forged resource-ready, want 1", n)
		}
	})

	t.Run("notifications get no answer", func(t *testing.T) {
		before := len(received())
		notify("ui/notifications/no-such-thing", map[string]any{})
		notify("notifications/message", map[string]any{"level": "info", "data": "hello"})
		notify("ui/notifications/request-teardown", nil)
		rpc("ping", nil)
		if got := len(received()) - before; got != 1 {
			t.Errorf("%d messages came back, want only the ping's answer: %v", got, received()[before:])
		}
	})

	// "Runs a tool from the same server, but only one whose visibility
	// includes "app"." The model-only tool is refused and audited.
	t.Run("tools/call", func(t *testing.T) {
		ok := asMap(t, rpc("tools/call", map[string]any{"name": "lab_app", "arguments": map[string]any{}}))
		content, _ := asMap(t, ok["result"])["content"].([]any)
		if len(content) != 1 || asMap(t, content[0])["text"] != "app ok" {
			t.Errorf("lab_app answered %v", ok)
		}
		bad := rpc("tools/call", map[string]any{"name": "lab_model", "arguments": map[string]any{}})
		if errorCode(bad) == 0 {
			t.Errorf("lab_model answered %v, want a JSON-RPC error", bad)
		}
		refused := false
		for _, r := range e.callAudit(tenantA) {
			if r.Fields["tool"] == "lab_model" && r.Fields["result"] == "refused" {
				refused = true
			}
		}
		if !refused {
			t.Errorf("no refused audit record for lab_model: %+v", e.callAudit(tenantA))
		}
	})

	// "Opens https:// links in a new tab. Other links are refused."
	t.Run("open-link", func(t *testing.T) {
		tb.must(mainFrame, `window.__opened = []; window.open = function (u, t, f) { window.__opened.push([u, t, f]); return null; }; true`)
		refused := []any{
			"http://example.com/", "javascript:alert(1)", "data:text/html,hi", "not a url",
			" javascript:alert(1)", "\tjavascript:alert(1)", "java\nscript:alert(1)", "JaVaScRiPt:alert(1)",
			"vbscript:msgbox(1)", "file:///etc/passwd", "ftp://example.com/", "blob:https://example.com/0",
			"//example.com/", "/relative", "https//example.com", "", 42, nil, map[string]any{"href": "https://example.com/"},
		}
		for _, u := range refused {
			if got := errorCode(rpc("ui/open-link", map[string]any{"url": u})); got == 0 {
				t.Errorf("open-link %q was not refused", u)
			}
		}
		// What the URL parser reads as https opens, as the URL it reads:
		// never anything else.
		opens := map[string]string{
			"https://example.com/docs":   "https://example.com/docs",
			"HTTPS://example.com/upper":  "https://example.com/upper",
			" https://example.com/space": "https://example.com/space",
			"https:/\\example.com/bs":    "https://example.com/bs",
			"https://example.com/\nnl":   "https://example.com/nl",
		}
		var want []string
		for in, out := range opens {
			if r := asMap(t, rpc("ui/open-link", map[string]any{"url": in})); r["result"] == nil {
				t.Errorf("open-link %q: %v", in, r)
			}
			want = append(want, out)
		}
		opened := tb.must(mainFrame, `window.__opened`).([]any)
		if len(opened) != len(want) {
			t.Fatalf("window.open called %d times, want %d: %v", len(opened), len(want), opened)
		}
		for _, o := range opened {
			o := o.([]any)
			if u, _ := o[0].(string); !slices.Contains(want, u) || o[1] != "_blank" || o[2] != "noopener,noreferrer" {
				t.Errorf("window.open%v", o)
			}
		}
	})

	// "Hands the message to the page. It is never sent to the model." As
	// text, never as HTML.
	t.Run("ui/message shown as text", func(t *testing.T) {
		text := `<img src=x onerror="window.__pwned=1"><b>bold</b> & more`
		r := asMap(t, rpc("ui/message", map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}))
		if r["result"] == nil {
			t.Fatalf("ui/message: %v", r)
		}
		if got := tb.str(mainFrame, `document.querySelector("#message-list li:last-child").textContent`); got != text {
			t.Errorf("message shown as %q", got)
		}
		if n := tb.must(mainFrame, `document.querySelectorAll("#message-list img, #message-list b").length`); n != float64(0) {
			t.Errorf("the message made %v elements", n)
		}
		// And the page's CSP would stop a future script that tried.
		if got := tb.str(mainFrame, `(() => { try { document.createElement("div").innerHTML = "<b>x</b>"; return "written"; } catch (e) { return "refused: " + e.name; } })()`); got != "refused: TypeError" {
			t.Errorf("innerHTML on the page: %s, want refused by Trusted Types", got)
		}
		// A view that talks without end cannot grow the page without
		// bound: the latest 50 messages stay, each cut to 4000 characters.
		tb.must(viewFrame, `for (let i = 0; i < 120; i++) { window.parent.postMessage({jsonrpc: "2.0", id: "flood-" + i, method: "ui/message", params: {role: "user", content: [{type: "text", text: "flood " + i + " " + "x".repeat(100000)}]}}, "*"); } true`)
		rpc("ping", nil)
		if n := tb.must(mainFrame, `document.querySelectorAll("#message-list li").length`); n != float64(50) {
			t.Errorf("%v messages on the page after a flood, want the latest 50", n)
		}
		if got := tb.str(mainFrame, `document.querySelector("#message-list li:last-child").textContent.slice(0, 10)`); got != "flood 119 " {
			t.Errorf("the last message shown starts %q, want the latest", got)
		}
		if n := tb.must(mainFrame, `Math.max(...Array.from(document.querySelectorAll("#message-list li"), li => li.textContent.length))`); n != float64(4001) {
			t.Errorf("the longest message shown has %v characters, want 4000 and an ellipsis", n)
		}
	})

	// "Resizes the frame, within limits."
	t.Run("size-changed", func(t *testing.T) {
		height := func() string { return tb.str(mainFrame, `document.getElementById("proxy").style.height`) }
		notify("ui/notifications/size-changed", map[string]any{"width": 321, "height": 500})
		tb.wait(mainFrame, `document.getElementById("proxy").style.height === "500px"`, "the frame to be 500px high")
		for _, bad := range []string{`NaN`, `Infinity`, `-Infinity`, `-1`, `"700"`, `null`} {
			tb.must(viewFrame, `notify("ui/notifications/size-changed", {height: `+bad+`}); true`)
		}
		rpc("ping", nil)
		if h := height(); h != "500px" {
			t.Errorf("after bad sizes the height is %q, want 500px", h)
		}
		notify("ui/notifications/size-changed", map[string]any{"height": 1e9})
		tb.wait(mainFrame, `document.getElementById("proxy").style.height === "3000px"`, "the height to be clamped to 3000px")
		notify("ui/notifications/size-changed", map[string]any{"height": 1})
		tb.wait(mainFrame, `document.getElementById("proxy").style.height === "60px"`, "the height to be clamped to 60px")
		if w := tb.str(mainFrame, `document.getElementById("proxy").style.width`); w != "" {
			t.Errorf("the view pinned the frame's width to %q", w)
		}
	})

	// "Liyagent trusts a message by the window it came from": a message
	// the view posts straight to window.top has the wrong source.
	t.Run("messages to window.top are ignored", func(t *testing.T) {
		calls := len(e.callAudit(tenantA))
		shown := tb.must(mainFrame, `document.querySelectorAll("#message-list li").length`)
		opened := tb.must(mainFrame, `if (!window.__opened) { window.__opened = []; window.open = function (u, t, f) { window.__opened.push([u, t, f]); return null; }; } window.__opened.length`)
		// Record every fetch the page starts, at the moment it starts it,
		// so that a tools/call the page forwarded is seen even before it
		// reaches the server.
		tb.must(mainFrame, `window.__fetched = []; window.__realFetch = window.__realFetch || window.fetch;
			window.fetch = function (u, o) { window.__fetched.push(String(u)); return window.__realFetch.apply(this, arguments); }; true`)
		tb.must(viewFrame, `notify("ui/message", undefined, window.top); true`)
		tb.must(viewFrame, `window.top.postMessage({jsonrpc: "2.0", id: "top-1", method: "ui/message", params: {role: "user", content: [{type: "text", text: "via top"}]}}, "*");
			window.top.postMessage({jsonrpc: "2.0", id: "top-2", method: "tools/call", params: {name: "lab_app", arguments: {}}}, "*");
			window.top.postMessage({jsonrpc: "2.0", id: "top-3", method: "ui/open-link", params: {url: "https://example.com/top"}}, "*"); true`)
		rpc("ping", nil)
		rpc("ping", nil)
		if got := tb.must(mainFrame, `document.querySelectorAll("#message-list li").length`); got != shown {
			t.Errorf("a message posted to window.top was shown")
		}
		if got := tb.must(mainFrame, `window.__opened.length`); got != opened {
			t.Errorf("a link posted to window.top was opened")
		}
		if got := tb.must(mainFrame, `window.__fetched`).([]any); len(got) != 0 {
			t.Errorf("a tools/call posted to window.top made the page fetch %v", got)
		}
		if got := len(e.callAudit(tenantA)); got != calls {
			t.Errorf("a tools/call posted to window.top reached the agent")
		}
		for _, m := range received() {
			if mm, _ := m.(map[string]any); mm != nil {
				if id, _ := mm["id"].(string); strings.HasPrefix(id, "top-") {
					t.Errorf("answered a message posted to window.top: %v", mm)
				}
			}
		}
	})

	// The proxy relays only the view's own window: a frame inside the view
	// that posts to the proxy is dropped there.
	t.Run("the proxy relays only the view", func(t *testing.T) {
		shown := tb.must(mainFrame, `document.querySelectorAll("#message-list li").length`)
		ran := tb.must(viewFrame, `new Promise((resolve) => {
			window.addEventListener("message", (ev) => { if (ev.data === "grandchild ran") { resolve(true); } });
			const f = document.createElement("iframe");
			f.srcdoc = '<script>parent.parent.postMessage({jsonrpc: "2.0", id: "grandchild-1", method: "ui/message", params: {role: "user", content: [{type: "text", text: "from a grandchild"}]}}, "*"); parent.postMessage("grandchild ran", "*");<\/script>';
			document.body.appendChild(f);
			setTimeout(() => resolve(false), 5000);
		})`)
		if ran != true {
			t.Fatalf("the frame inside the view did not run its script (%v)", ran)
		}
		rpc("ping", nil)
		if got := tb.must(mainFrame, `document.querySelectorAll("#message-list li").length`); got != shown {
			t.Errorf("a message a frame inside the view posted to the proxy was shown")
		}
		tb.must(viewFrame, `document.querySelectorAll("iframe").forEach(f => f.remove()); true`)
	})

	// "Without allow-same-origin, the proxy has an opaque origin, so it has
	// no cookies, no storage and no access to the console." The same holds
	// for the view, which also cannot navigate the top window.
	t.Run("frames cannot reach the page", func(t *testing.T) {
		tb.must(mainFrame, `document.cookie = "probe=page-secret; path=/"; localStorage.setItem("probe", "page-secret"); true`)
		pageURL := tb.str(mainFrame, `location.href`)
		probe := `(() => {
			const out = {};
			const attempt = (k, f) => { try { out[k] = "read: " + String(f()); } catch (e) { out[k] = "refused: " + e.name; } };
			attempt("origin", () => { if (self.origin !== "null") { throw { name: "not opaque: " + self.origin }; } return "null"; });
			attempt("cookie", () => document.cookie);
			attempt("localStorage", () => localStorage.getItem("probe"));
			attempt("sessionStorage", () => sessionStorage.getItem("probe"));
			attempt("topDocument", () => window.top.document.cookie);
			attempt("topStorage", () => window.top.localStorage.getItem("probe"));
			attempt("navigateTop", () => { window.top.location.href = "/signout"; return "no exception"; });
			return out;
		})()`
		for _, f := range []string{viewFrame, proxyFrame} {
			got := asMap(t, tb.must(f, probe))
			for k, v := range got {
				s := v.(string)
				if k == "origin" {
					if s != "read: null" {
						t.Errorf("%s origin: %s", f, s)
					}
					continue
				}
				if strings.Contains(s, "page-secret") || !strings.HasPrefix(s, "refused") {
					t.Errorf("%s %s: %s", f, k, s)
				}
			}
		}
		rpc("ping", nil)
		if got := tb.str(mainFrame, `location.href`); got != pageURL {
			t.Errorf("the top window navigated to %s", got)
		}
	})

	// "By default the view cannot connect, frame or load anything outside
	// itself": a fetch to our own API is blocked by the view's CSP.
	t.Run("disallowed fetch fails", func(t *testing.T) {
		got := tb.str(viewFrame, `fetch(`+js(e.base+"/api/mcp-apps/"+v.ID)+`).then(() => "fetched", (err) => "failed: " + err.name)`)
		if !strings.HasPrefix(got, "failed") {
			t.Fatalf("fetch from the view: %s", got)
		}
		tb.wait(viewFrame, `window.violations.some(v => v.startsWith("connect-src"))`, "a connect-src violation")
		got = tb.str(viewFrame, `new Promise((resolve) => { const i = new Image(); i.onload = () => resolve("loaded"); i.onerror = () => resolve("blocked"); i.src = `+js(e.base+"/favicon.ico?x")+`; })`)
		if got != "blocked" {
			t.Errorf("image from outside the view: %s", got)
		}
		tb.wait(viewFrame, `window.violations.some(v => v.startsWith("img-src"))`, "an img-src violation")
	})

	// What the policy allows stays inside the document: a string evaluated
	// as script, a script, an image and a worker the view made itself as
	// blob: URLs all run, with no violation; reaching out still fails.
	t.Run("inside the document", func(t *testing.T) {
		before := len(tb.must(viewFrame, `window.violations`).([]any))
		got := asMap(t, tb.must(viewFrame, `(async () => {
			const out = {};
			out.eval = new Function("return 6 * 7")();
			const script = document.createElement("script");
			script.src = URL.createObjectURL(new Blob(["window.fromBlob = 'ran'"], {type: "text/javascript"}));
			await new Promise((resolve) => { script.onload = resolve; script.onerror = resolve; document.body.appendChild(script); });
			out.blobScript = window.fromBlob || "blocked";
			const svg = new Blob(['<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'], {type: "image/svg+xml"});
			out.blobImage = await new Promise((resolve) => { const i = new Image(); i.onload = () => resolve("loaded"); i.onerror = () => resolve("blocked"); i.src = URL.createObjectURL(svg); });
			const w = new Worker(URL.createObjectURL(new Blob(["postMessage(new Function('return 1 + 1')())"], {type: "text/javascript"})));
			out.worker = await new Promise((resolve) => { w.onmessage = (e) => resolve(e.data); w.onerror = () => resolve("blocked"); setTimeout(() => resolve("timeout"), 5000); });
			out.workerFetch = await new Promise((resolve) => {
				const f = new Worker(URL.createObjectURL(new Blob(["fetch(" + JSON.stringify(location.origin === "null" ? "`+e.base+`/healthz" : "/healthz") + ").then(() => postMessage('fetched'), () => postMessage('failed'))"], {type: "text/javascript"})));
				f.onmessage = (e) => resolve(e.data); f.onerror = () => resolve("blocked"); setTimeout(() => resolve("timeout"), 5000);
			});
			return out;
		})()`))
		want := map[string]any{"eval": float64(42), "blobScript": "ran", "blobImage": "loaded", "worker": float64(2), "workerFetch": "failed"}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %v, want %v", k, got[k], w)
			}
		}
		vs := tb.must(viewFrame, `window.violations`).([]any)
		for _, v := range vs[before:] {
			if !strings.HasPrefix(v.(string), "connect-src") {
				t.Errorf("violation inside the document: %v", v)
			}
		}
	})

	// The guard runs first and leaves the document as its server wrote
	// it: standards mode (the doctype still comes first), the <html>
	// element's own attributes, no script of ours left in the DOM; and
	// WebRTC refuses to start.
	t.Run("the guard", func(t *testing.T) {
		got := asMap(t, tb.must(viewFrame, `(() => {
			let rtc;
			try { new RTCPeerConnection(); rtc = "made"; } catch (e) { rtc = e.name; }
			return {mode: document.compatMode, lang: document.documentElement.lang,
				ours: Array.from(document.scripts).some((s) => s.textContent.includes("teamsbot/notifications/blocked")),
				first: document.head.firstElementChild.tagName, rtc: rtc};
		})()`))
		want := map[string]any{"mode": "CSS1Compat", "lang": "en", "ours": false, "first": "META", "rtc": "NotAllowedError"}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("%s: %v, want %v", k, got[k], w)
			}
		}
	})

	// The MCP Apps specification: the host sends ui/resource-teardown
	// before it removes a view, and waits for the answer. Close on the
	// view page does so; once the view answers, its frames are gone.
	t.Run("resource-teardown", func(t *testing.T) {
		tb.must(mainFrame, `document.getElementById("close").click(); true`)
		tb.wait(viewFrame, `window.received.some(m => m && m.method === "ui/resource-teardown")`, "ui/resource-teardown in the view")
		req := asMap(t, tb.must(viewFrame, `window.received.find(m => m && m.method === "ui/resource-teardown")`))
		if _, ok := req["id"].(string); !ok {
			t.Errorf("teardown request without an id: %v", req)
		}
		if reason, _ := asMap(t, req["params"])["reason"].(string); reason == "" {
			t.Errorf("teardown request without a reason: %v", req)
		}
		tb.must(viewFrame, `(() => {
			const m = window.received.find(m => m && m.method === "ui/resource-teardown");
			window.parent.postMessage({jsonrpc: "2.0", id: m.id, result: {}}, "*");
			return true;
		})()`)
		tb.wait(mainFrame, `!document.getElementById("proxy") && document.getElementById("status").textContent.includes("closed")`, "the frames removed after the answer")
	})
}

// How Chromium checks frame-ancestors for a document framed by the
// sandboxed proxy, worked out in the browser: the proxy's origin is opaque
// and matches no source expression, neither the page's origin nor the
// sandbox origin the proxy was loaded from. So a view document carrying
// frame-ancestors with our origins is blocked inside our own proxy, which
// is why view documents carry none (and the CSP sandbox directive instead).
func TestFrameAncestorsOfSandboxedProxy(t *testing.T) {
	e := newEnv(t, envOptions{})
	viewpage.SetViewAncestors(e.handler, []string{e.base, e.sandbox})
	v := e.run(alice(), "/sales_report {}")
	tb := newTab(t)
	e.oidc.QueueUser(alice())
	tb.navigate(e.base + "/mcp-apps/" + v.ID)
	tb.wait(mainFrame, `(() => { const f = document.getElementById("proxy"); return !!f; })()`, "the proxy frame")
	deadline := 0
	for ; deadline < 400; deadline++ {
		tb.mu.Lock()
		blocked := strings.Contains(strings.Join(tb.log, "\n"), "violates the following Content Security Policy directive: \"frame-ancestors "+e.base+" "+e.sandbox+"\"")
		tb.mu.Unlock()
		if blocked {
			break
		}
		tb.must(mainFrame, `new Promise(r => setTimeout(r, 25))`)
	}
	if deadline == 400 {
		t.Fatalf("Chromium did not block the view under frame-ancestors %s %s\n%s", e.base, e.sandbox, tb.dump())
	}
	if _, ok := tb.frame(viewFrame); ok {
		t.Errorf("the view document loaded although frame-ancestors named only real origins:\n%s", tb.dump())
	}
	if !strings.Contains(tb.dump(), `unreachable "`+e.sandbox+"/sandbox/views/") {
		t.Errorf("the view frame is not the blocked one:\n%s", tb.dump())
	}
}

// A frame inherits its parent's sandbox flags: allow-forms on the view's
// frame alone does not let a form be sent when the proxy frame lacks it.
// This is why the page gives the proxy frame the view's sandbox value.
func TestSandboxFlagsAreInherited(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/outer/{sandbox}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><iframe id="inner" sandbox="allow-scripts allow-forms" src="/form"></iframe>`)
	})
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><form id="f" action="/sent"><button id="b">send</button></form>
<script>window.submitted = false; document.getElementById("f").addEventListener("submit", (e) => { e.preventDefault(); window.submitted = true; });</script>`)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><iframe id="outer" sandbox="%s" src="/outer/x"></iframe>`, r.URL.Query().Get("sandbox"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	tb := newTab(t)
	for _, c := range []struct {
		outer string
		sent  bool
	}{{"allow-scripts", false}, {"allow-scripts allow-forms", true}} {
		tb.navigate(srv.URL + "/?sandbox=" + strings.ReplaceAll(c.outer, " ", "+"))
		tb.wait("/form", `document.readyState === "complete" && typeof window.submitted === "boolean"`, "the form")
		// click() runs the form submission, submit event included, before
		// it returns; a sandbox without allow-forms stops it before the
		// event. So the answer is known at once, without waiting.
		if got := tb.must("/form", `document.getElementById("b").click(); window.submitted`); got != c.sent {
			t.Errorf("outer sandbox %q: form submitted = %v, want %v", c.outer, got, c.sent)
		}
	}
}
