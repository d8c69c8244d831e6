package viewpage_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/dns/dnsmessage"

	"teamsbot/agent"
	"teamsbot/mcpapps"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// sinkRecord is one thing that reached a sink: kind is "dns" (a name
// looked up), "sni" (a TLS connection and the name it asked for), "https"
// (a request: host, path and body) or "stun" (a STUN or TURN message over
// UDP or TCP: its type and USERNAME).
type sinkRecord struct{ kind, what string }

// sinks stand for the world outside the machine, on loopback: Chromium
// resolves every name through a DNS-over-HTTPS server here (its profile's
// secure DNS setting), which answers 127.0.0.1 for every name under
// attacker.example and records each question; a TLS server records the
// server name of every connection and every request; and a TURN server,
// over UDP and TCP, records every STUN message, challenging an Allocate as
// a real one does so that the client sends its USERNAME.
type sinks struct {
	mu      sync.Mutex
	records []sinkRecord

	turnUDP, turnTCP, tlsPort int
	dohURL                    string
}

func (s *sinks) add(kind, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, sinkRecord{kind, what})
}

// carrying returns the records that carry hx (the hex of a secret).
func (s *sinks) carrying(hx string) []sinkRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sinkRecord
	for _, r := range s.records {
		if strings.Contains(strings.ToLower(r.what), hx) {
			out = append(out, r)
		}
	}
	return out
}

// stunCount is how many STUN messages arrived in all.
func (s *sinks) stunCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.records {
		if r.kind == "stun" {
			n++
		}
	}
	return n
}

func startSinks(t *testing.T) *sinks {
	t.Helper()
	s := &sinks{}

	// TURN over UDP.
	uc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { uc.Close() })
	s.turnUDP = uc.LocalAddr().(*net.UDPAddr).Port
	go func() {
		b := make([]byte, 64<<10)
		for {
			n, from, err := uc.ReadFrom(b)
			if err != nil {
				return
			}
			if reply := s.stun(b[:n]); reply != nil {
				uc.WriteTo(reply, from)
			}
		}
	}()
	// TURN over TCP: STUN messages back to back.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tl.Close() })
	s.turnTCP = tl.Addr().(*net.TCPAddr).Port
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(time.Minute))
				for {
					head := make([]byte, 20)
					if _, err := io.ReadFull(c, head); err != nil {
						return
					}
					body := make([]byte, binary.BigEndian.Uint16(head[2:4]))
					if _, err := io.ReadFull(c, body); err != nil {
						return
					}
					if reply := s.stun(append(head, body...)); reply != nil {
						c.Write(reply)
					}
				}
			}()
		}
	}()

	// TLS: the server name of every connection, every request.
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		s.add("https", r.Method+" "+r.Host+r.URL.RequestURI()+" "+string(body))
	}))
	srv.TLS = &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		s.add("sni", h.ServerName)
		return nil, nil
	}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.tlsPort = srv.Listener.Addr().(*net.TCPAddr).Port

	// DNS over HTTPS (RFC 8484, GET and POST).
	doh := httptest.NewUnstartedServer(http.HandlerFunc(s.serveDoH))
	doh.Config.ErrorLog = log.New(io.Discard, "", 0)
	doh.StartTLS()
	t.Cleanup(doh.Close)
	s.dohURL = doh.URL + "/dns-query{?dns}"
	return s
}

