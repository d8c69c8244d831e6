package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
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

// base is what both backends share: the clock, the logger, the
// retentions and listing bounds, and the key that signs listing cursors.
// The checks and encodings made outside a transaction (prepareRun,
// prepareAudit, the cursors) are its methods, so that both backends
// refuse and encode alike.
type base struct {
	now func() time.Time
	log *slog.Logger
	// auditRetention and runRetention are the Options' (defaults
	// applied); zero or less keeps records forever.
	auditRetention, runRetention time.Duration
	// pageScan is how many index entries one page of a listing reads at
	// most (defaultPageScan); tests lower it.
	pageScan int
	// exportBatch is how many index entries one read transaction of an
	// export reads at most (defaultExportBatch); tests lower it.
	exportBatch int
	// cursorKey signs the cursors of listings (meta/cursor_key), so that
	// a cursor cannot be forged or moved to another query.
	cursorKey []byte
}

// newBase applies the Options' defaults.
func newBase(opts Options) base {
	b := base{
		now:            opts.Now,
		log:            opts.Logger,
		pageScan:       defaultPageScan,
		exportBatch:    defaultExportBatch,
		auditRetention: retention(opts.AuditRetention, DefaultAuditRetention),
		runRetention:   retention(opts.RunRetention, DefaultRunRetention),
	}
	if b.now == nil {
		b.now = time.Now
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b
}

// boltStore is the bbolt backend: the service's state in one file. Its
// methods are safe for concurrent use.
type boltStore struct {
	base
	db *bbolt.DB

	// sweepBatch is how many expired views one sweep transaction deletes
	// at most; tests lower it.
	sweepBatch int
	// lazyWait is how long an idle writer holds a lazy write back
	// (defaultLazyWait); tests raise it.
	lazyWait time.Duration
	// exportTxs counts the exports' open read transactions, so that tests
	// can check that an export never calls back inside one.
	exportTxs atomic.Int32

	// The group-commit queue (see writer.go).
	mu      sync.Mutex
	pending []*writeReq
	eager   int // writes in pending that are not lazy
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	commits atomic.Uint64
	writes  atomic.Uint64
}

// Stats counts the writes and the transactions they were committed in since
// Open; Writes/Commits is the average group-commit size.
type Stats struct {
	Writes  uint64
	Commits uint64
}

// Stats returns the write counters, for metrics.
func (s *boltStore) Stats() Stats {
	return Stats{Writes: s.writes.Load(), Commits: s.commits.Load()}
}

func open(ctx context.Context, path string, opts Options, migrations []migration) (*boltStore, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if path == "" {
		return nil, fmt.Errorf("store: open: %w", invalid("the path is empty"))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	timeout := opts.OpenTimeout
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		// Without a timeout a second Open of the same file blocks forever.
		Timeout: timeout,
		// The hashmap freelist stays fast when sweeps free many pages, and
		// not writing the freelist at every commit makes commits smaller;
		// the price is a scan of the file at open.
		FreelistType:   bbolt.FreelistMapType,
		NoFreelistSync: true,
		// A writer that must remap the file waits for every open read
		// transaction; mapping generously up front makes that rare.
		InitialMmapSize: 256 << 20,
		// bbolt's statistics are a shared lock on every read; we do
		// not use them.
		NoStatistics: true,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store: open %s: still locked after %s (is another instance running?): %w", path, timeout, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &boltStore{
		base:       newBase(opts),
		db:         db,
		sweepBatch: defaultSweepBatch,
		lazyWait:   defaultLazyWait,
		wake:       make(chan struct{}, 1),
		stopped:    make(chan struct{}),
	}
	if err := s.migrate(ctx, migrations); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.read(func(tx *bbolt.Tx) error {
		// Files of a version before 4 (only tests open those) have no
		// key, and their listings refuse cursors.
		s.cursorKey = bytes.Clone(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyCursorKey)))
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	go s.runWriter()
	return s, nil
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

// Close waits for the writes already handed in to commit, then closes the
// file. Later calls return ErrClosed.
func (s *boltStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.stopped
	// Commits skip the free list (NoFreelistSync), so an open has to walk
	// every page of the file to find the free ones: about a second for a
	// million views. A clean close writes the list once, in a last empty
	// commit, and the next open reads it instead; that open's first commit
	// drops it again, so after a crash the open walks the file, as bbolt
	// requires.
	s.db.NoFreelistSync = false
	if err := s.db.Update(func(*bbolt.Tx) error { return nil }); err != nil {
		s.log.Warn("free list not kept at close; the next start reads the whole file", "err", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("store: close: %w", err)
	}
	return nil
}

// Ping checks that the file is open and readable and its schema is current.
func (s *boltStore) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.read(func(tx *bbolt.Tx) error {
		v, err := schemaVersion(tx)
		if err != nil {
			return err
		}
		if v == 0 {
			return fmt.Errorf("store: ping: no schema version")
		}
		return nil
	})
}

// read runs fn in a read transaction. fn must copy out whatever it keeps:
// bbolt's slices are only valid until the transaction ends.
func (s *boltStore) read(fn func(tx *bbolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Backup writes a consistent copy of the whole file to w while the store
// keeps serving, and returns the number of bytes written. The copy is a
// valid store file that Open accepts. It holds one read transaction for
// the whole copy, so a writer that needs to grow the file waits for it: run
// it when the service is quiet.
func (s *boltStore) Backup(ctx context.Context, w io.Writer) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var n int64
	err := s.read(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("store: backup: %w", err)
	}
	return n, nil
}

// ctxWriter stops a long copy once ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
