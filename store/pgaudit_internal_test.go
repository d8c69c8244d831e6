package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
)

// A page of the audit log on PostgreSQL is answered from an index of the
// audit table, never by reading the table through: the query of each
// filter the admin console sends, explained over 100,000 records of
// twenty tenants with the planner's statistics, as a first page and after a
// cursor, with the plan PostgreSQL makes for the values and the generic
// plan it may keep for a prepared statement.
func TestAuditPagePlanUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s, err := openPostgres(ctx, url, Options{AuditRetention: -1}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	const n = 100_000
	var recs []AuditRecord
	for i := range n {
		recs = append(recs, AuditRecord{
			Time: t0.Add(time.Duration(i) * time.Second), TenantID: fmt.Sprintf("tenant-%c", 'a'+i%20),
			Action: []string{"agent.mcp_app.call", "agent.tool.call", "agent.mcp_app.view", "bot.feedback", "admin.binding.add"}[i/2%5],
			Actor:  fmt.Sprintf("user-%02d", i/10%50),
			Fields: map[string]any{"tool": fmt.Sprintf("tool_%02d", i/7%20), "result": []string{"ok", "ok", "ok", "ok", "ok", "ok", "ok", "ok", "error", "refused"}[i/3%10]},
		})
	}
	if err := BulkAppend(ctx, s, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.pool.Exec(ctx, `VACUUM ANALYZE audit`); err != nil {
		t.Fatal(err)
	}
	// A filter of a tenant alone may be read through the index of every
	// tenant's records by time (the planner's choice when the tenant has
	// many records, which are then most of those it reads); one that also
	// names an action, person, tool or result is read through an index of
	// the tenant and that.
	anyIndex := regexp.MustCompile(`(Index Scan|Index Only Scan|Bitmap Index Scan)( Backward)?( using| on) audit_by_\w+`)
	tenantIndex := regexp.MustCompile(`(Index Scan|Index Only Scan|Bitmap Index Scan)( Backward)?( using| on) audit_by_tenant_\w+`)
	for _, q := range []AuditFilter{
		{TenantID: "tenant-a"},
		{TenantID: "tenant-a", Action: "agent.mcp_app.call"},
		{TenantID: "tenant-a", Actor: "user-07", Result: "refused"},
		{TenantID: "tenant-a", Actor: "user-07"},
		{TenantID: "tenant-a", Tool: "tool_03"},
		{TenantID: "tenant-a", Result: "error"},
		{TenantID: "tenant-b", Action: "agent.tool.call", Tool: "tool_03", Result: "ok", From: t0.Add(time.Hour), To: t0.Add(20 * time.Hour)},
	} {
		p, err := planAudit(q)
		if err != nil {
			t.Fatal(err)
		}
		pos := timeKey(t0.Add(10 * time.Hour))
		for _, at := range [][]byte{nil, append(pos[:], 0, 0, 0, 0, 0, 0, 0, 9)} {
			scan := planAuditScan(p, at)
			page, pageArgs := scan.pageSQL(defaultPageScan, 50)
			bound, boundArgs := scan.boundSQL(defaultPageScan)
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				for _, query := range []struct {
					sql  string
					args []any
				}{{page, pageArgs}, {bound, boundArgs}} {
					plan := explain(t, pg, mode, query.sql, query.args)
					index := tenantIndex
					if !p.filtered && q.Action == "" {
						index = anyIndex
					}
					if !index.MatchString(plan) || strings.Contains(plan, "Seq Scan") {
						t.Errorf("%+v (%s, cursor %v) is not answered from an index of its filter:\n%s", q, mode, at != nil, plan)
					}
				}
			}
		}
	}
}

// explain returns the plan PostgreSQL makes for sql, in plan_cache_mode
// mode.
func explain(t *testing.T, pg *pgStore, mode, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pg.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode")
	rows, err := conn.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", sql, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

// The overview's query reads a range of the usage table's primary key,
// never the whole table, whichever plan PostgreSQL caches.
func TestOverviewPlanUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	url := pgtest.Database(t)
	s, err := openPostgres(ctx, url, Options{}, pgSchema())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pg := s.be.(*pgStore)
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	var recs []AuditRecord
	for i := range 50_000 {
		recs = append(recs, AuditRecord{Time: t0.Add(time.Duration(i) * 3 * time.Minute), TenantID: fmt.Sprintf("tenant-%c", 'a'+i%20),
			Action: actionToolCall, Actor: fmt.Sprintf("user-%02d", i%50),
			Fields: map[string]any{"server": "demo", "tool": fmt.Sprintf("tool_%02d", i/7%20), "result": "ok"}})
	}
	if err := BulkAppend(ctx, s, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.pool.Exec(ctx, `VACUUM ANALYZE usage`); err != nil {
		t.Fatal(err)
	}
	index := regexp.MustCompile(`(Index Scan|Index Only Scan|Bitmap Index Scan)( Backward)?( using| on) usage_pkey`)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan := explain(t, pg, mode, overviewQuery, []any{[]byte("tenant-a"), usageDay(t0), usageDay(t0) + 30})
		if !index.MatchString(plan) || strings.Contains(plan, "Seq Scan") {
			t.Errorf("the overview (%s) is not read from the usage table's key:\n%s", mode, plan)
		}
	}
}
