// Package demo is the built-in demo MCP App server: a small MCP server with
// interactive views (the MCP Apps extension, io.modelcontextprotocol/ui) that
// the service runs in memory for a server configured as "builtin: demo", and
// for the default agent when there is no configuration file. It
// shows, end to end, every kind of tool a host must handle: a tool with a
// view, an app-only tool the view calls, a model-only tool without a view,
// a view that asks for the forms permission, and a tool that asks the
// person during its call (elicitation).
//
// It owns the tools, their data (a fixed, made-up sales table and customer
// table) and the two views, which are plain HTML documents embedded in the
// binary. It does not own how a host shows them: the agent connects to the
// server returned by [New] (for example over [mcp.NewInMemoryTransports])
// and treats it like any other MCP server.
//
// # Tools
//
//	name             title             _meta.ui                                         view
//	sales_report     Sales report      resourceUri, no visibility (model and app)        SalesReportURI
//	refresh_sales    Refresh sales     resourceUri, visibility ["app"]                   (called by the sales view)
//	lookup_customer  Look up customer  visibility ["model"]                              none
//	feedback_form    Feedback form     resourceUri, no visibility (model and app)        FeedbackFormURI
//	submit_feedback  Submit feedback   resourceUri, visibility ["app"]                   (called by the feedback view)
//	request_refund   Request a refund  visibility ["model"]                              none; asks the person (RefundSchema)
//
// Tools with a view also carry the deprecated _meta["ui/resourceUri"], as the
// official server helper does. A failing call (unknown customer or region, a
// bad quarter, a rating out of range) comes back as a result with IsError.
//
// request_refund {order} asks the person, during its call, "Refund order
// {order}: which refund should I make?" with the form RefundSchema, and
// answers what became of it: the refund made (amount, reason, where the
// money goes, whether details were given, never the details themselves),
// or why none was made (not confirmed, declined, cancelled). A client that
// cannot ask gets a result with IsError.
//
// The sales view's resource declares _meta.ui.csp with connectDomains
// ["https://api.example.com", "http://insecure.example.com"] and
// resourceDomains ["https://cdn.example.com"], and prefersBorder true. The
// http: entry is there on purpose: a host must drop it (and say so) when it
// builds the view's Content Security Policy. The view itself loads nothing
// from either domain. The feedback view's resource asks for
// _meta.ui.permissions.forms ({}).
//
// # The views
//
// Both views speak the app side of MCP Apps JSON-RPC 2.0 over
// window.parent.postMessage(msg, "*") and accept only messages whose
// event.source is window.parent. Each sends ui/initialize (protocolVersion
// "2026-01-26"), then ui/notifications/initialized, then renders
// ui/notifications/tool-input and ui/notifications/tool-result, reports
// ui/notifications/size-changed when its size changes, answers
// ui/resource-teardown and ping with {} and any other request with -32601.
// They load nothing from outside the document, use no storage and follow the
// host's theme (hostContext.theme, then prefers-color-scheme).
//
// What browser tests can read. On both views, <html data-theme> is "light" or
// "dark", and <body data-state> moves through:
//
//	loading     waiting for the answer to ui/initialize
//	waiting     initialized, no tool result yet (sales view)
//	ready       a result is shown (sales view) / the form can be sent (feedback view)
//	refreshing  a refresh_sales call is under way (sales view)
//	submitting  a submit_feedback call is under way (feedback view)
//	submitted   submit_feedback answered without error (feedback view)
//	error       the last step failed; #status says why
//	closed      the host sent ui/resource-teardown
//
// #status (role="status") is a one-line human description of the same state.
// A test that wants "the view renders with its data" waits for
// body[data-state="ready"] and reads #total's data-value (sales) or #topic
// (feedback).
//
// Sales view (SalesReportURI) element ids:
//
//	#title       "Sales report · {region} · {quarter}"
//	#total       the total as currency (locale from hostContext.locale, else the
//	             browser's); data-value holds the raw number
//	#top         the best-selling product
//	#subtitle    "Demo data", or "Refreshed " and a <time> of refreshedAt written in
//	             the locale and time zone of hostContext (else the browser's)
//	body data-revision  the revision shown (0 for the tool's own result)
//	#chart       the inline SVG bar chart (role="img", with <title> and <desc>);
//	             one rect.bar per product with data-product and data-value
//	#summary     the text content of the result; the only thing shown when the
//	             result has no structuredContent (then body data-source="text",
//	             otherwise "structured")
//	#refresh     calls tools/call refresh_sales {region, quarter, revision} and
//	             re-renders from its result
//
// Feedback view (FeedbackFormURI) element ids:
//
//	#topic       the topic from the tool's arguments or result
//	#feedback    the <form> (its submit event needs allow-forms, which is why the
//	             resource asks for the forms permission)
//	#rating-1 … #rating-5   radio inputs named "rating"
//	#comment     the textarea
//	#submit      the submit button; disabled until ui/initialize is answered
//	#result      hidden until a submission is answered; then the text of
//	             submit_feedback's result, data-feedback-id its id (such as
//	             FB-0001) and data-error "true" when the result had IsError
//	#thanks      sends ui/message {role: "user", content: [{type: "text", ...}]}
//	#open-link   sends ui/open-link {url: OpenLinkURL}
package demo

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/mcpapps"
)

