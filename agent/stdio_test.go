package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/mcpapps"
)

// stdioServerEnv makes the test binary serve MCP on stdin/stdout instead of
// running tests: the stdio tests start it as a real subprocess.
const stdioServerEnv = "AGENT_TEST_STDIO_SERVER"

// spawnLogEnv names the file where a failing stdio child records that it
// was started.
const spawnLogEnv = "AGENT_TEST_SPAWN_LOG"

func TestMain(m *testing.M) {
	if os.Getenv(hugeEnv) == "1" {
		if err := serveHugeStdio(); err != nil {
			fmt.Fprintln(os.Stderr, "huge stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	switch os.Getenv(stdioServerEnv) {
	case "fail":
		// A server that cannot start: it leaves a line in the spawn log, so
		// a test counts how many children were started, and exits.
		if f, err := os.OpenFile(os.Getenv(spawnLogEnv), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
			fmt.Fprintln(f, os.Getpid())
			f.Close()
		}
		fmt.Fprintln(os.Stderr, "stdio server: cannot start")
		os.Exit(1)
	case "1":
		if err := serveStdio(); err != nil {
			fmt.Fprintln(os.Stderr, "stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func textResult(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func htmlPage(body string) string {
	return "<!doctype html><html><body>" + body + "</body></html>"
}

// serveStdio is a small MCP server with one tool per case a host must
// handle: a good view, a wrong MIME type, an oversized resource, a URI that
// is not ui://, the legacy _meta["ui/resourceUri"], a resource that changes
// (announced with notifications/resources/list_changed), and a crash.
func serveStdio() error {
	srv := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "1.0.0"}, nil)
	var (
		mu      sync.Mutex
		version = 1
		reads   = 0
	)
	tool := func(name string, meta mcp.Meta, h func() *mcp.CallToolResult) {
		srv.AddTool(&mcp.Tool{Name: name, Description: "test tool " + name, InputSchema: map[string]any{"type": "object"}, Meta: meta},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return h(), nil })
	}
	resource := func(uri, mime string, listMeta mcp.Meta, text func() string) {
		srv.AddResource(&mcp.Resource{URI: uri, Name: uri, MIMEType: mime, Meta: listMeta},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text()}}}, nil
			})
	}
	ui := func(uri string) mcp.Meta { return mcp.Meta{"ui": map[string]any{"resourceUri": uri}} }

	// good.html declares its CSP on the resources/list entry only.
	goodMeta := mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{"https://api.stdio.example"}}}}
	goodHTML := func() string {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return htmlPage(fmt.Sprintf("good view, version %d", version))
	}
	tool("good_view", ui("ui://stdio/good.html"), func() *mcp.CallToolResult { return textResult("good result") })
	resource("ui://stdio/good.html", mcpapps.MIMEType, goodMeta, goodHTML)

	tool("bad_mime", ui("ui://stdio/bad-mime.html"), func() *mcp.CallToolResult { return textResult("bad mime result") })
	resource("ui://stdio/bad-mime.html", "text/html", nil, func() string { return htmlPage("plain html") })

	tool("big_view", ui("ui://stdio/big.html"), func() *mcp.CallToolResult { return textResult("big result") })
	big := htmlPage(strings.Repeat("x", mcpapps.DefaultMaxResourceBytes+1))
	resource("ui://stdio/big.html", mcpapps.MIMEType, nil, func() string { return big })

	tool("missing_view", ui("ui://stdio/missing.html"), func() *mcp.CallToolResult { return textResult("missing result") })

	tool("two_items", ui("ui://stdio/two.html"), func() *mcp.CallToolResult { return textResult("two items result") })
	srv.AddResource(&mcp.Resource{URI: "ui://stdio/two.html", Name: "two", MIMEType: mcpapps.MIMEType},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			item := &mcp.ResourceContents{URI: "ui://stdio/two.html", MIMEType: mcpapps.MIMEType, Text: htmlPage("one")}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{item, item}}, nil
		})

	tool("not_ui", ui("https://stdio.example/view.html"), func() *mcp.CallToolResult { return textResult("not ui result") })

	tool("legacy_view", mcp.Meta{"ui/resourceUri": "ui://stdio/legacy.html"}, func() *mcp.CallToolResult { return textResult("legacy result") })
	resource("ui://stdio/legacy.html", mcpapps.MIMEType, nil, func() string { return htmlPage("legacy view") })

	tool("reads", nil, func() *mcp.CallToolResult {
		mu.Lock()
		defer mu.Unlock()
		return textResult(fmt.Sprintf("reads=%d", reads))
	})
	tool("bump", nil, func() *mcp.CallToolResult {
		mu.Lock()
		version++
		mu.Unlock()
		// Registering the resource again announces the change with
		// notifications/resources/list_changed.
		srv.RemoveResources("ui://stdio/good.html")
		resource("ui://stdio/good.html", mcpapps.MIMEType, goodMeta, goodHTML)
		return textResult("bumped")
	})
	tool("env", nil, func() *mcp.CallToolResult {
		return textResult(fmt.Sprintf("secret=%q path-set=%t", os.Getenv("TICKETIQ_BOT_APP_PASSWORD"), os.Getenv("PATH") != ""))
	})
	tool("pid", nil, func() *mcp.CallToolResult { return textResult(fmt.Sprint(os.Getpid())) })
	tool("crash", nil, func() *mcp.CallToolResult {
		os.Exit(3)
		return nil
	})
	tool("hang", nil, func() *mcp.CallToolResult {
		select {} // ignores cancellation: only the host's timeout ends the call
	})
	tool("garbage", nil, func() *mcp.CallToolResult {
		// Bytes that are not JSON-RPC, on the stream the client reads.
		os.Stdout.WriteString("\x00\xff not json {\"jsonrpc\":\"2.0\",\"id\":\n")
		select {}
	})
	return srv.Run(context.Background(), &mcp.StdioTransport{})
}

