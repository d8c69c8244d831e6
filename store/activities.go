package store

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
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
func (s *boltStore) Seen(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkID("activity", key); err != nil {
		return false, err
	}
	nowKey := timeKey(s.now())
	seen := false
	err := s.read(func(tx *bbolt.Tx) error {
		if v := tx.Bucket([]byte(bucketActivities)).Get([]byte(key)); v != nil && bytes.Compare(v, nowKey[:]) > 0 {
			seen = true
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("store: activity %.64q: %w", key, err)
	}
	return seen, nil
}

// RecordArrival keeps the activity's arrival for window. It shares the
// commit of the next write (the run the activity starts, most often)
// rather than take one of its own: an activity whose run was never
// committed may well run again after a crash, and should.
func (s *boltStore) RecordArrival(ctx context.Context, key string, window time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("activity", key); err != nil {
		return err
	}
	expires := timeKey(s.now().Add(window))
	k := []byte(key)
	err := s.writeLazy(ctx, func(tx *bbolt.Tx) error {
		seen := tx.Bucket([]byte(bucketActivities))
		byExpiry := tx.Bucket([]byte(bucketActivitiesByExpiry))
		if old := seen.Get(k); old != nil {
			if err := byExpiry.Delete(append(bytes.Clone(old), k...)); err != nil {
				return err
			}
		}
		if err := seen.Put(k, expires[:]); err != nil {
			return err
		}
		return byExpiry.Put(append(expires[:], k...), nil)
	})
	if err != nil {
		return fmt.Errorf("store: record activity %.64q: %w", key, err)
	}
	return nil
}

// sweepActivities deletes the arrivals whose window is over, oldest first.
func sweepActivities(now time.Time) sweepStep {
	cut := timeKey(now)
	return func(tx *bbolt.Tx, batch int, _ []byte) (SweepStats, []byte, error) {
		var did SweepStats
		byExpiry := tx.Bucket([]byte(bucketActivitiesByExpiry))
		seen := tx.Bucket([]byte(bucketActivities))
		var todo [][]byte
		c := byExpiry.Cursor()
		for k, _ := c.First(); k != nil && len(todo) < batch && bytes.Compare(k[:8], cut[:]) <= 0; k, _ = c.Next() {
			todo = append(todo, bytes.Clone(k))
		}
		for _, k := range todo {
			if err := byExpiry.Delete(k); err != nil {
				return did, nil, err
			}
			// A later arrival of the same activity has its own expiry:
			// only the record this entry made goes.
			if v := seen.Get(k[8:]); v != nil && bytes.Equal(v, k[:8]) {
				if err := seen.Delete(k[8:]); err != nil {
					return did, nil, err
				}
			}
			did.Activities++
		}
		return did, more(len(todo) == batch), nil
	}
}