// Names of the server and its tools. Documentation and outside checks rely on
// them, so they never change.
const (
	// ServerName is the name the server gives in MCP initialize.
	ServerName = "demo"
	// ServerVersion is the version the server gives in MCP initialize.
	ServerVersion = "1.0.0"

	// ToolSalesReport shows a quarter's sales per product, with a chart view.
	ToolSalesReport = "sales_report"
	// ToolRefreshSales is app-only: the sales view calls it for new figures.
	ToolRefreshSales = "refresh_sales"
	// ToolLookupCustomer is model-only and has no view.
	ToolLookupCustomer = "lookup_customer"
	// ToolFeedbackForm shows a feedback form view.
	ToolFeedbackForm = "feedback_form"
	// ToolSubmitFeedback is app-only: the feedback view calls it to send the form.
	ToolSubmitFeedback = "submit_feedback"
	// ToolRequestRefund is model-only and has no view: it asks the person
	// for the refund's details during its call.
	ToolRequestRefund = "request_refund"
)

// Resources of the two views.
const (
	// SalesReportURI is the sales chart view.
	SalesReportURI = "ui://demo/sales-report.html"
	// FeedbackFormURI is the feedback form view.
	FeedbackFormURI = "ui://demo/feedback-form.html"
)

// Defaults and limits of the tools' arguments.
const (
	// DefaultRegion is the region sales_report shows when none is given.
	DefaultRegion = "Global"
	// DefaultQuarter is the quarter sales_report shows when none is given. It
	// is fixed, not derived from the clock, so a given call always gives the
	// same answer.
	DefaultQuarter = "2026-Q3"
	// Currency is the currency of every amount in the sales figures.
	Currency = "USD"
	// DefaultFeedbackTopic is the topic of feedback_form when none is given.
	DefaultFeedbackTopic = "the demo"
	// MaxCommentRunes bounds a feedback comment.
	MaxCommentRunes = 2000
	// OpenLinkURL is the https page the feedback view asks the host to open.
	OpenLinkURL = "https://github.com/modelcontextprotocol/ext-apps"
)

// Errors the tools report. They reach the caller as the text of a result with
// IsError set, never as a protocol error.
var (
	// ErrUnknownCustomer: no customer has that id or name.
	ErrUnknownCustomer = errors.New("demo: unknown customer")
	// ErrAmbiguousCustomer: more than one customer's name contains the query.
	ErrAmbiguousCustomer = errors.New("demo: ambiguous customer")
	// ErrUnknownRegion: the region is not one of Regions.
	ErrUnknownRegion = errors.New("demo: unknown region")
	// ErrBadArgument: an argument is malformed or out of range.
	ErrBadArgument = errors.New("demo: bad argument")
	// ErrCannotAsk: the person could not be asked (the client does not
	// take a server's questions, or the question failed).
	ErrCannotAsk = errors.New("demo: the person could not be asked")
)

