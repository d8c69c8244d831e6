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
// times it is most of the service's memory (1 GiB at 10,000 such turns).
// So, unless GOGC is set, the garbage allowed is bounded. Go allows GOGC
// percent of what a collection scans (the live heap, the goroutines'
// stacks and the globals): up to gcQuick scanned, as quick turns keep it,
// the target stays at 200 (gcHeadroom of garbage at most); past it the
// garbage allowed falls as what is scanned grows, to gcMinHeadroom, and
// the target with it, down to minGCPercent and no lower: past that the
// collector would run more and more often for less and less. The
// collections cost the slow turns some CPU, which the figures in
// docs/performance.md weigh against the memory.
const (
	gcQuick        = 64 << 20
	gcHeadroom     = 128 << 20
	gcMinHeadroom  = 32 << 20
	minGCPercent   = 10
	gcTargetStep   = 5
	gcTargetPeriod = 250 * time.Millisecond
)

// gcTarget is the collector's target when a collection scans scanned
// bytes, in steps of gcTargetStep, so that a live heap going up and down
// a little does not change it at every collection.
func gcTarget(scanned uint64) int {
	if scanned == 0 {
		return defaultGCPercent
	}
	allowed := max(gcMinHeadroom, gcHeadroom*gcQuick/scanned)
	p := min(uint64(defaultGCPercent), 100*allowed/scanned)
	p -= p % gcTargetStep
	return int(max(uint64(minGCPercent), p))
}

// gcScanned is what the last collection scanned, from which Go reckons
// the garbage GOGC allows: the heap it found live, the goroutines' stacks
// and the globals.
func gcScanned() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	var n uint64
	for _, v := range s {
		if v.Value.Kind() == metrics.KindUint64 {
			n += v.Value.Uint64()
		}
	}
	return n
}

// followLiveHeap sets the collector's target from what it scans every
// period until the returned function is called, which waits for it to
// stop and puts the default target back. read and set are gcScanned and
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
			scanned := read()
			if target := gcTarget(scanned); target != current {
				set(target)
				logger.Debug("garbage collector's target follows the live heap", "scanned_bytes", scanned, "gogc", target)
				current = target
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
