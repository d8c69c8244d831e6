package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/agent/demo"
	"teamsbot/mcpapps"
)

// A tool that names a ui:// resource becomes a view; the view is served
// under a CSP built from the declared https origins only, and the dropped
// http: entry is in the audit log.
func TestViewFromDemoSalesReportHasStrictCSPAndIsAudited(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: st, AppsEnabled: true, Registerer: reg})

	ans := run(t, s, `/sales_report {}`)

	if len(ans.Views) != 1 {
		t.Fatalf("views = %d, want 1 (refusals %+v, notes %q)", len(ans.Views), ans.Refusals, ans.Notes)
	}
	v := ans.Views[0]
	if v.Server != "demo" || v.Tool != "sales_report" || v.ResourceURI != demo.SalesReportURI {
		t.Errorf("view names %s/%s %s", v.Server, v.Tool, v.ResourceURI)
	}
	if !strings.Contains(v.CSP, "https://api.example.com") {
		t.Errorf("CSP %q lacks the declared https connect origin", v.CSP)
	}
	if !strings.Contains(v.CSP, "https://cdn.example.com") {
		t.Errorf("CSP %q lacks the declared https resource origin", v.CSP)
	}
	if strings.Contains(v.CSP, "insecure.example.com") {
		t.Errorf("CSP %q contains the http: origin", v.CSP)
	}
	if len(v.CSPDropped) != 1 || v.CSPDropped[0].Value != "http://insecure.example.com" {
		t.Errorf("CSPDropped = %+v, want the http: entry", v.CSPDropped)
	}
	if len(v.ID) != 26 || strings.ContainsAny(v.ID, "+/=") {
		t.Errorf("view id %q is not a 10-character clock and 96 random bits, URL-safe", v.ID)
	}
	if v.UserID != alice.UserID || v.TenantID != alice.TenantID || v.AgentID != "default" || v.RunID != ans.RunID {
		t.Errorf("view owner fields: %+v", v)
	}
	// "A view is kept for 7 days."
	if got := v.ExpiresAt.Sub(v.CreatedAt); got != 7*24*time.Hour {
		t.Errorf("view lives %s, want 7 days", got)
	}
	if string(v.Arguments) != "{}" {
		t.Errorf("arguments = %s", v.Arguments)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(v.Result, &res); err != nil || res.StructuredContent == nil {
		t.Errorf("view result is not a CallToolResult with structured content: %v %s", err, v.Result)
	}

	// The model's text is the ordinary result, never HTML.
	if ans.Text == "" || strings.Contains(ans.Text, "<") {
		t.Errorf("answer text is empty or holds markup: %q", ans.Text)
	}
	if !strings.Contains(ans.Text, "Sales report") {
		t.Errorf("answer text does not speak of the report: %q", ans.Text)
	}

	// Stored: the view, its HTML, the run and the audit records.
	ctx := context.Background()
	got, err := st.View(ctx, v.ID)
	if err != nil {
		t.Fatalf("store.View: %v", err)
	}
	if got.CSP != v.CSP || got.HTMLSHA256 != v.HTMLSHA256 {
		t.Errorf("stored view differs: %+v", got)
	}
	html, err := st.ViewHTML(ctx, v.HTMLSHA256)
	if err != nil || !strings.Contains(string(html), "<html") {
		t.Errorf("stored HTML: %v, %d bytes", err, len(html))
	}
	runRec, err := st.GetRun(ctx, ans.RunID)
	if err != nil || len(runRec.ViewIDs) != 1 || runRec.ViewIDs[0] != v.ID {
		t.Errorf("stored run: %+v, %v", runRec, err)
	}
	recs := audit(t, st, agent.AuditView)
	if len(recs) != 1 {
		t.Fatalf("agent.mcp_app.view records = %d, want 1", len(recs))
	}
	r := recs[0]
	for k, want := range map[string]string{"server": "demo", "tool": "sales_report", "uri": demo.SalesReportURI, "sha256": v.HTMLSHA256, "csp": v.CSP} {
		if field(r, k) != want {
			t.Errorf("audit %s = %q, want %q", k, field(r, k), want)
		}
	}
	if d, _ := json.Marshal(r.Fields["cspDropped"]); !strings.Contains(string(d), "http://insecure.example.com") {
		t.Errorf("audit cspDropped = %s, want the http: entry", d)
	}
	if r.Actor != alice.UserID {
		t.Errorf("audit actor = %q", r.Actor)
	}
	if n := metricSum(t, reg, "teamsbot_agent_views_total"); n != 1 {
		t.Errorf("views metric = %v", n)
	}
}

