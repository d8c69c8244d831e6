package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pgSweepStep deletes one bounded batch in tx, going on from after (nil
// at first), as sweepStep does on bbolt.
type pgSweepStep func(ctx context.Context, tx pgx.Tx, batch int, after []byte) (did SweepStats, next []byte, err error)

// Sweep is Store.Sweep on PostgreSQL. One replica sweeps at a time: the
// sweep holds a session advisory lock, and a replica that finds it taken
// returns at once with nothing done (the other is sweeping the same rows).
// Each batch is a transaction of its own that selects its rows with FOR
// UPDATE SKIP LOCKED, so that it never waits for a request's write.
func (s *pgStore) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	if err := s.ready(ctx); err != nil {
		return st, err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return st, fmt.Errorf("store: sweep: %w", s.closedErr(err))
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, pgSweepLock).Scan(&locked); err != nil {
		return st, fmt.Errorf("store: sweep: %w", s.closedErr(err))
	}
	if !locked {
		s.log.Debug("store sweep left to another replica")
		return st, nil
	}
	defer func() {
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, pgSweepLock); err != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	now := s.now()
	steps := []pgSweepStep{pgSweepViews(now), pgSweepHTML(), pgSweepActivities(now)}
	if s.runRetention > 0 {
		steps = append(steps, pgSweepRuns(now, now.Add(-s.runRetention)))
	}
	if s.auditRetention > 0 {
		steps = append(steps, pgSweepAudit(now.Add(-s.auditRetention)), pgSweepAPIKeys(now.Add(-s.auditRetention)))
	}
	for _, step := range steps {
		if err := s.sweepLoop(ctx, &st, step); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sweepLoop is boltStore.sweepLoop on PostgreSQL.
func (s *pgStore) sweepLoop(ctx context.Context, st *SweepStats, step pgSweepStep) error {
	batch := s.sweepBatch
	var after []byte
	retries := 0
	for {
		if err := s.ready(ctx); err != nil {
			return err
		}
		var did SweepStats
		var next []byte
		start := time.Now()
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var err error
			did, next, err = step(ctx, tx, batch, after)
			return err
		})
		took := time.Since(start)
		if err != nil {
			if (retryable(err) || isForeignKeyViolation(err)) && retries < pgRetries {
				retries++
				continue
			}
			return fmt.Errorf("store: sweep: %w", s.closedErr(err))
		}
		retries = 0
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

// pgSweepViews deletes the views whose end is at or before now.
func pgSweepViews(now time.Time) pgSweepStep {
	cut := ns(now)
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, `DELETE FROM views WHERE id IN (
			SELECT id FROM views WHERE end_ns <= $1 ORDER BY end_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, cut, batch)
		if err != nil {
			return did, nil, err
		}
		did.Views = int(tag.RowsAffected())
		return did, more(did.Views == batch), nil
	}
}

// pgSweepHTML deletes the documents no view uses (see pgSchema). A
// document a save is using is locked (skipped here) or, once the save
// commits, kept by the foreign key, whose refusal sweepLoop retries.
func pgSweepHTML() pgSweepStep {
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, `DELETE FROM html WHERE sha IN (
			SELECT h.sha FROM html h WHERE NOT EXISTS (SELECT 1 FROM views v WHERE v.sha = h.sha)
			LIMIT $1 FOR UPDATE SKIP LOCKED)`, batch)
		if err != nil {
			return did, nil, err
		}
		did.HTML = int(tag.RowsAffected())
		return did, more(did.HTML == batch), nil
	}
}

// pgSweepActivities deletes the arrivals whose window is over.
func pgSweepActivities(now time.Time) pgSweepStep {
	cut := ns(now)
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, `DELETE FROM activities WHERE key IN (
			SELECT key FROM activities WHERE expires_ns <= $1 ORDER BY expires_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, cut, batch)
		if err != nil {
			return did, nil, err
		}
		did.Activities = int(tag.RowsAffected())
		return did, more(did.Activities == batch), nil
	}
}

// isForeignKeyViolation reports a foreign_key_violation: a document the
// sweep found unused was taken into use meanwhile.
func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}

// pgSweepRuns deletes the runs made at or before cutoff, with their
// deliveries, unless a view of theirs can be opened at now; those stay,
// and the walk goes on after the last run it read (after: T | id).
func pgSweepRuns(now, cutoff time.Time) pgSweepStep {
	cut, nowNS := ns(cutoff), ns(now)
	return func(ctx context.Context, tx pgx.Tx, batch int, after []byte) (SweepStats, []byte, error) {
		var did SweepStats
		afterNS, afterID := int64(-1<<63), []byte{}
		if len(after) >= 8 {
			afterNS, afterID = keyNS([8]byte(after[:8])), after[8:]
		}
		rows, err := tx.Query(ctx, `SELECT r.id, r.created_ns,
				EXISTS (SELECT 1 FROM views v WHERE v.run_id = r.id AND NOT v.revoked AND v.expires_ns > $2)
			FROM runs r WHERE r.created_ns <= $1 AND (r.created_ns, r.id) > ($3, $4)
			ORDER BY r.created_ns, r.id LIMIT $5 FOR UPDATE OF r SKIP LOCKED`, cut, nowNS, afterNS, afterID, batch)
		if err != nil {
			return did, nil, err
		}
		var todo [][]byte
		var last []byte
		read := 0
		for rows.Next() {
			var id []byte
			var created int64
			var held bool
			if err := rows.Scan(&id, &created, &held); err != nil {
				rows.Close()
				return did, nil, err
			}
			read++
			k := nsKey(created)
			last = append(k[:], id...)
			if held {
				did.RunsHeld++
				continue
			}
			todo = append(todo, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return did, nil, err
		}
		if len(todo) > 0 {
			tag, err := tx.Exec(ctx, `DELETE FROM deliveries WHERE run_id = ANY($1)`, todo)
			if err != nil {
				return did, nil, err
			}
			did.Deliveries = int(tag.RowsAffected())
			if tag, err = tx.Exec(ctx, `DELETE FROM runs WHERE id = ANY($1)`, todo); err != nil {
				return did, nil, err
			}
			did.Runs = int(tag.RowsAffected())
		}
		if read < batch {
			return did, nil, nil
		}
		return did, last, nil
	}
}

// pgSweepAudit deletes the audit records whose Time is at or before
// cutoff.
func pgSweepAudit(cutoff time.Time) pgSweepStep {
	cut := ns(cutoff)
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, `DELETE FROM audit WHERE seq IN (
			SELECT seq FROM audit WHERE time_ns <= $1 ORDER BY time_ns, seq LIMIT $2 FOR UPDATE SKIP LOCKED)`, cut, batch)
		if err != nil {
			return did, nil, err
		}
		did.Audit = int(tag.RowsAffected())
		return did, more(did.Audit == batch), nil
	}
}

// pgSweepAPIKeys deletes the API keys revoked at or before cutoff.
func pgSweepAPIKeys(cutoff time.Time) pgSweepStep {
	cut := ns(cutoff)
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE id IN (
			SELECT id FROM api_keys WHERE revoked_ns <= $1 ORDER BY revoked_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, cut, batch)
		if err != nil {
			return did, nil, err
		}
		did.APIKeys = int(tag.RowsAffected())
		return did, more(did.APIKeys == batch), nil
	}
}
