//go:build fixturegen

package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
	"teamsbot/mcpapps"
	"teamsbot/store"
)

// TestGenerateFixtures writes testdata/fixtures: the same records through
// the store into a bbolt file and into a PostgreSQL database, the file
// (as Backup copies it), a plain SQL dump of the database, and what the
// store read back from them. It is not part of the suite: the fixtures
// are what an earlier program wrote, kept so that every later one proves
// it still reads them. Run it, against the PostgreSQL of
// TEAMSBOT_TEST_DATABASE_URL and with pg_dump on PATH, only to make
// fixtures of a new schema version (then under new names, keeping the
// old):
//
//	go test -tags fixturegen -run TestGenerateFixtures ./store
func TestGenerateFixtures(t *testing.T) {
	if err := os.MkdirAll(fixtureDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

	// bbolt: written, backed up into the fixture, dumped, then swept.
	now := t0
	boltPath := filepath.Join(t.TempDir(), "teamsbot.db")
	b := openOpts(t, boltBackend(), boltPath, fixtureOptions(&now))
	want := writeFixture(t, b, &now)
	var backup bytes.Buffer
	if _, err := b.Backup(context.Background(), &backup); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, fixtureBolt), backup.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	fromBolt := dumpFixture(t, b, want)
	now = want.Clock.Add(200 * 24 * time.Hour)
	fromBolt.Sweep = sweepFixture(t, b)

	// PostgreSQL: the same, dumped before the sweep.
	now = t0
	url := pgtest.Database(t)
	p := openOpts(t, postgresBackend(), url, fixtureOptions(&now))
	writeFixture(t, p, &now)
	dump := pgDump(t, url)
	if err := os.WriteFile(filepath.Join(fixtureDir, fixturePostgres), dump, 0o644); err != nil {
		t.Fatal(err)
	}
	fromPG := dumpFixture(t, p, want)
	now = want.Clock.Add(200 * 24 * time.Hour)
	fromPG.Sweep = sweepFixture(t, p)

	a, _ := json.MarshalIndent(fromBolt, "", "  ")
	c, _ := json.MarshalIndent(fromPG, "", "  ")
	if !bytes.Equal(a, c) {
		t.Fatal("the two backends read the fixture back otherwise; no fixture written")
	}
	if err := os.WriteFile(filepath.Join(fixtureDir, fixtureExpected), append(a, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pgDump is pg_dump's plain SQL of the database at url, with INSERTs
// rather than COPY and without psql's own commands (\restrict), so that
// any client replays it.
func pgDump(t *testing.T, url string) []byte {
	t.Helper()
	out, err := exec.Command("pg_dump", "--inserts", "--no-owner", "--no-privileges", "--no-comments", url).Output()
	if err != nil {
		t.Fatalf("pg_dump: %v", err)
	}
	var kept []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, `\`) {
			continue
		}
		kept = append(kept, line)
	}
	return []byte(strings.Join(kept, ""))
}

// writeFixture writes the fixture's records through s, moving *now as it
// goes, and leaves *now at the dump's clock. It returns the dump's
// skeleton: the ids, tenants and keys that dumpFixture reads.
func writeFixture(t *testing.T, s *store.Store, now *time.Time) *fixtureDump {
	t.Helper()
	ctx := context.Background()
	t0 := *now
	at := func(d time.Duration) { *now = t0.Add(d) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tA, tAB, tZ, tB := fixtureTenants[0], fixtureTenants[1], fixtureTenants[2], fixtureTenants[3]
	yes := true

	// Documents: one shared by three views of two tenants, one with bytes
	// that are not UTF-8, one of a view that will expire, one of a view
	// replaced by another document.
	shared := []byte("<!doctype html><title>Umsätze – 売上</title><p>chart 📈</p>")
	binary := []byte("<p>\xff\xfe not UTF-8 \x01\x7f</p>")
	short := []byte("<p>expires in an hour</p>")
	replaced := []byte("<p>replaced</p>")
	view := func(id, tenant, user string, life time.Duration) store.View {
		return store.View{
			ID: id, AgentID: "sales", TenantID: tenant, UserID: user, UserName: "Ada Lövelace",
			Server: "demo", Tool: "show_chart", ToolTitle: "Show chart — Übersicht", ResourceURI: "ui://demo/chart.html",
			CSP:         "default-src 'none'; img-src https://cdn.example",
			CSPDropped:  []mcpapps.DroppedEntry{{Field: "connectDomains", Value: "http://x.example", Reason: "not https"}},
			Permissions: mcpapps.Permissions{Forms: true, Camera: true}, Granted: mcpapps.Permissions{Forms: true},
			PrefersBorder: &yes, Arguments: json.RawMessage(`{"q":"ventes d'été","n":3}`),
			Result:    json.RawMessage(`{"content":[{"type":"text","text":"42 – ok"}],"structuredContent":{"x":[1,2]}}`),
			CreatedAt: *now, ExpiresAt: now.Add(life),
		}
	}
	viewAudit := func(tenant, actor, server, tool, sha string) store.AuditRecord {
		return store.AuditRecord{TenantID: tenant, Action: "agent.mcp_app.view", Actor: actor, Fields: map[string]any{
			"server": server, "tool": tool, "uri": "ui://demo/chart.html", "htmlSha256": sha, "csp": "default-src 'none'",
			"permissions": map[string]any{"asked": []any{"camera"}, "granted": []any{}},
		}}
	}
	toolCall := func(tenant, actor, tool, result, why string) store.AuditRecord {
		return store.AuditRecord{TenantID: tenant, Action: "agent.tool.call", Actor: actor, Fields: map[string]any{
			"server": "demo", "tool": tool, "caller": "model", "result": result, "why": why,
		}}
	}

	// Runs with their views, one commit each.
	at(0)
	v1, v2 := view("view-1", tZ, "Łukasz-oid", store.ViewLifetime), view("view-2", tZ, "Łukasz-oid", store.ViewLifetime)
	v2.PrefersBorder, v2.Permissions, v2.Granted = nil, mcpapps.Permissions{}, mcpapps.Permissions{}
	must(s.SaveRun(ctx, store.Run{
		ID: "run-1", AgentID: "sales", TenantID: tZ, UserID: "Łukasz-oid", UserName: "Łukasz Żółć",
		Text: "Die Umsätze steigen. 売上は上昇。", Notes: []string{"tool hidden from the model: app_only"},
		Problems: []store.RunProblem{{Ref: "R-7Q2", Said: "The map could not be drawn.", Detail: "exec: \"mapper\": executable file not found in $PATH"}},
	}, []store.NewView{{View: v1, HTML: shared}, {View: v2, HTML: binary}}, []store.AuditRecord{
		toolCall(tZ, "Łukasz-oid", "run_report", "ok", ""),
		viewAudit(tZ, "Łukasz-oid", "demo", "show_chart", mcpapps.HTMLSHA256(shared)),
		viewAudit(tZ, "Łukasz-oid", "demo", "show_chart", mcpapps.HTMLSHA256(binary)),
	}))
	at(5 * time.Minute)
	v3 := view("view-3", tA, "ada-oid", time.Hour) // expired by the dump
	must(s.SaveRun(ctx, store.Run{ID: "run-2", AgentID: "sales", TenantID: tA, UserID: "ada-oid", UserName: "Ada", Text: "short-lived"},
		[]store.NewView{{View: v3, HTML: short}}, []store.AuditRecord{viewAudit(tA, "ada-oid", "demo", "show_chart", mcpapps.HTMLSHA256(short))}))
	at(10 * time.Minute)
	v4 := view("view-4", tAB, "bob-oid", store.ViewLifetime) // revoked below
	v5 := view("view-5", tAB, "bob-oid", store.ViewLifetime)
	must(s.SaveRun(ctx, store.Run{ID: "run-3", AgentID: "default", TenantID: tAB, UserID: "bob-oid", Text: "two views"},
		[]store.NewView{{View: v4, HTML: shared}, {View: v5, HTML: replaced}}, nil))
	at(12 * time.Minute)
	// run-3 saved again: view-5 with another document, and one view more.
	v5b := view("view-5", tAB, "bob-oid", 2*store.ViewLifetime)
	v6 := view("view-6", tAB, "bob-oid", store.ViewLifetime)
	must(s.SaveRun(ctx, store.Run{ID: "run-3", AgentID: "default", TenantID: tAB, UserID: "bob-oid", Text: "two views, again"},
		[]store.NewView{{View: v5b, HTML: shared}, {View: v6, HTML: shared}}, nil))
	at(15 * time.Minute)
	// A run without a person and without views: a scheduled one.
	must(s.SaveRun(ctx, store.Run{ID: "run-4", AgentID: "sales", TenantID: tA, Text: "scheduled report: nothing new"}, nil, nil))
	must(s.SaveRun(ctx, store.Run{ID: "run-5", AgentID: "sales", TenantID: tB, UserID: "carla-oid", UserName: "Carla",
		Text: "ok", CreatedAt: t0.Add(-40 * 24 * time.Hour)}, nil, nil)) // past the run retention at the dump

	// Conversations: one replaced, one deleted, one removed with its
	// trigger paused.
	at(20 * time.Minute)
	for _, c := range []store.ConversationRef{
		{Key: tA + "/19:abc@thread.tacv2", TenantID: tA, ConversationID: "19:abc@thread.tacv2", ServiceURL: "https://smba.trafficmanager.net/emea/",
			ChannelID: "msteams", BotID: "28:bot", Reference: []byte(`{"conversation":{"id":"19:abc@thread.tacv2","tenantId":"tenant-a"}}`)},
		{Key: tA + "/a:1-personal", TenantID: tA, ConversationID: "a:1-personal", ServiceURL: "https://smba.trafficmanager.net/emea/", ChannelID: "msteams", BotID: "28:bot", Reference: []byte(`{}`)},
		{Key: tZ + "/19:zürich@thread.v2", TenantID: tZ, ConversationID: "19:zürich@thread.v2", ServiceURL: "https://smba.trafficmanager.net/de/", ChannelID: "msteams", BotID: "28:bot", Reference: []byte(`{"note":"Grüße"}`)},
		{Key: tAB + "/gone", TenantID: tAB, ConversationID: "gone", ServiceURL: "https://smba.example/", ChannelID: "msteams", BotID: "28:bot"},
		{Key: tB + "/19:removed", TenantID: tB, ConversationID: "19:removed", ServiceURL: "https://smba.example/", ChannelID: "msteams", BotID: "28:bot"},
	} {
		must(s.PutConversation(ctx, c))
	}
	at(21 * time.Minute)
	must(s.PutConversation(ctx, store.ConversationRef{Key: tA + "/a:1-personal", TenantID: tA, ConversationID: "a:1-personal",
		ServiceURL: "https://smba.trafficmanager.net/amer/", ChannelID: "msteams", BotID: "28:bot", Reference: []byte(`{"moved":true}`)}))
	must(s.DeleteConversation(ctx, tAB+"/gone"))

	// Deliveries.
	at(22 * time.Minute)
	must(s.PutDelivery(ctx, store.Delivery{RunID: "run-1", ConversationKey: tZ + "/19:zürich@thread.v2", ConversationID: "19:zürich@thread.v2;messageid=1700000000000",
		ActivityIDs: []string{"1:working", "1:answer"}}))
	must(s.PutDelivery(ctx, store.Delivery{RunID: "run-5", ConversationKey: tB + "/19:removed", ConversationID: "19:removed", ActivityIDs: []string{"1:x"}}))

	// Access records: bindings (one put twice, one deleted), settings at
	// version 2, policy sets (one holding a NUL in its text).
	at(25 * time.Minute)
	admin := func(tenant, action string, fields map[string]any) store.AuditRecord {
		return store.AuditRecord{TenantID: tenant, Action: action, Actor: "admin-oid", Fields: fields}
	}
	for _, bd := range []store.Binding{
		{TenantID: tA, AgentID: "sales", Subject: "ada-oid", Kind: store.KindUser, Role: store.RoleRunner, DisplayName: "Ada Lövelace", CreatedBy: "admin-oid"},
		{TenantID: tA, AgentID: store.AllAgents, Subject: "group-finance", Kind: store.KindGroup, Role: store.RoleReader, DisplayName: "Finanz & Controlling", CreatedBy: "admin-oid"},
		{TenantID: tA, AgentID: "sales", Subject: "group-finance", Kind: store.KindGroup, Role: store.RoleAdmin, CreatedBy: "admin-oid"},
		{TenantID: tZ, AgentID: "default", Subject: "グループ", Kind: store.KindGroup, Role: store.RoleRunner, DisplayName: "営業部", CreatedBy: "admin-oid"},
		{TenantID: tZ, AgentID: store.AllAgents, Subject: "Łukasz-oid", Kind: store.KindUser, Role: store.RoleAdmin, CreatedBy: "admin-oid"},
		{TenantID: tAB, AgentID: "default", Subject: "bob-oid", Kind: store.KindUser, Role: store.RoleReader, CreatedBy: "admin-oid"},
	} {
		must(s.PutBinding(ctx, bd, admin(bd.TenantID, "admin.binding.add", map[string]any{
			"agent": bd.AgentID, "kind": bd.Kind, "subject": bd.Subject, "role": bd.Role, "name": bd.DisplayName,
			"before": nil, "after": map[string]any{"agent": bd.AgentID, "kind": bd.Kind, "subject": bd.Subject, "role": bd.Role},
		})))
	}
	at(26 * time.Minute)
	must(s.PutBinding(ctx, store.Binding{TenantID: tA, AgentID: "sales", Subject: "ada-oid", Kind: store.KindUser, Role: store.RoleRunner,
		DisplayName: "Ada King, Countess of Lovelace", CreatedBy: "someone-else"}))
	must(s.DeleteBinding(ctx, tAB, "default", store.KindUser, "bob-oid", store.RoleReader, admin(tAB, "admin.binding.remove", map[string]any{
		"agent": "default", "kind": store.KindUser, "subject": "bob-oid", "role": store.RoleReader,
		"before": map[string]any{"agent": "default", "kind": store.KindUser, "subject": "bob-oid", "role": store.RoleReader}, "after": nil,
	})))
	_, err := s.PutTenantSettings(ctx, store.TenantSettings{TenantID: tA, DefaultRunner: false, DefaultGroup: "group-finance", UpdatedBy: "admin-oid"}, 0,
		admin(tA, "admin.default.set", map[string]any{"before": map[string]any{"runner": true, "group": ""}, "after": map[string]any{"runner": false, "group": "group-finance"}}))
	must(err)
	at(27 * time.Minute)
	_, err = s.PutTenantSettings(ctx, store.TenantSettings{TenantID: tA, DefaultGroup: "group-finance", AppsDisabled: false,
		DenyTools: []string{"demo/delete_*", "löschen"}, Redact: []string{`\b\d{4}-\d{4}\b`},
		AppPermissions: map[string][]string{"demo": {"camera", "clipboardWrite"}}, UpdatedBy: "admin-oid"}, 1,
		admin(tA, "admin.datarules.set", map[string]any{"before": map[string]any{"denyTools": []any{}, "redact": []any{}},
			"after": map[string]any{"denyTools": []any{"demo/delete_*", "löschen"}, "redact": []any{`\b\d{4}-\d{4}\b`}}}),
		admin(tA, "admin.settings.set", map[string]any{"server": "demo", "before": map[string]any{"appPermissions": []any{}},
			"after": map[string]any{"appPermissions": []any{"camera", "clipboardWrite"}}}))
	must(err)
	_, err = s.PutTenantSettings(ctx, store.TenantSettings{TenantID: tZ, DefaultRunner: true, AppsDisabled: true, UpdatedBy: "Łukasz-oid"}, 0,
		admin(tZ, "admin.settings.set", map[string]any{"before": map[string]any{"appsEnabled": true}, "after": map[string]any{"appsEnabled": false}}))
	must(err)
	policy := "@id(\"erlaubt\")\npermit (principal, action, resource)\nwhen { resource.name == \"Größe\x00NUL\" };\n"
	_, err = s.PutPolicySet(ctx, store.PolicySet{TenantID: tA, Text: policy, UpdatedBy: "admin-oid"}, 0,
		admin(tA, "admin.policy.set", map[string]any{"before": "", "after": policy, "policies": []any{"erlaubt"}, "version": 1}))
	must(err)
	_, err = s.PutPolicySet(ctx, store.PolicySet{TenantID: tZ, Text: "forbid (principal, action, resource);", UpdatedBy: "Łukasz-oid"}, 0)
	must(err)
	at(28 * time.Minute)
	_, err = s.PutPolicySet(ctx, store.PolicySet{TenantID: tZ, Text: "permit (principal, action, resource); // 許可", UpdatedBy: "Łukasz-oid"}, 1)
	must(err)

	// API keys: one used, one revoked, one of another tenant.
	at(30 * time.Minute)
	for _, k := range []store.APIKey{
		{ID: "key-1", TenantID: tA, AgentID: "sales", Name: "Nightly export – Größe", Hash: strings.Repeat("a1", 32), CreatedBy: "admin-oid"},
		{ID: "key-2", TenantID: tA, AgentID: "sales", Name: "old", Hash: strings.Repeat("b2", 32), CreatedBy: "admin-oid"},
		{ID: "key-3", TenantID: tZ, AgentID: "default", Name: "レポート", Hash: strings.Repeat("c3", 32), CreatedBy: "Łukasz-oid"},
	} {
		must(s.PutAPIKey(ctx, k, admin(k.TenantID, "admin.apikey.create", map[string]any{"key": k.ID, "name": k.Name, "agent": k.AgentID,
			"before": nil, "after": map[string]any{"key": k.ID, "name": k.Name, "agent": k.AgentID, "revoked": false}})))
	}
	at(31 * time.Minute)
	must(s.UseAPIKey(ctx, tA, "key-1", *now, store.AuditRecord{Action: "trigger.apikey.use", Actor: "api-key:key-1",
		Fields: map[string]any{"key": "key-1", "name": "Nightly export – Größe", "agent": "sales", "conversation": "19:abc@thread.tacv2"}}))
	_, err = s.RevokeAPIKey(ctx, tA, "key-2", "admin-oid", func(before, after store.APIKey) []store.AuditRecord {
		return []store.AuditRecord{{Action: "admin.apikey.revoke", Actor: "admin-oid", Fields: map[string]any{"key": before.ID, "name": before.Name,
			"agent": before.AgentID, "before": map[string]any{"revoked": before.Revoked()}, "after": map[string]any{"revoked": after.Revoked()}}}}
	})
	must(err)
	must(s.Append(ctx, store.AuditRecord{TenantID: tA, Action: "trigger.apikey.refused", Actor: "api-key:key-2",
		Fields: map[string]any{"reason": "revoked", "key": "key-2", "agent": "sales"}}))

	// Triggers: one whose due time was claimed, one paused by an admin,
	// one paused when its conversation was removed, one deleted.
	at(35 * time.Minute)
	trigger := func(id, tenant, name, conv string) store.Trigger {
		return store.Trigger{ID: id, TenantID: tenant, Name: name, AgentID: "sales", Cron: "0 9 * * 1-5", TimeZone: "Europe/Zurich",
			Text: "Wie waren die Umsätze gestern? 昨日の売上は?", ConversationID: conv, CreatedBy: "admin-oid"}
	}
	for _, tr := range []store.Trigger{
		trigger("trig-1", tA, "Morning report", "19:abc@thread.tacv2"),
		trigger("trig-2", tA, "Änderungen", "a:1-personal"),
		trigger("trig-3", tB, "Removed with its chat", "19:removed"),
		trigger("trig-4", tZ, "deleted", "19:zürich@thread.v2"),
		trigger("trig-5", tZ, "Übersicht", "19:zürich@thread.v2"),
	} {
		must(s.PutTrigger(ctx, tr, admin(tr.TenantID, "admin.trigger.create", map[string]any{"trigger": tr.ID, "before": nil,
			"after": map[string]any{"name": tr.Name, "cron": tr.Cron, "paused": false}})))
	}
	at(40 * time.Minute)
	due := t0.Add(39 * time.Minute)
	_, err = s.UpdateTrigger(ctx, tA, "trig-1", func(tr *store.Trigger) error {
		tr.LastDue, tr.LastRunAt, tr.LastRunID, tr.LastResult = due, *now, "run-4", "ok"
		return nil
	}, func(before, after store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "trigger.schedule.run", Fields: map[string]any{"trigger": after.ID, "name": after.Name,
			"agent": after.AgentID, "conversation": after.ConversationID, "due": due.Format(time.RFC3339), "previous": before.LastDue.Format(time.RFC3339)}}}
	})
	must(err)
	_, err = s.UpdateTrigger(ctx, tA, "trig-2", func(tr *store.Trigger) error {
		tr.Paused, tr.PausedReason, tr.PausedBy, tr.PausedAt = true, "Urlaub – bis Montag", "admin-oid", *now
		return nil
	}, func(before, after store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "admin.trigger.pause", Actor: "admin-oid", Fields: map[string]any{"trigger": after.ID,
			"before": map[string]any{"paused": before.Paused}, "after": map[string]any{"paused": after.Paused}}}}
	})
	must(err)
	at(41 * time.Minute)
	_, err = s.UpdateTrigger(ctx, tZ, "trig-5", func(tr *store.Trigger) error {
		tr.Paused, tr.PausedBy, tr.PausedAt = true, "Łukasz-oid", *now
		return nil
	}, nil)
	must(err)
	_, err = s.UpdateTrigger(ctx, tZ, "trig-5", func(tr *store.Trigger) error {
		tr.Paused, tr.PausedBy, tr.PausedAt, tr.LastDue = false, "", time.Time{}, *now
		return nil
	}, func(before, after store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "admin.trigger.resume", Actor: "Łukasz-oid", Fields: map[string]any{"trigger": after.ID,
			"before": map[string]any{"paused": true}, "after": map[string]any{"paused": false}}}}
	})
	must(err)
	must(s.DeleteTrigger(ctx, tZ, "trig-4", func(before store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "admin.trigger.delete", Actor: "Łukasz-oid", Fields: map[string]any{"trigger": before.ID, "before": map[string]any{"name": before.Name}, "after": nil}}}
	}))
	at(42 * time.Minute)
	_, err = s.RemoveConversation(ctx, tB+"/19:removed", tB, "19:removed", "The app was removed from the conversation.", func(paused [][2]store.Trigger) []store.AuditRecord {
		return []store.AuditRecord{{Action: "bot.conversation.removed", Fields: map[string]any{"conversation": "19:removed", "paused": len(paused)}}}
	})
	must(err)

	// A revoked view, with the record RevokeView writes itself.
	at(45 * time.Minute)
	must(s.RevokeView(ctx, tAB, "view-4", "admin-oid"))

	// The audit records of every other action the service writes: tool
	// calls of views with their results, refusals, feedback, blocked
	// channels; some at one time, some appended out of time order, one of
	// no tenant, one whose tool is not a string.
	at(50 * time.Minute)
	appCall := func(tenant, actor, tool, result string) store.AuditRecord {
		return store.AuditRecord{TenantID: tenant, Action: "agent.mcp_app.call", Actor: actor, Fields: map[string]any{
			"tool": tool, "server": "demo", "caller": actor, "result": result, "why": "", "view": "view-1", "agent": "sales"}}
	}
	same := *now
	recs := []store.AuditRecord{
		appCall(tA, "ada-oid", "refresh_sales", "ok"),
		appCall(tA, "ada-oid", "refresh_sales", "error"),
		appCall(tA, "Łukasz-oid", "show_chart", "refused"),
		appCall(tA, "ada-oid", "show_chart", "ok"),
		toolCall(tA, "ada-oid", "show_chart", "error", "the server answered 500: „Fehler“"),
		toolCall(tA, "ada-oid", "list_sales", "ok", ""),
		toolCall(tA, "Łukasz-oid", "app_only", "refused", "not offered to the model"),
		appCall(tZ, "Łukasz-oid", "run_report", "ok"),
		{TenantID: tA, Action: "agent.mcp_app.refused", Actor: "ada-oid", Fields: map[string]any{"server": "demo", "tool": "broken", "uri": "ui://demo/x", "why": "MIME type text/plain"}},
		{TenantID: tA, Action: "agent.mcp_app.blocked", Actor: "ada-oid", Fields: map[string]any{"view": "view-3", "server": "demo", "tool": "show_chart", "agent": "sales", "channel": "connect-src", "source": "view"}},
		{TenantID: tZ, Action: "bot.feedback", Actor: "Łukasz-oid", Fields: map[string]any{"reaction": "like", "text": "Sehr gut 👍", "activity": "1:answer", "conversation": "19:zürich@thread.v2"}},
		{TenantID: tA, Action: "bot.refused", Actor: "mallory-oid", Fields: map[string]any{"reason": "permission", "detail": "", "channel": "msteams", "claimed_tenant": tA, "conversation": "a:1-personal", "activity": "1:9"}},
		{Action: "bot.refused", Fields: map[string]any{"reason": "tenant", "detail": "installation", "claimed_tenant": "ffffffff-0000-0000-0000-000000000000", "channel": "msteams", "conversation": "19:x"}},
		{TenantID: tA, Action: "agent.tool.call", Actor: "ada-oid", Fields: map[string]any{"tool": 42.0, "result": "ok", "nested": map[string]any{"a": []any{1.0, "zwei", nil}}}},
	}
	for i := range recs {
		if i%3 == 0 {
			recs[i].Time = same // three pairs share a time
		}
	}
	must(s.Append(ctx, recs...))
	// Older than some already stored: appended out of time order.
	must(s.Append(ctx, appCall(tA, "ada-oid", "refresh_sales", "ok"), store.AuditRecord{Time: t0.Add(3 * time.Minute), TenantID: tAB,
		Action: "agent.mcp_app.call", Actor: "bob-oid", Fields: map[string]any{"tool": "show_chart", "result": "ok"}}))
	// And older than the audit retention at the dump's sweep.
	must(s.Append(ctx, store.AuditRecord{Time: t0.Add(-100 * 24 * time.Hour), TenantID: tB, Action: "agent.tool.call", Actor: "carla-oid",
		Fields: map[string]any{"tool": "list_sales", "result": "ok"}}))

	// Activities: one whose window is over at the dump, one that is not.
	at(55 * time.Minute)
	must(s.RecordArrival(ctx, "19:abc@thread.tacv2\x001:old", 15*time.Minute))
	at(100 * time.Minute)
	must(s.RecordArrival(ctx, "a:1-personal\x001:new", 4*time.Hour))
	must(s.RecordArrival(ctx, "19:zürich@thread.v2\x001:ü", 4*time.Hour))
	// A write after the lazy ones, so that they are committed.
	must(s.Append(ctx, store.AuditRecord{TenantID: tZ, Action: "bot.feedback", Actor: "Łukasz-oid", Fields: map[string]any{"reaction": "dislike", "text": ""}}))

	*now = t0.Add(2 * time.Hour)
	d := &fixtureDump{
		Clock:   *now,
		Tenants: fixtureTenants,
		Runs:    map[string]store.Run{}, Views: map[string]fixtureView{}, HTML: map[string][]byte{},
		Conversation: map[string]fixtureConversation{}, Deliveries: map[string]fixtureDelivery{},
		APIKey: map[string]store.APIKey{}, Seen: map[string]bool{},
	}
	for _, id := range []string{"run-1", "run-2", "run-3", "run-4", "run-5"} {
		d.Runs[id] = store.Run{}
		d.Deliveries[id] = fixtureDelivery{}
	}
	for i := 1; i <= 6; i++ {
		d.Views[fmt.Sprintf("view-%d", i)] = fixtureView{}
	}
	for _, doc := range [][]byte{shared, binary, short} {
		d.HTML[mcpapps.HTMLSHA256(doc)] = nil
	}
	for _, key := range []string{tA + "/19:abc@thread.tacv2", tA + "/a:1-personal", tZ + "/19:zürich@thread.v2", tAB + "/gone", tB + "/19:removed"} {
		d.Conversation[key] = fixtureConversation{}
	}
	for _, id := range []string{"key-1", "key-2", "key-3"} {
		d.APIKey[id] = store.APIKey{}
	}
	for _, key := range []string{"19:abc@thread.tacv2\x001:old", "a:1-personal\x001:new", "19:zürich@thread.v2\x001:ü", "never\x00seen"} {
		d.Seen[key] = false
	}
	return d
}
