package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// BulkAppend appends recs as Append does, for the benchmarks that build
// large logs: on bbolt in one commit, on PostgreSQL in one COPY of the
// rows Append would insert, with the usage counts Append adds.
func BulkAppend(ctx context.Context, s *Store, recs []AuditRecord) error {
	pg, ok := s.be.(*pgStore)
	if !ok {
		return s.Append(ctx, recs...)
	}
	prepared, err := s.prepareAudit(recs)
	if err != nil {
		return err
	}
	_, args := auditInsert(prepared)
	cols := [][]any{}
	for i := range prepared {
		cols = append(cols, []any{args[0].([]int64)[i], args[1].([][]byte)[i], args[2].([][]byte)[i],
			args[3].([][]byte)[i], args[4].([][]byte)[i], args[5].([][]byte)[i], args[6].([][]byte)[i]})
	}
	n, err := pg.pool.CopyFrom(ctx, pgx.Identifier{"audit"}, []string{"time_ns", "tenant", "action", "actor", "tool", "result", "data"}, pgx.CopyFromRows(cols))
	if err == nil && n != int64(len(recs)) {
		err = fmt.Errorf("copied %d of %d audit records", n, len(recs))
	}
	if err != nil {
		return err
	}
	var usage []usageCount
	for _, r := range prepared {
		usage = append(usage, r.usage...)
	}
	if usage = mergeUsage(usage); len(usage) > 0 {
		_, err = pg.pool.Exec(ctx, usageUpsert, usageArgs(usage)...)
	}
	return err
}
