package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/agent"
	"teamsbot/mcpapps"
	"teamsbot/store"
)

// hostileServer is a real go-sdk server in memory whose answers a receiving
// middleware replaces with what a malicious MCP server could send. The
// service must stay bounded and keep working with its well-behaved parts.
func hostileServer(override func(ctx context.Context, method string, req mcp.Request) (mcp.Result, bool)) func() *mcp.Server {
	return func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1.0.0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "ok_tool", Description: "a well-behaved tool", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("fine"), nil
			})
		srv.AddTool(&mcp.Tool{Name: "view_tool", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": hostileViewURI}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("a view"), nil
			})
		srv.AddResource(&mcp.Resource{URI: hostileViewURI, Name: "view", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
					URI: hostileViewURI, MIMEType: mcpapps.MIMEType, Text: htmlPage("view"),
				}}}, nil
			})
		// A URI of a megabyte, a resource whose read fails with a megabyte
		// of error message, and a call that fails the same way.
		huge := strings.Repeat("\n\x1b[2Jhostile ", 1<<16)
		srv.AddTool(&mcp.Tool{Name: "huge_uri", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://" + strings.Repeat("u", 1<<20)}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("huge uri"), nil
			})
		srv.AddTool(&mcp.Tool{Name: "read_fails", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://evil/broken.html"}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("read fails"), nil
			})
		srv.AddResource(&mcp.Resource{URI: "ui://evil/broken.html", Name: "broken", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return nil, errors.New(huge)
			})
		srv.AddTool(&mcp.Tool{Name: "call_fails", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, errors.New(huge)
			})
		srv.AddTool(&mcp.Tool{Name: "huge_result", Title: "Huge\nresult " + strings.Repeat("t", 1<<16), InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": hostileViewURI}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("start " + strings.Repeat("r", mcpapps.DefaultMaxResourceBytes)), nil
			})
		srv.AddTool(&mcp.Tool{Name: "mute_view", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://evil/mute.html"}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return textResult("the answer"), nil
			})
		srv.AddResource(&mcp.Resource{URI: "ui://evil/mute.html", Name: "mute", MIMEType: mcpapps.MIMEType},
			func(ctx context.Context, _ *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				<-ctx.Done() // never answers; the client's cancellation ends it
				return nil, ctx.Err()
			})
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if res, ok := override(ctx, method, req); ok {
					return res, nil
				}
				return next(ctx, method, req)
			}
		})
		return srv
	}
}

const hostileViewURI = "ui://evil/view.html"

func hostileConfig() agent.Config {
	return oneAgent(agent.ServerConfig{Name: "evil", Builtin: "evil", Timeout: "20s"})
}

// checkNotes fails when the run notes are unbounded or carry control
// characters from the server.
func checkNotes(t *testing.T, notes []string) {
	t.Helper()
	if len(notes) > 30 {
		t.Errorf("%d run notes; a server must not be able to fill them", len(notes))
	}
	for _, n := range notes {
		if len(n) > 1100 || !utf8.ValidString(n) || strings.ContainsFunc(n, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Errorf("note of %d bytes, invalid UTF-8 or control characters: %.200q", len(n), n)
		}
	}
}

