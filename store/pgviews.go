package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// SaveRun is Store.SaveRun on PostgreSQL: the run, its views, their HTML
// and the audit records in one transaction, each view and the run locked
// while it is read and replaced.
func (s *pgStore) SaveRun(ctx context.Context, run Run, views []NewView, audit []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op, err := s.prepareRun(run, views, audit)
	if err != nil {
		return err
	}
	if err := s.tx(ctx, op.pgApply); err != nil {
		return fmt.Errorf("store: save run %s: %w", run.ID, err)
	}
	return nil
}

// pgApply writes a prepared run in two round trips: one reads and locks
// the stored views (in id order, so that two saves never wait for each
// other crosswise) and run, one sends every write.
func (op *preparedRun) pgApply(ctx context.Context, tx pgx.Tx) error {
	ids := make([][]byte, len(op.views))
	for i, v := range op.views {
		ids[i] = v.id
	}
	reads := &pgx.Batch{}
	reads.Queue(`SELECT id, data FROM views WHERE id = ANY($1) ORDER BY id FOR UPDATE`, ids)
	reads.Queue(`SELECT data FROM runs WHERE id = $1 FOR UPDATE`, op.runID)
	res := tx.SendBatch(ctx, reads)
	old := map[string]viewHeader{}
	rows, err := res.Query()
	if err != nil {
		res.Close()
		return err
	}
	for rows.Next() {
		var id, data []byte
		if err := rows.Scan(&id, &data); err != nil {
			rows.Close()
			res.Close()
			return err
		}
		var hdr viewHeader
		if err := json.Unmarshal(data, &hdr); err != nil {
			rows.Close()
			res.Close()
			return fmt.Errorf("view %s: stored record: %w", id, err)
		}
		old[string(id)] = hdr
	}
	rows.Close()
	var oldRun []byte
	if err := res.QueryRow().Scan(&oldRun); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		res.Close()
		return err
	}
	if err := res.Close(); err != nil {
		return err
	}
	writes := &pgx.Batch{}
	var dropped []string // documents of replaced views
	for _, v := range op.views {
		if hdr, ok := old[string(v.id)]; ok {
			if !hdr.RevokedAt.IsZero() {
				// Saving it again must not bring it back.
				return fmt.Errorf("view %s: %w", v.id, ErrRevoked)
			}
			if !strings.EqualFold(hdr.HTMLSHA256, string(v.sha)) {
				dropped = append(dropped, strings.ToLower(hdr.HTMLSHA256))
			}
		}
		writes.Queue(`INSERT INTO html (sha, data) VALUES ($1, $2) ON CONFLICT (sha) DO NOTHING`, string(v.sha), v.html)
		writes.Queue(`INSERT INTO views (id, tenant, run_id, sha, created_ns, expires_ns, end_ns, revoked, data)
			VALUES ($1, $2, $3, $4, $5, $6, $6, false, $7)
			ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, run_id = excluded.run_id, sha = excluded.sha,
				created_ns = excluded.created_ns, expires_ns = excluded.expires_ns, end_ns = excluded.end_ns,
				revoked = false, data = excluded.data`,
			v.id, v.tenant, op.runID, string(v.sha), keyNS(v.created), keyNS(v.expiry), v.value)
	}
	value := op.run
	if oldRun != nil {
		// Saved again (a retry, or more views): keep the view ids it had,
		// as on bbolt.
		var prev struct {
			ViewIDs []string `json:"viewIds"`
		}
		if err := json.Unmarshal(oldRun, &prev); err != nil {
			return fmt.Errorf("run %s: stored record: %w", op.runID, err)
		}
		if ids := mergeIDs(prev.ViewIDs, op.rec.ViewIDs); len(ids) > len(op.rec.ViewIDs) {
			r := op.rec
			r.ViewIDs = ids
			if value, err = json.Marshal(r); err != nil {
				return fmt.Errorf("run %s: %w", op.runID, err)
			}
		}
	}
	writes.Queue(`INSERT INTO runs (id, tenant, created_ns, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (id) DO UPDATE SET tenant = excluded.tenant, created_ns = excluded.created_ns, data = excluded.data`,
		op.runID, op.tenant, keyNS(op.created), value)
	queueAudit(writes, op.audit)
	if err := tx.SendBatch(ctx, writes).Close(); err != nil {
		return fmt.Errorf("run %s: %w", op.runID, err)
	}
	for _, sha := range dropped {
		if err := pgDropHTMLIfUnused(ctx, tx, sha); err != nil {
			return err
		}
	}
	return nil
}

