package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// dbProxy is a TCP proxy on loopback to the test server's Unix socket,
// which a test can cut (as a network failure or a failover would) and
// restore on the same port.
type dbProxy struct {
	socket string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

// newDBProxy proxies to the server of the database URL dbURL (on a Unix
// socket, as pgtest's) and returns the proxy and the URL to reach the same
// database through it, with a password that must never be printed.
func newDBProxy(t *testing.T, dbURL string) (*dbProxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{socket: filepath.Join(u.Query().Get("host"), ".s.PGSQL.5432"), addr: "127.0.0.1:0"}
	p.restore(t)
	t.Cleanup(p.cut)
	// The test server trusts local connections: the password is only
	// there to show that it is never printed.
	proxied := url.URL{Scheme: "postgres", User: url.UserPassword(u.Query().Get("user"), "hunter2-secret"), Host: p.addr, Path: u.Path,
		RawQuery: "sslmode=disable&connect_timeout=2"}
	return p, proxied.String()
}

func (p *dbProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", p.socket)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

func (p *dbProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// runCmd runs one teamsbot command to its end.
func runCmd(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := run(ctx, append([]string{"teamsbot"}, args...), envOf(env), &out, &errOut)
	return out.String() + errOut.String(), err
}

// On PostgreSQL a replica refuses to start without the key files every
// replica must share, and says how to make them; `teamsbot keys` makes
// them, and then it starts.
func TestPostgresNeedsSharedKeys(t *testing.T) {
	dbURL := pgtest.Database(t)
	data := t.TempDir()
	env := map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_DATABASE_URL": dbURL, "TICKETIQ_ADDR": "127.0.0.1:0"}
	_, err := runCmd(t, env, "serve")
	if err == nil || !strings.Contains(err.Error(), "teamsbot keys") || !strings.Contains(err.Error(), viewpage.TokenKeyFile) {
		t.Fatalf("serve on PostgreSQL without key files: %v", err)
	}
	out, err := runCmd(t, env, "keys")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{viewpage.TokenKeyFile, signin.CookieKeyFile} {
		fi, err := os.Stat(filepath.Join(data, name))
		if err != nil || fi.Mode().Perm() != 0o600 || !strings.Contains(out, name) {
			t.Errorf("%s: %v %v (printed %q)", name, fi, err, out)
		}
	}
	before, _ := os.ReadFile(filepath.Join(data, signin.CookieKeyFile))
	if _, err := runCmd(t, env, "keys"); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(data, signin.CookieKeyFile)); !bytes.Equal(before, after) {
		t.Error("a second `teamsbot keys` replaced an existing key")
	}
	base, logs, stop := startService(t, env)
	if code, body := get(t, &http.Client{Timeout: 10 * time.Second}, base+"/readyz"); code != 200 {
		t.Errorf("/readyz on PostgreSQL: %d %s", code, body)
	}
	if l := logs.logLine("starting"); l == nil || !strings.HasPrefix(l["store"].(string), "postgres") {
		t.Errorf("start-up log does not name the PostgreSQL store: %v", l)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// While the database cannot be reached, /readyz says so and every other
// request is answered 503 with Retry-After, whole, rather than fail half
// way; once it is back, the service is ready again by itself. The URL's
// password is never printed.
func TestDatabaseLossAnswers503UntilItIsBack(t *testing.T) {
	proxy, dbURL := newDBProxy(t, pgtest.Database(t))
	data := t.TempDir()
	env := map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_DATABASE_URL": dbURL}
	if _, err := runCmd(t, env, "keys"); err != nil {
		t.Fatal(err)
	}
	base, logs, _ := startService(t, env)
	c := &http.Client{Timeout: 10 * time.Second}
	if code, _ := get(t, c, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d", code)
	}
	proxy.cut()
	waitFor(t, "/readyz to fail", func() bool { code, _ := get(t, c, base+"/readyz"); return code == 503 })
	waitFor(t, "requests to be refused", func() bool {
		resp, err := c.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == 503 && resp.Header.Get("Retry-After") != ""
	})
	if code, out := api(t, c, http.MethodGet, base+"/api/admin/bindings", "", nil); code != 503 || out["error"] != "The service cannot reach its database right now. Try again in a moment." {
		t.Errorf("an API call while the database is down: %d %v, want 503 with the words", code, out)
	}
	if code, _ := get(t, c, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while the database is down: %d, want 200 (the process is alive)", code)
	}
	proxy.restore(t)
	waitFor(t, "/readyz to recover", func() bool { code, _ := get(t, c, base+"/readyz"); return code == 200 })
	waitFor(t, "requests to be served", func() bool { code, _ := get(t, c, base+"/"); return code == 200 })
	if strings.Contains(logs.String(), "hunter2-secret") {
		t.Errorf("the log prints the database password:\n%s", logs)
	}
	out, err := runCmd(t, env, "config")
	if err != nil || strings.Contains(out, "hunter2-secret") || !strings.Contains(out, "TICKETIQ_DATABASE_URL=") {
		t.Errorf("teamsbot config: %v\n%s", err, out)
	}
}

// waitFor polls cond for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// `teamsbot migrate` copies the bbolt file into the database and reports
// counts; run again, it copies nothing twice.
func TestMigrateCommand(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := store.Open(ctx, filepath.Join(data, storeFile), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := store.View{ID: "view-1", AgentID: "default", TenantID: "tenant-1", ExpiresAt: time.Now().Add(time.Hour)}
	if err := st.SaveRun(ctx, store.Run{ID: "run-1", TenantID: "tenant-1", AgentID: "default"}, []store.NewView{{View: v, HTML: []byte("<p>x</p>")}},
		[]store.AuditRecord{{TenantID: "tenant-1", Action: "agent.run"}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	dbURL := pgtest.Database(t)
	env := map[string]string{"TICKETIQ_DATA": data, "TICKETIQ_DATABASE_URL": dbURL}
	out, err := runCmd(t, env, "migrate")
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	for _, want := range []string{"runs                   1 read       1 copied", "views                  1 read       1 copied", "teamsbot keys"} {
		if !strings.Contains(out, want) {
			t.Errorf("migrate printed no %q:\n%s", want, out)
		}
	}
	out, err = runCmd(t, env, "migrate")
	if err != nil || !strings.Contains(out, "runs                   1 read       0 copied       1 already there") {
		t.Errorf("second migrate: %v\n%s", err, out)
	}
	pg, err := store.OpenPostgres(ctx, dbURL, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if got, err := pg.View(ctx, "view-1"); err != nil || got.TenantID != "tenant-1" {
		t.Errorf("view after migrate: %+v %v", got, err)
	}
	if _, err := runCmd(t, map[string]string{"TICKETIQ_DATA": data}, "migrate"); err == nil || !strings.Contains(err.Error(), "TICKETIQ_DATABASE_URL") {
		t.Errorf("migrate without a database: %v", err)
	}
}

// A database URL that is not postgres:// is refused at start, with the
// other settings' errors, and without its password.
func TestDatabaseURLChecked(t *testing.T) {
	for _, bad := range []string{"mysql://root:pw-secret@db/teamsbot", "postgres:pw-secret@db"} {
		_, err := loadConfig(envOf(map[string]string{"TICKETIQ_DATABASE_URL": bad, "TICKETIQ_LOG_LEVEL": "loud"}))
		if err == nil || !strings.Contains(err.Error(), "TICKETIQ_DATABASE_URL") || !strings.Contains(err.Error(), "TICKETIQ_LOG_LEVEL") {
			t.Errorf("%s: %v, want both errors", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), "pw-secret") {
			t.Errorf("the error prints the password: %v", err)
		}
	}
	if _, err := loadConfig(envOf(map[string]string{"TICKETIQ_DATABASE_URL": "postgresql://u:p@db.example.com:5432/teamsbot?sslmode=require"})); err != nil {
		t.Errorf("a good URL: %v", err)
	}
}
