package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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
	// Runs and Deliveries are the runs past Options.RunRetention and
	// their deliveries; Audit the audit records past
	// Options.AuditRetention.
	Runs, Deliveries, Audit int
	// APIKeys are the revoked API keys whose revocation is older than
	// Options.AuditRetention: their records of use are gone by then too.
	APIKeys int
	// Activities are the arrivals of activities whose window is over.
	Activities int
	// RunsHeld counts the runs past their retention kept because a view
	// of theirs can still be opened.
	RunsHeld int
	Longest  time.Duration // longest write transaction
	// Transactions is how many write transactions the sweep took.
	Transactions int
}

func (st *SweepStats) add(o SweepStats) {
	st.Views += o.Views
	st.HTML += o.HTML
	st.Runs += o.Runs
	st.Deliveries += o.Deliveries
	st.Audit += o.Audit
	st.RunsHeld += o.RunsHeld
	st.APIKeys += o.APIKeys
	st.Activities += o.Activities
}

func (st SweepStats) removed() bool {
	return st.Views > 0 || st.HTML > 0 || st.Runs > 0 || st.Deliveries > 0 || st.Audit > 0 || st.APIKeys > 0 || st.Activities > 0
}

// sweepStep deletes one bounded batch in tx, going on from after (nil at
// first). It returns what it deleted and where the next batch starts, or
// a nil next when nothing is left.
type sweepStep func(tx *bbolt.Tx, batch int, after []byte) (did SweepStats, next []byte, err error)

// Sweep deletes what has outlived its time, in short transactions: expired
// and revoked views and unreferenced HTML, then runs and their deliveries
// past Options.RunRetention, then audit records past
// Options.AuditRetention (their index entries with them).
//
// Each part reads an index ordered by time from its start up to its
// cutoff, so it never looks at a record that is kept; each transaction
// collects a bounded batch of keys and then deletes them (never deleting
// under a moving cursor). A view's HTML is released with it, and a
// document deleted with its last view. A run past its retention is kept,
// and looked at again by the next sweep, while a view it made can still be
// opened. It stops early, with ctx's error and what it did so far, when
// ctx is cancelled.
func (s *boltStore) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	now := s.now()
	steps := []sweepStep{s.sweepViews(now), sweepActivities(now)}
	if s.runRetention > 0 {
		steps = append(steps, s.sweepRuns(now, now.Add(-s.runRetention)))
	}
	if s.auditRetention > 0 {
		steps = append(steps, sweepAudit(now.Add(-s.auditRetention)), sweepAPIKeys(now.Add(-s.auditRetention)))
	}
	for _, step := range steps {
		if err := s.sweepLoop(ctx, &st, step); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sweepLoop runs step in write transactions until it is done, sizing the
// batches to the time they take.
func (s *boltStore) sweepLoop(ctx context.Context, st *SweepStats, step sweepStep) error {
	batch := s.sweepBatch
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var did SweepStats
		var next []byte
		start := time.Now()
		err := s.db.Update(func(tx *bbolt.Tx) error {
			var err error
			did, next, err = step(tx, batch, after)
			return err
		})
		took := time.Since(start)
		if errors.Is(err, berrors.ErrDatabaseNotOpen) {
			return ErrClosed
		}
		if err != nil {
			return fmt.Errorf("store: sweep: %w", err)
		}
		st.add(did)
		st.Transactions++
		st.Longest = max(st.Longest, took)
		if next == nil {
			return nil
		}
		after = next
		switch {
		case took > sweepTarget/2:
			batch = max(batch/2, minSweepBatch)
		case took < sweepTarget/5:
			batch = min(batch*2, maxSweepBatch)
		}
	}
}

// more is the next of a step that deletes from the start of its index:
// there may be more when the batch was full.
func more(full bool) []byte {
	if full {
		return []byte{}
	}
	return nil
}

