package bot

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"teamsbot/access"
	"teamsbot/agent"
	"teamsbot/cards"
	"teamsbot/store"
)

// install announces the app in a personal conversation, as Teams does.
func (h *harness) install(conv string) {
	h.t.Helper()
	a := h.message("personal", conv, "", "")
	delete(a, "text")
	a["type"] = "installationUpdate"
	a["action"] = "add-upgrade" // no welcome card: the test counts cards
	if s, b := h.send(a); s != http.StatusOK {
		h.t.Fatalf("installationUpdate: %d %s", s, b)
	}
}

func (h *harness) putTrigger(id, conv string) {
	h.t.Helper()
	if err := h.store.PutTrigger(context.Background(), store.Trigger{ID: id, TenantID: testTenant, Name: "Weekly " + id,
		AgentID: "default", Cron: "0 9 * * 1", TimeZone: "UTC", Text: "/sales_report {}", ConversationID: conv, CreatedBy: "admin-oid"}); err != nil {
		h.t.Fatal(err)
	}
}

// A triggered run posts its answer into the stored conversation, unasked
// (no reply id), with the trigger's banner; its view has no owner.
func TestRunTriggeredPostsIntoStoredConversation(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	h.install("a:team-chat")

	res, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "/sales_report {}",
		ConversationID: "a:team-chat", Trigger: cards.Trigger{Name: "Monday report", Scheduled: true}})
	if err != nil {
		t.Fatalf("RunTriggered: %v", err)
	}
	if res.Failed || len(res.ViewIDs) != 1 || len(res.ActivityIDs) != 1 {
		t.Fatalf("result %+v", res)
	}
	var posted received
	for _, c := range h.conn.snapshot() {
		if c.AssignedID == res.ActivityIDs[0] {
			posted = c
		}
	}
	if posted.Method != http.MethodPost || posted.ConversationID != "a:team-chat" || posted.ActivityID != "" || !strings.HasPrefix(posted.Auth, "Bearer ") {
		t.Fatalf("posted %+v", posted)
	}
	raw := string(posted.Raw)
	if !containsAll(raw, "Triggered run.", "the schedule “Monday report” started it", "agent readers (the agents.read role)", "/mcp-apps/"+res.ViewIDs[0]) {
		t.Errorf("card does not say it was triggered, by what, and who may open it:\n%s", raw)
	}
	if !containsAll(raw, `"additionalType":["AIGeneratedContent"]`, `"@type":"Claim"`, `"feedbackLoop"`) {
		t.Errorf("the triggered answer lacks the AI label, its citations or the feedback buttons:\n%s", raw)
	}
	v, err := h.store.View(ctx, res.ViewIDs[0])
	if err != nil || v.UserID != "" || v.TenantID != testTenant {
		t.Fatalf("view %+v %v: want no owner, the tenant's", v, err)
	}
	d, err := h.store.Delivery(ctx, res.RunID)
	if err != nil || d.ConversationID != "a:team-chat" {
		t.Errorf("delivery %+v %v", d, err)
	}

	// A conversation where the app is not installed is refused before
	// anything runs.
	if _, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "hi", ConversationID: "a:elsewhere"}); !errors.Is(err, ErrNoConversation) {
		t.Errorf("unknown conversation: %v, want ErrNoConversation", err)
	}
}

// A 403 from the Bot Connector means the app was removed: the reference
// goes, the conversation's triggers are paused with the reason, one audit
// record says so, and nothing is retried.
func TestRunTriggeredIntoRemovedConversationPausesItsTriggers(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	h.install("a:gone")
	h.putTrigger("t-1", "a:gone")
	h.conn.forbid("a:gone")

	_, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "/lookup_customer {\"customer\": \"Contoso\"}",
		ConversationID: "a:gone", Trigger: cards.Trigger{Name: "Weekly t-1", Scheduled: true}})
	if !errors.Is(err, ErrConversationGone) {
		t.Fatalf("RunTriggered: %v, want ErrConversationGone", err)
	}
	posts := 0
	for _, c := range h.conn.snapshot() {
		if c.ConversationID == "a:gone" {
			posts++
		}
	}
	if posts != 0 {
		t.Errorf("%d calls recorded as accepted", posts)
	}
	if _, err := h.store.Conversation(ctx, ConversationKey(testTenant, "a:gone")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("reference kept: %v", err)
	}
	tr, _ := h.store.Trigger(ctx, testTenant, "t-1")
	if !tr.Paused || !strings.Contains(tr.PausedReason, "403") {
		t.Errorf("trigger %+v, want paused with the reason", tr)
	}
	recs, _ := h.store.Audit(ctx, store.AuditQuery{TenantID: testTenant, Action: AuditConversationRemoved})
	if len(recs) != 1 || recs[0].Fields["why"] != RemovedForbidden {
		t.Fatalf("audit %+v", recs)
	}
	paused, _ := recs[0].Fields["paused"].([]any)
	if len(paused) != 1 {
		t.Errorf("audit names %v paused triggers, want t-1", recs[0].Fields["paused"])
	}
	// Nothing is retried: the next run is refused before it starts.
	if _, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "hi", ConversationID: "a:gone"}); !errors.Is(err, ErrNoConversation) {
		t.Errorf("second run: %v, want ErrNoConversation", err)
	}
}

