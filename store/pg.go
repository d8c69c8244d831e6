package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgWriteTimeout bounds one write transaction on PostgreSQL. A write runs
// under it rather than under its caller's context once it has begun, so
// that a caller that gives up half way still learns whether its write
// landed (as with the bbolt writer), and a server that stopped answering
// does not hold the caller forever.
const pgWriteTimeout = 30 * time.Second

// pgMinConns is the least size of the connection pool when the URL does
// not set pool_max_conns.
const pgMinConns = 16

// pgRetries is how many times a transaction PostgreSQL aborted for a
// deadlock or a serialization failure is run again.
const pgRetries = 5

// pgStore is the PostgreSQL backend: the same records as the bbolt file,
// in tables shared by every replica of the service (see pgschema.go).
// Every write is one transaction, committed before the method returns;
// concurrent writes commit side by side, so it needs no writer goroutine.
// Reads and writes go through one connection pool, and pgx prepares and
// caches each statement on each connection.
type pgStore struct {
	base
	pool *pgxpool.Pool

	// sweepBatch is how many rows one sweep transaction deletes at first.
	sweepBatch int

	closeOnce sync.Once
	closed    atomic.Bool
	stopped   chan struct{}

	commits atomic.Uint64
	writes  atomic.Uint64
}

// OpenPostgres opens the store on the PostgreSQL database at url
// (postgres://… or postgresql://…, with pgx's pool settings such as
// pool_max_conns allowed in it; without it, the pool holds up to 16
// connections, or 4 per CPU), creating and migrating its tables. Several
// processes may open the same database at once: the migrations run under
// an advisory lock, so that replicas starting together migrate once. It
// fails with ErrSchemaTooNew for a database a newer version migrated.
// Options.OpenTimeout bounds connecting (zero means 5 s).
func OpenPostgres(ctx context.Context, url string, opts Options) (*Store, error) {
	s, err := openPostgres(ctx, url, opts, pgSchema())
	if err != nil {
		return nil, err
	}
	return &Store{be: s}, nil
}

func openPostgres(ctx context.Context, url string, opts Options, migrations []pgMigration) (*pgStore, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password and all.
		return nil, fmt.Errorf("store: open postgres: %w", invalid("the database URL cannot be parsed"))
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx's default (the CPUs, at least 4) leaves concurrent turns
		// queueing for a connection while each waits for its commit's
		// flush; more of them let PostgreSQL flush their commits together.
		cfg.MaxConns = int32(max(pgMinConns, 4*runtime.NumCPU()))
	}
	timeout := opts.OpenTimeout
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > timeout {
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	s := &pgStore{
		base:       newBase(opts),
		pool:       pool,
		sweepBatch: defaultSweepBatch,
		stopped:    make(chan struct{}),
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = pool.Ping(pctx)
	cancel()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres %s:%d/%s: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	if err := s.migrate(ctx, migrations); err != nil {
		pool.Close()
		return nil, err
	}
	if s.cursorKey, err = s.loadCursorKey(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	return s, nil
}

// loadCursorKey reads the key that signs listing cursors, making it on
// first use: the first replica's insert wins and every replica reads it,
// so that a cursor made by one verifies on another.
func (s *pgStore) loadCursorKey(ctx context.Context) ([]byte, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('cursor_key', $1) ON CONFLICT (key) DO NOTHING`, key); err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	var stored []byte
	if err := s.pool.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'cursor_key'`).Scan(&stored); err != nil {
		return nil, fmt.Errorf("cursor key: %w", err)
	}
	return stored, nil
}

// Close closes the pool; a write under way is waited for. Later calls
// return ErrClosed.
func (s *pgStore) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	s.closeOnce.Do(func() { close(s.stopped) })
	s.pool.Close()
	return nil
}

// Ping checks that the database answers and its schema is the one this
// program knows.
func (s *pgStore) Ping(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return fmt.Errorf("store: ping postgres: %w", err)
	}
	if want := len(pgSchema()); v != want {
		return fmt.Errorf("store: ping postgres: schema version %d, this program wants %d", v, want)
	}
	return nil
}

// Stats counts the writes and their transactions: on PostgreSQL each write
// is a transaction of its own.
func (s *pgStore) Stats() Stats {
	return Stats{Writes: s.writes.Load(), Commits: s.commits.Load()}
}

// Backup is not offered on PostgreSQL: the database is backed up with its
// own tools (pg_dump, or the provider's backups), which see every replica's
// writes.
func (s *pgStore) Backup(ctx context.Context, w io.Writer) (int64, error) {
	return 0, fmt.Errorf("store: backup: a PostgreSQL store is backed up with pg_dump or the provider's backups: %w", errors.ErrUnsupported)
}

// RunSweeper sweeps at once and then every interval until ctx is done or
// the store is closed. Every replica may run it: a sweep that finds another
// replica's under way leaves the work to it.
func (s *pgStore) RunSweeper(ctx context.Context, interval time.Duration) {
	runSweeper(ctx, s.log, interval, s.Sweep, s.stopped)
}