// Regions lists the regions sales_report knows, Global first.
func Regions() []string { return []string{"Global", "EMEA", "Americas", "APAC"} }

// Products lists the product lines of the sales figures, in chart order.
func Products() []string { return []string{"Widgets", "Gadgets", "Gizmos", "Sprockets"} }

// Options configures New. The zero value is ready to use.
type Options struct {
	// Now tells the time of refresh_sales and submit_feedback results; nil
	// means time.Now. The sales figures themselves never depend on it.
	Now func() time.Time
	// Logger receives one debug record per tool call (the tool's name, never
	// its arguments or result); nil discards.
	Logger *slog.Logger
	// OnFeedback, if set, is called with each accepted submit_feedback, so
	// the embedding program (or a test) can see what the form sent.
	OnFeedback func(ctx context.Context, f Feedback)
}

// SalesLine is one product's sales in a SalesReport.
type SalesLine struct {
	Product string `json:"product" jsonschema:"product line"`
	Amount  int64  `json:"amount" jsonschema:"sales in whole currency units"`
}

// SalesReport is the structured content of sales_report and refresh_sales.
type SalesReport struct {
	Region   string      `json:"region" jsonschema:"region of the figures"`
	Quarter  string      `json:"quarter" jsonschema:"quarter of the figures, as YYYY-Qn"`
	Currency string      `json:"currency" jsonschema:"ISO 4217 currency of every amount"`
	Lines    []SalesLine `json:"lines" jsonschema:"sales per product line, in chart order"`
	Total    int64       `json:"total" jsonschema:"sum of the lines"`
	Top      string      `json:"top" jsonschema:"best-selling product line"`
	// Revision is 0 for sales_report and the asked revision for refresh_sales.
	Revision int `json:"revision" jsonschema:"0 for the report, n for the n-th refresh"`
	// RefreshedAt is set by refresh_sales only (RFC 3339).
	RefreshedAt string `json:"refreshedAt,omitempty" jsonschema:"when refresh_sales made the figures (RFC 3339)"`
}

// Customer is a row of the built-in customer table and the structured
// content of lookup_customer.
type Customer struct {
	ID             string `json:"id" jsonschema:"customer id, such as C-1001"`
	Name           string `json:"name" jsonschema:"company name"`
	Tier           string `json:"tier" jsonschema:"Enterprise, Business or Starter"`
	Region         string `json:"region" jsonschema:"home region"`
	AccountManager string `json:"accountManager" jsonschema:"who looks after the account"`
	OpenTickets    int    `json:"openTickets" jsonschema:"support tickets still open"`
	AnnualRevenue  int64  `json:"annualRevenue" jsonschema:"revenue from the customer last year, USD"`
}

// Customers returns the built-in customer table.
func Customers() []Customer {
	return []Customer{
		{"C-1001", "Contoso Ltd", "Enterprise", "EMEA", "Dana Whitfield", 2, 1250000},
		{"C-1002", "Fabrikam Inc", "Business", "Americas", "Luis Ortega", 0, 480000},
		{"C-1003", "Northwind Traders", "Enterprise", "Americas", "Priya Raman", 5, 2100000},
		{"C-1004", "Tailspin Toys", "Starter", "APAC", "Kenji Mori", 1, 65000},
		{"C-1005", "Wide World Importers", "Business", "APAC", "Amara Okafor", 3, 720000},
		{"C-1006", "Adventure Works", "Business", "EMEA", "Sofie Lindqvist", 0, 390000},
	}
}

// Feedback is what submit_feedback accepted; its structured content.
type Feedback struct {
	ID         string `json:"id" jsonschema:"id given to the feedback, such as FB-0001"`
	Topic      string `json:"topic" jsonschema:"what the feedback is about"`
	Rating     int    `json:"rating" jsonschema:"1 to 5"`
	Comment    string `json:"comment,omitempty" jsonschema:"the comment, if any"`
	ReceivedAt string `json:"receivedAt" jsonschema:"when it was received (RFC 3339)"`
}

// FeedbackForm is the structured content of feedback_form.
type FeedbackForm struct {
	Topic     string `json:"topic" jsonschema:"what the feedback is about"`
	MaxRating int    `json:"maxRating" jsonschema:"highest rating"`
}

