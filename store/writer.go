package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"
)

// maxGroup bounds how many writes share one transaction, so that a burst
// after a stall does not make one huge commit.
const maxGroup = 1000

// writeReq is one write waiting for the writer goroutine. apply must only
// put and delete already-encoded bytes: it runs inside the shared
// transaction, may be run again if another write in the group fails, and
// must not do I/O of its own.
type writeReq struct {
	ctx   context.Context
	apply func(tx *bbolt.Tx) error
	done  chan error
}

// errItemFailed aborts a group transaction when one of its writes fails, so
// that the rest can be committed without it.
var errItemFailed = errors.New("store: a write in the group failed")

// write hands apply to the writer goroutine and waits until it is
// committed (or refused). A ctx cancelled before the write is taken into a
// transaction returns ctx's error and nothing is written; once the write is
// in a transaction it is waited for, so the answer always says whether it
// landed.
func (s *Store) write(ctx context.Context, apply func(tx *bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, apply: apply, done: make(chan error, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.pending = append(s.pending, r)
	s.mu.Unlock()
	s.signal()
	return <-r.done
}

// signal wakes the writer without blocking; one buffered token is enough
// because the writer takes every pending write after each wake-up.
func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// runWriter is the one goroutine that commits writes. When idle it commits
// a write as soon as it arrives; while it commits, new writes pile up in
// s.pending and all go into the next transaction.
func (s *Store) runWriter() {
	defer close(s.stopped)
	var spare []*writeReq
	for range s.wake {
		s.mu.Lock()
		group := s.pending
		s.pending = spare[:0]
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
func (s *Store) commit(group []*writeReq) {
	live := make([]*writeReq, 0, len(group))
	for _, r := range group {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
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
			live[failed].done <- failErr
			live = append(live[:failed], live[failed+1:]...)
			continue
		}
		if err != nil {
			err = fmt.Errorf("store: commit: %w", err)
		} else {
			s.commits.Add(1)
			s.writes.Add(uint64(len(live)))
		}
		for _, r := range live {
			r.done <- err
		}
		return
	}
}
