package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// replicasOptions are the replicas mode's flags.
type replicasOptions struct {
	teamsbot, database string
	rounds             int
	dur                time.Duration
	out, dir           string
}

// replicas measures turns per second of one teamsbot on its bbolt file
// against two teamsbot replicas on one PostgreSQL database, on the same
// machine and the same Teams messages as side-by-side, in alternating
// rounds. The two replicas get the turns in turn, as a round-robin load
// balancer would hand them out. database is a URL of the server, on a
// database the benchmark may create its own in (dropped at the end).
func replicas(ctx context.Context, o replicasOptions, stdout, stderr io.Writer) error {
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "teamsbot-replicas-"); err != nil {
			return fmt.Errorf("working folder: %w", err)
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "load: "+format+"\n", a...) }
	logf("working folder %s", dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dbURL, drop, err := benchDatabase(ctx, o.database)
	if err != nil {
		return err
	}
	defer drop()
	f, err := startFakes(ctx, dir)
	if err != nil {
		return err
	}
	token, err := f.channelToken()
	if err != nil {
		return err
	}
	env := func(addr, data string) []string {
		return []string{
			"TICKETIQ_ADDR=" + addr, "TICKETIQ_DATA=" + data, "TICKETIQ_PUBLIC_BASE_URL=http://" + addr,
			"TICKETIQ_BOT_APP_ID=" + appID, "TICKETIQ_BOT_APP_PASSWORD=" + appSecret, "TICKETIQ_BOT_TENANT_ID=" + homeTenant,
			"TICKETIQ_BOT_ALLOWED_TENANTS=" + allTenants(),
			"TICKETIQ_BOT_OPENID_METADATA_URL=" + f.metadataURL(), "TICKETIQ_BOT_TOKEN_URL=" + f.tokenURL(),
			"TICKETIQ_GRAPH_BASE_URL=" + f.connURL + "/graph", "TICKETIQ_GRAPH_TOKEN_URL=" + f.connURL + "/{tenant}/oauth2/v2.0/token",
			"TICKETIQ_LOG_LEVEL=warn", "TICKETIQ_PLAYGROUND=false", "SSL_CERT_FILE=" + f.caFile,
		}
	}
	// One replica on bbolt.
	boltAddr, _ := freeAddr()
	single, err := startProc(ctx, "teamsbot bbolt", boltAddr, "/healthz", filepath.Join(dir, "bbolt.log"), env(boltAddr, filepath.Join(dir, "bbolt")), o.teamsbot)
	if err != nil {
		return err
	}
	defer single.stop()
	// Two replicas on PostgreSQL, sharing the key files `teamsbot keys`
	// made once.
	keys := filepath.Join(dir, "keys")
	if err := os.MkdirAll(keys, 0o700); err != nil {
		return err
	}
	var pair []*proc
	for i := range 2 {
		addr, _ := freeAddr()
		data := filepath.Join(dir, fmt.Sprintf("replica-%d", i))
		if err := os.MkdirAll(data, 0o700); err != nil {
			return err
		}
		if i == 0 {
			cmd := exec.CommandContext(ctx, o.teamsbot, "keys")
			cmd.Env = append(os.Environ(), "TICKETIQ_DATA="+keys)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("teamsbot keys: %w: %s", err, out)
			}
		}
		for _, name := range []string{"frame-token-keys.json", "signin-cookie.key"} {
			b, err := os.ReadFile(filepath.Join(keys, name))
			if err != nil {
				return fmt.Errorf("shared keys: %w", err)
			}
			if err := os.WriteFile(filepath.Join(data, name), b, 0o600); err != nil {
				return err
			}
		}
		p, err := startProc(ctx, fmt.Sprintf("teamsbot replica %d", i+1), addr, "/healthz", filepath.Join(dir, fmt.Sprintf("replica-%d.log", i)),
			append(env(addr, data), "TICKETIQ_DATABASE_URL="+dbURL), o.teamsbot)
		if err != nil {
			return err
		}
		defer p.stop()
		pair = append(pair, p)
	}

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	var seq atomic.Int64
	const one, two = "1 replica, bbolt", "2 replicas, PostgreSQL"
	turnsAt := func(target string, inflight int, d time.Duration, round string) (result, error) {
		procs := []*proc{single}
		if target == two {
			procs = pair
		}
		loads := make([]*turnLoad, len(procs))
		for i, p := range procs {
			loads[i] = &turnLoad{f: f, client: client, url: "http://" + p.addr + "/api/messages", token: token,
				inflight: inflight, max: 1_000_000, d: d, prefix: round + "-", seq: &seq}
		}
		var next atomic.Uint64
		op := func(ctx context.Context) (time.Duration, error) {
			return loads[int(next.Add(1))%len(loads)].turn(ctx)
		}
		var cpu0 time.Duration
		for _, p := range procs[1:] {
			c, err := processCPU(p.pid())
			if err != nil {
				return result{}, err
			}
			cpu0 += c
		}
		r, err := measure(ctx, target, fmt.Sprintf("turns@%d", inflight), procs[0].pid(), inflight, 1_000_000, d, op)
		if err != nil {
			return r, err
		}
		for _, p := range procs[1:] {
			c, err := processCPU(p.pid())
			if err != nil {
				return result{}, err
			}
			r.CPU += c
		}
		r.CPU -= cpu0
		return r, nil
	}
	for _, target := range []string{one, two} {
		if _, err := turnsAt(target, 50, 30*time.Second, "warm-"+strings.Fields(target)[0]); err != nil {
			return err
		}
	}
	rep := &report{rounds: o.rounds, dur: o.dur, started: time.Now()}
	for round := range o.rounds {
		for _, inflight := range []int{1, 50, 200} {
			for i := range 2 {
				target := []string{one, two}[(i+round)%2]
				r, err := turnsAt(target, inflight, o.dur, fmt.Sprintf("r%d-%d-%d", round, inflight, i))
				if err != nil {
					return err
				}
				logf("round %d %-24s %-9s %7.0f turns/s  p50 %6.2f ms  p99 %6.2f ms  %5.2f ms CPU/turn",
					round+1, r.Target, r.Load, r.PerSecond(), ms(r.P50), ms(r.P99), ms(r.CPUPer()))
				rep.add(r)
			}
		}
	}
	rep.elapsed = time.Since(rep.started)
	var b strings.Builder
	fmt.Fprintf(&b, "## Turns per second: two replicas on PostgreSQL against one on bbolt\n\n")
	fmt.Fprintf(&b, "%s; %d rounds of %s per load, the median round (and the range).\n\n", machine(), o.rounds, o.dur)
	fmt.Fprintf(&b, "| target | load | turns/s | p50 | p99 | CPU per turn | errors |\n|---|---|---|---|---|---|---|\n")
	for _, load := range []string{"turns@1", "turns@50", "turns@200"} {
		for _, target := range []string{one, two} {
			s, ok := rep.summary(target, load)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f (%.0f–%.0f) | %.2f ms | %.2f ms | %.2f ms | %d |\n",
				target, load, s.rate, s.lo, s.hi, ms(s.p50), ms(s.p99), ms(s.cpu), s.errors)
		}
	}
	if _, err := io.WriteString(stdout, b.String()); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
	}
	return nil
}

// benchDatabase creates a database of its own on the server of admin and
// returns its URL and how to drop it.
func benchDatabase(ctx context.Context, admin string) (string, func(), error) {
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("-database: want a postgres:// URL")
	}
	r := make([]byte, 6)
	rand.Read(r)
	name := "teamsbot_bench_" + hex.EncodeToString(r)
	run := func(sql string) error {
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			return fmt.Errorf("-database: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := run("CREATE DATABASE " + name); err != nil {
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() { _ = run("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") }, nil
}