// Arguments of the tools. Every field is optional unless said otherwise.
type (
	salesArgs struct {
		Region  string `json:"region,omitempty" jsonschema:"Global (default), EMEA, Americas or APAC"`
		Quarter string `json:"quarter,omitempty" jsonschema:"quarter as YYYY-Qn, such as 2026-Q3 (the default)"`
	}
	refreshArgs struct {
		Region   string `json:"region,omitempty" jsonschema:"as for sales_report"`
		Quarter  string `json:"quarter,omitempty" jsonschema:"as for sales_report"`
		Revision int    `json:"revision,omitempty" jsonschema:"which refresh this is, 1 or more; 0 means 1"`
	}
	customerArgs struct {
		Customer string `json:"customer" jsonschema:"customer id (such as C-1001) or name, or a unique part of the name"`
	}
	formArgs struct {
		Topic string `json:"topic,omitempty" jsonschema:"what the feedback is about"`
	}
	submitArgs struct {
		Rating  int    `json:"rating" jsonschema:"1 (poor) to 5 (excellent)"`
		Comment string `json:"comment,omitempty" jsonschema:"free text, at most 2000 characters"`
		Topic   string `json:"topic,omitempty" jsonschema:"what the feedback is about"`
	}
)

//go:embed views
var views embed.FS

// Markers where each view's HTML receives the shared stylesheet and bridge
// script, so the two documents stay self-contained without a build step.
const (
	styleMarker  = "/*@style@*/"
	bridgeMarker = "/*@bridge@*/"
)

// server holds the state of one demo server: the clock and the feedback
// counter. Each New gets its own.
type server struct {
	now        func() time.Time
	log        *slog.Logger
	onFeedback func(context.Context, Feedback)

	mu       sync.Mutex
	feedback int
}

// New returns the demo server with its tools and view resources registered
// and the MCP Apps extension advertised in its capabilities.
func New(opts Options) *mcp.Server {
	s := &server{now: opts.Now, log: opts.Logger, onFeedback: opts.OnFeedback}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}

	caps := &mcp.ServerCapabilities{}
	caps.AddExtension(mcpapps.ExtensionID, map[string]any{"mimeTypes": []string{mcpapps.MIMEType}})
	srv := mcp.NewServer(&mcp.Implementation{
		Name:    ServerName,
		Title:   "Demo MCP App server",
		Version: ServerVersion,
	}, &mcp.ServerOptions{
		Capabilities: caps,
		Instructions: "Demo data only: sales figures and customers are made up.",
	})

	addTool(srv, &mcp.Tool{
		Name:        ToolSalesReport,
		Title:       "Sales report",
		Description: "Sales per product line for a region and quarter, with a chart view. Made-up demo data.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Meta:        toolMeta(SalesReportURI),
	}, s.salesReport)
	addTool(srv, &mcp.Tool{
		Name:        ToolRefreshSales,
		Title:       "Refresh sales",
		Description: "Newer sales figures for the sales chart view. Called by the view only.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Meta:        toolMeta(SalesReportURI, mcpapps.VisibilityApp),
	}, s.refreshSales)
	addTool(srv, &mcp.Tool{
		Name:        ToolLookupCustomer,
		Title:       "Look up customer",
		Description: "Finds a customer by id or name in the demo customer table: tier, region, account manager, open tickets, revenue.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Meta:        mcp.Meta{"ui": map[string]any{"visibility": []string{mcpapps.VisibilityModel}}},
	}, s.lookupCustomer)
	addTool(srv, &mcp.Tool{
		Name:        ToolFeedbackForm,
		Title:       "Feedback form",
		Description: "Shows the person a form to rate something from 1 to 5 and leave a comment.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		Meta:        toolMeta(FeedbackFormURI),
	}, s.feedbackForm)
	addTool(srv, &mcp.Tool{
		Name:        ToolSubmitFeedback,
		Title:       "Submit feedback",
		Description: "Records the feedback form's answer. Called by the view only.",
		Meta:        toolMeta(FeedbackFormURI, mcpapps.VisibilityApp),
	}, s.submitFeedback)
	addTool(srv, &mcp.Tool{
		Name:        ToolRequestRefund,
		Title:       "Request a refund",
		Description: "Refunds an order after asking the person for the details. Demo only: no money moves.",
		Meta:        mcp.Meta{"ui": map[string]any{"visibility": []string{mcpapps.VisibilityModel}}},
	}, s.requestRefund)

	addView(srv, SalesReportURI, "sales-report", "Sales report",
		"Bar chart of a quarter's sales per product, with a Refresh button.",
		"views/sales-report.html", map[string]any{
			"csp": map[string]any{
				// The http: entry must be dropped by the host: only https
				// origins may widen a view's CSP.
				"connectDomains":  []string{"https://api.example.com", "http://insecure.example.com"},
				"resourceDomains": []string{"https://cdn.example.com"},
			},
			"prefersBorder": true,
		})
	addView(srv, FeedbackFormURI, "feedback-form", "Feedback form",
		"A form with a rating and a comment, sent through the host.",
		"views/feedback-form.html", map[string]any{
			"permissions": map[string]any{"forms": map[string]any{}},
		})
	return srv
}

