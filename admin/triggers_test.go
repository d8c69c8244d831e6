package admin_test

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/bot"
	"teamsbot/store"
	"teamsbot/triggers"
)

const convA = "19:general@thread.tacv2"

// newTriggersEnv is the console with API keys and triggers: the real
// agent and bot (local mode; nothing is run here) on the console's store,
// and the app installed in one conversation of tenant A.
func newTriggersEnv(t *testing.T) *env {
	return newEnvWith(t, func(st *store.Store, ax *access.Service) *triggers.Service { return triggersOn(t, st, ax) })
}

// triggersOn is the triggers service of newTriggersEnv on st and ax.
func triggersOn(t *testing.T, st *store.Store, ax *access.Service) *triggers.Service {
	t.Helper()
	{
		ctx := context.Background()
		ag, err := agent.New(ctx, agent.DefaultConfig(), agent.Options{Store: st, Access: ax, AppsEnabled: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ag.Close() })
		b, err := bot.New(bot.Options{Agent: ag, Store: st, Access: ax})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := triggers.New(triggers.Options{Store: st, Bot: b, Access: ax, Agents: ag.Agents()})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutConversation(ctx, store.ConversationRef{Key: bot.ConversationKey(tenantA, convA), TenantID: tenantA,
			ConversationID: convA, ServiceURL: "http://127.0.0.1:9", ChannelID: "msteams", BotID: "28:bot"}); err != nil {
			t.Fatal(err)
		}
		return tr
	}
}