// metricSum adds up every series of a counter.
func metricSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// A tool whose visibility lacks "model" is not offered to the model, and the
// run notes say which and why.
func TestAppOnlyToolsAreNotOfferedToTheModel(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "/tools")
	for _, hidden := range []string{"refresh_sales", "submit_feedback"} {
		if strings.Contains(ans.Text, hidden) {
			t.Errorf("/tools lists %s:\n%s", hidden, ans.Text)
		}
		if !hasNote(ans.Notes, hidden, "not offered to the model", `lacks "model"`) {
			t.Errorf("notes do not say why %s is left out: %q", hidden, ans.Notes)
		}
	}
	for _, offered := range []string{"demo/sales_report", "demo/lookup_customer", "demo/feedback_form", "demo/request_refund"} {
		if !strings.Contains(ans.Text, offered) {
			t.Errorf("/tools does not list %s:\n%s", offered, ans.Text)
		}
	}
	if len(ans.Views) != 0 {
		t.Errorf("/tools made views")
	}
}

// An explicit call of an app-only tool by the model is refused by the run,
// whatever the model asked.
func TestModelCallOfAppOnlyToolIsRefused(t *testing.T) {
	st := openStore(t)
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: st, AppsEnabled: true})
	ans := run(t, s, `/refresh_sales {"revision": 2}`)
	if len(ans.ToolErrors) != 1 || !strings.Contains(ans.ToolErrors[0].Message, "not offered to the model") {
		t.Fatalf("tool errors = %+v", ans.ToolErrors)
	}
	if len(ans.Views) != 0 {
		t.Errorf("a refused call made a view")
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultRefused {
		t.Errorf("audit = %+v, want one refused call", recs)
	}
}

// A model-only tool without a view works and makes no view; the builtin
// model fills its one required argument from the person's words.
func TestLookupCustomerMakesNoView(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	for _, text := range []string{`/lookup_customer {"customer": "Contoso"}`, `/demo/lookup_customer {"customer": "Contoso"}`, "look up customer Contoso"} {
		ans := run(t, s, text)
		if len(ans.Views) != 0 || len(ans.Refusals) != 0 {
			t.Errorf("%q: views %d refusals %d", text, len(ans.Views), len(ans.Refusals))
		}
		if !strings.Contains(ans.Text, "Contoso Ltd") || !strings.Contains(ans.Text, "Dana Whitfield") {
			t.Errorf("%q: answer = %q", text, ans.Text)
		}
	}
}

// questioner is a run's person who answers each question with reply, and
// keeps the questions.
type questioner struct {
	reply agent.Reply
	asked []agent.Question
}

func (q *questioner) Elicit(_ context.Context, qu agent.Question) (agent.Reply, error) {
	q.asked = append(q.asked, qu)
	return q.reply, nil
}

// The built-in server's request_refund asks the run's person during its
// call: the question names the tool and the form's fields in the order the
// server wrote them, and the answer reaches the tool, whose result is the
// run's answer; a run without a person is not asked, and its notes say so.
func TestRequestRefundAsksTheRunsPerson(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	q := &questioner{reply: agent.Reply{Action: "accept", Content: map[string]any{
		"amount": 42.5, "reason": "late", "refund_to": "credit", "notify": true, "confirm": true}}}
	ans, err := s.Run(context.Background(), agent.Request{Person: alice, Text: `/request_refund {"order": "B-7"}`, Elicit: q})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.asked) != 1 {
		t.Fatalf("asked %d questions, want 1 (notes %q)", len(q.asked), ans.Notes)
	}
	got := q.asked[0]
	if got.Server != "demo" || got.Tool != "request_refund" || got.Person.UserID != alice.UserID || got.Message != "Refund order B-7: which refund should I make?" {
		t.Errorf("the question: %s/%s for %s: %q", got.Server, got.Tool, got.Person.UserID, got.Message)
	}
	if names := strings.Join(got.Form.FieldNames(), ","); names != "amount,reason,details,refund_to,notify,confirm" {
		t.Errorf("the form's fields %s, want them in the server's order", names)
	}
	if !strings.Contains(ans.Text, "Refunded EUR 42.50 for order B-7 (Arrived late) to store credit.") || len(ans.ToolErrors) != 0 {
		t.Errorf("answer %q, tool errors %+v", ans.Text, ans.ToolErrors)
	}

	ans = run(t, s, "/request_refund {}")
	if !strings.Contains(ans.Text, "No refund was made for order A-1042: the person declined") {
		t.Errorf("a run without a person: %q", ans.Text)
	}
}

