package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"
)

// The audit log on bbolt: audit/ keyed T | N, and three indexes of the
// same keys under a tenant, an action, or both.

// appendAudit writes prepared records and their index entries, each
// numbered by the audit bucket's sequence.
func (t boltTx) appendAudit(recs []preparedAudit) error {
	if len(recs) == 0 {
		return nil
	}
	main := t.bucket(bucketAudit)
	byTenant := t.bucket(bucketAuditByTenant)
	byAction := t.bucket(bucketAuditByAction)
	byBoth := t.bucket(bucketAuditByTenantAction)
	var usage []usageCount
	for _, r := range recs {
		usage = append(usage, r.usage...)
		seq, err := main.NextSequence()
		if err != nil {
			return err
		}
		tk := timeKey(r.at)
		pk := binary.BigEndian.AppendUint64(append(make([]byte, 0, 16), tk[:]...), seq)
		if err := main.Put(pk, r.value); err != nil {
			return err
		}
		if err := byTenant.Put(indexKey(pk, r.tenant), []byte{}); err != nil {
			return err
		}
		if err := byAction.Put(indexKey(pk, r.action), []byte{}); err != nil {
			return err
		}
		if err := byBoth.Put(indexKey(pk, r.tenant, r.action), []byte{}); err != nil {
			return err
		}
	}
	return t.addUsage(mergeUsage(usage))
}

// auditRange is the range of one index that a query reads: entries
// prefix | T | N with lo <= key < hi (hi nil: to the end of the bucket).
type auditRange struct {
	bucket         string
	prefix, lo, hi []byte
}

// auditIndex is the range of the index answering tenant and action (""
// for any) within [from, to) (zero: unbounded).
func auditIndex(tenant, action string, from, to [8]byte, hasFrom, hasTo bool) auditRange {
	r := auditRange{bucket: bucketAudit}
	switch {
	case tenant != "" && action != "":
		r.bucket, r.prefix = bucketAuditByTenantAction, indexKey(nil, tenant, action)
	case tenant != "":
		r.bucket, r.prefix = bucketAuditByTenant, indexKey(nil, tenant)
	case action != "":
		r.bucket, r.prefix = bucketAuditByAction, indexKey(nil, action)
	}
	r.lo = r.prefix
	if hasFrom {
		r.lo = append(bytes.Clone(r.prefix), from[:]...)
	}
	switch {
	case hasTo:
		r.hi = append(bytes.Clone(r.prefix), to[:]...)
	case len(r.prefix) > 0:
		r.hi = prefixEnd(r.prefix)
	}
	return r
}

// auditEntry reads the record an index entry k of the range points at.
func auditEntry(main *bbolt.Bucket, r auditRange, k []byte) (pk, value []byte, err error) {
	pk = k[len(r.prefix):]
	if len(pk) != 16 {
		return nil, nil, fmt.Errorf("audit index %s: malformed key %x", r.bucket, k)
	}
	if value = main.Get(pk); value == nil {
		return nil, nil, fmt.Errorf("audit index %s: no record for %x", r.bucket, pk)
	}
	return pk, value, nil
}

// decodeAudit decodes a stored record, its Seq from its key.
func decodeAudit(pk, value []byte) (AuditRecord, error) {
	var r AuditRecord
	if err := json.Unmarshal(value, &r); err != nil {
		return r, fmt.Errorf("audit record %x: %w", pk, err)
	}
	r.Seq = binary.BigEndian.Uint64(pk[8:])
	return r, nil
}

// audit reads the query's index forwards, or backwards for the newest.
func (t boltTx) audit(q AuditQuery) ([]AuditRecord, error) {
	r := auditIndex(q.TenantID, q.Action, timeKey(q.From), timeKey(q.To), !q.From.IsZero(), !q.To.IsZero())
	main := t.bucket(bucketAudit)
	c := t.bucket(r.bucket).Cursor()
	var k []byte
	if q.Newest {
		if r.hi == nil {
			k, _ = c.Last()
		} else {
			k, _ = seekLastUnder(c, r.prefix, r.hi)
		}
	} else {
		k, _ = c.Seek(r.lo)
	}
	var out []AuditRecord
	for ; k != nil; k = step(c, q.Newest) {
		if q.Newest && bytes.Compare(k, r.lo) < 0 || !q.Newest && r.hi != nil && bytes.Compare(k, r.hi) >= 0 {
			break
		}
		if q.Limit > 0 && len(out) >= q.Limit {
			break
		}
		pk, value, err := auditEntry(main, r, k)
		if err != nil {
			return out, err
		}
		rec, err := decodeAudit(pk, value)
		if err != nil {
			return out, err
		}
		out = append(out, rec)
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

// auditPage reads the index of the plan's tenant (and action) backwards,
// from just before pos or from the end of its range, checking the other
// filters on each record read.
func (t boltTx) auditPage(p *auditPlan, pos []byte, scan, limit int, out []AuditRecord) ([]AuditRecord, []byte, bool, error) {
	r := auditIndex(p.q.TenantID, p.q.Action, timeKey(p.q.From), timeKey(p.q.To), !p.q.From.IsZero(), !p.q.To.IsZero())
	main := t.bucket(bucketAudit)
	c := t.bucket(r.bucket).Cursor()
	bound := r.hi
	if pos != nil {
		bound = append(bytes.Clone(r.prefix), pos...)
	}
	var last []byte
	done := func(more bool) ([]AuditRecord, []byte, bool, error) {
		if last == nil {
			return out, nil, more, nil
		}
		return out, bytes.Clone(last[len(r.prefix):]), more, nil
	}
	scanned := 0
	for k, _ := seekLastUnder(c, r.prefix, bound); k != nil; k, _ = c.Prev() {
		if bytes.Compare(k, r.lo) < 0 {
			return done(false)
		}
		if scanned == scan || len(out) == limit {
			return done(true)
		}
		scanned++
		last = k
		pk, value, err := auditEntry(main, r, k)
		if err != nil {
			return out, nil, false, err
		}
		if p.filtered {
			var m auditMatch
			if err := json.Unmarshal(value, &m); err != nil {
				return out, nil, false, fmt.Errorf("audit record %x: %w", pk, err)
			}
			if !p.matches(&m) {
				continue
			}
		}
		rec, err := decodeAudit(pk, value)
		if err != nil {
			return out, nil, false, err
		}
		out = append(out, rec)
	}
	return done(false)
}
