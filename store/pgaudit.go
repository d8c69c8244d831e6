package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// The audit log on PostgreSQL: one row per record, numbered by its
// identity column, with each thing AuditFilter filters on in a column of
// its own (tenant, action, actor, tool, result, time_ns), indexed by
// tenant and each of them, then time and number.

// auditInsert is the one statement that inserts recs in order, the
// identity column numbering them.
func auditInsert(recs []preparedAudit) (string, []any) {
	n := len(recs)
	times := make([]int64, n)
	tenants, actions, values := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	actors, tools, results := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range recs {
		times[i], tenants[i], actions[i], values[i] = ns(r.at), []byte(r.tenant), []byte(r.action), r.value
		actors[i], tools[i], results[i] = column(r.match.Actor), column(r.match.Fields.Tool), column(r.match.Fields.Result)
	}
	return `INSERT INTO audit (time_ns, tenant, action, actor, tool, result, data)
		SELECT t, te, a, ac, tl, r, d FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[], $5::bytea[], $6::bytea[], $7::bytea[])
			WITH ORDINALITY AS u(t, te, a, ac, tl, r, d, o)
		ORDER BY o`, []any{times, tenants, actions, actors, tools, results, values}
}

func (t *pgTx) appendAudit(recs []preparedAudit) error {
	if len(recs) > 0 {
		sql, args := auditInsert(recs)
		t.queue(nil, sql, args...)
	}
	var usage []usageCount
	for _, r := range recs {
		usage = append(usage, r.usage...)
	}
	return t.addUsage(mergeUsage(usage))
}

// sqlWhere builds a WHERE clause, numbering its arguments.
type sqlWhere struct {
	conds []string
	args  []any
}

// add adds cond, whose ? stands for v.
func (w *sqlWhere) add(cond string, v any) {
	w.args = append(w.args, v)
	w.conds = append(w.conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(w.args))))
}

func (w *sqlWhere) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// arg adds v as an argument and returns its placeholder.
func (w *sqlWhere) arg(v any) string {
	w.args = append(w.args, v)
	return "$" + strconv.Itoa(len(w.args))
}

func (t *pgTx) audit(q AuditQuery) ([]AuditRecord, error) {
	var w sqlWhere
	if q.TenantID != "" {
		w.add("tenant = ?", []byte(q.TenantID))
	}
	if q.Action != "" {
		w.add("action = ?", []byte(q.Action))
	}
	if !q.From.IsZero() {
		w.add("time_ns >= ?", ns(q.From))
	}
	if !q.To.IsZero() {
		w.add("time_ns < ?", ns(q.To))
	}
	sql := `SELECT seq, data FROM audit` + w.String()
	if q.Newest {
		sql += " ORDER BY time_ns DESC, seq DESC"
	} else {
		sql += " ORDER BY time_ns, seq"
	}
	if q.Limit > 0 {
		sql += " LIMIT " + w.arg(q.Limit)
	}
	var out []AuditRecord
	err := t.query(sql, w.args, func(rows pgx.Rows) error {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			return err
		}
		r, err := decodeAuditRow(seq, data)
		out = append(out, r)
		return err
	})
	return out, err
}

func decodeAuditRow(seq int64, data []byte) (AuditRecord, error) {
	var r AuditRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return r, fmt.Errorf("audit record %d: %w", seq, err)
	}
	r.Seq = uint64(seq)
	return r, nil
}

// auditScan is a page's query: scan reads the range of one index (the
// plan's tenant, with the filter the index answers), newest first, and
// keep are the plan's other filters, checked on the rows scan reads.
type auditScan struct {
	scan sqlWhere
	keep []string // conditions on scan's columns, ? for their value
	vals []any
}