// A failed call (IsError) is a tool error for the answer, and its view is
// still made: MCP App views show error results themselves.
func TestFailedCallStillMakesView(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, `/sales_report {"region": "Mars"}`)
	if len(ans.ToolErrors) != 1 || len(ans.Views) != 1 {
		t.Fatalf("tool errors %+v, views %d", ans.ToolErrors, len(ans.Views))
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(ans.Views[0].Result, &res); err != nil || !res.IsError {
		t.Errorf("view result: %v %s", err, ans.Views[0].Result)
	}
	if !strings.Contains(ans.Text, "could not be used") {
		t.Errorf("answer = %q", ans.Text)
	}
}

// The builtin model picks a tool from the person's words.
func TestBuiltinModelPicksToolFromWords(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "Show me the sales report please")
	if len(ans.Views) != 1 || ans.Views[0].Tool != "sales_report" {
		t.Errorf("views = %+v, notes %q", ans.Views, ans.Notes)
	}
	ans = run(t, s, "qwertyuiop")
	if len(ans.Views) != 0 || !strings.Contains(ans.Text, "/tools") {
		t.Errorf("no-match answer = %q", ans.Text)
	}
}

// capsServer is a go-sdk server in memory whose sessions tell what the
// client advertised in initialize (or server/discover).
type capsServer struct {
	srv *mcp.Server
}

func (c *capsServer) new() *mcp.Server {
	c.srv = demo.New(demo.Options{})
	return c.srv
}

func (c *capsServer) advertised(t *testing.T) *mcp.ClientCapabilities {
	t.Helper()
	for ss := range c.srv.Sessions() {
		if p := ss.InitializeParams(); p != nil {
			return p.Capabilities
		}
	}
	t.Fatal("the server has no initialized session")
	return nil
}

// With the extension on, the client advertises it with the one MIME type.
func TestExtensionAdvertisedWhenAppsEnabled(t *testing.T) {
	var cs capsServer
	s := newService(t, oneAgent(agent.ServerConfig{Name: "demo", Builtin: "caps"}),
		agent.Options{Store: openStore(t), AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"caps": cs.new}})
	_ = s
	caps := cs.advertised(t)
	want := map[string]any{"mimeTypes": []any{mcpapps.MIMEType}}
	got, _ := json.Marshal(caps.Extensions[mcpapps.ExtensionID])
	var gotv any
	_ = json.Unmarshal(got, &gotv)
	if diff := cmp.Diff(want, gotv); diff != "" {
		t.Errorf("advertised extension (-want +got):\n%s", diff)
	}
}

