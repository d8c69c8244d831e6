package mcpapps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const testHTML = "<!doctype html><html><body>view</body></html>"

func textItem(uri, mime, text string) []*mcp.ResourceContents {
	return []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}
}

func TestCheckResourceAccepts(t *testing.T) {
	const uri = "ui://weather/view.html"
	// A blob as go-sdk decodes it from the wire: base64 in JSON, bytes in Go.
	var blob mcp.ResourceContents
	if err := json.Unmarshal([]byte(`{"uri":"ui://weather/view.html","mimeType":"text/html;profile=mcp-app","blob":"PCFkb2N0eXBlIGh0bWw+PGh0bWw+PGJvZHk+dmlldzwvYm9keT48L2h0bWw+"}`), &blob); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		contents []*mcp.ResourceContents
		max      int
	}{
		{"text", textItem(uri, MIMEType, testHTML), 0},
		{"base64 blob", []*mcp.ResourceContents{&blob}, 0},
		{"exactly at the limit", textItem(uri, MIMEType, testHTML), len(testHTML)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html, err := CheckResource(uri, tt.contents, tt.max)
			if err != nil {
				t.Fatalf("CheckResource: %v", err)
			}
			if string(html) != testHTML {
				t.Errorf("HTML = %q, want %q", html, testHTML)
			}
		})
	}
}

func TestCheckResourceRefuses(t *testing.T) {
	const uri = "ui://weather/view.html"
	big := strings.Repeat("x", DefaultMaxResourceBytes+1)
	tests := []struct {
		name       string
		uri        string
		contents   []*mcp.ResourceContents
		max        int
		wantReason string
	}{
		{"https scheme", "https://example.com/view.html", textItem("https://example.com/view.html", MIMEType, testHTML), 0, ReasonScheme},
		{"file scheme", "file:///etc/passwd", textItem("file:///etc/passwd", MIMEType, testHTML), 0, ReasonScheme},
		{"no scheme", "weather/view.html", textItem("weather/view.html", MIMEType, testHTML), 0, ReasonScheme},
		{"upper-case scheme", "UI://weather", textItem("UI://weather", MIMEType, testHTML), 0, ReasonScheme},
		{"ui:// alone", "ui://", textItem("ui://", MIMEType, testHTML), 0, ReasonScheme},
		{"empty uri", "", textItem("", MIMEType, testHTML), 0, ReasonScheme},
		{"space in uri", "ui://a b", textItem("ui://a b", MIMEType, testHTML), 0, ReasonScheme},
		{"newline in uri", "ui://a\nb", textItem("ui://a\nb", MIMEType, testHTML), 0, ReasonScheme},
		{"bad escape", "ui://a%zz", textItem("ui://a%zz", MIMEType, testHTML), 0, ReasonScheme},
		{"uri too long", "ui://" + strings.Repeat("a", maxURIBytes), nil, 0, ReasonScheme},
		{"no content", uri, nil, 0, ReasonContent},
		{"nil item", uri, []*mcp.ResourceContents{nil}, 0, ReasonContent},
		{"two items", uri, append(textItem(uri, MIMEType, testHTML), textItem(uri, MIMEType, testHTML)...), 0, ReasonContent},
		{"item for another uri", uri, textItem("ui://weather/other.html", MIMEType, testHTML), 0, ReasonContent},
		{"plain text/html", uri, textItem(uri, "text/html", testHTML), 0, ReasonMIME},
		{"space before profile", uri, textItem(uri, "text/html; profile=mcp-app", testHTML), 0, ReasonMIME},
		{"upper case mime", uri, textItem(uri, "TEXT/HTML;PROFILE=MCP-APP", testHTML), 0, ReasonMIME},
		{"no mime", uri, textItem(uri, "", testHTML), 0, ReasonMIME},
		{"both text and blob", uri, []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEType, Text: testHTML, Blob: []byte(testHTML)}}, 0, ReasonContent},
		{"empty", uri, textItem(uri, MIMEType, ""), 0, ReasonContent},
		{"only whitespace", uri, textItem(uri, MIMEType, " \n\t "), 0, ReasonContent},
		{"empty blob", uri, []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEType, Blob: []byte{}}}, 0, ReasonContent},
		{"one byte over the limit", uri, textItem(uri, MIMEType, testHTML), len(testHTML) - 1, ReasonSize},
		{"over the default limit", uri, textItem(uri, MIMEType, big), 0, ReasonSize},
		{"blob over the limit", uri, []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEType, Blob: []byte(testHTML)}}, 10, ReasonSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			html, err := CheckResource(tt.uri, tt.contents, tt.max)
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RefusedError", err)
			}
			if re.Reason != tt.wantReason {
				t.Errorf("Reason = %q (%v), want %q", re.Reason, err, tt.wantReason)
			}
			if html != nil {
				t.Errorf("refused resource still returned %d bytes of HTML", len(html))
			}
			if len(err.Error()) > 700 {
				t.Errorf("error is %d bytes long; it goes into the audit log and must stay short", len(err.Error()))
			}
		})
	}
}

