package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// streamsOptions are the streams mode's flags.
type streamsOptions struct {
	teamsbot              string
	turns, chats, tenants int
	out, dir              string
	// profile saves heap and goroutine profiles of the service while
	// every turn is in flight.
	profile bool
	// serviceNice, when above zero, starts the service under nice(1)
	// with this increment over the load's own niceness: run at a higher
	// priority than the service (streams.sh as root), the load's fakes
	// stamp each call when it arrives, not when two busy cores let them.
	serviceNice int
	// goMemLimit, when set, is the service's GOMEMLIMIT (Go's soft
	// memory limit), to see what it does to the peak.
	goMemLimit string
}

// The slow model's pace: its first words after modelFirst, then one piece
// every modelPace, modelPieces pieces in all, and the end of the answer
// modelTotal after the request.
const (
	modelFirst  = 400 * time.Millisecond
	modelPace   = 2 * time.Second
	modelPieces = 5
	modelTotal  = 10 * time.Second
	// lostAfter is how long the benchmark waits for a turn's final message.
	lostAfter = 5 * time.Minute
)

// turnTag marks each turn: the question carries it, the model names it in
// its answer ("The answer to q-7:"), so that the answer at the connector
// names its turn. A working card also quotes the question, so only the
// answer's words count for the final message.
var (
	turnTag   = regexp.MustCompile(`q-[0-9]+`)
	answerTag = regexp.MustCompile(`The answer to (q-[0-9]+):`)
)

// answerOf is the tag of the turn whose answer b carries, or "".
func answerOf(b []byte) string {
	m := answerTag.FindSubmatch(b)
	if m == nil {
		return ""
	}
	return string(m[1])
}

// tagOf is the last turn tag in b: a model request carries the
// conversation's earlier turns before the current question, and a final
// message the answer after anything else.
func tagOf(b []byte) string {
	all := turnTag.FindAll(b, -1)
	if len(all) == 0 {
		return ""
	}
	return string(all[len(all)-1])
}

// slowModel is an OpenAI-compatible model that streams its answer (Chat
// Completions with stream: true, server-sent events, `data: [DONE]` at the
// end) at a fixed pace, naming the question's tag. It counts the requests
// it holds at once.
type slowModel struct {
	first, pace, total time.Duration
	pieces             int

	open, requests, malformed atomic.Int64
	mu                        sync.Mutex
	peakOpen                  int64
}

