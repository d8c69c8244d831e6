package store

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"time"
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

// A cursor is, in unpadded base64url, a kind byte, the position (where
// the page stopped, as the bbolt index key after the tenant's prefix has
// it: T | N in the audit log, T | id among views) and the first 16 bytes
// of an HMAC-SHA256, keyed by the store's cursor key, of the kind, the
// query the cursor belongs to and the position. A cursor edited, made
// up, or taken from another query (another tenant's, other filters) does
// not verify.
const (
	cursorAudit  = 'a'
	cursorViews  = 'v'
	cursorMACLen = 16
	maxCursorLen = 2048
)

func (s *Store) makeCursor(kind byte, query, pos []byte) string {
	b := append([]byte{kind}, pos...)
	b = append(b, s.cursorMAC(b, query)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Store) cursorMAC(kindPos, query []byte) []byte {
	m := hmac.New(sha256.New, s.cursorKey)
	m.Write(binary.AppendUvarint(nil, uint64(len(query))))
	m.Write(query)
	m.Write(kindPos)
	return m.Sum(nil)[:cursorMACLen]
}

// readCursor returns the position of a cursor made by makeCursor for the
// same kind and query; anything else is ErrInvalid.
func (s *Store) readCursor(kind byte, query []byte, c string) ([]byte, error) {
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