// pgDropHTMLIfUnused deletes the document sha if no view uses it, as a
// view replaced by another document leaves it. A save taking it into use
// at the same time keeps it: its lock makes the delete skip the row, or
// its commit makes the foreign key refuse the delete, which a savepoint
// takes back; the sweep looks again later.
func pgDropHTMLIfUnused(ctx context.Context, tx pgx.Tx, sha string) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return err
	}
	_, err = sp.Exec(ctx, `DELETE FROM html WHERE sha IN (
		SELECT h.sha FROM html h WHERE h.sha = $1 AND NOT EXISTS (SELECT 1 FROM views v WHERE v.sha = h.sha) FOR UPDATE SKIP LOCKED)`, sha)
	if isForeignKeyViolation(err) {
		return sp.Rollback(ctx)
	}
	if err != nil {
		return fmt.Errorf("html %s: %w", sha, err)
	}
	return sp.Commit(ctx)
}

// ViewTenant is Store.ViewTenant on PostgreSQL.
func (s *pgStore) ViewTenant(ctx context.Context, id string) (string, error) {
	if err := s.ready(ctx); err != nil {
		return "", err
	}
	var tenant string
	err := s.pool.QueryRow(ctx, `SELECT tenant FROM views WHERE id = $1`, []byte(id)).Scan(&tenant)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("view %.128s: %w", id, s.closedErr(err))
	}
	return tenant, nil
}

// View is Store.View on PostgreSQL.
func (s *pgStore) View(ctx context.Context, id string) (View, error) {
	v, err := pgGetJSON[View](ctx, s, "view", id, `SELECT data FROM views WHERE id = $1`, []byte(id))
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

// ViewHTML is Store.ViewHTML on PostgreSQL.
func (s *pgStore) ViewHTML(ctx context.Context, sha256hex string) ([]byte, error) {
	html, err := s.queryData(ctx, `SELECT data FROM html WHERE sha = $1`, strings.ToLower(sha256hex))
	if err != nil {
		return nil, fmt.Errorf("view HTML %.128s: %w", sha256hex, err)
	}
	return html, nil
}

// GetRun is Store.GetRun on PostgreSQL.
func (s *pgStore) GetRun(ctx context.Context, id string) (Run, error) {
	return pgGetJSON[Run](ctx, s, "run", id, `SELECT data FROM runs WHERE id = $1`, []byte(id))
}

// RecentRuns is Store.RecentRuns on PostgreSQL.
func (s *pgStore) RecentRuns(ctx context.Context, tenant string, limit int) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("runs tenant", tenant); err != nil {
		return nil, err
	}
	out, err := pgList[Run](ctx, s, `SELECT data FROM runs WHERE tenant = $1 ORDER BY created_ns DESC, id DESC LIMIT $2`, tenant, pageLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("store: recent runs of tenant %s: %w", tenant, err)
	}
	return out, nil
}