// A tools/list that pages forever, lists thousands of tools, names with
// control characters, '/', no name or a huge name, and the same name
// twice: the service reads a bounded list, offers only well-named tools
// once each, keeps the run notes short, and the good tool still works.
func TestHostileToolList(t *testing.T) {
	schema := map[string]any{"type": "object"}
	tools := hostileServer(func(_ context.Context, method string, req mcp.Request) (mcp.Result, bool) {
		if method != "tools/list" {
			return nil, false
		}
		page, _ := strconv.Atoi(req.GetParams().(*mcp.ListToolsParams).Cursor)
		res := &mcp.ListToolsResult{NextCursor: strconv.Itoa(page + 1)} // never ends
		if page == 0 {
			res.Tools = []*mcp.Tool{
				{Name: "ok_tool", Description: "a well-behaved tool", InputSchema: schema},
				{Name: "ok_tool", Description: "the same name again", InputSchema: schema},
				{Name: "bell\a\x1b[31mred", InputSchema: schema},
				{Name: "", InputSchema: schema},
				{Name: strings.Repeat("n", 5000), InputSchema: schema},
				{Name: "ok_tool/x", InputSchema: schema},
			}
			for i := range 50 {
				res.Tools = append(res.Tools, &mcp.Tool{Name: fmt.Sprintf("app_only_%d", i), InputSchema: schema,
					Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}})
			}
		}
		for i := range 300 {
			res.Tools = append(res.Tools, &mcp.Tool{Name: fmt.Sprintf("bulk_%d_%d", page, i), InputSchema: schema})
		}
		return res, true
	})
	s := newService(t, hostileConfig(), agent.Options{Store: openStore(t), AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": tools}})

	ans := run(t, s, "/tools")
	if n := strings.Count(ans.Text, "\n- evil/ok_tool"); n != 1 {
		t.Errorf("ok_tool listed %d times, want once; notes %q", n, ans.Notes)
	}
	if n := strings.Count(ans.Text, "\n- "); n > 1000 {
		t.Errorf("%d tools offered from one server", n)
	}
	if strings.ContainsAny(ans.Text, "\a\x1b") || strings.Contains(ans.Text, "nnnnnnnn") || strings.Contains(ans.Text, "ok_tool/x") {
		t.Errorf("a badly named tool is offered")
	}
	checkNotes(t, ans.Notes)
	for _, want := range []string{"more tools than", "twice", "is not offered: a tool name"} {
		if !hasNote(ans.Notes, want) {
			t.Errorf("no note says %q: %q", want, ans.Notes)
		}
	}
	if ans := run(t, s, "/ok_tool {}"); !strings.Contains(ans.Text, "fine") {
		t.Errorf("the good tool does not work: %q, notes %q", ans.Text, ans.Notes)
	}
}

// A resources/list that pages forever, each page full: the view is still
// made from resources/read, after a bounded read of the list.
func TestHostileResourceList(t *testing.T) {
	resources := hostileServer(func(_ context.Context, method string, req mcp.Request) (mcp.Result, bool) {
		if method != "resources/list" {
			return nil, false
		}
		page, _ := strconv.Atoi(req.GetParams().(*mcp.ListResourcesParams).Cursor)
		res := &mcp.ListResourcesResult{NextCursor: strconv.Itoa(page + 1)} // never ends
		for i := range 500 {
			uri := fmt.Sprintf("ui://evil/%d/%d.html", page, i)
			res.Resources = append(res.Resources, &mcp.Resource{URI: uri, Name: uri,
				Meta: mcp.Meta{"ui": map[string]any{"csp": map[string]any{"connectDomains": []string{"https://x.example.com"}}}}})
		}
		return res, true
	})
	s := newService(t, hostileConfig(), agent.Options{Store: openStore(t), AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": resources}})
	ans := run(t, s, "/view_tool {}")
	if len(ans.Views) != 1 {
		t.Errorf("views = %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	checkNotes(t, ans.Notes)
}

// What a server, the model or a view sends reaches the answer, the notes,
// the audit log and the metrics only in bounded form: a megabyte URI, a
// megabyte error message, a made-up tool name of 100 KB, and a view
// calling hundreds of made-up tools.
func TestHostileTextIsBounded(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	none := func(context.Context, string, mcp.Request) (mcp.Result, bool) { return nil, false }
	s := newService(t, hostileConfig(), agent.Options{Store: st, AppsEnabled: true, Registerer: reg,
		Builtins: map[string]func() *mcp.Server{"evil": hostileServer(none)}})

	long := strings.Repeat("x", 100<<10)
	for _, text := range []string{"/huge_uri {}", "/read_fails {}", "/call_fails {}", "/" + long + " {}", "/evil/" + long + " {}"} {
		ans := run(t, s, text)
		checkNotes(t, ans.Notes)
		for _, rf := range ans.Refusals {
			if d := problem(t, st, ans.RunID, rf.Ref).Detail; len(rf.ResourceURI) > 2100 || len(d) > 600 {
				t.Errorf("%.20s: refusal with a %d-byte URI and a %d-byte detail", text, len(rf.ResourceURI), len(d))
			}
		}
		for _, te := range ans.ToolErrors {
			if len(te.Tool) > 200 || len(te.Message) > 600 {
				t.Errorf("%.20s: tool error with a %d-byte tool and a %d-byte message", text, len(te.Tool), len(te.Message))
			}
		}
		if len(ans.Refusals)+len(ans.ToolErrors) != 1 {
			t.Errorf("%.20s: refusals %d, tool errors %d, want one of them", text, len(ans.Refusals), len(ans.ToolErrors))
		}
	}

	v := run(t, s, "/view_tool {}").Views[0]
	if _, err := s.CallFromView(context.Background(), v, alice, "call_fails", nil); err == nil || len(err.Error()) > 1024 {
		t.Errorf("a view's failing call: %d-byte error, want a short one", len(fmt.Sprint(err)))
	}
	for i := range 200 {
		name := fmt.Sprintf("made_up_%d_%s", i, strings.Repeat("y", 10<<10))
		if _, err := s.CallFromView(context.Background(), v, alice, name, nil); !errors.Is(err, agent.ErrToolNotAllowed) {
			t.Fatalf("a made-up tool: err = %v", err)
		} else if len(err.Error()) > 1024 {
			t.Fatalf("the refusal of a made-up tool is %d bytes long", len(err.Error()))
		}
	}

	recs, err := st.Audit(context.Background(), store.AuditQuery{TenantID: alice.TenantID})
	if err != nil || len(recs) < 200 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if b, _ := json.Marshal(r); len(b) > 4096 {
			t.Errorf("%s record is %d bytes: %.300s", r.Action, len(b), b)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if n := len(mf.GetMetric()); n > 20 {
			t.Errorf("metric %s has %d series: made-up names became labels", mf.GetName(), n)
		}
	}
}

// A view keeps its tool's arguments and result for 7 days and sends them to
// the browser: a result larger than the view limit makes no view (refused
// as "size", audited), the answer still stands, and a title of 64 KB is
// shown on one short line.
func TestHugeResultMakesNoView(t *testing.T) {
	st := openStore(t)
	none := func(context.Context, string, mcp.Request) (mcp.Result, bool) { return nil, false }
	s := newService(t, hostileConfig(), agent.Options{Store: st, AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": hostileServer(none)}})
	ans := run(t, s, "/huge_result {}")
	if len(ans.Views) != 0 || len(ans.Refusals) != 1 || ans.Refusals[0].Reason != mcpapps.ReasonSize {
		t.Fatalf("views %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	// The detail is for the operator, who finds it under the reference
	// the card shows.
	if d := problem(t, st, ans.RunID, ans.Refusals[0].Ref).Detail; !strings.Contains(d, strconv.Itoa(mcpapps.DefaultMaxResourceBytes)) || !strings.Contains(d, agent.MaxHTMLSetting) {
		t.Errorf("refusal %q does not name the limit and %s", d, agent.MaxHTMLSetting)
	}
	if !strings.Contains(ans.Text, "start rrrr") {
		t.Errorf("the answer does not stand: %.100q", ans.Text)
	}
	if recs := audit(t, st, agent.AuditRefused); len(recs) != 1 || field(recs[0], "reason") != mcpapps.ReasonSize {
		t.Errorf("refusal audit = %+v", recs)
	}
	checkNotes(t, ans.Notes)
	title, _, _ := strings.Cut(ans.Text, ":")
	if len(title) > 300 || strings.Contains(title, "\n") {
		t.Errorf("title as answered: %d bytes, %.60q", len(title), title)
	}
}

// A tool whose _meta.ui is malformed cannot say who may call it, so
// nobody may: it is not offered to the model (even when its list names
// "app" beside an unknown value), the model's call is refused, and the
// notes say why. With the extension off, _meta.ui means nothing and the
// tool is offered like any other.
func TestMalformedToolUIFailsClosed(t *testing.T) {
	newServer := func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "odd", Version: "1.0.0"}, nil)
		add := func(name string, ui any) {
			srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}, Meta: mcp.Meta{"ui": ui}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return textResult(name + " ran"), nil
				})
		}
		add("app_and_unknown", map[string]any{"visibility": []string{"app", "admin"}})
		add("visibility_string", map[string]any{"visibility": "app"})
		add("uri_number", map[string]any{"resourceUri": 7})
		add("plain", map[string]any{})
		return srv
	}
	malformed := []string{"app_and_unknown", "visibility_string", "uri_number"}
	for _, apps := range []bool{true, false} {
		st := openStore(t)
		s := newService(t, oneAgent(agent.ServerConfig{Name: "odd", Builtin: "odd"}), agent.Options{Store: st, AppsEnabled: apps,
			Builtins: map[string]func() *mcp.Server{"odd": newServer}})
		ans := run(t, s, "/tools")
		if !strings.Contains(ans.Text, "odd/plain") {
			t.Errorf("apps %v: plain tool not offered:\n%s", apps, ans.Text)
		}
		for _, name := range malformed {
			offered := strings.Contains(ans.Text, "odd/"+name)
			if offered == apps {
				t.Errorf("apps %v: %s offered = %v:\n%s", apps, name, offered, ans.Text)
			}
			if apps && !hasNote(ans.Notes, name, "not offered to the model", "malformed") {
				t.Errorf("no note says why %s is not offered: %q", name, ans.Notes)
			}
		}
		ans = run(t, s, "/app_and_unknown {}")
		if ran := strings.Contains(ans.Text, "app_and_unknown ran"); ran == apps {
			t.Errorf("apps %v: the model's call of app_and_unknown ran = %v: %q", apps, ran, ans.Text)
		}
	}
}

// A resource that never answers is given up after the server's timeout:
// the view is refused as a read error, and the answer stands.
func TestResourceThatNeverAnswers(t *testing.T) {
	st := openStore(t)
	none := func(context.Context, string, mcp.Request) (mcp.Result, bool) { return nil, false }
	cfg := oneAgent(agent.ServerConfig{Name: "evil", Builtin: "evil", Timeout: "1s"})
	s := newService(t, cfg, agent.Options{Store: st, AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": hostileServer(none)}})
	ans := run(t, s, "/mute_view {}")
	if len(ans.Views) != 0 || len(ans.Refusals) != 1 || ans.Refusals[0].Reason != mcpapps.ReasonRead {
		t.Fatalf("views %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	if !strings.Contains(ans.Text, "the answer") {
		t.Errorf("the answer does not stand: %q", ans.Text)
	}
	if recs := audit(t, st, agent.AuditRefused); len(recs) != 1 || field(recs[0], "reason") != mcpapps.ReasonRead {
		t.Errorf("refusal audit = %+v", recs)
	}
	// The server is still usable.
	if ans := run(t, s, "/view_tool {}"); len(ans.Views) != 1 {
		t.Errorf("after the mute resource: views %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
}

// What a view's tools/call returns goes to the browser whole: a result
// larger than the view limit comes back as an error result that names the
// limit and its setting, audited as an error, and a normal call still works.
func TestViewCallResultIsBounded(t *testing.T) {
	st := openStore(t)
	none := func(context.Context, string, mcp.Request) (mcp.Result, bool) { return nil, false }
	s := newService(t, hostileConfig(), agent.Options{Store: st, AppsEnabled: true,
		Builtins: map[string]func() *mcp.Server{"evil": hostileServer(none)}})
	ans := run(t, s, "/view_tool {}")
	if len(ans.Views) != 1 {
		t.Fatalf("views %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	v := ans.Views[0]
	res, err := s.CallFromView(context.Background(), v, alice, "huge_result", json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	if len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, strconv.Itoa(mcpapps.DefaultMaxResourceBytes)) || !strings.Contains(text, agent.MaxHTMLSetting) {
		t.Errorf("huge result for the view: isError %v, %.200q", res.IsError, text)
	}
	if res, err := s.CallFromView(context.Background(), v, alice, "ok_tool", json.RawMessage(`{}`)); err != nil || res.IsError {
		t.Errorf("ok_tool after the huge result: %v %+v", err, res)
	}
	recs := audit(t, st, agent.AuditAppCall)
	if len(recs) != 2 || field(recs[0], "result") != agent.ResultError || field(recs[1], "result") != agent.ResultOK {
		t.Errorf("agent.mcp_app.call records: %+v", recs)
	}
}
