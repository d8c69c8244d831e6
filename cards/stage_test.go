package cards

import (
	"encoding/json"
	"strings"
	"testing"
)

// actionsOf returns every action of a card's JSON, in order.
func actionsOf(t *testing.T, c Card) []map[string]any {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if ty, _ := x["type"].(string); strings.HasPrefix(ty, "Action.") {
				out = append(out, x)
			}
			for _, w := range x {
				walk(w)
			}
		case []any:
			for _, w := range x {
				walk(w)
			}
		}
	}
	var v any
	json.Unmarshal(b, &v)
	walk(v)
	return out
}

// In Teams mode each view has the Stage View action of "Open content in
// Stageview" (Action.Submit, msteams invoke tab/tabInfoAction with the
// page as contentUrl and websiteUrl) and an Action.OpenUrl to the same
// page; outside Teams mode only the Action.OpenUrl, as before.
func TestStageViewAction(t *testing.T) {
	v := view("v-7f3a", "crm", "ticket_chart", "Tickets by week")
	want := "https://teams.example.com/mcp-apps/v-7f3a"
	acts := actionsOf(t, AnswerCards(Answer{Text: "x", Views: []View{v}}, Options{PublicBaseURL: httpsBase, Now: now, StageView: true})[0])
	var stage, browser map[string]any
	for _, a := range acts {
		switch a["type"] {
		case "Action.Submit":
			stage = a
		case "Action.OpenUrl":
			browser = a
		}
	}
	if stage == nil || browser == nil {
		t.Fatalf("actions %v: want a Stage View action and an Action.OpenUrl", acts)
	}
	ms, _ := stage["data"].(map[string]any)["msteams"].(map[string]any)
	val, _ := ms["value"].(map[string]any)
	tab, _ := val["tabInfo"].(map[string]any)
	if ms["type"] != "invoke" || val["type"] != "tab/tabInfoAction" || tab["contentUrl"] != want || tab["websiteUrl"] != want ||
		tab["name"] != "Tickets by week" || tab["entityId"] != "view-v-7f3a" {
		t.Errorf("Stage View action %v", stage)
	}
	if browser["url"] != want || !strings.Contains(browser["title"].(string), "browser") {
		t.Errorf("browser action %v", browser)
	}

	plain := actionsOf(t, AnswerCards(Answer{Text: "x", Views: []View{v}}, Options{PublicBaseURL: httpsBase, Now: now})[0])
	for _, a := range plain {
		if a["type"] == "Action.Submit" {
			t.Errorf("a Stage View action outside Teams mode: %v", a)
		}
	}
	// An expired view gets neither.
	v.ExpiresAt = now.Add(-1)
	for _, a := range actionsOf(t, AnswerCards(Answer{Text: "x", Views: []View{v}}, Options{PublicBaseURL: httpsBase, Now: now, StageView: true})[0]) {
		if a["type"] == "Action.Submit" || a["url"] == want {
			t.Errorf("an expired view has %v", a)
		}
	}
}
