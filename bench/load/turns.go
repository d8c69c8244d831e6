package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// result is one measurement of one target at one load.
type result struct {
	Target   string
	Load     string // "turns@50", "view-api", ...
	Inflight int
	Count    int
	Errors   int
	Elapsed  time.Duration
	P50, P99 time.Duration
	CPU      time.Duration // the target process's user+system time
}

// PerSecond is the throughput.
func (r result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Count) / r.Elapsed.Seconds()
}

// CPUPer is the target's CPU per completed operation.
func (r result) CPUPer() time.Duration {
	if r.Count == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Count)
}

// turnLoad sends messages to one bot's /api/messages, each answered at the
// fake connector, inflight at a time, until max turns or d has passed.
type turnLoad struct {
	f        *fakes
	client   *http.Client
	url      string // the bot's /api/messages
	token    string
	inflight int
	max      int
	d        time.Duration
	// prefix makes activity ids unique across rounds and targets; seq
	// spreads turns over conversations and tenants.
	prefix string
	seq    *atomic.Int64
}

// conversations is how many personal chats the messages come from: enough
// that none passes Teams' per-conversation rate (3 turns a second, 27 in
// 30 s) at the loads measured, few enough that the warm-up visits each
// once, so that the rounds measure steady turns and not first contacts.
const conversations = 4000

// activity is a Teams personal-chat message with "/sales_report {}". The
// conversation and the tenant change with every turn (see tenantCount).
func (l *turnLoad) activity(id string, n int64) []byte {
	tenant := tenantID(int(n))
	conv := "a:bench-" + strconv.FormatInt(n%conversations, 10)
	var b bytes.Buffer
	b.Grow(900)
	b.WriteString(`{"type":"message","id":"`)
	b.WriteString(id)
	b.WriteString(`","timestamp":"2026-12-02T10:00:00.000Z","serviceUrl":"`)
	b.WriteString(l.f.connURL)
	b.WriteString(`","channelId":"msteams","from":{"id":"29:1a2b3c","name":"Ada Lovelace","aadObjectId":"`)
	b.WriteString(userOID)
	b.WriteString(`"},"recipient":{"id":"28:`)
	b.WriteString(appID)
	b.WriteString(`","name":"TicketIQ"},"textFormat":"plain","locale":"en-US","conversation":{"id":"`)
	b.WriteString(conv)
	b.WriteString(`","conversationType":"personal","tenantId":"`)
	b.WriteString(tenant)
	b.WriteString(`"},"channelData":{"tenant":{"id":"`)
	b.WriteString(tenant)
	b.WriteString(`"}},"entities":[{"type":"clientInfo","locale":"en-US","platform":"Web"}],"text":"/sales_report {}"}`)
	return b.Bytes()
}

// turn sends one message and waits for its answer at the connector.
func (l *turnLoad) turn(ctx context.Context) (time.Duration, error) {
	n := l.seq.Add(1)
	id := l.prefix + strconv.FormatInt(n, 10)
	body := l.activity(id, n)
	done := l.f.expect(id)
	start := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(body))
	if err != nil {
		l.f.forget(id)
		return 0, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := l.client.Do(req)
	if err != nil {
		l.f.forget(id)
		return 0, fmt.Errorf("POST: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		l.f.forget(id)
		return 0, fmt.Errorf("POST: status %d", resp.StatusCode)
	}
	t := time.NewTimer(30 * time.Second)
	defer t.Stop()
	select {
	case <-done:
		return time.Since(start), nil
	case <-t.C:
		l.f.forget(id)
		return 0, errors.New("no answer within 30 s")
	case <-ctx.Done():
		l.f.forget(id)
		return 0, ctx.Err()
	}
}

// closedLoop runs op from inflight workers until max operations or d,
// and returns the latencies of those that succeeded.
func closedLoop(ctx context.Context, inflight, max int, d time.Duration, op func(context.Context) (time.Duration, error)) (lat []time.Duration, errs int, firstErr error, elapsed time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d+35*time.Second)
	defer cancel()
	deadline := time.Now().Add(d)
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for range inflight {
		wg.Go(func() {
			var mine []time.Duration
			var bad int
			var first error
			for next.Add(1) <= int64(max) && time.Now().Before(deadline) {
				l, err := op(ctx)
				if err != nil {
					bad++
					if first == nil {
						first = err
					}
					continue
				}
				mine = append(mine, l)
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += bad
			if firstErr == nil {
				firstErr = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	return lat, errs, firstErr, time.Since(start)
}

// percentile of sorted latencies.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[int(float64(len(sorted)-1)*p)]
}

// measure runs op as closedLoop does and charges the target pid's CPU.
func measure(ctx context.Context, target, load string, pid, inflight, max int, d time.Duration, op func(context.Context) (time.Duration, error)) (result, error) {
	cpu0, err := processCPU(pid)
	if err != nil {
		return result{}, err
	}
	lat, errs, firstErr, elapsed := closedLoop(ctx, inflight, max, d, op)
	cpu1, err := processCPU(pid)
	if err != nil {
		return result{}, err
	}
	if len(lat) == 0 {
		return result{}, fmt.Errorf("%s %s: nothing succeeded: %w", target, load, firstErr)
	}
	if errs > 0 {
		fmt.Fprintf(os.Stderr, "load: %s %s: %d failed, the first: %v\n", target, load, errs, firstErr)
	}
	slices.Sort(lat)
	return result{Target: target, Load: load, Inflight: inflight, Count: len(lat), Errors: errs, Elapsed: elapsed,
		P50: percentile(lat, 0.5), P99: percentile(lat, 0.99), CPU: cpu1 - cpu0}, nil
}

// processCPU is a process's user and system time so far, from
// /proc/{pid}/stat (in clock ticks of 10 ms, USER_HZ on Linux).
func processCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu of %d: %w", pid, err)
	}
	// The command name may hold spaces: the fields start after its ")".
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cpu of %d: short stat", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cpu of %d: bad stat", pid)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// peakRSS is a process's peak resident set (VmHWM) in bytes.
func peakRSS(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("rss of %d: %w", pid, err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("rss of %d: %w", pid, err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("rss of %d: no VmHWM", pid)
}
