package testenv_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"teamsbot/internal/testenv"
)

// Axe finds what axe-core calls serious or critical on a page whose
// policy allows no script at all, and SidewaysScroll tells a page wider
// than a phone's window, at the size Emulate set; a page without either
// fault passes both in every theme.
func TestAxeAndSidewaysScroll(t *testing.T) {
	pages := map[string]string{
		"/bad": `<!doctype html><html lang="en"><head><title>bad</title></head><body><main>
<button type="button"></button><div style="width:600px">wide</div></main></body></html>`,
		"/good": `<!doctype html><html lang="en"><head><title>good</title></head><body><main>
<h1>Good</h1><button type="button">Save</button><p>Fits any window.</p></main></body></html>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(pages[r.URL.Path]))
	}))
	t.Cleanup(srv.Close)
	tb := testenv.NewTab(t, testenv.Chromium(t), nil)

	tb.Emulate(testenv.WindowSizes[1], testenv.Light)
	tb.Navigate(srv.URL + "/bad")
	vs, err := tb.Axe()
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1 || vs[0].ID != "button-name" || vs[0].Impact != "critical" || !strings.Contains(strings.Join(vs[0].Nodes, ""), "button") {
		t.Errorf("axe on a button without a name: %v", vs)
	}
	if s, c, err := tb.SidewaysScroll(); err != nil || s <= c || c != 390 {
		t.Errorf("a 600 px block in a 390 px window: scrollWidth %d, clientWidth %d, %v", s, c, err)
	}

	for _, w := range testenv.WindowSizes {
		for _, th := range testenv.Themes {
			tb.Emulate(w, th)
			tb.Navigate(srv.URL + "/good")
			what := "good page, " + string(th) + ", " + w.Name
			tb.CheckAxe(what)
			tb.CheckNoSidewaysScroll(what)
			forced := tb.Must("", `matchMedia("(forced-colors: active)").matches`)
			if forced != (th == testenv.HighContrast) {
				t.Errorf("%s: forced-colors active is %v", what, forced)
			}
			if c := tb.Must("", `document.scrollingElement.clientWidth`); c.(float64) > float64(w.Width) || c.(float64) < float64(w.Width-20) {
				t.Errorf("%s: the window is %v px wide", what, c)
			}
		}
	}
}
