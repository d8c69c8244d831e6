package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgMigrationLock is the key of the advisory lock the migrations run
// under, and pgSweepLock that of the sweep: any constant of the service's
// own (these spell "tbmigrat" and "tbsweep" in ASCII).
const (
	pgMigrationLock int64 = 0x74626d6967726174
	pgSweepLock     int64 = 0x7462737765657000
)

// pgMigration moves the database from version-1 to version: sql in one
// transaction with the row that records it in schema_migrations. A
// migration that rewrites every row of a table does it in several: sql,
// then backfill over and over, each call a transaction that rewrites a
// bounded batch after the position it returned last (0 at first) and
// returns the next (done when none is left), then final with the row of
// schema_migrations. Stopped half way, it is run again from the start at
// the next open: sql, backfill and final must be idempotent.
type pgMigration struct {
	version  int
	name     string
	sql      string
	backfill func(ctx context.Context, tx pgx.Tx, after int64) (next int64, done bool, err error)
	final    string
}

// pgSchema lists the PostgreSQL migrations in order; a new one is appended
// with the next version number. Like schema() it is a function, so that
// nothing can change it.
//
// Each table holds what a bbolt bucket holds, the record as the same JSON
// (bytea, byte for byte: jsonb would refuse the NUL a policy's text may
// hold), beside the columns its queries select and order by. Times are
// bigint Unix nanoseconds, clamped as the bbolt keys are (ns). Ids that
// the store does not check for UTF-8 are bytea, as are the audit log's
// tenants and actions; the others are text COLLATE "C", so that both
// backends order by bytes.
//
// HTML is kept once per SHA-256: a save inserts the document with ON
// CONFLICT DO NOTHING, which neither waits for nor locks a document stored
// already, so that turns sharing one document do not queue behind each
// other; the view's foreign key to it takes a shared key lock until the
// save commits. The sweep deletes the documents no view uses any more
// (those of swept views, and those of views replaced by another
// document), selecting them FOR UPDATE SKIP LOCKED, which skips a document
// a save is about to use; and should a save commit in between, the
// foreign key refuses the delete, and the sweep tries again with the view
// in sight. No document is deleted while a stored view uses it.
func pgSchema() []pgMigration {
	return []pgMigration{
		{version: 1, name: "tables", sql: `
CREATE TABLE meta (key text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE runs (
	id bytea PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	created_ns bigint NOT NULL,
	data bytea NOT NULL);
CREATE INDEX runs_by_time ON runs (created_ns, id);
CREATE INDEX runs_by_tenant ON runs (tenant, created_ns, id);
CREATE TABLE html (
	sha text COLLATE "C" PRIMARY KEY,
	data bytea NOT NULL);
CREATE TABLE views (
	id bytea PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	run_id bytea NOT NULL,
	sha text COLLATE "C" NOT NULL REFERENCES html (sha),
	created_ns bigint NOT NULL,
	expires_ns bigint NOT NULL,
	end_ns bigint NOT NULL,
	revoked boolean NOT NULL,
	data bytea NOT NULL);
CREATE INDEX views_by_end ON views (end_ns);
CREATE INDEX views_by_tenant ON views (tenant, created_ns, id);
CREATE INDEX views_by_run ON views (run_id);
CREATE INDEX views_by_html ON views (sha);
CREATE TABLE audit (
	seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	time_ns bigint NOT NULL,
	tenant bytea NOT NULL,
	action bytea NOT NULL,
	data bytea NOT NULL);
CREATE INDEX audit_by_time ON audit (time_ns, seq);
CREATE INDEX audit_by_tenant ON audit (tenant, time_ns, seq);
CREATE INDEX audit_by_action ON audit (action, time_ns, seq);
CREATE INDEX audit_by_tenant_action ON audit (tenant, action, time_ns, seq);
CREATE TABLE conversations (
	key bytea PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	data bytea NOT NULL);
CREATE INDEX conversations_by_tenant ON conversations (tenant, key);
CREATE TABLE deliveries (
	run_id bytea PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	data bytea NOT NULL);
CREATE TABLE bindings (
	tenant text COLLATE "C",
	agent text COLLATE "C",
	subject text COLLATE "C",
	kind text COLLATE "C",
	role text COLLATE "C",
	data bytea NOT NULL,
	PRIMARY KEY (tenant, agent, subject, kind, role));
CREATE TABLE tenant_settings (
	tenant text COLLATE "C" PRIMARY KEY,
	version bigint NOT NULL,
	data bytea NOT NULL);
CREATE TABLE policy_sets (
	tenant text COLLATE "C" PRIMARY KEY,
	version bigint NOT NULL,
	data bytea NOT NULL);
CREATE TABLE api_keys (
	id text COLLATE "C" PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	revoked_ns bigint,
	data bytea NOT NULL);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant, id);
CREATE INDEX api_keys_by_revocation ON api_keys (revoked_ns) WHERE revoked_ns IS NOT NULL;
CREATE TABLE triggers (
	tenant text COLLATE "C",
	id text COLLATE "C",
	conversation_id text COLLATE "C" NOT NULL,
	paused boolean NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (tenant, id));
CREATE INDEX triggers_by_conversation ON triggers (tenant, conversation_id, id);
CREATE TABLE trigger_claims (
	tenant text COLLATE "C",
	id text COLLATE "C",
	due_ns bigint,
	PRIMARY KEY (tenant, id, due_ns),
	FOREIGN KEY (tenant, id) REFERENCES triggers (tenant, id) ON DELETE CASCADE);
CREATE TABLE activities (
	key bytea PRIMARY KEY,
	expires_ns bigint NOT NULL);
CREATE INDEX activities_by_expiry ON activities (expires_ns);
`},
		{version: 2, name: "audit filter columns", sql: `
ALTER TABLE audit ADD COLUMN IF NOT EXISTS actor bytea,
	ADD COLUMN IF NOT EXISTS tool bytea,
	ADD COLUMN IF NOT EXISTS result bytea;
`, backfill: backfillAuditColumns, final: `
CREATE INDEX IF NOT EXISTS audit_by_tenant_actor ON audit (tenant, actor, time_ns, seq) WHERE actor IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_by_tenant_tool ON audit (tenant, tool, time_ns, seq) WHERE tool IS NOT NULL;
CREATE INDEX IF NOT EXISTS audit_by_tenant_result ON audit (tenant, result, time_ns, seq) WHERE result IS NOT NULL;
ANALYZE audit;
`},
		{version: 3, name: "MCP connections and authorization requests", sql: `
CREATE TABLE mcp_connections (
	tenant text COLLATE "C",
	user_id text COLLATE "C",
	agent text COLLATE "C",
	server text COLLATE "C",
	last_used_ns bigint,
	data bytea NOT NULL,
	PRIMARY KEY (tenant, user_id, agent, server));
CREATE INDEX mcp_connections_by_server ON mcp_connections (tenant, agent, server) INCLUDE (last_used_ns);
CREATE TABLE mcp_auth_requests (
	id text COLLATE "C" PRIMARY KEY,
	state text COLLATE "C" NOT NULL,
	expires_ns bigint NOT NULL,
	data bytea NOT NULL);
CREATE UNIQUE INDEX mcp_auth_requests_by_state ON mcp_auth_requests (state);
CREATE INDEX mcp_auth_requests_by_expiry ON mcp_auth_requests (expires_ns);
`},
		{version: 4, name: "conversation history", sql: `
CREATE TABLE history (
	seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	agent text COLLATE "C" NOT NULL,
	at_ns bigint NOT NULL,
	data bytea NOT NULL,
	messages bytea NOT NULL);
CREATE INDEX history_by_conversation ON history (tenant, conversation_id, agent, seq);
CREATE INDEX history_by_time ON history (at_ns);
`},
		{version: 5, name: "usage rollup", sql: pgUsageTable, backfill: backfillUsage, final: `ANALYZE usage;`},
		// The sweep deletes the counters of the oldest days of every
		// tenant: the primary key starts with the tenant.
		{version: 6, name: "usage by day", sql: `
CREATE INDEX IF NOT EXISTS usage_by_day ON usage (day);
`},
		{version: 7, name: "questions", sql: `
CREATE TABLE IF NOT EXISTS questions (
	id text COLLATE "C" PRIMARY KEY,
	expires_ns bigint NOT NULL,
	data bytea NOT NULL);
CREATE INDEX IF NOT EXISTS questions_by_expiry ON questions (expires_ns);
`},
	}
}