func stdioConfig() agent.ServerConfig {
	return agent.ServerConfig{
		Name:    "stdio",
		Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{stdioServerEnv: "1"},
		Timeout: "20s",
	}
}

// A view is made from a stdio server too, and the resource's _meta.ui may
// sit on its resources/list entry only.
func TestStdioViewUsesListEntryMeta(t *testing.T) {
	s := newService(t, oneAgent(stdioConfig()), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "/good_view {}")
	if len(ans.Views) != 1 {
		t.Fatalf("views = %d; refusals %+v notes %q", len(ans.Views), ans.Refusals, ans.Notes)
	}
	if csp := ans.Views[0].CSP; !strings.Contains(csp, "https://api.stdio.example") {
		t.Errorf("CSP %q lacks the origin declared on the resources/list entry", csp)
	}
	if ans.Text != "good_view:\ngood result" && !strings.Contains(ans.Text, "good result") {
		t.Errorf("answer = %q", ans.Text)
	}
	if err := s.Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
}

// A resource that is not a valid MCP App is refused and audited with the
// reason; the answer still stands.
func TestStdioBadResourcesAreRefusedAndAnswerStands(t *testing.T) {
	st := openStore(t)
	s := newService(t, oneAgent(stdioConfig()), agent.Options{Store: st, AppsEnabled: true})
	cases := []struct {
		tool, reason, uri, answer string
	}{
		{"bad_mime", mcpapps.ReasonMIME, "ui://stdio/bad-mime.html", "bad mime result"},
		{"big_view", mcpapps.ReasonSize, "ui://stdio/big.html", "big result"},
		{"not_ui", mcpapps.ReasonScheme, "https://stdio.example/view.html", "not ui result"},
		{"missing_view", mcpapps.ReasonRead, "ui://stdio/missing.html", "missing result"},
		{"two_items", mcpapps.ReasonContent, "ui://stdio/two.html", "two items result"},
	}
	for _, c := range cases {
		t.Run(c.tool, func(t *testing.T) {
			ans := run(t, s, "/"+c.tool+" {}")
			if len(ans.Views) != 0 {
				t.Errorf("a view was made")
			}
			if len(ans.Refusals) != 1 || ans.Refusals[0].Reason != c.reason || ans.Refusals[0].ResourceURI != c.uri {
				t.Fatalf("refusals = %+v, want one for %s", ans.Refusals, c.reason)
			}
			if !strings.Contains(ans.Text, c.answer) {
				t.Errorf("the answer does not stand: %q", ans.Text)
			}
		})
	}
	recs := audit(t, st, agent.AuditRefused)
	if len(recs) != len(cases) {
		t.Fatalf("agent.mcp_app.refused records = %d, want %d", len(recs), len(cases))
	}
	for i, r := range recs {
		if field(r, "reason") != cases[i].reason || field(r, "tool") != cases[i].tool || field(r, "server") != "stdio" ||
			field(r, "uri") != cases[i].uri || field(r, "why") == "" {
			t.Errorf("refusal record %d: %+v", i, r.Fields)
		}
	}
}

