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

// sweep runs each part of p in transactions of bounded batches. One
// replica sweeps at a time: the sweep holds a session advisory lock, and
// a replica that finds it taken returns at once with nothing done (the
// other is sweeping the same rows). Each batch is a transaction of its own
// that selects its rows with FOR UPDATE SKIP LOCKED, so that it never
// waits for a request's write.
func (s *pgStore) sweep(ctx context.Context, p sweepPlan) (SweepStats, error) {
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
	for _, part := range p.parts() {
		var steps []pgSweepStep
		switch part {
		case sweepEndedViews:
			steps = []pgSweepStep{
				pgDeleteBatch(`DELETE FROM views WHERE id IN (
					SELECT id FROM views WHERE end_ns <= $1 ORDER BY end_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.now), func(st *SweepStats) *int { return &st.Views }),
				pgSweepHTML,
			}
		case sweepArrivals:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM activities WHERE key IN (
				SELECT key FROM activities WHERE expires_ns <= $1 ORDER BY expires_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.now), func(st *SweepStats) *int { return &st.Activities })}
		case sweepOldRuns:
			steps = []pgSweepStep{pgSweepRuns(p)}
		case sweepOldAudit:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM audit WHERE seq IN (
				SELECT seq FROM audit WHERE time_ns <= $1 ORDER BY time_ns, seq LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.auditUntil), func(st *SweepStats) *int { return &st.Audit })}
		case sweepRevokedKeys:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM api_keys WHERE id IN (
				SELECT id FROM api_keys WHERE revoked_ns <= $1 ORDER BY revoked_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.auditUntil), func(st *SweepStats) *int { return &st.APIKeys })}
		case sweepOldHistory:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM history WHERE seq IN (
				SELECT seq FROM history WHERE at_ns <= $1 ORDER BY at_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.runsUntil), func(st *SweepStats) *int { return &st.HistoryTurns })}
		case sweepOldUsage:
			steps = []pgSweepStep{pgDeleteBatch(pgSweepUsage, p.usageDaysBefore(), func(st *SweepStats) *int { return &st.UsageCounters })}
		case sweepMCPAuth:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM mcp_auth_requests WHERE id IN (
				SELECT id FROM mcp_auth_requests WHERE expires_ns <= $1 ORDER BY expires_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.authUntil), func(st *SweepStats) *int { return &st.MCPAuthRequests })}
		case sweepQuestions:
			steps = []pgSweepStep{pgDeleteBatch(`DELETE FROM questions WHERE id IN (
				SELECT id FROM questions WHERE expires_ns <= $1 ORDER BY expires_ns LIMIT $2 FOR UPDATE SKIP LOCKED)`, ns(p.questionsUntil), func(st *SweepStats) *int { return &st.Questions })}
		}
		for _, step := range steps {
			if err := sweepBatches(ctx, &st, s.sweepBatch, s.sweepTx(ctx, step)); err != nil {
				return st, err
			}
		}
	}
	return st, nil
}

// pgSweepUsage deletes a batch of the usage counters of the days before
// $1, read from usage_by_day (TestSweepUsagePlanUsesAnIndex). The batch is
// a materialized CTE, selected and locked once: as a subquery of IN, a
// plan made while the table was small (the store plans each statement
// once per connection, force_generic_plan) may run it again for each row
// of the table, and each run, skipping the rows the statement has just
// deleted, locks the next ones, so that one batch deleted more than its
// limit and the sweep, its batch not full, stopped with old days left.
const pgSweepUsage = `WITH batch AS MATERIALIZED (
	SELECT tenant, day, metric, label FROM usage WHERE day < $1 ORDER BY day LIMIT $2 FOR UPDATE SKIP LOCKED)
	DELETE FROM usage u USING batch b WHERE (u.tenant, u.day, u.metric, u.label) = (b.tenant, b.day, b.metric, b.label)`

// sweepTx runs step in a transaction of its own, again when PostgreSQL
// aborted it for a deadlock, or a foreign key refused to delete a
// document a save took into use meanwhile (the next try sees it used).
func (s *pgStore) sweepTx(ctx context.Context, step pgSweepStep) func(batch int, after []byte) (SweepStats, []byte, error) {
	return func(batch int, after []byte) (did SweepStats, next []byte, err error) {
		for retries := 0; ; retries++ {
			if err := s.ready(ctx); err != nil {
				return did, nil, err
			}
			err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
				var err error
				did, next, err = step(ctx, tx, batch, after)
				return err
			})
			if err != nil && (retryable(err) || isForeignKeyViolation(err)) && retries < pgRetries && !s.closed.Load() {
				continue
			}
			if err != nil {
				return did, nil, fmt.Errorf("store: sweep: %w", s.closedErr(err))
			}
			return did, next, nil
		}
	}
}

// pgDeleteBatch is a step that deletes the rows sql selects up to cut
// ($1: a time as ns gives it, or a day), oldest first, at most a batch
// ($2) of them, and counts them in the field of SweepStats that count
// points at. Each batch deletes from the start of its index: there may be
// more while a batch is full.
func pgDeleteBatch(sql string, cut any, count func(*SweepStats) *int) pgSweepStep {
	return func(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		tag, err := tx.Exec(ctx, sql, cut, batch)
		if err != nil {
			return did, nil, err
		}
		n := int(tag.RowsAffected())
		*count(&did) = n
		return did, more(n == batch), nil
	}
}

// pgSweepHTML deletes the documents no view uses (see pgSchema). A
// document a save is using is locked (skipped here) or, once the save
// commits, kept by the foreign key, whose refusal sweepTx retries.
func pgSweepHTML(ctx context.Context, tx pgx.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
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

// pgSweepRuns deletes the runs made at or before p.runsUntil, with their
// deliveries, unless p.keepRun holds them for a view that can still be
// opened (it is given the ends of the run's views); those stay, and the
// walk goes on after the last run it read (after: T | id).
func pgSweepRuns(p sweepPlan) pgSweepStep {
	cut := ns(p.runsUntil)
	return func(ctx context.Context, tx pgx.Tx, batch int, after []byte) (SweepStats, []byte, error) {
		var did SweepStats
		afterNS, afterID := int64(-1<<63), []byte{}
		if len(after) >= 8 {
			afterNS, afterID = keyNS([8]byte(after[:8])), after[8:]
		}
		rows, err := tx.Query(ctx, `SELECT r.id, r.created_ns, ARRAY(SELECT v.end_ns FROM views v WHERE v.run_id = r.id)
			FROM runs r WHERE r.created_ns <= $1 AND (r.created_ns, r.id) > ($2, $3)
			ORDER BY r.created_ns, r.id LIMIT $4 FOR UPDATE OF r SKIP LOCKED`, cut, afterNS, afterID, batch)
		if err != nil {
			return did, nil, err
		}
		var todo [][]byte
		var last []byte
		read := 0
		for rows.Next() {
			var id []byte
			var created int64
			var endNS []int64
			if err := rows.Scan(&id, &created, &endNS); err != nil {
				rows.Close()
				return did, nil, err
			}
			read++
			k := nsKey(created)
			last = append(k[:], id...)
			ends := make([]time.Time, len(endNS))
			for i, n := range endNS {
				ends[i] = nsTime(n)
			}
			if p.keepRun(ends) {
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

// retryable reports whether a transaction failed in a way that running
// it again would likely mend: PostgreSQL aborted it, or it never reached
// the server.
func retryable(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return true
		}
	}
	return false
}
