package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNotFound is returned for a record that does not exist, or a view that
// has expired (an expired view is never returned).
var ErrNotFound = errors.New("store: not found")

// ErrExpired is returned (wrapped) by View for a view whose ExpiresAt has
// passed, whether or not a sweep has deleted it yet. It wraps ErrNotFound,
// so errors.Is(err, ErrNotFound) holds for it too: a caller that only
// knows "not found" treats an expired view as gone, and a caller that wants
// to tell the two apart (410 Gone rather than 404) checks ErrExpired first.
var ErrExpired error = expiredError{}

type expiredError struct{}

func (expiredError) Error() string { return "store: expired" }
func (expiredError) Unwrap() error { return ErrNotFound }

// ErrRevoked is returned (wrapped) by View for a view an admin revoked
// (RevokeView). It wraps ErrExpired, and so ErrNotFound too: everything
// that refuses an expired view refuses a revoked one the same way, and a
// caller that wants to say why checks ErrRevoked first.
var ErrRevoked error = revokedError{}

type revokedError struct{}

func (revokedError) Error() string { return "store: revoked" }
func (revokedError) Unwrap() error { return ErrExpired }

// ErrInvalid is returned (wrapped, with the reason) for a write that could
// never succeed: a missing id, an HTML hash that does not match the bytes, a
// tenant id containing a NUL byte. Nothing of such a write is stored.
var ErrInvalid = errors.New("store: invalid")

// invalidError is ErrInvalid with its reason. The reason is written for
// the person whose input it was (an admin's binding, their data rules):
// Words gives it alone, as internal/web's Words reads it, while Error adds
// the sentinel's text and the callers' wrapping adds which record, for the
// log.
type invalidError struct{ reason string }

func (e *invalidError) Error() string { return e.reason + ": " + ErrInvalid.Error() }
func (e *invalidError) Unwrap() error { return ErrInvalid }

// Words is the reason, in words fit for a person.
func (e *invalidError) Words() string { return e.reason }

// invalid returns ErrInvalid with the reason format and args make.
func invalid(format string, args ...any) error {
	return &invalidError{reason: fmt.Sprintf(format, args...)}
}

// ErrConflict is returned (wrapped, with both versions) by a put that
// names the version it replaces when the stored record is at another: a
// change made in between would be lost. Nothing is written; the caller
// reads the record again and retries or reports.
var ErrConflict = errors.New("store: version conflict")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store: closed")

// ErrLocked is returned by Open when another process, or another Store in
// this one, holds the file and did not let go within the open timeout.
var ErrLocked = errors.New("store: file is in use by another process or Store")

// ErrSchemaTooNew is returned by Open for a file written by a newer version
// of this service, whose schema this code does not know.
var ErrSchemaTooNew = errors.New("store: schema is newer than this program")

// DefaultOpenTimeout is how long Open waits for the file lock when
// Options.OpenTimeout is zero.
const DefaultOpenTimeout = 5 * time.Second

// Retention defaults: what Options.AuditRetention and Options.RunRetention
// mean when zero.
const (
	DefaultAuditRetention = 90 * 24 * time.Hour
	DefaultRunRetention   = 30 * 24 * time.Hour
)

// Options configures Open. The zero value is usable.
type Options struct {
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// OpenTimeout bounds waiting for the file lock; zero means 5 s.
	OpenTimeout time.Duration
	// AuditRetention is how long an audit record is kept after its Time:
	// a sweep deletes the records whose Time is at or before now minus
	// AuditRetention. Zero means DefaultAuditRetention (90 days); a
	// negative value keeps them forever.
	AuditRetention time.Duration
	// RunRetention is how long a run and its delivery are kept after the
	// run's CreatedAt: a sweep deletes those made at or before now minus
	// RunRetention, unless a view of the run can still be opened, which
	// keeps the run until a later sweep. Zero means DefaultRunRetention
	// (30 days); a negative value keeps them forever.
	RunRetention time.Duration
}