// A tool that names its view only in the deprecated _meta["ui/resourceUri"]
// still gets a view.
func TestStdioLegacyResourceURIMakesView(t *testing.T) {
	s := newService(t, oneAgent(stdioConfig()), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "/legacy_view {}")
	if len(ans.Views) != 1 || ans.Views[0].ResourceURI != "ui://stdio/legacy.html" {
		t.Fatalf("views = %+v refusals %+v", ans.Views, ans.Refusals)
	}
}

// The resource is read once and cached; notifications/resources/list_changed
// drops the cache, so the next view has the new HTML.
func TestStdioResourceCacheDroppedOnListChanged(t *testing.T) {
	s := newService(t, oneAgent(stdioConfig()), agent.Options{Store: openStore(t), AppsEnabled: true})
	first := run(t, s, "/good_view {}").Views[0].HTMLSHA256
	if again := run(t, s, "/good_view {}").Views[0].HTMLSHA256; again != first {
		t.Fatalf("the HTML changed without a notification")
	}
	if got := run(t, s, "/reads {}").Text; !strings.Contains(got, "reads=1") {
		t.Errorf("resources/read count after two views: %q, want 1 (cached)", got)
	}
	run(t, s, "/bump {}")
	// The notification comes after the bump's answer; wait for it by
	// looking, never by a fixed sleep.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if run(t, s, "/good_view {}").Views[0].HTMLSHA256 != first {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the view kept the old HTML: the cache was not dropped on resources/list_changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stdio child that dies is started again on next use, with a note, rather
// than failing forever.
func TestStdioCrashedServerIsReconnected(t *testing.T) {
	s := newService(t, oneAgent(stdioConfig()), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "/crash {}")
	if len(ans.ToolErrors) != 1 {
		t.Fatalf("crash: tool errors %+v, text %q", ans.ToolErrors, ans.Text)
	}
	ans = run(t, s, "/good_view {}")
	if len(ans.Views) != 1 {
		t.Fatalf("after the crash: views %d, tool errors %+v, notes %q", len(ans.Views), ans.ToolErrors, ans.Notes)
	}
	if !hasNote(ans.Notes, "stdio", "reconnected") {
		t.Errorf("notes do not say the server was reconnected: %q", ans.Notes)
	}
}

// A stdio child gets what a program needs to run and its configured env,
// never the service's secrets.
func TestStdioChildDoesNotInheritSecrets(t *testing.T) {
	env := map[string]string{"PATH": os.Getenv("PATH"), "TICKETIQ_BOT_APP_PASSWORD": "hunter2"}
	s := newService(t, oneAgent(stdioConfig()), agent.Options{AppsEnabled: true, Getenv: getenv(env)})
	if got := run(t, s, "/env {}").Text; !strings.Contains(got, `secret="" path-set=true`) {
		t.Errorf("the child's environment: %q", got)
	}
}
