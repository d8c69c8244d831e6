package admin

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"

	"teamsbot/store"
)

// auditRanges are the audit filter's time presets, by their value in the
// query.
var auditRanges = []struct {
	Value, Label string
	d            time.Duration
}{
	{"1h", "Last hour", time.Hour},
	{"24h", "Last 24 hours", 24 * time.Hour},
	{"7d", "Last 7 days", 7 * 24 * time.Hour},
	{"30d", "Last 30 days", 30 * 24 * time.Hour},
}

// auditRow is one audit record as the audit page shows it.
type auditRow struct {
	store.AuditRecord
	Agent, Server, Tool, Result string
	Summary                     string
	// JSON is the whole record, indented, for its details panel.
	JSON string
}

// rowOf makes the row of r; names and convs name its people and
// conversations.
func rowOf(r store.AuditRecord, names map[string]string, convs map[string]store.ConversationRef) auditRow {
	str := func(k string) string { s, _ := r.Fields[k].(string); return s }
	row := auditRow{AuditRecord: r, Agent: str("agent"), Server: str("server"), Tool: str("tool"), Result: str("result")}
	b, err := json.MarshalIndent(r, "", "  ")
	if err == nil {
		row.JSON = string(b)
	}
	row.Summary = summaryOf(r, str, names, convs)
	return row
}

// summaryOf is the one line that says what a record is, per action.
func summaryOf(r store.AuditRecord, str func(string) string, names map[string]string, convs map[string]store.ConversationRef) string {
	tool := str("tool")
	if s := str("server"); s != "" && tool != "" {
		tool = tool + " of " + s
	}
	why := ""
	if w := str("why"); w != "" {
		why = ": " + w
	}
	conv := func() string {
		id := str("conversation")
		if c, ok := convs[id]; ok && conversationName(c) != "" {
			return conversationName(c)
		}
		if id == "" {
			return "a conversation"
		}
		return "conversation " + id
	}
	who := func(id string) string {
		if n := names[id]; n != "" {
			return n
		}
		return id
	}
	switch r.Action {
	case "agent.tool.call":
		switch str("result") {
		case "ok":
			return "The model called " + tool + "."
		case "refused":
			return "The model's call of " + tool + " was refused" + why + "."
		}
		return "The model's call of " + tool + " failed" + why + "."
	case "agent.mcp_app.call":
		switch str("result") {
		case "ok":
			return "A view called " + tool + "."
		case "refused":
			return "A view's call of " + tool + " was refused" + why + "."
		}
		return "A view's call of " + tool + " failed" + why + "."
	case "agent.mcp_app.view":
		return "A view of " + tool + " was made."
	case "agent.mcp_app.open":
		return "The view of " + tool + " was opened."
	case "agent.mcp_app.refused":
		return "A view of " + tool + " was refused: its resource is not a valid MCP App."
	case "agent.mcp_app.blocked":
		return "The view of " + tool + " tried " + str("channel") + "; its sandbox kept it closed."
	case "bot.refused":
		return "A message was refused (" + str("reason") + ")."
	case "bot.feedback":
		return "Feedback on an answer."
	case "bot.history.clear", "bot.history.cleared":
		return "The memory of " + conv() + " was cleared."
	case "bot.conversation.removed":
		return "The app was removed from " + conv() + "."
	case "admin.binding.add":
		return "A role binding was added."
	case "admin.binding.remove":
		return "A role binding was removed."
	case "admin.default.set":
		return "The tenant default was changed."
	case "admin.policy.set":
		return "The Cedar policies were saved."
	case "admin.settings.set":
		return "A tenant setting was changed."
	case "admin.settings.elicitation":
		if after, _ := r.Fields["after"].(map[string]any); after["elicitation"] == false {
			return str("server") + " may no longer ask people for input."
		}
		return str("server") + " may ask people for input."
	case "admin.datarules.set":
		return "The data rules were saved."
	case "admin.view.revoke":
		return "View " + str("view") + " was revoked."
	case "admin.apikey.create":
		return "API key “" + str("name") + "” was created."
	case "admin.apikey.revoke":
		return "API key " + str("key") + " was revoked."
	case "admin.trigger.create", "admin.trigger.pause", "admin.trigger.resume", "admin.trigger.delete":
		verb := strings.TrimPrefix(r.Action, "admin.trigger.")
		return "A scheduled trigger was " + map[string]string{"create": "created", "pause": "paused", "resume": "resumed", "delete": "deleted"}[verb] + "."
	case "trigger.schedule.run", "trigger.run":
		return "A run without a person started."
	case "trigger.apikey.use":
		return "A run was asked for with an API key."
	case "trigger.apikey.refused":
		return "A runs API call was refused" + why + "."
	case "mcp.connect":
		return who(r.Actor) + " connected " + str("server") + "."
	case "mcp.disconnect":
		return "A connection to " + str("server") + " was removed."
	case "mcp.refresh":
		return "A connection to " + str("server") + " was renewed."
	case "mcp.auth.request", "mcp.auth.answer":
		return "A sign-in to " + str("server") + " was asked for or answered."
	}
	return r.Action
}

// localTimeScript turns the audit page's UTC times into the browser's
// time zone and locale; without it the times stay in UTC, as written.
// The parts are named one by one: Intl refuses dateStyle or timeStyle
// together with timeZoneName.
const localTimeScript = `for (const t of document.querySelectorAll("time[data-local]")) {
  const d = new Date(t.dateTime);
  if (!isNaN(d)) { t.textContent = d.toLocaleString(undefined, {year: "numeric", month: "short", day: "numeric", hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short"}); }
}
for (const e of document.querySelectorAll("[data-zone]")) { e.textContent = Intl.DateTimeFormat().resolvedOptions().timeZone; }`

// auditTime writes a record's time for the page: UTC, in a time element
// that the page's script shows in the browser's zone.
func auditTime(t time.Time) template.HTML {
	u := t.UTC()
	return template.HTML(fmt.Sprintf(`<time datetime="%s" data-local>%s</time>`, u.Format(time.RFC3339Nano), u.Format("2 Jan 2006 15:04:05 UTC")))
}
