package viewpage_test

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"teamsbot/agent"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// The fake Teams client: a page on another https origin (and site) that
// frames the view page as Teams frames a Stage View, and answers
// teams-js's messages as the Teams web client does. The message shapes
// follow teams-js 2.58's own source (internal/communication.js,
// internal/appHelpers.js, public/app/app.js, public/authentication.js):
// a request is {id, uuidAsString, func, args, ...} posted to the parent;
// the answer is {id, uuidAsString, args} posted back to the frame.
//
//   - initialize answers [frameContext, hostClientType, runtime config
//     (JSON), client SDK version];
//   - getContext answers [the Teams context] with theme and locale;
//   - authentication.getAuthToken answers [true, token] (or [false, error]);
//   - appInitialization.success is a one-way notice (the runtime does not
//     say notifySuccessResponse).
var teamsHostPage = template.Must(template.New("host").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>Fake Teams</title></head>
<body>
<iframe id="app" style="width:1000px;height:900px" src="{{.Src}}"></iframe>
<script>
window.hostLog = [];
var token = {{.Token}};
var runtime = {apiVersion: 4, supports: {app: {}, authentication: {}, pages: {appButton: {}, tabs: {}, config: {}, backStack: {}, fullTrust: {}}, stageView: {}}};
var popup = null, pending = null;
window.goPopup = function () { popup.location.href = window.popupURL; };
window.addEventListener("message", function (e) {
  var frame = document.getElementById("app");
  var m = e.data;
  if (!m || typeof m.func !== "string") { return; }
  function reply(args) {
    e.source.postMessage({id: m.id, uuidAsString: m.uuidAsString, args: args}, e.origin);
  }
  if (popup && e.source === popup) {
    // The sign-in popup's teams-js: it initializes in the authentication
    // frame context, then reports success or failure, which answers the
    // page's authentication.authenticate.
    window.hostLog.push({func: "popup:" + m.func, origin: e.origin});
    if (m.func === "initialize") {
      reply(["authentication", "web", JSON.stringify(runtime), "2.58.0"]);
    } else if (pending && (m.func === "authentication.authenticate.success" || m.func === "authentication.authenticate.failure")) {
      pending.source.postMessage({id: pending.id, uuidAsString: pending.uuid,
        args: [m.func === "authentication.authenticate.success", m.args[0]]}, pending.origin);
      pending = null;
    }
    return;
  }
  if (e.source !== frame.contentWindow) { return; }
  window.hostLog.push({func: m.func, origin: e.origin});
  switch (m.func) {
  case "authentication.authenticate":
    pending = {id: m.id, uuid: m.uuidAsString, source: e.source, origin: e.origin};
    // The test lets the popup go (goPopup) once it has attached to it.
    window.popupURL = m.args[0];
    popup = window.open("about:blank", "teams-auth", "width=600,height=600");
    break;
  case "initialize":
    reply(["content", "web", JSON.stringify(runtime), "2.58.0"]);
    break;
  case "getContext":
    reply([{theme: {{.Theme}}, locale: {{.Locale}}, frameContext: "content", hostClientType: "web",
      tid: {{.Tenant}}, userObjectId: {{.User}}, hostName: "Teams"}]);
    break;
  case "authentication.getAuthToken":
    if (token) { reply([true, token]); } else { reply([false, "resourceRequiresConsent"]); }
    break;
  }
});
</script>
</body></html>`))

// teamsHost is what the fake Teams client serves next.
type teamsHost struct {
	mu            sync.Mutex
	src, token    string
	theme, locale string
	tenant, user  string
}

var teamsHosts sync.Map // *env → *teamsHost

func (e *env) host() *teamsHost {
	h, _ := teamsHosts.LoadOrStore(e, &teamsHost{})
	return h.(*teamsHost)
}

// serveTeamsHost serves GET /host, the fake Teams client's page.
func (e *env) serveTeamsHost(w http.ResponseWriter, r *http.Request) {
	h := e.host()
	h.mu.Lock()
	defer h.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	teamsHostPage.Execute(w, map[string]string{
		"Src": h.src, "Token": h.token, "Theme": h.theme, "Locale": h.locale, "Tenant": h.tenant, "User": h.user,
	})
}

// teamsTab is a tab that trusts the loopback servers' test certificates
// and blocks third-party cookies, as browsers do more and more: only a
// Partitioned cookie then lives in Teams' frame.
func teamsTab(t *testing.T) *tab {
	tb := newTab(t)
	if _, err := chromedp.Call(tb.ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true}); err != nil {
		t.Fatalf("trust the test certificates: %v", err)
	}
	if _, err := chromedp.Call(tb.ctx, network.SetCookieControls, network.SetCookieControlsParams{EnableThirdPartyCookieRestriction: true}); err != nil {
		t.Fatalf("block third-party cookies: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			page, _ := tb.eval(pageFrame, `document.body ? document.body.innerText : ""`)
			host, _ := tb.eval(mainFrame, `JSON.stringify(window.hostLog || [])`)
			t.Logf("the page inside the fake Teams says %q; the host was asked %v", page, host)
		}
	})
	return tb
}

const pageFrame = "/mcp-apps/"

// Inside Teams: the fake Teams client frames the view page, teams-js on the
// page initializes, reads the context and asks for a token; the service
// takes the token (signed by the key set it trusts) for a session without
// any sign-in page; the view renders with the Teams theme and locale in its
// host context, and its tools/call goes through the bridge with the
// session that came from Teams.
func TestBrowserInsideTeams(t *testing.T) {
	e := newEnv(t, envOptions{
		teams:    true,
		servers:  []agent.ServerConfig{{Name: "lab", Builtin: "lab"}},
		builtins: map[string]func() *mcp.Server{"lab": labServer(t)},
	})
	v := e.run(alice(), "/lab_view {}")
	h := e.host()
	h.src = e.base + "/mcp-apps/" + v.ID
	h.token = e.keys.Sign(t, testenv.TeamsToken{
		Audience: signin.ApplicationIDURI("127.0.0.1", e.oidc.Config().ClientID),
		Tenant:   tenantA, User: alice().OID, Name: "Alice", Roles: alice().Roles,
	})
	h.theme, h.locale, h.tenant, h.user = "dark", "fr-FR", tenantA, alice().OID
	before := e.requestCount()

	tb := teamsTab(t)
	tb.navigate(e.teamsHost + "/host")
	tb.wait(viewFrame, `typeof window.rpc === "function"`, "the lab view inside the page inside the fake Teams")

	// No sign-in page was ever asked for: the shell traded the Teams
	// token, then the page loaded again with the session.
	var signIns, trades int
	for _, r := range e.requestsSince(before) {
		if strings.HasPrefix(r, "GET /signin") {
			signIns++
		}
		if r == "POST /api/signin/teams" {
			trades++
		}
	}
	if signIns != 0 || trades != 1 {
		t.Fatalf("requests inside Teams: %v; want one token trade and no sign-in page", e.requestsSince(before))
	}
	funcs := map[string]int{}
	for _, m := range tb.must(mainFrame, `window.hostLog`).([]any) {
		mm := m.(map[string]any)
		funcs[mm["func"].(string)]++
		if mm["origin"] != e.base {
			t.Errorf("teams-js message from %v, want the page's origin %s", mm["origin"], e.base)
		}
	}
	// Twice each: the sign-in shell, then the page.
	if funcs["initialize"] != 2 || funcs["authentication.getAuthToken"] != 1 || funcs["getContext"] != 1 || funcs["appInitialization.success"] != 2 {
		t.Errorf("teams-js asked the host %v", funcs)
	}

	// The view's host context carries the Teams theme and locale.
	init, _ := tb.must(viewFrame, `rpc("ui/initialize", {protocolVersion: "2026-01-26", appInfo: {name: "lab", version: "1"}, appCapabilities: {}})`).(map[string]any)
	res0, _ := init["result"].(map[string]any)
	hc, _ := res0["hostContext"].(map[string]any)
	if hc["theme"] != "dark" || hc["locale"] != "fr-FR" {
		t.Errorf("hostContext theme %v locale %v, want dark and fr-FR from Teams", hc["theme"], hc["locale"])
	}
	if got := tb.str(pageFrame, `document.documentElement.getAttribute("data-theme")`); got != "dark" {
		t.Errorf("page theme %q, want dark", got)
	}

	// tools/call through the bridge, with the session from Teams.
	b, _ := json.Marshal(tb.must(viewFrame, `rpc("tools/call", {name: "lab_app", arguments: {}})`))
	if !strings.Contains(string(b), "app ok") {
		t.Fatalf("tools/call inside Teams answered %s", b)
	}
	found := false
	for _, r := range e.callAudit(tenantA) {
		if r.Fields["tool"] == "lab_app" && r.Fields["result"] == "ok" && strings.Contains(r.Actor, alice().OID) {
			found = true
		}
	}
	if !found {
		t.Errorf("no audit record of Alice's lab_app call from inside Teams: %+v", e.callAudit(tenantA))
	}

	// The view reaches neither teams-js nor the session: it is opaque,
	// and a teams-js request it posts to the page is dropped.
	got := tb.must(viewFrame, `(async () => {
		const out = {origin: String(self.origin)};
		try { out.top = String(window.top.TeamsbotTeams); } catch (e) { out.top = "blocked"; }
		try { out.cookie = document.cookie; } catch (e) { out.cookie = "blocked"; }
		window.parent.parent.postMessage({id: 999, uuidAsString: "x", func: "authentication.getAuthToken", args: []}, "*");
		return out;
	})()`).(map[string]any)
	if got["origin"] != "null" || got["top"] != "blocked" || got["cookie"] != "blocked" {
		t.Errorf("from inside the view: %v", got)
	}
	// Long enough for a relayed message to arrive; the assertion is
	// about what arrived, not about time.
	time.Sleep(300 * time.Millisecond)
	n := 0
	for _, m := range tb.must(mainFrame, `window.hostLog`).([]any) {
		if m.(map[string]any)["func"] == "authentication.getAuthToken" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Teams was asked for %d tokens; the view's forged request must not be relayed", n)
	}
}

// Inside Teams without a token (consent missing): the shell offers the
// popup sign-in and shows no part of the view or a sign-in form.
func TestBrowserInsideTeamsWithoutToken(t *testing.T) {
	e := newEnv(t, envOptions{teams: true})
	v := e.run(alice(), "/sales_report {}")
	h := e.host()
	h.src = e.base + "/mcp-apps/" + v.ID
	h.theme, h.locale, h.tenant, h.user = "default", "en-US", tenantA, alice().OID
	tb := teamsTab(t)
	tb.navigate(e.teamsHost + "/host")
	tb.wait(pageFrame, `document.getElementById("signin") && !document.getElementById("signin").hidden`, "the popup sign-in button")
	if got := tb.str(pageFrame, `document.getElementById("status").textContent`); !strings.Contains(got, "resourceRequiresConsent") {
		t.Errorf("status %q does not say why", got)
	}
	if got := tb.must(pageFrame, `document.querySelectorAll("iframe, form").length`); got != float64(0) {
		t.Errorf("the shell holds %v frames or forms", got)
	}
}

// Inside Teams without a token (consent missing), Sign in opens the
// ordinary OIDC sign-in in a popup through teams-js
// authentication.authenticate; the popup's last page hands a one-time code
// back through authentication.notifySuccess, the page trades it for the
// frame's session, and the view renders, still inside Teams. The code
// works once only.
func TestBrowserInsideTeamsPopupSignIn(t *testing.T) {
	e := newEnv(t, envOptions{
		teams:    true,
		servers:  []agent.ServerConfig{{Name: "lab", Builtin: "lab"}},
		builtins: map[string]func() *mcp.Server{"lab": labServer(t)},
	})
	v := e.run(alice(), "/lab_view {}")
	h := e.host()
	h.src = e.base + "/mcp-apps/" + v.ID
	h.theme, h.locale, h.tenant, h.user = "contrast", "de-DE", tenantA, alice().OID
	before := e.requestCount()
	tb := teamsTab(t)
	tb.navigate(e.teamsHost + "/host")
	tb.wait(pageFrame, `document.getElementById("signin") !== null && !document.getElementById("signin").hidden`, "the popup sign-in button")
	e.oidc.QueueUser(alice())
	// The popup is a new target, which Chromium holds until a client
	// attaches: attach, trust the test certificates there too, and let
	// it run.
	popups := chromedp.WaitNewTarget(tb.ctx, func(info *target.Info) bool { return info.OpenerID != "" })
	tb.must(pageFrame, `document.getElementById("signin").click(); true`)
	select {
	case id := <-popups:
		pctx, cancel := chromedp.NewContext(tb.ctx, chromedp.WithTargetID(id))
		t.Cleanup(cancel)
		if _, err := chromedp.Call(pctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true}); err != nil {
			t.Fatalf("attach to the popup: %v", err)
		}
		tb.must(mainFrame, `goPopup(); true`)
	case <-time.After(20 * time.Second):
		t.Fatal("the fake Teams client opened no popup")
	}
	tb.wait(viewFrame, `typeof window.rpc === "function"`, "the lab view after the popup sign-in")

	var handoffs int
	for _, r := range e.requestsSince(before) {
		if r == "POST /api/signin/teams/handoff" {
			handoffs++
		}
	}
	if handoffs != 1 {
		t.Errorf("requests: %v; want one handoff", e.requestsSince(before))
	}
	funcs := map[string]int{}
	for _, m := range tb.must(mainFrame, `window.hostLog`).([]any) {
		funcs[m.(map[string]any)["func"].(string)]++
	}
	if funcs["authentication.authenticate"] != 1 || funcs["popup:initialize"] != 1 || funcs["popup:authentication.authenticate.success"] != 1 {
		t.Errorf("teams-js asked the host %v", funcs)
	}
	b, _ := json.Marshal(tb.must(viewFrame, `rpc("tools/call", {name: "lab_app", arguments: {}})`))
	if !strings.Contains(string(b), "app ok") {
		t.Fatalf("tools/call after the popup sign-in answered %s", b)
	}
	if got := tb.str(pageFrame, `document.documentElement.getAttribute("data-theme")`); got != "contrast" {
		t.Errorf("page theme %q, want contrast", got)
	}
}

// A shell that loads just after a sign-in and still has no session (the
// browser kept no cookie in Teams' frame) says so and offers the browser,
// instead of signing in and reloading without end.
func TestBrowserInsideTeamsCookieRefused(t *testing.T) {
	e := newEnv(t, envOptions{teams: true})
	v := e.run(alice(), "/sales_report {}")
	h := e.host()
	h.src = e.base + "/mcp-apps/" + v.ID + "?teamsbot-signed-in=" + strconv.FormatInt(time.Now().UnixMilli(), 10)
	h.token = e.keys.Sign(t, testenv.TeamsToken{
		Audience: signin.ApplicationIDURI("127.0.0.1", e.oidc.Config().ClientID), Tenant: tenantA, User: alice().OID,
	})
	before := e.requestCount()
	tb := teamsTab(t)
	tb.navigate(e.teamsHost + "/host")
	tb.wait(pageFrame, `document.getElementById("browser") !== null && !document.getElementById("browser").hidden`, "the way to the browser")
	if got := tb.str(pageFrame, `document.getElementById("status").textContent`); !strings.Contains(got, "did not keep the sign-in") {
		t.Errorf("status %q", got)
	}
	if got := tb.str(pageFrame, `document.getElementById("browser").href`); got != e.base+"/mcp-apps/"+v.ID {
		t.Errorf("browser link %q", got)
	}
	time.Sleep(300 * time.Millisecond)
	for _, r := range e.requestsSince(before) {
		if strings.HasPrefix(r, "POST ") {
			t.Errorf("the shell signed in again: %v", e.requestsSince(before))
		}
	}

	// An old marker (the session ran out long after the sign-in) is no
	// reason to stop: the shell signs in with Teams again.
	h.src = e.base + "/mcp-apps/" + v.ID + "?teamsbot-signed-in=1"
	tb.navigate(e.teamsHost + "/host")
	tb.wait(pageFrame, `document.getElementById("proxy") !== null`, "the page signed in again despite an old marker")
}

// The page refuses a framer that is not in its Teams hosts, even in Teams
// mode: the fake Teams client's page under another origin (127.0.0.1, not
// localhost) cannot show it.
func TestBrowserTeamsPageRefusesOtherFramers(t *testing.T) {
	e := newEnv(t, envOptions{teams: true})
	v := e.run(alice(), "/sales_report {}")
	h := e.host()
	h.src = e.base + "/mcp-apps/" + v.ID
	tb := teamsTab(t)
	other := strings.Replace(e.teamsHost, "localhost", "127.0.0.1", 1)
	tb.navigate(other + "/host")
	deadline := time.Now().Add(20 * time.Second)
	for {
		tb.mu.Lock()
		log := strings.Join(tb.log, "\n")
		tb.mu.Unlock()
		if strings.Contains(log, `violates the following Content Security Policy directive: "frame-ancestors `+e.teamsHost+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Chromium did not refuse the page to %s:\n%s\n%s", other, log, tb.dump())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := tb.eval(pageFrame, `document.body.dataset.signin`); err == nil {
		if v, _ := tb.eval(pageFrame, `document.getElementById("status") !== null`); v == true {
			t.Fatalf("the page rendered inside a framer not in its list:\n%s", tb.dump())
		}
	}
}
