package store

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.etcd.io/bbolt"
)

// copyBatch is how many rows one round trip of CopyToPostgres sends.
const copyBatch = 1000

// CopyCount is what CopyToPostgres did with one kind of record: how many
// the bbolt file holds, how many were inserted, and how many were there
// already (from an earlier copy).
type CopyCount struct {
	Kind           string
	Read, Inserted int
	AlreadyThere   int
	Skipped        int    // records that cannot be copied (see SkipReason)
	SkipReason     string // why, when Skipped > 0
}

// copyMarker is the meta key a copy sets in the database before it writes
// anything, so that running it again (after a failure half way, or to
// check) goes on rather than refuse a database that is not empty.
const copyMarker = "copied_from_bbolt"

// ErrNotEmpty is returned by CopyToPostgres for a database that already
// holds records of its own: a copy goes into a new database only.
var ErrNotEmpty = errors.New("store: the database already holds records")

// CopyToPostgres copies every record of the bbolt store src into the
// PostgreSQL store dst: runs, views and their HTML, the audit log (with its sequence numbers), conversation
// references, deliveries, bindings, tenant settings, policy sets, API
// keys, triggers and the activities seen. It is idempotent: a record whose
// key is in dst already is left as it is, so running it again copies
// nothing twice and reports what was there. dst must be a new database, or
// one an earlier copy wrote into (ErrNotEmpty otherwise). src is read in
// one read transaction: the service must not be writing to it (Open's
// file lock sees to that).
func CopyToPostgres(ctx context.Context, src, dst *Store) ([]CopyCount, error) {
	if src.bolt == nil {
		return nil, fmt.Errorf("store: copy: %w", invalid("the source is not a bbolt store"))
	}
	pg, ok := dst.be.(*pgStore)
	if !ok {
		return nil, fmt.Errorf("store: copy: %w", invalid("the target is not a PostgreSQL store"))
	}
	if err := pg.claimCopy(ctx); err != nil {
		return nil, err
	}
	var out []CopyCount
	err := src.bolt.read(func(tx *bbolt.Tx) error {
		for _, k := range copyKinds() {
			c, err := k.copy(ctx, pg, tx)
			if err != nil {
				return fmt.Errorf("%s: %w", k.kind, err)
			}
			c.Kind = k.kind
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("store: copy: %w", err)
	}
	// The audit log's numbers go on from the largest copied.
	if _, err := pg.pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence('audit', 'seq'), coalesce((SELECT max(seq) FROM audit), 0) + 1, false)`); err != nil {
		return out, fmt.Errorf("store: copy: audit sequence: %w", err)
	}
	return out, nil
}

// claimCopy refuses a database with records of its own, and marks one
// without as the copy's.
func (s *pgStore) claimCopy(ctx context.Context) error {
	var marked bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM meta WHERE key = $1)`, copyMarker).Scan(&marked); err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	if marked {
		return nil
	}
	var used bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM runs) OR EXISTS (SELECT 1 FROM views) OR EXISTS (SELECT 1 FROM audit)
		OR EXISTS (SELECT 1 FROM conversations) OR EXISTS (SELECT 1 FROM bindings) OR EXISTS (SELECT 1 FROM triggers)
		OR EXISTS (SELECT 1 FROM api_keys) OR EXISTS (SELECT 1 FROM tenant_settings) OR EXISTS (SELECT 1 FROM policy_sets)`).Scan(&used)
	if err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	if used {
		return fmt.Errorf("store: copy: %w: copy into a new database", ErrNotEmpty)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`, copyMarker, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("store: copy: %w", err)
	}
	return nil
}

// copyKind copies one bucket: row turns a key and value into the insert
// of its row (skip: a reason not to copy it).
type copyKind struct {
	kind, bucket string
	row          func(k, v []byte) (sql string, args []any, skip string, err error)
}

