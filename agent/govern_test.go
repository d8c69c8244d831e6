package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/mcpapps"
)

const secretCard = "4111-1111-1111-1111"

// govServer is a go-sdk server in memory with the tools the governed-path
// tests need. It counts the calls that reached it.
type govServer struct {
	calls sync.Map // tool name -> *atomic.Int32
}

func (g *govServer) count(tool string) int32 {
	v, _ := g.calls.LoadOrStore(tool, new(atomic.Int32))
	return v.(*atomic.Int32).Load()
}

func (g *govServer) new() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "gov", Version: "1.0.0"}, nil)
	add := func(name string, meta mcp.Meta, h mcp.ToolHandler) {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}, Meta: meta},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				v, _ := g.calls.LoadOrStore(name, new(atomic.Int32))
				v.(*atomic.Int32).Add(1)
				return h(ctx, req)
			})
	}
	view := mcp.Meta{"ui": map[string]any{"resourceUri": "ui://gov/secret.html"}}
	add("secret", view, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{
			Content: []mcp.Content{&mcp.TextContent{Text: "the card is " + secretCard}},
			StructuredContent: map[string]any{
				"card":  secretCard,
				"cards": []any{"x " + secretCard, 42},
				"owner": map[string]any{"name": "Ann", "card": secretCard},
			},
		}, nil
	})
	add("leaky", view, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// The secret in every string field a result can carry besides its
		// text and structuredContent.
		size := int64(12)
		return &mcp.CallToolResult{
			Meta: mcp.Meta{"trace": "card " + secretCard, "nested": map[string]any{"list": []any{secretCard}}, secretCard: true},
			Content: []mcp.Content{
				&mcp.ResourceLink{
					URI: "https://files.example.com/" + secretCard + ".pdf", Name: "statement-" + secretCard,
					Title: "Statement of " + secretCard, Description: "for card " + secretCard, MIMEType: "application/pdf",
					Size: &size, Meta: mcp.Meta{"card": secretCard},
					Annotations: &mcp.Annotations{LastModified: secretCard},
					Icons:       []mcp.Icon{{Source: "https://icons.example.com/" + secretCard + ".png", MIMEType: "image/png", Sizes: []string{secretCard}}},
				},
				&mcp.EmbeddedResource{
					Resource: &mcp.ResourceContents{URI: "file:///cards/" + secretCard, MIMEType: "text/plain", Text: "card " + secretCard, Meta: mcp.Meta{"card": secretCard}},
					Meta:     mcp.Meta{"card": secretCard},
				},
				&mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png; name=" + secretCard, Meta: mcp.Meta{"alt": "card " + secretCard}},
				&mcp.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav; name=" + secretCard, Meta: mcp.Meta{"title": secretCard}},
				&mcp.TextContent{Text: "see the links", Meta: mcp.Meta{"card": secretCard}},
			},
		}, nil
	})
	add("danger", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted everything"}}}, nil
	})
	add("fails", nil, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the backend is down"}}}, nil
	})
	add("slow", nil, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		<-ctx.Done() // the client's cancellation ends it
		return nil, ctx.Err()
	})
	srv.AddResource(&mcp.Resource{URI: "ui://gov/secret.html", Name: "secret", MIMEType: mcpapps.MIMEType},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: "ui://gov/secret.html", MIMEType: mcpapps.MIMEType, Text: htmlPage("secret view"),
			}}}, nil
		})
	return srv
}

func govConfig(timeout string) agent.Config {
	cfg := oneAgent(agent.ServerConfig{Name: "gov", Builtin: "gov", Timeout: timeout})
	cfg.Agents[0].Rules = agent.RulesConfig{
		DenyTools: []string{"gov/danger"},
		Redact:    []string{`\b\d{4}-\d{4}-\d{4}-\d{4}\b`},
	}
	return cfg
}