// Turned off, the extension is not advertised, every tool is offered to the
// model (app-only ones too), and no view is made.
func TestAppsDisabledOffersEveryToolAndMakesNoView(t *testing.T) {
	var cs capsServer
	st := openStore(t)
	s := newService(t, oneAgent(agent.ServerConfig{Name: "demo", Builtin: "caps"}),
		agent.Options{Store: st, AppsEnabled: false, Builtins: map[string]func() *mcp.Server{"caps": cs.new}})
	if caps := cs.advertised(t); len(caps.Extensions) != 0 {
		t.Errorf("extensions advertised with apps off: %v", caps.Extensions)
	}
	ans := run(t, s, "/tools")
	for _, name := range []string{"sales_report", "refresh_sales", "lookup_customer", "feedback_form", "submit_feedback", "request_refund"} {
		if !strings.Contains(ans.Text, "demo/"+name) {
			t.Errorf("/tools with apps off lacks %s:\n%s", name, ans.Text)
		}
	}
	if hasNote(ans.Notes, "not offered") {
		t.Errorf("notes with apps off speak of hidden tools: %q", ans.Notes)
	}
	ans = run(t, s, "/sales_report {}")
	if len(ans.Views) != 0 || len(ans.Refusals) != 0 {
		t.Errorf("apps off: views %d refusals %d", len(ans.Views), len(ans.Refusals))
	}
	if !strings.Contains(ans.Text, "Sales report") {
		t.Errorf("apps off: answer = %q", ans.Text)
	}
	ans = run(t, s, `/refresh_sales {}`)
	if len(ans.ToolErrors) != 0 {
		t.Errorf("apps off: refresh_sales refused: %+v", ans.ToolErrors)
	}
	if recs := audit(t, st, agent.AuditView); len(recs) != 0 {
		t.Errorf("apps off: %d view audit records", len(recs))
	}
}

// metricValue is the value of one series of a counter.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// A resource that asks for the forms permission gets it on its view.
func TestFeedbackFormViewAsksForForms(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans := run(t, s, "/feedback_form {}")
	if len(ans.Views) != 1 || !ans.Views[0].Permissions.Forms {
		t.Errorf("views = %+v", ans.Views)
	}
}

// A view may call app tools of its own server; a model-only tool is refused
// with ErrToolNotAllowed and audited.
func TestCallFromViewOnDemo(t *testing.T) {
	st := openStore(t)
	reg := prometheus.NewRegistry()
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: st, AppsEnabled: true, Registerer: reg})
	v := run(t, s, "/sales_report {}").Views[0]
	ctx := context.Background()

	res, err := s.CallFromView(ctx, v, alice, "refresh_sales", json.RawMessage(`{"revision": 1}`))
	if err != nil || res.IsError {
		t.Fatalf("refresh_sales from the view: %v %+v", err, res)
	}
	_, err = s.CallFromView(ctx, v, alice, "lookup_customer", json.RawMessage(`{"customer": "Contoso"}`))
	if !errors.Is(err, agent.ErrToolNotAllowed) {
		t.Errorf("lookup_customer from the view: err = %v, want ErrToolNotAllowed", err)
	}
	res, err = s.CallFromView(ctx, v, alice, "refresh_sales", json.RawMessage(`{"revision": -1}`))
	if err != nil || !res.IsError {
		t.Errorf("failing refresh_sales: err %v, result %+v", err, res)
	}
	recs := audit(t, st, agent.AuditAppCall)
	var results []string
	for _, r := range recs {
		results = append(results, field(r, "tool")+":"+field(r, "result"))
		if field(r, "caller") != alice.UserID || field(r, "server") != "demo" {
			t.Errorf("audit record fields: %+v", r.Fields)
		}
	}
	want := []string{"refresh_sales:ok", "lookup_customer:refused", "refresh_sales:error"}
	if diff := cmp.Diff(want, results); diff != "" {
		t.Errorf("agent.mcp_app.call records (-want +got):\n%s", diff)
	}
	if why := field(recs[1], "why"); !strings.Contains(why, `lacks "app"`) {
		t.Errorf("refusal why = %q", why)
	}
	for _, c := range []struct {
		tool, result string
		want         float64
	}{{"refresh_sales", "ok", 1}, {"refresh_sales", "error", 1}, {"lookup_customer", "refused", 1}, {"sales_report", "ok", 0}} {
		got := metricValue(t, reg, "teamsbot_agent_tool_calls_total", map[string]string{"server": "demo", "tool": c.tool, "caller": "app", "result": c.result})
		if got != c.want {
			t.Errorf("tool calls metric %s/%s from app = %v, want %v", c.tool, c.result, got, c.want)
		}
	}
}

