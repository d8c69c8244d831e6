package viewpage_test

import (
	"context"
	"html"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/signin"
	"teamsbot/store"
)

// runFor runs the agent for the person of tenant and user (user "": a run
// without a person) and returns the view it made.
func (e *env) runFor(tenant, user, name string) store.View {
	e.t.Helper()
	ans, err := e.agent.Run(context.Background(), agent.Request{
		Person: agent.Person{TenantID: tenant, UserID: user, Name: name}, Text: "/sales_report {}",
	})
	if err != nil || len(ans.Views) == 0 {
		e.t.Fatalf("run for %s/%s: %v, %d views", tenant, user, err, len(ans.Views))
	}
	return ans.Views[0]
}

// freshBrowser is a client with an empty cookie jar that follows redirects.
func freshBrowser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

var (
	checkedRe    = regexp.MustCompile(`name="person" value="([^"]*)" checked`)
	returnRe     = regexp.MustCompile(`name="return" value="([^"]*)"`)
	someoneElse  = regexp.MustCompile(`<a href="([^"]*)">Sign in as someone else</a>`)
	signInFormAt = "/signin/local"
)

// submitSignIn posts the local sign-in form of body as a person would:
// the person it has selected, towards the return path it carries. It
// returns the page the browser lands on.
func (e *env) submitSignIn(t *testing.T, c *http.Client, body string) response {
	t.Helper()
	person, ret := checkedRe.FindStringSubmatch(body), returnRe.FindStringSubmatch(body)
	if person == nil || ret == nil {
		t.Fatalf("no sign-in form with a selected person:\n%s", body)
	}
	form := url.Values{"person": {person[1]}, "return": {html.UnescapeString(ret[1])}}
	return do(t, c, http.MethodPost, e.base+signInFormAt, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, form.Encode())
}

// signInAs signs c in through the local sign-in with form (a person
// picked, or someone typed in).
func (e *env) signInAs(t *testing.T, c *http.Client, form url.Values) {
	t.Helper()
	form.Set("return", "/")
	r := do(t, noRedirect(c), http.MethodPost, e.base+signInFormAt, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, form.Encode())
	if r.status != http.StatusSeeOther {
		t.Fatalf("local sign-in %v: %d %s", form, r.status, r.body)
	}
}

