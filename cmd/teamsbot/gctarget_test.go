package main

import (
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// The collector's target is the default while the live heap is small, and
// falls as it grows so that the garbage allowed stays under gcHeadroom,
// never under minGCPercent.
func TestGCTargetFollowsTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, defaultGCPercent},        // no collection yet
		{20 * mib, defaultGCPercent}, // quick turns
		{64 * mib, defaultGCPercent}, // 128 MiB of garbage allowed at 200
		{100 * mib, 125},             // 128 allowed, in steps of 25
		{128 * mib, 100},             // 128 MiB at 100
		{200 * mib, 50},              // thousands of slow turns: 64, in steps of 25
		{256 * mib, minGCPercent},    // 128 MiB at 50
		{1024 * mib, minGCPercent},   // never under 50: the collector would run without pause
	} {
		if got := gcTarget(c.live); got != c.want {
			t.Errorf("gcTarget(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
		if got := gcTarget(c.live); c.live >= 64*mib && c.live <= 256*mib && uint64(got)*c.live/100 > 128*mib+mib {
			t.Errorf("at %d MiB live, GOGC %d allows %d MiB of garbage, over the headroom", c.live/mib, got, uint64(got)*c.live/100/mib)
		}
	}
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