// A data rule denies a tool: the call never reaches the server, the model
// is told, and the audit log says refused.
func TestDataRuleDeniesTool(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/danger {}")
	if len(ans.ToolErrors) != 1 || !strings.HasPrefix(ans.ToolErrors[0].Message, "your organisation's rules do not allow the gov tool danger (ref ") {
		t.Fatalf("tool errors = %+v", ans.ToolErrors)
	}
	if d := problem(t, st, ans.RunID, refIn(ans.ToolErrors[0].Message)).Detail; !strings.Contains(d, `denyTools "gov/danger"`) {
		t.Errorf("the operator's detail %q does not name the rule", d)
	}
	if g.count("danger") != 0 {
		t.Errorf("the denied call reached the server")
	}
	if strings.Contains(ans.Text, "deleted everything") {
		t.Errorf("answer = %q", ans.Text)
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultRefused || !strings.Contains(field(recs[0], "why"), "denyTools") {
		t.Errorf("audit = %+v", recs)
	}
}

// A redact rule hides matching text in the result, in text content and in
// structuredContent strings, before the model or the view sees it.
func TestRedactRuleHidesSecretFromModelAndView(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/secret {}")
	if len(ans.Views) != 1 {
		t.Fatalf("views = %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	if strings.Contains(ans.Text, secretCard) || !strings.Contains(ans.Text, "[redacted]") {
		t.Errorf("answer text = %q", ans.Text)
	}
	v := ans.Views[0]
	if strings.Contains(string(v.Result), secretCard) || !strings.Contains(string(v.Result), "[redacted]") {
		t.Errorf("view result = %s", v.Result)
	}
	stored, err := st.View(context.Background(), v.ID)
	if err != nil || strings.Contains(string(stored.Result), secretCard) {
		t.Errorf("stored view result = %s (%v)", stored.Result, err)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(v.Result, &res); err != nil {
		t.Fatal(err)
	}
	owner := res.StructuredContent.(map[string]any)["owner"].(map[string]any)
	if owner["card"] != "[redacted]" || owner["name"] != "Ann" {
		t.Errorf("nested structured content = %v", owner)
	}

	// The view's own calls are redacted too.
	got, err := s.CallFromView(context.Background(), v, alice, "secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), secretCard) {
		t.Errorf("the view's call result holds the secret: %s", b)
	}
}

// A redact rule reaches every string of a result, not only its text and
// structuredContent: a resource link's URI, name, title and description,
// an embedded resource, image and audio metadata, every _meta and the
// result's own _meta. Neither the model, the view nor the view's own call
// sees the secret.
func TestRedactRuleCoversEveryField(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/leaky {}")
	if g.count("leaky") != 1 {
		t.Fatalf("leaky called %d times", g.count("leaky"))
	}
	if strings.Contains(ans.Text, secretCard) {
		t.Errorf("the model's answer holds the secret: %q", ans.Text)
	}
	if !strings.Contains(ans.Text, "[resource https://files.example.com/[redacted].pdf]") {
		t.Errorf("the model does not read the redacted link: %q", ans.Text)
	}
	if len(ans.Views) != 1 {
		t.Fatalf("views = %d, refusals %+v", len(ans.Views), ans.Refusals)
	}
	v := ans.Views[0]
	if strings.Contains(string(v.Result), secretCard) {
		t.Errorf("view result holds the secret: %s", v.Result)
	}
	stored, err := st.View(context.Background(), v.ID)
	if err != nil || strings.Contains(string(stored.Result), secretCard) {
		t.Errorf("stored view result = %s (%v)", stored.Result, err)
	}
	// The result still decodes as a CallToolResult with all its parts.
	var res mcp.CallToolResult
	if err := json.Unmarshal(v.Result, &res); err != nil {
		t.Fatalf("the redacted result no longer decodes: %v\n%s", err, v.Result)
	}
	if len(res.Content) != 5 {
		t.Errorf("content parts = %d, want 5", len(res.Content))
	}
	got, err := s.CallFromView(context.Background(), v, alice, "leaky", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), secretCard) {
		t.Errorf("the view's call result holds the secret: %s", b)
	}
	for _, r := range audit(t, st, agent.AuditToolCall) {
		if j, _ := json.Marshal(r.Fields); strings.Contains(string(j), secretCard) {
			t.Errorf("audit holds the secret: %s", j)
		}
	}
}

// The tenant's Cedar policies decide every call, the model's and the
// view's (caller "view"); a denial is an error for the view and a refusal
// for the model, audited with the policy that decided. A change of policy
// applies to the next call.
func TestCedarPoliciesDecideCalls(t *testing.T) {
	var g govServer
	st := openStore(t)
	ax, err := access.New(access.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
	ctx := context.Background()
	if _, err := ax.SetPolicies(ctx, admin, access.DefaultPolicyText+`
@id("no-secrets-in-views")
forbid (principal, action, resource) when { context.caller == "view" && context.tool == "secret" };
@id("nobody-fails")
forbid (principal, action, resource) when { context.tool == "fails" };
`, 0); err != nil {
		t.Fatal(err)
	}
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Access: ax, Builtins: map[string]func() *mcp.Server{"gov": g.new}})

	ans := run(t, s, "/fails {}")
	if len(ans.ToolErrors) != 1 || !strings.Contains(problem(t, st, ans.RunID, refIn(ans.ToolErrors[0].Message)).Detail, "nobody-fails") {
		t.Errorf("model call: tool errors %+v", ans.ToolErrors)
	}
	if g.count("fails") != 0 {
		t.Errorf("the denied call reached the server")
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultRefused || field(recs[0], "decision") != "deny" ||
		fmt.Sprint(recs[0].Fields["policies"]) != "[nobody-fails]" {
		t.Errorf("model call audit = %+v", recs)
	}

	ans = run(t, s, "/secret {}")
	if len(ans.Views) != 1 {
		t.Fatalf("the model's secret call was not allowed: %+v", ans.ToolErrors)
	}
	recs = audit(t, st, agent.AuditToolCall)
	if last := recs[len(recs)-1]; field(last, "decision") != "allow" || fmt.Sprint(last.Fields["policies"]) != "[default.agents-run]" {
		t.Errorf("allowed call audit = %+v", last)
	}
	_, err = s.CallFromView(ctx, ans.Views[0], alice, "secret", nil)
	if !errors.Is(err, agent.ErrDenied) {
		t.Errorf("view call: err = %v, want ErrDenied", err)
	}
	recs = audit(t, st, agent.AuditAppCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultRefused || field(recs[0], "decision") != "deny" ||
		!strings.Contains(field(recs[0], "why"), "no-secrets-in-views") {
		t.Errorf("view call audit = %+v", recs)
	}

	// The admin lifts the forbid: the same call goes through.
	if _, err := ax.SetPolicies(ctx, admin, access.DefaultPolicyText, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallFromView(ctx, ans.Views[0], alice, "secret", nil); err != nil {
		t.Errorf("after the policy change: %v", err)
	}
}

// A tenant admin's own data rules apply on top of the configured ones, to
// the model's and the views' calls of that tenant only, from the next call
// on; a change takes them back as quickly.
func TestTenantDataRulesApplyToModelAndViewCalls(t *testing.T) {
	var g govServer
	st := openStore(t)
	ax, err := access.New(access.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// No configured rules: whatever is refused or hidden is the tenant's doing.
	s := newService(t, oneAgent(agent.ServerConfig{Name: "gov", Builtin: "gov"}),
		agent.Options{Store: st, AppsEnabled: true, Access: ax, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/secret {}")
	if len(ans.Views) != 1 || !strings.Contains(ans.Text, secretCard) {
		t.Fatalf("without rules: views %d, text %q", len(ans.Views), ans.Text)
	}
	view := ans.Views[0]

	admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
	if err := ax.SetDataRules(ctx, admin, access.DataRules{DenyTools: []string{"gov/danger"}, Redact: []string{`\b\d{4}-\d{4}-\d{4}-\d{4}\b`}}, 0); err != nil {
		t.Fatal(err)
	}
	ans = run(t, s, "/secret {}")
	if strings.Contains(ans.Text, secretCard) || !strings.Contains(ans.Text, "[redacted]") {
		t.Errorf("model's answer with the tenant's redact rule = %q", ans.Text)
	}
	res, err := s.CallFromView(ctx, view, alice, "secret", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); strings.Contains(string(b), secretCard) {
		t.Errorf("the view's call result holds the secret: %s", b)
	}
	ans = run(t, s, "/danger {}")
	if len(ans.ToolErrors) != 1 || !strings.Contains(problem(t, st, ans.RunID, refIn(ans.ToolErrors[0].Message)).Detail, `denyTools "gov/danger"`) || g.count("danger") != 0 {
		t.Errorf("denied tool: errors %+v, %d calls reached the server", ans.ToolErrors, g.count("danger"))
	}

	// Another tenant's person is not bound by these rules.
	other := agent.Person{TenantID: "tenant-2", UserID: "user-2"}
	ans, err = s.Run(ctx, agent.Request{Person: other, Text: "/secret {}"})
	if err != nil || !strings.Contains(ans.Text, secretCard) {
		t.Errorf("tenant-2's answer = %q, %v; want the tool's text unredacted", ans.Text, err)
	}

	if err := ax.SetDataRules(ctx, admin, access.DataRules{}, 1); err != nil {
		t.Fatal(err)
	}
	if ans := run(t, s, "/danger {}"); len(ans.ToolErrors) != 0 || g.count("danger") != 1 {
		t.Errorf("after the rules were cleared: errors %+v, %d calls", ans.ToolErrors, g.count("danger"))
	}
}

// A tool that reports an error (IsError) comes back as a tool error; the
// run goes on and the answer says so.
func TestToolErrorResultIsReported(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig(""), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/fails {}")
	if len(ans.ToolErrors) != 1 || !strings.Contains(ans.ToolErrors[0].Message, "the backend is down") {
		t.Errorf("tool errors = %+v", ans.ToolErrors)
	}
	if !strings.Contains(ans.Text, "could not be used") {
		t.Errorf("answer = %q", ans.Text)
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultError {
		t.Errorf("audit = %+v", recs)
	}
}

// A server's timeout bounds each call: a slow tool comes back as a timeout
// error, not a hung run.
func TestServerTimeoutStopsSlowTool(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig("200ms"), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ans := run(t, s, "/slow {}")
	if len(ans.ToolErrors) != 1 || !strings.HasPrefix(ans.ToolErrors[0].Message, "the gov tool slow did not answer in time (ref ") {
		t.Fatalf("tool errors = %+v", ans.ToolErrors)
	}
	if d := problem(t, st, ans.RunID, refIn(ans.ToolErrors[0].Message)).Detail; !strings.Contains(d, "timed out after 200ms") {
		t.Errorf("the operator's detail %q does not say the call timed out", d)
	}
	recs := audit(t, st, agent.AuditToolCall)
	if len(recs) != 1 || field(recs[0], "result") != agent.ResultError {
		t.Errorf("audit = %+v", recs)
	}
	// The server is still usable afterwards.
	ans = run(t, s, "/secret {}")
	if len(ans.Views) != 1 {
		t.Fatalf("after the timeout: %+v", ans.ToolErrors)
	}
	// A view's call times out the same way, and the error says it is a
	// timeout to a caller that asks (a 504 rather than a 502).
	_, err := s.CallFromView(context.Background(), ans.Views[0], alice, "slow", nil)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out after 200ms") {
		t.Errorf("a view's slow call: err = %v, want a timeout wrapping context.DeadlineExceeded", err)
	}
}

// A view's call is audited even when its caller goes away during the call
// (the browser closed, the request's deadline passed).
func TestViewCallAuditedWhenCallerLeaves(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig("20s"), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	v := run(t, s, "/secret {}").Views[0]
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.CallFromView(ctx, v, alice, "slow", nil); err == nil {
		t.Fatal("the slow call succeeded")
	}
	recs := audit(t, st, agent.AuditAppCall)
	if len(recs) != 1 || field(recs[0], "tool") != "slow" || field(recs[0], "result") != agent.ResultError {
		t.Errorf("agent.mcp_app.call records = %+v, want the slow call as an error", recs)
	}
}

// A run whose ctx ends during a tool call stops there and says so, and what
// it did is still stored and audited. (The deadline leaves the run ample
// time to reach the call, which waits for it.)
func TestRunStoppedWhenContextEnds(t *testing.T) {
	var g govServer
	st := openStore(t)
	s := newService(t, govConfig("20s"), agent.Options{Store: st, AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"gov": g.new}})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	ans, err := s.Run(ctx, agent.Request{Person: alice, Text: "/slow {}"})
	if !errors.Is(err, context.DeadlineExceeded) || !hasNote(ans.Notes, "stopped before it finished") {
		t.Errorf("err = %v, notes %q; want the run stopped by its deadline", err, ans.Notes)
	}
	if _, err := st.GetRun(context.Background(), ans.RunID); err != nil {
		t.Errorf("the stopped run was not stored: %v", err)
	}
	if recs := audit(t, st, agent.AuditToolCall); len(recs) != 1 || field(recs[0], "tool") != "slow" {
		t.Errorf("the cut-short call is not audited: %+v", recs)
	}
}