func (s *pgStore) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// tx runs fn in a transaction and commits it, running it again (up to
// pgRetries times) when PostgreSQL aborted it for a deadlock or a
// serialization failure, a foreign key met a row a sweep had just deleted,
// or the connection was lost before the commit was sent (the server then
// rolled it back): fn must reset whatever it
// sets outside. A connection lost during the commit is not retried, as
// the commit may have landed. Once begun, the transaction runs under
// pgWriteTimeout rather than ctx (see there).
func (s *pgStore) tx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		again, err := s.tryTx(wctx, fn)
		if err != nil && again && attempt < pgRetries {
			continue
		}
		if err == nil {
			s.commits.Add(1)
			s.writes.Add(1)
		}
		return s.closedErr(err)
	}
}

// exec1 runs one idempotent write statement on its own, committed as it
// returns (one round trip, where tx takes three), run again as tx would
// be: as the statement is idempotent, running it again after a lost
// connection is harmless even if it had landed.
func (s *pgStore) exec1(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := s.ready(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		tag, err := s.pool.Exec(wctx, sql, args...)
		if err != nil && attempt < pgRetries && (retryable(err) || !s.closed.Load() && isConnError(err)) {
			continue
		}
		if err == nil {
			s.commits.Add(1)
			s.writes.Add(1)
		}
		return tag, s.closedErr(err)
	}
}

// tryTx runs one attempt of tx; again says whether running it again is
// safe and likely to help.
func (s *pgStore) tryTx(ctx context.Context, fn func(ctx context.Context, tx pgx.Tx) error) (again bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return retryable(err) || !s.closed.Load() && isConnError(err), err
	}
	if err := fn(ctx, tx); err != nil {
		lost := tx.Conn().IsClosed()
		tx.Rollback(ctx)
		// A foreign key refusing a row whose parent a sweep deleted
		// meanwhile (a document, a run): run again, the save inserts the
		// document anew, and a delivery finds its run gone.
		return retryable(err) || lost || isForeignKeyViolation(err), err
	}
	err = tx.Commit(ctx)
	return retryable(err), err
}

// isConnError reports an error of the connection rather than of a
// statement: the server went away (admin_shutdown and its kin, class 08)
// or the network failed.
func isConnError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	return !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// closedErr maps the pool's "closed" to ErrClosed.
func (s *pgStore) closedErr(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// retryable reports whether a transaction failed in a way that running
// it again would likely mend: PostgreSQL aborted it, or it never reached
// the server.
func retryable(err error) bool {
	if pgconn.SafeToRetry(err) {
		// Nothing reached the server: a connection that had died
		// while idle in the pool, which the pool has now dropped.
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

// isUniqueViolation reports a unique_violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// queryRow reads one bytea column of one row: ErrNotFound when there is
// none.
func (s *pgStore) queryData(ctx context.Context, sql string, args ...any) ([]byte, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	var data []byte
	err := s.pool.QueryRow(ctx, sql, args...).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return data, s.closedErr(err)
}

// pgGetJSON reads and decodes one record; what and key name it in errors.
func pgGetJSON[T any](ctx context.Context, s *pgStore, what, key, sql string, args ...any) (T, error) {
	var v T
	data, err := s.queryData(ctx, sql, args...)
	if err == nil {
		err = json.Unmarshal(data, &v)
	}
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s %.128s: %w", what, key, err)
	}
	return v, nil
}

// pgList decodes the first column of every row the query returns.
func pgList[T any](ctx context.Context, s *pgStore, sql string, args ...any) ([]T, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.closedErr(err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, err
		}
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, s.closedErr(rows.Err())
}

// ns is a time as the bigint columns keep it: the Unix nanoseconds that
// timeKey orders by, clamped alike, so that both backends order and cut
// times the same way.
func ns(t time.Time) int64 { return keyNS(timeKey(t)) }

// keyNS decodes a timeKey.
func keyNS(k [8]byte) int64 { return int64(binary.BigEndian.Uint64(k[:]) ^ 1<<63) }

// nsKey encodes the Unix nanoseconds n as a timeKey.
func nsKey(n int64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(n)^1<<63)
	return k
}

// pgAppendAudit inserts prepared audit records in order; the identity
// column numbers them.
func pgAppendAudit(ctx context.Context, tx pgx.Tx, recs []preparedAudit) error {
	if len(recs) == 0 {
		return nil
	}
	sql, args := auditInsert(recs)
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// queueAudit adds the insert of prepared audit records to a batch.
func queueAudit(b *pgx.Batch, recs []preparedAudit) {
	if len(recs) > 0 {
		sql, args := auditInsert(recs)
		b.Queue(sql, args...)
	}
}

// auditInsert is the one statement that inserts recs in order.
func auditInsert(recs []preparedAudit) (string, []any) {
	times := make([]int64, len(recs))
	tenants := make([][]byte, len(recs))
	actions := make([][]byte, len(recs))
	values := make([][]byte, len(recs))
	for i, r := range recs {
		times[i], tenants[i], actions[i], values[i] = keyNS(r.time), []byte(r.tenant), []byte(r.action), r.value
	}
	return `INSERT INTO audit (time_ns, tenant, action, data)
		SELECT t, te, a, d FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[]) WITH ORDINALITY AS u(t, te, a, d, o)
		ORDER BY o`, []any{times, tenants, actions, values}
}