// copy inserts the bucket's rows in batches of copyBatch statements.
func (k copyKind) copy(ctx context.Context, s *pgStore, tx *bbolt.Tx) (CopyCount, error) {
	var c CopyCount
	b := tx.Bucket([]byte(k.bucket))
	if b == nil {
		return c, nil
	}
	batch := &pgx.Batch{}
	flush := func() error {
		if batch.Len() == 0 {
			return nil
		}
		res := s.pool.SendBatch(ctx, batch)
		for range batch.Len() {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return err
			}
			if tag.RowsAffected() > 0 {
				c.Inserted++
			} else {
				c.AlreadyThere++
			}
		}
		batch = &pgx.Batch{}
		return res.Close()
	}
	err := b.ForEach(func(key, value []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.Read++
		sql, args, skip, err := k.row(key, value)
		if err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		if skip != "" {
			c.Skipped++
			c.SkipReason = skip
			return nil
		}
		batch.Queue(sql, args...)
		if batch.Len() == copyBatch {
			return flush()
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	return c, flush()
}

// copyKinds lists the buckets in an order that keeps foreign keys whole:
// HTML before views, runs before deliveries, triggers alone.
func copyKinds() []copyKind {
	clone := func(b []byte) []byte { return append([]byte(nil), b...) }
	return []copyKind{
		{kind: "html", bucket: bucketHTML, row: func(k, v []byte) (string, []any, string, error) {
			return `INSERT INTO html (sha, data) VALUES ($1, $2) ON CONFLICT DO NOTHING`, []any{string(k), clone(v)}, "", nil
		}},
		{kind: "runs", bucket: bucketRuns, row: func(k, v []byte) (string, []any, string, error) {
			var r struct {
				TenantID  string    `json:"tenantId"`
				CreatedAt time.Time `json:"createdAt"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return "", nil, "", err
			}
			if !keyablePart(r.TenantID) {
				return "", nil, "a tenant id with a NUL byte", nil
			}
			return `INSERT INTO runs (id, tenant, created_ns, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
				[]any{clone(k), r.TenantID, ns(r.CreatedAt), clone(v)}, "", nil
		}},
		{kind: "views", bucket: bucketViews, row: func(k, v []byte) (string, []any, string, error) {
			var h struct {
				viewHeader
				RunID string `json:"runId"`
			}
			if err := json.Unmarshal(v, &h); err != nil {
				return "", nil, "", err
			}
			if !keyablePart(h.TenantID) {
				return "", nil, "a tenant id with a NUL byte", nil
			}
			return `INSERT INTO views (id, tenant, run_id, sha, created_ns, expires_ns, end_ns, revoked, data)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
				[]any{clone(k), h.TenantID, []byte(h.RunID), strings.ToLower(h.HTMLSHA256), ns(h.CreatedAt), ns(h.ExpiresAt), ns(h.end()), !h.RevokedAt.IsZero(), clone(v)}, "", nil
		}},
		{kind: "audit records", bucket: bucketAudit, row: func(k, v []byte) (string, []any, string, error) {
			if len(k) != 16 {
				return "", nil, "", fmt.Errorf("key of %d bytes", len(k))
			}
			var r struct {
				TenantID string `json:"tenantId"`
				Action   string `json:"action"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO audit (seq, time_ns, tenant, action, data) OVERRIDING SYSTEM VALUE VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
				[]any{int64(binary.BigEndian.Uint64(k[8:])), keyNS([8]byte(k[:8])), []byte(r.TenantID), []byte(r.Action), clone(v)}, "", nil
		}},
		{kind: "conversations", bucket: bucketConversations, row: func(k, v []byte) (string, []any, string, error) {
			var c struct {
				TenantID string `json:"tenantId"`
			}
			if err := json.Unmarshal(v, &c); err != nil {
				return "", nil, "", err
			}
			if !keyablePart(c.TenantID) {
				return "", nil, "a tenant id with a NUL byte", nil
			}
			return `INSERT INTO conversations (key, tenant, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				[]any{clone(k), c.TenantID, clone(v)}, "", nil
		}},
		{kind: "deliveries", bucket: bucketDeliveries, row: func(k, v []byte) (string, []any, string, error) {
			// A delivery whose run is not stored inserts nothing.
			return `INSERT INTO deliveries (run_id, data) SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1) ON CONFLICT DO NOTHING`,
				[]any{clone(k), clone(v)}, "", nil
		}},
		{kind: "bindings", bucket: bucketBindings, row: func(k, v []byte) (string, []any, string, error) {
			var b Binding
			if err := json.Unmarshal(v, &b); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO bindings (tenant, agent, subject, kind, role, data) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
				[]any{b.TenantID, b.AgentID, b.Subject, b.Kind, b.Role, clone(v)}, "", nil
		}},
		{kind: "tenant settings", bucket: bucketTenantSettings, row: func(k, v []byte) (string, []any, string, error) {
			var ts TenantSettings
			if err := json.Unmarshal(v, &ts); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO tenant_settings (tenant, version, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				[]any{string(k), int64(ts.Version), clone(v)}, "", nil
		}},
		{kind: "policy sets", bucket: bucketPolicySets, row: func(k, v []byte) (string, []any, string, error) {
			var p PolicySet
			if err := json.Unmarshal(v, &p); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO policy_sets (tenant, version, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
				[]any{string(k), int64(p.Version), clone(v)}, "", nil
		}},
		{kind: "API keys", bucket: bucketAPIKeys, row: func(k, v []byte) (string, []any, string, error) {
			var a APIKey
			if err := json.Unmarshal(v, &a); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO api_keys (id, tenant, revoked_ns, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
				[]any{a.ID, a.TenantID, revokedNS(a.RevokedAt), clone(v)}, "", nil
		}},
		{kind: "triggers", bucket: bucketTriggers, row: func(k, v []byte) (string, []any, string, error) {
			var t Trigger
			if err := json.Unmarshal(v, &t); err != nil {
				return "", nil, "", err
			}
			return `INSERT INTO triggers (tenant, id, conversation_id, paused, data) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
				[]any{t.TenantID, t.ID, t.ConversationID, t.Paused, clone(v)}, "", nil
		}},
		{kind: "activities", bucket: bucketActivities, row: func(k, v []byte) (string, []any, string, error) {
			if len(v) != 8 {
				return "", nil, "", fmt.Errorf("expiry of %d bytes", len(v))
			}
			return `INSERT INTO activities (key, expires_ns) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
				[]any{clone(k), keyNS([8]byte(v))}, "", nil
		}},
	}
}
