package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// defaultExportBatch is how many index entries one read transaction of an
// export reads: short enough that a writer growing the file never waits
// long for it, long enough that reopening the transaction costs little.
const defaultExportBatch = 1000

// maxAuditFilterText bounds the actor, tool and result of an AuditFilter.
const maxAuditFilterText = 1024

// AuditFilter selects a tenant's audit records for its admins: AuditPage
// and ExportAudit. TenantID is required; every other zero field matches
// everything. TenantID and Action are answered through an index; Actor,
// Tool and Result are checked on each record of the tenant (and action)
// within [From, To).
type AuditFilter struct {
	TenantID string
	Action   string
	// Actor is the person who acted (AuditRecord.Actor).
	Actor string
	// Tool and Result match the record's Fields["tool"] and
	// Fields["result"], which must be strings equal to them.
	Tool   string
	Result string
	// From and To bound the records' Time: [From, To).
	From, To time.Time
}

// auditPlan is an AuditFilter checked and turned into a range of one
// index: entries prefix|T|N with lo <= key < hi.
type auditPlan struct {
	q        AuditFilter
	bucket   string
	prefix   []byte
	lo, hi   []byte
	filtered bool   // some filter is not answered by the index
	binding  []byte // what its cursors are bound to
}

func planAudit(q AuditFilter) (*auditPlan, error) {
	if err := checkKeyPart("audit tenant", q.TenantID); err != nil {
		return nil, fmt.Errorf("audit filter: %w", err)
	}
	if err := checkAuditName("action", q.Action, true); err != nil {
		return nil, fmt.Errorf("audit filter: %w", err)
	}
	for _, f := range []struct{ what, v string }{{"the actor", q.Actor}, {"the tool", q.Tool}, {"the result", q.Result}} {
		if err := checkText(f.what, f.v, maxAuditFilterText); err != nil {
			return nil, fmt.Errorf("audit filter: %w", err)
		}
	}
	p := &auditPlan{q: q, bucket: bucketAuditByTenant, prefix: indexKey(nil, q.TenantID)}
	if q.Action != "" {
		p.bucket, p.prefix = bucketAuditByTenantAction, indexKey(nil, q.TenantID, q.Action)
	}
	p.lo, p.hi = p.prefix, prefixEnd(p.prefix)
	if !q.From.IsZero() {
		t := timeKey(q.From)
		p.lo = append(bytes.Clone(p.prefix), t[:]...)
	}
	if !q.To.IsZero() {
		t := timeKey(q.To)
		p.hi = append(bytes.Clone(p.prefix), t[:]...)
	}
	p.filtered = q.Actor != "" || q.Tool != "" || q.Result != ""
	p.binding = queryBinding([]string{q.TenantID, q.Action, q.Actor, q.Tool, q.Result}, q.From, q.To)
	return p, nil
}

// auditMatch is what the filters not in an index look at; decoding it
// skips building the record's fields.
type auditMatch struct {
	Actor  string `json:"actor"`
	Fields struct {
		Tool   any `json:"tool"`
		Result any `json:"result"`
	} `json:"fields"`
}

func (p *auditPlan) matches(m *auditMatch) bool {
	return (p.q.Actor == "" || m.Actor == p.q.Actor) &&
		(p.q.Tool == "" || m.Fields.Tool == any(p.q.Tool)) &&
		(p.q.Result == "" || m.Fields.Result == any(p.q.Result))
}

