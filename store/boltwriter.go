package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// maxGroup bounds how many writes share one transaction, so that a burst
// after a stall does not make one huge commit.
const maxGroup = 1000

// defaultLazyWait is how long an idle writer holds back a lazy write (see
// write) for another write to share its commit: longer than a turn
// takes from one answer to the next run's save, short enough that the lazy
// caller hardly notices.
const defaultLazyWait = 5 * time.Millisecond

// writeReq is one write waiting for the writer goroutine. apply should
// mostly put and delete already-encoded bytes: it runs inside the shared
// transaction, which every other write waits for, may be run again if
// another write in the group fails, and must not do I/O of its own.
type writeReq struct {
	ctx   context.Context
	apply func(tx *bbolt.Tx) error
	done  chan error
	// then, when set, hears the outcome instead of done (writeLater).
	then func(error)
	lazy bool
}

// answer gives the write's outcome to whoever waits for it.
func (r *writeReq) answer(err error) {
	if r.then != nil {
		r.then(err)
		return
	}
	r.done <- err
}

// errItemFailed aborts a group transaction when one of its writes fails, so
// that the rest can be committed without it.
var errItemFailed = errors.New("store: a write in the group failed")

// write runs fn in the writer goroutine's next transaction and waits
// until it is committed (or refused). A ctx cancelled before the write is
// taken into a transaction returns ctx's error and nothing is written;
// once the write is in a transaction it is waited for, so the answer
// always says whether it landed.
//
// A lazy write is one nobody waits on to carry on (such as where an
// answer already sent went). Found alone by an idle writer, it is held
// back up to defaultLazyWait for another write to share its commit, so
// that it does not take a commit of its own just before a write someone
// is waiting for, which would then wait for it. Any other write, or
// Close, ends the wait at once.
func (s *boltStore) write(ctx context.Context, lazy bool, fn func(w writer) error) error {
	return s.enqueue(ctx, &writeReq{ctx: ctx, lazy: lazy, apply: func(tx *bbolt.Tx) error { return fn(boltTx{tx}) }})
}

func (s *boltStore) enqueue(ctx context.Context, r *writeReq) error {
	r.done = make(chan error, 1)
	if err := s.add(ctx, r); err != nil {
		return err
	}
	return <-r.done
}

// writeLater is write, lazy, without waiting: the writer calls then.
func (s *boltStore) writeLater(ctx context.Context, fn func(w writer) error, then func(error)) {
	r := &writeReq{ctx: ctx, lazy: true, then: then, apply: func(tx *bbolt.Tx) error { return fn(boltTx{tx}) }}
	if err := s.add(ctx, r); err != nil {
		then(err)
	}
}

// add hands r to the writer goroutine.
func (s *boltStore) add(ctx context.Context, r *writeReq) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.pending = append(s.pending, r)
	if !r.lazy {
		s.eager++
	}
	s.mu.Unlock()
	s.signal()
	return nil
}

// signal wakes the writer without blocking; one buffered token is enough
// because the writer takes every pending write after each wake-up.
func (s *boltStore) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runWriter is the one goroutine that commits writes. When idle it commits
// a write as soon as it arrives; while it commits, new writes pile up in
// s.pending and all go into the next transaction.
func (s *boltStore) runWriter() {
	defer close(s.stopped)
	var spare []*writeReq
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	for range s.wake {
		s.mu.Lock()
		onlyLazy := !s.closed && s.eager == 0 && len(s.pending) > 0
		s.mu.Unlock()
		if onlyLazy {
			// Wait for company: the next write (or Close) wakes us.
			hold.Reset(s.lazyWait)
			select {
			case <-s.wake:
				hold.Stop()
			case <-hold.C:
			}
		}
		s.mu.Lock()
		group := s.pending
		s.pending = spare[:0]
		s.eager = 0
		closed := s.closed
		s.mu.Unlock()
		for i := 0; i < len(group); i += maxGroup {
			s.commit(group[i:min(i+maxGroup, len(group))])
		}
		clear(group)
		spare = group[:0]
		if closed {
			// Close set closed before its wake-up, and no write is
			// queued after closed is set: this group was the last.
			return
		}
	}
}

// commit writes a group in one transaction and answers each caller.
func (s *boltStore) commit(group []*writeReq) {
	live := make([]*writeReq, 0, len(group))
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.answer(err)
			continue
		}
		live = append(live, r)
	}
	for len(live) > 0 {
		failed := -1
		var failErr error
		err := s.db.Update(func(tx *bbolt.Tx) error {
			for i, r := range live {
				if err := r.apply(tx); err != nil {
					failed, failErr = i, err
					return errItemFailed
				}
			}
			return nil
		})
		if failed >= 0 && errors.Is(err, errItemFailed) {
			// The transaction was rolled back: answer the write that
			// failed and commit the others without it.
			live[failed].answer(failErr)
			live = append(live[:failed], live[failed+1:]...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("store: commit: %w", err)
		} else {
			s.commitCount.Add(1)
		}
		for _, r := range live {
			r.answer(err)
		}
		return
	}
}
