package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// TestEveryRefusalInWords sends the whole service, over loopback HTTP, a
// few dozen bad requests on every surface a person reads: the admin
// console and its JSON API, the runs API, the view page and its API, the
// sign-in pages, the playground, the Bot Framework endpoint and the one
// error handler. Each answer's message must say the specific thing (the
// field, the limit, what to do) and hold no package prefix, no Go type
// word and no sentinel text.
func TestEveryRefusalInWords(t *testing.T) {
	base, logs, _ := startService(t, map[string]string{})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service logs:\n%s", logs)
		}
	})
	admin, megan, alex := signin.LocalAdmin(), signin.LocalPeople()[0], signin.LocalPeople()[1]
	signedIn := func(p signin.LocalPerson) *http.Client {
		c := newcomer()
		l := visit(t, c, http.MethodPost, base+"/signin/local", url.Values{"person": {p.UserID}, "return": {"/"}})
		if l.status != http.StatusOK {
			t.Fatalf("sign in as %s: %d", p.Name, l.status)
		}
		return c
	}
	adminC, meganC, alexC := signedIn(admin), signedIn(megan), signedIn(alex)
	anon := &http.Client{Timeout: 60 * time.Second}

	// A view of Megan's, from the playground; the app added to a group
	// chat of the playground's tenant, for triggers and the runs API.
	viewID := playgroundView(t, base, megan)
	who := map[string]string{"tenant": signin.LocalTenant, "user": admin.UserID, "name": admin.Name, "kind": "groupChat", "action": "add"}
	if code, out := api(t, anon, http.MethodPost, base+"/playground/api/install", "", who); code != 200 {
		t.Fatalf("install: %d %v", code, out)
	}
	_, convs := api(t, adminC, http.MethodGet, base+"/api/admin/conversations", "", nil)
	var conv string
	for _, c := range convs["conversations"].([]any) {
		if id := c.(map[string]any)["conversation"].(string); strings.Contains(id, "@thread") || conv == "" {
			conv = id
		}
	}
	code, key := api(t, adminC, http.MethodPost, base+"/api/admin/keys", "", map[string]any{"name": "Words", "agent": "default"})
	if code != http.StatusCreated {
		t.Fatalf("create key: %d %v", code, key)
	}
	secret := key["secret"].(string)
	code, trig := api(t, adminC, http.MethodPost, base+"/api/admin/triggers", "", map[string]any{
		"name": "Daily", "agent": "default", "cron": "0 9 * * *", "timeZone": "UTC", "text": "hello", "conversation": conv})
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trig)
	}
	trigID := trig["id"].(string)
	if code, _ := api(t, adminC, http.MethodPost, base+"/api/admin/triggers/"+trigID+"/pause", "", nil); code != http.StatusNoContent {
		t.Fatalf("pause: %d", code)
	}
	revoked := func() string {
		_, k := api(t, adminC, http.MethodPost, base+"/api/admin/keys", "", map[string]any{"name": "Old", "agent": "default"})
		if code, _ := api(t, adminC, http.MethodPost, base+"/api/admin/keys/"+k["id"].(string)+"/revoke", "", nil); code != http.StatusNoContent {
			t.Fatalf("revoke: %d", code)
		}
		return k["id"].(string)
	}()
	const guid = "0b7e3d2c-1a4f-4e6b-9c8d-7f6e5d4c3b2a"
	long := func(n int) string { return strings.Repeat("a", n) }
	binding := func(agent, kind, subject, role string) string {
		b, _ := json.Marshal(map[string]string{"agent": agent, "kind": kind, "subject": subject, "role": role})
		return string(b)
	}
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	run := base + "/api/agents/default/runs"
	call := base + "/api/mcp-apps/" + viewID + "/call"

	type req struct {
		name   string
		c      *http.Client
		method string
		url    string
		ctype  string // "json" or "form" or a content type
		body   string
		header map[string]string
		status int
		says   []string // each must be in the message
	}
	js, fm := "application/json", "application/x-www-form-urlencoded"
	cases := []req{
		// The admin API's JSON bodies.
		{name: "admin API: an unknown field", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: `{"agent":"default","kind":"user","subject":"` + guid + `","role":"agents.read","sbject":"x"}`, status: 400,
			says: []string{"`sbject` is not a field", "did you mean `subject`", "`agent`, `kind`, `subject` and `role`"}},
		{name: "admin API: a number for a string", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: `{"subject": 5}`, status: 400, says: []string{"`subject` must be a string, not a number"}},
		{name: "admin API: broken JSON", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: `{"agent":}`, status: 400, says: []string{"not valid JSON", "at byte 10"}},
		{name: "admin API: a body cut short", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: `{"agent":"default"`, status: 400, says: []string{"ends before", "JSON"}},
		{name: "admin API: no body", c: adminC, method: "POST", url: "/api/admin/keys", ctype: js,
			body: ``, status: 400, says: []string{"empty", "`name` and `agent`"}},
		{name: "admin API: a list for the body", c: adminC, method: "POST", url: "/api/admin/keys", ctype: js,
			body: `[1]`, status: 400, says: []string{"JSON object", "`name` and `agent`"}},
		{name: "admin API: something after the body", c: adminC, method: "POST", url: "/api/admin/keys", ctype: js,
			body: `{"name":"x","agent":"default"} {}`, status: 400, says: []string{"after", "one JSON object"}},
		{name: "admin API: a body over the limit", c: adminC, method: "PUT", url: "/api/admin/policies", ctype: js,
			body: `{"text":"` + long(600<<10) + `"}`, status: 413, says: []string{"512 KiB"}},
		{name: "admin API: a binding's kind", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: binding("default", "robot", guid, "agents.read"), status: 400, says: []string{"robot", "user", "group"}},
		{name: "admin API: a binding's role", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: binding("default", "user", guid, "boss"), status: 400, says: []string{"boss", "reader", "runner", "admin"}},
		{name: "admin API: a binding's subject", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: binding("default", "user", "megan", "agents.read"), status: 400, says: []string{"GUID"}},
		{name: "admin API: a binding's agent", c: adminC, method: "POST", url: "/api/admin/bindings", ctype: js,
			body: binding(long(600), "user", guid, "agents.read"), status: 400, says: []string{"600", "512"}},
		{name: "admin API: removing a binding that is not there", c: adminC, method: "DELETE", url: "/api/admin/bindings", ctype: js,
			body: binding("default", "user", guid, "reader"), status: 404, says: []string{"no such"}},
		{name: "admin API: settings, a group", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"defaultGroup":"sales"}`, status: 400, says: []string{"defaultGroup", "GUID"}},
		{name: "admin API: settings, a switch", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"appsEnabled":"yes"}`, status: 400, says: []string{"`appsEnabled` must be true or false, not a string"}},
		{name: "admin API: settings, the memory switch", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"historyForTriggers":"on"}`, status: 400, says: []string{"`historyForTriggers` must be true or false, not a string"}},
		{name: "admin API: settings, a server", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"appPermissions":{"crm":[]}}`, status: 400, says: []string{"crm", "demo"}},
		{name: "admin API: settings, a permission", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"appPermissions":{"demo":["teleport"]}}`, status: 400, says: []string{"camera", "clipboardWrite"}},
		{name: "admin API: settings, permissions as a list", c: adminC, method: "PUT", url: "/api/admin/settings", ctype: js,
			body: `{"appPermissions":["camera"]}`, status: 400, says: []string{"`appPermissions` must be an object of lists of strings, not a list"}},
		{name: "admin API: data rules, a string for a list", c: adminC, method: "PUT", url: "/api/admin/datarules", ctype: js,
			body: `{"denyTools":"crm/*"}`, status: 400, says: []string{"`denyTools` must be a list of strings, not a string"}},
		{name: "admin API: data rules, a number in the list", c: adminC, method: "PUT", url: "/api/admin/datarules", ctype: js,
			body: `{"denyTools":[1]}`, status: 400, says: []string{"every item of `denyTools` must be a string, not a number"}},
		{name: "admin API: data rules, a negative version", c: adminC, method: "PUT", url: "/api/admin/datarules", ctype: js,
			body: `{"version":-1}`, status: 400, says: []string{"`version` must be a whole number of 0 or more, not -1"}},
		{name: "admin API: data rules, a pattern", c: adminC, method: "PUT", url: "/api/admin/datarules", ctype: js,
			body: `{"redact":["("],"version":0}`, status: 400, says: []string{"redact"}},
		{name: "admin API: data rules, an old version", c: adminC, method: "PUT", url: "/api/admin/datarules", ctype: js,
			body: `{"denyTools":["x"],"version":7}`, status: 409, says: []string{"Someone else saved", "Reload"}},
		{name: "admin API: policies", c: adminC, method: "PUT", url: "/api/admin/policies", ctype: js,
			body: `{"text":"permit(","version":0}`, status: 400, says: []string{"line 1"}},
		{name: "admin API: the tester's person", c: adminC, method: "POST", url: "/api/admin/policies/test", ctype: js,
			body: `{"user":"megan"}`, status: 400, says: []string{"user", "GUID"}},
		{name: "admin API: revoking an unknown view", c: adminC, method: "POST", url: "/api/admin/views/nope/revoke", status: 404,
			says: []string{"no such view"}},
		{name: "admin API: an audit cursor", c: adminC, method: "GET", url: "/api/admin/audit?cursor=zzz", status: 400,
			says: []string{"page link"}},
		{name: "admin API: an audit time", c: adminC, method: "GET", url: "/api/admin/audit?from=yesterday", status: 400,
			says: []string{"time range"}},
		{name: "admin API: an export format", c: adminC, method: "GET", url: "/api/admin/audit/export?format=xml", status: 400,
			says: []string{"jsonl", "csv"}},
		{name: "admin API: a key without a name, for nobody", c: adminC, method: "POST", url: "/api/admin/keys", ctype: js,
			body: `{"name":"","agent":"nobody"}`, status: 400, says: []string{"give it a name", "no agent", "default"}},
		{name: "admin API: a key's long name", c: adminC, method: "POST", url: "/api/admin/keys", ctype: js,
			body: `{"name":"` + long(300) + `","agent":"default"}`, status: 400, says: []string{"300", "200"}},
		{name: "admin API: revoking an unknown key", c: adminC, method: "POST", url: "/api/admin/keys/0123456789abcdef01234567/revoke", status: 404,
			says: []string{"API key", "0123456789abcdef01234567"}},
		{name: "admin API: revoking a key twice", c: adminC, method: "POST", url: "/api/admin/keys/" + revoked + "/revoke", status: 400,
			says: []string{"revoked already"}},
		{name: "admin API: a trigger's every mistake", c: adminC, method: "POST", url: "/api/admin/triggers", ctype: js,
			body: `{"name":"x","agent":"default","cron":"61 * * * *","timeZone":"Mars/Olympus","text":"","conversation":"19:nowhere"}`, status: 400,
			says: []string{"minute", "0-59", "Mars/Olympus", "text is empty", "19:nowhere"}},
		{name: "admin API: a trigger's cron as a number", c: adminC, method: "POST", url: "/api/admin/triggers", ctype: js,
			body: `{"cron":5}`, status: 400, says: []string{"`cron` must be a string, not a number"}},
		{name: "admin API: a trigger's unknown field", c: adminC, method: "POST", url: "/api/admin/triggers", ctype: js,
			body: `{"schedule":"* * * * *"}`, status: 400, says: []string{"`schedule` is not a field", "`cron`", "`conversation`"}},
		{name: "admin API: pausing an unknown trigger", c: adminC, method: "POST", url: "/api/admin/triggers/0011223344556677/pause", status: 404,
			says: []string{"trigger", "0011223344556677"}},
		{name: "admin API: pausing a paused trigger", c: adminC, method: "POST", url: "/api/admin/triggers/" + trigID + "/pause", status: 400,
			says: []string{"paused already"}},
		{name: "admin API: deleting an unknown trigger", c: adminC, method: "DELETE", url: "/api/admin/triggers/0011223344556677", status: 404,
			says: []string{"trigger", "0011223344556677"}},
		{name: "admin API: revoking connections without a server", c: adminC, method: "DELETE", url: "/api/admin/mcp-connections?agent=default", status: 400,
			says: []string{"agent and server are required"}},
		{name: "admin API: connections where no server acts as each person", c: adminC, method: "GET", url: "/api/admin/mcp-connections", status: 404,
			says: []string{"acts as each person", "nothing to show or revoke"}},
		{name: "admin API: not signed in", c: anon, method: "GET", url: "/api/admin/bindings", status: 401, says: []string{"Sign in"}},
		{name: "admin API: not an admin", c: meganC, method: "GET", url: "/api/admin/bindings", status: 403, says: []string{"agents.admin"}},

		// The console's forms.
		{name: "console: a binding's subject", c: adminC, method: "POST", url: "/admin/bindings", ctype: fm,
			body: form("agent", "default", "kind", "user", "subject", "megan", "role", "agents.read").Encode(), status: 400, says: []string{"GUID"}},
		{name: "console: a binding's role", c: adminC, method: "POST", url: "/admin/bindings", ctype: fm,
			body: form("agent", "default", "kind", "user", "subject", guid, "role", "boss").Encode(), status: 400, says: []string{"boss", "reader"}},
		{name: "console: a binding's kind", c: adminC, method: "POST", url: "/admin/bindings", ctype: fm,
			body: form("agent", "default", "kind", "robot", "subject", guid, "role", "agents.read").Encode(), status: 400, says: []string{"robot", "group"}},
		{name: "console: a binding's agent", c: adminC, method: "POST", url: "/admin/bindings", ctype: fm,
			body: form("agent", long(600), "kind", "user", "subject", guid, "role", "agents.read").Encode(), status: 400, says: []string{"600", "512"}},
		{name: "console: removing a binding that is not there", c: adminC, method: "POST", url: "/admin/bindings/remove", ctype: fm,
			body: form("agent", "default", "kind", "user", "subject", guid, "role", "reader").Encode(), status: 400, says: []string{"no such"}},
		{name: "console: the default's group", c: adminC, method: "POST", url: "/admin/default", ctype: fm,
			body: form("runner", "on", "group", "sales").Encode(), status: 400, says: []string{"GUID"}},
		{name: "console: permissions of an unknown server", c: adminC, method: "POST", url: "/admin/permissions", ctype: fm,
			body: form("server", "crm").Encode(), status: 400, says: []string{"server"}},
		{name: "console: an unknown permission", c: adminC, method: "POST", url: "/admin/permissions", ctype: fm,
			body: form("server", "demo", "perm", "teleport").Encode(), status: 400, says: []string{"camera"}},
		{name: "console: data rules, a pattern", c: adminC, method: "POST", url: "/admin/rules", ctype: fm,
			body: form("deny", "", "redact", "(", "version", "0").Encode(), status: 400, says: []string{"not saved"}},
		{name: "console: data rules, too many", c: adminC, method: "POST", url: "/admin/rules", ctype: fm,
			body: form("deny", strings.Repeat("x\n", 101), "redact", "", "version", "0").Encode(), status: 400, says: []string{"101", "100"}},
		{name: "console: data rules, an old version", c: adminC, method: "POST", url: "/admin/rules", ctype: fm,
			body: form("deny", "x", "redact", "", "version", "9").Encode(), status: 409, says: []string{"Someone else saved"}},
		{name: "console: data rules, no version", c: adminC, method: "POST", url: "/admin/rules", ctype: fm,
			body: form("deny", "x").Encode(), status: 400, says: []string{"Reload"}},
		{name: "console: policies", c: adminC, method: "POST", url: "/admin/policies", ctype: fm,
			body: form("text", "permit(", "version", "0").Encode(), status: 400, says: []string{"not saved", "line 1"}},
		{name: "console: the tester's person", c: adminC, method: "POST", url: "/admin/policies/test", ctype: fm,
			body: form("user", "megan").Encode(), status: 400, says: []string{"GUID"}},
		{name: "console: revoking an unknown view", c: adminC, method: "POST", url: "/admin/views/nope/revoke", status: 404,
			says: []string{"no such view"}},
		{name: "console: a views cursor", c: adminC, method: "GET", url: "/admin/views?cursor=zzz", status: 400, says: []string{"page link"}},
		{name: "console: an audit time", c: adminC, method: "GET", url: "/admin/audit?to=soon", status: 400, says: []string{"time range"}},
		{name: "console: an export's time", c: adminC, method: "GET", url: "/admin/audit/export.csv?from=x", status: 400, says: []string{"time range"}},
		{name: "console: a key for nobody", c: adminC, method: "POST", url: "/admin/keys", ctype: fm,
			body: form("name", "x", "agent", "nobody").Encode(), status: 400, says: []string{"no agent", "nobody"}},
		{name: "console: revoking an unknown key", c: adminC, method: "POST", url: "/admin/keys/0123456789abcdef01234567/revoke", status: 404,
			says: []string{"API key"}},
		{name: "console: revoking a key twice", c: adminC, method: "POST", url: "/admin/keys/" + revoked + "/revoke", status: 400,
			says: []string{"revoked already"}},
		{name: "console: a trigger's mistakes", c: adminC, method: "POST", url: "/admin/triggers", ctype: fm,
			body: form("name", "", "agent", "default", "cron", "* * *", "timeZone", "UTC", "text", "hi", "conversation", conv).Encode(), status: 400,
			says: []string{"give it a name", "a schedule has 5"}},
		{name: "console: pausing a paused trigger", c: adminC, method: "POST", url: "/admin/triggers/" + trigID + "/pause", status: 400,
			says: []string{"paused already"}},
		{name: "console: resuming an unknown trigger", c: adminC, method: "POST", url: "/admin/triggers/0011223344556677/resume", status: 404,
			says: []string{"trigger"}},
		{name: "console: deleting an unknown trigger", c: adminC, method: "POST", url: "/admin/triggers/0011223344556677/delete", status: 404,
			says: []string{"trigger"}},
		{name: "console: connections where no server acts as each person", c: adminC, method: "POST", url: "/admin/connections/revoke", ctype: fm,
			body: form("agent", "default", "server", "crm").Encode(), status: 404, says: []string{"acts as each person"}},
		{name: "console: not an admin", c: meganC, method: "GET", url: "/admin/keys", status: 403, says: []string{"agents.admin"}},

		// The runs API.
		{name: "runs API: no key", c: anon, method: "POST", url: run, ctype: js, body: `{}`, status: 401, says: []string{"API key"}},
		{name: "runs API: a wrong key", c: anon, method: "POST", url: run, ctype: js, body: `{}`, header: map[string]string{"Authorization": "Bearer tbk_nope"},
			status: 401, says: []string{"API key"}},
		{name: "runs API: a key of another agent", c: anon, method: "POST", url: base + "/api/agents/other/runs", ctype: js, body: `{}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 403, says: []string{"another agent"}},
		{name: "runs API: an unknown field", c: anon, method: "POST", url: run, ctype: js, body: `{"txt":"hi"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 400,
			says: []string{"`txt` is not a field of this call", "did you mean `text`", "it takes `text` and `conversation`"}},
		{name: "runs API: a number for the text", c: anon, method: "POST", url: run, ctype: js, body: `{"text":5}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 400, says: []string{"`text` must be a string, not a number"}},
		{name: "runs API: broken JSON", c: anon, method: "POST", url: run, ctype: js, body: `{"text" "hi"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 400, says: []string{"not valid JSON", "at byte 9"}},
		{name: "runs API: a body over the limit", c: anon, method: "POST", url: run, ctype: js, body: `{"text":"` + long(40000) + `"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 413, says: []string{"8192"}},
		{name: "runs API: an empty text", c: anon, method: "POST", url: run, ctype: js, body: `{"text":" ","conversation":"` + conv + `"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 400, says: []string{"text is empty"}},
		{name: "runs API: a long text", c: anon, method: "POST", url: run, ctype: js, body: `{"text":"` + long(9000) + `","conversation":"` + conv + `"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 400, says: []string{"9000", "8192"}},
		{name: "runs API: an unknown conversation", c: anon, method: "POST", url: run, ctype: js, body: `{"text":"hi","conversation":"19:nowhere"}`,
			header: map[string]string{"Authorization": "Bearer " + secret}, status: 404, says: []string{"not installed", "19:nowhere"}},

		// The view page and its API.
		{name: "view page: an unknown view", c: meganC, method: "GET", url: "/mcp-apps/0123456789abcdef0123456789abcdef", status: 404,
			says: []string{"no such view"}},
		{name: "view page: another person's view", c: alexC, method: "GET", url: "/mcp-apps/" + viewID, status: 403, says: []string{"Only Megan Bowen", "can open this view", "Sign in as someone else"}},
		{name: "view API: broken JSON", c: meganC, method: "POST", url: call, ctype: js, body: `{"name":`, status: 400,
			says: []string{"not valid JSON"}},
		{name: "view API: a number for the name", c: meganC, method: "POST", url: call, ctype: js, body: `{"name":5}`, status: 400,
			says: []string{"`name` must be a string"}},
		{name: "view API: arguments as a list", c: meganC, method: "POST", url: call, ctype: js, body: `{"name":"refresh_sales","arguments":[1]}`,
			status: 400, says: []string{"`arguments` must be a JSON object"}},
		{name: "view API: a body over the limit", c: meganC, method: "POST", url: call, ctype: js,
			body: `{"name":"refresh_sales","arguments":{"x":"` + long(1<<20) + `"}}`, status: 413, says: []string{"1 MiB"}},
		{name: "view API: no name", c: meganC, method: "POST", url: call, ctype: js, body: `{"arguments":{}}`, status: 400,
			says: []string{"`name` is missing", "name the tool"}},
		{name: "view API: blocked, an unknown channel", c: meganC, method: "POST", url: base + "/api/mcp-apps/" + viewID + "/blocked", ctype: js,
			body: `{"channel":"telepathy","source":"view","token":"x"}`, status: 403, says: []string{"token"}},
		{name: "view API: a form", c: meganC, method: "POST", url: call, ctype: fm, body: `name=x`, status: 415, says: []string{"application/json"}},
		{name: "view API: a tool of no view", c: meganC, method: "POST", url: call, ctype: js, body: `{"name":"lookup_customer"}`, status: 403,
			says: []string{"may not call"}},
		{name: "view API: blocked, an unknown field", c: meganC, method: "POST", url: base + "/api/mcp-apps/" + viewID + "/blocked", ctype: js,
			body: `{"chanel":"fetch"}`, status: 400, says: []string{"`chanel` is not a field", "`channel`"}},
		{name: "view API: another person's view", c: alexC, method: "POST", url: call, ctype: js, body: `{"name":"refresh_sales"}`, status: 403,
			says: []string{"not yours"}},

		// The sign-in.
		{name: "sign-in: a person not in the list", c: anon, method: "POST", url: "/signin/local", ctype: fm,
			body: form("person", "nobody", "return", "/").Encode(), status: 400, says: []string{"no such person"}},
		{name: "sign-in: someone else without ids", c: anon, method: "POST", url: "/signin/local", ctype: fm,
			body: form("person", "other", "tenant", "", "user", "").Encode(), status: 400, says: []string{"Tenant id and user id"}},

		// The playground.
		{name: "playground: broken JSON", c: anon, method: "POST", url: "/playground/api/send", ctype: js, body: `{"text":`, status: 400,
			says: []string{"JSON"}},
		{name: "playground: a number for the text", c: anon, method: "POST", url: "/playground/api/send", ctype: js, body: `{"text":5}`, status: 400,
			says: []string{"`text` must be a string, not a number"}},
		{name: "playground: the form", c: anon, method: "POST", url: "/playground/api/send", ctype: js,
			body: `{"tenant":"","user":"u","name":"U","kind":"personal","text":"hi"}`, status: 400, says: []string{"tenant id"}},
		{name: "playground: an empty message", c: anon, method: "POST", url: "/playground/api/send", ctype: js,
			body: `{"tenant":"t","user":"u","name":"U","kind":"personal","text":""}`, status: 400, says: []string{"Write a message"}},

		// The Bot Framework endpoint, as the Emulator or curl reach it.
		{name: "bot: broken JSON", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{"type":"message",}`, status: 400,
			says: []string{"not valid JSON", "at byte 19"}},
		{name: "bot: a number for the type", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{"type":5}`, status: 400,
			says: []string{"`type` must be a string, not a number"}},
		{name: "bot: channel data as a string", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{"channelData":"x"}`, status: 400,
			says: []string{"`channelData` must be an object, not a string"}},
		{name: "bot: missing fields", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{"type":"message"}`, status: 400,
			says: []string{"serviceUrl", "conversation.id", "channelId"}},
		{name: "bot: a body over the limit", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{"text":"` + long(300<<10) + `"}`, status: 413,
			says: []string{"256 KiB"}},
		{name: "bot: from a web page", c: anon, method: "POST", url: "/api/messages", ctype: js, body: `{}`,
			header: map[string]string{"Origin": "https://evil.example"}, status: 403, says: []string{"web pages"}},

		// The one error handler.
		{name: "no such page", c: anon, method: "GET", url: "/no/such/page", status: 404, says: []string{"nothing at this address", "Check the link"}},
		{name: "no such API", c: anon, method: "GET", url: "/api/no/such/call", status: 404, says: []string{"nothing at this address"}},
		{name: "a method a path does not take", c: anon, method: "PUT", url: "/admin", status: 405, says: []string{"PUT", "GET"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.url
			if strings.HasPrefix(u, "/") {
				u = base + u
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			r, err := http.NewRequest(tc.method, u, body)
			if err != nil {
				t.Fatal(err)
			}
			if tc.ctype != "" {
				r.Header.Set("Content-Type", tc.ctype)
			}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			c := *tc.c
			c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := c.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			msg := testenv.AnswerWords(resp.Header.Get("Content-Type"), raw)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d; it says %q", resp.StatusCode, tc.status, msg)
			}
			if msg == "" {
				t.Fatalf("no message in the answer (%s):\n%.600s", resp.Header.Get("Content-Type"), raw)
			}
			if l := testenv.Leaks(msg); len(l) > 0 {
				t.Errorf("the message holds %q:\n%s", l, msg)
			}
			for _, s := range tc.says {
				if !strings.Contains(strings.ToLower(msg), strings.ToLower(s)) {
					t.Errorf("the message does not say %q:\n%s", s, msg)
				}
			}
		})
	}
}