func (m *slowModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	m.requests.Add(1)
	tag := tagOf(body)
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") || tag == "" || !bytes.Contains(body, []byte(`"stream":true`)) {
		m.malformed.Add(1)
		http.Error(w, "a streamed chat completion naming its turn was expected", http.StatusBadRequest)
		return
	}
	n := m.open.Add(1)
	defer m.open.Add(-1)
	m.mu.Lock()
	m.peakOpen = max(m.peakOpen, n)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	rc := http.NewResponseController(w)
	chunk := func(delta map[string]any, finish any) error {
		b, _ := json.Marshal(map[string]any{"id": "chatcmpl-" + tag, "object": "chat.completion.chunk", "created": 1764842400, "model": "bench-slow",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if chunk(map[string]any{"role": "assistant", "content": ""}, nil) != nil {
		return
	}
	t := time.NewTimer(m.first)
	defer t.Stop()
	for i := range m.pieces {
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		t.Reset(m.pace)
		text := fmt.Sprintf(" Piece %d.", i)
		if i == 0 {
			text = "The answer to " + tag + ":"
		}
		if chunk(map[string]any{"content": text}, nil) != nil {
			return
		}
	}
	if rest := m.total - m.first - time.Duration(m.pieces-1)*m.pace; rest > 0 {
		t.Reset(rest)
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	if chunk(map[string]any{}, "stop") != nil {
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// peak is the most requests open at once since the last reset.
func (m *slowModel) peak(reset bool) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.peakOpen
	if reset {
		m.peakOpen = m.open.Load()
	}
	return p
}

// serveTLS serves m on loopback over https with cert, HTTP/2 offered, as a
// real model's endpoint: thousands of streams share a few connections.
func (m *slowModel) serveTLS(ctx context.Context, cert tls.Certificate) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("model listen: %w", err)
	}
	srv := &http.Server{
		Handler:           m,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000},
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return "https://" + ln.Addr().String() + "/v1", nil
}

// window is a rate limit: at most n calls in any span of d.
type window struct {
	d time.Duration
	n int
}

// Teams' limits ("Optimize your bot with rate limiting in Teams"): per bot
// per conversation, and per app per tenant; and a stream's pace ("Stream
// bot messages": one update a second).
var (
	conversationLimits = []window{{time.Second, 7}, {2 * time.Second, 8}, {30 * time.Second, 60}, {time.Hour, 1800}}
	tenantLimit        = window{time.Second, 30}
	streamLimit        = window{time.Second, 1}
)

// countOver counts the calls (times sorted) that make more than w.n in a
// span shorter than w.d.
func countOver(times []time.Time, w window) int {
	over := 0
	for i := w.n; i < len(times); i++ {
		if times[i].Sub(times[i-w.n]) < w.d {
			over++
		}
	}
	return over
}

// shortestSpan is the shortest span of n+1 calls (times sorted); 0 when
// there are not so many.
func shortestSpan(times []time.Time, n int) time.Duration {
	var s time.Duration
	for i := n; i < len(times); i++ {
		if d := times[i].Sub(times[i-n]); s == 0 || d < s {
			s = d
		}
	}
	return s
}

// tally counts the connector's calls by conversation, tenant and stream,
// and notes each turn's final message.
type tally struct {
	tenantOf func(conversation string) string

	mu         sync.Mutex
	counting   bool
	perConv    map[string][]time.Time
	perTenant  map[string][]time.Time
	perStream  map[string][]time.Time
	finals     map[string]time.Time // tag → arrival of its final message
	waiters    map[string]chan struct{}
	extraFinal int // final messages of a tag already answered
	calls      int
}

func newTally(tenantOf func(string) string) *tally {
	return &tally{tenantOf: tenantOf, perConv: map[string][]time.Time{}, perTenant: map[string][]time.Time{},
		perStream: map[string][]time.Time{}, finals: map[string]time.Time{}, waiters: map[string]chan struct{}{}}
}

// observe is the connector's observer.
func (t *tally) observe(c connectorCall) {
	var tag string
	if c.Type == "message" {
		tag = answerOf(c.Body)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counting {
		t.calls++
		t.perConv[c.Conversation] = append(t.perConv[c.Conversation], c.At)
		ten := t.tenantOf(c.Conversation)
		t.perTenant[ten] = append(t.perTenant[ten], c.At)
		if c.Type == "typing" && (c.StreamType == "informative" || c.StreamType == "streaming") {
			id := c.StreamID
			if id == "" {
				id = c.AssignedID // the first update: its answer names the stream
			}
			t.perStream[id] = append(t.perStream[id], c.At)
		}
	}
	if tag == "" {
		return
	}
	if _, seen := t.finals[tag]; seen {
		t.extraFinal++
		return
	}
	t.finals[tag] = c.At
	if ch, ok := t.waiters[tag]; ok {
		close(ch)
		delete(t.waiters, tag)
	}
}

// expect returns a channel closed on tag's final message.
func (t *tally) expect(tag string) <-chan struct{} {
	ch := make(chan struct{})
	t.mu.Lock()
	t.waiters[tag] = ch
	t.mu.Unlock()
	return ch
}

// streamsResult is what the streams measurement found.
type streamsResult struct {
	Turns, Chats, Tenants int
	Answered, Lost        int
	Rejected              int // POSTs not answered 202
	ExtraFinals           int // answers of a turn already answered
	ModelPeakOpen         int64
	ModelMalformed        int64
	Calls                 int
	Streams               int
	Updates               int
	ConvOver              []int // per conversationLimits
	TenantOver            int
	TenantShortest        time.Duration // shortest span of 31 calls to one tenant
	StreamOver            int
	StreamShortest        time.Duration // shortest gap between two updates of a stream
	Posting               time.Duration // from the first POST to the last one's 202
	P50, P99, Max         time.Duration
	ServiceRSS, LoadRSS   int64
	ServiceCPU            time.Duration
	Elapsed               time.Duration
	Profiles              string
	GoMemLimit            string
	LoadNice, ServiceNice int   // the processes' niceness
	ProfileRSS            int64 // the service's resident set as the profiles were taken
	// LagP99 and LagMax are how late the load process's goroutines
	// woke from a 10 ms sleep during the load: the delay its own stamps
	// may carry.
	LagP99, LagMax time.Duration
	Timeline       []point
	ProfiledAt     []point // when the heap profiles were taken
}

// point is one sample of the load over time.
type point struct {
	At          time.Duration // since the first POST
	RSS         int64         // the service's resident set
	Anon, File  int64         // of which anonymous memory, and mapped files' pages
	Heap, Stack int64         // Go's heap and goroutine stacks in use (its /metrics), -1 when unread
	ModelOpen   int64
	Finals      int
	ProfileFile string
}

// sample notes every 500 ms the service's resident set, the model's open
// requests and the final messages in, until stop; with profile, it saves
// the service's heap and goroutine profiles each time the resident set
// has grown 100 MiB past the last profile's (heap-N.pprof, N in MiB).
func sample(ctx context.Context, stop <-chan struct{}, t0 time.Time, pid int, m *slowModel, tl *tally, pprofAddr, dir string, profile bool) (line, profiled []point) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var next int64 = 200 << 20
	tl.mu.Lock()
	before := len(tl.finals) // the warm-up's
	tl.mu.Unlock()
	for {
		select {
		case <-stop:
			return line, profiled
		case <-ctx.Done():
			return line, profiled
		case <-tick.C:
		}
		st, err := procStatus(pid, "VmRSS", "RssAnon", "RssFile")
		if err != nil {
			return line, profiled
		}
		rss := st[0]
		tl.mu.Lock()
		finals := len(tl.finals) - before
		tl.mu.Unlock()
		p := point{At: time.Since(t0), RSS: rss, Anon: st[1], File: st[2], ModelOpen: m.open.Load(), Finals: finals}
		p.Heap, p.Stack = goMemory(ctx, pprofAddr)
		line = append(line, p)
		if profile && rss >= next {
			mib := rss >> 20
			p.ProfileFile = fmt.Sprintf("heap-%d.pprof", mib)
			// heap?debug=1 ends with the runtime's MemStats: heap, stacks.
			if fetchPprof(ctx, pprofAddr, "heap", filepath.Join(dir, p.ProfileFile)) == nil &&
				fetchPprof(ctx, pprofAddr, "heap?debug=1", filepath.Join(dir, fmt.Sprintf("memstats-%d.txt", mib))) == nil &&
				fetchPprof(ctx, pprofAddr, "goroutine", filepath.Join(dir, fmt.Sprintf("goroutine-%d.pprof", mib))) == nil {
				profiled = append(profiled, p)
			}
			next = rss + 100<<20
		}
	}
}

// schedulingLag sleeps 10 ms again and again until stop and returns how
// late it woke each time: the load process's own delays in running a
// goroutine, which the connector's stamps carry too.
func schedulingLag(stop <-chan struct{}) []time.Duration {
	var lag []time.Duration
	for {
		t := time.Now()
		select {
		case <-stop:
			return lag
		case <-time.After(10 * time.Millisecond):
		}
		lag = append(lag, max(0, time.Since(t)-10*time.Millisecond))
	}
}

// writeTimeline saves the samples as tab-separated values.
func writeTimeline(file string, line []point) error {
	var b strings.Builder
	b.WriteString("seconds\tservice_rss_mib\tanon_mib\tfile_mib\tgo_heap_mib\tgo_stacks_mib\tmodel_open\tfinal_messages\n")
	for _, p := range line {
		fmt.Fprintf(&b, "%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", p.At.Seconds(), p.RSS>>20, p.Anon>>20, p.File>>20, p.Heap>>20, p.Stack>>20, p.ModelOpen, p.Finals)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// streams is the whole measurement: teamsbot in its own process with a
// slow streaming model, turns from many chats at once.
func streams(ctx context.Context, o streamsOptions, stdout, stderr io.Writer) error {
	if o.turns < 1 || o.chats < 1 || o.tenants < 1 || o.chats > o.turns || o.tenants > o.chats || o.tenants > tenantCount {
		return fmt.Errorf("streams: want 1 ≤ tenants ≤ chats ≤ turns, and at most %d tenants", tenantCount)
	}
	dir := o.dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "teamsbot-streams-"); err != nil {
			return fmt.Errorf("working folder: %w", err)
		}
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "load: "+format+"\n", a...) }
	logf("working folder %s", dir)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	convOf := func(chat int) string { return "a:streams-" + strconv.Itoa(chat) }
	tenantOfChat := func(chat int) string { return tenantID(chat % o.tenants) }
	tenantByConv := make(map[string]string, o.chats)
	for c := range o.chats {
		tenantByConv[convOf(c)] = tenantOfChat(c)
	}
	tl := newTally(func(conv string) string { return tenantByConv[conv] })
	f, err := startObservedFakes(ctx, dir, tl.observe)
	if err != nil {
		return err
	}
	m := &slowModel{first: modelFirst, pace: modelPace, total: modelTotal, pieces: modelPieces}
	modelURL, err := m.serveTLS(ctx, f.tls.TLSConfig.Certificates[0])
	if err != nil {
		return err
	}
	cfgFile := filepath.Join(dir, "agents.yaml")
	cfg := fmt.Sprintf("agents:\n  - id: slow\n    name: Slow model\n    model: {kind: openai, baseURL: %q, model: bench-slow, apiKeyEnv: BENCH_MODEL_KEY}\n    servers:\n      - {name: demo, builtin: demo}\n", modelURL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	token, err := f.channelToken()
	if err != nil {
		return err
	}

	svcAddr, _ := freeAddr()
	var pprofAddr string
	for pprofAddr == "" || pprofAddr == svcAddr {
		pprofAddr, _ = freeAddr()
	}
	// Bounds above the count: every turn runs at once.
	bound := strconv.Itoa(o.turns + o.chats + 100)
	env := []string{
		"TICKETIQ_ADDR=" + svcAddr, "TICKETIQ_DATA=" + filepath.Join(dir, "data"), "TICKETIQ_PUBLIC_BASE_URL=http://" + svcAddr,
		"TICKETIQ_BOT_APP_ID=" + appID, "TICKETIQ_BOT_APP_PASSWORD=" + appSecret, "TICKETIQ_BOT_TENANT_ID=" + homeTenant,
		"TICKETIQ_BOT_ALLOWED_TENANTS=" + allTenants(),
		"TICKETIQ_BOT_OPENID_METADATA_URL=" + f.metadataURL(), "TICKETIQ_BOT_TOKEN_URL=" + f.tokenURL(),
		"TICKETIQ_GRAPH_BASE_URL=" + f.connURL + "/graph", "TICKETIQ_GRAPH_TOKEN_URL=" + f.connURL + "/{tenant}/oauth2/v2.0/token",
		"TICKETIQ_LOG_LEVEL=warn", "TICKETIQ_PLAYGROUND=false",
		"TICKETIQ_CONFIG=" + cfgFile, "BENCH_MODEL_KEY=bench-model-key",
		"TICKETIQ_MAX_CONCURRENT_TURNS=" + bound, "TICKETIQ_MAX_PENDING_TURNS=" + bound,
		"TICKETIQ_METRICS_ADDR=" + pprofAddr, "TICKETIQ_PPROF=true",
		// The connector's and the model's certificate, trusted as Go does.
		"SSL_CERT_FILE=" + f.caFile,
	}
	if o.goMemLimit != "" {
		env = append(env, "GOMEMLIMIT="+o.goMemLimit)
	}
	argv := []string{o.teamsbot}
	if o.serviceNice > 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(o.serviceNice)}, argv...)
	}
	svc, err := startProc(ctx, "teamsbot", svcAddr, "/healthz", filepath.Join(dir, "teamsbot.log"), env, argv...)
	if err != nil {
		return err
	}
	defer svc.stop()

	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 200, MaxIdleConnsPerHost: 200}}
	url := "http://" + svcAddr + "/api/messages"
	post := func(ctx context.Context, n, chat int) error {
		tag := "q-" + strconv.Itoa(n)
		body := streamActivity(f.connURL, "streams-"+strconv.Itoa(n), convOf(chat), tenantOfChat(chat), tag+" how did the quarter go?")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("turn %s: %w", tag, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return fmt.Errorf("turn %s: status %d", tag, resp.StatusCode)
		}
		return nil
	}
	// turnsAt posts turns first..first+count-1 from 100 senders, turn i to
	// chat i % chats, and returns each one's start and the channel closed
	// on its final message (nil when the POST failed).
	turnsAt := func(first, count int) ([]time.Time, []<-chan struct{}, int, error) {
		starts := make([]time.Time, count)
		dones := make([]<-chan struct{}, count)
		var next atomic.Int64
		var wg sync.WaitGroup
		var mu sync.Mutex
		var firstErr error
		rejected := 0
		for range min(100, count) {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < count; i = int(next.Add(1)) - 1 {
					n := first + i
					done := tl.expect("q-" + strconv.Itoa(n))
					starts[i] = time.Now()
					if err := post(ctx, n, i%o.chats); err != nil {
						mu.Lock()
						rejected++
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						continue
					}
					dones[i] = done
				}
			})
		}
		wg.Wait()
		if firstErr != nil {
			logf("%d turns not taken, the first: %v", rejected, firstErr)
		}
		return starts, dones, rejected, ctx.Err()
	}
	// wait waits for every final message, up to lostAfter, and returns
	// each turn's time to it (those lost left out).
	wait := func(starts []time.Time, dones []<-chan struct{}, first int) ([]time.Duration, int) {
		limit := time.NewTimer(lostAfter)
		defer limit.Stop()
		var took []time.Duration
		lost := 0
		expired := false
		for i, done := range dones {
			if done == nil {
				lost++
				continue
			}
			answered := false
			if expired {
				// Past the limit: only those already in.
				select {
				case <-done:
					answered = true
				default:
				}
			} else {
				select {
				case <-done:
					answered = true
				case <-limit.C:
					expired = true
				case <-ctx.Done():
					expired = true
				}
			}
			if !answered {
				lost++
				continue
			}
			tl.mu.Lock()
			at := tl.finals["q-"+strconv.Itoa(first+i)]
			tl.mu.Unlock()
			took = append(took, at.Sub(starts[i]))
		}
		return took, lost
	}

	// Warm up: one turn per chat, all at once, stores each conversation's
	// reference (and fetches keys and tokens, opens connections).
	logf("warm-up: %d turns, one per chat", o.chats)
	const warmBase = 1_000_000_000
	ws, wd, wr, err := turnsAt(warmBase, o.chats)
	if err != nil {
		return err
	}
	if _, lost := wait(ws, wd, warmBase); lost > 0 || wr > 0 {
		return fmt.Errorf("warm-up: %d of %d turns lost", lost, o.chats)
	}
	// Let the warm-up's streams end (their last calls) before counting.
	time.Sleep(2 * time.Second)
	tl.mu.Lock()
	tl.counting = true
	tl.extraFinal = 0
	tl.mu.Unlock()
	m.peak(true)
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", svc.pid()), []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the service's peak RSS: %w", err)
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("resetting the load's peak RSS: %w", err)
	}
	cpu0, err := processCPU(svc.pid())
	if err != nil {
		return err
	}

	logf("%d turns at once from %d chats in %d tenants", o.turns, o.chats, o.tenants)
	r := streamsResult{Turns: o.turns, Chats: o.chats, Tenants: o.tenants, GoMemLimit: o.goMemLimit}
	if n, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0); err == nil {
		// The raw syscall answers 20 - nice.
		r.LoadNice = 20 - n
		r.ServiceNice = r.LoadNice + o.serviceNice
	}
	t0 := time.Now()
	profiled := make(chan error, 1)
	if o.profile {
		go func() {
			rss, err := profileAtPeak(ctx, m, svc.pid(), pprofAddr, dir, o.turns)
			r.ProfileRSS = rss
			profiled <- err
		}()
	} else {
		profiled <- nil
	}
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	lagged := make(chan []time.Duration, 1)
	go func() { lagged <- schedulingLag(stopSampling) }()
	go func() {
		defer close(sampled)
		r.Timeline, r.ProfiledAt = sample(ctx, stopSampling, t0, svc.pid(), m, tl, pprofAddr, dir, o.profile)
	}()
	starts, dones, rejected, err := turnsAt(1, o.turns)
	if err != nil {
		return err
	}
	r.Posting = time.Since(t0)
	r.Rejected = rejected
	took, lost := wait(starts, dones, 1)
	r.Elapsed = time.Since(t0)
	if err := <-profiled; err != nil {
		logf("profiles: %v", err)
	} else if o.profile {
		r.Profiles = dir
	}
	// The streams' last calls follow the final message at once; wait a
	// moment for stragglers before counting.
	time.Sleep(2 * time.Second)
	close(stopSampling)
	<-sampled
	lag := <-lagged
	slices.Sort(lag)
	r.LagP99 = percentile(lag, 0.99)
	if len(lag) > 0 {
		r.LagMax = lag[len(lag)-1]
	}
	if err := writeTimeline(filepath.Join(dir, "timeline.tsv"), r.Timeline); err != nil {
		return err
	}
	cpu1, err := processCPU(svc.pid())
	if err != nil {
		return err
	}
	r.ServiceCPU = cpu1 - cpu0
	if r.ServiceRSS, err = peakRSS(svc.pid()); err != nil {
		return err
	}
	if r.LoadRSS, err = peakRSS(os.Getpid()); err != nil {
		return err
	}
	r.Answered, r.Lost = len(took), lost
	slices.Sort(took)
	r.P50, r.P99 = percentile(took, 0.5), percentile(took, 0.99)
	if len(took) > 0 {
		r.Max = took[len(took)-1]
	}
	r.ModelPeakOpen = m.peak(false)
	r.ModelMalformed = m.malformed.Load()

	tl.mu.Lock()
	tl.counting = false
	r.Calls, r.ExtraFinals = tl.calls, tl.extraFinal
	r.ConvOver = make([]int, len(conversationLimits))
	for _, ts := range tl.perConv {
		slices.SortFunc(ts, time.Time.Compare)
		for i, w := range conversationLimits {
			r.ConvOver[i] += countOver(ts, w)
		}
	}
	for _, ts := range tl.perTenant {
		slices.SortFunc(ts, time.Time.Compare)
		r.TenantOver += countOver(ts, tenantLimit)
		if s := shortestSpan(ts, tenantLimit.n); s > 0 && (r.TenantShortest == 0 || s < r.TenantShortest) {
			r.TenantShortest = s
		}
	}
	for _, ts := range tl.perStream {
		slices.SortFunc(ts, time.Time.Compare)
		r.Updates += len(ts)
		r.StreamOver += countOver(ts, streamLimit)
		if s := shortestSpan(ts, 1); s > 0 && (r.StreamShortest == 0 || s < r.StreamShortest) {
			r.StreamShortest = s
		}
	}
	r.Streams = len(tl.perStream)
	tl.mu.Unlock()

	md := streamsTable(r)
	if _, err := io.WriteString(stdout, md); err != nil {
		return err
	}
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("results: %w", err)
		}
	}
	var fails []string
	if r.Lost > 0 {
		fails = append(fails, fmt.Sprintf("%d of %d turns lost", r.Lost, r.Turns))
	}
	if r.StreamOver > 0 {
		fails = append(fails, fmt.Sprintf("%d stream updates sooner than a second after their stream's previous one", r.StreamOver))
	}
	if r.ModelMalformed > 0 {
		fails = append(fails, fmt.Sprintf("%d model requests malformed", r.ModelMalformed))
	}
	if len(fails) > 0 {
		return errors.New(strings.Join(fails, "; "))
	}
	return nil
}

