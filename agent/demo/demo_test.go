package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent/demo"
	"teamsbot/mcpapps"
)

// connect starts a demo server and a real go-sdk client, wired in memory as
// the agent wires them, and returns the client's session. The client takes
// no questions of the server (elicitation).
func connect(t testing.TB, opts demo.Options) *mcp.ClientSession {
	t.Helper()
	return connectAsking(t, opts, nil)
}

// connectAsking is connect with a client that answers the server's
// questions (elicitation) with answer, when it is not nil.
func connectAsking(t testing.TB, opts demo.Options, answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	return connectSpeaking(t, opts, "", answer)
}

// connectSpeaking is connectAsking on a given protocol version; empty
// means the SDK's latest.
func connectSpeaking(t testing.TB, opts demo.Options, protocol string, answer func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := demo.New(opts).Connect(ctx, st, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	var copts *mcp.ClientOptions
	if answer != nil {
		copts = &mcp.ClientOptions{ElicitationHandler: answer}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1.0.0"}, copts)
	var sopts *mcp.ClientSessionOptions
	if protocol != "" {
		sopts = &mcp.ClientSessionOptions{ProtocolVersion: protocol}
	}
	cs, err := client.Connect(ctx, ct, sopts)
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		ss.Wait()
	})
	return cs
}

