package playground_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"teamsbot/bot"
	"teamsbot/signin"
	"teamsbot/store"
)

// TestBrowserPlayground drives the playground in headless Chromium through
// the whole bot path, with nothing faked: the page asks the playground to
// send /sales_report {}, which posts a Teams message activity over loopback
// HTTP to /api/messages; the bot types, opens a streaming message with
// informative updates and ends it with the answer card, through the
// playground's Bot Connector; the page shows the answer card in the
// stream's place, and the view inline,
// in the view page's double-sandboxed frames, opened as the person the run
// was for (signed in through the local development sign-in); the view's
// app-only Refresh button calls refresh_sales through the bridge and
// POST /api/mcp-apps/{id}/call, audited as agent.mcp_app.call ok; another
// person of the tenant, signed in by the page, is refused the view and its
// tool (403), as anywhere else. Then a
// group-chat message with an @mention is answered, and the bot is added to
// the group chat (welcome card, conversation kept) and removed (forgotten).
func TestBrowserPlayground(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")

	tb.send("/sales_report {}")
	answer := `document.querySelector('.msg.bot .ac-card')`
	tb.Wait(mainFrame, answer+` !== null && `+answer+`.innerText.includes("Interactive view from")`, "the answer card")
	// In a personal chat a slow run is a streaming message: its
	// informative updates, then the answer card as its final message, in
	// the same place; no working card.
	if n := tb.Must(mainFrame, `document.querySelectorAll(".msg.bot").length`); n != float64(1) {
		t.Errorf("the bot's messages: %v, want 1 (the stream ending with the answer)", n)
	}
	if s := tb.Str(mainFrame, `document.getElementById("transcript").innerText`); strings.Contains(s, "Working on") || strings.Contains(s, "Calling sales_report") {
		t.Errorf("an informative update is still shown beside the answer:\n%s", s)
	}
	if got := tb.Str(mainFrame, `document.querySelector(".msg.user .bubble").innerText`); got != "/sales_report {}" {
		t.Errorf("the person's message shows %q", got)
	}

	// The view inline: the proxy frame in the page, the view inside it,
	// both sandbox="allow-scripts" only, beside an Open button.
	tb.Wait(mainFrame, `document.querySelector(".inline-view iframe.proxy") !== null`, "the inline view's frame")
	if got := tb.Str(mainFrame, `document.querySelector(".inline-view iframe.proxy").getAttribute("sandbox")`); got != "allow-scripts" {
		t.Errorf("proxy frame sandbox = %q, want allow-scripts", got)
	}
	viewID := tb.Str(mainFrame, `document.querySelector(".inline-view").dataset.viewId`)
	if got := tb.Str(mainFrame, `document.querySelector(".inline-view .view-head a").getAttribute("href")`); got != "/mcp-apps/"+viewID {
		t.Errorf("Open button goes to %q, want /mcp-apps/%s", got, viewID)
	}
	tb.Wait(viewFrame, `document.body.dataset.state === "ready" && document.body.dataset.revision === "0"`, "the sales view to show its result")
	v, err := en.store.View(context.Background(), viewID)
	if err != nil {
		t.Fatalf("the inline view %s is not stored: %v", viewID, err)
	}
	if v.TenantID != pageTenant || v.UserID != pageUser {
		t.Errorf("the view belongs to %s/%s, want the person the page chose (%s/%s)", v.TenantID, v.UserID, pageTenant, pageUser)
	}

	// The app-only tool through the bridge.
	tb.Must(viewFrame, `document.getElementById("refresh").click()`)
	tb.Wait(viewFrame, `document.body.dataset.revision === "1" && document.body.dataset.state === "ready"`, "the refreshed figures")
	ok := false
	for _, r := range en.auditCalls(pageTenant) {
		if r.Fields["tool"] == "refresh_sales" && r.Fields["result"] == "ok" && r.Actor == pageUser {
			ok = true
		}
	}
	if !ok {
		t.Errorf("no agent.mcp_app.call record of refresh_sales with result ok: %+v", en.auditCalls(pageTenant))
	}

	// Access stays as it is: once the page has signed another person in
	// (Alex, same tenant), the view is not theirs to open or call.
	tb.Must(mainFrame, `(() => { const p = document.getElementById("preset"); p.value = "1"; p.dispatchEvent(new Event("change")); return true; })()`)
	tb.Wait(mainFrame, `fetch("/api/mcp-apps/`+viewID+`").then(r => r.status === 403)`, "the view to be refused to another person")
	if got := tb.Must(mainFrame, `fetch("/api/mcp-apps/`+viewID+`/call", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({name: "refresh_sales", arguments: {}})}).then(r => r.status)`); got != float64(403) {
		t.Errorf("another person's call of the view's tool: %v, want 403", got)
	}
	tb.Must(mainFrame, `(() => { const p = document.getElementById("preset"); p.value = "0"; p.dispatchEvent(new Event("change")); return true; })()`)

	// Leaving the chat takes its messages off the transcript (as picking
	// Alex did): the view is told first (ui/resource-teardown, which it
	// writes to its console here) and its frames go once it has answered.
	tb.Wait(viewFrame, `document.body.dataset.state === "ready"`, "the view shown again in the personal chat")
	tb.Must(viewFrame, `window.addEventListener("message", (e) => { if (e.data && e.data.method === "ui/resource-teardown") { console.log("teardown reached the view: " + e.data.params.reason); } }); true`)

	// A group chat: the message carries <at>Assistant</at> and its
	// mention entity, and is answered.
	tb.Must(mainFrame, `(() => { const r = document.querySelector('input[name="kind"][value="groupChat"]'); r.checked = true; r.dispatchEvent(new Event("change")); return true; })()`)
	tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.endsWith("@thread.v2") && !document.getElementById("mention-box").hidden`, "the group chat")
	group := tb.Str(mainFrame, `document.getElementById("conversation-id").textContent`)
	tb.Wait(mainFrame, `document.querySelector(".inline-view iframe.proxy") === null`, "the personal chat's view removed")
	reached := slices.ContainsFunc(tb.Log(), func(l string) bool { return strings.Contains(l, "teardown reached the view") })
	if !reached {
		t.Errorf("the personal chat's view was removed without ui/resource-teardown")
	}
	tb.send("/tools")
	tb.Wait(mainFrame, `(() => { const c = document.querySelector(".msg.bot .ac-card"); return c !== null && c.innerText.includes("sales_report"); })()`, "the answer to /tools in the group chat")
	if got := tb.Str(mainFrame, `document.querySelector(".msg.user .at").textContent`); got != "Assistant" {
		t.Errorf("the group message's mention shows %q, want Assistant", got)
	}

	// Install: the welcome card, and the conversation is kept.
	tb.Must(mainFrame, `document.getElementById("install").click()`)
	tb.Wait(mainFrame, `[...document.querySelectorAll(".msg.bot .ac-card")].some(c => c.innerText.includes("Hi, I'm Assistant"))`, "the welcome card")
	tb.Wait(mainFrame, `document.getElementById("installed").dataset.installed === "true"`, "the page to show the bot installed")
	key := bot.ConversationKey(pageTenant, group)
	if _, err := en.store.Conversation(context.Background(), key); err != nil {
		t.Errorf("after install, conversation %s: %v", key, err)
	}
	// Uninstall: the reference is gone.
	tb.Must(mainFrame, `document.getElementById("uninstall").click()`)
	tb.Wait(mainFrame, `document.getElementById("installed").dataset.installed === "false"`, "the page to show the bot removed")
	if _, err := en.store.Conversation(context.Background(), key); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("after uninstall, conversation %s: %v, want store.ErrNotFound", key, err)
	}
}

// TestBrowserViewLinkInAFreshBrowser opens the Open link of a view made
// in the playground in another browser (its own cookies, nobody signed
// in), as a person who copies the link does: the local sign-in has the
// view's owner selected, and its Sign in button lands on the view page,
// which shows the view in its frames. The playground offers the local
// people of the sign-in, the tenant admin among them.
func TestBrowserViewLinkInAFreshBrowser(t *testing.T) {
	en := newEnv(t)
	tb := newTab(t)
	tb.Navigate(en.base + "/playground")
	tb.Wait(mainFrame, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	people := signin.LocalPeople()
	var names []string
	for _, p := range people {
		names = append(names, p.Name)
	}
	got := tb.Str(mainFrame, `[...document.querySelectorAll("#preset option[data-user]")].map(o => o.dataset.name).join(", ")`)
	if want := strings.Join(names, ", "); got != want {
		t.Errorf("the playground offers %q, want the local people %q", got, want)
	}
	if got := tb.Str(mainFrame, `document.getElementById("tenant").value`); got != signin.LocalTenant {
		t.Errorf("the playground's tenant is %q, want the local sign-in's %q", got, signin.LocalTenant)
	}
	if got := tb.Str(mainFrame, `document.getElementById("admin-note").innerText`); !strings.Contains(got, signin.LocalAdmin().Name) || !strings.Contains(got, "admin console") {
		t.Errorf("the playground does not say who opens the admin console: %q", got)
	}

	tb.send("/sales_report {}")
	tb.Wait(mainFrame, `document.querySelector(".inline-view .view-head a") !== null`, "the view's Open link")
	link := tb.Str(mainFrame, `document.querySelector(".inline-view .view-head a").href`)

	fresh := newTab(t)
	fresh.Navigate(link)
	fresh.Wait(mainFrame, `location.pathname === "/signin" && document.querySelector('input[name="person"]:checked') !== null`, "the local sign-in")
	if got := fresh.Str(mainFrame, `document.querySelector('input[name="person"]:checked').value`); got != people[0].UserID {
		t.Fatalf("the sign-in has %q selected, want the view's owner %s", got, people[0].Name)
	}
	fresh.Must(mainFrame, `document.querySelector('form[action="/signin/local"] button[type="submit"]').click()`)
	fresh.Wait(mainFrame, `location.href === `+strconv.Quote(link), "the view page after signing in")
	fresh.Wait(viewFrame, `document.body.dataset.state === "ready"`, "the view in the fresh browser")
}
