package signin_test

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// The sign-in pages (the local sign-in form, the sign-out page and the
// page after it), in light, dark and forced colours, in a desktop window
// and a phone's: axe-core finds nothing serious or critical, nothing
// scrolls sideways, and the pages wear Fluent's theme. They have no
// script: the form signs in and the button signs out as they are.
func TestBrowserSignInPagesAccessible(t *testing.T) {
	e := newEnv(t, signin.Options{Loopback: true}, false)
	tb := testenv.NewTab(t, testenv.Chromium(t), nil)
	base := e.srv.URL
	check := func(page string) {
		for _, w := range testenv.WindowSizes {
			for _, th := range testenv.Themes {
				tb.Emulate(w, th)
				what := page + ", " + string(th) + ", " + w.Name
				tb.CheckAxe(what)
				tb.CheckNoSidewaysScroll(what)
			}
		}
		tb.Emulate(testenv.WindowSizes[0], testenv.Dark)
		if bg := tb.Str("", `getComputedStyle(document.querySelector("main")).backgroundColor`); bg != "rgb(41, 41, 41)" {
			t.Errorf("%s: the card in the dark theme is %s, want Fluent's colorNeutralBackground1 #292929", page, bg)
		}
		tb.Emulate(testenv.WindowSizes[0], testenv.Light)
	}
	tb.Navigate(base + "/signin?return=/")
	tb.Wait("", `document.querySelector("h1") && document.querySelector("h1").textContent === "Sign in (development)"`, "the local sign-in")
	check("the local sign-in")
	if n := tb.Must("", `document.scripts.length`); n != float64(0) {
		t.Errorf("the sign-in page has %v scripts", n)
	}
	// The form, by the keyboard: the first person is picked.
	tb.Must("", `document.querySelector('input[name=person]').click(), document.querySelector("form button[type=submit]").focus(), 0`)
	if err := chromedp.Do(tb.Ctx, chromedp.KeyEvent(kb.Enter)); err != nil {
		t.Fatal(err)
	}
	tb.Wait("", `location.pathname === "/" && document.body.innerText.includes("Megan Bowen")`, "signed in")

	tb.Navigate(base + "/signout")
	tb.Wait("", `document.querySelector("h1") && document.querySelector("h1").textContent === "Sign out"`, "the sign-out page")
	check("the sign-out page")
	tb.Must("", `document.querySelector("form button[type=submit]").click(), 0`)
	tb.Wait("", `document.querySelector("h1") && document.querySelector("h1").textContent === "You are signed out"`, "the signed-out page")
	check("the signed-out page")
}
