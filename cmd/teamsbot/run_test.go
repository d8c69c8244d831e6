package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/internal/testenv"
	"teamsbot/store"
)

// lockedBuffer collects the service's JSON log lines from another goroutine.
type lockedBuffer struct{ testenv.LogBuffer }

// logLine returns the first log line with the given msg, decoded.
func (b *lockedBuffer) logLine(msg string) map[string]any {
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			return m
		}
	}
	return nil
}

// startService runs the real service in-process, as `teamsbot` would, and
// returns its base URL and a function that stops it and returns run's error.
func startService(t *testing.T, env map[string]string) (base string, logs *lockedBuffer, stop func() error) {
	t.Helper()
	base, logs, _, stop = startServiceOut(t, env)
	return base, logs, stop
}

// startServiceOut is startService that also returns what the service
// printed on its standard output.
func startServiceOut(t *testing.T, env map[string]string) (base string, logs, stdout *lockedBuffer, stop func() error) {
	t.Helper()
	if env["TICKETIQ_DATA"] == "" {
		env["TICKETIQ_DATA"] = t.TempDir()
	}
	if env["TICKETIQ_ADDR"] == "" {
		env["TICKETIQ_ADDR"] = "127.0.0.1:0"
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs, stdout = &lockedBuffer{}, &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"teamsbot"}, envOf(env), stdout, logs) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("run did not return after cancel; logs:\n%s", logs)
		}
	}
	t.Cleanup(func() { _ = stop() })
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if l := logs.logLine("listening"); l != nil {
			return "http://" + l["addr"].(string), logs, stdout, stop
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before listening: %v\n%s", err, logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("service did not start; logs:\n%s", logs)
	return "", nil, nil, nil
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestRunHealthReadinessMetricsAndOrderlyShutdown(t *testing.T) {
	data := t.TempDir()
	base, logs, stop := startService(t, map[string]string{"TICKETIQ_DATA": data})
	c := &http.Client{Timeout: 10 * time.Second}
	if code, body := get(t, c, base+"/"); code != 200 || !strings.Contains(body, "teamsbot is running") {
		t.Errorf("/: %d %s", code, body)
	}
	if code, _ := get(t, c, base+"/no-such-page"); code != 404 {
		t.Errorf("unknown path: %d, want 404", code)
	}
	if code, body := get(t, c, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, c, base+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d %s", code, body)
	}
	code, body := get(t, c, base+"/metrics")
	if code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d, no Go metrics", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if logs.logLine("stopped") == nil {
		t.Errorf("no orderly stop logged:\n%s", logs)
	}
	// The store was closed last and released its lock: it opens again at once.
	st, err := store.Open(context.Background(), filepath.Join(data, "teamsbot.db"), store.Options{OpenTimeout: time.Second})
	if err != nil {
		t.Fatalf("store still locked after shutdown: %v", err)
	}
	st.Close()
}

// stopWatch is the service's log that, when the stop line is written,
// tries to open the bbolt file: the store must be closed by then.
type stopWatch struct {
	lockedBuffer
	db string
	// atStop is what opening the file said when the stop line came; nil
	// until then.
	atStop chan error
}

func (w *stopWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"msg":"stopped"`)) {
		st, err := store.Open(context.Background(), w.db, store.Options{OpenTimeout: 200 * time.Millisecond})
		if err == nil {
			err = st.Close()
		} else {
			err = fmt.Errorf("the store was still open: %w", err)
		}
		w.atStop <- err
	}
	return w.lockedBuffer.Write(p)
}

// The stop line is the last line of an orderly stop, written once every
// part has closed (the MCP sessions, then the store): a container's log
// that ends with it means the data folder is free.
func TestStopLineComesOnceEverythingIsClosed(t *testing.T) {
	data := t.TempDir()
	logs := &stopWatch{db: filepath.Join(data, "teamsbot.db"), atStop: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"teamsbot"}, envOf(map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_ADDR": "127.0.0.1:0"}), io.Discard, logs)
	}()
	for deadline := time.Now().Add(30 * time.Second); logs.logLine("listening") == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the service did not start:\n%s", logs)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	select {
	case err := <-logs.atStop:
		if err != nil {
			t.Errorf("when the stop line was written: %v", err)
		}
	default:
		t.Fatalf("no stop line:\n%s", logs)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["msg"] != "stopped" {
		t.Errorf("the last log line is %s, want the stop line", lines[len(lines)-1])
	}
	if logs.logLine("MCP session ended") == nil {
		t.Errorf("the demo server's session was not closed:\n%s", logs)
	}
}

func TestRunRefusesBadConfigurationBeforeStarting(t *testing.T) {
	var errOut bytes.Buffer
	err := run(context.Background(), []string{"teamsbot"}, envOf(map[string]string{
		"TICKETIQ_MCP_APPS_ENABLED": "sometimes",
		"TICKETIQ_PUBLIC_BASE_URL":  "localhost",
	}), io.Discard, &errOut)
	if err == nil || !strings.Contains(err.Error(), "TICKETIQ_MCP_APPS_ENABLED") || !strings.Contains(err.Error(), "TICKETIQ_PUBLIC_BASE_URL") {
		t.Fatalf("want both mistakes reported, got %v", err)
	}
}

// recordingConnector is a Bot Connector on loopback that answers every
// send with a new id and keeps the activities sent to it ("API
// reference", Conversations: Reply to Activity).
type recordingConnector struct {
	*httptest.Server
	mu   sync.Mutex
	sent []map[string]any
}

func newRecordingConnector(t *testing.T) *recordingConnector {
	c := &recordingConnector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a map[string]any
		if err := json.NewDecoder(r.Body).Decode(&a); err == nil {
			c.mu.Lock()
			c.sent = append(c.sent, a)
			c.mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"sent-%d"}`, time.Now().UnixNano())
	}))
	t.Cleanup(c.Close)
	return c
}

