package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
	"teamsbot/internal/testenv"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/triggers"
	"teamsbot/viewpage"
)

// runMainEnv makes the test binary run as teamsbot itself, so that the
// replica tests start real processes they can kill.
const runMainEnv = "TEAMSBOT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// replica is one teamsbot process.
type replica struct {
	name string
	addr string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startReplica starts `teamsbot serve` as a process with env and waits
// until it listens.
func startReplica(t *testing.T, name string, env map[string]string) *replica {
	t.Helper()
	r := &replica{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	logFile, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(os.Args[0], "serve")
	r.cmd.Env = []string{runMainEnv + "=1", "PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		r.cmd.Env = append(r.cmd.Env, k+"="+v)
	}
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.cmd.Wait(); logFile.Close(); close(r.done) }()
	t.Cleanup(func() {
		r.stop()
		if t.Failed() {
			b, _ := os.ReadFile(r.log)
			t.Logf("replica %s log:\n%s", name, b)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if addr := listeningAddr(r.log); addr != "" {
			r.addr = addr
			return r
		}
		select {
		case <-r.done:
			b, _ := os.ReadFile(r.log)
			t.Fatalf("replica %s exited before listening:\n%s", name, b)
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("replica %s did not start", name)
	return nil
}

// listeningAddr reads the address from a log's "listening" line.
func listeningAddr(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "listening" {
			addr, _ := m["addr"].(string)
			return addr
		}
	}
	return ""
}

// stop ends the replica in order (SIGTERM) and waits for it.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
	}
}

// kill ends the replica at once, as a crash or an OOM kill would.
func (r *replica) kill() {
	r.cmd.Process.Kill()
	<-r.done
}

// rrProxy is a round-robin reverse proxy, as a load balancer without
// sticky sessions: each request goes to the next replica in turn. It
// records which replica served each request.
type rrProxy struct {
	targets atomic.Pointer[[]*replica]
	next    atomic.Uint64
	mu      sync.Mutex
	served  map[string][]string // request key -> replica names, in order
}

func startProxy(t *testing.T, ln net.Listener) *rrProxy {
	p := &rrProxy{served: map[string][]string{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			ts := *p.targets.Load()
			target := ts[int(p.next.Add(1)-1)%len(ts)]
			u, _ := url.Parse("http://" + target.addr)
			r.SetURL(u)
			r.Out.Host = r.In.Host // the public host, as a load balancer keeps it
			if key := r.In.Header.Get("X-Test-Key"); key != "" {
				p.mu.Lock()
				p.served[key] = append(p.served[key], target.name)
				p.mu.Unlock()
			}
		},
		ErrorLog: nil,
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

func (p *rrProxy) set(rs ...*replica) { p.targets.Store(&rs) }

func (p *rrProxy) servedBy(key string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.served[key]...)
}

// send posts a request through the proxy, tagged with key.
func send(t *testing.T, c *http.Client, method, u, key string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test-Key", key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// message is a Teams personal-chat message from user (local mode: sent
// from loopback, unsigned).
func message(serviceURL, tenant, id, conv, user, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "message", "id": id, "channelId": "msteams", "serviceUrl": serviceURL, "text": text,
		"from": map[string]any{"id": "29:" + user, "name": "Person " + user, "aadObjectId": user}, "recipient": map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": conv, "conversationType": "personal", "tenantId": tenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": tenant}},
	})
	return b
}

// repliesTo counts the messages posted in reply to an activity.
func repliesTo(conn *testenv.Connector, conv, activityID string) int {
	n := 0
	for _, p := range conn.Messages(conv) {
		if p.ReplyTo == activityID {
			n++
		}
	}
	return n
}