// asJSON turns a decoded value (a Meta, a StructuredContent) into plain JSON
// values, so tests compare what went over the wire.
func asJSON(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool %s: protocol error %v; a failing tool must come back as a result with IsError", name, err)
	}
	return res
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// structured decodes a result's structured content into T.
func structured[T any](t testing.TB, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structured content: %v", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}

func TestServerAdvertisesExtension(t *testing.T) {
	cs := connect(t, demo.Options{})
	init := cs.InitializeResult()
	if init.ServerInfo.Name != demo.ServerName {
		t.Errorf("server name = %q, want %q", init.ServerInfo.Name, demo.ServerName)
	}
	got := asJSON(t, init.Capabilities.Extensions[mcpapps.ExtensionID])
	want := map[string]any{"mimeTypes": []any{mcpapps.MIMEType}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("capabilities.extensions[%q] (-want +got):\n%s", mcpapps.ExtensionID, diff)
	}
}

func TestToolsList(t *testing.T) {
	cs := connect(t, demo.Options{})
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type tool struct {
		Title string
		Meta  any
	}
	got := map[string]tool{}
	for _, tl := range res.Tools {
		got[tl.Name] = tool{tl.Title, asJSON(t, tl.Meta)}
	}
	view := func(uri string, visibility ...any) any {
		ui := map[string]any{"resourceUri": uri}
		if visibility != nil {
			ui["visibility"] = visibility
		}
		return map[string]any{"ui": ui, "ui/resourceUri": uri}
	}
	want := map[string]tool{
		// No visibility: the default, callable by the model and the view.
		demo.ToolSalesReport:    {"Sales report", view(demo.SalesReportURI)},
		demo.ToolRefreshSales:   {"Refresh sales", view(demo.SalesReportURI, "app")},
		demo.ToolLookupCustomer: {"Look up customer", map[string]any{"ui": map[string]any{"visibility": []any{"model"}}}},
		demo.ToolFeedbackForm:   {"Feedback form", view(demo.FeedbackFormURI)},
		demo.ToolSubmitFeedback: {"Submit feedback", view(demo.FeedbackFormURI, "app")},
		demo.ToolRequestRefund:  {"Request a refund", map[string]any{"ui": map[string]any{"visibility": []any{"model"}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	// The names are a contract with documentation and outside checks.
	for name, constant := range map[string]string{
		"sales_report": demo.ToolSalesReport, "refresh_sales": demo.ToolRefreshSales,
		"lookup_customer": demo.ToolLookupCustomer, "feedback_form": demo.ToolFeedbackForm,
		"submit_feedback": demo.ToolSubmitFeedback, "request_refund": demo.ToolRequestRefund,
	} {
		if name != constant {
			t.Errorf("tool constant %q, want %q", constant, name)
		}
	}
}

func TestResources(t *testing.T) {
	cs := connect(t, demo.Options{})
	ctx := context.Background()
	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantUI := map[string]any{
		demo.SalesReportURI: map[string]any{
			"csp": map[string]any{
				"connectDomains":  []any{"https://api.example.com", "http://insecure.example.com"},
				"resourceDomains": []any{"https://cdn.example.com"},
			},
			"prefersBorder": true,
		},
		demo.FeedbackFormURI: map[string]any{
			"permissions": map[string]any{"forms": map[string]any{}},
		},
	}
	var uris []string
	for _, r := range list.Resources {
		uris = append(uris, r.URI)
		if r.MIMEType != mcpapps.MIMEType {
			t.Errorf("list entry %s: MIME type %q, want %q", r.URI, r.MIMEType, mcpapps.MIMEType)
		}
		if diff := cmp.Diff(wantUI[r.URI], asJSON(t, r.Meta["ui"])); diff != "" {
			t.Errorf("list entry %s _meta.ui (-want +got):\n%s", r.URI, diff)
		}
	}
	slices.Sort(uris)
	if diff := cmp.Diff([]string{demo.FeedbackFormURI, demo.SalesReportURI}, uris); diff != "" {
		t.Errorf("resources/list URIs (-want +got):\n%s", diff)
	}

	for uri, ui := range wantUI {
		t.Run(uri, func(t *testing.T) {
			res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Contents) != 1 {
				t.Fatalf("got %d content items, want 1", len(res.Contents))
			}
			item := res.Contents[0]
			if item.URI != uri || item.MIMEType != "text/html;profile=mcp-app" {
				t.Errorf("content item uri %q MIME type %q, want %q and text/html;profile=mcp-app", item.URI, item.MIMEType, uri)
			}
			if !strings.HasPrefix(item.Text, "<!doctype html>") || len(item.Blob) != 0 {
				t.Errorf("content item is not an HTML text document: text starts %.40q, %d blob bytes", item.Text, len(item.Blob))
			}
			if diff := cmp.Diff(ui, asJSON(t, item.Meta["ui"])); diff != "" {
				t.Errorf("content item _meta.ui (-want +got):\n%s", diff)
			}
		})
	}
}

// TestViewsSpeakMCPApps reads each view as a host would and checks that it
// uses the MCP Apps messages and window checks it must, and nothing that
// its sandbox forbids.
func TestViewsSpeakMCPApps(t *testing.T) {
	cs := connect(t, demo.Options{})
	common := []string{
		`"ui/initialize"`, `"2026-01-26"`, `"ui/notifications/initialized"`,
		`"ui/notifications/tool-input"`, `"ui/notifications/tool-result"`,
		`"ui/notifications/size-changed"`, `"ui/resource-teardown"`, `"tools/call"`,
		`event.source !== host`, `var host = window.parent`, `host.postMessage(message, "*")`,
		`jsonrpc: "2.0"`, `-32601`, `id="status"`, `data-state="loading"`, `data-theme`,
	}
	views := map[string][]string{
		demo.SalesReportURI: {`"refresh_sales"`, `id="total"`, `id="chart"`, `id="refresh"`, `id="top"`,
			`id="subtitle"`, `Intl.DateTimeFormat`, `id="summary"`, `<svg`, `role="img"`, `"data-value"`},
		demo.FeedbackFormURI: {`"submit_feedback"`, `"ui/message"`, `"ui/open-link"`, `"` + demo.OpenLinkURL + `"`,
			`<form id="feedback"`, `<textarea id="comment"`, `id="rating-1"`, `id="rating-5"`, `id="submit"`,
			`id="result"`, `id="thanks"`, `id="open-link"`, `id="topic"`},
	}
	// Nothing outside the document: the view runs under a CSP that allows
	// only inline code, in a frame without storage or cookies.
	forbidden := regexp.MustCompile(`(?i)<script[^>]+src=|<link[^>]+href=|@import|url\(|localStorage|sessionStorage|document\.cookie|fetch\(|XMLHttpRequest|WebSocket|/\*@(style|bridge)@\*/`)
	for uri, want := range views {
		t.Run(uri, func(t *testing.T) {
			res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatal(err)
			}
			html := res.Contents[0].Text
			for _, s := range append(common, want...) {
				if !strings.Contains(html, s) {
					t.Errorf("view lacks %s", s)
				}
			}
			if m := forbidden.FindString(html); m != "" {
				t.Errorf("view contains %q, which its sandbox forbids or which was not filled in", m)
			}
			if n := strings.Count(html, "<script"); n != 1 {
				t.Errorf("view has %d script elements, want 1 inline", n)
			}
		})
	}
}

func TestSalesReport(t *testing.T) {
	cs := connect(t, demo.Options{})

	t.Run("defaults", func(t *testing.T) {
		res := call(t, cs, demo.ToolSalesReport, nil)
		if res.IsError {
			t.Fatalf("IsError: %s", text(res))
		}
		r := structured[demo.SalesReport](t, res)
		if r.Region != demo.DefaultRegion || r.Quarter != demo.DefaultQuarter || r.Currency != "USD" || r.Revision != 0 || r.RefreshedAt != "" {
			t.Errorf("report header = %+v", r)
		}
		var products []string
		var sum int64
		for _, l := range r.Lines {
			products = append(products, l.Product)
			sum += l.Amount
			if l.Amount <= 0 {
				t.Errorf("%s amount %d", l.Product, l.Amount)
			}
		}
		if diff := cmp.Diff(demo.Products(), products); diff != "" {
			t.Errorf("products (-want +got):\n%s", diff)
		}
		if sum != r.Total {
			t.Errorf("total %d, lines add up to %d", r.Total, sum)
		}
		// The model reads only the text: it must carry the figures.
		txt := text(res)
		for _, s := range []string{"Global", demo.DefaultQuarter, groupDigits(r.Total), "Best seller: " + r.Top} {
			if !strings.Contains(txt, s) {
				t.Errorf("text %q lacks %q", txt, s)
			}
		}
	})

	t.Run("same call, same figures", func(t *testing.T) {
		a := structured[demo.SalesReport](t, call(t, cs, demo.ToolSalesReport, map[string]any{"region": "emea", "quarter": "2025q4"}))
		b := structured[demo.SalesReport](t, call(t, cs, demo.ToolSalesReport, map[string]any{"region": "EMEA", "quarter": "2025-Q4"}))
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("(-first +second):\n%s", diff)
		}
		if a.Region != "EMEA" || a.Quarter != "2025-Q4" {
			t.Errorf("region %q quarter %q, want EMEA 2025-Q4", a.Region, a.Quarter)
		}
	})

	t.Run("global is the sum of the regions", func(t *testing.T) {
		global := structured[demo.SalesReport](t, call(t, cs, demo.ToolSalesReport, map[string]any{"region": "Global"}))
		var sum int64
		for _, region := range demo.Regions()[1:] {
			sum += structured[demo.SalesReport](t, call(t, cs, demo.ToolSalesReport, map[string]any{"region": region})).Total
		}
		if global.Total != sum {
			t.Errorf("global total %d, regions add up to %d", global.Total, sum)
		}
	})

	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"unknown region", map[string]any{"region": "Mars"}, "known regions are Global, EMEA, Americas, APAC"},
		{"bad quarter", map[string]any{"quarter": "Q5"}, "not of the form YYYY-Qn"},
		{"unknown argument", map[string]any{"country": "FR"}, "country"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, demo.ToolSalesReport, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Errorf("IsError %t, text %q; want an error saying %q", res.IsError, text(res), tc.want)
			}
		})
	}
}

