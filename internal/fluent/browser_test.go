package fluent_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"teamsbot/internal/fluent"
	"teamsbot/internal/testenv"
	"teamsbot/internal/web/csp"
)

// In Chromium, under the strictest policy a page of the service has
// (hashes only, Trusted Types required), the script defines its
// components without a violation, sets Fluent's theme, follows Teams'
// data-theme, and a data-confirm form posts only after its dialog is
// confirmed, with confirm=yes.
func TestScriptUnderStrictPolicy(t *testing.T) {
	tb := testenv.NewTab(t, testenv.Chromium(t), nil)
	var mu sync.Mutex
	var posted []string
	mux := http.NewServeMux()
	policy := csp.New().Add("default-src").Add("script-src", fluent.ScriptHash()).Add("style-src", fluent.CSSHash()).
		Add("form-action", csp.Self).Add("base-uri").Add("require-trusted-types-for", csp.Script).
		Add("trusted-types", fluent.TrustedTypesPolicy).String()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", policy)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(`<!doctype html><html lang="en"><head><title>t</title><style>` + fluent.CSS() + `</style></head><body>
<form method="post" action="/delete" data-confirm="Scripts that call with this key will get 401." data-confirm-title="Revoke key k?">
<button id="go" type="submit" class="danger">Revoke key k</button></form>
<script>` + fluent.Script() + `</script></body></html>`))
	})
	mux.HandleFunc("POST /delete", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posted = append(posted, r.FormValue("confirm"))
		mu.Unlock()
		w.Write([]byte("done"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tb.Navigate(srv.URL + "/")
	tb.Wait("", `!!customElements.get("fluent-dialog") && !!customElements.get("fluent-button")`, "the components")
	brand := `getComputedStyle(document.documentElement).getPropertyValue("--colorNeutralBackground1").trim()`
	if got := tb.Str("", brand); got != "#ffffff" {
		t.Errorf("light theme background %q, want #ffffff", got)
	}
	tb.Must("", `document.documentElement.setAttribute("data-theme", "dark"), 0`)
	tb.Wait("", brand+` === "#292929"`, "Teams' dark theme after data-theme=dark")

	tb.Must("", `document.getElementById("go").click(), 0`)
	tb.Wait("", `(() => { const d = document.querySelector("fluent-dialog"); return !!d && d.shadowRoot.querySelector("dialog").open })()`, "the dialog")
	if got := tb.Str("", `document.getElementById("confirm-text").textContent`); got != "Scripts that call with this key will get 401." {
		t.Errorf("dialog says %q", got)
	}
	mu.Lock()
	n := len(posted)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the form posted before it was confirmed: %v", posted)
	}
	tb.Must("", `document.getElementById("confirm-ok").click(), 0`)
	tb.Wait("", `document.body.textContent.trim() === "done"`, "the post after confirming")
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 || posted[0] != "yes" {
		t.Errorf("posted %q, want one post with confirm=yes", posted)
	}
	for _, l := range tb.Log() {
		if strings.Contains(l, "Content Security Policy") || strings.Contains(l, "exception") || strings.Contains(l, "Trusted Type") {
			t.Errorf("browser: %s", l)
		}
	}
}