// sweepViews deletes the views whose expiry (or revocation) is at or
// before now, with their views_by_tenant entries, and releases their
// HTML.
func (s *boltStore) sweepViews(now time.Time) sweepStep {
	cutoff := timeKey(now)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		expiry := tx.Bucket([]byte(bucketViewsByExpiry))
		type entry struct{ key, value []byte }
		var todo []entry
		c := expiry.Cursor()
		for k, v := c.First(); k != nil && len(todo) < batch; k, v = c.Next() {
			if len(k) < 8 || bytes.Compare(k[:8], cutoff[:]) > 0 {
				break
			}
			todo = append(todo, entry{bytes.Clone(k), bytes.Clone(v)})
		}
		viewsB := tx.Bucket([]byte(bucketViews))
		byTenant := tx.Bucket([]byte(bucketViewsByTenant))
		for _, e := range todo {
			if len(e.value) < shaHexLen+8 {
				return did, nil, fmt.Errorf("views_by_expiry: malformed value of %x", e.key)
			}
			id, sha := e.key[8:], e.value[:shaHexLen]
			created, tenant := [8]byte(e.value[shaHexLen:shaHexLen+8]), string(e.value[shaHexLen+8:])
			// The index entry is removed whenever its view is
			// replaced, so it always names the stored view.
			if err := viewsB.Delete(id); err != nil {
				return did, nil, err
			}
			if err := expiry.Delete(e.key); err != nil {
				return did, nil, err
			}
			if err := byTenant.Delete(tenantTimeKey(tenant, created, id)); err != nil {
				return did, nil, err
			}
			did.Views++
			gone, err := dropHTMLRef(tx, sha)
			if err != nil {
				return did, nil, err
			}
			if gone {
				did.HTML++
			}
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepRuns deletes the runs made at or before cutoff, with their index
// entries and deliveries, unless a view of theirs can be opened at now.
// The runs so held stay in runs_by_time: the walk goes on after the last
// key it read (after), and reads at most four batches of entries per
// transaction.
func (s *boltStore) sweepRuns(now, cutoff time.Time) sweepStep {
	cut := timeKey(cutoff)
	return func(tx *bbolt.Tx, batch int, after []byte) (SweepStats, []byte, error) {
		var did SweepStats
		runs := tx.Bucket([]byte(bucketRuns))
		views := tx.Bucket([]byte(bucketViews))
		byTime := tx.Bucket([]byte(bucketRunsByTime))
		type entry struct {
			key    []byte // T | id
			tenant string
		}
		var todo []entry
		var last []byte
		c := byTime.Cursor()
		k, _ := c.First()
		if after != nil {
			if k, _ = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, _ = c.Next()
			}
		}
		full := false
		for scanned := 0; k != nil; k, _ = c.Next() {
			if len(k) < 8 || bytes.Compare(k[:8], cut[:]) > 0 {
				break
			}
			if len(todo) == batch || scanned == 4*batch {
				full = true
				break
			}
			scanned++
			last = k
			var r struct {
				TenantID string   `json:"tenantId"`
				ViewIDs  []string `json:"viewIds"`
			}
			data := runs.Get(k[8:])
			if data == nil {
				return did, nil, fmt.Errorf("runs_by_time: no run %q", k[8:])
			}
			if err := json.Unmarshal(data, &r); err != nil {
				return did, nil, fmt.Errorf("run %q: %w", k[8:], err)
			}
			held, err := anyViewOpen(views, r.ViewIDs, now)
			if err != nil {
				return did, nil, fmt.Errorf("run %q: %w", k[8:], err)
			}
			if held {
				did.RunsHeld++
				continue
			}
			todo = append(todo, entry{bytes.Clone(k), r.TenantID})
		}
		var next []byte
		if full {
			next = bytes.Clone(last)
		}
		deliveries := tx.Bucket([]byte(bucketDeliveries))
		byTenant := tx.Bucket([]byte(bucketRunsByTenant))
		for _, e := range todo {
			id := e.key[8:]
			if err := runs.Delete(id); err != nil {
				return did, nil, err
			}
			if err := byTime.Delete(e.key); err != nil {
				return did, nil, err
			}
			if err := byTenant.Delete(tenantTimeKey(e.tenant, [8]byte(e.key[:8]), id)); err != nil {
				return did, nil, err
			}
			did.Runs++
			if deliveries.Get(id) != nil {
				if err := deliveries.Delete(id); err != nil {
					return did, nil, err
				}
				did.Deliveries++
			}
		}
		return did, next, nil
	}
}

// anyViewOpen reports whether one of the views ids is stored and can be
// opened at now.
func anyViewOpen(views *bbolt.Bucket, ids []string, now time.Time) (bool, error) {
	for _, id := range ids {
		data := views.Get([]byte(id))
		if data == nil {
			continue
		}
		var hdr viewHeader
		if err := json.Unmarshal(data, &hdr); err != nil {
			return false, fmt.Errorf("view %q: %w", id, err)
		}
		if hdr.RevokedAt.IsZero() && now.Before(hdr.ExpiresAt) {
			return true, nil
		}
	}
	return false, nil
}

// sweepAudit deletes the audit records whose Time is at or before cutoff,
// with their three index entries.
func sweepAudit(cutoff time.Time) sweepStep {
	cut := timeKey(cutoff)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		main := tx.Bucket([]byte(bucketAudit))
		type entry struct {
			pk             []byte
			tenant, action string
		}
		var todo []entry
		c := main.Cursor()
		for k, v := c.First(); k != nil && len(todo) < batch; k, v = c.Next() {
			if len(k) != 16 || bytes.Compare(k[:8], cut[:]) > 0 {
				break
			}
			var r struct {
				TenantID string `json:"tenantId"`
				Action   string `json:"action"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return did, nil, fmt.Errorf("audit record %x: %w", k, err)
			}
			todo = append(todo, entry{bytes.Clone(k), r.TenantID, r.Action})
		}
		byTenant := tx.Bucket([]byte(bucketAuditByTenant))
		byAction := tx.Bucket([]byte(bucketAuditByAction))
		byBoth := tx.Bucket([]byte(bucketAuditByTenantAction))
		for _, e := range todo {
			if err := main.Delete(e.pk); err != nil {
				return did, nil, err
			}
			if err := byTenant.Delete(indexKey(e.pk, e.tenant)); err != nil {
				return did, nil, err
			}
			if err := byAction.Delete(indexKey(e.pk, e.action)); err != nil {
				return did, nil, err
			}
			if err := byBoth.Delete(indexKey(e.pk, e.tenant, e.action)); err != nil {
				return did, nil, err
			}
			did.Audit++
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepAPIKeys deletes the API keys revoked at or before cutoff. Keys are
// few and not indexed by time: each batch reads up to batch keys after the
// last one read.
func sweepAPIKeys(cutoff time.Time) sweepStep {
	return func(tx *bbolt.Tx, batch int, after []byte) (SweepStats, []byte, error) {
		var did SweepStats
		keys := tx.Bucket([]byte(bucketAPIKeys))
		type entry struct{ key, id []byte }
		var todo []entry
		c := keys.Cursor()
		k, v := c.First()
		if len(after) > 0 {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		read := 0
		var last []byte
		for ; k != nil && read < batch; k, v = c.Next() {
			read++
			last = bytes.Clone(k)
			var r struct {
				ID        string    `json:"id"`
				RevokedAt time.Time `json:"revokedAt"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return did, nil, fmt.Errorf("API key %q: %w", k, err)
			}
			if !r.RevokedAt.IsZero() && !r.RevokedAt.After(cutoff) {
				todo = append(todo, entry{bytes.Clone(k), []byte(r.ID)})
			}
		}
		for _, e := range todo {
			if err := keys.Delete(e.key); err != nil {
				return did, nil, err
			}
			if err := tx.Bucket([]byte(bucketAPIKeyIDs)).Delete(e.id); err != nil {
				return did, nil, err
			}
			did.APIKeys++
		}
		if read < batch {
			return did, nil, nil
		}
		return did, last, nil
	}
}