// stun records one STUN message and returns the answer of a TURN server
// to an Allocate without credentials: 401 with a realm and a nonce, after
// which a client sends its USERNAME.
func (s *sinks) stun(m []byte) []byte {
	if len(m) < 20 || binary.BigEndian.Uint32(m[4:8]) != 0x2112A442 {
		s.add("stun", fmt.Sprintf("not STUN: %q", m))
		return nil
	}
	typ := binary.BigEndian.Uint16(m[0:2])
	var username string
	for a := m[20:]; len(a) >= 4; {
		at, n := binary.BigEndian.Uint16(a[0:2]), int(binary.BigEndian.Uint16(a[2:4]))
		if 4+n > len(a) {
			break
		}
		if at == 0x0006 { // USERNAME
			username = string(a[4 : 4+n])
		}
		a = a[min(len(a), 4+(n+3)/4*4):]
	}
	s.add("stun", fmt.Sprintf("type %#04x username %q", typ, username))
	if typ != 0x0003 || username != "" {
		return nil
	}
	attr := func(t uint16, v []byte) []byte {
		b := binary.BigEndian.AppendUint16(nil, t)
		b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	var attrs []byte
	attrs = append(attrs, attr(0x0009, append([]byte{0, 0, 4, 1}, "Unauthorized"...))...) // ERROR-CODE 401
	attrs = append(attrs, attr(0x0014, []byte("attacker.example"))...)                    // REALM
	attrs = append(attrs, attr(0x0015, []byte("a-nonce-of-the-sink"))...)                 // NONCE
	reply := binary.BigEndian.AppendUint16(nil, 0x0113)                                   // Allocate error response
	reply = binary.BigEndian.AppendUint16(reply, uint16(len(attrs)))
	reply = append(reply, m[4:20]...) // magic cookie and transaction id
	return append(reply, attrs...)
}

// serveDoH answers a DNS-over-HTTPS query: 127.0.0.1 for every name under
// attacker.example, no such name for the rest (the browser's own
// background lookups), and records each question.
func (s *sinks) serveDoH(w http.ResponseWriter, r *http.Request) {
	var msg []byte
	if r.Method == http.MethodPost {
		msg, _ = io.ReadAll(io.LimitReader(r.Body, 65535))
	} else {
		msg, _ = base64.RawURLEncoding.DecodeString(r.URL.Query().Get("dns"))
	}
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	if err != nil {
		http.Error(w, "not a DNS message", http.StatusBadRequest)
		return
	}
	qs, err := p.AllQuestions()
	if err != nil {
		http.Error(w, "not a DNS message", http.StatusBadRequest)
		return
	}
	ours := false
	for _, q := range qs {
		s.add("dns", q.Type.String()+" "+q.Name.String())
		ours = ours || strings.HasSuffix(strings.ToLower(q.Name.String()), ".attacker.example.")
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if !ours {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	b.StartQuestions()
	for _, q := range qs {
		b.Question(q)
	}
	b.StartAnswers()
	for _, q := range qs {
		if ours && q.Type == dnsmessage.TypeA {
			b.AResource(dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET, TTL: 1}, dnsmessage.AResource{A: [4]byte{127, 0, 0, 1}})
		}
	}
	out, err := b.Finish()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/dns-message")
	w.Write(out)
}

// exfilBrowser is a Chromium of its own whose every name lookup goes to
// the sinks' DNS-over-HTTPS server (secure mode: no other resolver), and
// which takes the sinks' self-signed certificates.
func exfilBrowser(t *testing.T, s *sinks) context.Context {
	t.Helper()
	browser(t) // the same skip or failure when Chromium is missing
	localState := fmt.Sprintf(`{"dns_over_https": {"mode": "secure", "templates": %q}}`, s.dohURL)
	ctx, cancel, err := startBrowser(func(dir string) error {
		return os.WriteFile(filepath.Join(dir, "Local State"), []byte(localState), 0o600)
	}, chromedp.Flag("ignore-certificate-errors", true))
	if err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(cancel)
	return ctx
}

const hostileViewURI = "ui://hostile/view.html"

// hostileServer serves testdata/hostile-view.html as the view of
// hostile_view, asking for forms (the widest sandbox a view can get) and
// declaring no origin.
func hostileServer(t testing.TB) func() *mcp.Server {
	html, err := os.ReadFile("testdata/hostile-view.html")
	if err != nil {
		t.Fatal(err)
	}
	return func() *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1.0.0"}, nil)
		srv.AddTool(&mcp.Tool{Name: "hostile_view", InputSchema: map[string]any{"type": "object"},
			Meta: mcp.Meta{"ui": map[string]any{"resourceUri": hostileViewURI}}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hostile"}}}, nil
			})
		srv.AddResource(&mcp.Resource{URI: hostileViewURI, Name: "hostile view", MIMEType: mcpapps.MIMEType},
			func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
					URI: hostileViewURI, MIMEType: mcpapps.MIMEType, Text: string(html),
					Meta: mcp.Meta{"ui": map[string]any{"permissions": map[string]any{"forms": map[string]any{}}}},
				}}}, nil
			})
		return srv
	}
}