// In local mode a view link leads to the sign-in of the person who may
// open it: opened in a fresh browser, the local sign-in has the view's
// owner selected, and signing in shows the view; signed in as someone
// else, the refusal names the owner and offers to sign in as someone else
// with the owner selected. Only the local people are named (whom the local
// sign-in lists for anyone to pick), only to requests the local sign-in
// would take, and never for a view that is unknown, expired or someone
// else's.
func TestLocalViewLinkLeadsToItsOwner(t *testing.T) {
	e := newEnv(t, envOptions{local: true})
	people := signin.LocalPeople()
	megan, alex := people[0], people[1]
	v := e.runFor(signin.LocalTenant, megan.UserID, megan.Name)
	ret := "/mcp-apps/" + v.ID
	page := e.base + ret
	opened := func(r response) bool { return r.status == http.StatusOK && strings.Contains(r.body, `id="tool-title"`) }

	t.Run("a fresh browser signs in as the owner and sees the view", func(t *testing.T) {
		c := freshBrowser()
		r := do(t, noRedirect(c), http.MethodGet, page, nil, "")
		if want := e.signin.SignInAsURL(ret, megan.UserID); r.status != http.StatusSeeOther || r.header.Get("Location") != want {
			t.Fatalf("%d to %q, want 303 to %q", r.status, r.header.Get("Location"), want)
		}
		form := do(t, c, http.MethodGet, page, nil, "")
		if got := checkedRe.FindStringSubmatch(form.body); got == nil || got[1] != megan.UserID {
			t.Fatalf("the sign-in has %v selected, want %s", got, megan.Name)
		}
		if r := e.submitSignIn(t, c, form.body); !opened(r) {
			t.Fatalf("after signing in as the selected person: %d %.400s", r.status, r.body)
		}
	})

	t.Run("another person is told whose it is and switches", func(t *testing.T) {
		c := freshBrowser()
		e.signInAs(t, c, url.Values{"person": {alex.UserID}})
		r := do(t, c, http.MethodGet, page, nil, "")
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "This view is "+html.EscapeString(megan.Name+"'s")) ||
			!strings.Contains(r.body, "signed in as "+alex.Name) {
			t.Fatalf("%d, want 403 naming the owner and who is signed in:\n%s", r.status, r.body)
		}
		link := someoneElse.FindStringSubmatch(r.body)
		if link == nil || html.UnescapeString(link[1]) != e.signin.SignInAsURL(ret, megan.UserID) {
			t.Fatalf("the refusal offers %v, want Sign in as someone else with %s selected", link, megan.Name)
		}
		form := do(t, c, http.MethodGet, e.base+html.UnescapeString(link[1]), nil, "")
		if !strings.Contains(form.body, "You are signed in as <strong>"+alex.Name+"</strong>") {
			t.Errorf("the sign-in does not say who is signed in now")
		}
		if r := e.submitSignIn(t, c, form.body); !opened(r) {
			t.Fatalf("after switching: %d %.400s", r.status, r.body)
		}
	})

	t.Run("another tenant is told whose it is", func(t *testing.T) {
		c := freshBrowser()
		e.signInAs(t, c, url.Values{"person": {"other"}, "tenant": {"another-tenant"}, "user": {megan.UserID}, "name": {"Mallory"}, "roles": {"agents.read agents.run agents.admin"}})
		r := do(t, c, http.MethodGet, page, nil, "")
		if r.status != http.StatusForbidden || !strings.Contains(r.body, "Only "+megan.Name) || !strings.Contains(r.body, "of another tenant") {
			t.Errorf("%d, want 403 naming the owner:\n%s", r.status, r.body)
		}
	})

	t.Run("a run without a person leads to an agent reader", func(t *testing.T) {
		nv := e.runFor(signin.LocalTenant, "", "")
		c := freshBrowser()
		r := do(t, noRedirect(c), http.MethodGet, e.base+"/mcp-apps/"+nv.ID, nil, "")
		reader := signin.LocalReader()
		if want := e.signin.SignInAsURL("/mcp-apps/"+nv.ID, reader.UserID); r.header.Get("Location") != want {
			t.Fatalf("redirected to %q, want %q", r.header.Get("Location"), want)
		}
		form := do(t, c, http.MethodGet, e.base+"/mcp-apps/"+nv.ID, nil, "")
		if r := e.submitSignIn(t, c, form.body); !opened(r) {
			t.Fatalf("after signing in as the reader: %d %.400s", r.status, r.body)
		}
	})

	// Nothing more than the local sign-in reveals: a view of someone typed
	// in by hand, an unknown or expired view, or a request the local
	// sign-in would not take (a rebound host name, a proxy) gets the plain
	// sign-in and the plain refusal.
	typed := e.runFor(signin.LocalTenant, "dana-typed-by-hand", "Dana Secret")
	alexClient := freshBrowser()
	e.signInAs(t, alexClient, url.Values{"person": {alex.UserID}})
	plain := func(t *testing.T, id string, header map[string]string, status int) {
		t.Helper()
		r := do(t, noRedirect(freshBrowser()), http.MethodGet, e.base+"/mcp-apps/"+id, header, "")
		if want := e.signin.SignInURL("/mcp-apps/" + id); r.header.Get("Location") != want {
			t.Errorf("%s %v: redirected to %q, want the plain %q", id, header, r.header.Get("Location"), want)
		}
		// The session cookie as the browser sends it to the name it asked
		// for (Go's jar keys cookies by that name).
		u, _ := url.Parse(e.base)
		withCookie := map[string]string{"Cookie": alexClient.Jar.Cookies(u)[0].String()}
		for k, v := range header {
			withCookie[k] = v
		}
		r = do(t, noRedirect(&http.Client{Timeout: 30 * time.Second}), http.MethodGet, e.base+"/mcp-apps/"+id, withCookie, "")
		if r.status != status {
			t.Errorf("%s %v as %s: %d, want %d", id, header, alex.Name, r.status, status)
		}
		for _, leak := range []string{megan.Name, megan.UserID, "dana-typed-by-hand", "Dana Secret", "&amp;as="} {
			if strings.Contains(r.body, leak) {
				t.Errorf("%s %v: the refusal shows %q:\n%s", id, header, leak, r.body)
			}
		}
	}
	t.Run("someone typed by hand is not named", func(t *testing.T) {
		plain(t, typed.ID, nil, http.StatusForbidden)
		r := do(t, alexClient, http.MethodGet, e.base+"/mcp-apps/"+typed.ID, nil, "")
		link := someoneElse.FindStringSubmatch(r.body)
		if !strings.Contains(r.body, "This view is not yours") || link == nil || html.UnescapeString(link[1]) != e.signin.SignInURL("/mcp-apps/"+typed.ID) {
			t.Errorf("want the plain refusal with a plain Sign in as someone else:\n%s", r.body)
		}
	})
	t.Run("an unknown view names nobody", func(t *testing.T) {
		plain(t, "no-such-view", nil, http.StatusNotFound)
	})
	t.Run("a rebound host name or a proxy gets nothing", func(t *testing.T) {
		port := e.base[strings.LastIndex(e.base, ":"):]
		plain(t, v.ID, map[string]string{"Host": "rebound.attacker.example" + port}, http.StatusForbidden)
		plain(t, v.ID, map[string]string{"X-Forwarded-For": "203.0.113.7"}, http.StatusForbidden)
	})
	t.Run("an expired view names nobody", func(t *testing.T) {
		e.clock.Advance(store.ViewLifetime + time.Minute)
		defer e.clock.Advance(-(store.ViewLifetime + time.Minute))
		plain(t, v.ID, nil, http.StatusGone)
	})
}