// waitAttachments waits up to 20 seconds for an activity whose
// attachments, as JSON, match gives a non-empty answer, and returns it
// ("" if none came).
func (c *recordingConnector) waitAttachments(match func(attachments []byte) string) string {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		for _, a := range c.sent {
			b, _ := json.Marshal(a["attachments"])
			if got := match(b); got != "" {
				c.mu.Unlock()
				return got
			}
		}
		c.mu.Unlock()
	}
	return ""
}

// count is how many activities were sent so far.
func (c *recordingConnector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sent)
}

// askForView posts a Teams message activity to the service at base and
// returns the id of the view whose Open button (to publicBase) the answer
// card that reached connector carries; "" when none came.
func askForView(t *testing.T, base string, connector *recordingConnector, publicBase string, activity map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(activity)
	resp, err := http.Post(base+"/api/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST /api/messages: %d", resp.StatusCode)
	}
	openRe := regexp.MustCompile(regexp.QuoteMeta(publicBase) + `/mcp-apps/([A-Za-z0-9_-]+)`)
	return connector.waitAttachments(func(b []byte) string {
		if m := openRe.FindSubmatch(b); m != nil {
			return string(m[1])
		}
		return ""
	})
}

// TestRunFromTeamsMessageToOpenedView walks the whole product in one process:
// a Teams message in local mode, the answer card with its Open button on a
// https base URL, then the person signs in and the view API hands out the
// sandbox URLs. The fake connector follows the Bot Framework REST API
// ("API reference", Conversations: Reply to Activity).
func TestRunFromTeamsMessageToOpenedView(t *testing.T) {
	connector := newRecordingConnector(t)

	const publicBase = "https://teams.example.test"
	m := testenv.StartMockOIDC(t)
	base, logs, _ := startService(t, map[string]string{
		"TICKETIQ_PUBLIC_BASE_URL":    publicBase,
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
	})
	if logs.logLine("starting") == nil {
		t.Fatalf("no start line:\n%s", logs)
	}

	activity := map[string]any{
		"type":         "message",
		"id":           "act-1",
		"timestamp":    time.Now().UTC().Format(time.RFC3339),
		"serviceUrl":   connector.URL,
		"channelId":    "msteams",
		"from":         map[string]any{"id": "29:user", "name": "Ada Lovelace", "aadObjectId": "user-oid-1"},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": "tenant-1"},
		"channelData":  map[string]any{"tenant": map[string]any{"id": "tenant-1"}},
		"text":         "/sales_report {}",
	}
	viewID := askForView(t, base, connector, publicBase, activity)
	if viewID == "" {
		t.Fatalf("no answer card with an Open button reached the connector; sent %d activities\n%s", connector.count(), logs)
	}

	// The browser reaches the public host, which is this service on
	// loopback; it signs in through the OIDC provider as the person the
	// run was for, who holds no app role: the tenant default lets them
	// open their own view.
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: publicHost{publicBase, base}}
	}
	c := browser()
	if code, _ := get(t, c, publicBase+"/api/mcp-apps/"+viewID); code != http.StatusUnauthorized {
		t.Errorf("view API without a session: %d, want 401", code)
	}
	m.QueueUser(&testenv.EntraUser{TID: "tenant-1", OID: "user-oid-1", Name: "Ada Lovelace"})
	resp, err := c.Get(publicBase + "/mcp-apps/" + viewID)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "sales_report") && !strings.Contains(string(page), "Sales report") {
		t.Fatalf("view page after sign-in: %d\n%s", resp.StatusCode, page)
	}
	code, apiBody := get(t, c, publicBase+"/api/mcp-apps/"+viewID)
	if code != 200 {
		t.Fatalf("view API: %d %s", code, apiBody)
	}
	var v struct {
		ID, Server, Tool, ResourceURI, ProxyURL, ViewURL string
	}
	if err := json.Unmarshal([]byte(apiBody), &v); err != nil {
		t.Fatal(err)
	}
	if v.ID != viewID || v.Server != "demo" || v.Tool != "sales_report" || v.ResourceURI != "ui://demo/sales-report.html" {
		t.Errorf("view API answer: %+v", v)
	}
	if !strings.Contains(v.ProxyURL, "token=") || !strings.Contains(v.ViewURL, "token=") {
		t.Errorf("sandbox URLs without tokens: %q %q", v.ProxyURL, v.ViewURL)
	}

	// Another person of the same tenant cannot open it.
	other := browser()
	m.QueueUser(&testenv.EntraUser{TID: "tenant-1", OID: "user-oid-2", Name: "Eve", Roles: []string{"agents.read", "agents.run"}})
	resp, err = other.Get(publicBase + "/signin?return=/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _ := get(t, other, publicBase+"/api/mcp-apps/"+viewID); code != http.StatusForbidden {
		t.Errorf("another person's view API: %d, want 403", code)
	}
}

