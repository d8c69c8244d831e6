package viewpage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/internal/netaddr"
	"teamsbot/mcpapps"
	"teamsbot/viewpage"
)

// nodeTool returns the absolute path of a program in the project's
// node_modules/.bin, failing (or, under -short, skipping) when it or node
// is missing.
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	_, binErr := os.Stat(bin)
	_, nodeErr := exec.LookPath("node")
	if binErr != nil || nodeErr != nil {
		if testing.Short() {
			t.Skipf("node or %s missing (-short)", name)
		}
		t.Fatalf("this test needs node and %s in node_modules (npm ci in the repository root): node: %v, %s: %v", name, nodeErr, name, binErr)
	}
	return bin
}

// The view of the official @modelcontextprotocol/server-debug@2.0.3, run
// as a stdio subprocess of the agent, completes the handshake inside the
// page's two sandboxed frames, receives tool-input and tool-result, and its
// debug-log calls go through the page and the governed path to the server,
// which writes them to DEBUG_LOG_FILE; Close sends ui/resource-teardown,
// which reaches the view's onteardown. The frames come from the page's own
// origin here (no SandboxBaseURL), the default configuration, and the page
// is opened under another host name than the public base URL's
// (127.0.0.1 for localhost), as the local walk-through of docs/getting-started.md does.
func TestBrowserOfficialDebugServer(t *testing.T) {
	bin := nodeTool(t, "mcp-server-debug")
	logFile := filepath.Join(t.TempDir(), "debug-log.jsonl")
	e := newEnv(t, envOptions{
		sameOrigin: true,
		mutate: func(o *viewpage.Options) {
			o.PublicBaseURL = netaddr.MustParseOrigin(strings.Replace(o.PublicBaseURL.String(), "127.0.0.1", "localhost", 1))
		},
		servers: []agent.ServerConfig{{
			Name: "debug", Command: []string{bin, "--stdio"},
			Env: map[string]string{"DEBUG_LOG_FILE": logFile}, Timeout: "20s",
		}},
	})
	v := e.run(alice(), `/debug-tool {"contentType": "text"}`)
	if v.Server != "debug" {
		t.Fatalf("view of server %q", v.Server)
	}
	tb := newTab(t)
	tb.open(e, alice(), v.ID)

	events := func() []string {
		b, _ := os.ReadFile(logFile)
		var types []string
		for _, line := range bytes.Split(b, []byte("\n")) {
			var rec struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(line, &rec) == nil && rec.Type != "" {
				types = append(types, rec.Type)
			}
		}
		return types
	}
	want := []string{"connected", "ontoolinput", "ontoolresult"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := events()
		missing := ""
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(logFile)
			t.Fatalf("DEBUG_LOG_FILE lacks %q after the view loaded; it holds %q\n%s", missing, raw, tb.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The server wrote the events before the agent audited the calls:
	// wait for the records too.
	for {
		okCalls := 0
		for _, r := range e.callAudit(tenantA) {
			if r.Fields["tool"] == "debug-log" && r.Fields["result"] == "ok" {
				okCalls++
			}
		}
		if okCalls >= len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d audited debug-log calls, want at least %d", okCalls, len(want))
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Close: the page sends ui/resource-teardown and waits for the answer.
	// The SDK's onteardown of the debug view logs the event through its
	// debug-log tool before it answers, so the server writes it down.
	tb.must(mainFrame, `document.getElementById("close").click(); true`)
	for !slices.Contains(events(), "onteardown") {
		if time.Now().After(deadline) {
			t.Fatalf("DEBUG_LOG_FILE lacks onteardown after Close: %q\n%s", events(), tb.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.wait(mainFrame, `!document.getElementById("proxy") && document.getElementById("status").textContent.includes("closed")`, "the frames removed")
}

// extView bundles testdata/ext-apps-view/view.ts (which imports the
// official SDK, @modelcontextprotocol/ext-apps) with esbuild into one HTML
// document.
func extView(t *testing.T) string {
	t.Helper()
	esbuild := nodeTool(t, "esbuild")
	cmd := exec.Command(esbuild, "view.ts", "--bundle", "--format=iife", "--platform=browser", "--minify", "--log-level=warning")
	cmd.Dir = filepath.Join("testdata", "ext-apps-view")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	js, err := cmd.Output()
	if err != nil {
		t.Fatalf("esbuild: %v\n%s", err, stderr.String())
	}
	return "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>ext-apps view</title></head>\n<body>\n<script>" +
		string(js) + "</script>\n</body></html>\n"
}

const extViewURI = "ui://ext/view.html"

// extServer is a go-sdk MCP server with a tool whose view is the bundled
// SDK view, and an app-only tool the view calls.
func extServer(html string) func() *mcp.Server {
	return func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "ext", Version: "1.0.0"}, nil)
		type textArgs struct {
			Text string `json:"text"`
		}
		mcp.AddTool(srv, &mcp.Tool{Name: "ext_view", Meta: mcp.Meta{"ui": map[string]any{"resourceUri": extViewURI}}},
			func(_ context.Context, _ *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "view of " + in.Text}}}, nil, nil
			})
		mcp.AddTool(srv, &mcp.Tool{Name: "ext_echo", Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}},
			func(_ context.Context, _ *mcp.CallToolRequest, in textArgs) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
			})
		srv.AddResource(&mcp.Resource{URI: extViewURI, Name: "ext view", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: extViewURI, MIMEType: mcpapps.MIMEType, Text: html}}}, nil
			})
		return srv
	}
}

// A view built with the official SDK (@modelcontextprotocol/ext-apps,
// App from app-with-deps) connects, receives tool-input and tool-result,
// and calls a tool through the host.
func TestBrowserExtAppsSDKView(t *testing.T) {
	html := extView(t)
	e := newEnv(t, envOptions{
		servers:  []agent.ServerConfig{{Name: "ext", Builtin: "ext"}},
		builtins: map[string]func() *mcp.Server{"ext": extServer(html)},
	})
	v := e.run(alice(), `/ext_view {"text": "hello"}`)
	tb := newTab(t)
	tb.open(e, alice(), v.ID)

	tb.wait(viewFrame, `document.body.dataset.connected === "yes" || !!document.body.dataset.connectError`, "the SDK view to connect")
	if errText := tb.must(viewFrame, `document.body.dataset.connectError || ""`); errText != "" {
		t.Fatalf("App.connect failed: %v", errText)
	}
	tb.wait(viewFrame, `!!document.body.dataset.toolResult`, "tool-result in the SDK view")
	if got := tb.str(viewFrame, `document.body.dataset.toolInput`); got != `{"text":"hello"}` {
		t.Errorf("ontoolinput got %s", got)
	}
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(tb.str(viewFrame, `document.body.dataset.toolResult`)), &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "view of hello" {
		t.Errorf("ontoolresult got %+v (%v)", res, err)
	}
	if got := tb.str(viewFrame, `document.body.dataset.host`); !strings.Contains(got, `"name":"teamsbot"`) {
		t.Errorf("host version %s", got)
	}

	tb.must(viewFrame, `callEcho("from the view").then(() => true)`)
	if err := json.Unmarshal([]byte(tb.str(viewFrame, `document.body.dataset.callResult`)), &res); err != nil || len(res.Content) != 1 || res.Content[0].Text != "echo: from the view" {
		t.Errorf("callServerTool got %+v (%v)", res, err)
	}
}
