package bot

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"teamsbot/access"
	"teamsbot/store"
)

const otherTenant = "0b0b0b0b-0000-4000-8000-00000000000b"

// agentData are strings only a run of the agent would send: the demo's
// answer and view block.
var agentData = []string{"Sales report", "/mcp-apps/", "Widgets"}

// refusedOnly checks that the only message sent in reply to id is a
// refusal card saying want, and that nothing of the agent was sent or
// audited.
func refusedOnly(t *testing.T, h *harness, id, want string) {
	t.Helper()
	calls := h.conn.snapshot()
	c, ok := replyTo(calls, id)
	if !ok {
		t.Fatalf("no refusal card in reply to %s", id)
	}
	if !strings.Contains(string(c.Raw), want) {
		t.Errorf("reply to %s does not say %q: %s", id, want, c.Raw)
	}
	for _, call := range calls {
		for _, s := range agentData {
			if strings.Contains(string(call.Raw), s) {
				t.Errorf("the connector got the agent's data (%q): %s", s, call.Raw)
			}
		}
	}
	recs, _ := h.store.Audit(context.Background(), store.AuditQuery{})
	for _, r := range recs {
		if strings.HasPrefix(r.Action, "agent.") {
			t.Errorf("the agent ran: %s %v", r.Action, r.Fields)
		}
	}
}

// refusedRecord returns the bot.refused record of activity id.
func refusedRecord(t *testing.T, h *harness, id string) store.AuditRecord {
	t.Helper()
	recs, _ := h.store.Audit(context.Background(), store.AuditQuery{Action: AuditRefused})
	for _, r := range recs {
		if r.Fields["activity"] == id {
			return r
		}
	}
	t.Fatalf("no bot.refused record for %s: %+v", id, recs)
	return store.AuditRecord{}
}

// A message signed by the Bot Connector for another tenant, and one from
// Web Chat that claims a Teams tenant and user in its channelData, run
// nothing and are audited; the other tenant's install keeps nothing.
func TestGateRefusesOtherTenantsAndChannels(t *testing.T) {
	h := newHarness(t, setup{})
	other := h.message("personal", "a:other", "other-1", "/sales_report {}")
	other["conversation"].(map[string]any)["tenantId"] = otherTenant
	other["channelData"] = map[string]any{"tenant": map[string]any{"id": otherTenant}}

	webchat := h.message("personal", "a:webchat", "webchat-1", "/sales_report {}")
	webchat["channelId"] = "webchat"

	mixed := h.message("personal", "a:mixed", "mixed-1", "/sales_report {}")
	mixed["conversation"].(map[string]any)["tenantId"] = otherTenant

	for _, m := range []map[string]any{other, webchat, mixed} {
		if s, b := h.send(m); s != http.StatusAccepted {
			t.Fatalf("%d %s", s, b)
		}
	}
	install := h.message("personal", "a:other-install", "", "")
	delete(install, "text")
	install["type"], install["action"] = "installationUpdate", "add"
	install["conversation"].(map[string]any)["tenantId"] = otherTenant
	install["channelData"] = map[string]any{"tenant": map[string]any{"id": otherTenant}}
	if s, b := h.send(install); s != http.StatusOK {
		t.Fatalf("install: %d %s", s, b)
	}
	h.shutdown()

	for _, id := range []string{"other-1", "webchat-1", "mixed-1"} {
		refusedOnly(t, h, id, "I can't answer here")
	}
	for id, reason := range map[string]string{"other-1": RefusedTenant, "webchat-1": RefusedChannel, "mixed-1": RefusedTenant} {
		rec := refusedRecord(t, h, id)
		if rec.Fields["reason"] != reason || rec.TenantID != "" {
			t.Errorf("%s: record %+v, want reason %s outside every tenant's log", id, rec, reason)
		}
	}
	if _, err := h.store.Conversation(context.Background(), ConversationKey(otherTenant, "a:other-install")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another tenant's install stored a reference: %v", err)
	}
	for _, c := range h.conn.snapshot() {
		if strings.Contains(string(c.Raw), "Hi, I'm") {
			t.Errorf("another tenant's install was welcomed: %s", c.Raw)
		}
	}
}

// When the tenant's admin turns the default off, a person without
// agents.run gets a card that names the role and whom to ask, and no run;
// a runner binding lets them in.
func TestGateAsksAccessBeforeARun(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	admin := access.Person{TenantID: testTenant, UserID: "adadadad-0000-4000-8000-0000000000ad", Roles: []string{access.PermAdmin}}
	if err := h.access.SetDefault(ctx, admin, access.Default{Runner: false}); err != nil {
		t.Fatal(err)
	}
	if s, b := h.send(h.message("personal", "a:perm", "perm-1", "/sales_report {}")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the refusal", hasReplyTo("perm-1"))
	h.idle()
	refusedOnly(t, h, "perm-1", "agents.run")
	if c, _ := replyTo(h.conn.snapshot(), "perm-1"); !strings.Contains(string(c.Raw), "administrator") {
		t.Errorf("the refusal does not say whom to ask: %s", c.Raw)
	}
	if rec := refusedRecord(t, h, "perm-1"); rec.TenantID != testTenant || rec.Fields["reason"] != RefusedPermission {
		t.Errorf("record %+v, want a permission refusal in the tenant's log", rec)
	}

	msg := h.message("personal", "a:perm", "perm-2", "/sales_report {}")
	user := msg["from"].(map[string]any)["aadObjectId"].(string)
	if err := h.access.AddBinding(ctx, admin, store.Binding{AgentID: store.AllAgents, Kind: store.KindUser, Subject: user, Role: store.RoleRunner}); err != nil {
		t.Fatal(err)
	}
	if s, b := h.send(msg); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("perm-2"))
	h.idle()
	if c, _ := replyTo(h.conn.snapshot(), "perm-2"); !strings.Contains(string(c.Raw), "Sales report") {
		t.Errorf("the runner's answer: %s", c.Raw)
	}
}