// Uninstalling the app pauses the conversation's triggers the same way.
func TestUninstallPausesTriggers(t *testing.T) {
	h := newHarness(t, setup{})
	ctx := context.Background()
	h.install("a:leaving")
	h.putTrigger("t-2", "a:leaving")
	h.putTrigger("t-3", "a:staying")
	rm := h.message("personal", "a:leaving", "", "")
	rm["type"] = "installationUpdate"
	rm["action"] = "remove"
	if s, b := h.send(rm); s != http.StatusOK {
		t.Fatalf("remove: %d %s", s, b)
	}
	if tr, _ := h.store.Trigger(ctx, testTenant, "t-2"); !tr.Paused || tr.PausedReason != "The app was removed from this conversation." {
		t.Errorf("t-2 %+v", tr)
	}
	if tr, _ := h.store.Trigger(ctx, testTenant, "t-3"); tr.Paused {
		t.Errorf("t-3 of another conversation paused")
	}
	recs, _ := h.store.Audit(ctx, store.AuditQuery{TenantID: testTenant, Action: AuditConversationRemoved})
	if len(recs) != 1 || recs[0].Fields["why"] != RemovedUninstalled {
		t.Errorf("audit %+v", recs)
	}
}

// askedModel is an OpenAI-compatible model as the Chat Completions API
// reference ("Create chat completion", POST {base}/chat/completions)
// defines it, which answers every request in words and keeps, for each
// request, the user messages it was sent: what the model read.
type askedModel struct {
	mu    sync.Mutex
	asked [][]string
}

func newAskedModel(t *testing.T) (*askedModel, *agent.ModelConfig) {
	m := &askedModel{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": "not found"}})
			return
		}
		var users []string
		for _, msg := range req.Messages {
			if msg.Role == "user" && msg.Content != nil {
				users = append(users, *msg.Content)
			}
		}
		m.mu.Lock()
		m.asked = append(m.asked, users)
		m.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{"choices": []any{map[string]any{
			"finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "Noted."},
		}}})
	}))
	t.Cleanup(srv.Close)
	return m, &agent.ModelConfig{Kind: agent.ModelOpenAI, BaseURL: srv.URL + "/v1", Model: "test-model"}
}

// last returns the user messages of the latest request.
func (m *askedModel) last() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.asked) == 0 {
		return nil
	}
	return m.asked[len(m.asked)-1]
}

// A run without a person posting into a group chat reads what people said
// to the agent there, and adds its own turn, only once the tenant's admin
// allowed it: before, the model reads the trigger's text alone and the
// conversation's memory stays as the people left it; after the admin
// turns it off again, the memory is out of reach again.
func TestRunTriggeredUsesTheMemoryOnlyWhenTheAdminAllowsIt(t *testing.T) {
	model, cfg := newAskedModel(t)
	h := newHarness(t, setup{model: cfg})
	ctx := context.Background()
	const conv = "19:standup@thread.v2"
	if s, b := h.send(h.message("groupChat", conv, "m-1", "the code word is heron")); s != http.StatusAccepted {
		t.Fatalf("%d %s", s, b)
	}
	h.conn.waitFor(t, "the answer", hasReplyTo("m-1"))
	h.idle()
	const said = "the code word is heron"
	if got := model.last(); len(got) != 1 || !strings.Contains(got[0], said) {
		t.Fatalf("the person's run asked the model %q", got)
	}
	turns := func() []store.HistoryTurn {
		t.Helper()
		hs, err := h.store.History(ctx, testTenant, conv, "default", 100, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	if hs := turns(); len(hs) != 1 || hs[0].UserID != testUserOID {
		t.Fatalf("the conversation's memory after the person's message: %d turns", len(hs))
	}
	trigger := func() {
		t.Helper()
		res, err := h.bot.RunTriggered(ctx, TriggeredRun{TenantID: testTenant, AgentID: "default", Text: "What is the code word?",
			ConversationID: conv, Trigger: cards.Trigger{Name: "Morning check", Scheduled: true}})
		if err != nil || res.Failed || len(res.ActivityIDs) != 1 {
			t.Fatalf("RunTriggered: %+v %v", res, err)
		}
	}
	admin := access.Person{TenantID: testTenant, UserID: "adadadad-0000-4000-8000-0000000000ad", Roles: []string{access.PermAdmin}}

	// Off, the default: the trigger's text alone, and nothing kept.
	trigger()
	if got := model.last(); !slices.Equal(got, []string{"What is the code word?"}) {
		t.Errorf("with the setting off the model read %q, want the trigger's text alone", got)
	}
	if hs := turns(); len(hs) != 1 {
		t.Errorf("with the setting off the triggered run added to the memory: %d turns", len(hs))
	}

	// On: the person's earlier message, then the trigger's text; its turn
	// is kept, with no person.
	if err := h.access.SetHistoryForTriggers(ctx, admin, true); err != nil {
		t.Fatal(err)
	}
	trigger()
	if got := model.last(); len(got) != 2 || !strings.Contains(got[0], said) || got[1] != "What is the code word?" {
		t.Errorf("with the setting on the model read %q, want the person's message, then the trigger's text", got)
	}
	hs := turns()
	if len(hs) != 2 || hs[1].UserID != "" || !strings.Contains(string(hs[1].Messages), "What is the code word?") {
		var got []string
		for _, turn := range hs {
			got = append(got, cmp.Or(turn.UserID, "no person")+": "+string(turn.Messages))
		}
		t.Errorf("with the setting on the memory holds %q, want the person's turn, then the triggered run's", got)
	}

	// Off again: out of reach, and nothing added.
	if err := h.access.SetHistoryForTriggers(ctx, admin, false); err != nil {
		t.Fatal(err)
	}
	trigger()
	if got := model.last(); !slices.Equal(got, []string{"What is the code word?"}) {
		t.Errorf("with the setting off again the model read %q", got)
	}
	if hs := turns(); len(hs) != 2 {
		t.Errorf("with the setting off again the memory has %d turns, want 2", len(hs))
	}
}
