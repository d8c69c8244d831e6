package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/bbolt"
)

// maxAuditName bounds tenant ids and actions, which are index key parts.
const maxAuditName = 256

// AuditRecord is one entry of the append-only audit log.
type AuditRecord struct {
	Seq      uint64         `json:"seq"` // set by the store
	Time     time.Time      `json:"time"`
	TenantID string         `json:"tenantId"`
	Action   string         `json:"action"` // e.g. agent.mcp_app.view
	Actor    string         `json:"actor,omitempty"`
	Fields   map[string]any `json:"fields,omitempty"`
}

// AuditQuery selects audit records; zero fields match everything.
type AuditQuery struct {
	TenantID string
	Action   string
	From, To time.Time // [From, To)
	// Limit caps how many records come back; zero or less means all.
	Limit int
	// Newest returns the records newest first, so that with Limit the
	// most recent ones come back; by default the oldest come first.
	Newest bool
}

// preparedAudit is one record encoded outside the transaction; its
// sequence number is drawn inside it.
type preparedAudit struct {
	time   [8]byte
	tenant string
	action string
	value  []byte
}

// prepareAudit checks and encodes records. A record without a time gets
// the store's clock. The action is required; an empty tenant is allowed
// for events that belong to no tenant.
func (s *base) prepareAudit(recs []AuditRecord) ([]preparedAudit, error) {
	out := make([]preparedAudit, 0, len(recs))
	for i, r := range recs {
		if err := checkAuditName("action", r.Action, false); err != nil {
			return nil, fmt.Errorf("audit record %d: %w", i, err)
		}
		if err := checkAuditName("tenant", r.TenantID, true); err != nil {
			return nil, fmt.Errorf("audit record %d: %w", i, err)
		}
		if r.Time.IsZero() {
			r.Time = s.now()
		}
		r.Seq = 0 // the key holds it
		value, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("audit record %d (%s): %w", i, r.Action, err)
		}
		out = append(out, preparedAudit{time: timeKey(r.Time), tenant: r.TenantID, action: r.Action, value: value})
	}
	return out, nil
}

func checkAuditName(what, v string, emptyOK bool) error {
	switch {
	case v == "" && !emptyOK:
		return invalid("the %s is empty", what)
	case len(v) > maxAuditName:
		return invalid("the %s is %d bytes long, at most %d", what, len(v), maxAuditName)
	case strings.IndexByte(v, 0) >= 0:
		return invalid("the %s contains a NUL byte", what)
	}
	return nil
}

// appendAudit writes prepared records and their index entries.
func appendAudit(tx *bbolt.Tx, recs []preparedAudit) error {
	if len(recs) == 0 {
		return nil
	}
	main := tx.Bucket([]byte(bucketAudit))
	byTenant := tx.Bucket([]byte(bucketAuditByTenant))
	byAction := tx.Bucket([]byte(bucketAuditByAction))
	byBoth := tx.Bucket([]byte(bucketAuditByTenantAction))
	empty := []byte{}
	for _, r := range recs {
		seq, err := main.NextSequence()
		if err != nil {
			return err
		}
		pk := binary.BigEndian.AppendUint64(append(make([]byte, 0, 16), r.time[:]...), seq)
		if err := main.Put(pk, r.value); err != nil {
			return err
		}
		if err := byTenant.Put(indexKey(pk, r.tenant), empty); err != nil {
			return err
		}
		if err := byAction.Put(indexKey(pk, r.action), empty); err != nil {
			return err
		}
		if err := byBoth.Put(indexKey(pk, r.tenant, r.action), empty); err != nil {
			return err
		}
	}
	return nil
}

// indexKey is each part followed by a NUL, then suffix.
func indexKey(suffix []byte, parts ...string) []byte {
	n := len(suffix)
	for _, p := range parts {
		n += len(p) + 1
	}
	k := make([]byte, 0, n)
	for _, p := range parts {
		k = append(append(k, p...), 0)
	}
	return append(k, suffix...)
}

// Append adds audit records to the log in one commit, each with the next
// sequence number. A record with a zero Time is stamped with the store's
// clock; Seq is ignored. It returns once the records are on disk.
func (s *boltStore) Append(ctx context.Context, recs ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	prepared, err := s.prepareAudit(recs)
	if err != nil {
		return err
	}
	if err := s.write(ctx, func(tx *bbolt.Tx) error { return appendAudit(tx, prepared) }); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	return nil
}

// Audit returns the matching records in time order (records with the same
// time in the order they were appended), oldest first unless q.Newest.
// A query by tenant, action or both reads only the matching records,
// through an index.
func (s *boltStore) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.IndexByte(q.TenantID, 0) >= 0 || strings.IndexByte(q.Action, 0) >= 0 {
		return nil, invalid("audit query: NUL byte in tenant or action")
	}
	bucket, prefix := bucketAudit, []byte(nil)
	switch {
	case q.TenantID != "" && q.Action != "":
		bucket, prefix = bucketAuditByTenantAction, indexKey(nil, q.TenantID, q.Action)
	case q.TenantID != "":
		bucket, prefix = bucketAuditByTenant, indexKey(nil, q.TenantID)
	case q.Action != "":
		bucket, prefix = bucketAuditByAction, indexKey(nil, q.Action)
	}
	// The scan covers [lo, hi): from prefix|T(From) up to prefix|T(To),
	// or to the end of the prefix.
	lo := prefix
	if !q.From.IsZero() {
		t := timeKey(q.From)
		lo = append(bytes.Clone(prefix), t[:]...)
	}
	var hi []byte // nil: no upper bound
	if !q.To.IsZero() {
		t := timeKey(q.To)
		hi = append(bytes.Clone(prefix), t[:]...)
	} else if len(prefix) > 0 {
		hi = prefixEnd(prefix)
	}
	var out []AuditRecord
	err := s.read(func(tx *bbolt.Tx) error {
		main := tx.Bucket([]byte(bucketAudit))
		c := tx.Bucket([]byte(bucket)).Cursor()
		var k []byte
		if q.Newest {
			if hi == nil {
				k, _ = c.Last()
			} else if k, _ = c.Seek(hi); k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
		} else {
			k, _ = c.Seek(lo)
		}
		for ; k != nil; k = step(c, q.Newest) {
			if q.Newest && bytes.Compare(k, lo) < 0 || !q.Newest && hi != nil && bytes.Compare(k, hi) >= 0 {
				break
			}
			if q.Limit > 0 && len(out) >= q.Limit {
				break
			}
			pk := k[len(prefix):]
			if len(pk) != 16 {
				return fmt.Errorf("audit index %s: malformed key %x", bucket, k)
			}
			value := main.Get(pk)
			if value == nil {
				return fmt.Errorf("audit index %s: no record for %x", bucket, pk)
			}
			var r AuditRecord
			if err := json.Unmarshal(value, &r); err != nil {
				return fmt.Errorf("audit record %x: %w", pk, err)
			}
			r.Seq = binary.BigEndian.Uint64(pk[8:])
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit query: %w", err)
	}
	return out, nil
}

func step(c *bbolt.Cursor, back bool) []byte {
	var k []byte
	if back {
		k, _ = c.Prev()
	} else {
		k, _ = c.Next()
	}
	return k
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix. Our prefixes end in a NUL byte, so incrementing the last byte is
// enough.
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	end[len(end)-1]++
	return end
}
