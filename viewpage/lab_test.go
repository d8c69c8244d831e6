package viewpage_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"
	"teamsbot/mcpapps"
)

const labViewURI = "ui://lab/view.html"

// labServer is an MCP server made for the host's security tests: lab_view
// has a view that the test drives from inside its frame, lab_app is
// app-only, lab_model is model-only, and lab_fail (app-only) fails with a
// JSON-RPC error that repeats its arguments, as a careless server might.
func labServer(t testing.TB) func() *mcp.Server {
	html, err := os.ReadFile("testdata/lab-view.html")
	if err != nil {
		t.Fatal(err)
	}
	return func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "lab", Version: "1.0.0"}, nil)
		text := func(s string) mcp.ToolHandler {
			return func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}, nil
			}
		}
		srv.AddTool(&mcp.Tool{Name: "lab_view", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": labViewURI}}}, text("lab result"))
		srv.AddTool(&mcp.Tool{Name: "lab_app", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}}, text("app ok"))
		srv.AddTool(&mcp.Tool{Name: "lab_model", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"model"}}}}, text("model ok"))
		srv.AddTool(&mcp.Tool{Name: "lab_fail", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"visibility": []string{"app"}}}},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return nil, fmt.Errorf("lab_fail cannot handle %s", req.Params.Arguments)
			})
		srv.AddResource(&mcp.Resource{URI: labViewURI, Name: "lab view", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
					URI: labViewURI, MIMEType: mcpapps.MIMEType, Text: string(html),
				}}}, nil
			})
		return srv
	}
}

// newLabEnv is an env whose agent also has the lab server.
func newLabEnv(t testing.TB) *env {
	return newEnv(t, envOptions{
		servers:  []agent.ServerConfig{{Name: "lab", Builtin: "lab"}},
		builtins: map[string]func() *mcp.Server{"lab": labServer(t)},
	})
}

// askingLabServer serves the lab view under a resource that asks for the
// camera, the microphone and writing to the clipboard.
func askingLabServer(t testing.TB) func() *mcp.Server {
	html, err := os.ReadFile("testdata/lab-view.html")
	if err != nil {
		t.Fatal(err)
	}
	return func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "asking", Version: "1.0.0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "asking_view", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": "ui://asking/view.html"}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "asking"}}}, nil
			})
		asks := map[string]any{"camera": map[string]any{}, "microphone": map[string]any{}, "clipboardWrite": map[string]any{}}
		srv.AddResource(&mcp.Resource{URI: "ui://asking/view.html", Name: "asking view", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
					URI: "ui://asking/view.html", MIMEType: mcpapps.MIMEType, Text: string(html),
					Meta: mcp.Meta{"ui": map[string]any{"permissions": asks}},
				}}}, nil
			})
		return srv
	}
}