// A run with no person (a trigger) still makes a view, owned by no user.
func TestRunWithoutPersonMakesTenantView(t *testing.T) {
	s := newService(t, agent.DefaultConfig(), agent.Options{Store: openStore(t), AppsEnabled: true})
	ans, err := s.Run(context.Background(), agent.Request{Person: agent.Person{TenantID: "tenant-1"}, Text: "/sales_report {}"})
	if err != nil || len(ans.Views) != 1 {
		t.Fatalf("Run: %v, %d views", err, len(ans.Views))
	}
	if v := ans.Views[0]; v.UserID != "" || v.TenantID != "tenant-1" {
		t.Errorf("view owner: user %q tenant %q", v.UserID, v.TenantID)
	}
	if _, err := s.Run(context.Background(), agent.Request{Text: "/tools"}); !errors.Is(err, agent.ErrBadRequest) {
		t.Errorf("run without tenant: %v", err)
	}
	if _, err := s.Run(context.Background(), agent.Request{Person: alice, AgentID: "nope"}); !errors.Is(err, agent.ErrNotFound) {
		t.Errorf("unknown agent: %v", err)
	}
}

// "A server without UI resources works exactly as before": a plain server
// gives the same answer with the extension on as with it off, with no
// views, refusals or notes, and its server never sees a resources/read.
func TestServerWithoutUIWorksAsBefore(t *testing.T) {
	var reads atomic.Int32
	newServer := func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "plain", Version: "1.0.0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "weather", Description: "today's weather", InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"sky":"clear","high":21}`}}}, nil
			})
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "resources/read" {
					reads.Add(1)
				}
				return next(ctx, method, req)
			}
		})
		return srv
	}
	var answers []agent.Answer
	for _, apps := range []bool{true, false} {
		s := newService(t, oneAgent(agent.ServerConfig{Name: "plain", Builtin: "plain"}),
			agent.Options{Store: openStore(t), AppsEnabled: apps, Builtins: map[string]func() *mcp.Server{"plain": newServer}})
		ans := run(t, s, "/weather {}")
		if len(ans.Views)+len(ans.Refusals)+len(ans.ToolErrors)+len(ans.Notes) != 0 {
			t.Errorf("apps %v: views %d, refusals %+v, tool errors %+v, notes %q", apps, len(ans.Views), ans.Refusals, ans.ToolErrors, ans.Notes)
		}
		answers = append(answers, ans)
	}
	if answers[0].Text != answers[1].Text || !strings.Contains(answers[0].Text, "sky: clear") {
		t.Errorf("answers differ or miss the result:\non:  %q\noff: %q", answers[0].Text, answers[1].Text)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("%d resources/read sent to a server without UI resources", n)
	}
}

// A tenant admin can turn MCP Apps off for their tenant: that tenant's
// runs are offered every tool and make no views, its views' calls are
// refused, and other tenants keep the extension.
func TestAppsOffForOneTenant(t *testing.T) {
	st := openStore(t)
	ax, err := access.New(access.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	s := newService(t, oneAgent(agent.ServerConfig{Name: "demo", Builtin: "demo"}), agent.Options{Store: st, AppsEnabled: true, Access: ax})
	ctx := context.Background()
	before := run(t, s, "/sales_report {}")
	if len(before.Views) != 1 {
		t.Fatalf("apps on: %d views", len(before.Views))
	}
	admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
	if err := ax.SetAppsEnabled(ctx, admin, false); err != nil {
		t.Fatal(err)
	}
	ans := run(t, s, "/tools")
	if !strings.Contains(ans.Text, "demo/refresh_sales") || !hasNote(ans.Notes, "turned off for this tenant") {
		t.Errorf("apps off for the tenant: %q, notes %q", ans.Text, ans.Notes)
	}
	if ans := run(t, s, "/sales_report {}"); len(ans.Views) != 0 {
		t.Errorf("apps off for the tenant: %d views", len(ans.Views))
	}
	if _, err := s.CallFromView(ctx, before.Views[0], alice, "refresh_sales", nil); !errors.Is(err, agent.ErrToolNotAllowed) {
		t.Errorf("a view's call with apps off for its tenant: %v", err)
	}
	other := agent.Person{TenantID: "tenant-2", UserID: "user-bob", Name: "Bob"}
	if ans, err := s.Run(ctx, agent.Request{Person: other, Text: "/sales_report {}"}); err != nil || len(ans.Views) != 1 {
		t.Errorf("another tenant lost its views: %d, %v", len(ans.Views), err)
	}
}
