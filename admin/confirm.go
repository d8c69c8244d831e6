package admin

import (
	"cmp"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"teamsbot/access"
	"teamsbot/store"
	"teamsbot/triggers"
)

// A destructive change (revoking a key, a view or a connection, deleting
// a trigger, removing a role binding) is done only when its form says
// confirm=yes. The console's script asks in a Fluent dialog and adds it;
// without the script, the post without it is answered by a page that asks
// the same and posts again with it. Either way the admin is told, before
// anything happens, what will stop working. The admin API asks nothing:
// its callers name what they change.

// confirmation is the question before one destructive change.
type confirmation struct {
	Title  string  // the question, naming what is changed
	Text   string  // what will stop working
	Action string  // the words of the button that does it
	Path   string  // where the change is posted
	Fields []field // what the post carries besides confirm=yes
	Back   string  // the page to go back to without changing anything
	// Button is the words of the row's button that asks, naming the
	// record, as a screen reader reads it among the others.
	Button string
}

// field is one hidden field of a confirmation's form.
type field struct{ Name, Value string }

// confirmPage is the page that asks, without the script.
type confirmPage struct {
	pageData
	Confirm confirmation
	section string
}

// confirmed reports whether the request carries the admin's
// confirmation. q is nil when the record is not there (or the change
// was made already): the change is then tried, and refused with its own
// words, as it destroys nothing.
func confirmed(c echo.Context, q *confirmation) bool {
	return q == nil || c.FormValue("confirm") == "yes"
}

// ask answers an unconfirmed destructive post with the page that asks;
// section is the console page the change belongs to.
func (h *Handler) ask(c echo.Context, p access.Person, section string, q *confirmation) error {
	return h.renderNotice(c, http.StatusOK, "confirm", q.Title, p, &confirmPage{Confirm: *q, section: section}, "", "")
}

// keyConfirmation asks before a key is revoked.
func keyConfirmation(k store.APIKey) confirmation {
	return confirmation{
		Title: fmt.Sprintf("Revoke the API key “%s”?", k.Name),
		Text: fmt.Sprintf("Scripts and services that call the runs API of agent %s with this key will get 401 Unauthorized from then on. "+
			"A revoked key cannot be used again: to let them go on, create a new key and give it to them.", k.AgentID),
		Action: "Revoke key",
		Button: "Revoke key " + k.Name,
		Path:   "/admin/keys/" + k.ID + "/revoke",
		Back:   "/admin/keys",
	}
}

// triggerConfirmation asks before a trigger is deleted.
func triggerConfirmation(t triggers.Info) confirmation {
	return confirmation{
		Title: fmt.Sprintf("Delete the trigger “%s”?", t.Name),
		Text: fmt.Sprintf("It will not run again: the agent will no longer be asked “%s” on the schedule %s (%s) in conversation %s. "+
			"Its past runs stay in the audit log. A deleted trigger cannot be brought back; pause it instead to stop it for a while.",
			t.Text, t.Cron, cmp.Or(t.TimeZone, "UTC"), t.ConversationID),
		Action: "Delete trigger",
		Button: "Delete " + t.Name,
		Path:   "/admin/triggers/" + t.ID + "/delete",
		Back:   "/admin/triggers",
	}
}

// roleWords says what a role lets its holder do, for what its removal
// stops.
func roleWords(role string) string {
	switch role {
	case "reader":
		return "open the views of the agent's runs without a person"
	case "runner":
		return "ask the agent in Teams, open their own views and call their tools"
	case "admin":
		return "use this console and the admin API"
	}
	return "use what the role " + role + " allows"
}

// bindingConfirmation asks before a role binding is removed.
func bindingConfirmation(b store.Binding) confirmation {
	who := b.Subject
	if b.DisplayName != "" {
		who = b.DisplayName + " (" + b.Subject + ")"
	}
	kind := "The person"
	if b.Kind == store.KindGroup {
		kind = "The members of the group"
	}
	agents := "agent " + b.AgentID
	if b.AgentID == store.AllAgents || b.AgentID == "" {
		agents = "every agent"
	}
	return confirmation{
		Title: fmt.Sprintf("Remove the %s role of %s?", b.Role, who),
		Text: fmt.Sprintf("%s will no longer %s for %s through this binding, and are refused (403) from their next request, "+
			"unless an Entra app role, another binding or the tenant default still gives it to them.", kind, roleWords(b.Role), agents),
		Action: "Remove binding",
		Button: "Remove " + b.Role + " of " + cmp.Or(b.DisplayName, b.Subject),
		Path:   "/admin/bindings/remove",
		Fields: []field{{"agent", b.AgentID}, {"kind", b.Kind}, {"subject", b.Subject}, {"role", b.Role}},
		Back:   "/admin",
	}
}

// connectionConfirmation asks before one person's connection to a server
// is revoked.
func connectionConfirmation(cn store.MCPConnection) confirmation {
	who := cmp.Or(cn.UserName, cn.UserID)
	return confirmation{
		Title: fmt.Sprintf("Revoke the connection of %s to %s?", who, cn.Server),
		Text: fmt.Sprintf("The agent can no longer act as %s on %s: its tools there fail for them until they connect again, "+
			"which the bot asks them to do the next time it needs it. The server is not told; they can also remove the app's access there.", who, cn.Server),
		Action: "Revoke connection",
		Button: "Revoke " + cn.Server + " for " + who,
		Path:   "/admin/connections/revoke",
		Fields: []field{{"agent", cn.AgentID}, {"server", cn.Server}, {"user", cn.UserID}},
		Back:   "/admin/connections",
	}
}

// serverConfirmation asks before every connection to a server is revoked.
func serverConfirmation(s store.MCPServerUse) confirmation {
	people := "1 person"
	if s.People != 1 {
		people = fmt.Sprintf("%d people", s.People)
	}
	return confirmation{
		Title: fmt.Sprintf("Revoke every connection to %s?", s.Server),
		Text: fmt.Sprintf("The agent can no longer act on %s as any of the %s who connected it: its tools there fail for them "+
			"until each connects again, which the bot asks them to do the next time it needs it.", s.Server, people),
		Action: "Revoke all connections",
		Button: "Revoke all of " + s.Server,
		Path:   "/admin/connections/revoke",
		Fields: []field{{"agent", s.AgentID}, {"server", s.Server}},
		Back:   "/admin/connections",
	}
}

// viewConfirmation asks before a view is revoked.
func viewConfirmation(v store.View) confirmation {
	return confirmation{
		Title: fmt.Sprintf("Revoke the view %s?", v.ID),
		Text: fmt.Sprintf("Nobody can open this view of %s/%s any more: its Open button in Teams and its page answer that it is gone (410), "+
			"and where it is open now it can no longer call its server's tools. A revoked view cannot be restored.", v.Server, v.Tool),
		Action: "Revoke view",
		Button: "Revoke view " + v.ID,
		Path:   "/admin/views/" + v.ID + "/revoke",
		Back:   "/admin/views",
	}
}
