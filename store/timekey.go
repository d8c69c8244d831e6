package store

import (
	"encoding/binary"
	"math"
	"time"
)

// Both backends keep times as Unix nanoseconds, clamped to the years 1678
// to 2262 (where UnixNano is defined): bbolt as 8 bytes whose byte order
// is time order (timeKey), PostgreSQL as bigint (ns). So both order and
// cut times the same way, and a cursor's position is the same on both.

// timeKey encodes t so that byte order is time order: Unix nanoseconds with
// the sign bit flipped, big-endian. Times outside the years 1678 to 2262
// (where UnixNano is undefined) are clamped.
func timeKey(t time.Time) [8]byte {
	// UnixNano is defined for whole seconds strictly inside these bounds.
	const minSec, maxSec = math.MinInt64/int64(time.Second) + 1, math.MaxInt64/int64(time.Second) - 1
	var n int64
	switch sec := t.Unix(); {
	case sec < minSec:
		n = math.MinInt64
	case sec > maxSec:
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(n)^(1<<63))
	return k
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }

// ns is a time as the bigint columns keep it: the Unix nanoseconds that
// timeKey orders by, clamped alike.
func ns(t time.Time) int64 { return keyNS(timeKey(t)) }

// keyNS decodes a timeKey.
func keyNS(k [8]byte) int64 { return int64(binary.BigEndian.Uint64(k[:]) ^ 1<<63) }

// nsKey encodes the Unix nanoseconds n as a timeKey.
func nsKey(n int64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(n)^1<<63)
	return k
}

// nsTime is the time of Unix nanoseconds n, in UTC.
func nsTime(n int64) time.Time { return time.Unix(0, n).UTC() }
