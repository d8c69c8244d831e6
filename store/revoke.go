package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
)

// AuditViewRevoke is the action of the audit record RevokeView writes when
// its caller gives none.
const AuditViewRevoke = "admin.view.revoke"

// RevokeView revokes a view of tenant, at once and for good: from its
// commit on, View answers with an error wrapping ErrRevoked (which wraps
// ErrExpired and ErrNotFound), ActiveViews leaves it out, SaveRun will not
// store it again, and the next sweep deletes it (and its HTML with its
// last view) as if it had expired then. by is who revoked it (an Entra
// object id); it is kept in the view as RevokedBy.
//
// The audit records are written in the same commit, so that the
// revocation and its record are both stored or neither is; they are
// checked as by PutBinding. Given none, RevokeView writes one of its own:
// action AuditViewRevoke, actor by, and the view, run, server and tool in
// its fields.
//
// A view that is unknown, or of another tenant, is ErrNotFound, and the
// two cannot be told apart. A view that can no longer be opened is
// refused with ErrRevoked if it was revoked already and ErrExpired if it
// has expired; then nothing is written, audit records included.
func (s *boltStore) RevokeView(ctx context.Context, tenant, id, by string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prepared, err := s.prepareRevokeView(tenant, id, by, audit)
	if err != nil {
		return err
	}
	now := s.now()
	key := []byte(id)
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		viewsB := tx.Bucket([]byte(bucketViews))
		data := viewsB.Get(key)
		if data == nil {
			return ErrNotFound
		}
		// The view is decoded and encoded again here, inside the
		// transaction: one record, on an admin's request.
		var v View
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("stored record: %w", err)
		}
		switch {
		case v.TenantID != tenant:
			return ErrNotFound
		case v.Revoked():
			return fmt.Errorf("revoked at %s: %w", v.RevokedAt.UTC().Format(time.RFC3339), ErrRevoked)
		case v.Expired(now):
			return fmt.Errorf("expired at %s: %w", v.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
		}
		v.RevokedAt, v.RevokedBy = now, by
		value, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := viewsB.Put(key, value); err != nil {
			return err
		}
		// Move the view's expiry to now, so that the next sweep takes it,
		// and say so in views_by_tenant.
		expiryB := tx.Bucket([]byte(bucketViewsByExpiry))
		oldKey := timeIDKey(timeKey(v.ExpiresAt), key)
		entry := bytes.Clone(expiryB.Get(oldKey))
		if entry == nil {
			return fmt.Errorf("views_by_expiry has no entry %x", oldKey)
		}
		if err := expiryB.Delete(oldKey); err != nil {
			return err
		}
		end := timeKey(now)
		if err := expiryB.Put(timeIDKey(end, key), entry); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketViewsByTenant)).Put(tenantTimeKey(tenant, timeKey(v.CreatedAt), key), end[:]); err != nil {
			return err
		}
		recs := prepared
		if len(recs) == 0 {
			if recs, err = s.prepareAudit([]AuditRecord{{
				Time: now, TenantID: tenant, Action: AuditViewRevoke, Actor: by,
				Fields: map[string]any{"view": v.ID, "run": v.RunID, "server": v.Server, "tool": v.Tool},
			}}); err != nil {
				return err
			}
		}
		return appendAudit(tx, recs)
	})
	if err != nil {
		return fmt.Errorf("store: revoke view %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// ActiveViews returns one page of the views of tenant that can still be
// opened (not expired, not revoked), newest first (by CreatedAt), and the
// cursor of the next page: pass "" for the first, then each page's next,
// until it is "". A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize.
//
// It reads only the tenant's views, through views_by_tenant, whose values
// say when each view stops, so that views that no longer can be opened
// are skipped without being read; a page reads at most 5,000 index
// entries, and may come back short with a next cursor when it meets many
// of those. A cursor is bound to its tenant: another tenant's, or an
// edited one, is ErrInvalid.
func (s *boltStore) ActiveViews(ctx context.Context, tenant string, limit int, cursor string) ([]View, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkKeyPart("views tenant", tenant); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	prefix := indexKey(nil, tenant)
	binding := queryBinding([]string{tenant})
	var bound []byte
	if cursor != "" {
		pos, err := s.readCursor(cursorViews, binding, cursor)
		if err != nil {
			return nil, "", fmt.Errorf("active views of tenant %s: %w", tenant, err)
		}
		if len(pos) <= 8 {
			return nil, "", invalid("active views of tenant %s: cursor position of %d bytes", tenant, len(pos))
		}
		bound = append(bytes.Clone(prefix), pos...)
	}
	now := s.now()
	nowKey := timeKey(now)
	var out []View
	var next []byte
	err := s.read(func(tx *bbolt.Tx) error {
		viewsB := tx.Bucket([]byte(bucketViews))
		c := tx.Bucket([]byte(bucketViewsByTenant)).Cursor()
		scanned := 0
		var last []byte
		for k, end := seekLastUnder(c, prefix, bound); k != nil; k, end = c.Prev() {
			if !bytes.HasPrefix(k, prefix) {
				break
			}
			if scanned == s.pageScan || len(out) == limit {
				next = bytes.Clone(last[len(prefix):])
				break
			}
			scanned++
			last = k
			if len(k) <= len(prefix)+8 || len(end) != 8 {
				return fmt.Errorf("views_by_tenant: malformed entry %x", k)
			}
			if bytes.Compare(end, nowKey[:]) <= 0 {
				continue // expired or revoked
			}
			id := k[len(prefix)+8:]
			data := viewsB.Get(id)
			if data == nil {
				return fmt.Errorf("views_by_tenant: no view %q", id)
			}
			var v View
			if err := json.Unmarshal(data, &v); err != nil {
				return fmt.Errorf("view %q: %w", id, err)
			}
			if v.Expired(now) {
				continue
			}
			out = append(out, v)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: active views of tenant %s: %w", tenant, err)
	}
	if next == nil {
		return out, "", nil
	}
	return out, s.makeCursor(cursorViews, binding, next), nil
}
