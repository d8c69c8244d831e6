package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"teamsbot/signin"
)

// A newcomer's browser: a cookie jar, redirects followed.
func newcomer() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second}
}

var (
	selectedRe = regexp.MustCompile(`name="person" value="([^"]*)" checked`)
	returnToRe = regexp.MustCompile(`name="return" value="([^"]*)"`)
	switchRe   = regexp.MustCompile(`<a [^>]*href="([^"]*)"[^>]*>Sign in as someone else</a>`)
	adminRe    = regexp.MustCompile(`<a class="go" id="admin" href="([^"]*)">`)
)

// landing is where a browser landed: its path and query, status and body.
type landing struct {
	at     string
	status int
	body   string
}

func visit(t *testing.T, c *http.Client, method, u string, form url.Values) landing {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = c.PostForm(u, form)
	} else {
		resp, err = c.Get(u)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return landing{at: resp.Request.URL.RequestURI(), status: resp.StatusCode, body: string(b)}
}

// signInPicking submits the local sign-in form on p as it stands (the
// person it has selected), or with pick selected instead when pick is set.
func signInPicking(t *testing.T, c *http.Client, base string, p landing, pick string) landing {
	t.Helper()
	sel, ret := selectedRe.FindStringSubmatch(p.body), returnToRe.FindStringSubmatch(p.body)
	if sel == nil || ret == nil {
		t.Fatalf("%s is not the local sign-in with someone selected (%d):\n%s", p.at, p.status, p.body)
	}
	person := sel[1]
	if pick != "" {
		if !strings.Contains(p.body, `name="person" value="`+pick+`"`) {
			t.Fatalf("the local sign-in does not offer %s", pick)
		}
		person = pick
	}
	return visit(t, c, http.MethodPost, base+"/signin/local", url.Values{"person": {person}, "return": {html.UnescapeString(ret[1])}})
}

// TestLocalModeWalkThrough is what a newcomer does after ./run.sh, over
// real HTTP on loopback against the whole service: the start page says
// how to reach the admin console and whom to sign in as, and its link
// lands there after the local sign-in; a plain person gets the console's
// 403, follows "Sign in as someone else" and becomes the tenant admin; the
// start page says who is signed in; and a view made in the playground,
// opened from a fresh browser, leads to the sign-in of its owner and, once
// signed in, shows the view.
func TestLocalModeWalkThrough(t *testing.T) {
	base, _, _ := startService(t, map[string]string{})
	people := signin.LocalPeople()
	megan, admin := people[0], signin.LocalAdmin()

	t.Run("the start page leads to the console as the tenant admin", func(t *testing.T) {
		c := newcomer()
		home := visit(t, c, http.MethodGet, base+"/", nil)
		if !strings.Contains(home.body, `href="/admin"`) || !strings.Contains(home.body, "sign in as <strong>"+admin.Name+"</strong>") {
			t.Fatalf("the start page does not say how to reach the console:\n%s", home.body)
		}
		for _, p := range people {
			if !strings.Contains(home.body, p.Name) || !strings.Contains(home.body, p.RoleList()) {
				t.Errorf("the start page does not name %s and their roles", p.Name)
			}
		}
		link := adminRe.FindStringSubmatch(home.body)
		if link == nil {
			t.Fatalf("no link to the console as %s:\n%s", admin.Name, home.body)
		}
		form := visit(t, c, http.MethodGet, base+html.UnescapeString(link[1]), nil)
		if got := selectedRe.FindStringSubmatch(form.body); got == nil || got[1] != admin.UserID {
			t.Fatalf("the sign-in has %v selected, want %s", got, admin.Name)
		}
		console := signInPicking(t, c, base, form, "")
		if console.at != "/admin" || console.status != http.StatusOK || !strings.Contains(console.body, signin.LocalTenant) || !strings.Contains(console.body, admin.Name) {
			t.Fatalf("after signing in as %s: %s %d\n%s", admin.Name, console.at, console.status, console.body)
		}
		home = visit(t, c, http.MethodGet, base+"/", nil)
		if !strings.Contains(home.body, "You are signed in as <strong>"+admin.Name+"</strong>") || switchRe.FindStringSubmatch(home.body) == nil {
			t.Errorf("the start page does not say who is signed in and offer to switch:\n%s", home.body)
		}
	})

	t.Run("a plain person's 403 offers to sign in as someone else", func(t *testing.T) {
		c := newcomer()
		form := visit(t, c, http.MethodGet, base+"/admin/audit", nil)
		refused := signInPicking(t, c, base, form, megan.UserID)
		if refused.at != "/admin/audit" || refused.status != http.StatusForbidden || !strings.Contains(refused.body, "agents.admin") {
			t.Fatalf("%s as %s: %d, want 403 naming agents.admin:\n%s", refused.at, megan.Name, refused.status, refused.body)
		}
		link := switchRe.FindStringSubmatch(refused.body)
		if link == nil || !strings.Contains(refused.body, admin.Name) {
			t.Fatalf("the console's 403 does not offer another person and name the admin:\n%s", refused.body)
		}
		form = visit(t, c, http.MethodGet, base+html.UnescapeString(link[1]), nil)
		if !strings.Contains(form.body, "You are signed in as <strong>"+megan.Name+"</strong>") {
			t.Errorf("the sign-in does not say who is signed in now")
		}
		audit := signInPicking(t, c, base, form, admin.UserID)
		if audit.at != "/admin/audit" || audit.status != http.StatusOK {
			t.Fatalf("after switching to %s: %s %d\n%s", admin.Name, audit.at, audit.status, audit.body)
		}
	})

	t.Run("a view link from a fresh browser leads to its owner", func(t *testing.T) {
		viewID := playgroundView(t, base, megan)
		c := newcomer()
		form := visit(t, c, http.MethodGet, base+"/mcp-apps/"+viewID, nil)
		if got := selectedRe.FindStringSubmatch(form.body); got == nil || got[1] != megan.UserID {
			t.Fatalf("the view link's sign-in has %v selected, want %s (%s)", got, megan.Name, form.at)
		}
		view := signInPicking(t, c, base, form, "")
		if view.at != "/mcp-apps/"+viewID || view.status != http.StatusOK || !strings.Contains(view.body, "Sales report") {
			t.Fatalf("after signing in as %s: %s %d\n%.500s", megan.Name, view.at, view.status, view.body)
		}
	})
}

// playgroundView asks the bot /sales_report {} in the playground as p, in a
// personal chat, and returns the id of the view its answer names.
func playgroundView(t *testing.T, base string, p signin.LocalPerson) string {
	t.Helper()
	who := map[string]string{"tenant": signin.LocalTenant, "user": p.UserID, "name": p.Name, "kind": "personal"}
	msg := map[string]string{"text": "/sales_report {}"}
	for k, v := range who {
		msg[k] = v
	}
	body, _ := json.Marshal(msg)
	resp, err := http.Post(base+"/playground/api/send", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("playground send: %d", resp.StatusCode)
	}
	q := url.Values{}
	for k, v := range who {
		q.Set(k, v)
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/playground/api/state?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		var s struct {
			Items []struct {
				Views []struct{ ID string } `json:"views"`
			} `json:"items"`
		}
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range s.Items {
			if len(it.Views) > 0 {
				return it.Views[0].ID
			}
		}
	}
	t.Fatal("the playground's answer named no view")
	return ""
}