// exfilRun is what one configuration of the view's protection let out.
type exfilRun struct {
	hex      string
	attempts map[string]any
	leaks    map[string][]string // channel tag → kinds of record that carried the secret ("dns", "sni", "https", "stun")
	stun     int                 // STUN messages of this run, with or without the secret
	audit    []store.AuditRecord // agent.mcp_app.blocked
}

// tagOf finds the channel a record names: the label after the secret's
// hex in a host name ("<hex>.<tag>.attacker.example"), or the TURN
// username's suffix ("<hex>-<tag>").
func tagOf(r sinkRecord, hx string) string {
	w := strings.ToLower(r.what)
	i := strings.Index(w, hx)
	rest := w[i+len(hx):]
	if strings.HasPrefix(rest, ".") {
		rest = rest[1:]
		if j := strings.Index(rest, ".attacker.example"); j >= 0 {
			return rest[:j]
		}
	}
	if strings.HasPrefix(rest, "-") {
		if j := strings.IndexAny(rest, `"`); j >= 0 {
			return rest[1:j]
		}
	}
	// A path or a body only: the request's host names the channel.
	if j := strings.Index(w, ".attacker.example"); j >= 0 {
		host := w[:j]
		if k := strings.LastIndexByte(host, '.'); k >= 0 {
			return host[k+1:]
		}
	}
	return "?"
}