// pgBackfillBatch is how many rows one transaction of a backfill rewrites
// at most.
const pgBackfillBatch = 10_000

// backfillAuditColumns fills the audit log's filter columns of up to
// pgBackfillBatch records after the sequence number after, from their
// JSON as the store reads it (auditMatch), so that they match as on
// bbolt.
func backfillAuditColumns(ctx context.Context, tx pgx.Tx, after int64) (int64, bool, error) {
	rows, err := tx.Query(ctx, `SELECT seq, data FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2`, after, pgBackfillBatch)
	if err != nil {
		return after, false, err
	}
	var seqs []int64
	var actors, tools, results [][]byte
	for rows.Next() {
		var seq int64
		var data []byte
		if err := rows.Scan(&seq, &data); err != nil {
			rows.Close()
			return after, false, err
		}
		var m auditMatch
		if err := json.Unmarshal(data, &m); err != nil {
			rows.Close()
			return after, false, fmt.Errorf("audit record %d: %w", seq, err)
		}
		seqs = append(seqs, seq)
		actors, tools, results = append(actors, column(m.Actor)), append(tools, column(m.Fields.Tool)), append(results, column(m.Fields.Result))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return after, false, err
	}
	if len(seqs) == 0 {
		return after, true, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE audit a SET actor = u.actor, tool = u.tool, result = u.result
		FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[]) AS u(seq, actor, tool, result)
		WHERE a.seq = u.seq`, seqs, actors, tools, results); err != nil {
		return after, false, err
	}
	return seqs[len(seqs)-1], len(seqs) < pgBackfillBatch, nil
}

// migrate applies the migrations the database has not had yet, in order,
// holding an advisory lock on one connection meanwhile: a replica that
// starts while another migrates waits for it, then finds nothing to do.
func (s *pgStore) migrate(ctx context.Context, migrations []pgMigration) error {
	for i, m := range migrations {
		if m.version != i+1 {
			return fmt.Errorf("store: postgres migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: postgres migrations: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, pgMigrationLock); err != nil {
		return fmt.Errorf("store: postgres migrations: lock: %w", err)
	}
	defer func() {
		// A connection whose unlock failed is not given back with the
		// lock held.
		if _, err := conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, pgMigrationLock); err != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY,
		name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("store: postgres migrations: %w", err)
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("store: postgres migrations: %w", err)
	}
	if current > len(migrations) {
		return fmt.Errorf("store: database has schema version %d, this program knows up to %d: %w", current, len(migrations), ErrSchemaTooNew)
	}
	for _, m := range migrations[current:] {
		start := time.Now()
		txs, err := runPGMigration(ctx, conn, m)
		if err != nil {
			return fmt.Errorf("store: postgres migration %d (%s): %w", m.version, m.name, err)
		}
		s.log.Info("store migrated", "backend", "postgres", "version", m.version, "migration", m.name, "transactions", txs, "took", time.Since(start))
	}
	return nil
}

// runPGMigration applies one migration and records it: in one
// transaction, or for a migration with a backfill in several, the record
// last. It returns how many transactions it took.
func runPGMigration(ctx context.Context, conn *pgxpool.Conn, m pgMigration) (int, error) {
	record := func(tx pgx.Tx, sql string) error {
		if sql != "" {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name)
		return err
	}
	if m.backfill == nil {
		return 1, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return record(tx, m.sql) })
	}
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, m.sql)
		return err
	}); err != nil {
		return 1, err
	}
	txs := 1
	for after, done := int64(0), false; !done; {
		if err := ctx.Err(); err != nil {
			return txs, err
		}
		txs++
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var err error
			after, done, err = m.backfill(ctx, tx, after)
			return err
		}); err != nil {
			return txs, err
		}
	}
	return txs + 1, pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return record(tx, m.final) })
}
