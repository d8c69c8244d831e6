package store

import (
	"context"
	"fmt"
	"time"
)

// defaultExportBatch is how many index entries one read of an export
// reads: short enough that a writer growing the bbolt file never waits
// long for it, long enough that reading again costs little.
const defaultExportBatch = 1000

// maxAuditFilterText bounds the actor, tool and result of an AuditFilter.
const maxAuditFilterText = 1024

// AuditFilter selects a tenant's audit records for its admins: AuditPage
// and ExportAudit. TenantID is required; every other zero field matches
// everything. On bbolt TenantID and Action are answered through an index
// and Actor, Tool and Result are checked on each record of the tenant
// (and action) within [From, To); on PostgreSQL each is a column, and
// the most selective one given is answered through an index.
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

// auditPlan is an AuditFilter checked, with what its cursors are bound
// to.
type auditPlan struct {
	q        AuditFilter
	filtered bool   // Actor, Tool or Result is set
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
	return &auditPlan{
		q:        q,
		filtered: q.Actor != "" || q.Tool != "" || q.Result != "",
		binding:  queryBinding([]string{q.TenantID, q.Action, q.Actor, q.Tool, q.Result}, q.From, q.To),
	}, nil
}

// auditMatch is what the filters look at in a record; decoding it skips
// building the record's fields.
type auditMatch struct {
	Actor  string `json:"actor"`
	Fields struct {
		Tool   any `json:"tool"`
		Result any `json:"result"`
	} `json:"fields"`
}

// matches reports whether a record of the plan's tenant, action and time
// range matches its other filters.
func (p *auditPlan) matches(m *auditMatch) bool {
	return (p.q.Actor == "" || m.Actor == p.q.Actor) &&
		(p.q.Tool == "" || m.Fields.Tool == any(p.q.Tool)) &&
		(p.q.Result == "" || m.Fields.Result == any(p.q.Result))
}

// column is the value of a filter column of the record: a non-empty
// string, or nil (no string, which no filter matches).
func column(v any) []byte {
	if s, ok := v.(string); ok && s != "" {
		return []byte(s)
	}
	return nil
}

// AuditPage returns one page of a tenant's audit records matching q,
// newest first (by Time, then newest appended), and the cursor of the next
// page: pass "" for the first page, then each page's next, until next is
// "". A limit of zero or less means DefaultPageSize; more than MaxPageSize
// means MaxPageSize.
//
// One page reads at most 5,000 index entries. When the filters an index
// does not answer match few of them, the page comes back short, even
// empty, with a next cursor to go on: a caller that wants a full page asks
// again. Every matching record is on exactly one page, and records
// appended meanwhile are on none of the pages still to come if they are
// newer than the cursor.
//
// A cursor is opaque and bound to its query: one edited, or made for
// another query (another tenant's, or other filters), is ErrInvalid, as
// are a filter without a tenant and a NUL byte in the tenant or action.
func (s *Store) AuditPage(ctx context.Context, q AuditFilter, cursor string, limit int) (records []AuditRecord, next string, err error) {
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
	err = s.be.read(ctx, func(r reader) error {
		var err error
		records, last, more, err = r.auditPage(p, pos, s.pageScan, limit, nil)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: audit page of tenant %s: %w", q.TenantID, err)
	}
	if more && last != nil {
		next = s.makeCursor(cursorAudit, p.binding, last)
	}
	return records, next, nil
}

// ExportAudit calls fn with every audit record matching q, newest first,
// as AuditPage would return them page after page. It reads them in
// batches, each a read of its own (on bbolt a read transaction) that reads
// at most 1,000 index entries and is over before fn is called for that
// batch, then reads on from where it stopped: a long export never holds a
// transaction open (a writer growing the file waits for every open one),
// never holds more than one batch in memory, and fn may take its time and
// even write to the store. Records appended during the export are
// included if older than where it has got to.
//
// It stops at the first error fn returns, and returns it wrapped; it also
// stops when ctx is done. q is checked as by AuditPage.
func (s *Store) ExportAudit(ctx context.Context, q AuditFilter, fn func(AuditRecord) error) error {
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
		var last []byte
		err := s.be.read(ctx, func(r reader) error {
			s.exportReads.Add(1)
			defer s.exportReads.Add(-1)
			var err error
			batch, last, more, err = r.auditPage(p, pos, s.exportBatch, s.exportBatch, batch[:0])
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
		if !more || last == nil {
			return nil
		}
		pos = last
	}
}