// toolMeta is a tool's _meta for a view: _meta.ui.resourceUri, the legacy
// _meta["ui/resourceUri"] that older hosts read, and the visibility when it
// is not the default (both).
func toolMeta(uri string, visibility ...string) mcp.Meta {
	ui := map[string]any{"resourceUri": uri}
	if len(visibility) > 0 {
		ui["visibility"] = visibility
	}
	return mcp.Meta{"ui": ui, "ui/resourceUri": uri}
}

// addView registers one view resource. Its _meta.ui sits both on the
// resources/list entry and on the content item, so a host that reads either
// finds it.
func addView(srv *mcp.Server, uri, name, title, description, file string, ui map[string]any) {
	html := viewHTML(file)
	srv.AddResource(&mcp.Resource{
		URI:         uri,
		Name:        name,
		Title:       title,
		Description: description,
		MIMEType:    mcpapps.MIMEType,
		Size:        int64(len(html)),
		Meta:        mcp.Meta{"ui": ui},
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI:      uri,
			MIMEType: mcpapps.MIMEType,
			Text:     html,
			Meta:     mcp.Meta{"ui": ui},
		}}}, nil
	})
}

// viewHTML returns an embedded view with the shared stylesheet and bridge
// script put in. The files are part of the binary, so a missing one is a
// build mistake, not a runtime condition.
func viewHTML(file string) string {
	page := string(mustRead(file))
	for marker, part := range map[string]string{styleMarker: "views/base.css", bridgeMarker: "views/bridge.js"} {
		if !strings.Contains(page, marker) {
			panic(fmt.Sprintf("demo: view %s has no %s marker", file, marker))
		}
		page = strings.Replace(page, marker, string(mustRead(part)), 1)
	}
	return page
}

func mustRead(file string) []byte {
	b, err := views.ReadFile(file)
	if err != nil {
		panic(fmt.Sprintf("demo: embedded file %s: %v", file, err))
	}
	return b
}

func (s *server) called(ctx context.Context, tool string) {
	s.log.DebugContext(ctx, "demo tool called", "tool", tool)
}

func (s *server) salesReport(ctx context.Context, _ *mcp.CallToolRequest, in salesArgs) (*mcp.CallToolResult, SalesReport, error) {
	s.called(ctx, ToolSalesReport)
	r, err := report(in.Region, in.Quarter, 0)
	if err != nil {
		return nil, SalesReport{}, err
	}
	return textResult(salesText(r)), r, nil
}

func (s *server) refreshSales(ctx context.Context, _ *mcp.CallToolRequest, in refreshArgs) (*mcp.CallToolResult, SalesReport, error) {
	s.called(ctx, ToolRefreshSales)
	rev := in.Revision
	if rev < 0 {
		return nil, SalesReport{}, fmt.Errorf("%w: revision %d is negative", ErrBadArgument, rev)
	}
	if rev == 0 {
		rev = 1
	}
	r, err := report(in.Region, in.Quarter, rev)
	if err != nil {
		return nil, SalesReport{}, err
	}
	r.RefreshedAt = s.now().UTC().Format(time.RFC3339)
	return textResult(salesText(r)), r, nil
}