// sharePattern is a product line's share as the text writes it.
var sharePattern = regexp.MustCompile(`(\w+) USD [\d,]+ \((\d+)%\)`)

// TestSalesSharesAddUp: the shares the model reads of every report (each
// region, four years of quarters, the report and ten refreshes) add up to
// 100%, and each is within rounding of its line's true share: less than
// one point from it. Shares rounded down alone (24.9% written 24%) add up
// to less than 100.
func TestSalesSharesAddUp(t *testing.T) {
	cs := connect(t, demo.Options{})
	reports := 0
	for _, region := range demo.Regions() {
		for year := 2024; year <= 2027; year++ {
			for q := 1; q <= 4; q++ {
				for rev := range 11 {
					args := map[string]any{"region": region, "quarter": fmt.Sprintf("%d-Q%d", year, q)}
					tool := demo.ToolSalesReport
					if rev > 0 {
						tool, args["revision"] = demo.ToolRefreshSales, rev
					}
					res := call(t, cs, tool, args)
					r := structured[demo.SalesReport](t, res)
					got := sharePattern.FindAllStringSubmatch(text(res), -1)
					if len(got) != len(r.Lines) {
						t.Fatalf("%v: %d shares in %q, want %d", args, len(got), text(res), len(r.Lines))
					}
					sum := 0
					for i, m := range got {
						shown, _ := strconv.Atoi(m[2])
						sum += shown
						exact := 100 * float64(r.Lines[i].Amount) / float64(r.Total)
						if m[1] != r.Lines[i].Product || math.Abs(float64(shown)-exact) >= 1 {
							t.Errorf("%v: %s shown as %d%%, its share is %.2f%%", args, m[1], shown, exact)
						}
					}
					if sum != 100 {
						t.Errorf("%v: the shares add up to %d%%: %q", args, sum, text(res))
					}
					reports++
				}
			}
		}
	}
	t.Logf("%d reports checked", reports)
}

