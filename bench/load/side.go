package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"teamsbot/store"
)

// sideOptions are side-by-side's flags.
type sideOptions struct {
	teamsbot, node, botbuilder, self string
	rounds, views                    int
	dur                              time.Duration
	out, dir                         string
	// profile takes CPU profiles of the service during its measurements
	// in the last round, through TICKETIQ_PPROF on its internal listener.
	profile bool
}

// loopbackAddr refuses a listen address off loopback: nothing here may be
// reached from elsewhere.
func loopbackAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q: listen on 127.0.0.1 only", addr)
	}
	return nil
}

// freeAddr is a loopback address nobody listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// proc is a target in its own process.
type proc struct {
	name    string
	addr    string
	cmd     *exec.Cmd
	started time.Duration // from exec to the first answer of probe
}

// startProc runs argv with env added to the environment, logging to
// logFile, and waits until probe (a URL path) answers on addr.
func startProc(ctx context.Context, name, addr, probe, logFile string, env []string, argv ...string) (*proc, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, addr: addr, cmd: cmd}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait(); log.Close() }()
	c := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s exited at start, see %s: %w", name, logFile, err)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		default:
		}
		if resp, err := c.Get("http://" + addr + probe); err == nil {
			resp.Body.Close()
			p.started = time.Since(t0)
			go func() { <-exited }()
			return p, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("%s did not answer within 60 s; see %s", name, logFile)
}

// pid is the process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks the process to end (SIGTERM) and kills it after 25 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	for range 2500 {
		if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = p.cmd.Process.Kill()
}

// card is the Adaptive Card the reference bots answer with: the shape of
// the service's answer to /sales_report (text, the view's name, its
// expiry, an Open button).
const card = `{"type":"AdaptiveCard","$schema":"http://adaptivecards.io/schemas/adaptive-card.json","version":"1.5",` +
	`"msteams":{"width":"Full"},"body":[{"type":"TextBlock","text":"Here is the sales report you asked for.","wrap":true},` +
	`{"type":"Container","style":"emphasis","items":[{"type":"TextBlock","text":"Sales report","weight":"Bolder"},` +
	`{"type":"TextBlock","text":"demo · open until 10 Dec 2026 10:00 UTC","isSubtle":true,"wrap":true}]}],` +
	`"actions":[{"type":"Action.OpenUrl","title":"Open","url":"https://teams.example.com/mcp-apps/0123456789abcdef"}]}`

// fetchProfile saves the service's profile of kind ("profile" for CPU,
// "trace" for an execution trace) over d (whole seconds, at least one) from
// its internal listener to file.
func fetchProfile(ctx context.Context, addr, kind string, d time.Duration, file string) error {
	secs := max(1, int(d/time.Second))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, secs), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", kind, resp.StatusCode)
	}
	out, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", kind, err)
	}
	return out.Close()
}

