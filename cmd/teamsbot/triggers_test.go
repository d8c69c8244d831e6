package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/internal/testenv"
)

// chromium starts a headless Chromium for one test (testenv.Chromium);
// each tab from openInBrowser has its own cookies.
func chromium(t *testing.T) context.Context {
	t.Helper()
	return testenv.Chromium(t)
}

// openInBrowser signs a person in through the OIDC provider on the way to
// url, in a fresh browser context, and returns the tab and the status of
// the page it lands on.
func openInBrowser(t *testing.T, b context.Context, m *mockoidc.MockOIDC, u *testenv.EntraUser, url string) (context.Context, int64) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first call opens the tab; made with a context that ends sooner,
	// it would close the tab when that context ends.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	m.QueueUser(u)
	tctx, tcancel := context.WithTimeout(ctx, 30*time.Second)
	defer tcancel()
	resp, err := chromedp.RunResponse(tctx, chromedp.Navigate(url))
	if err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	return ctx, resp.Status
}

// frameURLs lists the URLs of every frame of the tab.
func frameURLs(t *testing.T, tab context.Context) []string {
	t.Helper()
	res, err := chromedp.Call(tab, page.GetFrameTree, cdp.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	tree := res.FrameTree
	var out []string
	var walk func(ft *page.FrameTree)
	walk = func(ft *page.FrameTree) {
		out = append(out, ft.Frame.URL)
		for _, c := range ft.ChildFrames {
			walk(c)
		}
	}
	walk(tree)
	return out
}

// api calls the service with JSON, as a script would.
func api(t *testing.T, c *http.Client, method, url, bearer string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// TestRunFromAPIKeyTriggerToOpenedView walks a run without a person
// through the whole service over loopback HTTP: the app installed in a
// conversation (the Bot Connector fake stands in for Teams), an admin
// makes an API key in the admin API, a script starts a run with it, the
// card reaches the conversation, a reader of the tenant opens its view in
// Chromium, and the rest of the tenant cannot: a person who is no reader,
// and the admin who made the key. Wrong and revoked keys are refused and
// audited; a conversation the app was removed from (the connector answers
// 403) is reported and its trigger paused.
func TestRunFromAPIKeyTriggerToOpenedView(t *testing.T) {
	const tenant, conv = "tenant-1", "19:sales@thread.tacv2"
	browser := chromium(t)
	conn := testenv.StartConnector(t)
	m := testenv.StartMockOIDC(t)
	ln := testenv.Listen(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	publicBase := "http://127.0.0.1:" + strconv.Itoa(port)
	base, logs, _ := startService(t, map[string]string{
		"TICKETIQ_ADDR":               "127.0.0.1:" + strconv.Itoa(port),
		"TICKETIQ_PUBLIC_BASE_URL":    publicBase,
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", logs)
		}
	})
	plain := &http.Client{Timeout: 60 * time.Second}

	// Teams installs the app in a channel (local mode: the activity comes
	// from loopback, unsigned).
	install, _ := json.Marshal(map[string]any{
		"type": "installationUpdate", "action": "add", "id": "inst-1", "channelId": "msteams", "serviceUrl": conn.URL,
		"from": map[string]any{"id": "29:installer", "aadObjectId": "installer-oid"}, "recipient": map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": conv, "conversationType": "channel", "tenantId": tenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": tenant}},
	})
	resp, err := plain.Post(base+"/api/messages", "application/json", bytes.NewReader(install))
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("install: %v %v", resp, err)
	}
	resp.Body.Close()
	welcomes := len(conn.WaitMessages(t, conv, 1))

	// The admin signs in and makes a key in the admin API.
	adminUser := &testenv.EntraUser{TID: tenant, OID: "admin-oid-1", Name: "Ada Admin", Roles: []string{"agents.admin"}}
	jar, _ := cookiejar.New(nil)
	adminClient := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	m.QueueUser(adminUser)
	if code, _ := get(t, adminClient, base+"/signin?return=/admin"); code != 200 {
		t.Fatalf("admin sign-in: %d", code)
	}
	code, convs := api(t, adminClient, http.MethodGet, base+"/api/admin/conversations", "", nil)
	if code != 200 || !strings.Contains(mustJSON(convs), conv) {
		t.Fatalf("conversations: %d %v", code, convs)
	}
	code, key := api(t, adminClient, http.MethodPost, base+"/api/admin/keys", "", map[string]any{"name": "Sales digest", "agent": "default"})
	secret, _ := key["secret"].(string)
	if code != http.StatusCreated || !strings.HasPrefix(secret, "tbk_") {
		t.Fatalf("create key: %d %v", code, key)
	}
	if _, listed := api(t, adminClient, http.MethodGet, base+"/api/admin/keys", "", nil); strings.Contains(mustJSON(listed), secret) {
		t.Fatal("the key list shows the secret again")
	}

	// A script starts a run with it.
	code, run := api(t, plain, http.MethodPost, base+"/api/agents/default/runs", secret, map[string]any{"text": "/sales_report {}", "conversation": conv})
	if code != 200 {
		t.Fatalf("run: %d %v", code, run)
	}
	views, _ := run["views"].([]any)
	if len(views) != 1 {
		t.Fatalf("run answer %v", run)
	}
	viewID := views[0].(map[string]any)["id"].(string)
	msgs := conn.WaitMessages(t, conv, welcomes+1)
	card := string(msgs[len(msgs)-1].Raw)
	if msgs[len(msgs)-1].ReplyTo != "" || !strings.Contains(card, "the API key “Sales digest” started it") || !strings.Contains(card, "agent readers") {
		t.Fatalf("the card posted is not the triggered answer:\n%s", card)
	}

	// A reader of the tenant opens the view in Chromium: the page, its
	// proxy frame and the view's frame load.
	reader := &testenv.EntraUser{TID: tenant, OID: "reader-oid-1", Name: "Rita Reader", Roles: []string{"agents.read"}}
	tab, status := openInBrowser(t, browser, m, reader, publicBase+"/mcp-apps/"+viewID)
	if status != http.StatusOK {
		t.Fatalf("the reader's view page: %d", status)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		urls := strings.Join(frameURLs(t, tab), "\n")
		ctx, cancel := context.WithTimeout(tab, 2*time.Second)
		title, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("tool-title") || {}).textContent || ""`))
		cancel()
		if title == "Sales report" && strings.Contains(urls, "/sandbox/proxy") && strings.Contains(urls, "/sandbox/views/"+viewID) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the view page shows %q, its frames:\n%s", title, urls)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Someone of the same tenant who is no reader, and the admin who made
	// the key, get 403.
	for _, u := range []*testenv.EntraUser{
		{TID: tenant, OID: "runner-oid-1", Name: "Ron Runner", Roles: []string{"agents.run"}},
		{TID: tenant, OID: "admin-oid-1", Name: "Ada Admin", Roles: []string{"agents.admin"}},
	} {
		tab, status := openInBrowser(t, browser, m, u, publicBase+"/mcp-apps/"+viewID)
		if status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", u.Name, status)
		}
		if urls := frameURLs(t, tab); len(urls) != 1 {
			t.Errorf("%s: the refusal page has frames %v", u.Name, urls)
		}
	}

	// A wrong key and, once revoked, the right one are refused and audited.
	if code, _ := api(t, plain, http.MethodPost, base+"/api/agents/default/runs", secret[:len(secret)-3]+"xyz", map[string]any{"text": "hi", "conversation": conv}); code != 401 {
		t.Errorf("wrong key: %d", code)
	}
	code, _ = api(t, adminClient, http.MethodPost, base+"/api/admin/keys/"+key["id"].(string)+"/revoke", "", nil)
	if code != http.StatusNoContent {
		t.Fatalf("revoke: %d", code)
	}
	if code, _ := api(t, plain, http.MethodPost, base+"/api/agents/default/runs", secret, map[string]any{"text": "hi", "conversation": conv}); code != 401 {
		t.Errorf("revoked key: %d", code)
	}
	_, audit := api(t, adminClient, http.MethodGet, base+"/api/admin/audit?action=trigger.apikey.refused", "", nil)
	if a := mustJSON(audit); !strings.Contains(a, `"reason":"wrong secret"`) || !strings.Contains(a, `"reason":"revoked"`) {
		t.Errorf("refusals not audited: %s", a)
	}
	_, audit = api(t, adminClient, http.MethodGet, base+"/api/admin/audit?action=trigger.apikey.use", "", nil)
	if recs, _ := audit["records"].([]any); len(recs) != 1 {
		t.Errorf("uses audited: %v", audit)
	}

	// A scheduled trigger posts into the same conversation; then the app
	// is removed there, and the next run meets a 403.
	code, trig := api(t, adminClient, http.MethodPost, base+"/api/admin/triggers", "", map[string]any{
		"name": "Morning digest", "agent": "default", "cron": "0 9 * * *", "timeZone": "Europe/Berlin", "text": "/sales_report {}", "conversation": conv})
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trig)
	}
	code, key2 := api(t, adminClient, http.MethodPost, base+"/api/admin/keys", "", map[string]any{"name": "Second", "agent": "default"})
	if code != http.StatusCreated {
		t.Fatalf("second key: %d", code)
	}
	conn.Forbid(conv)
	if code, out := api(t, plain, http.MethodPost, base+"/api/agents/default/runs", key2["secret"].(string), map[string]any{"text": "/sales_report {}", "conversation": conv}); code != http.StatusGone {
		t.Fatalf("run into a removed conversation: %d %v", code, out)
	}
	_, list := api(t, adminClient, http.MethodGet, base+"/api/admin/triggers", "", nil)
	ts, _ := list["triggers"].([]any)
	if len(ts) != 1 || ts[0].(map[string]any)["paused"] != true || !strings.Contains(ts[0].(map[string]any)["pausedReason"].(string), "403") {
		t.Errorf("trigger not paused with the reason: %v", list)
	}
	if removed, _ := list["removedConversations"].([]any); len(removed) != 1 {
		t.Errorf("removal not reported: %v", list)
	}
	if code, html := get(t, adminClient, base+"/admin/triggers"); code != 200 || !strings.Contains(html, "The app was removed from conversations") || !strings.Contains(html, "Teams refused to post there") {
		t.Errorf("the triggers page does not show the removal (%d)", code)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
