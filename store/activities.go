package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Teams retries an activity it got no answer to within 15 seconds, and
// may do so after the service restarted; the bot must not run it twice.
// The activities it has seen are kept here for a window (the bot's is 15
// minutes), so that the check survives a restart, and so that every
// replica on one store shares it.

// Seen reports whether the activity key (the bot's choice: conversation
// and activity id) arrived before and that arrival's window is not over.
// It only reads: a caller that must not run an activity twice at once
// keeps its own record of what is under way.
func (s *Store) Seen(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkID("activity", key); err != nil {
		return false, err
	}
	now := s.now()
	seen := false
	err := s.be.read(ctx, func(r reader) error {
		until, err := r.arrival(key)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		seen = until.After(now)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("store: activity %.64q: %w", key, err)
	}
	return seen, nil
}

// RecordArrival keeps the activity's arrival for window. On bbolt it
// shares the commit of the next write (the run the activity starts, most
// often) rather than take one of its own: an activity whose run was never
// committed may well run again after a crash, and should. On PostgreSQL it
// is committed at once: a replica answering a retry of this activity reads
// what is committed now.
func (s *Store) RecordArrival(ctx context.Context, key string, window time.Duration) error {
	done := make(chan error, 1)
	s.RecordArrivalLater(ctx, key, window, func(err error) { done <- err })
	return <-done
}

// RecordArrivalLater is RecordArrival for a caller that does not wait
// for it: thousands of messages arriving at once each had a goroutine
// waiting for its commit. then is called once with what RecordArrival
// would return, from whichever goroutine committed the write; it must be
// quick and must not use the store.
func (s *Store) RecordArrivalLater(ctx context.Context, key string, window time.Duration, then func(error)) {
	failed := func(err error) {
		if err != nil {
			err = fmt.Errorf("store: record activity %.64q: %w", key, err)
		}
		then(err)
	}
	if err := ctx.Err(); err != nil {
		failed(err)
		return
	}
	if err := checkID("activity", key); err != nil {
		failed(err)
		return
	}
	until := s.now().Add(window)
	s.writeLater(ctx, func(w writer) error { return w.putArrival(key, until) }, failed)
}
