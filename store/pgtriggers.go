package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// PutTrigger is Store.PutTrigger on PostgreSQL.
func (s *pgStore) PutTrigger(ctx context.Context, t Trigger, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, value, prepared, err := s.prepareTrigger(t, audit)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO triggers (tenant, id, conversation_id, paused, data) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT DO NOTHING`, t.TenantID, t.ID, t.ConversationID, t.Paused, value)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("trigger id %s is taken: %w", t.ID, ErrConflict)
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put trigger %s of tenant %s: %w", t.ID, t.TenantID, err)
	}
	return nil
}

// Trigger is Store.Trigger on PostgreSQL.
func (s *pgStore) Trigger(ctx context.Context, tenant, id string) (Trigger, error) {
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return Trigger{}, err
	}
	t, err := pgGetJSON[Trigger](ctx, s, "trigger", id, `SELECT data FROM triggers WHERE tenant = $1 AND id = $2`, tenant, id)
	if err != nil {
		return Trigger{}, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// Triggers is Store.Triggers on PostgreSQL.
func (s *pgStore) Triggers(ctx context.Context, tenant string) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("triggers tenant", tenant); err != nil {
		return nil, err
	}
	out, err := pgList[Trigger](ctx, s, `SELECT data FROM triggers WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: triggers of tenant %s: %w", tenant, err)
	}
	slices.SortStableFunc(out, func(a, b Trigger) int { return cmpStrings(a.Name, b.Name) })
	return out, nil
}

// ActiveTriggers is Store.ActiveTriggers on PostgreSQL.
func (s *pgStore) ActiveTriggers(ctx context.Context) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out, err := pgList[Trigger](ctx, s, `SELECT data FROM triggers WHERE NOT paused ORDER BY tenant, id`)
	if err != nil {
		return nil, fmt.Errorf("store: active triggers: %w", err)
	}
	return out, nil
}

// UpdateTrigger is Store.UpdateTrigger on PostgreSQL. The trigger's row
// is locked while change runs, so that of two replicas claiming the same
// due time the second sees the first's LastDue; and a LastDue that moves
// is inserted into trigger_claims, whose key a second claim of the same
// due time conflicts with (ErrConflict), whatever change decided.
func (s *pgStore) UpdateTrigger(ctx context.Context, tenant, id string, change func(*Trigger) error, audit func(before, after Trigger) []AuditRecord) (Trigger, error) {
	if err := ctx.Err(); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return Trigger{}, err
	}
	var after Trigger
	err := s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var claimed bool
		var err error
		after, err = pgChangeAudited(ctx, s, tx, tenant, `SELECT data FROM triggers WHERE tenant = $1 AND id = $2 FOR UPDATE`, []any{tenant, id},
			func(before Trigger, t *Trigger) error {
				if err := change(t); err != nil {
					return err
				}
				t.ID, t.TenantID, t.ConversationID, t.CreatedBy, t.CreatedAt = before.ID, before.TenantID, before.ConversationID, before.CreatedBy, before.CreatedAt
				t.Version = before.Version + 1
				claimed = t.LastDue.After(before.LastDue)
				return checkTrigger(*t)
			}, audit, func(value []byte, t Trigger) error {
				_, err := tx.Exec(ctx, `UPDATE triggers SET data = $3, paused = $4 WHERE tenant = $1 AND id = $2`, tenant, id, value, t.Paused)
				return err
			})
		if err != nil || !claimed {
			return err
		}
		due := ns(after.LastDue)
		tag, err := tx.Exec(ctx, `INSERT INTO trigger_claims (tenant, id, due_ns) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, tenant, id, due)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("due time %s claimed already: %w", after.LastDue.UTC().Format(time.RFC3339), ErrConflict)
		}
		// Only the latest claim is needed to refuse it twice.
		_, err = tx.Exec(ctx, `DELETE FROM trigger_claims WHERE tenant = $1 AND id = $2 AND due_ns < $3`, tenant, id, due)
		return err
	})
	if err != nil {
		return Trigger{}, fmt.Errorf("store: update trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// DeleteTrigger is Store.DeleteTrigger on PostgreSQL.
func (s *pgStore) DeleteTrigger(ctx context.Context, tenant, id string, audit func(before Trigger) []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return err
	}
	err := s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var data []byte
		err := tx.QueryRow(ctx, `DELETE FROM triggers WHERE tenant = $1 AND id = $2 RETURNING data`, tenant, id).Scan(&data)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		var before Trigger
		if err := json.Unmarshal(data, &before); err != nil {
			return fmt.Errorf("stored record: %w", err)
		}
		if audit == nil {
			return nil
		}
		prepared, err := s.prepareTenantAudit(tenant, audit(before))
		if err != nil {
			return err
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: delete trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// RemoveConversation is Store.RemoveConversation on PostgreSQL.
func (s *pgStore) RemoveConversation(ctx context.Context, key, tenant, conversationID, reason string, audit func(paused [][2]Trigger) []AuditRecord) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRemoveConversation(key, tenant, conversationID, reason); err != nil {
		return nil, err
	}
	now := s.now()
	var paused []Trigger
	err := s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		paused = paused[:0]
		// Of two removals at once, the second waits on the row's lock and
		// then deletes nothing.
		tag, err := tx.Exec(ctx, `DELETE FROM conversations WHERE key = $1`, []byte(key))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("no conversation reference: %w", ErrNotFound)
		}
		rows, err := tx.Query(ctx, `SELECT data FROM triggers WHERE tenant = $1 AND conversation_id = $2 ORDER BY id FOR UPDATE`, tenant, conversationID)
		if err != nil {
			return err
		}
		var stored []Trigger
		for rows.Next() {
			var data []byte
			if err := rows.Scan(&data); err != nil {
				rows.Close()
				return err
			}
			var t Trigger
			if err := json.Unmarshal(data, &t); err != nil {
				rows.Close()
				return fmt.Errorf("trigger: %w", err)
			}
			stored = append(stored, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		var pairs [][2]Trigger
		for _, before := range stored {
			if before.Paused {
				continue
			}
			after := before
			after.Paused, after.PausedReason, after.PausedBy, after.PausedAt = true, reason, "", now
			after.Version++
			value, err := json.Marshal(after)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE triggers SET data = $3, paused = true WHERE tenant = $1 AND id = $2`, tenant, after.ID, value); err != nil {
				return err
			}
			pairs = append(pairs, [2]Trigger{before, after})
			paused = append(paused, after)
		}
		if audit == nil {
			return nil
		}
		prepared, err := s.prepareTenantAudit(tenant, audit(pairs))
		if err != nil {
			return err
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return nil, fmt.Errorf("store: remove conversation %s: %w", key, err)
	}
	return paused, nil
}