// labelled checks that every form control of a page has a label.
func labelled(t *testing.T, page, body string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`<(?:input|select|textarea) id="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		if !strings.Contains(body, `<label for="`+m[1]+`"`) {
			t.Errorf("%s: control %s has no label", page, m[1])
		}
	}
	if regexp.MustCompile(`<(?:input|select|textarea) (?:name|readonly)`).MatchString(body) {
		t.Errorf("%s: a control without an id cannot be labelled", page)
	}
}

// The keys page shows a new key's secret once, lists keys with their
// agent, creator and last use, and revokes; all audited.
func TestConsoleAPIKeys(t *testing.T) {
	e := newTriggersEnv(t)
	admin := e.client(adminA)
	code, body := e.do(admin, http.MethodGet, "/admin/keys", "", "")
	if code != http.StatusOK || !strings.Contains(body, `aria-current="page">API keys`) || !onlyFluentScript(body) {
		t.Fatalf("keys page: %d", code)
	}
	labelled(t, "keys", body)
	code, body = e.form(admin, "/admin/keys", url.Values{"name": {"Nightly CI"}, "agent": {"default"}})
	secret := regexp.MustCompile(`value="(tbk_[A-Za-z0-9_-]+)"`).FindStringSubmatch(body)
	if code != http.StatusCreated || secret == nil || !strings.Contains(body, "shown this once") {
		t.Fatalf("create: %d %s", code, body)
	}
	labelled(t, "new key", body)
	code, body = e.do(admin, http.MethodGet, "/admin/keys", "", "")
	if strings.Contains(body, secret[1]) || !strings.Contains(body, "Nightly CI") || !strings.Contains(body, adminA.OID) || !strings.Contains(body, "never") {
		t.Errorf("the list shows the secret again, or lacks the key: %d", code)
	}
	if code, body = e.form(admin, "/admin/keys", url.Values{"name": {""}, "agent": {"ghost"}}); code != http.StatusBadRequest || !strings.Contains(body, "give it a name") || !strings.Contains(body, "no agent") {
		t.Errorf("bad key: %d", code)
	}
	id := regexp.MustCompile(`/admin/keys/([0-9a-f]+)/revoke`).FindStringSubmatch(body)
	if id == nil {
		t.Fatal("no revoke button")
	}
	// Asked first: what stops working, and the key stays active.
	if code, body = e.form(admin, "/admin/keys/"+id[1]+"/revoke", nil); code != http.StatusOK || !strings.Contains(body, "Revoke the API key “Nightly CI”?") ||
		!strings.Contains(body, "will get 401 Unauthorized") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Errorf("an unconfirmed revoke: %d %s", code, body)
	}
	if _, raw := e.do(admin, http.MethodGet, "/api/admin/keys", "", ""); strings.Contains(raw, `"revoked":true`) {
		t.Errorf("an unconfirmed revoke revoked the key: %s", raw)
	}
	if code, body = e.form(admin, "/admin/keys/"+id[1]+"/revoke", url.Values{"confirm": {"yes"}}); code != http.StatusOK || !strings.Contains(body, "The API key was revoked") || !strings.Contains(body, "revoked ") {
		t.Errorf("revoke: %d", code)
	}
	// Another tenant's admin sees none of it; the API gives no hash.
	if _, body := e.do(e.client(adminB), http.MethodGet, "/api/admin/keys", "", ""); strings.Contains(body, id[1]) {
		t.Errorf("tenant B sees tenant A's key")
	}
	_, body = e.do(admin, http.MethodGet, "/api/admin/keys", "", "")
	if strings.Contains(body, "hash") || !strings.Contains(body, `"revoked":true`) {
		t.Errorf("API list: %s", body)
	}
	recs, _ := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA})
	actions := map[string]int{}
	for _, r := range recs {
		actions[r.Action]++
	}
	if actions[triggers.AuditKeyCreate] != 1 || actions[triggers.AuditKeyRevoke] != 1 {
		t.Errorf("audit %v", actions)
	}
}

// The triggers page creates, pauses, resumes and deletes, shows the next
// run, names every mistake, and refuses cross-site posts.
func TestConsoleTriggers(t *testing.T) {
	e := newTriggersEnv(t)
	admin := e.client(adminA)
	code, body := e.do(admin, http.MethodGet, "/admin/triggers", "", "")
	if code != http.StatusOK || !strings.Contains(body, convA) {
		t.Fatalf("triggers page: %d", code)
	}
	labelled(t, "triggers", body)
	code, body = e.form(admin, "/admin/triggers", url.Values{"name": {"Digest"}, "agent": {"default"}, "cron": {"61 25 * * funday"}, "timeZone": {"Nowhere/Else"}, "text": {"hi"}, "conversation": {convA}})
	if code != http.StatusBadRequest || !strings.Contains(body, html.EscapeString("schedule `61 25 * * funday`: minute `61`: use 0-59; hour `25`: use 0-23; day of week `funday`: use 0-7 or sun-sat")) ||
		!strings.Contains(body, "not an IANA time zone") || !strings.Contains(body, `value="Digest"`) || strings.Contains(body, "triggers:") {
		t.Fatalf("bad trigger: %d %s", code, body)
	}
	// The API names the same mistakes in the same words.
	code, body = e.do(admin, http.MethodPost, "/api/admin/triggers", "application/json",
		`{"name":"Digest","agent":"default","cron":"61 9 * * funday","timeZone":"UTC","text":"hi","conversation":"`+convA+`"}`)
	var refused struct{ Error string }
	if json.Unmarshal([]byte(body), &refused) != nil || code != http.StatusBadRequest ||
		refused.Error != "That was refused: schedule `61 9 * * funday`: minute `61`: use 0-59; day of week `funday`: use 0-7 or sun-sat." {
		t.Fatalf("bad trigger through the API: %d %s", code, body)
	}
	code, body = e.form(admin, "/admin/triggers", url.Values{"name": {"Digest"}, "agent": {"default"}, "cron": {"30 8 * * mon-fri"}, "timeZone": {"Europe/Berlin"}, "text": {"/sales_report {}"}, "conversation": {convA}})
	if code != http.StatusOK || !strings.Contains(body, "The trigger was saved") || !strings.Contains(body, "30 8 * * mon-fri") || !strings.Contains(body, "Europe/Berlin") {
		t.Fatalf("create: %d %s", code, body)
	}
	id := regexp.MustCompile(`/admin/triggers/([0-9a-f]+)/pause`).FindStringSubmatch(body)
	if id == nil {
		t.Fatal("no pause button")
	}
	req, _ := http.NewRequest(http.MethodPost, e.base+"/admin/triggers/"+id[1]+"/delete", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := admin.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site delete: %v %v", resp, err)
	}
	if code, body = e.form(admin, "/admin/triggers/"+id[1]+"/pause", nil); code != http.StatusOK || !strings.Contains(body, "paused: Paused by an administrator.") {
		t.Errorf("pause: %d", code)
	}
	if code, body = e.form(admin, "/admin/triggers/"+id[1]+"/resume", nil); code != http.StatusOK || !strings.Contains(body, "The trigger was resumed") {
		t.Errorf("resume: %d", code)
	}
	var list struct {
		Triggers []struct {
			ID        string `json:"id"`
			NextRunAt string `json:"nextRunAt"`
			Paused    bool   `json:"paused"`
		} `json:"triggers"`
	}
	_, raw := e.do(admin, http.MethodGet, "/api/admin/triggers", "", "")
	if err := json.Unmarshal([]byte(raw), &list); err != nil || len(list.Triggers) != 1 || list.Triggers[0].NextRunAt == "" || list.Triggers[0].Paused {
		t.Errorf("API list: %s", raw)
	}
	if code, _ := e.do(admin, http.MethodPost, "/api/admin/triggers/"+id[1]+"/pause", "", ""); code != http.StatusNoContent {
		t.Errorf("API pause: %d", code)
	}
	if code, body := e.do(admin, http.MethodPost, "/api/admin/triggers/"+id[1]+"/pause", "", ""); code != http.StatusBadRequest || !strings.Contains(body, "paused already") {
		t.Errorf("API pause twice: %d %s", code, body)
	}
	// Asked first: what stops, and the trigger stays.
	if code, body = e.form(admin, "/admin/triggers/"+id[1]+"/delete", nil); code != http.StatusOK || !strings.Contains(body, "will not run again") ||
		!strings.Contains(body, `name="confirm" value="yes"`) {
		t.Errorf("an unconfirmed delete: %d %s", code, body)
	}
	if _, raw := e.do(admin, http.MethodGet, "/api/admin/triggers", "", ""); !strings.Contains(raw, id[1]) {
		t.Errorf("an unconfirmed delete deleted the trigger: %s", raw)
	}
	if code, body = e.form(admin, "/admin/triggers/"+id[1]+"/delete", url.Values{"confirm": {"yes"}}); code != http.StatusOK || !strings.Contains(body, "The trigger was deleted") || strings.Contains(body, "/admin/triggers/"+id[1]) {
		t.Errorf("delete: %d", code)
	}
	if code, _ := e.do(admin, http.MethodDelete, "/api/admin/triggers/"+id[1], "", ""); code != http.StatusNotFound {
		t.Errorf("API delete of a deleted trigger: %d", code)
	}
	recs, _ := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA})
	actions := map[string]int{}
	for _, r := range recs {
		actions[r.Action]++
	}
	for _, a := range []string{triggers.AuditTriggerCreate, triggers.AuditTriggerResume, triggers.AuditTriggerDelete} {
		if actions[a] != 1 {
			t.Errorf("%s audited %d times", a, actions[a])
		}
	}
	if actions[triggers.AuditTriggerPause] != 2 {
		t.Errorf("pauses audited %d times, want 2", actions[triggers.AuditTriggerPause])
	}
}