// viewsOf returns the ids of the open views of tenant, by their user.
func viewsOf(t *testing.T, st *store.Store, tenant string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	cursor := ""
	for {
		views, next, err := st.ActiveViews(context.Background(), tenant, store.MaxPageSize, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range views {
			out[v.UserID] = append(out[v.UserID], v.ID)
		}
		if next == "" {
			return out
		}
		cursor = next
	}
}

// TestReplicasOnPostgres runs the service as two processes on one
// PostgreSQL database behind a round-robin proxy, with no sticky sessions,
// as several replicas behind a load balancer:
//   - a Teams retry of an activity that reaches the other replica is
//     dropped;
//   - a view made on one replica opens through both: its page, its API,
//     its two frame documents (frame tokens minted by one, verified by the
//     other) and a tool call, in one signed-in session;
//   - a scheduled trigger whose due time passed while the service was
//     down runs once, though two replicas start together;
//   - a replica killed (SIGKILL) in the middle of a load loses no view
//     whose answer reached Teams.
func TestReplicasOnPostgres(t *testing.T) {
	const tenant, channel = "tenant-1", "19:e2e@thread.tacv2"
	ctx := context.Background()
	dbURL := pgtest.Database(t)
	conn := testenv.StartConnector(t)
	keys := t.TempDir()
	if _, err := runCmd(t, map[string]string{"TICKETIQ_DATA": keys}, "keys"); err != nil {
		t.Fatal(err)
	}
	ln := testenv.Listen(t)
	public := "http://" + ln.Addr().String()
	proxy := startProxy(t, ln)
	env := func() map[string]string {
		data := t.TempDir()
		for _, name := range []string{viewpage.TokenKeyFile, signin.CookieKeyFile} {
			b, err := os.ReadFile(filepath.Join(keys, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_DATABASE_URL": dbURL, "TICKETIQ_PUBLIC_BASE_URL": public,
			"TICKETIQ_ADDR": "127.0.0.1:0", "TICKETIQ_PLAYGROUND": "false"}
	}
	a, b := startReplica(t, "a", env()), startReplica(t, "b", env())
	proxy.set(a, b)
	st, err := store.OpenPostgres(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := &http.Client{Timeout: 60 * time.Second}

	// The app is installed in a channel (for the trigger below).
	install, _ := json.Marshal(map[string]any{
		"type": "installationUpdate", "action": "add", "id": "inst-1", "channelId": "msteams", "serviceUrl": conn.URL,
		"from": map[string]any{"id": "29:installer", "aadObjectId": "installer-oid"}, "recipient": map[string]any{"id": "28:bot", "name": "teamsbot"},
		"conversation": map[string]any{"id": channel, "conversationType": "channel", "tenantId": tenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": tenant}},
	})
	if code, body := send(t, c, http.MethodPost, public+"/api/messages", "install", install, nil); code/100 != 2 {
		t.Fatalf("install: %d %s", code, body)
	}
	conn.WaitMessages(t, channel, 1)

	// A message, then Teams' retry of it, which the proxy hands to the
	// other replica: one answer.
	const dupConv, dupUser = "a:e2e-dup", "user-dup"
	msg := message(conn.URL, tenant, "act-dup", dupConv, dupUser, "/sales_report {}")
	if code, body := send(t, c, http.MethodPost, public+"/api/messages", "dup", msg, nil); code/100 != 2 {
		t.Fatalf("message: %d %s", code, body)
	}
	conn.WaitMessages(t, dupConv, 1)
	if code, body := send(t, c, http.MethodPost, public+"/api/messages", "dup", msg, nil); code/100 != 2 {
		t.Fatalf("retry: %d %s", code, body)
	}
	if by := proxy.servedBy("dup"); len(by) != 2 || by[0] == by[1] {
		t.Fatalf("the message and its retry were served by %v, want two replicas", by)
	}
	later := message(conn.URL, tenant, "act-later", dupConv, dupUser, "hello")
	send(t, c, http.MethodPost, public+"/api/messages", "later", later, nil)
	send(t, c, http.MethodPost, public+"/api/messages", "later", message(conn.URL, tenant, "act-later-2", dupConv, dupUser, "hello again"), nil)
	conn.WaitMessages(t, dupConv, 3)
	time.Sleep(time.Second)
	if n := repliesTo(conn, dupConv, "act-dup"); n != 1 {
		t.Errorf("the message and its retry on the other replica were answered %d times, want once", n)
	}

	// The view of that answer, opened through the proxy: every request
	// goes to the next replica.
	views := viewsOf(t, st, tenant)[dupUser]
	if len(views) != 1 {
		t.Fatalf("views of the answered message: %v", views)
	}
	viewID := views[0]
	jar, _ := cookiejar.New(nil)
	person := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	form := url.Values{"tenant": {tenant}, "user": {dupUser}, "name": {"Person"}, "roles": {"agents.read agents.run"}, "return": {"/"}}
	req, _ := http.NewRequest(http.MethodPost, public+"/signin/local", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", public)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := person.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sign-in: %v %v", resp, err)
	}
	resp.Body.Close()
	page := map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": public}
	for round := range 2 {
		if code, _ := send(t, person, http.MethodGet, public+"/mcp-apps/"+viewID, "page", nil, nil); code != 200 {
			t.Errorf("round %d: view page: %d", round, code)
		}
		code, body := send(t, person, http.MethodGet, public+"/api/mcp-apps/"+viewID, "api", nil, nil)
		var info struct {
			ProxyURL string `json:"proxyUrl"`
			ViewURL  string `json:"viewUrl"`
		}
		if code != 200 || json.Unmarshal(body, &info) != nil || info.ProxyURL == "" || info.ViewURL == "" {
			t.Fatalf("round %d: view API: %d %s", round, code, body)
		}
		if code, _ := send(t, person, http.MethodGet, public+info.ProxyURL, "proxy frame", nil, nil); code != 200 {
			t.Errorf("round %d: proxy frame document: %d", round, code)
		}
		if code, body := send(t, person, http.MethodGet, public+info.ViewURL, "view frame", nil, nil); code != 200 || !strings.Contains(string(body), "<") {
			t.Errorf("round %d: view frame document: %d", round, code)
		}
		if code, body := send(t, person, http.MethodPost, public+"/api/mcp-apps/"+viewID+"/call", "call",
			[]byte(`{"name":"refresh_sales","arguments":{}}`), page); code != 200 {
			t.Errorf("round %d: tool call: %d %s", round, code, body)
		}
	}
	for _, key := range []string{"page", "api", "proxy frame", "view frame", "call"} {
		if by := proxy.servedBy(key); len(by) != 2 || by[0] == by[1] {
			t.Errorf("%s served by %v, want both replicas", key, by)
		}
	}

	// An admin makes a trigger; its first due time is a year away. The
	// service stops, a due time passes meanwhile (LastDue moved back), and
	// two replicas start together: one of them runs it, once.
	admin := signInLocal(t, public, tenant, "admin-oid", "agents.admin")
	code, trig := api(t, admin, http.MethodPost, public+"/api/admin/triggers", "", map[string]any{
		"name": "New year", "agent": "default", "cron": "0 0 1 1 *", "timeZone": "UTC", "text": "/sales_report {}", "conversation": channel})
	if code != http.StatusCreated {
		t.Fatalf("create trigger: %d %v", code, trig)
	}
	trigID, _ := trig["id"].(string)
	a.stop()
	b.stop()
	lastYear := time.Date(time.Now().Year()-1, 12, 31, 12, 0, 0, 0, time.UTC)
	if _, err := st.UpdateTrigger(ctx, tenant, trigID, func(tr *store.Trigger) error { tr.LastDue = lastYear; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	before := len(conn.Messages(channel))
	var wg sync.WaitGroup
	var cr, dr *replica
	wg.Go(func() { cr = startReplica(t, "c", env()) })
	wg.Go(func() { dr = startReplica(t, "d", env()) })
	wg.Wait()
	if cr == nil || dr == nil {
		t.FailNow()
	}
	proxy.set(cr, dr)
	conn.WaitMessages(t, channel, before+1)
	time.Sleep(2 * time.Second)
	if n := len(conn.Messages(channel)) - before; n != 1 {
		t.Errorf("the due time was run %d times by two replicas, want once", n)
	}
	runs, err := st.Audit(ctx, store.AuditQuery{TenantID: tenant, Action: triggers.AuditScheduledRun})
	if err != nil || len(runs) != 1 {
		t.Errorf("%d scheduled-run records (%v), want 1", len(runs), err)
	}

	// A load of turns, one conversation and person each, each worker
	// sending its next turn once the last is answered (or lost); replica c
	// is killed once answers of its own have reached Teams. Every answer
	// that reached Teams has its view.
	const turns, workers = 60, 6
	var done atomic.Int64
	answered := func(i int) bool {
		id := fmt.Sprintf("load-%d", i)
		return repliesTo(conn, "a:"+id, id) > 0
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			onC := 0
			for i := range turns {
				if by := proxy.servedBy(fmt.Sprintf("load-%d", i)); len(by) == 1 && by[0] == "c" && answered(i) {
					onC++
				}
			}
			if onC >= 3 {
				cr.kill()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	var lw sync.WaitGroup
	for w := range workers {
		lw.Go(func() {
			for i := w; i < turns; i += workers {
				id := fmt.Sprintf("load-%d", i)
				code, _ := send(t, c, http.MethodPost, public+"/api/messages", id,
					message(conn.URL, tenant, id, "a:"+id, "load-user-"+fmt.Sprint(i), "/sales_report {}"), nil)
				if code/100 != 2 {
					continue
				}
				done.Add(1)
				for end := time.Now().Add(5 * time.Second); !answered(i) && time.Now().Before(end); {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	lw.Wait()
	<-killed
	time.Sleep(3 * time.Second) // answers of turns accepted just before the end
	stored := viewsOf(t, st, tenant)
	acked, ackedOnC := 0, 0
	for i := range turns {
		id := fmt.Sprintf("load-%d", i)
		if repliesTo(conn, "a:"+id, id) == 0 {
			continue
		}
		acked++
		if by := proxy.servedBy(id); len(by) == 1 && by[0] == "c" {
			ackedOnC++
		}
		if len(stored["load-user-"+fmt.Sprint(i)]) != 1 {
			t.Errorf("turn %s was answered in Teams, but its view is not stored", id)
		}
	}
	if ackedOnC == 0 || acked <= ackedOnC {
		t.Errorf("%d turns answered, %d of them by the killed replica: the load did not reach both", acked, ackedOnC)
	}
	if acked == turns {
		t.Errorf("all %d turns were answered: the replica was not killed during the load", turns)
	}
	t.Logf("%d turns sent, %d accepted, %d answered (%d by the killed replica)", turns, done.Load(), acked, ackedOnC)
}

// signInLocal signs a person in through the proxy with the local sign-in
// and returns its client.
func signInLocal(t *testing.T, public, tenant, user, roles string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	form := url.Values{"tenant": {tenant}, "user": {user}, "name": {"Ada Admin"}, "roles": {roles}, "return": {"/"}}
	req, _ := http.NewRequest(http.MethodPost, public+"/signin/local", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", public)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("sign-in of %s: %v %v", user, resp, err)
	}
	resp.Body.Close()
	return c
}
