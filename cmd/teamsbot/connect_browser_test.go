package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"teamsbot/internal/testenv"
	"teamsbot/internal/testenv/fakeauth"
	"teamsbot/mcpauth"
	"teamsbot/signin"
	"teamsbot/store"
)

// TestBrowserConnectInThePlayground is the whole of acting as a person on
// an MCP server, as someone trying the service locally does it, in
// headless Chromium: teamsbot serve in local mode (a process of its own,
// on loopback, with the playground), its configuration file giving the
// agent a server crm reached with auth: person, protected by an
// authorization server on https with a certificate of its own (trusted by
// the service through Go's SSL_CERT_FILE, and by Chromium through
// --ignore-certificate-errors-spki-list). The service is on loopback
// http, so it registers itself dynamically.
//
// Alex asks /crm/whoami {} in the playground; the Connect card appears in
// the transcript, naming him, with its Connect button. Megan, another
// local person, opens the button's link in a browser of her own, signs in
// as herself and reads that this sign-in is for Alex (403). Then Alex's
// Chromium follows the button: the service's Connect page has him sign
// in on its public address (the local sign-in with him selected), sends
// him to the authorization server's consent page, where he presses
// Allow as his account there; the browser comes back to the service's
// callback, which says crm is connected; and the transcript shows the
// answer with the account the server saw, and the Connect card saying
// Connected. The audit log holds the request, the connection and the
// refusal of Megan's visit.
func TestBrowserConnectInThePlayground(t *testing.T) {
	testenv.NeedChromium(t)
	as := fakeauth.StartAuthServer(t)
	rs := fakeauth.StartResourceServer(t, as)

	dir := t.TempDir()
	var certs []byte
	for _, c := range []*x509.Certificate{as.Cert, rs.Cert} {
		certs = append(certs, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	certFile := filepath.Join(dir, "test-servers.pem")
	cfgFile := filepath.Join(dir, "agents.yaml")
	if err := os.WriteFile(certFile, certs, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, []byte("agents:\n  - id: default\n    servers:\n      - name: crm\n        url: "+rs.URL+"\n        auth: person\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The public base URL is left to its default, http://localhost and
	// the listener's port, as ./run.sh leaves it: the port is chosen
	// here so that the two agree.
	data := filepath.Join(dir, "data")
	svc := startReplica(t, "local", map[string]string{
		"TICKETIQ_ADDR":   "127.0.0.1:" + freeLoopbackPort(t),
		"TICKETIQ_DATA":   data,
		"TICKETIQ_CONFIG": cfgFile,
		"SSL_CERT_FILE":   certFile,
	})
	people := signin.LocalPeople()
	megan, alex := people[0], people[1]

	browser := testenv.Chromium(t, chromedp.Flag("ignore-certificate-errors-spki-list", fakeauth.SPKI(as.Cert)))
	tab := testenv.NewTab(t, browser, nil)
	// Where the terminal says the playground is.
	tab.Navigate("http://" + svc.addr + "/playground")
	tab.Wait("", `document.getElementById("conversation-id").textContent.startsWith("a:")`, "the personal chat")
	tab.Must("", `(() => { const p = document.getElementById("preset"); p.value = "1"; p.dispatchEvent(new Event("change")); return true; })()`)
	tab.Wait("", `document.getElementById("user-name").value === `+strconv.Quote(alex.Name)+` && document.getElementById("conversation-id").textContent.startsWith("a:")`, "Alex's personal chat")
	tab.Must("", `(() => { document.getElementById("text").value = "/crm/whoami {}"; document.getElementById("send").click(); return true; })()`)

	connectCard := `[...document.querySelectorAll(".msg.bot .ac-card")].find(c => c.innerText.includes("Connect crm") || c.innerText.includes("Connected to crm"))`
	button := `[...document.querySelectorAll(".msg.bot .ac-card button.ac-pushButton")].find(b => b.textContent === "Connect crm")`
	tab.Wait("", button+` !== undefined`, "the Connect card's button")
	if text := tab.Str("", connectCard+`.innerText`); !strings.Contains(text, alex.Name) {
		t.Errorf("the Connect card does not name whose sign-in it is:\n%s", text)
	}
	// Where the button goes: the address its click opens, noted once
	// instead of opened.
	link := tab.Str("", `(() => { const open = window.open; let u = ""; window.open = (x) => { u = x; return null; }; `+button+`.click(); window.open = open; return u; })()`)
	if !strings.HasPrefix(link, "http://localhost:") || !strings.Contains(link, mcpauth.ConnectPath) {
		t.Fatalf("the Connect button leads to %q, want the service's Connect page on its public address", link)
	}

	// Megan, in a browser of her own, follows Alex's link.
	other := testenv.NewTab(t, browser, nil)
	other.Navigate(link)
	other.Wait("", `location.pathname === "/signin" && document.querySelector('input[name="person"]:checked') !== null`, "the local sign-in for Megan")
	other.Must("", `(() => { document.querySelector('input[name="person"][value=`+strconv.Quote(megan.UserID)+`]').checked = true; document.querySelector('form[action="/signin/local"] button[type="submit"]').click(); return true; })()`)
	other.Wait("", `location.pathname.startsWith("/mcp-auth/connect/") && document.body.innerText.includes("This sign-in is for")`, "the Connect page refusing Megan")
	if text := other.Str("", `document.body.innerText`); !strings.Contains(text, "This sign-in is for "+alex.Name) {
		t.Errorf("Megan reads:\n%s", text)
	}
	if status := other.Must("", `performance.getEntriesByType("navigation")[0].responseStatus`); status != float64(403) {
		t.Errorf("the Connect page answered Megan %v, want 403", status)
	}

	// Alex follows the button: it opens in a new tab of his browser.
	popups := chromedp.WaitNewTarget(tab.Ctx, func(info *target.Info) bool { return info.Type == "page" })
	tab.Must("", button+`.click(); true`)
	var popup *openedTab
	select {
	case id := <-popups:
		popup = attach(t, tab.Ctx, id)
	case <-time.After(20 * time.Second): // only stops a hung test
		t.Fatal("the Connect button opened no tab")
	}
	// The service's public address is another origin than the one the
	// playground was opened at: the local sign-in there has Alex, whose
	// request it is, selected.
	popup.wait(`location.pathname === "/signin" && document.querySelector('input[name="person"]:checked') !== null`, "the local sign-in on the public address")
	if got := popup.str(`document.querySelector('input[name="person"]:checked').value`); got != alex.UserID {
		t.Errorf("the sign-in has %q selected, want %s, whose Connect link it is", got, alex.Name)
	}
	popup.must(`(() => { document.querySelector('input[name="person"][value=` + strconv.Quote(alex.UserID) + `]').checked = true; document.querySelector('form[action="/signin/local"] button[type="submit"]').click(); return true; })()`)
	popup.wait(`location.origin === `+strconv.Quote(as.URL)+` && document.querySelector("#allow") !== null`, "the authorization server's consent page")
	if text := popup.str(`document.body.innerText`); !strings.Contains(text, "Sign in to") {
		t.Errorf("the consent page says %q", text)
	}
	popup.must(`(() => { document.querySelector("#user").value = ` + strconv.Quote(fakeauth.Bob) + `; document.querySelector("#allow").click(); return true; })()`)
	popup.wait(`location.pathname === `+strconv.Quote(mcpauth.CallbackPath)+` && document.body.innerText.includes("crm is connected")`, "the callback page saying crm is connected")

	// The run goes on: the answer shows the account the server saw, and
	// the card says Connected, with no button left.
	// (Cards put a zero-width space before the @ of an address, which
	// Teams would otherwise make a link of: a reader sees none.)
	tab.Wait("", `[...document.querySelectorAll(".msg.bot .ac-card")].some(c => c.innerText.replaceAll("\u200b", "").includes(`+strconv.Quote(fakeauth.Bob)+`))`, "the answer with the server's account")
	tab.Wait("", connectCard+`.innerText.includes("Connected to crm")`, "the Connect card updated to Connected")
	if button := tab.Must("", button+` === undefined`); button != true {
		t.Errorf("the Connect card still has its button after connecting")
	}

	// What an admin finds in the audit log, once the service has stopped
	// and let go of its store.
	svc.stop()
	st, err := store.Open(context.Background(), filepath.Join(data, "teamsbot.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	count := func(action, actor string) int {
		recs, err := st.Audit(context.Background(), store.AuditQuery{TenantID: signin.LocalTenant, Action: action})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if r.Actor == actor {
				n++
			}
		}
		return n
	}
	if count(mcpauth.ActionAsked, alex.UserID) != 1 || count(mcpauth.ActionConnected, alex.UserID) != 1 || count(mcpauth.ActionRefused, megan.UserID) != 1 {
		t.Errorf("audit: asked %d, connected %d (want 1 each, by Alex), refused %d (want 1, Megan's visit)",
			count(mcpauth.ActionAsked, alex.UserID), count(mcpauth.ActionConnected, alex.UserID), count(mcpauth.ActionRefused, megan.UserID))
	}
}

// freeLoopbackPort returns a TCP port that was free on 127.0.0.1 a moment
// ago.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// openedTab is a tab Chromium opened by itself (a link with
// target=_blank), attached to: scripts run in its main frame. What its
// console says is printed when the test fails.
type openedTab struct {
	t   *testing.T
	ctx context.Context
	mu  sync.Mutex
	log []string
}

// attach attaches to the tab id that the tab of ctx opened.
func attach(t *testing.T, ctx context.Context, id target.ID) *openedTab {
	t.Helper()
	o := &openedTab{t: t}
	var cancel context.CancelFunc
	o.ctx, cancel = chromedp.NewContext(ctx, chromedp.WithTargetID(id), chromedp.WithListener(func(ev any) {
		if e, ok := ev.(*cdplog.EventEntryAdded); ok {
			o.mu.Lock()
			o.log = append(o.log, string(e.Entry.Level)+": "+e.Entry.Text)
			o.mu.Unlock()
		}
	}))
	t.Cleanup(cancel)
	if _, err := chromedp.Call(o.ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("attach to the new tab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			o.mu.Lock()
			defer o.mu.Unlock()
			t.Logf("the new tab's console:\n%s", strings.Join(o.log, "\n"))
		}
	})
	return o
}

func (p *openedTab) eval(expr string) (any, error) {
	return chromedp.Run(p.ctx, chromedp.Evaluate[any](expr, chromedp.EvalAwaitPromise))
}

func (p *openedTab) must(expr string) {
	p.t.Helper()
	if _, err := p.eval(expr); err != nil {
		p.t.Fatalf("%q in the new tab: %v", expr, err)
	}
}

func (p *openedTab) str(expr string) string {
	p.t.Helper()
	v, err := p.eval(expr)
	s, ok := v.(string)
	if err != nil || !ok {
		p.t.Fatalf("%q in the new tab: %v %v", expr, v, err)
	}
	return s
}

// wait polls expr until it is true; the deadline only stops a hung test.
func (p *openedTab) wait(expr, what string) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := p.eval(expr)
		if err == nil && v == true {
			return
		}
		if time.Now().After(deadline) {
			text, _ := p.eval(`location.href + "\n" + (document.body ? document.body.innerText.slice(0, 2000) : "")`)
			p.t.Fatalf("gave up waiting for %s (%q; last error %v); the tab shows:\n%v", what, expr, err, text)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