// profileAtPeak saves the service's CPU profile of the load's first
// 10 s (while the turns are posted), then its heap (live objects, after
// a collection), allocation and goroutine profiles once the model's count
// of open requests has peaked (a second below its most, the most at least
// a tenth of the turns), and returns the service's resident memory then.
func profileAtPeak(ctx context.Context, m *slowModel, pid int, pprofAddr, dir string, turns int) (int64, error) {
	cpu := make(chan error, 1)
	go func() {
		cpu <- fetchProfile(ctx, pprofAddr, "profile", 10*time.Second, filepath.Join(dir, "cpu.pprof"))
	}()
	deadline := time.Now().Add(120 * time.Second)
	var most int64
	below := 0
	for time.Now().Before(deadline) && (below < 5 || most*10 < int64(turns)) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if n := m.open.Load(); n > most {
			most, below = n, 0
		} else {
			below++
		}
	}
	rss, err := residentSet(pid)
	if err != nil {
		return 0, err
	}
	for _, p := range []struct{ path, file string }{
		{"goroutine", "goroutine.pprof"}, {"heap?gc=1", "heap.pprof"}, {"allocs", "allocs.pprof"},
	} {
		if err := fetchPprof(ctx, pprofAddr, p.path, filepath.Join(dir, p.file)); err != nil {
			return rss, err
		}
	}
	return rss, <-cpu
}