// RevokeView is Store.RevokeView on PostgreSQL.
func (s *pgStore) RevokeView(ctx context.Context, tenant, id, by string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	prepared, err := s.prepareRevokeView(tenant, id, by, audit)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, `SELECT data FROM views WHERE id = $1 FOR UPDATE`, []byte(id)).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
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
		if _, err := tx.Exec(ctx, `UPDATE views SET data = $2, end_ns = $3, revoked = true WHERE id = $1`, []byte(id), value, ns(now)); err != nil {
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
		return pgAppendAudit(ctx, tx, recs)
	})
	if err != nil {
		return fmt.Errorf("store: revoke view %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// ActiveViews is Store.ActiveViews on PostgreSQL. The views that can no
// longer be opened are left out by the query itself, so a page is short
// only at the end.
func (s *pgStore) ActiveViews(ctx context.Context, tenant string, limit int, cursor string) ([]View, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := checkKeyPart("views tenant", tenant); err != nil {
		return nil, "", err
	}
	limit = pageLimit(limit)
	binding := queryBinding([]string{tenant})
	// The position is T(created) | id, as on bbolt; none reads from the
	// newest view.
	posNS, posID := int64(1<<63-1), []byte(nil)
	if cursor != "" {
		pos, err := s.readCursor(cursorViews, binding, cursor)
		if err != nil {
			return nil, "", fmt.Errorf("active views of tenant %s: %w", tenant, err)
		}
		if len(pos) <= 8 {
			return nil, "", invalid("active views of tenant %s: cursor position of %d bytes", tenant, len(pos))
		}
		posNS, posID = keyNS([8]byte(pos[:8])), pos[8:]
	}
	now := s.now()
	if err := s.ready(ctx); err != nil {
		return nil, "", err
	}
	var rows pgx.Rows
	var err error
	if posID == nil {
		rows, err = s.pool.Query(ctx, `SELECT created_ns, id, data FROM views
			WHERE tenant = $1 AND end_ns > $2 ORDER BY created_ns DESC, id DESC LIMIT $3`, tenant, ns(now), limit+1)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT created_ns, id, data FROM views
			WHERE tenant = $1 AND end_ns > $2 AND (created_ns, id) < ($4, $5)
			ORDER BY created_ns DESC, id DESC LIMIT $3`, tenant, ns(now), limit+1, posNS, posID)
	}
	if err != nil {
		return nil, "", fmt.Errorf("store: active views of tenant %s: %w", tenant, s.closedErr(err))
	}
	defer rows.Close()
	var out []View
	var last, next []byte
	for rows.Next() {
		var created int64
		var id, data []byte
		if err := rows.Scan(&created, &id, &data); err != nil {
			return nil, "", fmt.Errorf("store: active views of tenant %s: %w", tenant, err)
		}
		if len(out) == limit {
			next = last
			break
		}
		var v View
		if err := json.Unmarshal(data, &v); err != nil {
			return nil, "", fmt.Errorf("store: active views of tenant %s: view %q: %w", tenant, id, err)
		}
		k := nsKey(created)
		last = append(k[:], id...)
		if v.Expired(now) {
			continue
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("store: active views of tenant %s: %w", tenant, s.closedErr(err))
	}
	if next == nil {
		return out, "", nil
	}
	return out, s.makeCursor(cursorViews, binding, next), nil
}

// Seen is Store.Seen on PostgreSQL: every replica reads the same rows.
func (s *pgStore) Seen(ctx context.Context, key string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkID("activity", key); err != nil {
		return false, err
	}
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	var seen bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM activities WHERE key = $1 AND expires_ns > $2)`, []byte(key), ns(s.now())).Scan(&seen)
	if err != nil {
		return false, fmt.Errorf("store: activity %.64q: %w", key, s.closedErr(err))
	}
	return seen, nil
}

// RecordArrival is Store.RecordArrival on PostgreSQL. It is committed at
// once: on bbolt it waits for the next write's commit, but a replica
// answering a retry of this activity reads what is committed now.
func (s *pgStore) RecordArrival(ctx context.Context, key string, window time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("activity", key); err != nil {
		return err
	}
	expires := ns(s.now().Add(window))
	_, err := s.exec1(ctx, `INSERT INTO activities (key, expires_ns) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET expires_ns = excluded.expires_ns`, []byte(key), expires)
	if err != nil {
		return fmt.Errorf("store: record activity %.64q: %w", key, err)
	}
	return nil
}

// PutConversation is Store.PutConversation on PostgreSQL.
func (s *pgStore) PutConversation(ctx context.Context, ref ConversationRef) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", ref.Key); err != nil {
		return err
	}
	if err := checkText("conversation tenant", ref.TenantID, maxIDLen); err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	if ref.UpdatedAt.IsZero() {
		ref.UpdatedAt = s.now()
	}
	value, err := json.Marshal(ref)
	if err != nil {
		return fmt.Errorf("conversation %s: %w", ref.Key, err)
	}
	_, err = s.exec1(ctx, `INSERT INTO conversations (key, tenant, data) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET tenant = excluded.tenant, data = excluded.data`, []byte(ref.Key), ref.TenantID, value)
	if err != nil {
		return fmt.Errorf("store: put conversation %s: %w", ref.Key, err)
	}
	return nil
}