func (s *server) lookupCustomer(ctx context.Context, _ *mcp.CallToolRequest, in customerArgs) (*mcp.CallToolResult, Customer, error) {
	s.called(ctx, ToolLookupCustomer)
	c, err := findCustomer(in.Customer)
	if err != nil {
		return nil, Customer{}, err
	}
	text := fmt.Sprintf("%s (%s): %s customer in %s, account manager %s, %d open support tickets, annual revenue %s %s.",
		c.Name, c.ID, c.Tier, c.Region, c.AccountManager, c.OpenTickets, Currency, groupDigits(c.AnnualRevenue))
	return textResult(text), c, nil
}

func (s *server) feedbackForm(ctx context.Context, _ *mcp.CallToolRequest, in formArgs) (*mcp.CallToolResult, FeedbackForm, error) {
	s.called(ctx, ToolFeedbackForm)
	topic := strings.TrimSpace(in.Topic)
	if topic == "" {
		topic = DefaultFeedbackTopic
	}
	text := fmt.Sprintf("A feedback form about %s is shown to the person: a rating from 1 to 5 and an optional comment. Nothing is recorded until they send it.", topic)
	return textResult(text), FeedbackForm{Topic: topic, MaxRating: 5}, nil
}

func (s *server) submitFeedback(ctx context.Context, _ *mcp.CallToolRequest, in submitArgs) (*mcp.CallToolResult, Feedback, error) {
	s.called(ctx, ToolSubmitFeedback)
	if in.Rating < 1 || in.Rating > 5 {
		return nil, Feedback{}, fmt.Errorf("%w: rating must be from 1 to 5, got %d", ErrBadArgument, in.Rating)
	}
	comment := strings.TrimSpace(in.Comment)
	if n := len([]rune(comment)); n > MaxCommentRunes {
		return nil, Feedback{}, fmt.Errorf("%w: comment has %d characters, at most %d are accepted", ErrBadArgument, n, MaxCommentRunes)
	}
	topic := strings.TrimSpace(in.Topic)
	if topic == "" {
		topic = DefaultFeedbackTopic
	}
	s.mu.Lock()
	s.feedback++
	n := s.feedback
	s.mu.Unlock()
	f := Feedback{
		ID:         fmt.Sprintf("FB-%04d", n),
		Topic:      topic,
		Rating:     in.Rating,
		Comment:    comment,
		ReceivedAt: s.now().UTC().Format(time.RFC3339),
	}
	if s.onFeedback != nil {
		s.onFeedback(ctx, f)
	}
	return textResult(fmt.Sprintf("Thank you! Feedback %s about %s was recorded with a rating of %d out of 5.", f.ID, f.Topic, f.Rating)), f, nil
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// quarterPattern accepts "2026-Q3", "2026Q3" and "2026 q3".
var quarterPattern = regexp.MustCompile(`^(\d{4})[- ]?Q([1-4])$`)

// report makes the figures of a region and quarter. They are derived from a
// hash of the inputs, so the same call always gives the same figures and a
// refresh (a higher revision) gives slightly different ones, as new orders
// would.
func report(region, quarter string, revision int) (SalesReport, error) {
	reg, err := canonicalRegion(region)
	if err != nil {
		return SalesReport{}, err
	}
	q := strings.ToUpper(strings.TrimSpace(quarter))
	if q == "" {
		q = DefaultQuarter
	}
	m := quarterPattern.FindStringSubmatch(q)
	if m == nil {
		return SalesReport{}, fmt.Errorf("%w: quarter %q is not of the form YYYY-Qn, such as %s", ErrBadArgument, quarter, DefaultQuarter)
	}
	q = m[1] + "-Q" + m[2]

	r := SalesReport{Region: reg, Quarter: q, Currency: Currency, Revision: revision}
	for _, p := range Products() {
		var amount int64
		if reg == "Global" {
			for _, sub := range Regions()[1:] {
				amount += figure(sub, q, p, revision)
			}
		} else {
			amount = figure(reg, q, p, revision)
		}
		r.Lines = append(r.Lines, SalesLine{Product: p, Amount: amount})
		r.Total += amount
	}
	top := r.Lines[0]
	for _, l := range r.Lines[1:] {
		if l.Amount > top.Amount {
			top = l
		}
	}
	r.Top = top.Product
	return r, nil
}

// figure is one product's sales in one region: a base between 40,000 and
// 160,000 from the hash of region, quarter and product, moved by up to ±8%
// per revision, rounded to hundreds.
func figure(region, quarter, product string, revision int) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s|%s|%s", region, quarter, product)
	base := 40000 + int64(h.Sum64()%120000)
	if revision > 0 {
		fmt.Fprintf(h, "|%d", revision)
		pct := int64(h.Sum64()%17) - 8
		base += base * pct / 100
	}
	return base / 100 * 100
}

