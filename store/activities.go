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

// FirstSeen records that the activity key (the bot's choice: conversation
// and activity id) arrived now, and reports whether this is its first
// arrival within window: false means it arrived before and that arrival is
// less than window old. The record is committed before FirstSeen returns.
func (s *Store) FirstSeen(ctx context.Context, key string, window time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkID("activity", key); err != nil {
		return false, err
	}
	now := s.now()
	expires := timeKey(now.Add(window))
	nowKey := timeKey(now)
	k := []byte(key)
	first := false
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		seen := tx.Bucket([]byte(bucketActivities))
		byExpiry := tx.Bucket([]byte(bucketActivitiesByExpiry))
		if old := seen.Get(k); old != nil {
			if bytes.Compare(old, nowKey[:]) > 0 {
				first = false
				return nil
			}
			// Seen long ago: its window is over, this is a new arrival.
			if err := byExpiry.Delete(append(bytes.Clone(old), k...)); err != nil {
				return err
			}
		}
		first = true
		if err := seen.Put(k, expires[:]); err != nil {
			return err
		}
		return byExpiry.Put(append(expires[:], k...), nil)
	})
	if err != nil {
		return false, fmt.Errorf("store: activity %.64q: %w", key, err)
	}
	return first, nil
}

// ForgetSeen forgets an activity's arrival, so that Teams' retry of an
// activity the bot turned away (busy, shutting down) is run after all.
func (s *Store) ForgetSeen(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("activity", key); err != nil {
		return err
	}
	k := []byte(key)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		seen := tx.Bucket([]byte(bucketActivities))
		old := seen.Get(k)
		if old == nil {
			return nil
		}
		if err := tx.Bucket([]byte(bucketActivitiesByExpiry)).Delete(append(bytes.Clone(old), k...)); err != nil {
			return err
		}
		return seen.Delete(k)
	})
	if err != nil {
		return fmt.Errorf("store: forget activity %.64q: %w", key, err)
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