// residentSet is a process's resident set now (VmRSS) in bytes.
func residentSet(pid int) (int64, error) {
	v, err := procStatus(pid, "VmRSS")
	return v[0], err
}

// procStatus reads fields in kB of /proc/PID/status, in bytes.
func procStatus(pid int, fields ...string) ([]int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, fmt.Errorf("status of %d: %w", pid, err)
	}
	out := make([]int64, len(fields))
	found := 0
	for line := range strings.SplitSeq(string(data), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if i := slices.Index(fields, name); ok && i >= 0 {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("status of %d: %s: %w", pid, name, err)
			}
			out[i] = kb << 10
			found++
		}
	}
	if found < len(fields) {
		return nil, fmt.Errorf("status of %d: want %v", pid, fields)
	}
	return out, nil
}

// fetchPprof saves /debug/pprof/path of the service's internal listener.
// goMemory reads Go's heap and stacks in use from the service's metrics
// (client_golang's Go collector), as a scrape would; -1 each when they
// cannot be read.
func goMemory(ctx context.Context, addr string) (heap, stack int64) {
	heap, stack = -1, -1
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return heap, stack
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return heap, stack
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return heap, stack
	}
	for line := range strings.Lines(string(b)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "go_memstats_heap_inuse_bytes":
			heap = int64(v)
		case "go_memstats_stack_inuse_bytes":
			stack = int64(v)
		}
	}
	return heap, stack
}