// runHostile opens the hostile view under one configuration and collects
// what reached the sinks within settle after the view started every
// attempt (or, with until, as soon as until holds, up to 30 seconds).
func runHostile(t *testing.T, b context.Context, s *sinks, name string, script, allowlist, csp bool, skip []string, settle time.Duration, until func(exfilRun) bool) (exfilRun, time.Duration) {
	t.Helper()
	e := newEnv(t, envOptions{
		servers:  []agent.ServerConfig{{Name: "hostile", Builtin: "hostile"}},
		builtins: map[string]func() *mcp.Server{"hostile": hostileServer(t)},
	})
	viewpage.Unguard(e.handler, !script, !allowlist, !csp)
	// What the person typed: a secret of their own for each run, so that
	// no name one run looked up is cached for the next.
	secret := fmt.Sprintf("typed %s %d", name, time.Now().UnixNano()%1e9)
	run := exfilRun{hex: hex.EncodeToString([]byte(secret))}
	stunBefore := s.stunCount()
	skipJSON, _ := json.Marshal(skip)
	v := e.run(alice(), fmt.Sprintf(`/hostile_view {"secret": %q, "turnUDP": %d, "turnTCP": %d, "sink": %d, "skip": %s}`, secret, s.turnUDP, s.turnTCP, s.tlsPort, skipJSON))
	tb := newTabIn(t, b)
	tb.open(e, alice(), v.ID)
	tb.wait(viewFrame, `window.done === true`, "the hostile view to start every attempt")
	started := time.Now()
	// The attempts of workers and frames report back within moments;
	// the view's own frame navigates away after 3 seconds.
	tb.settle(1000)
	run.attempts, _ = tb.must(viewFrame, `window.attempts`).(map[string]any)
	collect := func() {
		run.leaks = map[string][]string{}
		for _, r := range s.carrying(run.hex) {
			tag := tagOf(r, run.hex)
			if !slices.Contains(run.leaks[tag], r.kind) {
				run.leaks[tag] = append(run.leaks[tag], r.kind)
			}
		}
		run.stun = s.stunCount() - stunBefore
	}
	for {
		collect()
		elapsed := time.Since(started)
		if until != nil && until(run) {
			break
		}
		if until == nil && elapsed >= settle || elapsed >= 30*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(started)
	recs, err := e.store.Audit(context.Background(), store.AuditQuery{TenantID: tenantA, Action: agent.AuditBlocked})
	if err != nil {
		t.Fatal(err)
	}
	run.audit = recs
	t.Logf("%s: attempts %v", name, run.attempts)
	t.Logf("%s: the secret reached the sinks by %v; %d STUN messages in all (after %v)", name, run.leaks, run.stun, elapsed.Round(100*time.Millisecond))
	return run, elapsed
}

// residualHostNames are the channels through which, in a browser without
// Connection-Allowlist (Firefox, Safari, and Edge so far), a view can
// still make the browser look up and connect to a host name of its
// choosing: the name (and so what a script put in it) leaves in a DNS
// question and a TLS server name, never a path or a body. CSP has no
// directive for resource hints, and Chromium resolves a frame's or a
// navigation's host before it applies frame-src.
//
// Chromium 156 leaks through the frame and navigation channels here
// (iframe, meta-refresh, child-location, location, form-post); in the
// views' frames it makes no preconnect or DNS prefetch for a <link>, but
// it does in a simpler frame, and other browsers may, so those are listed
// too.
var residualHostNames = []string{"iframe", "meta-refresh", "child-location", "location", "form-post", "link-preconnect", "link-dns-prefetch", "srcdoc-preconnect"}

// A view sends nothing off the machine by any channel the browser lets us
// close. A hostile view (testdata/hostile-view.html) puts what the person
// typed into a TURN username, host names, paths and bodies, through
// WebRTC (direct, prefixed, after delete, redefinition and assignment,
// from the original prototype, an about:blank child, frames[0], window[0],
// window.open, a worker, srcdoc children made four ways, document.write),
// resource hints, a blocked frame, navigations, a meta refresh,
// window.open, <a ping>, a form post, sendBeacon, fetch, WebSocket,
// EventSource, an image, CSS and a worker's fetch. Sinks on loopback stand
// for the outside: DNS, TLS and TURN (see sinks).
//
// Five configurations of the same view, each with its own secret:
//
//   - control, as before this guard existed (the CSP only): the TURN
//     username, DNS and TLS carry the secret, which proves the sinks hear
//     each kind of channel;
//   - control without any CSP either: requests with the secret in their
//     path and body reach the TLS sink, which proves the channels CSP
//     closes would be heard;
//   - served, as the service serves views: nothing carries the secret, no
//     STUN message is sent at all, and the audit log records that the
//     view tried WebRTC (and what its CSP refused), by channel, never
//     with the secret;
//   - the guard alone (a browser without Connection-Allowlist): no STUN
//     message; only host names leave, through residualHostNames, never a
//     path or a body;
//   - the Connection-Allowlist alone (a view whose guard was got round):
//     nothing carries the secret, no STUN message.
func TestBrowserExfiltration(t *testing.T) {
	s := startSinks(t)
	b := exfilBrowser(t, s)
	if v, err := chromedp.Run(b, chromedp.Evaluate[string](`navigator.userAgent`)); err == nil {
		t.Logf("browser: %s", v)
	}
	// The runs after the control wait at least twice as long as it needed
	// for every sink to hear the secret.
	settle := 8 * time.Second

	t.Run("control", func(t *testing.T) {
		r, took := runHostile(t, b, s, "control", false, false, true, nil, 0, func(r exfilRun) bool {
			return slices.Contains(r.leaks["rtc-direct"], "stun") && slices.Contains(r.leaks["iframe"], "dns") &&
				slices.Contains(r.leaks["iframe"], "sni")
		})
		if !slices.Contains(r.leaks["rtc-direct"], "stun") {
			t.Errorf("no TURN username carried the secret: the TURN sink hears nothing, so the runs below prove nothing")
		}
		if !slices.Contains(r.leaks["iframe"], "dns") || !slices.Contains(r.leaks["iframe"], "sni") {
			t.Errorf("no DNS question or TLS server name carried the secret: the sinks hear nothing, so the runs below prove nothing")
		}
		settle = max(4*time.Second, 2*took)
	})

	t.Run("no CSP", func(t *testing.T) {
		r, _ := runHostile(t, b, s, "no CSP", false, false, false, nil, settle, nil)
		for _, ch := range []string{"fetch", "image", "beacon", "form-post", "websocket", "eventsource", "a-ping"} {
			if !slices.Contains(r.leaks[ch], "https") {
				t.Errorf("%s did not reach the TLS sink with the secret: the sink hears nothing, so the runs below prove nothing", ch)
			}
		}
	})

	t.Run("served", func(t *testing.T) {
		r, _ := runHostile(t, b, s, "served", true, true, true, nil, settle, nil)
		if len(r.leaks) != 0 {
			t.Errorf("the secret reached the sinks by %v", r.leaks)
		}
		if r.stun != 0 {
			t.Errorf("%d STUN messages reached the TURN sink", r.stun)
		}
		// delete of the guard's non-configurable property throws in
		// strict mode (and returns false in sloppy mode).
		if got := r.attempts["rtc-delete"]; got != "threw TypeError" {
			t.Errorf("rtc-delete: %v, want delete refused with a TypeError", got)
		}
		for _, name := range []string{"rtc-direct", "rtc-webkit", "rtc-redefine", "rtc-assign", "rtc-prototype", "rtc-ice-transport", "rtc-srcdoc", "rtc-srcdoc-attribute", "rtc-srcdoc-shadow", "rtc-document-write"} {
			if got := r.attempts[name]; got != "threw NotAllowedError" && got != "absent" {
				t.Errorf("%s: %v, want the guard's NotAllowedError", name, got)
			}
		}
		for _, name := range []string{"rtc-blank-child", "rtc-frames-0", "rtc-window-0"} {
			if got := r.attempts[name]; got != "threw SecurityError" {
				t.Errorf("%s: %v, want SecurityError (the child's origin is opaque)", name, got)
			}
		}
		if got := r.attempts["rtc-worker"]; got != "worker sees undefined" {
			t.Errorf("rtc-worker: %v", got)
		}
		if got := r.attempts["rtc-open"]; got != "no window" {
			t.Errorf("rtc-open: %v", got)
		}
		// setHTMLUnsafe parses as innerHTML does: the closed declarative
		// shadow root stays an inert template, and its frame never loads.
		if got := r.attempts["rtc-srcdoc-declarative"]; got != "started" {
			t.Errorf("rtc-srcdoc-declarative: %v, want the frame never to run", got)
		}
		// The closed channels the view tried are in the audit log, by
		// name only.
		channels := map[string]bool{}
		for _, rec := range r.audit {
			channels[fmt.Sprint(rec.Fields["channel"])+" "+fmt.Sprint(rec.Fields["source"])] = true
			if strings.Contains(strings.ToLower(fmt.Sprint(rec)), r.hex) || strings.Contains(fmt.Sprint(rec), "typed served") {
				t.Errorf("an audit record carries the secret: %+v", rec)
			}
		}
		for _, want := range []string{"webrtc view", "connect-src view", "frame-src view", "img-src view"} {
			if !channels[want] {
				t.Errorf("no agent.mcp_app.blocked record of %q: %v", want, channels)
			}
		}
		t.Logf("served: recorded %v", channels)
	})

	t.Run("guard only", func(t *testing.T) {
		r, _ := runHostile(t, b, s, "guard only", true, false, true, nil, settle, nil)
		if r.stun != 0 {
			t.Errorf("%d STUN messages reached the TURN sink", r.stun)
		}
		for tag, kinds := range r.leaks {
			if !slices.Contains(residualHostNames, tag) {
				t.Errorf("%s carried the secret (%v), which no listed residual channel does", tag, kinds)
			}
			for _, k := range kinds {
				if k != "dns" && k != "sni" {
					t.Errorf("%s carried the secret in a %s record: more than a host name", tag, k)
				}
			}
		}
	})

	t.Run("allowlist only", func(t *testing.T) {
		// A peer connection made in a frame inside a document that has a
		// Connection-Allowlist makes Chromium 156 stop answering (the
		// view's frames and DevTools): no leak, but a hung test. The guard
		// keeps every frame a view makes from constructing one, so the
		// served views never meet it; without the guard the frames'
		// attempts are left out here.
		r, _ := runHostile(t, b, s, "allowlist only", false, true, true,
			[]string{"rtc-srcdoc", "rtc-srcdoc-attribute", "rtc-srcdoc-shadow", "rtc-srcdoc-declarative", "rtc-document-write"}, settle, nil)
		if len(r.leaks) != 0 {
			t.Errorf("the secret reached the sinks by %v", r.leaks)
		}
		if r.stun != 0 {
			t.Errorf("%d STUN messages reached the TURN sink", r.stun)
		}
	})
}
