package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
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

	keySchemaVersion = "schema_version"
)

// migration moves the file from version-1 to version. It runs in one
// write transaction with the version bump, so a failed migration leaves
// the file as it was. A migration that rewrites many records must do so in
// bounded steps of its own if it would otherwise hold the transaction for
// long.
type migration struct {
	version uint64
	name    string
	apply   func(tx *bbolt.Tx) error
}

// schema lists the migrations in order; a new one is appended with the
// next version number and a test that opens a file of the previous version.
// It is a function, not a variable, so that nothing can change it.
func schema() []migration {
	return []migration{
		{version: 1, name: "create buckets", apply: migrateV1},
		{version: 2, name: "deliveries", apply: migrateV2},
		{version: 3, name: "access records", apply: migrateV3},
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
func (s *Store) migrate(ctx context.Context, migrations []migration) error {
	for i, m := range migrations {
		if m.version != uint64(i+1) {
			return fmt.Errorf("store: migration %q has version %d, want %d", m.name, m.version, i+1)
		}
	}
	var current uint64
	if err := s.read(func(tx *bbolt.Tx) error {
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
		err := s.db.Update(func(tx *bbolt.Tx) error {
			if err := m.apply(tx); err != nil {
				return err
			}
			meta, err := tx.CreateBucketIfNotExists([]byte(bucketMeta))
			if err != nil {
				return err
			}
			return meta.Put([]byte(keySchemaVersion), binary.BigEndian.AppendUint64(nil, m.version))
		})
		if err != nil {
			return fmt.Errorf("store: migration %d (%s): %w", m.version, m.name, err)
		}
		s.log.Info("store migrated", "version", m.version, "migration", m.name, "took", time.Since(start))
	}
	return nil
}

// timeKey encodes t so that byte order is time order: Unix nanoseconds with
// the sign bit flipped, big-endian. Times outside the years 1678 to 2262
// (where UnixNano is undefined) are clamped.
func timeKey(t time.Time) [8]byte {
	// UnixNano is defined for whole seconds strictly inside these bounds.
	const minSec, maxSec = math.MinInt64/int64(time.Second) + 1, math.MaxInt64/int64(time.Second) - 1
	var n int64
	switch sec := t.Unix(); {
	case sec < minSec:
		n = math.MinInt64
	case sec > maxSec:
		n = math.MaxInt64
	default:
		n = t.UnixNano()
	}
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], uint64(n)^(1<<63))
	return k
}

func u64(n uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), n) }
