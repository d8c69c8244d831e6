package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// sweepStep deletes one bounded batch in tx, going on from after (nil at
// first). It returns what it deleted and where the next batch starts, or
// a nil next when nothing is left.
type sweepStep func(tx *bbolt.Tx, batch int, after []byte) (did SweepStats, next []byte, err error)

// sweep runs each part of p in write transactions of bounded batches,
// outside the writer goroutine: the writes queue while each runs.
func (s *boltStore) sweep(ctx context.Context, p sweepPlan) (SweepStats, error) {
	var st SweepStats
	for _, part := range p.parts() {
		var step sweepStep
		switch part {
		case sweepEndedViews:
			step = sweepViews(p.now)
		case sweepArrivals:
			step = sweepActivities(p.now)
		case sweepOldRuns:
			step = sweepRuns(p)
		case sweepOldAudit:
			step = sweepAudit(p.auditUntil)
		case sweepRevokedKeys:
			step = sweepAPIKeys(p.auditUntil)
		case sweepMCPAuth:
			step = sweepMCPAuthRequests(p.authUntil)
		case sweepQuestions:
			step = sweepExpiredQuestions(p.questionsUntil)
		case sweepOldHistory:
			step = sweepHistory(p.runsUntil)
		case sweepOldUsage:
			step = sweepUsage(p.usageDaysBefore())
		}
		err := sweepBatches(ctx, &st, s.sweepBatch, func(batch int, after []byte) (did SweepStats, next []byte, err error) {
			err = s.db.Update(func(tx *bbolt.Tx) error {
				did, next, err = step(tx, batch, after)
				return err
			})
			switch {
			case errors.Is(err, berrors.ErrDatabaseNotOpen):
				err = ErrClosed
			case err != nil:
				err = fmt.Errorf("store: sweep: %w", err)
			}
			return did, next, err
		})
		if err != nil {
			return st, err
		}
	}
	return st, nil
}

