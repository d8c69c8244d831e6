package main

import (
	"io"
	"log/slog"
	"runtime"
	"sync"
	"testing"
	"time"
)

// The collector's target is the default while a collection scans as
// little as quick turns leave live, and falls as that grows so that the
// garbage allowed falls from gcHeadroom to gcMinHeadroom, never under
// minGCPercent.
func TestGCTargetFollowsTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		scanned uint64
		want    int
	}{
		{0, defaultGCPercent},        // no collection yet
		{20 * mib, defaultGCPercent}, // quick turns
		{64 * mib, defaultGCPercent}, // 128 MiB of garbage allowed at 200
		{80 * mib, 125},              // 102 allowed, in steps of 5
		{100 * mib, 80},              // 82 allowed
		{128 * mib, 50},              // 64 MiB at 50
		{200 * mib, 20},              // thousands of slow turns: 41 MiB at 20
		{256 * mib, minGCPercent},    // 32 MiB: 12 percent, and no lower than 10
		{1024 * mib, minGCPercent},   // never under 10: the collector would run without pause
	} {
		got := gcTarget(c.scanned)
		if got != c.want {
			t.Errorf("gcTarget(%d MiB) = %d, want %d", c.scanned/mib, got, c.want)
		}
		garbage := uint64(got) * c.scanned / 100
		if c.scanned <= gcQuick {
			continue
		}
		if allowed := max(gcMinHeadroom, gcHeadroom*gcQuick/c.scanned); got > minGCPercent && garbage > allowed+mib {
			t.Errorf("at %d MiB scanned, GOGC %d allows %d MiB of garbage, over %d", c.scanned/mib, got, garbage/mib, allowed/mib)
		}
	}
}

// gcScanned counts what a collection scans: at least the live heap this
// test holds.
func TestGCScannedCountsTheLiveHeap(t *testing.T) {
	hold := make([]byte, 64<<20)
	for i := range hold {
		hold[i] = byte(i)
	}
	runtime.GC()
	if got := gcScanned(); got < uint64(len(hold)) {
		t.Errorf("gcScanned() = %d with %d bytes held live", got, len(hold))
	}
	runtime.KeepAlive(hold)
}

// The target is set when the live heap calls for another one, only then,
// and the default is put back once the service stops.
func TestFollowLiveHeapSetsAndRestores(t *testing.T) {
	var mu sync.Mutex
	live := uint64(10 << 20)
	var set []int
	stop := followLiveHeap(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Millisecond,
		func() uint64 { mu.Lock(); defer mu.Unlock(); return live },
		func(p int) int { mu.Lock(); defer mu.Unlock(); set = append(set, p); return 0 })
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			mu.Lock()
			ok := cond()
			mu.Unlock()
			if ok {
				return
			}
		}
		t.Fatalf("%s: set %v", what, set)
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(set) != 0 {
		t.Errorf("with a small live heap the target was set to %v, want it left at the default", set)
	}
	live = 512 << 20
	mu.Unlock()
	waitFor("a large live heap lowers the target", func() bool { return len(set) == 1 && set[0] == minGCPercent })
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	if len(set) != 1 {
		t.Errorf("the same live heap set the target again: %v", set)
	}
	mu.Unlock()
	stop()
	mu.Lock()
	defer mu.Unlock()
	if n := len(set); n != 2 || set[n-1] != defaultGCPercent {
		t.Errorf("after stop the targets set were %v, want the default put back last", set)
	}
}
