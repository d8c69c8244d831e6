package fakeauth_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"teamsbot/internal/testenv"
	"teamsbot/internal/testenv/fakeauth"
)

// TestConsentPageInChromium: headless Chromium opens the authorization
// URL, picks Bob and presses Allow like a person; the browser lands on the
// client's redirect URI with a code, the state and iss, and the code gives
// Bob's token.
func TestConsentPageInChromium(t *testing.T) {
	testenv.NeedChromium(t)
	as := fakeauth.StartAuthServer(t)
	landed := make(chan url.Values, 1)
	site := fakeauth.ServeHTTPS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/callback" {
			landed <- r.URL.Query()
		}
		w.Write([]byte("signed in"))
	}))
	as.AddClient("teams-bot", "", site.URL+"/callback")
	cfg := &oauth2.Config{
		ClientID: "teams-bot", RedirectURL: site.URL + "/callback", Scopes: []string{fakeauth.ScopeRead},
		Endpoint: oauth2.Endpoint{AuthURL: as.URL + "/authorize", TokenURL: as.URL + "/token", AuthStyle: oauth2.AuthStyleInParams},
	}
	verifier := oauth2.GenerateVerifier()
	resource := oauth2.SetAuthURLParam("resource", "https://crm.example/mcp")

	browser := testenv.Chromium(t, chromedp.Flag("ignore-certificate-errors-spki-list", fakeauth.SPKI(as.Cert)+","+fakeauth.SPKI(site.Cert)))
	tab := testenv.NewTab(t, browser, nil)
	tab.Navigate(cfg.AuthCodeURL("the-state", oauth2.S256ChallengeOption(verifier), resource))
	tab.Wait("", `document.querySelector("#allow") !== null`, "the consent page")
	if text := tab.Str("", `document.body.innerText`); !strings.Contains(text, "Sign in to crm.example as") {
		t.Errorf("the consent page says %q", text)
	}
	tab.Must("", `document.querySelector("#user").value = "`+fakeauth.Bob+`"; document.querySelector("#allow").click(); true`)

	var q url.Values
	select {
	case q = <-landed:
	case <-time.After(30 * time.Second): // only stops a hung test
		t.Fatalf("the browser never reached the redirect URI:\n%s", tab.Dump())
	}
	if q.Get("state") != "the-state" || q.Get("iss") != as.URL || q.Get("code") == "" {
		t.Fatalf("the browser landed with %v", q)
	}
	ctx := context.WithValue(t.Context(), oauth2.HTTPClient, as.Client())
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier), resource)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := as.Verify(tok.AccessToken); err != nil || c.Subject != fakeauth.Bob {
		t.Errorf("the token: %+v, %v; want Bob's", c, err)
	}
}