// sweepViews deletes the views whose expiry (or revocation) is at or
// before now, with their views_by_tenant entries, and releases their
// HTML.
func sweepViews(now time.Time) sweepStep {
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

// sweepRuns deletes the runs made at or before p.runsUntil, with their
// index entries and deliveries, unless p.keepRun holds them for a view
// that can still be opened. The runs so held stay in runs_by_time: the
// walk goes on after the last key it read (after), and reads at most four
// batches of entries per transaction.
func sweepRuns(p sweepPlan) sweepStep {
	cut := timeKey(p.runsUntil)
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
			ends, err := viewEnds(views, r.ViewIDs)
			if err != nil {
				return did, nil, fmt.Errorf("run %q: %w", k[8:], err)
			}
			if p.keepRun(ends) {
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

// viewEnds returns the ends of the stored views among ids.
func viewEnds(views *bbolt.Bucket, ids []string) ([]time.Time, error) {
	var ends []time.Time
	for _, id := range ids {
		data := views.Get([]byte(id))
		if data == nil {
			continue
		}
		var hdr viewHeader
		if err := json.Unmarshal(data, &hdr); err != nil {
			return nil, fmt.Errorf("view %q: %w", id, err)
		}
		ends = append(ends, hdr.end())
	}
	return ends, nil
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

// sweepActivities deletes the arrivals whose window is over, oldest first.
func sweepActivities(now time.Time) sweepStep {
	cut := timeKey(now)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		byExpiry := tx.Bucket([]byte(bucketActivitiesByExpiry))
		seen := tx.Bucket([]byte(bucketActivities))
		var todo [][]byte
		c := byExpiry.Cursor()
		for k, _ := c.First(); k != nil && len(todo) < batch && bytes.Compare(k[:8], cut[:]) <= 0; k, _ = c.Next() {
			todo = append(todo, bytes.Clone(k))
		}
		for _, k := range todo {
			if err := byExpiry.Delete(k); err != nil {
				return did, nil, err
			}
			// A later arrival of the same activity has its own expiry:
			// only the record this entry made goes.
			if v := seen.Get(k[8:]); v != nil && bytes.Equal(v, k[:8]) {
				if err := seen.Delete(k[8:]); err != nil {
					return did, nil, err
				}
			}
			did.Activities++
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepMCPAuthRequests deletes the MCP authorization requests that
// expired at or before cutoff, oldest first, with their entry by state
// (the value of their expiry entry).
func sweepMCPAuthRequests(cutoff time.Time) sweepStep {
	cut := timeKey(cutoff)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		byExpiry := tx.Bucket([]byte(bucketMCPAuthByExpiry))
		type entry struct{ key, state []byte }
		var todo []entry
		c := byExpiry.Cursor()
		for k, v := c.First(); k != nil && len(todo) < batch; k, v = c.Next() {
			if len(k) <= 8 || bytes.Compare(k[:8], cut[:]) > 0 {
				break
			}
			todo = append(todo, entry{bytes.Clone(k), bytes.Clone(v)})
		}
		requests, byState := tx.Bucket([]byte(bucketMCPAuthRequests)), tx.Bucket([]byte(bucketMCPAuthByState))
		for _, e := range todo {
			id := e.key[8:]
			if err := requests.Delete(id); err != nil {
				return did, nil, err
			}
			if err := byExpiry.Delete(e.key); err != nil {
				return did, nil, err
			}
			if bytes.Equal(byState.Get(e.state), id) {
				if err := byState.Delete(e.state); err != nil {
					return did, nil, err
				}
			}
			did.MCPAuthRequests++
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepExpiredQuestions deletes the questions that expired at or before
// cutoff, oldest first, with their expiry entry.
func sweepExpiredQuestions(cutoff time.Time) sweepStep {
	cut := timeKey(cutoff)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		byExpiry, questions := tx.Bucket([]byte(bucketQuestionsByExpiry)), tx.Bucket([]byte(bucketQuestions))
		var todo [][]byte
		c := byExpiry.Cursor()
		for k, _ := c.First(); k != nil && len(todo) < batch; k, _ = c.Next() {
			if len(k) <= 8 || bytes.Compare(k[:8], cut[:]) > 0 {
				break
			}
			todo = append(todo, bytes.Clone(k))
		}
		for _, k := range todo {
			if err := questions.Delete(k[8:]); err != nil {
				return did, nil, err
			}
			if err := byExpiry.Delete(k); err != nil {
				return did, nil, err
			}
			did.Questions++
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepHistory deletes the turns of conversation history whose At is at
// or before cutoff, oldest first: history_by_time names each turn's key.
func sweepHistory(cutoff time.Time) sweepStep {
	cut := timeKey(cutoff)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		byTime, history := tx.Bucket([]byte(bucketHistoryByTime)), tx.Bucket([]byte(bucketHistory))
		type entry struct{ key, turn []byte }
		var todo []entry
		c := byTime.Cursor()
		for k, v := c.First(); k != nil && len(todo) < batch; k, v = c.Next() {
			if len(k) != 16 || bytes.Compare(k[:8], cut[:]) > 0 {
				break
			}
			todo = append(todo, entry{bytes.Clone(k), bytes.Clone(v)})
		}
		for _, e := range todo {
			if err := history.Delete(e.turn); err != nil {
				return did, nil, err
			}
			if err := byTime.Delete(e.key); err != nil {
				return did, nil, err
			}
			did.HistoryTurns++
		}
		return did, more(len(todo) == batch), nil
	}
}

// sweepUsage deletes the usage counters of the days before before. The
// counters are keyed by tenant first: the walk reads each tenant's oldest
// days up to before, then seeks past the tenant (<tenant> 0x01, as no
// tenant holds a 0x00), so that it reads only the counters it deletes and
// one more per tenant. A batch reads at most four batches of keys and
// goes on from the key it stopped at (after), which it has not deleted.
func sweepUsage(before int32) sweepStep {
	cut := dayKey(before)
	return func(tx *bbolt.Tx, batch int, after []byte) (SweepStats, []byte, error) {
		var did SweepStats
		usage := tx.Bucket([]byte(bucketUsage))
		c := usage.Cursor()
		k, _ := c.First()
		if after != nil {
			k, _ = c.Seek(after)
		}
		var todo [][]byte
		var next []byte
		for read := 0; k != nil; read++ {
			if len(todo) == batch || read == 4*batch {
				next = bytes.Clone(k)
				break
			}
			end := bytes.IndexByte(k, 0)
			if end < 0 || len(k) < end+1+len(cut) {
				return did, nil, fmt.Errorf("usage key %q is not one the store writes", k)
			}
			if bytes.Compare(k[end+1:end+1+len(cut)], cut[:]) < 0 {
				todo = append(todo, bytes.Clone(k))
				k, _ = c.Next()
				continue
			}
			k, _ = c.Seek(append(bytes.Clone(k[:end]), 1))
		}
		for _, k := range todo {
			if err := usage.Delete(k); err != nil {
				return did, nil, err
			}
			did.UsageCounters++
		}
		return did, next, nil
	}
}
