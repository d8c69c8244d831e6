package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/internal/testenv"
)

// The start-up log names the address the service really listens on (a
// port of 0 is the one chosen), the public base URL beside it under its
// own name, and the sign-in really in force; in local mode the person at
// the terminal is told where the playground is.
func TestStartupSaysWhereAndHow(t *testing.T) {
	t.Run("local mode", func(t *testing.T) {
		base, logs, stdout, _ := startServiceOut(t, map[string]string{"TICKETIQ_ADDR": "127.0.0.1:0"})
		l := logs.logLine("listening")
		addr, _ := l["addr"].(string)
		if !regexp.MustCompile(`^127\.0\.0\.1:[1-9][0-9]*$`).MatchString(addr) {
			t.Fatalf("listening on %q, want the port really chosen", addr)
		}
		if l["public_base_url"] != "http://localhost:3978" || l["signin"] != "local development" || l["playground"] != "http://"+addr+"/playground" {
			t.Errorf("listening line %v", l)
		}
		if _, ok := l["url"]; ok {
			t.Errorf("the public base URL is shown as the listener's URL: %v", l)
		}
		if code, _ := get(t, http.DefaultClient, base+"/healthz"); code != 200 {
			t.Errorf("the logged address does not answer: %d", code)
		}
		// The default public base URL is on port 3978, not this one.
		if w := logs.logLine("the public base URL is not this listener: links in cards and the sign-in go there; set TICKETIQ_PUBLIC_BASE_URL to the address people open"); w == nil || w["addr"] != addr {
			t.Errorf("no warning that the public base URL is another port: %v", w)
		}
		want := fmt.Sprintf("teamsbot is listening on http://%s: open http://%s/playground to talk to the bot (Ctrl-C stops it)\n", addr, addr)
		if stdout.String() != want {
			t.Errorf("stdout %q, want %q", stdout.String(), want)
		}
	})
	t.Run("sign-in off", func(t *testing.T) {
		_, logs, stdout, _ := startServiceOut(t, map[string]string{"TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example", "TICKETIQ_PLAYGROUND": "false"})
		if l := logs.logLine("listening"); l["signin"] != "off" || l["public_base_url"] != "https://bot.contoso.example" || l["playground"] != nil {
			t.Errorf("listening line %v", l)
		}
		if logs.logLine("the public base URL is not this listener: links in cards and the sign-in go there; set TICKETIQ_PUBLIC_BASE_URL to the address people open") != nil {
			t.Error("warned of a public https host, which a proxy serves")
		}
		if stdout.String() != "" {
			t.Errorf("printed %q outside local mode", stdout.String())
		}
	})
	t.Run("Entra ID", func(t *testing.T) {
		m := testenv.StartMockOIDC(t)
		_, logs, _ := startService(t, map[string]string{
			"TICKETIQ_PUBLIC_BASE_URL": "https://bot.contoso.example", "TICKETIQ_OIDC_ISSUER": m.Issuer(),
			"TICKETIQ_OIDC_CLIENT_ID": m.ClientID, "TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
		})
		if l := logs.logLine("listening"); l["signin"] != "Entra ID (issuer "+m.Issuer()+")" {
			t.Errorf("listening line %v", l)
		}
	})
}

// slowMCPServer is a Streamable HTTP MCP server on loopback that answers
// nothing, not even initialize, until release is closed: a server that
// takes its time to start.
func slowMCPServer(t *testing.T) (url string, release func()) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hello", Description: "says hello", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello from the slow server"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	gate := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	closed := false
	release = func() {
		if !closed {
			closed = true
			close(gate)
		}
	}
	t.Cleanup(release)
	return hs.URL + "/mcp", release
}

// The service listens before its MCP servers are up: liveness answers at
// once, readiness says which servers are still starting, and a message
// that comes meanwhile waits for them within its turn and is answered
// with their tools.
func TestListensWhileMCPServersStart(t *testing.T) {
	url, release := slowMCPServer(t)
	cfgPath := filepath.Join(t.TempDir(), "agents.yaml")
	if err := os.WriteFile(cfgPath, []byte("agents:\n  - id: default\n    servers:\n      - name: slow\n        url: "+url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := startService(t, map[string]string{"TICKETIQ_CONFIG": cfgPath})
	c := &http.Client{Timeout: 5 * time.Second}
	if code, body := get(t, c, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while the server starts: %d %s", code, body)
	}
	if code, body := get(t, c, base+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready: MCP servers still starting: slow\n" {
		t.Errorf("/readyz while the server starts: %d %q", code, body)
	}

	connector := newRecordingConnector(t)
	activity, _ := json.Marshal(map[string]any{
		"type": "message", "id": "act-early", "timestamp": time.Now().UTC().Format(time.RFC3339),
		"serviceUrl": connector.URL, "channelId": "msteams",
		"from":         map[string]any{"id": "29:user", "name": "Ada Lovelace", "aadObjectId": "user-oid-1"},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": "tenant-1"},
		"channelData":  map[string]any{"tenant": map[string]any{"id": "tenant-1"}},
		"text":         "/hello {}",
	})
	resp, err := c.Post(base+"/api/messages", "application/json", bytes.NewReader(activity))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST /api/messages while the server starts: %d", resp.StatusCode)
	}
	time.Sleep(300 * time.Millisecond)
	if code, _ := get(t, c, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while a turn waits for the server: %d", code)
	}
	release()

	if got := connector.waitAttachments(func(b []byte) string {
		if strings.Contains(string(b), "hello from the slow server") {
			return "answered"
		}
		return ""
	}); got == "" {
		t.Fatalf("the message that came while the server started got no answer with its tool's result; logs:\n%s", logs)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, body := get(t, c, base+"/readyz")
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz after the server started: %d %q", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if logs.logLine("MCP server connected") == nil {
		t.Errorf("the server's start is not logged:\n%s", logs)
	}
}