// Store is the service's state: the records described in the package
// doc, on bbolt (Open) or PostgreSQL (OpenPostgres). Its methods are the
// rules of the records, written once; its backend only stores them. They
// are safe for concurrent use, from one process or, on PostgreSQL, from
// several.
type Store struct {
	be  backend
	now func() time.Time
	log *slog.Logger
	// auditRetention and runRetention are the Options' (defaults
	// applied); zero or less keeps records forever.
	auditRetention, runRetention time.Duration
	// pageScan is how many index entries one page of a listing reads at
	// most (defaultPageScan); tests lower it.
	pageScan int
	// exportBatch is how many index entries one read of an export reads
	// at most (defaultExportBatch); tests lower it.
	exportBatch int
	// exportReads counts the exports' reads under way, so that tests
	// can check that an export never calls back inside one.
	exportReads atomic.Int32
	// cursorKey signs the cursors of listings, so that a cursor cannot
	// be forged or moved to another query; each backend keeps it.
	cursorKey []byte
	// writes counts the writes committed.
	writes atomic.Uint64
	// turnRecords remembers the history turns' records History decoded.
	turnRecords *turnMemo
	// stopped is closed by Close, which ends RunSweeper.
	stopped   chan struct{}
	closeOnce sync.Once
}

// Open opens (creating and migrating) the bbolt store file at path. It
// creates the parent folder (mode 0700) and the file (mode 0600) if
// needed. If the file is held by someone else it fails with ErrLocked
// after Options.OpenTimeout, or sooner if ctx has an earlier deadline.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	return openBolt(ctx, path, opts, schema())
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
	return openPostgres(ctx, url, opts, pgSchema())
}

// newStore is a Store on be with opts' defaults applied.
func newStore(be backend, cursorKey []byte, opts Options) *Store {
	s := &Store{
		be:             be,
		now:            opts.Now,
		log:            opts.Logger,
		pageScan:       defaultPageScan,
		exportBatch:    defaultExportBatch,
		auditRetention: retention(opts.AuditRetention, DefaultAuditRetention),
		runRetention:   retention(opts.RunRetention, DefaultRunRetention),
		cursorKey:      cursorKey,
		stopped:        make(chan struct{}),
		turnRecords:    newTurnMemo(turnMemoMax),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// retention is an Options retention with its default applied: zero is
// def, and a negative value (keep forever) becomes zero.
func retention(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Stats counts the writes and the transactions they were committed in since
// Open; Writes/Commits is the average group-commit size.
type Stats struct {
	Writes  uint64
	Commits uint64
}

// Stats returns the write counters, for metrics.
func (s *Store) Stats() Stats { return Stats{Writes: s.writes.Load(), Commits: s.be.commits()} }

// write runs fn in a write of the backend (see backend.write), and counts
// it once committed.
func (s *Store) write(ctx context.Context, lazy bool, fn func(w writer) error) error {
	return s.counted(s.be.write(ctx, lazy, fn))
}

// writeLater is write, lazy, for a caller that does not wait: then is
// called with its outcome, quickly, from whichever goroutine committed it.
func (s *Store) writeLater(ctx context.Context, fn func(w writer) error, then func(error)) {
	s.be.writeLater(ctx, fn, func(err error) { then(s.counted(err)) })
}

// counted counts a write whose outcome is err once it committed.
func (s *Store) counted(err error) error {
	if err == nil {
		s.writes.Add(1)
	}
	return err
}

// Close waits for the writes already handed in to commit, then closes the
// file (or the database's connections). Later calls return ErrClosed.
func (s *Store) Close() error {
	err := s.be.close()
	s.closeOnce.Do(func() { close(s.stopped) })
	return err
}

// Ping checks that the store is open and readable and its schema is
// current.
func (s *Store) Ping(ctx context.Context) error { return s.be.ping(ctx) }

// Backup writes a consistent copy of the whole file to w while the store
// keeps serving, and returns the number of bytes written. The copy is a
// valid store file that Open accepts. It holds one read transaction for
// the whole copy, so a writer that needs to grow the file waits for it: run
// it when the service is quiet. A PostgreSQL store is backed up with the
// database's own tools (errors.ErrUnsupported).
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	n, err := s.be.backup(ctx, w)
	if err != nil {
		return n, fmt.Errorf("store: backup: %w", err)
	}
	return n, nil
}

// get reads the record key with get, naming it (what and key) in the
// error.
func get[T any](ctx context.Context, s *Store, what, key string, get func(r reader, key string) (T, error)) (T, error) {
	var v T
	err := s.be.read(ctx, func(r reader) error {
		var err error
		v, err = get(r, key)
		return err
	})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("%s %.128s: %w", what, key, err)
	}
	return v, nil
}

// list reads records of tenant with list, after checking tenant as a key
// part; what names them in the error.
func list[T any](ctx context.Context, s *Store, what, tenant string, list func(r reader) ([]T, error)) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart(what+" tenant", tenant); err != nil {
		return nil, err
	}
	var out []T
	err := s.be.read(ctx, func(r reader) error {
		var err error
		out, err = list(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s of tenant %s: %w", what, tenant, err)
	}
	return out, nil
}