// RunSweeper sweeps at once and then every interval until ctx is done,
// logging what each sweep removed. It returns when ctx is done or the store
// is closed; run it in its own goroutine.
func (s *boltStore) RunSweeper(ctx context.Context, interval time.Duration) {
	runSweeper(ctx, s.log, interval, s.Sweep, s.stopped)
}

// runSweeper is RunSweeper for either backend: sweep until ctx is done or
// stopped (the store's Close) is closed.
func runSweeper(ctx context.Context, log *slog.Logger, interval time.Duration, sweep func(context.Context) (SweepStats, error), stopped <-chan struct{}) {
	if interval <= 0 {
		interval = time.Hour
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		start := time.Now()
		st, err := sweep(ctx)
		attrs := []any{"views", st.Views, "html", st.HTML, "runs", st.Runs, "deliveries", st.Deliveries,
			"audit", st.Audit, "api_keys", st.APIKeys, "runs_held", st.RunsHeld, "transactions", st.Transactions,
			"longest", st.Longest, "took", time.Since(start)}
		switch {
		case errors.Is(err, ErrClosed):
			return
		case err != nil && ctx.Err() == nil:
			log.Error("store sweep failed", append(attrs, "err", err)...)
		case st.removed():
			log.Info("store sweep", attrs...)
		default:
			log.Debug("store sweep", attrs...)
		}
		select {
		case <-ctx.Done():
			return
		case <-stopped: // closed
			return
		case <-t.C:
		}
	}
}
