package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// Bucket names; the tree is drawn in the package doc.
const (
	bucketMeta                = "meta"
	bucketRuns                = "runs"
	bucketViews               = "views"
	bucketViewsByExpiry       = "views_by_expiry"
	bucketHTML                = "html"
	bucketHTMLRefs            = "html_refs"
	bucketAudit               = "audit"
	bucketAuditByTenant       = "audit_by_tenant"
	bucketAuditByAction       = "audit_by_action"
	bucketAuditByTenantAction = "audit_by_tenant_action"
	bucketConversations       = "conversations"
	bucketDeliveries          = "deliveries"
	bucketBindings            = "bindings"
	bucketTenantSettings      = "tenant_settings"
	bucketPolicySets          = "policy_sets"
	bucketRunsByTime          = "runs_by_time"
	bucketRunsByTenant        = "runs_by_tenant"
	bucketViewsByTenant       = "views_by_tenant"
	bucketConvsByTenant       = "conversations_by_tenant"
	bucketAPIKeys             = "api_keys"
	bucketAPIKeyIDs           = "api_key_ids"
	bucketTriggers            = "triggers"
	bucketTriggersByConv      = "triggers_by_conversation"
	bucketActivities          = "activities"
	bucketActivitiesByExpiry  = "activities_by_expiry"
	bucketMCPConnections      = "mcp_connections"
	bucketMCPConnsByServer    = "mcp_connections_by_server"
	bucketMCPAuthRequests     = "mcp_auth_requests"
	bucketMCPAuthByState      = "mcp_auth_by_state"
	bucketMCPAuthByExpiry     = "mcp_auth_by_expiry"
	bucketHistory             = "history"
	bucketHistoryByTime       = "history_by_time"
	bucketUsage               = "usage"
	bucketQuestions           = "questions"
	bucketQuestionsByExpiry   = "questions_by_expiry"

	keySchemaVersion = "schema_version"
	keyCursorKey     = "cursor_key"
)

// migrateBatch is how many records one transaction of a migration's
// backfill rewrites at most.
const migrateBatch = 10_000

// migration moves the file from version-1 to version. It runs in one
// write transaction with the version bump, so a failed migration leaves
// the file as it was. A migration that rewrites many records must do so in
// bounded steps of its own if it would otherwise hold the transaction for
// long.
type migration struct {
	version uint64
	name    string
	apply   func(tx *bbolt.Tx) error
	// backfill, when set, makes the migration take several transactions:
	// apply alone, then backfill over and over, each call rewriting a
	// bounded batch after the position it returned last (nil at first)
	// and returning the next (nil when done), then the version bump. A
	// migration stopped half way leaves the old version number, so that
	// the next Open runs it again from the start: apply and backfill must
	// be idempotent.
	backfill func(tx *bbolt.Tx, after []byte) (next []byte, err error)
}

// schema lists the migrations in order; a new one is appended with the
// next version number and a test that opens a file of the previous version.
// It is a function, not a variable, so that nothing can change it.
func schema() []migration {
	return []migration{
		{version: 1, name: "create buckets", apply: migrateV1},
		{version: 2, name: "deliveries", apply: migrateV2},
		{version: 3, name: "access records", apply: migrateV3},
		{version: 4, name: "tenant and time indexes", apply: migrateV4, backfill: backfillV4},
		{version: 5, name: "API keys and triggers", apply: migrateV5},
		{version: 6, name: "activities seen", apply: migrateV6},
		{version: 7, name: "MCP connections and authorization requests", apply: migrateV7},
		{version: 8, name: "conversation history", apply: migrateV8},
		{version: 9, name: "usage rollup", apply: migrateV9, backfill: backfillV9},
		{version: 10, name: "questions", apply: migrateV10},
	}
}