func canonicalRegion(region string) (string, error) {
	region = strings.TrimSpace(region)
	if region == "" {
		return DefaultRegion, nil
	}
	for _, r := range Regions() {
		if strings.EqualFold(r, region) {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w: %q; known regions are %s", ErrUnknownRegion, region, strings.Join(Regions(), ", "))
}

// salesText is what the model reads: the figures in one paragraph.
func salesText(r SalesReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Sales report for %s, %s", r.Region, r.Quarter)
	if r.Revision > 0 {
		fmt.Fprintf(&b, " (refresh %d)", r.Revision)
	}
	fmt.Fprintf(&b, ": total %s %s.", r.Currency, groupDigits(r.Total))
	amounts := make([]int64, len(r.Lines))
	for i, l := range r.Lines {
		amounts[i] = l.Amount
	}
	pct := shares(amounts)
	for i, l := range r.Lines {
		fmt.Fprintf(&b, " %s %s %s (%d%%).", l.Product, r.Currency, groupDigits(l.Amount), pct[i])
	}
	fmt.Fprintf(&b, " Best seller: %s. Demo data.", r.Top)
	return b.String()
}

// shares are the whole percentages of each amount in their sum, which add
// up to 100 (when the sum is not zero) and are each within one point of
// the exact share: every amount gets its exact share rounded down, and the
// points still missing go one each to the largest remainders (the
// largest remainder method; a tie goes to the earlier amount). Rounding
// each share on its own can make 99 or 101, and rounding down alone
// (24.9% shown as 24%) makes less than 100. Amounts are not negative.
func shares(amounts []int64) []int {
	out := make([]int, len(amounts))
	var total int64
	for _, a := range amounts {
		total += a
	}
	if total <= 0 {
		return out
	}
	rem := make([]int64, len(amounts))
	given := 0
	for i, a := range amounts {
		out[i] = int(a * 100 / total)
		rem[i] = a * 100 % total
		given += out[i]
	}
	order := make([]int, len(amounts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(rem[y], rem[x]) })
	for _, i := range order[:100-given] {
		out[i]++
	}
	return out
}

// findCustomer matches an id exactly, then a name exactly, then a unique
// part of a name, all ignoring case.
func findCustomer(query string) (Customer, error) {
	q := strings.TrimSpace(query)
	if q == "" {
		return Customer{}, fmt.Errorf("%w: give a customer id or name", ErrBadArgument)
	}
	all := Customers()
	for _, c := range all {
		if strings.EqualFold(c.ID, q) || strings.EqualFold(c.Name, q) {
			return c, nil
		}
	}
	var found []Customer
	for _, c := range all {
		if strings.Contains(strings.ToLower(c.Name), strings.ToLower(q)) {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return Customer{}, fmt.Errorf("%w: no customer has the id or name %q", ErrUnknownCustomer, q)
	default:
		names := make([]string, len(found))
		for i, c := range found {
			names[i] = c.Name
		}
		sort.Strings(names)
		return Customer{}, fmt.Errorf("%w: %q matches %s", ErrAmbiguousCustomer, q, strings.Join(names, ", "))
	}
}

// groupDigits writes n with comma thousands separators, as the model and
// the person expect to read amounts.
func groupDigits(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
