package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/cookiejar"
	"strconv"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
)

// TestRunRemovalRecordedOnce removes the bot from a group chat the way
// Teams does, through the playground over loopback HTTP: Teams announces
// one uninstall twice (an installationUpdate remove and a
// conversationUpdate with the bot among membersRemoved), and the service
// gets both on /api/messages. The admin API then holds exactly one
// bot.conversation.removed record, and the console's triggers page lists
// the removal once. Removing the bot again from where it already left
// writes nothing more.
func TestRunRemovalRecordedOnce(t *testing.T) {
	const tenant = "tenant-1"
	m := testenv.StartMockOIDC(t)
	ln := testenv.Listen(t)
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	base, logs, _ := startService(t, map[string]string{
		"TICKETIQ_ADDR":               "127.0.0.1:" + strconv.Itoa(port),
		"TICKETIQ_PUBLIC_BASE_URL":    "http://127.0.0.1:" + strconv.Itoa(port),
		"TICKETIQ_OIDC_ISSUER":        m.Issuer(),
		"TICKETIQ_OIDC_CLIENT_ID":     m.ClientID,
		"TICKETIQ_OIDC_CLIENT_SECRET": m.ClientSecret,
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", logs)
		}
	})
	page := &http.Client{Timeout: 30 * time.Second}
	install := func(action string) {
		t.Helper()
		body := `{"tenant":"` + tenant + `","user":"megan-oid","name":"Megan Bowen","kind":"groupChat","action":"` + action + `"}`
		resp, err := page.Post(base+"/playground/api/install", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", action, resp.StatusCode)
		}
	}

	admin := &testenv.EntraUser{TID: tenant, OID: "admin-oid-1", Name: "Ada Admin", Roles: []string{"agents.admin"}}
	jar, _ := cookiejar.New(nil)
	adminClient := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	m.QueueUser(admin)
	if code, _ := get(t, adminClient, base+"/signin?return=/admin"); code != http.StatusOK {
		t.Fatalf("admin sign-in: %d", code)
	}
	removals := func() []any {
		t.Helper()
		code, out := api(t, adminClient, http.MethodGet, base+"/api/admin/audit?action=bot.conversation.removed", "", nil)
		if code != http.StatusOK {
			t.Fatalf("audit: %d %v", code, out)
		}
		recs, _ := out["records"].([]any)
		return recs
	}

	install("add")
	if code, convs := api(t, adminClient, http.MethodGet, base+"/api/admin/conversations", "", nil); code != http.StatusOK || !strings.Contains(mustJSON(convs), "@thread.v2") {
		t.Fatalf("the group chat is not kept after the bot was added: %d %v", code, convs)
	}
	install("remove")
	recs := removals()
	if len(recs) != 1 {
		t.Fatalf("%d bot.conversation.removed records for one removal, want 1: %s", len(recs), mustJSON(recs))
	}
	if f, _ := recs[0].(map[string]any)["fields"].(map[string]any); f["why"] != "uninstalled" || !strings.Contains(mustJSON(f), "@thread.v2") {
		t.Errorf("the record does not name the group chat and why: %s", mustJSON(recs[0]))
	}
	code, html := get(t, adminClient, base+"/admin/triggers")
	if code != http.StatusOK || !strings.Contains(html, "The app was removed from conversations") {
		t.Fatalf("the triggers page does not show the removal (%d)", code)
	}
	if n := strings.Count(html, "the app was uninstalled there"); n != 1 {
		t.Errorf("the triggers page lists the removal %d times, want once", n)
	}
	if _, list := api(t, adminClient, http.MethodGet, base+"/api/admin/triggers", "", nil); len(list["removedConversations"].([]any)) != 1 {
		t.Errorf("the triggers API lists the removal %d times, want once", len(list["removedConversations"].([]any)))
	}

	// Teams sending the removal again changes nothing.
	install("remove")
	if recs := removals(); len(recs) != 1 {
		t.Errorf("after the removal came again: %d records, want 1", len(recs))
	}
}
