package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/infracloudio/msbotbuilder-go/schema"

	"teamsbot/agent"
	"teamsbot/store"
)

// aiParts is what an answer carries for Teams' AI features, as Microsoft's
// "Bot messages with AI-generated content" describes them.
type aiParts struct {
	Text     string `json:"text"`
	Entities []struct {
		Type           string   `json:"type"`
		AtType         string   `json:"@type"`
		AtContext      string   `json:"@context"`
		AdditionalType []string `json:"additionalType"`
		Citation       []struct {
			AtType     string `json:"@type"`
			Position   int    `json:"position"`
			Appearance struct {
				AtType   string   `json:"@type"`
				Name     string   `json:"name"`
				URL      string   `json:"url"`
				Abstract string   `json:"abstract"`
				Keywords []string `json:"keywords"`
			} `json:"appearance"`
		} `json:"citation"`
	} `json:"entities"`
	ChannelData struct {
		FeedbackLoop struct {
			Type string `json:"type"`
		} `json:"feedbackLoop"`
	} `json:"channelData"`
}

// Every answer is labelled as AI-generated, cites the tool results it relies
// on (tool, server, and the view's page where the card can open it), and has
// the feedback buttons; a failure card the service wrote has none of it.
func TestAnswersCarryTheAILabelCitationsAndFeedback(t *testing.T) {
	for _, base := range []string{httpsBaseURL, "http://localhost:3978"} {
		h := newHarness(t, setup{publicBase: base})
		h.send(h.message("groupChat", "19:ai@thread.v2", "act-ai-1", "/sales_report {}"))
		reply, _ := replyTo(h.conn.waitFor(t, "the answer", hasReplyTo("act-ai-1")), "act-ai-1")
		var got aiParts
		if err := json.Unmarshal(reply.Raw, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Entities) != 1 {
			t.Fatalf("%s: %d entities, want the one root message entity: %s", base, len(got.Entities), reply.Raw)
		}
		e := got.Entities[0]
		if e.Type != "https://schema.org/Message" || e.AtType != "Message" || e.AtContext != "https://schema.org" ||
			len(e.AdditionalType) != 1 || e.AdditionalType[0] != "AIGeneratedContent" {
			t.Errorf("%s: the message entity does not label the answer as AI-generated: %+v", base, e)
		}
		if got.ChannelData.FeedbackLoop.Type != "default" {
			t.Errorf("%s: no feedback buttons: %s", base, reply.Raw)
		}
		if len(e.Citation) != 1 || got.Text != "Sources: [1]" {
			t.Fatalf("%s: citations %+v with text %q, want one cited as [1]", base, e.Citation, got.Text)
		}
		c := e.Citation[0]
		if c.AtType != "Claim" || c.Position != 1 || c.Appearance.AtType != "DigitalDocument" || c.Appearance.Name != "sales_report on demo" ||
			len(c.Appearance.Name) > 80 || len(c.Appearance.Abstract) > 160 || len(c.Appearance.Keywords) > 3 {
			t.Errorf("%s: citation %+v", base, c)
		}
		views, _, err := h.store.ActiveViews(context.Background(), testTenant, 10, "")
		if base == httpsBaseURL {
			if err != nil || len(views) != 1 || c.Appearance.URL != httpsBaseURL+"/mcp-apps/"+views[0].ID {
				t.Errorf("the citation links %q, want the view's page (views %d, %v)", c.Appearance.URL, len(views), err)
			}
		} else if c.Appearance.URL != "" {
			t.Errorf("with an http base the citation links %q; the card has no Open button either", c.Appearance.URL)
		}
	}

	// A run that fails gets the service's failure card, which no model
	// wrote: no label, no feedback buttons.
	h := newHarness(t, setup{})
	a := &schema.Activity{ID: "act-ai-2", Conversation: schema.ConversationAccount{ID: "a:ai-fail"}}
	if r := h.bot.chooseAnswer(t.Context(), a, agent.Person{TenantID: testTenant}, agent.Answer{RunID: "run-1"}, errors.New("the model is down")); r.ai != nil || len(r.cards) != 1 {
		t.Errorf("a failed run: %d cards, AI marks %+v; want the failure card alone, unlabelled", len(r.cards), r.ai)
	}
}

// Teams' feedback buttons send a message/submitAction invoke: it is answered
// 200 with an empty object and kept in the tenant's audit log as
// bot.feedback with the reaction and the person's words; feedback from a
// tenant the bot does not serve is not kept.
func TestFeedbackInvokeIsStoredAndAudited(t *testing.T) {
	h := newHarness(t, setup{})
	send := func(id, tenant, reaction, words string) {
		t.Helper()
		inv := h.message("personal", "a:feedback", id, "")
		inv["type"], inv["name"], inv["replyToId"] = "invoke", "message/submitAction", "answer-activity-7"
		inv["value"] = map[string]any{"actionName": "feedback", "actionValue": map[string]any{
			"reaction": reaction, "feedback": `{"feedbackText":"` + words + `"}`}}
		if tenant != testTenant {
			inv["channelData"] = map[string]any{"tenant": map[string]any{"id": tenant}}
			inv["conversation"].(map[string]any)["tenantId"] = tenant
		}
		status, body := h.send(inv)
		if status != http.StatusOK || strings.TrimSpace(body) != "{}" {
			t.Errorf("feedback invoke: %d %q, want 200 and {}", status, body)
		}
	}
	send("fb-1", testTenant, "dislike", "The total is wrong and the tone was rude.")
	send("fb-2", "99999999-9999-4999-8999-999999999999", "like", "from elsewhere")

	recs, err := h.store.Audit(context.Background(), store.AuditQuery{TenantID: testTenant, Action: AuditFeedback})
	if err != nil || len(recs) != 1 {
		t.Fatalf("bot.feedback records: %d, %v; want 1", len(recs), err)
	}
	r := recs[0]
	if r.Actor != testUserOID || r.Fields["reaction"] != "dislike" || r.Fields["text"] != "The total is wrong and the tone was rude." ||
		r.Fields["activity"] != "answer-activity-7" || r.Fields["conversation"] != "a:feedback" {
		t.Errorf("feedback record %+v", r)
	}
	all, _ := h.store.Audit(context.Background(), store.AuditQuery{Action: AuditFeedback})
	if len(all) != 1 {
		t.Errorf("feedback from an unserved tenant was kept: %+v", all)
	}
	h.shutdown()
	if n := len(h.conn.snapshot()); n != 0 {
		t.Errorf("feedback made the bot send %d activities", n)
	}
}

