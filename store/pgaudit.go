package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Append is Store.Append on PostgreSQL.
func (s *pgStore) Append(ctx context.Context, recs ...AuditRecord) error {
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
	if err := s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error { return pgAppendAudit(ctx, tx, prepared) }); err != nil {
		return fmt.Errorf("store: append audit: %w", err)
	}
	return nil
}

// scanAuditRows decodes rows of (seq, data) into records.
func scanAuditRow(rows pgx.Rows) (AuditRecord, int64, int64, error) {
	var seq, t int64
	var data []byte
	if err := rows.Scan(&seq, &t, &data); err != nil {
		return AuditRecord{}, 0, 0, err
	}
	var r AuditRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return AuditRecord{}, 0, 0, fmt.Errorf("audit record %d: %w", seq, err)
	}
	r.Seq = uint64(seq)
	return r, seq, t, nil
}

// Audit is Store.Audit on PostgreSQL.
func (s *pgStore) Audit(ctx context.Context, q AuditQuery) ([]AuditRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if strings.IndexByte(q.TenantID, 0) >= 0 || strings.IndexByte(q.Action, 0) >= 0 {
		return nil, invalid("audit query: NUL byte in tenant or action")
	}
	var where []string
	var args []any
	arg := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if q.TenantID != "" {
		arg("tenant = ?", []byte(q.TenantID))
	}
	if q.Action != "" {
		arg("action = ?", []byte(q.Action))
	}
	if !q.From.IsZero() {
		arg("time_ns >= ?", ns(q.From))
	}
	if !q.To.IsZero() {
		arg("time_ns < ?", ns(q.To))
	}
	sql := `SELECT seq, time_ns, data FROM audit`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	if q.Newest {
		sql += " ORDER BY time_ns DESC, seq DESC"
	} else {
		sql += " ORDER BY time_ns, seq"
	}
	if q.Limit > 0 {
		args = append(args, q.Limit)
		sql += " LIMIT $" + strconv.Itoa(len(args))
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit query: %w", s.closedErr(err))
	}
	defer rows.Close()
	var out []AuditRecord
	for rows.Next() {
		r, _, _, err := scanAuditRow(rows)
		if err != nil {
			return nil, fmt.Errorf("store: audit query: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: audit query: %w", s.closedErr(err))
	}
	return out, nil
}

// pgScanAudit is auditPlan.scan on PostgreSQL: the plan's records newest
// first, from just before pos (T|N, as on bbolt) or from the newest, at
// most maxScan rows read and max records kept, the filters the indexes do
// not answer checked here so that pages stop at the same places on both
// backends.
func (s *pgStore) pgScanAudit(ctx context.Context, p *auditPlan, pos []byte, maxScan, max int, out []AuditRecord) (_ []AuditRecord, last []byte, more bool, err error) {
	args := []any{[]byte(p.q.TenantID)}
	where := []string{"tenant = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if p.q.Action != "" {
		add("action = ?", []byte(p.q.Action))
	}
	if !p.q.From.IsZero() {
		add("time_ns >= ?", ns(p.q.From))
	}
	if !p.q.To.IsZero() {
		add("time_ns < ?", ns(p.q.To))
	}
	if pos != nil {
		args = append(args, keyNS([8]byte(pos[:8])), int64(binary.BigEndian.Uint64(pos[8:])))
		where = append(where, fmt.Sprintf("(time_ns, seq) < ($%d, $%d)", len(args)-1, len(args)))
	}
	n := maxScan
	if !p.filtered {
		n = min(maxScan, max)
	}
	args = append(args, n+1)
	sql := `SELECT seq, time_ns, data FROM audit WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY time_ns DESC, seq DESC LIMIT $` + strconv.Itoa(len(args))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return out, nil, false, s.closedErr(err)
	}
	defer rows.Close()
	scanned := 0
	for rows.Next() {
		if scanned == maxScan || len(out) == max {
			return out, last, true, nil
		}
		scanned++
		var seq, t int64
		var data []byte
		if err := rows.Scan(&seq, &t, &data); err != nil {
			return out, nil, false, err
		}
		k := nsKey(t)
		last = binary.BigEndian.AppendUint64(k[:], uint64(seq))
		if p.filtered {
			var m auditMatch
			if err := json.Unmarshal(data, &m); err != nil {
				return out, nil, false, fmt.Errorf("audit record %d: %w", seq, err)
			}
			if !p.matches(&m) {
				continue
			}
		}
		var r AuditRecord
		if err := json.Unmarshal(data, &r); err != nil {
			return out, nil, false, fmt.Errorf("audit record %d: %w", seq, err)
		}
		r.Seq = uint64(seq)
		out = append(out, r)
	}
	return out, last, false, s.closedErr(rows.Err())
}

// AuditPage is Store.AuditPage on PostgreSQL.
func (s *pgStore) AuditPage(ctx context.Context, q AuditFilter, cursor string, limit int) (records []AuditRecord, next string, err error) {
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
	if err := s.ready(ctx); err != nil {
		return nil, "", err
	}
	records, last, more, err := s.pgScanAudit(ctx, p, pos, s.pageScan, limit, nil)
	if err != nil {
		return nil, "", fmt.Errorf("store: audit page of tenant %s: %w", q.TenantID, err)
	}
	if more && last != nil {
		next = s.makeCursor(cursorAudit, p.binding, last)
	}
	return records, next, nil
}

// ExportAudit is Store.ExportAudit on PostgreSQL: one query per batch of
// at most 1,000 rows, each read in full before fn sees its records.
func (s *pgStore) ExportAudit(ctx context.Context, q AuditFilter, fn func(AuditRecord) error) error {
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
		if err := s.ready(ctx); err != nil {
			return err
		}
		var more bool
		var last []byte
		batch, last, more, err = s.pgScanAudit(ctx, p, pos, s.exportBatch, s.exportBatch, batch[:0])
		if err != nil {
			return fmt.Errorf("store: export audit of tenant %s: %w", q.TenantID, err)
		}
		for _, r := range batch {
			if err := fn(r); err != nil {
				return fmt.Errorf("store: export audit of tenant %s: %w", q.TenantID, err)
			}
		}
		clear(batch)
		if !more || last == nil || bytes.Equal(last, pos) {
			return nil
		}
		pos = last
	}
}
