package agent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/mcpapps"
)

// A server can name a new ui:// resource for every tool (and, with
// tools/list_changed, for ever): the resource cache, keyed by those URIs,
// stays within its bounds, and a resource still cached is not read again.
func TestResourceCacheIsBounded(t *testing.T) {
	const tools = maxCachedResources + 20
	var reads atomic.Int32
	newServer := func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "many", Version: "1.0.0"}, nil)
		for i := range tools {
			uri := fmt.Sprintf("ui://many/%d.html", i)
			srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: map[string]any{"type": "object"},
				Meta: mcp.Meta{"ui": map[string]any{"resourceUri": uri}}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
				})
		}
		srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "views", URITemplate: "ui://many/{n}.html", MIMEType: mcpapps.MIMEType},
			func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				reads.Add(1)
				html := "<!doctype html><p>" + req.Params.URI + strings.Repeat(" ", 1<<10)
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: mcpapps.MIMEType, Text: html}}}, nil
			})
		return srv
	}
	cfg := Config{Agents: []AgentConfig{{ID: "a", Servers: []ServerConfig{{Name: "many", Builtin: "many"}}}}}
	s, err := New(context.Background(), cfg, Options{AppsEnabled: true, Builtins: map[string]func() *mcp.Server{"many": newServer}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	person := Person{TenantID: "t"}
	for i := range tools {
		ans, err := s.Run(context.Background(), Request{Person: person, Text: fmt.Sprintf("/t%d {}", i)})
		if err != nil || len(ans.Views) != 1 {
			t.Fatalf("run %d: %v, %d views, refusals %+v", i, err, len(ans.Views), ans.Refusals)
		}
	}
	c := s.conns[0]
	c.cmu.RLock()
	n, bytes := len(c.resources), c.resBytes
	held := 0
	for _, e := range c.resources {
		held += len(e.html)
	}
	c.cmu.RUnlock()
	if n > maxCachedResources || n == 0 {
		t.Errorf("%d resources cached after %d were read, want 1 to %d", n, tools, maxCachedResources)
	}
	if bytes != held {
		t.Errorf("cache counts %d bytes of HTML, holds %d", bytes, held)
	}

	// The last resource read is cached: calling its tool again reads nothing.
	before := reads.Load()
	if ans, err := s.Run(context.Background(), Request{Person: person, Text: fmt.Sprintf("/t%d {}", tools-1)}); err != nil || len(ans.Views) != 1 {
		t.Fatalf("run again: %v, %+v", err, ans)
	}
	if got := reads.Load(); got != before {
		t.Errorf("a cached resource was read again (%d reads, want %d)", got, before)
	}
}