// publicHost is a browser's way to the public host: requests to public
// go to the service's loopback address instead, as a reverse proxy would
// send them, while cookies and redirects stay the public host's.
type publicHost struct{ public, local string }

func (p publicHost) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.String(), p.public) {
		u, err := url.Parse(p.local + strings.TrimPrefix(r.URL.String(), p.public))
		if err != nil {
			return nil, err
		}
		r = r.Clone(r.Context())
		r.URL, r.Host = u, strings.TrimPrefix(p.public, "https://")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunNeverLogsSecrets starts the service with every secret set (a real
// OIDC provider on loopback for the sign-in) and looks for them in the logs.
func TestRunNeverLogsSecrets(t *testing.T) {
	m := testenv.StartMockOIDC(t)
	const botPassword = "bot-password-Zq81"
	_, logs, stop := startService(t, map[string]string{
		"TICKETIQ_BOT_APP_ID":         "00000000-0000-0000-0000-000000000001",
		"TICKETIQ_BOT_APP_PASSWORD":   botPassword,
		"TICKETIQ_BOT_TENANT_ID":      "00000000-0000-0000-0000-0000000000aa",
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
		"TICKETIQ_PUBLIC_BASE_URL":    "https://teams.example.test",
		"TICKETIQ_LOG_LEVEL":          "debug",
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if logs.logLine("starting") == nil {
		t.Fatalf("no start line:\n%s", out)
	}
	for _, secret := range []string{botPassword, m.ClientSecret} {
		if strings.Contains(out, secret) {
			t.Errorf("a secret appears in the logs:\n%s", out)
		}
	}
}

// TestRunPlaygroundOnlyInLocalMode starts the real service three ways: in
// local mode the start page leads to the playground, which is served; with
// a bot app id, or with the playground turned off, neither the page, its
// API nor its Bot Connector exist (404), and the start page is the plain
// one.
func TestRunPlaygroundOnlyInLocalMode(t *testing.T) {
	c := &http.Client{Timeout: 10 * time.Second}
	routes := []struct{ method, path string }{
		{http.MethodGet, "/playground"},
		{http.MethodGet, "/playground/api/state"},
		{http.MethodPost, "/playground/api/send"},
		{http.MethodPost, "/playground/connector/v3/conversations/a:1/activities"},
		{http.MethodPut, "/playground/connector/v3/conversations/a:1/activities/1"},
		{http.MethodDelete, "/playground/connector/v3/conversations/a:1/activities/1"},
	}
	status := func(base, method, path string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"type":"message"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("local mode", func(t *testing.T) {
		base, _, _ := startService(t, map[string]string{})
		if code, body := get(t, c, base+"/"); code != 200 || !strings.Contains(body, `href="/playground"`) {
			t.Errorf("/: %d, no link to the playground:\n%s", code, body)
		}
		if code, body := get(t, c, base+"/playground"); code != 200 || !strings.Contains(body, "teamsbot playground") {
			t.Errorf("/playground: %d", code)
		}
	})
	for name, env := range map[string]map[string]string{
		"bot app id": {
			"TICKETIQ_BOT_APP_ID": "00000000-0000-0000-0000-000000000001", "TICKETIQ_BOT_APP_PASSWORD": "pw",
			"TICKETIQ_BOT_TENANT_ID": "00000000-0000-0000-0000-0000000000aa",
		},
		"turned off": {"TICKETIQ_PLAYGROUND": "false"},
	} {
		t.Run(name, func(t *testing.T) {
			base, _, _ := startService(t, env)
			for _, r := range routes {
				if code := status(base, r.method, r.path); code != http.StatusNotFound {
					t.Errorf("%s %s: %d, want 404", r.method, r.path, code)
				}
			}
			if code, body := get(t, c, base+"/"); code != 200 || strings.Contains(body, "/playground") {
				t.Errorf("/: %d, mentions the playground:\n%s", code, body)
			}
		})
	}
}
