package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"teamsbot/agent"
)

// TestTurnsAgainstFloorBot is a smoke test of the load generator: a few
// turns through the fakes and the floor bot, in this process, all answered.
func TestTurnsAgainstFloorBot(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	f, err := startFakes(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cardFile := filepath.Join(dir, "card.json")
	if err := os.WriteFile(cardFile, []byte(card), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- serveFloorBot(ctx, addr, f.metadataURL(), f.tokenURL(), cardFile, f.caFile) }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the floor bot did not listen within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	token, err := f.channelToken()
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	l := &turnLoad{f: f, client: &http.Client{Timeout: 10 * time.Second}, url: "http://" + addr + "/api/messages",
		token: token, inflight: 2, max: 6, d: 10 * time.Second, prefix: "smoke-", seq: &seq}
	r, err := measure(ctx, "floor bot", "turns@2", os.Getpid(), l.inflight, l.max, l.d, l.turn)
	if err != nil {
		t.Fatal(err)
	}
	if r.Count != 6 || r.Errors != 0 || r.P50 <= 0 || r.P99 < r.P50 {
		t.Errorf("result = %+v, want 6 answered turns and ordered percentiles", r)
	}
	if got := f.messages.Load(); got != 6 {
		t.Errorf("connector got %d messages, want 6", got)
	}

	// A forged token is refused, and nothing reaches the connector.
	l.token = token[:len(token)-4] + "AAAA"
	if _, err := l.turn(ctx); err == nil {
		t.Error("a turn with a forged token was answered")
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("floor bot: %v", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:0": true, "[::1]:80": true, ":3978": false, "0.0.0.0:1": false, "10.0.0.1:80": false} {
		if err := loopbackAddr(addr); (err == nil) != ok {
			t.Errorf("loopbackAddr(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

// TestSlowModelThroughTheServiceClient streams two answers at once from
// the fake model over https to the service's own model client, as the
// streams measurement configures it: each answer names its question's
// tag, comes in pieces at the model's pace, and both count as open at
// once.
func TestSlowModelThroughTheServiceClient(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, pemBytes, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	m := &slowModel{first: 50 * time.Millisecond, pace: 100 * time.Millisecond, total: 500 * time.Millisecond, pieces: 3}
	base, err := m.serveTLS(ctx, cert)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemBytes)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	model, err := agent.NewOpenAIModel(agent.ModelConfig{Kind: agent.ModelOpenAI, BaseURL: base, Model: "bench-slow"}, agent.OpenAIOptions{Key: "k", Transport: tr})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, tag := range []string{"q-7", "q-8"} {
		wg.Go(func() {
			var pieces []string
			start := time.Now()
			msg, err := model.Next(ctx, agent.Turn{Messages: []agent.Message{{Role: agent.RoleUser, Text: "q-1 earlier"}, {Role: agent.RoleUser, Text: tag + " how did the quarter go?"}},
				Stream: func(d string) { pieces = append(pieces, d) }})
			took := time.Since(start)
			if err != nil {
				t.Errorf("%s: %v", tag, err)
				return
			}
			if want := "The answer to " + tag + ": Piece 1. Piece 2."; msg.Text != want || len(pieces) != 3 {
				t.Errorf("%s: answer %q in %d pieces, want %q in 3", tag, msg.Text, len(pieces), want)
			}
			if took < 500*time.Millisecond {
				t.Errorf("%s: answered in %v, before the model's 500 ms", tag, took)
			}
		})
	}
	wg.Wait()
	if p := m.peak(false); p != 2 || m.malformed.Load() != 0 {
		t.Errorf("peak open %d, malformed %d; want 2 and 0", p, m.malformed.Load())
	}
	if m.open.Load() != 0 {
		t.Errorf("%d requests still open", m.open.Load())
	}
}

func TestCountOver(t *testing.T) {
	t0 := time.Unix(1_764_842_400, 0)
	at := func(ms ...int) []time.Time {
		var ts []time.Time
		for _, m := range ms {
			ts = append(ts, t0.Add(time.Duration(m)*time.Millisecond))
		}
		return ts
	}
	for _, c := range []struct {
		times    []time.Time
		w        window
		over     int
		shortest time.Duration
	}{
		{at(0, 1000, 2000), streamLimit, 0, time.Second},
		{at(0, 999, 2000), streamLimit, 1, 999 * time.Millisecond},
		{at(0, 100, 200, 1100), window{time.Second, 2}, 1, 200 * time.Millisecond},
		{at(0), streamLimit, 0, 0},
	} {
		if got := countOver(c.times, c.w); got != c.over {
			t.Errorf("countOver(%v, %v) = %d, want %d", c.times, c.w, got, c.over)
		}
		if got := shortestSpan(c.times, c.w.n); got != c.shortest {
			t.Errorf("shortestSpan(%v, %d) = %v, want %v", c.times, c.w.n, got, c.shortest)
		}
	}
}

// A working card quotes the question, and so names its tag; only the
// answer counts as the turn's final message.
func TestAnswerOf(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"message","attachments":[{"content":{"body":[{"text":"The answer to q-12: Piece 1."}]}}]}`: "q-12",
		`{"type":"message","text":"Working on: q-12 how did the quarter go?"}`:                              "",
		`{"type":"message","text":"q-3 earlier. The answer to q-4: Piece 1."}`:                              "q-4",
	} {
		if got := answerOf([]byte(body)); got != want {
			t.Errorf("answerOf(%s) = %q, want %q", body, got, want)
		}
	}
}
