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

// boltStore is the bbolt backend: the service's state in one file, laid
// out as the package doc draws it. Its writes go through one writer
// goroutine that commits them in groups (boltwriter.go); its reads and
// writes are a boltTx's methods (boltrecords.go, boltaudit.go).
type boltStore struct {
	db  *bbolt.DB
	log *slog.Logger

	// sweepBatch is how many records one sweep transaction deletes at
	// first; tests lower it.
	sweepBatch int
	// lazyWait is how long an idle writer holds a lazy write back
	// (defaultLazyWait); tests raise it.
	lazyWait time.Duration

	// The group-commit queue (see boltwriter.go).
	mu      sync.Mutex
	pending []*writeReq
	eager   int // writes in pending that are not lazy
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	commitCount atomic.Uint64
}

// openBolt opens the file at path with migrations.
func openBolt(ctx context.Context, path string, opts Options, migrations []migration) (*Store, error) {
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
		db:         db,
		log:        opts.Logger,
		sweepBatch: defaultSweepBatch,
		lazyWait:   defaultLazyWait,
		wake:       make(chan struct{}, 1),
		stopped:    make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := s.migrate(ctx, migrations); err != nil {
		db.Close()
		return nil, err
	}
	var cursorKey []byte
	if err := s.view(func(tx *bbolt.Tx) error {
		// Files of a version before 4 (only tests open those) have no
		// key, and their listings refuse cursors.
		cursorKey = bytes.Clone(tx.Bucket([]byte(bucketMeta)).Get([]byte(keyCursorKey)))
		return nil
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	go s.runWriter()
	return newStore(s, cursorKey, opts), nil
}

// commits counts the commits, which writes share.
func (s *boltStore) commits() uint64 { return s.commitCount.Load() }

// close waits for the writes already handed in to commit, then closes the
// file.
func (s *boltStore) close() error {
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

// ping checks that the file is open and readable and has a schema.
func (s *boltStore) ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.view(func(tx *bbolt.Tx) error {
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

// read runs fn in a read transaction. What fn reads is decoded inside it:
// bbolt's slices are only valid until the transaction ends.
func (s *boltStore) read(ctx context.Context, fn func(r reader) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// As db.View, without a function of its own to wrap fn in.
	tx, err := s.db.Begin(false)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	if err != nil {
		return err
	}
	defer tx.Rollback()
	return fn(boltTx{tx})
}

// view runs fn in a read transaction of the file.
func (s *boltStore) view(fn func(tx *bbolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// backup writes a consistent copy of the whole file to w, in one read
// transaction.
func (s *boltStore) backup(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	err := s.view(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	return n, err
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

// boltTx is a bbolt transaction as a reader, and in the writer goroutine
// as a writer: the records' storage functions are its methods.
type boltTx struct {
	tx *bbolt.Tx
}

func (t boltTx) bucket(name string) *bbolt.Bucket { return t.tx.Bucket([]byte(name)) }
