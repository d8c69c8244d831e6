package triggers_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"teamsbot/access"
	"teamsbot/triggers"
)

// An API key's run posts its card into the stored conversation; every
// use is audited, and every refusal too, with the key's tenant when the
// key is known.
func TestRunsAPI(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.install(tenantA, convA)
	nk, err := e.trig.CreateKey(ctx, admin, "Nightly CI", "default")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nk.Secret, "tbk_"+nk.Key.ID+"_") || strings.Contains(nk.Key.Hash, nk.Secret) {
		t.Fatalf("key %+v secret %q", nk.Key, nk.Secret)
	}
	stored, _ := e.store.APIKey(ctx, nk.Key.ID)
	if stored.Hash == "" || strings.Contains(stored.Hash, nk.Secret[len(nk.Secret)-20:]) {
		t.Errorf("stored key %+v", stored)
	}

	code, out := e.post("default", nk.Secret, map[string]any{"text": "/sales_report {}", "conversation": convA})
	if code != http.StatusOK {
		t.Fatalf("run: %d %v", code, out)
	}
	views, _ := out["views"].([]any)
	if len(views) != 1 || out["failed"] != false {
		t.Fatalf("answer %v", out)
	}
	view := views[0].(map[string]any)
	if !strings.HasPrefix(view["url"].(string), "https://teams.example.test/mcp-apps/") {
		t.Errorf("view url %v", view)
	}
	msgs := e.conn.Messages(convA)
	if len(msgs) != 1 || msgs[0].ReplyTo != "" {
		t.Fatalf("posted %+v", msgs)
	}
	if s := string(msgs[0].Raw); !strings.Contains(s, "the API key “Nightly CI” started it") || !strings.Contains(s, "agent readers") {
		t.Errorf("card: %s", s)
	}
	v, err := e.store.View(ctx, view["id"].(string))
	if err != nil || v.UserID != "" || v.TenantID != tenantA {
		t.Errorf("view %+v %v", v, err)
	}
	uses := e.audit(tenantA, triggers.AuditKeyUse)
	if len(uses) != 1 || uses[0].Fields["key"] != nk.Key.ID || uses[0].Fields["conversation"] != convA {
		t.Errorf("use audit %+v", uses)
	}
	if k, _ := e.store.APIKey(ctx, nk.Key.ID); !k.LastUsedAt.Equal(e.clock.Now()) {
		t.Errorf("last used %v", k.LastUsedAt)
	}

	// Bad input, each with its words; nothing is posted.
	for _, c := range []struct {
		name string
		body any
		code int
		want string
	}{
		{"empty text", map[string]any{"text": "  ", "conversation": convA}, 400, "The text is empty"},
		{"text too long", map[string]any{"text": strings.Repeat("x", triggers.MaxText+1), "conversation": convA}, 400, "at most 8192"},
		{"no conversation", map[string]any{"text": "hi"}, 400, "Name the conversation"},
		{"unknown conversation", map[string]any{"text": "hi", "conversation": "19:nowhere"}, 404, "not installed in conversation"},
		{"not JSON", "text=hi", 400, "not valid JSON (at byte 2)"},
		{"unknown field", map[string]any{"text": "hi", "conversation": convA, "user": "x"}, 400, "`user` is not a field of this call; it takes `text` and `conversation`."},
		{"body too large", map[string]any{"text": strings.Repeat("x", 5*triggers.MaxText), "conversation": convA}, 413, "too large"},
	} {
		code, out := e.post("default", nk.Secret, c.body)
		if code != c.code || !strings.Contains(out["error"].(string), c.want) {
			t.Errorf("%s: %d %v, want %d %q", c.name, code, out, c.code, c.want)
		}
	}
	if n := len(e.conn.Messages(convA)); n != 1 {
		t.Errorf("%d messages after bad input, want 1", n)
	}

	// Refusals: 401 (403 for another agent), audited.
	otherAgent := nk.Secret // a valid key, asked for another agent
	wrong := nk.Secret[:len(nk.Secret)-4] + "AAAA"
	for _, c := range []struct {
		name, agent, token string
		code               int
		tenant, reason     string
	}{
		{"no key", "default", "", 401, "", triggers.RefusedNoKey},
		{"malformed", "default", "hunter2", 401, "", triggers.RefusedMalformed},
		{"unknown key", "default", "tbk_000000000000000000000000_" + strings.Repeat("A", 43), 401, "", triggers.RefusedUnknown},
		{"wrong secret", "default", wrong, 401, tenantA, triggers.RefusedSecret},
		{"another agent", "other", otherAgent, 403, tenantA, triggers.RefusedAgent},
	} {
		code, out := e.post(c.agent, c.token, map[string]any{"text": "hi", "conversation": convA})
		if code != c.code {
			t.Errorf("%s: %d %v, want %d", c.name, code, out, c.code)
		}
		found := false
		for _, r := range e.audit(c.tenant, triggers.AuditKeyRefused) {
			found = found || r.Fields["reason"] == c.reason
		}
		if !found {
			t.Errorf("%s: no %s record with reason %q in tenant %q", c.name, triggers.AuditKeyRefused, c.reason, c.tenant)
		}
	}

	// Revoked: refused from then on, and audited.
	if err := e.trig.RevokeKey(ctx, admin, nk.Key.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.trig.RevokeKey(ctx, admin, nk.Key.ID); !errors.Is(err, triggers.ErrInvalid) {
		t.Errorf("revoke twice: %v", err)
	}
	if code, _ := e.post("default", nk.Secret, map[string]any{"text": "hi", "conversation": convA}); code != 401 {
		t.Errorf("revoked key: %d", code)
	}
	refused := e.audit(tenantA, triggers.AuditKeyRefused)
	if last := refused[len(refused)-1]; last.Fields["reason"] != triggers.RefusedRevoked || last.Fields["key"] != nk.Key.ID {
		t.Errorf("revoked refusal %+v", last)
	}
	if n := len(e.conn.Messages(convA)); n != 1 {
		t.Errorf("%d messages after refusals, want 1", n)
	}
	if n := e.counter("teamsbot_triggered_runs_total", map[string]string{"kind": "api", "result": "ok"}); n != 1 {
		t.Errorf("runs counted %v, want 1", n)
	}
	if n := e.counter("teamsbot_api_key_refusals_total", map[string]string{"reason": triggers.RefusedRevoked}); n != 1 {
		t.Errorf("revoked refusals counted %v, want 1", n)
	}
	revokes := e.audit(tenantA, triggers.AuditKeyRevoke)
	if len(revokes) != 1 || revokes[0].Actor != admin.UserID || revokes[0].Fields["before"].(map[string]any)["revoked"] != false {
		t.Errorf("revoke audit %+v", revokes)
	}
}