func migrateV1(tx *bbolt.Tx) error {
	for _, name := range []string{
		bucketMeta, bucketRuns, bucketViews, bucketViewsByExpiry, bucketHTML,
		bucketHTMLRefs, bucketAudit, bucketAuditByTenant, bucketAuditByAction,
		bucketAuditByTenantAction, bucketConversations,
	} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV2 adds the bucket of answer deliveries. Files of version 1 have
// runs but no record of where their answers went: those runs simply have
// no delivery, so nothing is rewritten.
func migrateV2(tx *bbolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists([]byte(bucketDeliveries)); err != nil {
		return fmt.Errorf("bucket %s: %w", bucketDeliveries, err)
	}
	return nil
}

// migrateV3 adds the buckets of access records: role bindings, tenant
// settings and policy sets. Files of version 2 have none, which reads as
// no bindings, default settings and no policy set of a tenant's own, so
// nothing is rewritten.
func migrateV3(tx *bbolt.Tx) error {
	for _, name := range []string{bucketBindings, bucketTenantSettings, bucketPolicySets} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV4 adds the indexes that let runs be swept by age and runs, views
// and conversations be listed by tenant, and the key that signs listing
// cursors. backfillV4 then fills the indexes for the records already
// stored, and gives the expiry index its new value (the HTML hash followed
// by the view's views_by_tenant key, so that a sweep can delete that entry
// without decoding the view).
func migrateV4(tx *bbolt.Tx) error {
	for _, name := range []string{bucketRunsByTime, bucketRunsByTenant, bucketViewsByTenant, bucketConvsByTenant} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	meta := tx.Bucket([]byte(bucketMeta))
	if meta.Get([]byte(keyCursorKey)) != nil {
		return nil // a migration stopped half way made it already
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("cursor key: %w", err)
	}
	return meta.Put([]byte(keyCursorKey), key)
}

// migrateV5 adds the buckets of API keys and scheduled triggers. Files of
// version 4 have neither, which reads as no keys and no triggers, so
// nothing is rewritten.
func migrateV5(tx *bbolt.Tx) error {
	for _, name := range []string{bucketAPIKeys, bucketAPIKeyIDs, bucketTriggers, bucketTriggersByConv} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV6 adds the buckets of the activities the bot has seen. Files of
// version 5 kept them in memory only, which reads as none seen.
func migrateV6(tx *bbolt.Tx) error {
	for _, name := range []string{bucketActivities, bucketActivitiesByExpiry} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV7 adds the buckets of people's connections to MCP servers and
// of the authorizations under way. Files of version 6 have none, which
// reads as nobody connected, so nothing is rewritten.
func migrateV7(tx *bbolt.Tx) error {
	for _, name := range []string{bucketMCPConnections, bucketMCPConnsByServer, bucketMCPAuthRequests, bucketMCPAuthByState, bucketMCPAuthByExpiry} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV8 adds the buckets of conversation history. Files of version 7
// have none, which reads as conversations without earlier turns, so
// nothing is rewritten.
func migrateV8(tx *bbolt.Tx) error {
	for _, name := range []string{bucketHistory, bucketHistoryByTime} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrateV10 adds the buckets of the questions servers ask people.
// Files of version 9 have none, which reads as no question waiting, so
// nothing is rewritten.
func migrateV10(tx *bbolt.Tx) error {
	for _, name := range []string{bucketQuestions, bucketQuestionsByExpiry} {
		if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
			return fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return nil
}

// Phases of backfillV4; its position is a phase byte and the last key done.
const (
	fillRuns  = 'r'
	fillViews = 'v'
	fillConvs = 'c'
)

// backfillV4 indexes up to migrateBatch records of runs, then views, then
// conversations, after the position after. Puts of the same keys and
// values make it idempotent. A record whose tenant holds a NUL byte (which
// older versions did not refuse) is indexed by time but not by tenant,
// since its key would reach into another tenant's.
func backfillV4(tx *bbolt.Tx, after []byte) ([]byte, error) {
	phase, key := byte(fillRuns), []byte(nil)
	if len(after) > 0 {
		phase, key = after[0], after[1:]
	}
	var bucket string
	var fill func(k, v []byte) error
	switch phase {
	case fillRuns:
		bucket = bucketRuns
		byTime, byTenant := tx.Bucket([]byte(bucketRunsByTime)), tx.Bucket([]byte(bucketRunsByTenant))
		fill = func(k, v []byte) error {
			var r struct {
				TenantID  string    `json:"tenantId"`
				CreatedAt time.Time `json:"createdAt"`
			}
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("run %q: %w", k, err)
			}
			created := timeKey(r.CreatedAt)
			if err := byTime.Put(timeIDKey(created, k), []byte{}); err != nil {
				return err
			}
			if !keyablePart(r.TenantID) {
				return nil
			}
			return byTenant.Put(tenantTimeKey(r.TenantID, created, k), []byte{})
		}
	case fillViews:
		bucket = bucketViews
		byTenant, byExpiry := tx.Bucket([]byte(bucketViewsByTenant)), tx.Bucket([]byte(bucketViewsByExpiry))
		fill = func(k, v []byte) error {
			var hdr viewHeader
			if err := json.Unmarshal(v, &hdr); err != nil {
				return fmt.Errorf("view %q: %w", k, err)
			}
			created, end := timeKey(hdr.CreatedAt), timeKey(hdr.end())
			tenant := hdr.TenantID
			if !keyablePart(tenant) {
				tenant = "\x00" // matches no tenant's key
			} else if err := byTenant.Put(tenantTimeKey(tenant, created, k), end[:]); err != nil {
				return err
			}
			return byExpiry.Put(timeIDKey(end, k), expiryValue([]byte(hdr.HTMLSHA256), created, tenant))
		}
	case fillConvs:
		bucket = bucketConversations
		byTenant := tx.Bucket([]byte(bucketConvsByTenant))
		fill = func(k, v []byte) error {
			var c struct {
				TenantID string `json:"tenantId"`
			}
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("conversation %q: %w", k, err)
			}
			if !keyablePart(c.TenantID) {
				return nil
			}
			return byTenant.Put(indexKey(k, c.TenantID), []byte{})
		}
	default:
		return nil, fmt.Errorf("backfill position %x: unknown phase", after)
	}
	c := tx.Bucket([]byte(bucket)).Cursor()
	k, v := c.First()
	if key != nil {
		if k, v = c.Seek(key); k != nil && bytes.Equal(k, key) {
			k, v = c.Next()
		}
	}
	for n := 0; k != nil; k, v = c.Next() {
		if n == migrateBatch {
			return append([]byte{phase}, key...), nil
		}
		if err := fill(k, v); err != nil {
			return nil, err
		}
		key = bytes.Clone(k)
		n++
	}
	switch phase {
	case fillRuns:
		return []byte{fillViews}, nil
	case fillViews:
		return []byte{fillConvs}, nil
	}
	return nil, nil
}

// schemaVersion reads meta/schema_version; 0 means a new, empty file.
func schemaVersion(tx *bbolt.Tx) (uint64, error) {
	meta := tx.Bucket([]byte(bucketMeta))
	if meta == nil {
		return 0, nil
	}
	v := meta.Get([]byte(keySchemaVersion))
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("store: schema version is %d bytes long, want 8", len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// migrate applies the migrations the file has not had yet, in order.
func (s *boltStore) migrate(ctx context.Context, migrations []migration) error {
	for i, m := range migrations {
		if m.version != uint64(i+1) {
			return fmt.Errorf("store: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	var current uint64
	if err := s.view(func(tx *bbolt.Tx) error {
		var err error
		current, err = schemaVersion(tx)
		return err
	}); err != nil {
		return err
	}
	latest := uint64(len(migrations))
	if current > latest {
		return fmt.Errorf("store: file has schema version %d, this program knows up to %d: %w", current, latest, ErrSchemaTooNew)
	}
	for _, m := range migrations[current:] {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		txs, err := s.runMigration(ctx, m)
		if err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
		}
		s.log.Info("store migrated", "version", m.version, "migration", m.name, "transactions", txs, "took", time.Since(start))
	}
	return nil
}

// runMigration applies one migration and bumps the version: in one
// transaction, or for a migration with a backfill in several, the bump
// last. It returns how many transactions it took.
func (s *boltStore) runMigration(ctx context.Context, m migration) (int, error) {
	bump := func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists([]byte(bucketMeta))
		if err != nil {
			return err
		}
		return meta.Put([]byte(keySchemaVersion), binary.BigEndian.AppendUint64(nil, m.version))
	}
	if m.backfill == nil {
		return 1, s.db.Update(func(tx *bbolt.Tx) error {
			if err := m.apply(tx); err != nil {
				return err
			}
			return bump(tx)
		})
	}
	if err := s.db.Update(m.apply); err != nil {
		return 1, err
	}
	txs := 1
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return txs, err
		}
		var next []byte
		err := s.db.Update(func(tx *bbolt.Tx) error {
			var err error
			next, err = m.backfill(tx, after)
			return err
		})
		txs++
		if err != nil {
			return txs, err
		}
		if next == nil {
			break
		}
		after = next
	}
	return txs + 1, s.db.Update(bump)
}

// viewHeader is the part of a stored view that its index entries are made
// from; decoding it skips the view's arguments and result.
type viewHeader struct {
	TenantID   string    `json:"tenantId"`
	HTMLSHA256 string    `json:"htmlSha256"`
	CreatedAt  time.Time `json:"createdAt"`
	ExpiresAt  time.Time `json:"expiresAt"`
	RevokedAt  time.Time `json:"revokedAt"`
}

func (h viewHeader) end() time.Time { return viewEnd(h.ExpiresAt, h.RevokedAt) }
