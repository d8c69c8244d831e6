package viewpage_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/internal/testenv"
	"teamsbot/store"
)

// A closed channel a view tried is recorded as agent.mcp_app.blocked only
// for a view the signed-in person may read, with a valid frame token of
// it, same-origin JSON, a channel of the fixed vocabulary and nothing
// else; and a view cannot flood the log: once per channel and source, at
// most 20 records an hour.
func TestBlockedReports(t *testing.T) {
	e := newEnv(t, envOptions{})
	v := e.run(alice(), "/sales_report {}")
	other := e.run(alice(), "/feedback_form {}")
	cl := e.client(alice())
	tokenOf := func(u string) string {
		pu, _ := url.Parse(u)
		return pu.Query().Get("token")
	}
	info := e.viewInfo(cl, v.ID)
	viewTok, proxyTok := tokenOf(info.ViewURL), tokenOf(info.ProxyURL)
	otherTok := tokenOf(e.viewInfo(cl, other.ID).ViewURL)
	blockedURL := e.base + "/api/mcp-apps/" + v.ID + "/blocked"
	sameOrigin := map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin", "Origin": e.base}
	body := func(channel, source, token string) string {
		return fmt.Sprintf(`{"channel":%q,"source":%q,"token":%q}`, channel, source, token)
	}
	records := func() []store.AuditRecord {
		t.Helper()
		recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA, Action: agent.AuditBlocked})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}

	if r := do(t, cl, http.MethodPost, blockedURL, sameOrigin, body("webrtc", "view", viewTok)); r.status != http.StatusNoContent {
		t.Fatalf("report: %d %s", r.status, r.body)
	}
	recs := records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1: %+v", len(recs), recs)
	}
	want := map[string]any{"view": v.ID, "server": "demo", "tool": v.Tool, "agent": v.AgentID, "channel": "webrtc", "source": "view"}
	if rec := recs[0]; rec.Actor != alice().OID || fmt.Sprint(rec.Fields) != fmt.Sprint(want) {
		t.Errorf("record %+v, want actor %s and fields %v", rec, alice().OID, want)
	}

	refused := []struct {
		name   string
		client *http.Client
		header map[string]string
		body   string
		want   int
		says   string // in the answer's error, when set
	}{
		{"the proxy's token", cl, sameOrigin, body("webrtc", "proxy", proxyTok), 403, ""},
		{"another view's token", cl, sameOrigin, body("webrtc", "proxy", otherTok), 403, ""},
		{"no token", cl, sameOrigin, `{"channel":"webrtc","source":"view"}`, 403, ""},
		{"a channel outside the vocabulary", cl, sameOrigin, body("https://6869.attacker.example/", "view", viewTok), 400, "`channel` \"https://6869.attacker.example/\" is not a channel a view reports."},
		{"a source outside the vocabulary", cl, sameOrigin, body("img-src", "page", viewTok), 400, "`source` must be view or proxy."},
		{"a field more", cl, sameOrigin, `{"channel":"img-src","source":"view","token":"` + viewTok + `","url":"https://x.example"}`, 400,
			"`url` is not a field of this call; it takes `channel`, `source` and `token`."},
		{"too large", cl, sameOrigin, `{"channel":"` + strings.Repeat("a", 5000) + `"}`, 413, "The body is larger than 4 KiB, the most this call takes."},
		{"cross-site", cl, map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, body("img-src", "view", viewTok), 403, ""},
		{"text/plain", cl, map[string]string{"Content-Type": "text/plain"}, body("img-src", "view", viewTok), 415, ""},
		{"not signed in", e.client(nil), sameOrigin, body("img-src", "view", viewTok), 401, ""},
		{"another person", e.client(bob()), sameOrigin, body("img-src", "view", viewTok), 403, ""},
		{"another tenant", e.client(mallory()), sameOrigin, body("img-src", "view", viewTok), 404, ""},
	}
	for _, c := range refused {
		r := do(t, c.client, http.MethodPost, blockedURL, c.header, c.body)
		if r.status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.want)
		}
		if msg := testenv.AnswerWords("application/json", []byte(r.body)); !strings.Contains(msg, c.says) || len(testenv.Leaks(msg)) > 0 {
			t.Errorf("%s: the answer says %q, want %q in plain words", c.name, msg, c.says)
		}
	}
	if n := len(records()); n != 1 {
		t.Errorf("%d records after the refused reports, want still 1", n)
	}

	// The same channel and source again: not recorded again. Every
	// channel from both sources: 20 records in all this hour.
	channels := []string{"webrtc", "connection-allowlist", "default-src", "connect-src", "img-src", "script-src", "script-src-elem",
		"style-src", "style-src-elem", "font-src", "media-src", "frame-src", "child-src", "fenced-frame-src", "worker-src",
		"manifest-src", "object-src", "form-action", "base-uri"}
	for _, source := range []string{"view", "proxy"} {
		for _, ch := range channels {
			if r := do(t, cl, http.MethodPost, blockedURL, sameOrigin, body(ch, source, viewTok)); r.status != http.StatusNoContent {
				t.Errorf("%s from %s: %d %s", ch, source, r.status, r.body)
			}
		}
	}
	if n := len(records()); n != 20 {
		t.Errorf("%d records after a flood, want 20", n)
	}
	// The frame token lives 10 minutes: then the page asks for a fresh
	// one. An hour on, the view is counted afresh.
	e.clock.Advance(11 * time.Minute)
	if r := do(t, cl, http.MethodPost, blockedURL, sameOrigin, body("img-src", "proxy", viewTok)); r.status != http.StatusForbidden {
		t.Errorf("an expired token: %d, want 403", r.status)
	}
	e.clock.Advance(time.Hour)
	fresh := tokenOf(e.viewInfo(cl, v.ID).ViewURL)
	if r := do(t, cl, http.MethodPost, blockedURL, sameOrigin, body("webrtc", "view", fresh)); r.status != http.StatusNoContent {
		t.Errorf("an hour later: %d %s", r.status, r.body)
	}
	if n := len(records()); n != 21 {
		t.Errorf("%d records an hour later, want 21", n)
	}
}
