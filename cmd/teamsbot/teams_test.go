package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
)

// The whole service with TICKETIQ_TEAMS_TAB=true: a Teams message's answer
// card opens its view in Stage View, with the browser beside it; the page,
// asked for inside a frame without a session, is the Teams sign-in shell,
// framable by the documented Teams hosts only; asked for as a document it
// still sends the person to the sign-in, which refuses frames.
func TestRunTeamsTab(t *testing.T) {
	connector := newRecordingConnector(t)

	const publicBase = "https://teams.example.test"
	m := testenv.StartMockOIDC(t)
	base, logs, _ := startService(t, map[string]string{
		"TICKETIQ_PUBLIC_BASE_URL":      publicBase,
		"TICKETIQ_OIDC_ISSUER":          m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":       m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET":   m.ClientSecret,
		"TICKETIQ_OIDC_ALLOWED_TENANTS": "tenant-1",
		"TICKETIQ_TEAMS_TAB":            "true",
	})
	if start := logs.logLine("starting"); start == nil || start["teams_tab"] != true {
		t.Fatalf("the start line does not say teams_tab=true:\n%s", logs)
	}
	activity := map[string]any{
		"type": "message", "id": "act-1", "timestamp": time.Now().UTC().Format(time.RFC3339),
		"serviceUrl": connector.URL, "channelId": "msteams",
		"from":         map[string]any{"id": "29:user", "name": "Ada Lovelace", "aadObjectId": "user-oid-1"},
		"recipient":    map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": "a:personal-1", "conversationType": "personal", "tenantId": "tenant-1"},
		"channelData":  map[string]any{"tenant": map[string]any{"id": "tenant-1"}},
		"text":         "/sales_report {}",
	}
	body, _ := json.Marshal(activity)
	resp, err := http.Post(base+"/api/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	card := connector.waitAttachments(func(b []byte) string {
		if strings.Contains(string(b), "tab/tabInfoAction") {
			return string(b)
		}
		return ""
	})
	if card == "" {
		t.Fatalf("no answer card with a Stage View action reached the connector\n%s", logs)
	}
	var id string
	if _, rest, ok := strings.Cut(card, `"contentUrl":"`+publicBase+`/mcp-apps/`); ok {
		id, _, _ = strings.Cut(rest, `"`)
	}
	if id == "" || !strings.Contains(card, `"websiteUrl":"`+publicBase+`/mcp-apps/`+id+`"`) ||
		!strings.Contains(card, `"type":"Action.OpenUrl"`) || !strings.Contains(card, `"url":"`+publicBase+`/mcp-apps/`+id+`"`) {
		t.Fatalf("the card's actions: %s", card)
	}

	c := &http.Client{Timeout: 10 * time.Second, Transport: publicHost{publicBase, base},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, publicBase+"/mcp-apps/"+id, nil)
	req.Header.Set("Sec-Fetch-Dest", "iframe")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if resp.StatusCode != http.StatusOK || !strings.Contains(csp, "frame-ancestors https://teams.microsoft.com https://*.teams.microsoft.com https://*.cloud.microsoft") {
		t.Errorf("the page inside Teams' frame: %d, CSP %q", resp.StatusCode, csp)
	}
	req.Header.Set("Sec-Fetch-Dest", "document")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin?") {
		t.Errorf("the page as a document: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ = http.NewRequest(http.MethodGet, publicBase+resp.Header.Get("Location"), nil)
	req.Header.Set("Sec-Fetch-Dest", "iframe")
	resp, err = c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("the sign-in page in a frame: %d, X-Frame-Options %q", resp.StatusCode, resp.Header.Get("X-Frame-Options"))
	}
}
