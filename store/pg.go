package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
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

// pgRetries is how many times a write PostgreSQL refused in a way that
// running it again mends (see write) is run again.
const pgRetries = 5

// pgStore is the PostgreSQL backend: the same records as the bbolt file,
// in tables shared by every replica of the service (see pgschema.go).
// Every write is one transaction, committed before the method returns;
// concurrent writes commit side by side, so it needs no writer goroutine.
// Reads and writes go through one connection pool, and pgx prepares and
// caches each statement on each connection.
type pgStore struct {
	pool *pgxpool.Pool
	log  *slog.Logger

	// sweepBatch is how many rows one sweep transaction deletes at first.
	sweepBatch int

	closed      atomic.Bool
	commitCount atomic.Uint64

	// later are the writes handed in by writeLater and not yet done,
	// which close waits for; closing refuses new ones.
	laterMu sync.Mutex
	later   sync.WaitGroup
	closing bool
}

// openPostgres connects to the database at url and migrates it.
func openPostgres(ctx context.Context, url string, opts Options, migrations []pgMigration) (*Store, error) {
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
	if _, set := cfg.ConnConfig.RuntimeParams["random_page_cost"]; !set {
		// PostgreSQL's planner prices a read of a row through an index
		// that is not in the table's order at four sequential ones, the
		// price of a spinning disk; its documentation suggests 1.1 for
		// solid-state storage, which servers have now. At 4 a tenant's
		// audit page is read through the index of every tenant's records
		// by time, skipping the others' one by one, rather than through
		// the index of the tenant and its filter, whose rows are in the
		// table's order anyway (they are written in time order). A URL
		// that sets random_page_cost keeps its own.
		cfg.ConnConfig.RuntimeParams["random_page_cost"] = "1.1"
	}
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// pgx prepares each statement once per connection; PostgreSQL
		// then plans it anew at each run while it deems the plan for the
		// values better than the generic one, which for an audit page it
		// does for ever: a tenth of a millisecond of planning on every
		// page. The store's queries are lookups by key and ranges of an
		// index, whose generic plans are the same (an audit page's:
		// TestAuditPagePlanUsesAnIndex). A URL that sets plan_cache_mode
		// keeps its own.
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
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
	s := &pgStore{pool: pool, log: opts.Logger, sweepBatch: defaultSweepBatch}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
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
	cursorKey, err := s.loadCursorKey(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	return newStore(s, cursorKey, opts), nil
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

// close closes the pool; a write under way is waited for.
func (s *pgStore) close() error {
	// The writes handed in without waiting are committed first, as
	// bbolt's writer commits what is pending before it stops.
	s.laterMu.Lock()
	s.closing = true
	s.laterMu.Unlock()
	s.later.Wait()
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	s.pool.Close()
	return nil
}

// ping checks that the database answers and its schema is the one this
// program knows.
func (s *pgStore) ping(ctx context.Context) error {
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

// commits counts the commits: on PostgreSQL each write is a transaction
// of its own.
func (s *pgStore) commits() uint64 { return s.commitCount.Load() }

// backup is not offered on PostgreSQL: the database is backed up with its
// own tools (pg_dump, or the provider's backups), which see every replica's
// writes.
func (s *pgStore) backup(context.Context, io.Writer) (int64, error) {
	return 0, fmt.Errorf("a PostgreSQL store is backed up with pg_dump or the provider's backups: %w", errors.ErrUnsupported)
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

// closedErr maps the pool's "closed" to ErrClosed.
func (s *pgStore) closedErr(err error) error {
	if err != nil && s.closed.Load() && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrConflict) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// read runs fn with a reader whose every read is a statement of its own
// on the pool.
func (s *pgStore) read(ctx context.Context, fn func(r reader) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	return s.closedErr(fn(&pgTx{ctx: ctx, s: s}))
}

// writeLater commits in a goroutine of its own: each PostgreSQL write is
// a statement on a connection of the pool, waited for by its goroutine.
func (s *pgStore) writeLater(ctx context.Context, fn func(w writer) error, then func(error)) {
	s.laterMu.Lock()
	if s.closing {
		s.laterMu.Unlock()
		then(ErrClosed)
		return
	}
	s.later.Add(1)
	s.laterMu.Unlock()
	go func() {
		defer s.later.Done()
		then(s.write(ctx, true, fn))
	}()
}

// write runs fn in a transaction and commits it. The writes fn makes are
// queued and sent together, with the next read or the commit: a write
// that only puts is one round trip (the statements of one batch are one
// implicit transaction), and one that reads first is two, the first read
// beginning the transaction.
//
// It runs fn again (up to pgRetries times) when PostgreSQL refused the
// transaction in a way that doing it again mends: a deadlock or a
// serialization failure; an insert of a row found missing that another
// transaction inserted meanwhile (unique_violation: running again finds
// the row); a foreign key meeting a row a sweep had just deleted (running
// again inserts the document anew, or finds the run gone); or a
// connection lost before the commit was sent. A connection lost while an
// explicit transaction commits is not retried, as the commit may have
// landed. Once begun, the write runs under pgWriteTimeout rather than ctx
// (see there). The lazy hint is for bbolt: here every write commits at
// once, so that the other replicas see it.
func (s *pgStore) write(ctx context.Context, _ bool, fn func(w writer) error) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pgWriteTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		t := &pgTx{ctx: wctx, s: s, write: true}
		err := fn(t)
		if err == nil {
			err = t.commit()
		}
		again := t.end(err)
		if err != nil && again && attempt < pgRetries && wctx.Err() == nil {
			continue
		}
		if err == nil {
			s.commitCount.Add(1)
		}
		if isUniqueViolation(err) {
			err = fmt.Errorf("%w: %w", ErrConflict, err)
		}
		return s.closedErr(err)
	}
}

// pgTx is one read or write on PostgreSQL, the reader and writer whose
// methods are the records' storage functions (pgrecords.go, pgaudit.go).
// In a read each read is a statement on the pool. In a write the writes
// are queued, and each read sends them first, together with the read, on
// the write's own connection: the first after BEGIN.
type pgTx struct {
	ctx   context.Context
	s     *pgStore
	write bool

	conn  *pgxpool.Conn // a write's connection, from its first statement
	begun bool          // BEGIN was queued
	// commitSent is set once the commit is under way: a batch without
	// BEGIN (committed by itself), or the one holding COMMIT.
	commitSent, implicit bool
	batch                pgx.Batch // a write's statements not sent yet
	// checks are the queued statements' checks of what they did, such
	// as ErrConflict for a claim that inserted nothing.
	checks []pgCheck
	// after are statements run after the queued ones and before the
	// commit, each on its own (see pgDropHTMLIfUnused).
	after []func(ctx context.Context, conn *pgxpool.Conn) error
}

// notSent is an error met before anything of a write reached the server.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }
func (e notSent) Unwrap() error { return e.err }

// pgCheck is a queued statement's check of what it did: of its command
// tag (nil: none), or, for a statement that returns a row (an INSERT …
// RETURNING), of that row.
type pgCheck struct {
	tag func(pgconn.CommandTag) error
	row func(pgx.Row) error
}

// queue adds a write, and its check of what it did.
func (t *pgTx) queue(check func(pgconn.CommandTag) error, sql string, args ...any) {
	t.batch.Queue(sql, args...)
	t.checks = append(t.checks, pgCheck{tag: check})
}

// queueRow adds a write that returns one row, and scan, which reads it
// once the write is sent.
func (t *pgTx) queueRow(scan func(pgx.Row) error, sql string, args ...any) {
	t.batch.Queue(sql, args...)
	t.checks = append(t.checks, pgCheck{row: scan})
}

// put queues the insert of a row, or, when the write read and locked the
// row it replaces (stored), its upsert (insert followed by onConflict): a
// row found missing is inserted, so that another transaction's insert of
// it meanwhile makes this one fail and run again.
func (t *pgTx) put(stored bool, insert, onConflict string, args ...any) {
	if stored {
		insert += onConflict
	}
	t.queue(nil, insert, args...)
}

// lock is sql for a read of a write: FOR UPDATE, so that what is read
// stays as read until the commit.
func (t *pgTx) lock(sql string) string {
	if t.write {
		return sql + " FOR UPDATE"
	}
	return sql
}

// query runs the read sql (locked in a write: see lock) and calls each
// for each row.
func (t *pgTx) query(sql string, args []any, each func(rows pgx.Rows) error) error {
	if !t.write {
		rows, err := t.s.pool.Query(t.ctx, sql, args...)
		if err != nil {
			return err
		}
		return eachRow(rows, each)
	}
	if err := t.begin(); err != nil {
		return err
	}
	t.batch.Queue(t.lock(sql), args...)
	br := t.conn.SendBatch(t.ctx, t.take())
	err := t.results(br)
	if err == nil {
		var rows pgx.Rows
		if rows, err = br.Query(); err == nil {
			err = eachRow(rows, each)
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// eachRow calls each for every row, then closes rows.
func eachRow(rows pgx.Rows, each func(rows pgx.Rows) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := each(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// acquire takes the write's connection from the pool, once.
func (t *pgTx) acquire() error {
	if t.conn != nil {
		return nil
	}
	conn, err := t.s.pool.Acquire(t.ctx)
	if err != nil {
		return notSent{err}
	}
	t.conn = conn
	return nil
}

// begin queues BEGIN before the queued statements, once.
func (t *pgTx) begin() error {
	if err := t.acquire(); err != nil || t.begun {
		return err
	}
	t.begun = true
	queued, checks := t.batch.QueuedQueries, t.checks
	t.batch, t.checks = pgx.Batch{}, nil
	t.queue(nil, "BEGIN")
	t.batch.QueuedQueries = append(t.batch.QueuedQueries, queued...)
	t.checks = append(t.checks, checks...)
	return nil
}

// take returns the queued statements, leaving none; results reads their
// checks.
func (t *pgTx) take() *pgx.Batch {
	b := t.batch
	t.batch = pgx.Batch{}
	return &b
}

// results reads the results of the queued statements sent in br, in
// order, and checks each.
func (t *pgTx) results(br pgx.BatchResults) error {
	checks := t.checks
	t.checks = nil
	for _, check := range checks {
		if check.row != nil {
			if err := check.row(br.QueryRow()); err != nil {
				return err
			}
			continue
		}
		tag, err := br.Exec()
		if err != nil {
			return err
		}
		if check.tag != nil {
			if err := check.tag(tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// commit sends what is queued and commits it: alone, as one implicit
// transaction, when the write has not begun; or the statements, then
// those of after, then COMMIT.
func (t *pgTx) commit() error {
	if !t.begun && len(t.after) == 0 {
		if t.batch.Len() == 0 {
			return nil
		}
		if err := t.acquire(); err != nil {
			return err
		}
		t.commitSent, t.implicit = true, true
		return t.send()
	}
	if err := t.begin(); err != nil {
		return err
	}
	if len(t.after) > 0 {
		if err := t.send(); err != nil {
			return err
		}
		for _, fn := range t.after {
			if err := fn(t.ctx, t.conn); err != nil {
				return err
			}
		}
	}
	t.queue(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("the transaction ended in %s", tag)
		}
		return nil
	}, "COMMIT")
	t.commitSent = true
	return t.send()
}

// send sends the queued statements on the write's connection.
func (t *pgTx) send() error {
	br := t.conn.SendBatch(t.ctx, t.take())
	err := t.results(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// end ends a write, rolling it back if it failed (err), gives its
// connection back, and reports whether running the write again is safe
// and likely to help.
func (t *pgTx) end(err error) (again bool) {
	lost := false
	if t.conn != nil {
		lost = t.conn.Conn().IsClosed()
		if err != nil && t.begun && !lost {
			// A transaction aborted, or one that never reached its
			// COMMIT, is rolled back; a connection whose rollback fails
			// is not given back to the pool.
			if _, rerr := t.conn.Exec(context.WithoutCancel(t.ctx), "ROLLBACK"); rerr != nil {
				t.conn.Conn().Close(context.Background())
			}
		}
		t.conn.Release()
	}
	if err == nil || t.s.closed.Load() {
		return false
	}
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe):
		switch code := pe.Code; {
		case code == "40001" || code == "40P01" || code == "23505" || code == "23503":
			// serialization_failure, deadlock_detected, unique_violation,
			// foreign_key_violation: the transaction did not commit.
			return true
		case strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P"):
			// The server is ending the connection (admin_shutdown and its
			// kin): a statement of ours it refused did not commit, unless
			// it was an explicit COMMIT, which may have landed first. A
			// batch committed by itself is refused as a whole; its
			// statements, idempotent puts and appends, were not run.
			return !t.commitSent || t.implicit
		}
		return false
	case pgconn.SafeToRetry(err), errors.As(err, new(notSent)):
		return true
	}
	// A connection lost before the commit was sent: the server rolls the
	// transaction back.
	return lost && !t.commitSent
}

// isUniqueViolation reports a unique_violation.
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// isForeignKeyViolation reports a foreign_key_violation: a document the
// sweep found unused was taken into use meanwhile.
func isForeignKeyViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23503"
}