func TestRefreshSales(t *testing.T) {
	now := time.Date(2026, 12, 2, 9, 30, 0, 0, time.FixedZone("CET", 3600))
	cs := connect(t, demo.Options{Now: func() time.Time { return now }})
	args := map[string]any{"region": "APAC", "quarter": "2026-Q2"}
	base := structured[demo.SalesReport](t, call(t, cs, demo.ToolSalesReport, args))

	first := call(t, cs, demo.ToolRefreshSales, args)
	if first.IsError {
		t.Fatalf("IsError: %s", text(first))
	}
	r1 := structured[demo.SalesReport](t, first)
	if r1.Revision != 1 || r1.RefreshedAt != "2026-12-02T08:30:00Z" || r1.Region != "APAC" || r1.Quarter != "2026-Q2" {
		t.Errorf("refresh without a revision = %+v, want revision 1 refreshed at 2026-12-02T08:30:00Z", r1)
	}
	if !strings.Contains(text(first), "(refresh 1)") {
		t.Errorf("text %q does not say it is a refresh", text(first))
	}

	args["revision"] = 2
	r2 := structured[demo.SalesReport](t, call(t, cs, demo.ToolRefreshSales, args))
	again := structured[demo.SalesReport](t, call(t, cs, demo.ToolRefreshSales, args))
	if diff := cmp.Diff(r2, again); diff != "" {
		t.Errorf("the same refresh gave other figures (-first +second):\n%s", diff)
	}
	if r2.Total == base.Total && r1.Total == base.Total {
		t.Errorf("refreshes keep the report's total %d; they should move the figures", base.Total)
	}
	for i, l := range r2.Lines {
		b := base.Lines[i].Amount
		if l.Amount < b*91/100 || l.Amount > b*109/100 {
			t.Errorf("%s moved from %d to %d, more than 8%%", l.Product, b, l.Amount)
		}
	}

	args["revision"] = -1
	if res := call(t, cs, demo.ToolRefreshSales, args); !res.IsError {
		t.Errorf("revision -1 accepted: %s", text(res))
	}
}