// planAuditScan picks the index of a page: the plan's tenant with its
// actor, tool, action or result, the first of them set (the most
// selective first, as a person acts less than a tool is called, a tool
// is called less than an action is taken, and an action is taken more
// than a result); the others are kept to be checked on the rows read.
// pos (T | N) starts it just before a record.
func planAuditScan(p *auditPlan, pos []byte) *auditScan {
	s := &auditScan{}
	s.scan.add("tenant = ?", []byte(p.q.TenantID))
	indexed := false
	for _, f := range []struct{ col, v string }{{"actor", p.q.Actor}, {"tool", p.q.Tool}, {"action", p.q.Action}, {"result", p.q.Result}} {
		switch {
		case f.v == "":
		case !indexed:
			s.scan.add(f.col+" = ?", []byte(f.v))
			indexed = true
		default:
			s.keep = append(s.keep, f.col+" = ?")
			s.vals = append(s.vals, []byte(f.v))
		}
	}
	if !p.q.From.IsZero() {
		s.scan.add("time_ns >= ?", ns(p.q.From))
	}
	if !p.q.To.IsZero() {
		s.scan.add("time_ns < ?", ns(p.q.To))
	}
	if pos != nil {
		s.scan.add("(time_ns, seq) < (?", keyNS([8]byte(pos[:8])))
		s.scan.conds[len(s.scan.conds)-1] += ", " + s.scan.arg(int64(binary.BigEndian.Uint64(pos[8:]))) + ")"
	}
	return s
}

// pageSQL is the query of a page of at most limit records reading at
// most scan rows: the rows of the index's range, newest first, and among
// them those the other filters keep.
func (s *auditScan) pageSQL(scan, limit int) (string, []any) {
	w := s.scan
	w.args = append([]any(nil), s.scan.args...)
	const order = ` ORDER BY time_ns DESC, seq DESC`
	if len(s.keep) == 0 {
		return `SELECT seq, time_ns, data FROM audit` + w.String() + order + ` LIMIT ` + w.arg(min(scan, limit)+1), w.args
	}
	inner := `SELECT seq, time_ns, data, tenant, action, actor, tool, result FROM audit` + w.String() + order + ` LIMIT ` + w.arg(scan)
	var keep []string
	for i, cond := range s.keep {
		keep = append(keep, strings.ReplaceAll(cond, "?", w.arg(s.vals[i])))
	}
	return `SELECT seq, time_ns, data FROM (` + inner + `) s WHERE ` + strings.Join(keep, " AND ") + order + ` LIMIT ` + w.arg(limit+1), w.args
}

// boundSQL is the query of where a scan of scan rows ends: its last row,
// and the next if there is one.
func (s *auditScan) boundSQL(scan int) (string, []any) {
	w := s.scan
	w.args = append([]any(nil), s.scan.args...)
	return `SELECT time_ns, seq FROM audit` + w.String() + ` ORDER BY time_ns DESC, seq DESC OFFSET ` + w.arg(scan-1) + ` LIMIT 2`, w.args
}

// auditPage reads a page in SQL: every filter a column, one answered by
// an index and the others checked on the rows it reads, at most scan of
// them. When the other filters leave fewer than limit records, a second
// query finds where the scan stopped.
func (t *pgTx) auditPage(p *auditPlan, pos []byte, scan, limit int, out []AuditRecord) ([]AuditRecord, []byte, bool, error) {
	s := planAuditScan(p, pos)
	sql, args := s.pageSQL(scan, limit)
	var lastSeq, lastAt int64
	more := false
	read := 0
	err := t.query(sql, args, func(rows pgx.Rows) error {
		if read == min(scan, limit) {
			more = true // the row after the page: there is more
			return nil
		}
		read++
		var data []byte
		if err := rows.Scan(&lastSeq, &lastAt, &data); err != nil {
			return err
		}
		r, err := decodeAuditRow(lastSeq, data)
		out = append(out, r)
		return err
	})
	var last []byte
	if read > 0 {
		k := nsKey(lastAt)
		last = binary.BigEndian.AppendUint64(k[:], uint64(lastSeq))
	}
	if err != nil || more || len(s.keep) == 0 {
		return out, last, more, err
	}
	// Short: the scan may have stopped at its bound before the end.
	sql, args = s.boundSQL(scan)
	var bound [][]byte
	err = t.query(sql, args, func(rows pgx.Rows) error {
		var at, seq int64
		if err := rows.Scan(&at, &seq); err != nil {
			return err
		}
		k := nsKey(at)
		bound = append(bound, binary.BigEndian.AppendUint64(k[:], uint64(seq)))
		return nil
	})
	if len(bound) == 2 {
		return out, bound[0], true, err
	}
	return out, last, false, err
}
