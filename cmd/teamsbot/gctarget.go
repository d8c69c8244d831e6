package main

import (
	"context"
	"log/slog"
	"runtime/metrics"
	"sync"
	"time"
)

// The collector's target follows the live heap. At its default GOGC of
// 200 the service lets the heap grow to three times what is live before a
// collection: about a tenth less CPU a turn while turns are quick and the
// live heap small (tens of MiB). When thousands of turns wait on slow
// models the live heap is hundreds of MiB, it grows slowly, and three
// times it is most of the service's memory (1 GiB at 10,000 such turns)
// for no CPU that could be measured. So, unless GOGC is set, the garbage
// allowed over the live heap is kept under gcHeadroom, the target going
// from 200 down to 50 as the live heap grows past gcHeadroom/2, and no
// lower: past a live heap of twice gcHeadroom the collector would run
// more and more often for less and less (docs/performance.md).
const (
	gcHeadroom     = 128 << 20
	minGCPercent   = 50
	gcTargetStep   = 25
	gcTargetPeriod = 250 * time.Millisecond
)

// gcTarget is the collector's target for a live heap of live bytes, in
// steps of gcTargetStep, so that a live heap going up and down a little
// does not change it at every collection.
func gcTarget(live uint64) int {
	if live == 0 {
		return defaultGCPercent
	}
	p := min(uint64(defaultGCPercent), 100*gcHeadroom/live)
	p -= p % gcTargetStep
	return int(max(uint64(minGCPercent), p))
}

// liveHeap is the heap the last collection found live.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// followLiveHeap sets the collector's target from the live heap every
// period until the returned function is called, which waits for it to
// stop and puts the default target back. read and set are liveHeap and
// debug.SetGCPercent but for tests.
func followLiveHeap(logger *slog.Logger, period time.Duration, read func() uint64, set func(int) int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		current := defaultGCPercent
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if current != defaultGCPercent {
					set(defaultGCPercent)
				}
				return
			case <-t.C:
			}
			live := read()
			if target := gcTarget(live); target != current {
				set(target)
				logger.Debug("garbage collector's target follows the live heap", "live_bytes", live, "gogc", target)
				current = target
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
