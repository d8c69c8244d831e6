package viewpage_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
)

// problems are the console lines of the tab that say a policy refused
// something: a CSP violation or a Permissions Policy violation, in any
// frame.
func (tb *tab) problems() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []string
	for _, l := range tb.log {
		low := strings.ToLower(l)
		if strings.Contains(low, "content security policy") || strings.Contains(low, "permissions policy") ||
			strings.Contains(low, "violates") || strings.Contains(low, "not allowed in this document") {
			out = append(out, l)
		}
	}
	return out
}

// noProblems fails the test when any frame's console reports a CSP or
// permission violation.
func (tb *tab) noProblems() {
	tb.t.Helper()
	if p := tb.problems(); len(p) > 0 {
		tb.t.Errorf("policy violations in the console:\n%s", strings.Join(p, "\n"))
	}
}

// officialServer is the stdio server config of an official MCP Apps
// example from npm.
func officialServer(t *testing.T, name, bin string, args ...string) agent.ServerConfig {
	return agent.ServerConfig{Name: name, Command: append([]string{nodeTool(t, bin), "--stdio"}, args...), Timeout: "30s"}
}

// onePagePDF writes a valid one-page PDF whose page shows text.
func onePagePDF(t *testing.T, dir, text string) string {
	t.Helper()
	content := fmt.Sprintf("BT /F1 24 Tf 72 700 Td (%s) Tj ET", text)
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content),
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	path := filepath.Join(dir, "check.pdf")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// handshakeDone waits until the page has answered the view's
// ui/initialize and sent tool-input and tool-result: the bridge clears the
// status line on ui/notifications/initialized.
func (tb *tab) handshakeDone() {
	tb.t.Helper()
	tb.wait(mainFrame, `document.getElementById("proxy") !== null && document.getElementById("status").textContent === ""`, "the view's handshake")
}

// settle lets a view run for a while in real time (Chromium's virtual time
// stalls the handshake).
func (tb *tab) settle(ms int) {
	tb.t.Helper()
	tb.must(mainFrame, fmt.Sprintf(`new Promise((r) => setTimeout(() => r(true), %d))`, ms))
}

