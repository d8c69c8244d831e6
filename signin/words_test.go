package signin_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// Every refusal of the sign-in, over real HTTP, says in plain words what
// happened and what to do: a failed callback (the provider's error, a
// link from another browser, a code the provider refuses, a token that
// does not verify), a refused Teams token, a refused handoff code and the
// local sign-in's refusals. None holds a package prefix, Go's words or the
// verifier's own error text, which the log keeps.
func TestSignInRefusalsInWords(t *testing.T) {
	keys := testenv.StartEntraKeys(t)
	m := startMock(t)
	e := newOIDCEnv(t, m, true, func(o *signin.Options) {
		o.AllowedTenants = []string{alice().TID}
		o.Teams = &signin.TeamsOptions{KeysURL: keys.URL, HTTPClient: keys.Client}
	})
	check := func(t *testing.T, resp *http.Response, body string, status int, says ...string) {
		t.Helper()
		msg := testenv.AnswerWords(resp.Header.Get("Content-Type"), []byte(body))
		if resp.StatusCode != status {
			t.Errorf("status %d, want %d: %q", resp.StatusCode, status, msg)
		}
		if msg == "" {
			t.Fatalf("no message in the answer:\n%.500s", body)
		}
		if l := testenv.Leaks(msg); len(l) > 0 {
			t.Errorf("the message holds %q: %s", l, msg)
		}
		for _, s := range says {
			if !strings.Contains(msg, s) {
				t.Errorf("the message does not say %q: %s", s, msg)
			}
		}
	}
	post := func(path, contentType, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		return do(t, e.noFollow(), req)
	}

	t.Run("the provider's error", func(t *testing.T) {
		m.QueueUser(alice())
		f := e.begin("/x")
		q := url.Values{"error": {"access_denied"}, "error_description": {"AADSTS65004: User declined to consent"}, "state": {f.callback.Query().Get("state")}}
		resp, body := e.get(e.noFollow(), e.srv.URL+"/signin/callback?"+q.Encode())
		check(t, resp, body, 400, "did not sign you in", "AADSTS65004")
	})
	t.Run("a callback this browser did not start", func(t *testing.T) {
		resp, body := e.get(e.noFollow(), e.srv.URL+"/signin/callback?code=abc&state=def")
		check(t, resp, body, 400, "not started in this browser", "start again")
	})
	t.Run("a code the provider refuses", func(t *testing.T) {
		m.QueueUser(alice())
		f := e.begin("/x")
		m.QueueError(&mockoidc.ServerError{Code: http.StatusBadRequest, Error: "invalid_grant", Description: "code expired"})
		resp, body := e.finish(f)
		check(t, resp, body, 400, "refused the sign-in code", "start again")
	})
	t.Run("an ID token that does not verify", func(t *testing.T) {
		u := alice()
		bad := "nonce-of-another-sign-in"
		u.Nonce = &bad
		m.QueueUser(u)
		resp, body := e.finish(e.begin("/x"))
		check(t, resp, body, 400, "could not be verified", "start again")
	})
	t.Run("a tenant not onboarded", func(t *testing.T) {
		u := alice()
		u.TID = "33333333-3333-3333-3333-333333333333"
		m.QueueUser(u)
		resp, body := e.finish(e.begin("/x"))
		check(t, resp, body, 403, "not set up to use this service", "administrator")
	})
	t.Run("a Teams token signed by another key", func(t *testing.T) {
		resp, body := post("/api/signin/teams", "application/json", `{"token":"`+keys.SignWithOtherKey(t, goodToken(e))+`"}`)
		check(t, resp, body, 401, "token was not accepted")
	})
	t.Run("a Teams token that is not a token", func(t *testing.T) {
		resp, body := post("/api/signin/teams", "application/json", `{"token":"not.a.jwt"}`)
		check(t, resp, body, 401, "token was not accepted")
	})
	t.Run("a Teams token of a tenant not onboarded", func(t *testing.T) {
		tok := goodToken(e)
		tok.Tenant = "33333333-3333-3333-3333-333333333333"
		resp, body := post("/api/signin/teams", "application/json", `{"token":"`+keys.Sign(t, tok)+`"}`)
		check(t, resp, body, 403, "not set up to use this service")
	})
	t.Run("a Teams token body that is not JSON", func(t *testing.T) {
		resp, body := post("/api/signin/teams", "application/json", `{"token":`)
		check(t, resp, body, 400, `{"token": "..."}`)
	})
	t.Run("a Teams token as a form", func(t *testing.T) {
		resp, body := post("/api/signin/teams", "application/x-www-form-urlencoded", "token=x")
		check(t, resp, body, 415, "JSON")
	})
	t.Run("a Teams token from another site", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/api/signin/teams", strings.NewReader(`{"token":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		resp, body := do(t, e.noFollow(), req)
		check(t, resp, body, 403, "another site")
	})
	t.Run("a handoff code that is not one", func(t *testing.T) {
		resp, body := post("/api/signin/teams/handoff", "application/json", `{"code":"forged"}`)
		check(t, resp, body, 401, "expired or was already used", "Sign in again")
	})
	t.Run("a handoff code too large", func(t *testing.T) {
		resp, body := post("/api/signin/teams/handoff", "application/json", `{"code":"`+strings.Repeat("a", 64<<10)+`"}`)
		check(t, resp, body, 413, "too large")
	})

	// The local sign-in's refusals, on a service without an issuer.
	local := newEnv(t, signin.Options{Loopback: true}, false)
	postLocal := func(form url.Values, header map[string]string) (*http.Response, string) {
		return local.postLocal(form, header)
	}
	t.Run("local: a person not in the list", func(t *testing.T) {
		resp, body := postLocal(url.Values{"person": {"nobody"}}, nil)
		check(t, resp, body, 400, "no such person in the list", "Pick one")
	})
	t.Run("local: ids that are not ids", func(t *testing.T) {
		resp, body := postLocal(url.Values{"person": {"other"}, "tenant": {"a b"}, "user": {""}}, nil)
		check(t, resp, body, 400, "Tenant id and user id must be")
	})
	t.Run("local: through a proxy", func(t *testing.T) {
		resp, body := postLocal(url.Values{"person": {signin.LocalPeople()[0].UserID}}, map[string]string{"X-Forwarded-For": "203.0.113.7"})
		check(t, resp, body, 403, "proxy or a tunnel")
	})
	t.Run("local: from another site", func(t *testing.T) {
		resp, body := postLocal(url.Values{"person": {signin.LocalPeople()[0].UserID}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
		check(t, resp, body, 403, "another site")
	})
}