func TestLookupCustomer(t *testing.T) {
	cs := connect(t, demo.Options{})
	for _, tc := range []struct {
		query  string
		wantID string
	}{
		{"C-1003", "C-1003"},
		{"c-1003", "C-1003"},
		{"Contoso Ltd", "C-1001"},
		{"tailspin", "C-1004"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			res := call(t, cs, demo.ToolLookupCustomer, map[string]any{"customer": tc.query})
			if res.IsError {
				t.Fatalf("IsError: %s", text(res))
			}
			c := structured[demo.Customer](t, res)
			if c.ID != tc.wantID {
				t.Errorf("found %s, want %s", c.ID, tc.wantID)
			}
			if !strings.Contains(text(res), c.Name) || !strings.Contains(text(res), c.AccountManager) {
				t.Errorf("text %q lacks the name or the account manager of %+v", text(res), c)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		query string
		want  string
	}{
		{"unknown", "Initech", `no customer has the id or name "Initech"`},
		{"ambiguous", "or", "matches Adventure Works, Northwind Traders, Wide World Importers"},
		{"empty", " ", "give a customer id or name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, demo.ToolLookupCustomer, map[string]any{"customer": tc.query})
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Errorf("IsError %t, text %q; want an error saying %q", res.IsError, text(res), tc.want)
			}
			if res.StructuredContent != nil {
				t.Errorf("an error result carries structured content %v", res.StructuredContent)
			}
		})
	}
}

func TestFeedback(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var got []demo.Feedback
	cs := connect(t, demo.Options{
		Now: func() time.Time { return now },
		OnFeedback: func(_ context.Context, f demo.Feedback) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, f)
		},
	})

	form := call(t, cs, demo.ToolFeedbackForm, nil)
	if f := structured[demo.FeedbackForm](t, form); form.IsError || f.Topic != demo.DefaultFeedbackTopic || f.MaxRating != 5 {
		t.Errorf("feedback_form = %+v (IsError %t)", f, form.IsError)
	}
	form = call(t, cs, demo.ToolFeedbackForm, map[string]any{"topic": "the sales chart"})
	if f := structured[demo.FeedbackForm](t, form); f.Topic != "the sales chart" || !strings.Contains(text(form), "the sales chart") {
		t.Errorf("feedback_form with a topic = %+v, text %q", f, text(form))
	}

	res := call(t, cs, demo.ToolSubmitFeedback, map[string]any{"rating": 4, "comment": "  Clear chart.  ", "topic": "the sales chart"})
	if res.IsError {
		t.Fatalf("IsError: %s", text(res))
	}
	want := demo.Feedback{ID: "FB-0001", Topic: "the sales chart", Rating: 4, Comment: "Clear chart.", ReceivedAt: "2026-12-02T12:00:00Z"}
	if diff := cmp.Diff(want, structured[demo.Feedback](t, res)); diff != "" {
		t.Errorf("structured content (-want +got):\n%s", diff)
	}
	if !strings.Contains(text(res), "FB-0001") || !strings.Contains(text(res), "4 out of 5") {
		t.Errorf("text %q lacks the id or the rating", text(res))
	}
	second := structured[demo.Feedback](t, call(t, cs, demo.ToolSubmitFeedback, map[string]any{"rating": 5}))
	if second.ID != "FB-0002" || second.Topic != demo.DefaultFeedbackTopic {
		t.Errorf("second feedback = %+v, want FB-0002 about %s", second, demo.DefaultFeedbackTopic)
	}

	for _, tc := range []struct {
		name string
		args map[string]any
		want string
	}{
		{"rating 0", map[string]any{"rating": 0}, "rating must be from 1 to 5"},
		{"rating 6", map[string]any{"rating": 6}, "rating must be from 1 to 5"},
		{"no rating", map[string]any{"comment": "hi"}, "rating"},
		{"long comment", map[string]any{"rating": 3, "comment": strings.Repeat("é", demo.MaxCommentRunes+1)}, "at most 2000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := call(t, cs, demo.ToolSubmitFeedback, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Errorf("IsError %t, text %q; want an error saying %q", res.IsError, text(res), tc.want)
			}
		})
	}

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0] != want || got[1].ID != "FB-0002" {
		t.Errorf("OnFeedback saw %+v, want the two accepted submissions", got)
	}

	// Each server counts its own feedback.
	other := connect(t, demo.Options{})
	if f := structured[demo.Feedback](t, call(t, other, demo.ToolSubmitFeedback, map[string]any{"rating": 1})); f.ID != "FB-0001" {
		t.Errorf("a new server's first feedback is %s, want FB-0001", f.ID)
	}
}