// A key is one tenant's: another tenant's admin neither sees nor revokes
// it, and a person without agents.admin makes none.
func TestKeysAreTheTenantAdminsOnly(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	nk, err := e.trig.CreateKey(ctx, admin, "k", "default")
	if err != nil {
		t.Fatal(err)
	}
	other := access.Person{TenantID: tenantB, UserID: "b-admin", Roles: []string{access.PermAdmin}}
	if keys, _ := e.trig.Keys(ctx, other); len(keys) != 0 {
		t.Errorf("tenant B sees %v", keys)
	}
	if err := e.trig.RevokeKey(ctx, other, nk.Key.ID); !errors.Is(err, triggers.ErrNotFound) {
		t.Errorf("tenant B revokes: %v", err)
	}
	reader := access.Person{TenantID: tenantA, UserID: "r", Roles: []string{access.PermRead}}
	if _, err := e.trig.CreateKey(ctx, reader, "k2", "default"); !errors.Is(err, access.ErrDenied) {
		t.Errorf("a reader creates a key: %v", err)
	}
	if _, err := e.trig.CreateKey(ctx, admin, "", "nope"); !errors.Is(err, triggers.ErrInvalid) || !strings.Contains(err.Error(), `no agent "nope"`) || !strings.Contains(err.Error(), "name") {
		t.Errorf("bad key: %v", err)
	}
	recs := e.audit(tenantA, triggers.AuditKeyCreate)
	if len(recs) != 1 || recs[0].Fields["before"] != nil {
		t.Errorf("create audit %+v", recs)
	}
}

// The Bot Connector answers 403: the app was removed. The API says so
// (410), and the conversation's triggers are paused and reported.
func TestRunsAPIIntoRemovedConversation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.install(tenantA, convA)
	tr, err := e.trig.CreateTrigger(ctx, admin, triggers.Spec{Name: "Daily", Agent: "default", Cron: "0 9 * * *", TimeZone: "Europe/Berlin", Text: "/sales_report {}", Conversation: convA})
	if err != nil {
		t.Fatal(err)
	}
	nk, _ := e.trig.CreateKey(ctx, admin, "k", "default")
	e.conn.Forbid(convA)
	code, out := e.post("default", nk.Secret, map[string]any{"text": "hi", "conversation": convA})
	if code != http.StatusGone || !strings.Contains(out["error"].(string), "removed") {
		t.Fatalf("%d %v, want 410", code, out)
	}
	got, _ := e.store.Trigger(ctx, tenantA, tr.ID)
	if !got.Paused || !strings.Contains(got.PausedReason, "403") {
		t.Errorf("trigger %+v", got)
	}
	notices, err := e.trig.Notices(ctx, admin)
	if err != nil || len(notices) != 1 || notices[0].Fields["conversation"] != convA {
		t.Errorf("notices %+v %v", notices, err)
	}
	// Resuming needs the app back in the conversation.
	if err := e.trig.ResumeTrigger(ctx, admin, tr.ID); !errors.Is(err, triggers.ErrNotFound) || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("resume without the app: %v", err)
	}
	e.install(tenantA, convA)
	if err := e.trig.ResumeTrigger(ctx, admin, tr.ID); err != nil {
		t.Errorf("resume: %v", err)
	}
	recs := e.audit(tenantA, triggers.AuditTriggerResume)
	if len(recs) != 1 || recs[0].Fields["before"].(map[string]any)["paused"] != true || recs[0].Fields["after"].(map[string]any)["paused"] != false {
		t.Errorf("resume audit %+v", recs)
	}
}
