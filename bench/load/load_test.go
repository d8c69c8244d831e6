package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
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