func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func BenchmarkSalesReportCall(b *testing.B) {
	cs := connect(b, demo.Options{})
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: demo.ToolSalesReport, Arguments: map[string]any{"region": "EMEA"}}
	for b.Loop() {
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadView(b *testing.B) {
	cs := connect(b, demo.Options{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: demo.SalesReportURI}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		demo.New(demo.Options{})
	}
}

// TestHostReadsTheDemo reads the demo server the way the service does, with
// mcpapps, and checks that what it declares means what the demo intends.
func TestHostReadsTheDemo(t *testing.T) {
	cs := connect(t, demo.Options{})
	ctx := context.Background()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type reading struct {
		URI        string
		Model, App bool
	}
	got := map[string]reading{}
	for _, tl := range tools.Tools {
		ui, err := mcpapps.ReadToolUI(tl.Meta)
		if err != nil {
			t.Fatalf("tool %s: %v", tl.Name, err)
		}
		got[tl.Name] = reading{ui.ResourceURI, ui.VisibleTo(mcpapps.VisibilityModel), ui.VisibleTo(mcpapps.VisibilityApp)}
	}
	want := map[string]reading{
		demo.ToolSalesReport:    {demo.SalesReportURI, true, true},
		demo.ToolRefreshSales:   {demo.SalesReportURI, false, true},
		demo.ToolLookupCustomer: {"", true, false},
		demo.ToolFeedbackForm:   {demo.FeedbackFormURI, true, true},
		demo.ToolSubmitFeedback: {demo.FeedbackFormURI, false, true},
		demo.ToolRequestRefund:  {"", true, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools as the host reads them (-want +got):\n%s", diff)
	}

	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range list.Resources {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: entry.URI})
		if err != nil {
			t.Fatal(err)
		}
		html, err := mcpapps.CheckResource(entry.URI, res.Contents, 0)
		if err != nil || len(html) == 0 {
			t.Errorf("%s refused: %v", entry.URI, err)
		}
		ui, err := mcpapps.ReadResourceUI(res.Contents[0].Meta, entry.Meta)
		if err != nil {
			t.Fatalf("%s: %v", entry.URI, err)
		}
		policy := mcpapps.BuildCSP(ui.CSP)
		switch entry.URI {
		case demo.SalesReportURI:
			if !strings.Contains(policy.Header, "connect-src https://api.example.com;") ||
				!strings.Contains(policy.Header, "img-src 'self' data: blob: https://cdn.example.com;") ||
				strings.Contains(policy.Header, "insecure") {
				t.Errorf("sales view CSP %q", policy.Header)
			}
			if len(policy.Dropped) != 1 || policy.Dropped[0].Field != "connectDomains" || policy.Dropped[0].Value != "http://insecure.example.com" {
				t.Errorf("dropped %+v, want only the http: connect domain", policy.Dropped)
			}
			if ui.PrefersBorder == nil || !*ui.PrefersBorder || ui.Permissions.Forms {
				t.Errorf("sales view: prefersBorder %v, forms %t", ui.PrefersBorder, ui.Permissions.Forms)
			}
		case demo.FeedbackFormURI:
			if !ui.Permissions.Forms || len(policy.Dropped) != 0 || policy.Header != mcpapps.DefaultCSP {
				t.Errorf("feedback view: forms %t, CSP %q, dropped %+v", ui.Permissions.Forms, policy.Header, policy.Dropped)
			}
		default:
			t.Errorf("unexpected resource %s", entry.URI)
		}
	}
}