func TestCheckResourceDefaultLimit(t *testing.T) {
	const uri = "ui://big"
	html := strings.Repeat("x", DefaultMaxResourceBytes)
	if _, err := CheckResource(uri, textItem(uri, MIMEType, html), 0); err != nil {
		t.Errorf("HTML of exactly DefaultMaxResourceBytes refused: %v", err)
	}
	if _, err := CheckResource(uri, textItem(uri, MIMEType, html), -1); err != nil {
		t.Errorf("negative limit should mean the default: %v", err)
	}
}

func TestCheckResourceReturnsACopy(t *testing.T) {
	const uri = "ui://a"
	blob := []byte(testHTML)
	html, err := CheckResource(uri, []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEType, Blob: blob}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	html[0] = 'X'
	if string(blob) != testHTML {
		t.Errorf("changing the returned HTML changed the resource contents")
	}
}

func TestHTMLSHA256(t *testing.T) {
	// Known SHA-256 vectors (FIPS 180-2 "abc", and the empty string).
	for in, want := range map[string]string{
		"":    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		"abc": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	} {
		if got := HTMLSHA256([]byte(in)); got != want {
			t.Errorf("HTMLSHA256(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestRealServerInMemory takes a go-sdk MCP server's own answers (tools/list,
// resources/list, resources/read over the in-memory transport) through the
// readers and checks, as an agent would.
func TestRealServerInMemory(t *testing.T) {
	ctx := context.Background()
	const viewURI = "ui://weather/view.html"
	server := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: "1.0.0"}, nil)
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := json.RawMessage(`{"type":"object"}`)
	server.AddTool(&mcp.Tool{Name: "get_weather", InputSchema: schema,
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": viewURI}, "ui/resourceUri": viewURI}}, noop)
	server.AddTool(&mcp.Tool{Name: "refresh", InputSchema: schema,
		Meta: mcp.Meta{"ui": map[string]any{"resourceUri": viewURI, "visibility": []string{"app"}}}}, noop)
	server.AddTool(&mcp.Tool{Name: "legacy", InputSchema: schema, Meta: mcp.Meta{"ui/resourceUri": "ui://weather/old.html"}}, noop)
	server.AddTool(&mcp.Tool{Name: "plain", InputSchema: schema}, noop)
	server.AddResource(&mcp.Resource{Name: "view", URI: viewURI, MIMEType: MIMEType,
		Meta: mcp.Meta{"ui": map[string]any{"permissions": map[string]any{"forms": map[string]any{}}}}},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
				URI: viewURI, MIMEType: MIMEType, Blob: []byte(testHTML),
				Meta: mcp.Meta{"ui": map[string]any{"csp": map[string]any{
					"connectDomains":  []string{"https://api.weather.example", "http://insecure.example"},
					"resourceDomains": []string{"https://cdn.example.com/"},
				}}},
			}}}, nil
		})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1.0.0"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		URI        string
		Model, App bool
	}
	got := map[string]seen{}
	for _, tool := range tools.Tools {
		ui, err := ReadToolUI(tool.Meta)
		if err != nil {
			t.Fatalf("tool %s: %v", tool.Name, err)
		}
		got[tool.Name] = seen{ui.ResourceURI, ui.VisibleTo(VisibilityModel), ui.VisibleTo(VisibilityApp)}
	}
	want := map[string]seen{
		"get_weather": {viewURI, true, true},
		"refresh":     {viewURI, false, true},
		"legacy":      {"ui://weather/old.html", true, true},
		"plain":       {"", true, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools as read (-want +got):\n%s", diff)
	}

	list, err := cs.ListResources(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: viewURI})
	if err != nil {
		t.Fatal(err)
	}
	html, err := CheckResource(viewURI, read.Contents, 0)
	if err != nil {
		t.Fatalf("CheckResource: %v", err)
	}
	if string(html) != testHTML {
		t.Errorf("HTML from the base64 blob = %q, want %q", html, testHTML)
	}
	ui, err := ReadResourceUI(read.Contents[0].Meta, list.Resources[0].Meta)
	if err != nil {
		t.Fatal(err)
	}
	// The item declares csp, so the list entry (which asked for forms) is not used.
	if ui.Permissions.Forms {
		t.Errorf("forms taken from the list entry although the item has _meta.ui")
	}
	p := BuildCSP(ui.CSP)
	if !strings.Contains(p.Header, "connect-src https://api.weather.example;") ||
		!strings.Contains(p.Header, "script-src 'self' 'unsafe-inline' 'unsafe-eval' blob: data: https://cdn.example.com;") {
		t.Errorf("CSP = %q, want the declared https origins", p.Header)
	}
	if diff := cmp.Diff([]DroppedEntry{{Field: "connectDomains", Value: "http://insecure.example", Reason: "http: is not https:"}}, p.Dropped); diff != "" {
		t.Errorf("Dropped (-want +got):\n%s", diff)
	}
}