// sideBySide is the whole benchmark.
func sideBySide(ctx context.Context, o sideOptions, stdout, stderr io.Writer) error {
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "teamsbot-bench-"); err != nil {
			return fmt.Errorf("working folder: %w", err)
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "load: "+format+"\n", a...) }
	logf("working folder %s", dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f, err := startFakes(ctx, dir)
	if err != nil {
		return err
	}
	cardFile := filepath.Join(dir, "card.json")
	if err := os.WriteFile(cardFile, []byte(card), 0o600); err != nil {
		return fmt.Errorf("card: %w", err)
	}
	token, err := f.channelToken()
	if err != nil {
		return err
	}
	rep := &report{rounds: o.rounds, dur: o.dur, started: time.Now()}

	// The three bots, each in its own process on its own port.
	svcAddr, _ := freeAddr()
	bbAddr, _ := freeAddr()
	floorAddr, _ := freeAddr()
	dataDir := filepath.Join(dir, "data")
	svcEnv := []string{
		"TICKETIQ_ADDR=" + svcAddr, "TICKETIQ_DATA=" + dataDir, "TICKETIQ_PUBLIC_BASE_URL=http://" + svcAddr,
		"TICKETIQ_BOT_APP_ID=" + appID, "TICKETIQ_BOT_APP_PASSWORD=" + appSecret, "TICKETIQ_BOT_TENANT_ID=" + homeTenant,
		"TICKETIQ_BOT_ALLOWED_TENANTS=" + allTenants(),
		"TICKETIQ_BOT_OPENID_METADATA_URL=" + f.metadataURL(), "TICKETIQ_BOT_TOKEN_URL=" + f.tokenURL(),
		// Graph is never asked in this workload; if it were, the fakes would count it.
		"TICKETIQ_GRAPH_BASE_URL=" + f.connURL + "/graph", "TICKETIQ_GRAPH_TOKEN_URL=" + f.connURL + "/{tenant}/oauth2/v2.0/token",
		"TICKETIQ_LOG_LEVEL=info", "TICKETIQ_PLAYGROUND=false",
		// Go's standard way to trust a certificate: the fake connector's.
		"SSL_CERT_FILE=" + f.caFile,
	}
	var pprofAddr string
	if o.profile {
		// A port of its own: freeAddr may hand out one just released.
		for pprofAddr == "" || pprofAddr == svcAddr || pprofAddr == bbAddr || pprofAddr == floorAddr {
			pprofAddr, _ = freeAddr()
		}
		svcEnv = append(svcEnv, "TICKETIQ_METRICS_ADDR="+pprofAddr, "TICKETIQ_PPROF=true")
	}
	// profiled runs op while the service's CPU profile is taken, when this
	// is the last round and profiles were asked for.
	profiled := func(round int, name string, op func() (result, error)) (result, error) {
		if !o.profile || round != o.rounds-1 {
			return op()
		}
		done := make(chan error, 2)
		go func() {
			done <- fetchProfile(ctx, pprofAddr, "profile", o.dur, filepath.Join(dir, "cpu-"+name+".pprof"))
		}()
		go func() {
			// An execution trace of one second shows where turns wait.
			done <- fetchProfile(ctx, pprofAddr, "trace", time.Second, filepath.Join(dir, "trace-"+name+".out"))
		}()
		r, err := op()
		for range 2 {
			if perr := <-done; perr != nil && err == nil {
				err = perr
			}
		}
		return r, err
	}
	svc, err := startProc(ctx, "teamsbot", svcAddr, "/healthz", filepath.Join(dir, "teamsbot.log"), svcEnv, o.teamsbot)
	if err != nil {
		return err
	}
	defer func() { svc.stop() }()
	bb, err := startProc(ctx, "botbuilder", bbAddr, "/healthz", filepath.Join(dir, "botbuilder.log"), []string{
		"PORT=" + strings.Split(bbAddr, ":")[1], "APP_ID=" + appID, "APP_PASSWORD=" + appSecret,
		"METADATA_URL=" + f.metadataURL(), "TOKEN_URL=" + f.tokenURL(), "CARD_FILE=" + cardFile,
		"NODE_EXTRA_CA_CERTS=" + f.caFile,
	}, o.node, o.botbuilder)
	if err != nil {
		return err
	}
	defer bb.stop()
	floor, err := startProc(ctx, "floor bot", floorAddr, "/healthz", filepath.Join(dir, "floor.log"), nil,
		o.self, "floorbot", "-addr", floorAddr, "-metadata", f.metadataURL(), "-token-url", f.tokenURL(), "-card", cardFile, "-ca", f.caFile)
	if err != nil {
		return err
	}
	defer floor.stop()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512}}
	var seq atomic.Int64
	bots := []*proc{svc, bb, floor}
	names := map[*proc]string{svc: "teamsbot", bb: "botbuilder", floor: "floor bot"}
	turnsAt := func(p *proc, inflight, max int, d time.Duration, round string) (result, error) {
		l := &turnLoad{f: f, client: client, url: "http://" + p.addr + "/api/messages", token: token,
			inflight: inflight, max: max, d: d, prefix: round + "-", seq: &seq}
		return measure(ctx, names[p], fmt.Sprintf("turns@%d", inflight), p.pid(), inflight, max, d, l.turn)
	}
	// Warm up: keys, tokens, connections, the MCP session, the JIT, and
	// every conversation once (the service stores each one's reference on
	// first contact).
	for _, p := range bots {
		if _, err := turnsAt(p, 50, conversations, 30*time.Second, "warm-"+strings.ReplaceAll(names[p], " ", "")); err != nil {
			return err
		}
	}
	m0, t0 := f.messages.Load(), f.typing.Load()
	for round := range o.rounds {
		for _, inflight := range []int{1, 50, 200} {
			for i := range bots {
				// The order turns each round, so that drift hits every target alike.
				p := bots[(i+round)%len(bots)]
				op := func() (result, error) {
					return turnsAt(p, inflight, 1_000_000, o.dur, fmt.Sprintf("r%d-%d-%s", round, inflight, strings.ReplaceAll(names[p], " ", "")))
				}
				var r result
				var err error
				if p == svc {
					r, err = profiled(round, fmt.Sprintf("turns%d", inflight), op)
				} else {
					r, err = op()
				}
				if err != nil {
					return err
				}
				logf("round %d %-10s %-9s %7.0f turns/s  p50 %6.2f ms  p99 %6.2f ms  %5.2f ms CPU/turn",
					round+1, r.Target, r.Load, r.PerSecond(), ms(r.P50), ms(r.P99), ms(r.CPUPer()))
				rep.add(r)
			}
		}
	}
	rep.connectorCalls = float64(f.messages.Load()-m0+f.typing.Load()-t0) / float64(max(1, f.messages.Load()-m0))
	for _, p := range bots {
		rss, err := peakRSS(p.pid())
		if err != nil {
			return err
		}
		rep.rss = append(rep.rss, namedValue{names[p], rss})
	}
	bb.stop()
	floor.stop()

	// The view path: the service again, on the file the turns filled.
	svc.stop()
	viewID, err := ownView(ctx, filepath.Join(dataDir, "teamsbot.db"))
	if err != nil {
		return err
	}
	if svc, err = startProc(ctx, "teamsbot", svcAddr, "/healthz", filepath.Join(dir, "teamsbot-views.log"), svcEnv, o.teamsbot); err != nil {
		return err
	}
	rep.restart = svc.started
	noopAddr, _ := freeAddr()
	noop, err := startProc(ctx, "no-op", noopAddr, "/", filepath.Join(dir, "noop.log"), nil, o.self, "noop", "-addr", noopAddr)
	if err != nil {
		return err
	}
	defer noop.stop()
	base := "http://" + svcAddr
	vc, err := signedIn(ctx, base)
	if err != nil {
		return err
	}
	for round := range o.rounds {
		// Fresh frame tokens every round.
		paths, err := viewPaths(ctx, vc, base, viewID)
		if err != nil {
			return err
		}
		for _, vp := range paths {
			floorURL := fmt.Sprintf("http://%s/noop?n=%d", noopAddr, vp.size)
			pair := []func() (result, error){
				func() (result, error) {
					return profiled(round, strings.ReplaceAll(vp.name, " ", "-"), func() (result, error) {
						return measure(ctx, "teamsbot", vp.name, svc.pid(), 50, 1_000_000, o.dur/2, requestOp(vc, vp.method, vp.url, vp.body, base))
					})
				},
				func() (result, error) {
					return measure(ctx, "no-op", vp.name, noop.pid(), 50, 1_000_000, o.dur/2, requestOp(vc, vp.method, floorURL, vp.body, "http://"+noopAddr))
				},
			}
			for i := range pair {
				r, err := pair[(i+round)%2]()
				if err != nil {
					return err
				}
				logf("round %d %-8s %-14s %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms", round+1, r.Target, r.Load, r.PerSecond(), ms(r.P50), ms(r.P99))
				rep.add(r)
			}
		}
	}
	svc.stop()
	noop.stop()

	// The store with many views, then the service started on that file.
	if o.views > 0 {
		logf("filling a store with %d views", o.views)
		bigDir := filepath.Join(dir, "big")
		sr, err := benchStore(ctx, filepath.Join(bigDir, "teamsbot.db"), o.views, 100)
		if err != nil {
			return err
		}
		env := append(append([]string(nil), svcEnv...), "TICKETIQ_DATA="+bigDir)
		big, err := startProc(ctx, "teamsbot", svcAddr, "/healthz", filepath.Join(dir, "teamsbot-big.log"), env, o.teamsbot)
		if err != nil {
			return err
		}
		sr.ServiceStart = big.started
		big.stop()
		rep.store = &sr
	}
	rep.elapsed = time.Since(rep.started)
	md := rep.markdown()
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
	}
	return nil
}

// ownView finds a view the benchmark's person owns in the service's file
// (closed: the service is stopped).
func ownView(ctx context.Context, path string) (string, error) {
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return "", fmt.Errorf("store of the turns: %w", err)
	}
	defer s.Close()
	views, _, err := s.ActiveViews(ctx, homeTenant, 1, "")
	if err != nil {
		return "", fmt.Errorf("a view of the turns: %w", err)
	}
	if len(views) == 0 {
		return "", errors.New("the turns stored no view")
	}
	return views[0].ID, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// machine describes where the figures were taken.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	load := ""
	if data, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(data))[:3], " ")
	}
	return fmt.Sprintf("%s, %d CPUs, %s, %s/%s; load average at the end %s", model, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, load)
}
