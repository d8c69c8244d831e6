package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// AuditViewRevoke is the action of the audit record RevokeView writes when
// its caller gives none.
const AuditViewRevoke = "admin.view.revoke"

// View returns a view. It returns an error wrapping ErrNotFound for an
// unknown id, one wrapping ErrExpired (which also matches ErrNotFound)
// for a view whose ExpiresAt is at or before now, even if no sweep has
// deleted it yet, and one wrapping ErrRevoked (which also matches
// ErrExpired and ErrNotFound) for a revoked view.
func (s *Store) View(ctx context.Context, id string) (View, error) {
	v, err := s.storedView(ctx, id)
	if err != nil {
		return View{}, err
	}
	if v.Revoked() {
		return View{}, fmt.Errorf("view %s revoked at %s: %w", id, v.RevokedAt.UTC().Format(time.RFC3339), ErrRevoked)
	}
	if v.Expired(s.now()) {
		return View{}, fmt.Errorf("view %s expired at %s: %w", id, v.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
	}
	return v, nil
}

// ViewTenant returns the tenant of a view, expired or not (until a sweep
// removes it), so that a caller can answer another tenant's expired view
// exactly like one that does not exist, rather than tell it expired.
func (s *Store) ViewTenant(ctx context.Context, id string) (string, error) {
	v, err := s.storedView(ctx, id)
	return v.TenantID, err
}

// storedView reads a view as stored, expired or not.
func (s *Store) storedView(ctx context.Context, id string) (View, error) {
	return get(ctx, s, "view", id, reader.view)
}

// ViewHTML returns the HTML with the given SHA-256 (hex). It is kept while
// any stored view uses it; callers reach it through View, which refuses
// expired views.
func (s *Store) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
	return get(ctx, s, "view HTML", strings.ToLower(sha256hex), reader.html)
}

// ActiveViews returns one page of the views of tenant that can still be
// opened (not expired, not revoked), newest first (by CreatedAt), and the
// cursor of the next page: pass "" for the first, then each page's next,
// until it is "". A limit of zero or less means DefaultPageSize; more than
// MaxPageSize means MaxPageSize.
//
// It reads only the tenant's views, through an index whose entries say
// when each view stops, so that views that no longer can be opened are
// skipped without being read; a page reads at most 5,000 index entries,
// and may come back short with a next cursor when it meets many of those.
// A cursor is bound to its tenant: another tenant's, or an edited one, is
// ErrInvalid.
func (s *Store) ActiveViews(ctx context.Context, tenant string, limit int, cursor string) ([]View, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkKeyPart("views tenant", tenant); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	binding := queryBinding([]string{tenant})
	// The position is T(created) | id.
	var pos []byte
	if cursor != "" {
		var err error
		if pos, err = s.readCursor(cursorViews, binding, cursor); err != nil {
			return nil, "", fmt.Errorf("active views of tenant %s: %w", tenant, err)
		}
		if len(pos) <= 8 {
			return nil, "", invalid("active views of tenant %s: cursor position of %d bytes", tenant, len(pos))
		}
	}
	now := s.now()
	var out []View
	var next []byte
	err := s.be.read(ctx, func(r reader) error {
		var err error
		out, next, err = r.activeViews(tenant, now, pos, s.pageScan, limit)
		return err
	})
	if err != nil {
		return nil, "", fmt.Errorf("store: active views of tenant %s: %w", tenant, err)
	}
	if next == nil {
		return out, "", nil
	}
	return out, s.makeCursor(cursorViews, binding, next), nil
}

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
func (s *Store) RevokeView(ctx context.Context, tenant, id, by string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKeyPart("revoke tenant", tenant); err != nil {
		return err
	}
	if err := checkID("view", id); err != nil {
		return err
	}
	if err := checkKeyPart("revoked by", by); err != nil {
		return fmt.Errorf("revoke view %s: %w", id, err)
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return fmt.Errorf("revoke view %s: %w", id, err)
	}
	now := s.now()
	err = s.write(ctx, false, func(w writer) error {
		// The view is decoded and encoded again here, inside the
		// transaction: one record, on an admin's request.
		v, err := w.view(id)
		if err != nil {
			return err
		}
		switch {
		case v.TenantID != tenant:
			return ErrNotFound
		case v.Revoked():
			return fmt.Errorf("revoked at %s: %w", v.RevokedAt.UTC().Format(time.RFC3339), ErrRevoked)
		case v.Expired(now):
			return fmt.Errorf("expired at %s: %w", v.ExpiresAt.UTC().Format(time.RFC3339), ErrExpired)
		}
		old := v
		v.RevokedAt, v.RevokedBy = now, by
		enc, err := encode(v)
		if err != nil {
			return err
		}
		if err := w.putView(enc, nil, &old); err != nil {
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
		return w.appendAudit(recs)
	})
	if err != nil {
		return fmt.Errorf("store: revoke view %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}
