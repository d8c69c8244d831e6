package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"teamsbot/internal/pgtest"
)

// A database of schema version 1 with more audit records than one
// backfill transaction takes is opened by this program: migration 2 fills
// the actor, tool and result columns of every record from its JSON, in
// bounded transactions, and filtered pages read them. A migration stopped
// half way leaves the version at 1 and is run again from the start.
func TestPostgresMigrationV2FillsAuditColumns(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	v1, err := openPostgres(ctx, url, Options{}, pgSchema()[:1])
	if err != nil {
		t.Fatal(err)
	}
	pg := v1.be.(*pgStore)
	// 25,000 records as version 1 wrote them: no filter columns; every
	// tenth refused, a tool that is not a string every 1,000th, and an
	// actor with a character JSON escapes.
	const n = 2*pgBackfillBatch + 5_000
	if _, err := pg.pool.Exec(ctx, `INSERT INTO audit (time_ns, tenant, action, data)
		SELECT 1793491200000000000 + i::bigint * 1000000000, '\x74656e616e742d61', '\x6167656e742e746f6f6c2e63616c6c',
			convert_to(json_build_object('seq', 0,
				'time', to_char(timestamp '2026-11-01' + i * interval '1 second', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
				'tenantId', 'tenant-a', 'action', 'agent.tool.call', 'actor', 'user-' || (i % 7) || '<ü>',
				'fields', json_build_object('tool', CASE WHEN i % 1000 = 0 THEN to_json(42) ELSE to_json('tool_' || (i % 5)) END,
					'result', CASE WHEN i % 10 = 0 THEN 'refused' ELSE 'ok' END))::text, 'UTF8')
		FROM generate_series(1, $1) AS i`, n); err != nil {
		t.Fatal(err)
	}
	v1.Close()

	calls := 0
	broken := pgSchema()
	broken[1].backfill = func(ctx context.Context, tx pgx.Tx, after int64) (int64, bool, error) {
		if calls++; calls == 2 {
			return after, false, errors.New("power cut")
		}
		return backfillAuditColumns(ctx, tx, after)
	}
	if _, err := openPostgres(ctx, url, Options{}, broken); err == nil {
		t.Fatal("open with a failing backfill succeeded")
	}
	version := func() (v int) {
		t.Helper()
		s, err := openPostgres(ctx, url, Options{}, pgSchema()[:1])
		if err != nil {
			if errors.Is(err, ErrSchemaTooNew) {
				return 2
			}
			t.Fatal(err)
		}
		s.Close()
		return 1
	}
	if v := version(); v != 1 {
		t.Fatalf("after a failed backfill the version is %d, want 1", v)
	}

	var log bytes.Buffer
	s, err := openPostgres(ctx, url, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}, pgSchema())
	if err != nil {
		t.Fatalf("open of a version 1 database: %v", err)
	}
	defer s.Close()
	if !strings.Contains(log.String(), "version=2") || !strings.Contains(log.String(), "transactions=5") {
		t.Errorf("migration 2 was not one transaction of columns, three of 10,000, 10,000 and 5,000 records, and one of indexes:\n%s", log.String())
	}
	var unfilled int
	if err := s.be.(*pgStore).pool.QueryRow(ctx, `SELECT count(*) FROM audit WHERE actor IS NULL OR (tool IS NULL) <> (seq % 1000 = 0) OR result IS NULL`).Scan(&unfilled); err != nil {
		t.Fatal(err)
	}
	if unfilled != 0 {
		t.Errorf("%d records without their filter columns after the migration", unfilled)
	}
	// A filtered page and export read the columns: user-3<ü>'s refusals
	// with tool_0, newest first, by brute force (record i is i seconds
	// after t0).
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := AuditFilter{TenantID: "tenant-a", Actor: "user-3<ü>", Result: "refused", Tool: "tool_0"}
	var want []int
	for i := n; i >= 1; i-- {
		if i%7 == 3 && i%10 == 0 && i%1000 != 0 {
			want = append(want, i)
		}
	}
	var got []int
	if err := s.ExportAudit(ctx, q, func(r AuditRecord) error {
		got = append(got, int(r.Time.Sub(t0)/time.Second))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("export of %+v after the migration (-want +got):\n%s", q, diff)
	}
	page, _, err := s.AuditPage(ctx, AuditFilter{TenantID: "tenant-a", Tool: "42"}, "", 10)
	if err != nil || len(page) != 0 {
		t.Errorf("a tool that is not a string matched a tool filter: %d records, %v", len(page), err)
	}
	first, _, err := s.AuditPage(ctx, q, "", 3)
	if err != nil || len(first) != 3 || !first[0].Time.Equal(t0.Add(time.Duration(want[0])*time.Second)) || first[0].Actor != q.Actor {
		t.Errorf("first page of %+v: %+v, %v; want records from the %dth", q, first, err, want[0])
	}
	if v := version(); v != 2 {
		t.Errorf("version %d after the migration, want 2", v)
	}
}