// The written-out "open until" of an answer follows the time zone and the
// locale Teams sent with the message (localTimezone, locale); without a
// zone it is UTC. Inside the card Teams' own DATE()/TIME() show it in the
// reader's zone.
func TestAnswerTimesFollowThePersonsZoneAndLocale(t *testing.T) {
	h := newHarness(t, setup{})
	for i, c := range []struct {
		zone, locale, want string
	}{
		{"Europe/Berlin", "de-DE", " CET"},
		{"America/New_York", "en-US", " EST"},
		{"", "en-GB", " UTC"},
		{"Not/AZone", "en-US", " UTC"},
	} {
		id := fmt.Sprint("tz-", i)
		m := h.message("personal", "a:tz", id, "/sales_report {}")
		if c.zone != "" {
			m["localTimezone"] = c.zone
		}
		m["locale"] = c.locale
		h.send(m)
		reply, _ := replyTo(h.conn.waitFor(t, "the answer", hasReplyTo(id)), id)
		var got struct {
			Attachments []struct {
				Content struct {
					FallbackText string `json:"fallbackText"`
				} `json:"content"`
			} `json:"attachments"`
		}
		if err := json.Unmarshal(reply.Raw, &got); err != nil || len(got.Attachments) == 0 {
			t.Fatalf("%s: %v %s", id, err, reply.Raw)
		}
		fb := got.Attachments[0].Content.FallbackText
		until := fb[strings.Index(fb, "open until ")+len("open until "):]
		expires := h.now().Add(7 * 24 * time.Hour)
		var wantTime string
		switch c.zone {
		case "Europe/Berlin":
			loc, _ := time.LoadLocation(c.zone)
			wantTime = expires.In(loc).Format("2 Jan 2006 15:04 MST")
		case "America/New_York":
			loc, _ := time.LoadLocation(c.zone)
			wantTime = expires.In(loc).Format("Jan 2, 2006 3:04 PM MST")
		default:
			wantTime = expires.UTC().Format("2 Jan 2006 15:04 MST")
			if c.locale == "en-US" {
				wantTime = expires.UTC().Format("Jan 2, 2006 3:04 PM MST")
			}
		}
		if !strings.HasPrefix(until, wantTime) || !strings.Contains(wantTime, c.want) {
			t.Errorf("%s/%s: open until %q, want %q", c.zone, c.locale, until, wantTime)
		}
	}
}

// A message Teams refuses as too large (413) is sent again without its
// citations, then as smaller cards, and the whole answer arrives: here
// Teams takes 12 KB where the cards are made for 28 KB.
func TestTooLargeAnswerIsSentAgainInSmallerCards(t *testing.T) {
	long := strings.Repeat("The quarterly figures for the northern region grew again. ", 400) // about 23 KB
	h := newHarness(t, setup{}.withTool("big", "long_report", func(context.Context) (string, error) { return long, nil }))
	h.conn.mu.Lock()
	h.conn.sizeLimit = 12 * 1024
	h.conn.mu.Unlock()
	h.send(h.message("personal", "a:big", "big-1", "/long_report {}"))
	h.conn.waitFor(t, "the answer", hasReplyTo("big-1"))
	h.shutdown()
	var answers []received
	for _, c := range h.conn.snapshot() {
		if c.Method == http.MethodPost && c.Activity.Type == "message" && c.ActivityID == "big-1" {
			answers = append(answers, c)
		}
	}
	if len(answers) == 0 {
		t.Fatal("no answer arrived")
	}
	for _, c := range answers {
		if n := 2 * len([]rune(string(c.Raw))); n > 2*12*1024 {
			t.Errorf("a message of %d bytes got through a 12 KB limit", n)
		}
	}
	if !strings.Contains(string(answers[0].Raw), "The quarterly figures") || !strings.Contains(string(answers[0].Raw), "AIGeneratedContent") {
		t.Errorf("the first message is not the labelled answer: %.300s", answers[0].Raw)
	}
	if !strings.Contains(h.logs.String(), "sending it in smaller cards") {
		t.Errorf("the log does not say the answer was made smaller:\n%s", h.logs.String())
	}
	if got := counterValue(t, h.reg, "teamsbot_bot_turns_total", map[string]string{"outcome": "failed"}); got != 0 {
		t.Errorf("%v turns counted as failed", got)
	}
}