// scan reads the plan's index newest first, from just before pos (a
// primary key T|N) or from the end of the range when pos is nil, and
// appends the matching records to out. It stops after maxScan entries or
// once out holds max records, and returns the primary key of the last
// entry it read and whether entries of the range remain after it.
func (p *auditPlan) scan(tx *bbolt.Tx, pos []byte, maxScan, max int, out []AuditRecord) (_ []AuditRecord, last []byte, more bool, err error) {
	main := tx.Bucket([]byte(bucketAudit))
	c := tx.Bucket([]byte(p.bucket)).Cursor()
	bound := p.hi
	if pos != nil {
		bound = append(bytes.Clone(p.prefix), pos...)
	}
	k, _ := seekLastUnder(c, p.prefix, bound)
	var lastKey []byte
	done := func(more bool) ([]AuditRecord, []byte, bool, error) {
		if lastKey == nil {
			return out, nil, more, nil
		}
		return out, bytes.Clone(lastKey[len(p.prefix):]), more, nil
	}
	for scanned := 0; k != nil; k, _ = c.Prev() {
		if bytes.Compare(k, p.lo) < 0 {
			return done(false)
		}
		if scanned == maxScan || len(out) == max {
			return done(true)
		}
		scanned++
		lastKey = k
		pk := k[len(p.prefix):]
		if len(pk) != 16 {
			return out, nil, false, fmt.Errorf("audit index %s: malformed key %x", p.bucket, k)
		}
		value := main.Get(pk)
		if value == nil {
			return out, nil, false, fmt.Errorf("audit index %s: no record for %x", p.bucket, pk)
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
		var r AuditRecord
		if err := json.Unmarshal(value, &r); err != nil {
			return out, nil, false, fmt.Errorf("audit record %x: %w", pk, err)
		}
		r.Seq = binary.BigEndian.Uint64(pk[8:])
		out = append(out, r)
	}
	return done(false)
}

// AuditPage returns one page of a tenant's audit records matching q,
// newest first (by Time, then newest appended), and the cursor of the next
// page: pass "" for the first page, then each page's next, until next is
// "". A limit of zero or less means DefaultPageSize; more than MaxPageSize
// means MaxPageSize.
//
// One page reads at most 5,000 index entries of the tenant (and action)
// in [From, To). When the filters on actor, tool or result match few of
// them, the page comes back short, even empty, with a next cursor to go
// on: a caller that wants a full page asks again. Every matching record is
// on exactly one page, and records appended meanwhile are on none of the
// pages still to come if they are newer than the cursor.
//
// A cursor is opaque and bound to its query: one edited, or made for
// another query (another tenant's, or other filters), is ErrInvalid, as
// are a filter without a tenant and a NUL byte in the tenant or action.
func (s *boltStore) AuditPage(ctx context.Context, q AuditFilter, cursor string, limit int) (records []AuditRecord, next string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	p, err := planAudit(q)
	if err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	var pos []byte
	if cursor != "" {
		if pos, err = s.readCursor(cursorAudit, p.binding, cursor); err != nil {
			return nil, "", fmt.Errorf("audit page of tenant %s: %w", q.TenantID, err)
		}
		if len(pos) != 16 {
			return nil, "", invalid("audit page of tenant %s: cursor position of %d bytes", q.TenantID, len(pos))
		}
	}
	var last []byte
	var more bool
	err = s.read(func(tx *bbolt.Tx) error {
		var err error
		records, last, more, err = p.scan(tx, pos, s.pageScan, limit, nil)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: audit page of tenant %s: %w", q.TenantID, err)
	}
	if more {
		next = s.makeCursor(cursorAudit, p.binding, last)
	}
	return records, next, nil
}

// ExportAudit calls fn with every audit record matching q, newest first,
// as AuditPage would return them page after page. It reads them in
// batches, each in a read transaction of its own that reads at most 1,000
// index entries and is closed before fn is called for that batch, then
// reopened at the key where it stopped: a long export never holds a
// transaction open (a writer growing the file waits for every open one),
// never holds more than one batch in memory, and fn may take its time and
// even write to the store. Records appended during the export are
// included if older than where it has got to.
//
// It stops at the first error fn returns, and returns it wrapped; it also
// stops when ctx is done. q is checked as by AuditPage.
func (s *boltStore) ExportAudit(ctx context.Context, q AuditFilter, fn func(AuditRecord) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := planAudit(q)
	if err != nil {
		return err
	}
	var pos []byte
	batch := make([]AuditRecord, 0, min(s.exportBatch, 64))
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var more bool
		err := s.read(func(tx *bbolt.Tx) error {
			s.exportTxs.Add(1)
			defer s.exportTxs.Add(-1)
			var err error
			batch, pos, more, err = p.scan(tx, pos, s.exportBatch, s.exportBatch, batch[:0])
			return err
		})
		if err != nil {
			return fmt.Errorf("store: export audit of tenant %s: %w", q.TenantID, err)
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return fmt.Errorf("store: export audit of tenant %s: %w", q.TenantID, err)
			}
		}
		clear(batch)
		if !more {
			return nil
		}
	}
}