func fetchPprof(ctx context.Context, addr, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", path, resp.StatusCode)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(file, b, 0o644)
}

// streamActivity is a Teams personal-chat message with text, in conv of
// tenant, from the benchmark's person.
func streamActivity(serviceURL, id, conv, tenant, text string) []byte {
	m := map[string]any{
		"type": "message", "id": id, "timestamp": time.Now().UTC().Format(time.RFC3339Nano), "serviceUrl": serviceURL,
		"channelId": "msteams", "from": map[string]any{"id": "29:1a2b3c", "name": "Ada Lovelace", "aadObjectId": userOID},
		"recipient":  map[string]any{"id": "28:" + appID, "name": "TicketIQ"},
		"textFormat": "plain", "locale": "en-US",
		"conversation": map[string]any{"id": conv, "conversationType": "personal", "tenantId": tenant},
		"channelData":  map[string]any{"tenant": map[string]any{"id": tenant}},
		"entities":     []any{map[string]any{"type": "clientInfo", "locale": "en-US", "platform": "Web"}},
		"text":         text,
	}
	b, _ := json.Marshal(m)
	return b
}

// streamsTable writes r as Markdown.
func streamsTable(r streamsResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %d slow streamed turns at once, teamsbot in its own process\n\n", r.Turns)
	if r.LoadNice != r.ServiceNice {
		fmt.Fprintf(&b, "The load process ran at niceness %d and the service at %d, so that the fakes stamp each call as it arrives.\n\n", r.LoadNice, r.ServiceNice)
	}
	if r.GoMemLimit != "" {
		fmt.Fprintf(&b, "The service ran with `GOMEMLIMIT=%s`.\n\n", r.GoMemLimit)
	}
	fmt.Fprintf(&b, "%s. The model streams its first words after %v, then a piece every %v, %v in all; %d personal chats in %d tenants (%d turns at once per chat, %d per tenant), each chat warmed by one turn first. Posting the turns took %.1f s; the whole load %.1f s.\n\n",
		machine(), modelFirst, modelPace, modelTotal, r.Chats, r.Tenants, r.Turns/r.Chats, r.Turns/r.Tenants, r.Posting.Seconds(), r.Elapsed.Seconds())
	b.WriteString("| what | measured | target |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| turns answered (a message with the turn's answer within %v) | %d of %d; %d lost, %d not taken, %d answers sent twice | none lost %s |\n",
		lostAfter, r.Answered, r.Turns, r.Lost, r.Rejected, r.ExtraFinals, yesNo(r.Lost == 0))
	fmt.Fprintf(&b, "| a turn, its POST to its final message at the connector | p50 %.2f s, p99 %.2f s, longest %.2f s | — |\n", r.P50.Seconds(), r.P99.Seconds(), r.Max.Seconds())
	fmt.Fprintf(&b, "| model requests open at once, at most | %d | all %d turns |\n", r.ModelPeakOpen, r.Turns)
	fmt.Fprintf(&b, "| connector calls | %d (%.2f a turn); %d streams, %.2f updates each | — |\n",
		r.Calls, float64(r.Calls)/float64(max(1, r.Turns)), r.Streams, float64(r.Updates)/float64(max(1, r.Streams)))
	fmt.Fprintf(&b, "| stream updates sooner than 1 s after the stream's previous one | %d (closest two %.0f ms apart) | none %s |\n", r.StreamOver, ms(r.StreamShortest), yesNo(r.StreamOver == 0))
	for i, w := range conversationLimits {
		fmt.Fprintf(&b, "| calls over a conversation's %d in %v | %d | none %s |\n", w.n, w.d, r.ConvOver[i], yesNo(r.ConvOver[i] == 0))
	}
	fmt.Fprintf(&b, "| calls over a tenant's %d a second | %d (31 calls to one tenant within %.0f ms at the closest) | none %s |\n", tenantLimit.n, r.TenantOver, ms(r.TenantShortest), yesNo(r.TenantOver == 0))
	fmt.Fprintf(&b, "| the service's peak RSS (`VmHWM` of its process, reset after the warm-up) | %.0f MiB | under 500 MB %s |\n", float64(r.ServiceRSS)/(1<<20), yesNo(r.ServiceRSS < 500_000_000))
	fmt.Fprintf(&b, "| the service's CPU (user and system) over the load | %.1f s (%.2f ms a turn) | — |\n", r.ServiceCPU.Seconds(), ms(r.ServiceCPU)/float64(max(1, r.Turns)))
	fmt.Fprintf(&b, "| the load process's peak RSS (fake model, fake Bot Framework, clients) | %.0f MiB | — |\n", float64(r.LoadRSS)/(1<<20))
	fmt.Fprintf(&b, "| the load process's lateness waking from a 10 ms sleep (which its stamps carry) | p99 %.0f ms, at most %.0f ms | — |\n", ms(r.LagP99), ms(r.LagMax))
	var top point
	for _, p := range r.Timeline {
		if p.RSS > top.RSS {
			top = p
		}
	}
	if top.RSS > 0 {
		fmt.Fprintf(&b, "\nThe service's resident set, sampled every 500 ms, was largest %.1f s after the first POST: %.0f MiB (%.0f MiB anonymous, %.0f MiB of mapped files; Go's heap %.0f MiB and its stacks %.0f MiB in use), with %d model requests open and %d of %d final messages in (timeline.tsv in the working folder).\n",
			top.At.Seconds(), float64(top.RSS)/(1<<20), float64(top.Anon)/(1<<20), float64(top.File)/(1<<20), float64(top.Heap)/(1<<20), float64(top.Stack)/(1<<20), top.ModelOpen, top.Finals, r.Turns)
	}
	for _, p := range r.ProfiledAt {
		fmt.Fprintf(&b, "\n%s: heap and goroutine profiles %.1f s after the first POST (resident set %.0f MiB, %d model requests open, %d final messages in).", p.ProfileFile, p.At.Seconds(), float64(p.RSS)/(1<<20), p.ModelOpen, p.Finals)
	}
	if len(r.ProfiledAt) > 0 {
		b.WriteString("\n")
	}
	if r.Profiles != "" {
		fmt.Fprintf(&b, "\nThe service's CPU profile of the load's first 10 s, and its heap, allocation and goroutine profiles at the model's peak (the service's resident set then %.0f MiB) are in %s.\n", float64(r.ProfileRSS)/(1<<20), r.Profiles)
	}
	return b.String()
}
