package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"

	"go.etcd.io/bbolt"
)

// Page sizes of the listings (AuditPage, ActiveViews, RecentRuns).
const (
	// DefaultPageSize is the page size a limit of zero or less asks for.
	DefaultPageSize = 50
	// MaxPageSize is the largest page; a larger limit is lowered to it.
	MaxPageSize = 1000
)

// defaultPageScan bounds the index entries one page reads: a page whose
// filter matches few records stops there, short, with a cursor to go on,
// so that no request reads the whole log.
const defaultPageScan = 5000

func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return DefaultPageSize
	case limit > MaxPageSize:
		return MaxPageSize
	}
	return limit
}

// seekLastUnder moves c to the last key before bound, or before every key
// starting with prefix when bound is nil, and returns it and its value
// (nil if there is none).
func seekLastUnder(c *bbolt.Cursor, prefix, bound []byte) (k, v []byte) {
	if bound == nil {
		bound = prefixEnd(prefix)
	}
	if k, _ = c.Seek(bound); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// A cursor is, in unpadded base64url, a kind byte, the position (the
// index key after the tenant's prefix where the page stopped) and the
// first 16 bytes of an HMAC-SHA256, keyed by meta/cursor_key, of the kind,
// the query the cursor belongs to and the position. A cursor edited, made
// up, or taken from another query (another tenant's, other filters) does
// not verify.
const (
	cursorAudit  = 'a'
	cursorViews  = 'v'
	cursorMACLen = 16
	maxCursorLen = 2048
)

func (s *base) makeCursor(kind byte, query, pos []byte) string {
	b := append([]byte{kind}, pos...)
	b = append(b, s.cursorMAC(b, query)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *base) cursorMAC(kindPos, query []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(binary.AppendUvarint(nil, uint64(len(query))))
	m.Write(query)
	m.Write(kindPos)
	return m.Sum(nil)[:cursorMACLen]
}

// readCursor returns the position of a cursor made by makeCursor for the
// same kind and query; anything else is ErrInvalid.
func (s *base) readCursor(kind byte, query []byte, c string) ([]byte, error) {
	if len(c) > maxCursorLen {
		return nil, invalid("cursor of %d bytes", len(c))
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 1+cursorMACLen || b[0] != kind || len(s.cursorKey) == 0 {
		return nil, invalid("malformed cursor")
	}
	kindPos, mac := b[:len(b)-cursorMACLen], b[len(b)-cursorMACLen:]
	if !hmac.Equal(mac, s.cursorMAC(kindPos, query)) {
		return nil, invalid("cursor is not one of this query's")
	}
	return bytes.Clone(kindPos[1:]), nil
}

// queryBinding encodes what a cursor is bound to: each part with its
// length, and times to the nanosecond (zero as empty).
func queryBinding(parts []string, times ...time.Time) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	for _, t := range times {
		if t.IsZero() {
			b = append(b, 0)
			continue
		}
		k := timeKey(t)
		b = append(append(b, 1), k[:]...)
	}
	return b
}