// Conversation is Store.Conversation on PostgreSQL.
func (s *pgStore) Conversation(ctx context.Context, key string) (ConversationRef, error) {
	return pgGetJSON[ConversationRef](ctx, s, "conversation", key, `SELECT data FROM conversations WHERE key = $1`, []byte(key))
}

// DeleteConversation is Store.DeleteConversation on PostgreSQL.
func (s *pgStore) DeleteConversation(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("conversation", key); err != nil {
		return err
	}
	_, err := s.exec1(ctx, `DELETE FROM conversations WHERE key = $1`, []byte(key))
	if err != nil {
		return fmt.Errorf("store: delete conversation %s: %w", key, err)
	}
	return nil
}

// Conversations is Store.Conversations on PostgreSQL.
func (s *pgStore) Conversations(ctx context.Context, tenant string) ([]ConversationRef, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("conversations tenant", tenant); err != nil {
		return nil, err
	}
	out, err := pgList[ConversationRef](ctx, s, `SELECT data FROM conversations WHERE tenant = $1 ORDER BY key`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: conversations of tenant %s: %w", tenant, err)
	}
	return out, nil
}

// PutDelivery is Store.PutDelivery on PostgreSQL: the insert finds the
// run or writes nothing, and the foreign key keeps a sweep from deleting
// the run under it.
func (s *pgStore) PutDelivery(ctx context.Context, d Delivery) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkID("delivery run", d.RunID); err != nil {
		return err
	}
	if err := checkID("delivery conversation key", d.ConversationKey); err != nil {
		return err
	}
	if err := checkID("delivery conversation", d.ConversationID); err != nil {
		return err
	}
	switch n := len(d.ActivityIDs); {
	case n == 0:
		return invalid("delivery of run %s: no activity ids", d.RunID)
	case n > maxDeliveryIDs:
		return invalid("delivery of run %s: %d activity ids, at most %d", d.RunID, n, maxDeliveryIDs)
	}
	for _, id := range d.ActivityIDs {
		if err := checkID("delivered activity", id); err != nil {
			return fmt.Errorf("delivery of run %s: %w", d.RunID, err)
		}
	}
	if d.SentAt.IsZero() {
		d.SentAt = s.now()
	}
	value, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("delivery of run %s: %w", d.RunID, err)
	}
	tag, err := s.exec1(ctx, `INSERT INTO deliveries (run_id, data) SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM runs WHERE id = $1)
		ON CONFLICT (run_id) DO UPDATE SET data = excluded.data`, []byte(d.RunID), value)
	if isForeignKeyViolation(err) || err == nil && tag.RowsAffected() == 0 {
		// No run, or a sweep deleted it meanwhile.
		err = fmt.Errorf("run: %w", ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: put delivery of run %.128s: %w", d.RunID, err)
	}
	return nil
}

// Delivery is Store.Delivery on PostgreSQL.
func (s *pgStore) Delivery(ctx context.Context, runID string) (Delivery, error) {
	return pgGetJSON[Delivery](ctx, s, "delivery of run", runID, `SELECT data FROM deliveries WHERE run_id = $1`, []byte(runID))
}

// sortedUnique returns the strings sorted, each once.
func sortedUnique(v []string) []string {
	out := slices.Clone(v)
	slices.Sort(out)
	return slices.Compact(out)
}
