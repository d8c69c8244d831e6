package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The usage rollup on PostgreSQL: the table usage, a row per counter,
// keyed (tenant, day, metric, label), so that an overview is one range
// of its primary key.

// usageUpsert adds counts to their rows, inserting those missing. The
// counts come merged and ordered by key (mergeUsage), so that two writes
// lock the rows they share in the same order.
const usageUpsert = `INSERT INTO usage (tenant, day, metric, label, n)
	SELECT * FROM unnest($1::bytea[], $2::integer[], $3::text[], $4::bytea[], $5::bigint[])
	ON CONFLICT (tenant, day, metric, label) DO UPDATE SET n = usage.n + EXCLUDED.n`

// usageArgs are the arguments of usageUpsert.
func usageArgs(cs []usageCount) []any {
	tenants, days, metrics, labels, ns := make([][]byte, len(cs)), make([]int32, len(cs)), make([]string, len(cs)), make([][]byte, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		tenants[i], days[i], metrics[i], labels[i], ns[i] = []byte(c.tenant), c.day, c.metric, []byte(c.label), c.n
	}
	return []any{tenants, days, metrics, labels, ns}
}

func (t *pgTx) addUsage(cs []usageCount) error {
	if len(cs) > 0 {
		t.queue(nil, usageUpsert, usageArgs(cs)...)
	}
	return nil
}

// overviewQuery is the overview's one query: a range of the primary key.
const overviewQuery = `SELECT day, metric, label, n FROM usage WHERE tenant = $1 AND day >= $2 AND day < $3`

func (t *pgTx) usage(tenant string, first, end int32) ([]usageRow, error) {
	var out []usageRow
	err := t.query(overviewQuery, []any{[]byte(tenant), first, end}, func(rows pgx.Rows) error {
		var r usageRow
		var label []byte
		if err := rows.Scan(&r.day, &r.metric, &label, &r.n); err != nil {
			return err
		}
		r.label = string(label)
		out = append(out, r)
		return nil
	})
	return out, err
}

// pgUsageTable is the usage table, made afresh by its migration: one
// stopped half way left some counts in it.
const pgUsageTable = `
DROP TABLE IF EXISTS usage;
CREATE TABLE usage (
	tenant bytea NOT NULL,
	day integer NOT NULL,
	metric text COLLATE "C" NOT NULL,
	label bytea NOT NULL,
	n bigint NOT NULL,
	PRIMARY KEY (tenant, day, metric, label));
`

// backfillUsage counts the runs and audit records stored before the
// rollup, by the rule new ones are counted by: every run at the first
// call (after 0; runs live for RunRetention, and only their tenant, user
// and time are decoded), then up to pgBackfillBatch audit records after
// the sequence number after a call (-1: from the first).
func backfillUsage(ctx context.Context, tx pgx.Tx, after int64) (int64, bool, error) {
	var cs []usageCount
	if after == 0 {
		rows, err := tx.Query(ctx, `SELECT data FROM runs`)
		if err != nil {
			return after, false, err
		}
		for rows.Next() {
			var data []byte
			if err := rows.Scan(&data); err != nil {
				rows.Close()
				return after, false, err
			}
			var r Run
			if err := json.Unmarshal(data, &r); err != nil {
				rows.Close()
				return after, false, fmt.Errorf("run: %w", err)
			}
			cs = append(cs, keyableUsage(usageOfRun(r))...)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return after, false, err
		}
		return -1, false, addUsageTx(ctx, tx, cs)
	}
	rows, err := tx.Query(ctx, `SELECT seq, data FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, pgBackfillBatch)
	if err != nil {
		return after, false, err
	}
	n := 0
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&after, &data); err != nil {
			rows.Close()
			return after, false, err
		}
		var r AuditRecord
		if err := json.Unmarshal(data, &r); err != nil {
			rows.Close()
			return after, false, fmt.Errorf("audit record %d: %w", after, err)
		}
		cs = append(cs, keyableUsage(usageOfAudit(r))...)
		n++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return after, false, err
	}
	return after, n < pgBackfillBatch, addUsageTx(ctx, tx, cs)
}

// addUsageTx is addUsage inside a migration's transaction.
func addUsageTx(ctx context.Context, tx pgx.Tx, cs []usageCount) error {
	cs = mergeUsage(cs)
	if len(cs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, usageUpsert, usageArgs(cs)...)
	return err
}
