package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Sweep batch sizing: a sweep transaction should stay well under
// sweepTarget, because every write of the service waits while it runs. The
// batch shrinks when one takes longer than half the target and grows
// while they are fast.
const (
	defaultSweepBatch = 1000
	minSweepBatch     = 16
	maxSweepBatch     = 2000
	sweepTarget       = 50 * time.Millisecond
)

// SweepStats says what one sweep removed.
type SweepStats struct {
	Views, HTML int
	Longest     time.Duration // longest write transaction
	// Transactions is how many write transactions the sweep took.
	Transactions int
}

// Sweep deletes expired views and unreferenced HTML in short transactions.
//
// It reads the expiry index from its start up to the store's clock, so it
// never looks at a live view; each transaction collects a bounded batch of
// expired entries and then deletes them (never deleting under a moving
// cursor), releasing each view's HTML and deleting a document with its
// last view. It stops early, with ctx's error and what it did so far, when
// ctx is cancelled.
func (s *Store) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	cutoff := timeKey(s.now())
	batch := s.sweepBatch
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		var views, html int
		start := time.Now()
		err := s.db.Update(func(tx *bbolt.Tx) error {
			views, html = 0, 0
			expiry := tx.Bucket([]byte(bucketViewsByExpiry))
			type entry struct{ key, sha []byte }
			var todo []entry
			c := expiry.Cursor()
			for k, v := c.First(); k != nil && len(todo) < batch; k, v = c.Next() {
				if len(k) < 8 || bytes.Compare(k[:8], cutoff[:]) > 0 {
					break
				}
				todo = append(todo, entry{bytes.Clone(k), bytes.Clone(v)})
			}
			viewsB := tx.Bucket([]byte(bucketViews))
			for _, e := range todo {
				// The index entry is removed whenever its view is
				// replaced, so it always names the stored view.
				if err := viewsB.Delete(e.key[8:]); err != nil {
					return err
				}
				if err := expiry.Delete(e.key); err != nil {
					return err
				}
				views++
				gone, err := dropHTMLRef(tx, e.sha)
				if err != nil {
					return err
				}
				if gone {
					html++
				}
			}
			return nil
		})
		took := time.Since(start)
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return st, ErrClosed
		}
		if err != nil {
			return st, fmt.Errorf("store: sweep: %w", err)
		}
		st.Transactions++
		st.Views += views
		st.HTML += html
		st.Longest = max(st.Longest, took)
		if views < batch {
			return st, nil
		}
		switch {
		case took > sweepTarget/2:
			batch = max(batch/2, minSweepBatch)
		case took < sweepTarget/5:
			batch = min(batch*2, maxSweepBatch)
		}
	}
}

// RunSweeper sweeps at once and then every interval until ctx is done,
// logging what each sweep removed. It returns when ctx is done or the store
// is closed; run it in its own goroutine.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		start := time.Now()
		st, err := s.Sweep(ctx)
		attrs := []any{"views", st.Views, "html", st.HTML, "transactions", st.Transactions,
			"longest", st.Longest, "took", time.Since(start)}
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil && ctx.Err() == nil:
			s.log.Error("store sweep failed", append(attrs, "err", err)...)
		case st.Views > 0 || st.HTML > 0:
			s.log.Info("store sweep", attrs...)
		default:
			s.log.Debug("store sweep", attrs...)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.stopped: // closed
			return
		case <-t.C:
		}
	}
}