// The official @modelcontextprotocol/server-threejs runs its tool's code
// with new Function and draws it with WebGL: under the view CSP's
// 'unsafe-eval' it completes the handshake and draws the default scene
// into its canvas, with no CSP or permission error in any frame.
func TestBrowserOfficialThreejs(t *testing.T) {
	e := newEnv(t, envOptions{sameOrigin: true, servers: []agent.ServerConfig{officialServer(t, "threejs", "mcp-threejs-server")}})
	v := e.run(alice(), "/threejs/show_threejs_scene {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.handshakeDone()
	// The default code of the tool's input makes a renderer on the view's
	// canvas and draws a scene on every animation frame.
	tb.wait(viewFrame, `(() => { const c = document.querySelector("canvas"); return !!c && c.width > 0 && c.height > 0; })()`, "the scene's canvas")
	tb.settle(1000)
	tb.mu.Lock()
	for _, l := range tb.log {
		if strings.Contains(l, "EvalError") || strings.Contains(l, "unsafe-eval") || strings.Contains(l, "Error creating WebGL context") {
			t.Errorf("the scene did not run: %s", l)
		}
	}
	tb.mu.Unlock()
	tb.noProblems()
}

// The official @modelcontextprotocol/server-pdf (a 4.3 MB single-file view,
// under the 8 MiB default limit) shows a local PDF given to the server on
// its command line: the view loads the file's bytes through its app-only
// tool read_pdf_bytes, renders it with PDF.js (its worker code comes as a
// data: URL) and shows the page's text. Its one request outside the
// specification's table, ui/update-model-context, gets -32601, which the
// view reports as an unhandled rejection and otherwise ignores.
func TestBrowserOfficialPDF(t *testing.T) {
	dir := t.TempDir()
	pdf := onePagePDF(t, dir, "Teamsbot PDF check")
	e := newEnv(t, envOptions{sameOrigin: true, servers: []agent.ServerConfig{officialServer(t, "pdf", "mcp-pdf-server", dir)}})
	v := e.run(alice(), `/pdf/display_pdf {"url": `+js(pdf)+`}`)
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.handshakeDone()
	tb.wait(viewFrame, `document.body.innerText.includes("Teamsbot PDF check") && document.body.innerText.includes("of 1")`, "the PDF's text in the view")
	calls := 0
	for _, r := range e.callAudit(tenantA) {
		if r.Fields["tool"] == "read_pdf_bytes" && r.Fields["result"] == "ok" {
			calls++
		}
	}
	if calls == 0 {
		t.Errorf("no audited read_pdf_bytes call")
	}
	tb.settle(500)
	tb.noProblems()
	tb.mu.Lock()
	refused := slices.ContainsFunc(tb.log, func(l string) bool { return strings.Contains(l, "method not found: ui/update-model-context") })
	tb.mu.Unlock()
	if !refused {
		t.Errorf("ui/update-model-context was not answered -32601")
	}
}

// The official @modelcontextprotocol/server-transcript asks for the
// microphone. Granted by the configuration file, both frames carry
// allow="microphone", ui/initialize says so, and the Permissions Policy
// lets the view ask, with no violation in any console; without the grant
// the policy refuses it, and the browser says so in the console. Either
// way Chromium gives no microphone to a document with an opaque origin
// (getUserMedia fails with "Invalid security origin"), and the product
// specification keeps every view in one (no allow-same-origin): so the view
// completes its handshake and shows its controls, and says the microphone
// was denied when Start is pressed.
func TestBrowserOfficialTranscript(t *testing.T) {
	for _, granted := range []bool{true, false} {
		t.Run(map[bool]string{true: "granted by config", false: "not granted"}[granted], func(t *testing.T) {
			srv := officialServer(t, "transcript", "mcp-transcript-server")
			if granted {
				srv.Permissions = []string{"microphone"}
			}
			e := newEnv(t, envOptions{sameOrigin: true, servers: []agent.ServerConfig{srv}})
			v := e.run(alice(), "/transcript/transcribe {}")
			if v.Granted.Microphone != granted || !v.Permissions.Microphone {
				t.Fatalf("asked %v, granted %v", v.Permissions.Names(), v.Granted.Names())
			}
			tb := newTab(t)
			tb.open(e, alice(), v.ID)
			tb.handshakeDone()
			tb.wait(viewFrame, `document.getElementById("start-btn") !== null`, "the view's Start button")

			wantAllow := map[bool]string{true: "microphone", false: ""}[granted]
			if got := tb.str(mainFrame, `document.getElementById("proxy").getAttribute("allow") || ""`); got != wantAllow {
				t.Errorf("proxy frame allow=%q, want %q", got, wantAllow)
			}
			if got := tb.str(proxyFrame, `document.getElementById("view").getAttribute("allow") || ""`); got != wantAllow {
				t.Errorf("view frame allow=%q, want %q", got, wantAllow)
			}
			policy := `(document.permissionsPolicy || document.featurePolicy).allowsFeature("microphone")`
			if got := tb.must(viewFrame, policy); got != granted {
				t.Errorf("the view's Permissions Policy allows the microphone: %v, want %v", got, granted)
			}
			// Chromium checks the opaque origin as well as the policy, and
			// answers both with the same error.
			got := tb.str(viewFrame, `navigator.mediaDevices.getUserMedia({audio: true}).then(() => "stream", (e) => e.name + ": " + e.message)`)
			if got != "SecurityError: Invalid security origin" {
				t.Errorf("getUserMedia in the view: %s, want the opaque origin refused", got)
			}
			tb.must(viewFrame, `document.getElementById("start-btn").click(); true`)
			tb.wait(viewFrame, `document.body.innerText.includes("Microphone access denied")`, "the view saying the microphone was denied")
			problems := tb.problems()
			if granted && len(problems) > 0 {
				t.Errorf("policy violations with the microphone granted:\n%s", strings.Join(problems, "\n"))
			}
			if !granted && !slices.ContainsFunc(problems, func(l string) bool { return strings.Contains(l, "microphone") }) {
				t.Errorf("no Permissions Policy violation for the microphone without the grant")
			}
		})
	}
}

// A view that asks for the camera, the microphone and the clipboard, of
// which the configuration file allows its server the microphone and the
// clipboard: both frames carry exactly those features in their allow
// attribute, the view's Permissions Policy allows them and not the
// camera, and ui/initialize lists exactly what was granted.
func TestBrowserPermissionsGrantedAndReported(t *testing.T) {
	e := newEnv(t, envOptions{
		servers:  []agent.ServerConfig{{Name: "asking", Builtin: "asking", Permissions: []string{"microphone", "clipboardWrite", "geolocation"}}},
		builtins: map[string]func() *mcp.Server{"asking": askingLabServer(t)},
	})
	v := e.run(alice(), "/asking/asking_view {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `typeof window.rpc === "function"`, "the lab view's script")
	const want = "microphone; clipboard-write"
	if got := tb.str(mainFrame, `document.getElementById("proxy").getAttribute("allow")`); got != want {
		t.Errorf("proxy frame allow=%q, want %q", got, want)
	}
	if got := tb.str(proxyFrame, `document.getElementById("view").getAttribute("allow")`); got != want {
		t.Errorf("view frame allow=%q, want %q", got, want)
	}
	got := asMap(t, tb.must(viewFrame, `(() => { const p = document.permissionsPolicy || document.featurePolicy;
		return {microphone: p.allowsFeature("microphone"), clipboard: p.allowsFeature("clipboard-write"), camera: p.allowsFeature("camera"), geolocation: p.allowsFeature("geolocation")}; })()`))
	if got["microphone"] != true || got["clipboard"] != true || got["camera"] != false || got["geolocation"] != false {
		t.Errorf("the view's Permissions Policy: %v", got)
	}
	init := asMap(t, tb.must(viewFrame, `rpc("ui/initialize", {appInfo: {name: "lab", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"})`))
	perms := asMap(t, asMap(t, asMap(t, asMap(t, init["result"])["hostCapabilities"])["sandbox"])["permissions"])
	keys := slices.Sorted(maps.Keys(perms))
	if !slices.Equal(keys, []string{"clipboardWrite", "microphone"}) {
		t.Errorf("ui/initialize says granted %v, want clipboardWrite and microphone", keys)
	}
	if sb := tb.str(mainFrame, `document.getElementById("proxy").getAttribute("sandbox")`); sb != "allow-scripts" {
		t.Errorf("sandbox %q: a permission must not widen the sandbox", sb)
	}
	tb.noProblems()
}

// Navigating away from the view page sends ui/resource-teardown from
// pagehide (and beforeunload), without waiting: here pagehide is fired by
// hand, and the request reaches the view through the proxy. In a real
// navigation the browser may take the frames before the view handles it:
// a page that is going cannot wait, so this is the best it can do.
func TestBrowserTeardownOnPagehide(t *testing.T) {
	e := newLabEnv(t)
	v := e.run(alice(), "/lab_view {}")
	tb := newTab(t)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `typeof window.rpc === "function"`, "the lab view's script")
	tb.must(viewFrame, `rpc("ui/initialize", {appInfo: {name: "lab", version: "1"}, appCapabilities: {}, protocolVersion: "2026-01-26"})`)
	tb.must(viewFrame, `notify("ui/notifications/initialized"); true`)
	tb.wait(viewFrame, `window.received.some(m => m && m.method === "ui/notifications/tool-result")`, "the tool's result")
	tb.must(viewFrame, `window.addEventListener("message", (e) => { if (e.data && e.data.method === "ui/resource-teardown") { console.log("teardown reached the view: " + e.data.params.reason); } }); true`)
	tb.must(mainFrame, `window.dispatchEvent(new Event("pagehide")); true`)
	tb.settle(300)
	tb.mu.Lock()
	reached := slices.ContainsFunc(tb.log, func(l string) bool { return strings.Contains(l, "teardown reached the view: the page was closed") })
	tb.mu.Unlock()
	if !reached {
		t.Errorf("ui/resource-teardown did not reach the view on pagehide")
	}
}