// TestRealViewFitsDefaultLimit checks the official debug server's bundled
// single-file view (from npm, in node_modules) passes CheckResource as that
// server serves it, so the default limit does not refuse real views.
func TestRealViewFitsDefaultLimit(t *testing.T) {
	path := filepath.Join("..", "node_modules", "@modelcontextprotocol", "server-debug", "dist", "mcp-app.html")
	html, err := os.ReadFile(path)
	if err != nil {
		if testing.Short() {
			t.Skipf("no npm peer under -short: %v", err)
		}
		t.Fatalf("the npm package @modelcontextprotocol/server-debug@2.0.3 is missing (run npm ci at the module root): %v", err)
	}
	const uri = "ui://debug-tool/mcp-app.html" // as that server names it
	got, err := CheckResource(uri, textItem(uri, MIMEType, string(html)), 0)
	if err != nil {
		t.Fatalf("CheckResource refused the real view (%d bytes): %v", len(html), err)
	}
	if !bytes.Equal(got, html) {
		t.Errorf("HTML changed on the way through")
	}
}

// FuzzCheckResource: whatever the input, CheckResource never panics, refuses
// with a known reason, or returns non-empty HTML within the limit.
func FuzzCheckResource(f *testing.F) {
	f.Add("ui://a", "ui://a", MIMEType, testHTML, []byte(nil), 0)
	f.Add("ui://a", "ui://a", MIMEType, "", []byte(testHTML), 10)
	f.Add("https://a", "ui://a", "text/html", " ", []byte(nil), -1)
	f.Fuzz(func(t *testing.T, uri, itemURI, mime, text string, blob []byte, max int) {
		html, err := CheckResource(uri, []*mcp.ResourceContents{{URI: itemURI, MIMEType: mime, Text: text, Blob: blob}}, max)
		if err != nil {
			var re *RefusedError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *RefusedError", err)
			}
			switch re.Reason {
			case ReasonScheme, ReasonMIME, ReasonSize, ReasonContent:
			default:
				t.Errorf("unknown reason %q", re.Reason)
			}
			return
		}
		limit := max
		if limit <= 0 {
			limit = DefaultMaxResourceBytes
		}
		if len(html) == 0 || len(html) > limit || !strings.HasPrefix(uri, "ui://") || mime != MIMEType || itemURI != uri {
			t.Errorf("accepted uri=%q item=%q mime=%q with %d bytes (limit %d)", uri, itemURI, mime, len(html), limit)
		}
	})
}
