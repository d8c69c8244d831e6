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
	put, err := s.arrival(ctx, key, window)
	if err == nil {
		err = s.write(ctx, true, put)
	}
	if err != nil {
		return fmt.Errorf("store: record activity %.64q: %w", key, err)
	}
	return nil
}

// RecordArrivalLater is RecordArrival for a caller that does not wait
// for it: thousands of messages arriving at once each had a goroutine
// waiting for its commit. then is called once with what RecordArrival
// would return, from whichever goroutine committed the write; it must be
// quick and must not use the store.
func (s *Store) RecordArrivalLater(ctx context.Context, key string, window time.Duration, then func(error)) {
	put, err := s.arrival(ctx, key, window)
	if err != nil {
		then(fmt.Errorf("store: record activity %.64q: %w", key, err))
		return
	}
	s.writeLater(ctx, put, func(err error) {
		if err != nil {
			err = fmt.Errorf("store: record activity %.64q: %w", key, err)
		}
		then(err)
	})
}

// arrival checks an arrival to record and returns its write.
func (s *Store) arrival(ctx context.Context, key string, window time.Duration) (func(w writer) error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID("activity", key); err != nil {
		return nil, err
	}
	until := s.now().Add(window)
	return func(w writer) error { return w.putArrival(key, until) }, nil
}
