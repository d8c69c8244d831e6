package viewpage_test

import (
	"net/http"
	"net/http/cookiejar"
	"strings"
	"testing"

	"teamsbot/internal/netaddr"
	"teamsbot/internal/testenv"
	"teamsbot/signin"
	"teamsbot/viewpage"
)

// teamsClient is an https client of a Teams-mode env, signed in as p with
// a Teams single sign-on token, as the page inside Teams is.
func (e *env) teamsClient(p *person) *http.Client {
	e.t.Helper()
	jar, _ := cookiejar.New(nil)
	c := *e.https
	c.Jar = jar
	tok := e.keys.Sign(e.t, testenv.TeamsToken{
		Audience: signin.ApplicationIDURI("127.0.0.1", e.oidc.Config().ClientID),
		Tenant:   p.TID, User: p.OID, Name: p.Name, Roles: p.Roles,
	})
	r := do(e.t, &c, http.MethodPost, e.base+"/api/signin/teams",
		map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"}, `{"token":"`+tok+`"}`)
	if r.status != http.StatusNoContent {
		e.t.Fatalf("Teams token trade: %d %s", r.status, r.body)
	}
	return &c
}

// In Teams mode only the page's frame-ancestors change (to the Teams
// hosts) and its script-src gains teams-js and the page's Teams script by
// hash; the proxy adds the Teams hosts to its ancestors, because
// frame-ancestors names every ancestor up to Teams; the view document's
// policy is exactly what it is outside Teams.
func TestTeamsModeHeaders(t *testing.T) {
	plain := newEnv(t, envOptions{sameOrigin: true})
	pv := plain.run(alice(), "/sales_report {}")
	pc := plain.client(alice())
	pinfo := plain.viewInfo(pc, pv.ID)
	plainPage := do(t, pc, http.MethodGet, plain.base+"/mcp-apps/"+pv.ID, nil, "").header.Get("Content-Security-Policy")
	plainProxy := do(t, pc, http.MethodGet, plain.base+pinfo.ProxyURL, nil, "").header.Get("Content-Security-Policy")
	plainView := do(t, pc, http.MethodGet, plain.base+pinfo.ViewURL, nil, "").header.Get("Content-Security-Policy")

	e := newEnv(t, envOptions{teams: true})
	v := e.run(alice(), "/sales_report {}")
	c := e.teamsClient(alice())
	info := e.viewInfo(c, v.ID)
	page := do(t, c, http.MethodGet, e.base+"/mcp-apps/"+v.ID, nil, "")
	proxy := do(t, c, http.MethodGet, e.base+info.ProxyURL, nil, "")
	view := do(t, c, http.MethodGet, e.base+info.ViewURL, nil, "")
	for name, r := range map[string]response{"page": page, "proxy": proxy, "view": view} {
		if r.status != http.StatusOK {
			t.Fatalf("%s in Teams mode: %d %s", name, r.status, r.body)
		}
	}

	csp := page.header.Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "; frame-ancestors "+e.teamsHost) {
		t.Errorf("Teams page CSP %q, want frame-ancestors %s only", csp, e.teamsHost)
	}
	if !strings.HasSuffix(plainPage, "; frame-ancestors 'none'") {
		t.Errorf("page CSP outside Teams %q, want frame-ancestors 'none'", plainPage)
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "res.cdn.office.net") || strings.Contains(csp, "https://*") {
		t.Errorf("Teams page CSP is wider than hashes and the hosts: %s", csp)
	}
	if got, want := strings.Count(csp, "'sha256-"), strings.Count(plainPage, "'sha256-")+2; got != want {
		t.Errorf("Teams page CSP allows %d hashes, want %d (teams-js and the Teams script added): %s", got, want, csp)
	}
	strip := func(s string) string {
		var out []string
		for _, d := range strings.Split(s, "; ") {
			if !strings.HasPrefix(d, "script-src ") && !strings.HasPrefix(d, "frame-ancestors ") {
				out = append(out, d)
			}
		}
		return strings.Join(out, "; ")
	}
	if strip(csp) != strip(plainPage) {
		t.Errorf("Teams mode changed more of the page CSP than script-src and frame-ancestors:\n teams %s\n plain %s", csp, plainPage)
	}
	if got := proxy.header.Get("Content-Security-Policy"); got != plainProxy+" "+e.teamsHost {
		t.Errorf("Teams proxy CSP\n got %q\nwant %q", got, plainProxy+" "+e.teamsHost)
	}
	if got := view.header.Get("Content-Security-Policy"); got != plainView || strings.Contains(got, "frame-ancestors") {
		t.Errorf("Teams view CSP %q, want the same as outside Teams %q", got, plainView)
	}
	if !strings.Contains(page.body, "TeamsbotTeams") || strings.Contains(do(t, pc, http.MethodGet, plain.base+"/mcp-apps/"+pv.ID, nil, "").body, "TeamsbotTeams") {
		t.Error("teams-js is on the page only in Teams mode")
	}
}

