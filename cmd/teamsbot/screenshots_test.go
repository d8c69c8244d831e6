package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// screenshotsDir holds README's pictures, from this package's folder.
const screenshotsDir = "../../docs/screenshots"

// updateScreenshots is the variable that has TestScreenshots write them.
const updateScreenshots = "TEAMSBOT_UPDATE_SCREENSHOTS"

// Each picture is a 1400×1000 window, large enough for the console's
// side navigation and a table beside it, small enough to read in README.
const shotWidth, shotHeight = 1400, 1000

// TestScreenshots takes README's pictures of the whole service as a
// newcomer sees it after ./run.sh: local mode, the playground, the local
// sign-in, headless Chromium in its light theme. The tenant admin asks
// /sales_report {} in the playground (picture: the answer and its view
// inline), opens the view on its own page (picture), where a call of a
// tool the view may not use is refused; Megan asks two more questions;
// then the admin console's overview and audit log show those figures and
// records (a picture each). Last, another person asks /request_refund {}
// in the playground (picture: the demo server's question card, waiting for
// their answer), and cancels it. Each picture is checked to be a PNG of the
// window, taken once its page showed what it should. With
// TEAMSBOT_UPDATE_SCREENSHOTS=1 it writes them to docs/screenshots/:
//
//	TEAMSBOT_UPDATE_SCREENSHOTS=1 go test ./cmd/teamsbot -run TestScreenshots
//
// Without it, the committed pictures must exist.
func TestScreenshots(t *testing.T) {
	testenv.NeedChromium(t)
	base, _, _ := startService(t, map[string]string{"TICKETIQ_ADDR": "127.0.0.1:" + freeLoopbackPort(t)})
	admin := signin.LocalAdmin()
	people := signin.LocalPeople()
	adminAt := slices.IndexFunc(people, func(p signin.LocalPerson) bool { return p.UserID == admin.UserID })

	browser := testenv.Chromium(t, chromedp.Flag("hide-scrollbars", true), chromedp.Flag("font-render-hinting", "none"))
	tab := testenv.NewTab(t, browser, nil)
	if err := chromedp.Do(tab.Ctx, chromedp.EmulateViewport(shotWidth, shotHeight)); err != nil {
		t.Fatalf("viewport: %v", err)
	}
	if _, err := chromedp.Call(tab.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}, {Name: "prefers-reduced-motion", Value: "reduce"}},
	}); err != nil {
		t.Fatalf("light theme: %v", err)
	}
	// An admin's zone other than the service's UTC, which the audit log
	// shows its times in.
	const zone = "Europe/London"
	if _, err := chromedp.Call(tab.Ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: zone}); err != nil {
		t.Fatalf("time zone: %v", err)
	}
	const main, view = "", "/sandbox/views/"
	shots := map[string][]byte{}

	// The playground, as the tenant admin.
	tab.Navigate(base + "/playground")
	tab.Wait(main, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	tab.Must(main, `(() => { const p = document.getElementById("preset"); p.value = `+strconv.Quote(strconv.Itoa(adminAt))+`; p.dispatchEvent(new Event("change")); return true; })()`)
	tab.Wait(main, `document.getElementById("user-name").value === `+strconv.Quote(admin.Name)+` && document.getElementById("conversation-id").textContent.startsWith("a:")`, "the admin's personal chat")
	tab.Must(main, `(() => { document.getElementById("text").value = "/sales_report {}"; document.getElementById("send").click(); return true; })()`)
	tab.Wait(main, `[...document.querySelectorAll(".msg.bot .ac-card")].some(c => c.innerText.includes("Sales report"))`, "the answer card")
	tab.Wait(view, `document.body.dataset.state === "ready"`, "the sales view inline")
	// The frame has its height from the view's size-changed.
	tab.Wait(main, `document.querySelector(".inline-view iframe.proxy").style.height !== ""`, "the view's height")
	tab.Must(main, `(() => { document.activeElement.blur(); document.getElementById("transcript").scrollTop = 0; return true; })()`)
	shots["playground"] = capture(t, tab)
	// The view's own Refresh button, an app-only tool through the bridge.
	tab.Must(view, `document.getElementById("refresh").click(); true`)
	tab.Wait(view, `document.body.dataset.revision === "1" && document.body.dataset.state === "ready"`, "the refreshed figures")
	link := tab.Str(main, `document.querySelector(".inline-view .view-head a").href`)

	// The view on its own page, opened from the Open link.
	tab.Navigate(link)
	tab.Wait(main, `location.href === `+strconv.Quote(link)+` && performance.getEntriesByType("navigation")[0].responseStatus === 200`, "the view page")
	tab.Wait(view, `document.body.dataset.state === "ready"`, "the sales view on its page")
	tab.Must(main, `(() => { document.activeElement.blur(); scrollTo(0, 0); return true; })()`)
	shots["view"] = capture(t, tab)
	// A tool the view may not call (the model's only): refused, and
	// recorded for the admin.
	id := link[strings.LastIndex(link, "/")+1:]
	if got := tab.Must(main, `fetch("/api/mcp-apps/`+id+`/call", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({name: "lookup_customer", arguments: {customer: "C-1001"}})}).then(r => r.status)`); got == float64(200) {
		t.Errorf("the view's call of lookup_customer was answered 200, want it refused")
	}

	// Another person of the tenant asks too: a customer (a tool without
	// a view) and the feedback form (another view).
	for _, q := range []string{`/lookup_customer {"customer": "Contoso"}`, `/feedback_form {}`} {
		askInPlayground(t, base, people[0], q)
	}

	// The console's overview: the totals, the charts and their tables.
	tab.Navigate(base + "/admin/overview")
	tab.Wait(main, `location.pathname === "/admin/overview" && performance.getEntriesByType("navigation")[0].responseStatus === 200`, "the overview")
	tab.Wait(main, `document.querySelectorAll("canvas[data-chart]:not([hidden])").length === document.querySelectorAll("canvas[data-chart]").length`, "every chart drawn")
	tab.Must(main, `(() => { document.activeElement.blur(); scrollTo(0, 0); return true; })()`)
	overview := tab.Str(main, `document.body.innerText`)
	for _, want := range []string{"sales_report", "refresh_sales", "lookup_customer", "Tool call the agent does not offer"} {
		if !strings.Contains(overview, want) {
			t.Errorf("the overview does not show %q:\n%s", want, overview)
		}
	}
	if n := tab.Must(main, `document.querySelectorAll("canvas[data-chart]").length`); n != float64(5) {
		t.Errorf("the overview draws %v charts, want 5", n)
	}
	shots["overview"] = capture(t, tab)

	// The audit log: the records of all of it, newest first.
	tab.Navigate(base + "/admin/audit")
	tab.Wait(main, `location.pathname === "/admin/audit" && performance.getEntriesByType("navigation")[0].responseStatus === 200`, "the audit log")
	tab.Wait(main, `document.querySelector("[data-zone]").textContent === `+strconv.Quote(zone)+` && !document.querySelector("table.audit time").textContent.endsWith(" UTC")`, "the times in the admin's zone")
	tab.Must(main, `(() => { document.activeElement.blur(); scrollTo(0, 0); return true; })()`)
	rows := tab.Must(main, `[...document.querySelectorAll("table.audit tbody tr")].map(r => r.innerText)`).([]any)
	var refused, made bool
	for _, r := range rows {
		s := r.(string)
		refused = refused || (strings.Contains(s, "lookup_customer") && strings.Contains(s, "refused"))
		made = made || strings.Contains(s, "A view of sales_report of demo was made.")
	}
	if len(rows) < 8 || !refused || !made {
		t.Errorf("the audit log shows %d rows (refused call %v, view made %v):\n%v", len(rows), refused, made, rows)
	}
	shots["audit"] = capture(t, tab)

	// A tool that asks: another person of the tenant asks for a refund,
	// and the demo server's question card waits for their answer.
	asker := people[1]
	tab.Navigate(base + "/playground")
	tab.Wait(main, `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	tab.Must(main, `(() => { const p = document.getElementById("preset"); p.value = "1"; p.dispatchEvent(new Event("change")); return true; })()`)
	tab.Wait(main, `document.getElementById("user-name").value === `+strconv.Quote(asker.Name)+` && document.getElementById("conversation-id").textContent.startsWith("a:")`, "the asker's personal chat")
	tab.Must(main, `(() => { document.getElementById("text").value = "/request_refund {}"; document.getElementById("send").click(); return true; })()`)
	question := `[...document.querySelectorAll(".msg.bot")].find(m => m.innerText.includes("demo asks for your input"))`
	tab.Wait(main, question+` !== undefined && `+question+`.innerText.includes("Refund order A-1042: which refund should I make?")`, "the question card")
	// The card's end in view, and its top when it is taller than the
	// transcript.
	tab.Must(main, `(() => { document.activeElement.blur(); const q = `+question+`; const tr = document.getElementById("transcript");
		tr.scrollTop = tr.scrollHeight;
		if (q.getBoundingClientRect().top < tr.getBoundingClientRect().top) { q.scrollIntoView({block: "start"}); }
		return true; })()`)
	asked := tab.Str(main, question+`.innerText`)
	for _, want := range []string{"Amount (EUR)", "Reason (required)", "I confirm this refund (required)", "Submit", "Decline", "Cancel"} {
		if !strings.Contains(asked, want) {
			t.Errorf("the question card does not show %q:\n%s", want, asked)
		}
	}
	shots["question"] = capture(t, tab)
	// Cancelled, so that the run ends now.
	tab.Must(main, `[...`+question+`.querySelectorAll("button.ac-pushButton")].find(b => b.title === "Cancel").click(), true`)
	tab.Wait(main, `[...document.querySelectorAll(".msg.bot")].some(m => m.innerText.includes("No refund was made for order A-1042"))`, "the answer to the cancelled question")

	write := os.Getenv(updateScreenshots) != ""
	for name, b := range shots {
		file := filepath.Join(screenshotsDir, name+".png")
		if !write {
			if _, err := os.Stat(file); err != nil {
				t.Errorf("%s is missing: run %s=1 go test ./cmd/teamsbot -run TestScreenshots", file, updateScreenshots)
			}
			continue
		}
		if err := os.MkdirAll(screenshotsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", file, len(b))
	}
}

// capture takes a picture of the tab's window and checks that it is one:
// a PNG of the window's size with more in it than a blank or error page,
// of pages whose scripts threw nothing.
func capture(t *testing.T, tab *testenv.Tab) []byte {
	t.Helper()
	for _, l := range tab.Log() {
		if strings.HasPrefix(l, "exception:") {
			t.Errorf("a page's script failed: %s", l)
		}
	}
	b, err := chromedp.Run(tab.Ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if s := img.Bounds().Size(); s.X != shotWidth || s.Y != shotHeight {
		t.Errorf("the screenshot is %dx%d, want %dx%d", s.X, s.Y, shotWidth, shotHeight)
	}
	if len(b) < 30_000 {
		t.Errorf("the screenshot is %d bytes, too few for a page with text, cards and charts", len(b))
	}
	return b
}

// askInPlayground sends text in the playground's personal chat of p, over
// its page's API, and waits for its answer: the answers there so far, and
// one more.
func askInPlayground(t *testing.T, base string, p signin.LocalPerson, text string) {
	t.Helper()
	who := url.Values{"tenant": {signin.LocalTenant}, "user": {p.UserID}, "name": {p.Name}, "kind": {"personal"}}
	answers := func() int {
		resp, err := http.Get(base + "/playground/api/state?" + who.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s struct {
			Items []struct {
				From        string            `json:"from"`
				Streaming   bool              `json:"streaming"`
				Attachments []json.RawMessage `json:"attachments"`
			} `json:"items"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			t.Fatalf("playground state: %v", err)
		}
		n := 0
		for _, it := range s.Items {
			if it.From == "bot" && !it.Streaming && len(it.Attachments) > 0 {
				n++
			}
		}
		return n
	}
	before := answers()
	msg := map[string]string{"text": text}
	for k := range who {
		msg[k] = who.Get(k)
	}
	body, _ := json.Marshal(msg)
	resp, err := http.Post(base+"/playground/api/send", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("playground send %q: %d", text, resp.StatusCode)
	}
	waitFor(t, "the answer to "+text, func() bool { return answers() > before })
}