// Without a session the page inside Teams' frame is the sign-in shell,
// which shows nothing of the view; opened as a document it sends the
// person to the sign-in as it always did; in a frame outside Teams mode it
// goes to the sign-in too, which refuses frames.
func TestTeamsSignInShell(t *testing.T) {
	e := newEnv(t, envOptions{teams: true})
	v := e.run(alice(), "/sales_report {}")
	anon := *e.https
	anon.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	shell := do(t, &anon, http.MethodGet, e.base+"/mcp-apps/"+v.ID, map[string]string{"Sec-Fetch-Dest": "iframe"}, "")
	if shell.status != http.StatusOK || !strings.Contains(shell.body, "data-signin") {
		t.Fatalf("shell: %d %s", shell.status, shell.body)
	}
	for _, leak := range []string{"Sales report", v.Tool, "sandbox/proxy", v.ID} {
		if strings.Contains(shell.body, leak) {
			t.Errorf("the shell shows %q of the view", leak)
		}
	}
	csp := shell.header.Get("Content-Security-Policy")
	if !strings.HasSuffix(csp, "; frame-ancestors "+e.teamsHost) || strings.Contains(csp, "frame-src") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("shell CSP %q", csp)
	}
	doc := do(t, &anon, http.MethodGet, e.base+"/mcp-apps/"+v.ID, map[string]string{"Sec-Fetch-Dest": "document"}, "")
	if doc.status != http.StatusSeeOther || !strings.HasPrefix(doc.header.Get("Location"), "/signin?") {
		t.Errorf("page as a document without a session: %d %q", doc.status, doc.header.Get("Location"))
	}

	plain := newEnv(t, envOptions{})
	pv := plain.run(alice(), "/sales_report {}")
	framed := do(t, noRedirect(plain.client(nil)), http.MethodGet, plain.base+"/mcp-apps/"+pv.ID, map[string]string{"Sec-Fetch-Dest": "iframe"}, "")
	if framed.status != http.StatusSeeOther || !strings.HasPrefix(framed.header.Get("Location"), "/signin?") {
		t.Errorf("framed page outside Teams mode: %d %q", framed.status, framed.header.Get("Location"))
	}
}

// Teams hosts are checked when the handler is built: nothing but
// https://host or https://*.domain reaches frame-ancestors, and Teams mode
// needs an https public origin.
func TestTeamsHostsChecked(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, hosts := range [][]string{
		{"https://teams.example; script-src *"}, {"*"}, {"http://teams.microsoft.com"}, {"'self'"}, {"https://a b"}, {},
	} {
		_, err := viewpage.New(viewpage.Options{
			Store: e.store, Agent: e.agent, SignIn: e.signin, Access: e.access, DataDir: t.TempDir(),
			PublicBaseURL: netaddr.MustParseOrigin("https://bot.example.com"),
			Teams:         &viewpage.TeamsOptions{FrameAncestors: hosts},
		})
		if err == nil {
			t.Errorf("Teams hosts %q were taken", hosts)
		}
	}
	_, err := viewpage.New(viewpage.Options{
		Store: e.store, Agent: e.agent, SignIn: e.signin, Access: e.access, DataDir: t.TempDir(),
		PublicBaseURL: netaddr.MustParseOrigin("http://127.0.0.1:1"), Teams: &viewpage.TeamsOptions{},
	})
	if err == nil || !strings.Contains(err.Error(), "https") {
		t.Errorf("Teams mode over http: %v", err)
	}
	for _, h := range viewpage.TeamsHosts {
		if !strings.HasPrefix(h, "https://") {
			t.Errorf("documented host %q", h)
		}
	}
}
