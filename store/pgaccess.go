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

// PutBinding is Store.PutBinding on PostgreSQL: the insert of a new
// binding conflicts with one stored already, which is then only given the
// new display name.
func (s *pgStore) PutBinding(ctx context.Context, b Binding, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, _, name, value, prepared, err := s.prepareBinding(b, audit)
	if err != nil {
		return err
	}
	keyArgs := []any{b.TenantID, b.AgentID, b.Subject, b.Kind, b.Role}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO bindings (tenant, agent, subject, kind, role, data) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT DO NOTHING`, append(keyArgs, value)...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var old []byte
			if err := tx.QueryRow(ctx, `SELECT data FROM bindings WHERE tenant = $1 AND agent = $2 AND subject = $3 AND kind = $4 AND role = $5 FOR UPDATE`,
				keyArgs...).Scan(&old); err != nil {
				return err
			}
			var kept Binding
			if err := json.Unmarshal(old, &kept); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			kept.DisplayName = b.DisplayName
			v, err := json.Marshal(kept)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE bindings SET data = $6 WHERE tenant = $1 AND agent = $2 AND subject = $3 AND kind = $4 AND role = $5`,
				append(keyArgs, v)...); err != nil {
				return err
			}
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put binding %s: %w", name, err)
	}
	return nil
}

// DeleteBinding is Store.DeleteBinding on PostgreSQL.
func (s *pgStore) DeleteBinding(ctx context.Context, tenant, agent, kind, subject, role string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	_, name, err := checkBindingKey(tenant, agent, kind, subject, role)
	if err != nil {
		return err
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM bindings WHERE tenant = $1 AND agent = $2 AND subject = $3 AND kind = $4 AND role = $5`,
			tenant, agent, subject, kind, role)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: delete binding %s: %w", name, err)
	}
	return nil
}

// Bindings is Store.Bindings on PostgreSQL.
func (s *pgStore) Bindings(ctx context.Context, tenant, agent string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("bindings tenant", tenant); err != nil {
		return nil, err
	}
	var out []Binding
	var err error
	if agent == "" {
		out, err = pgList[Binding](ctx, s, `SELECT data FROM bindings WHERE tenant = $1 ORDER BY agent, subject, kind, role`, tenant)
	} else {
		if err := checkKeyPart("bindings agent", agent); err != nil {
			return nil, err
		}
		out, err = pgList[Binding](ctx, s, `SELECT data FROM bindings WHERE tenant = $1 AND agent = $2 ORDER BY subject, kind, role`, tenant, agent)
	}
	if err != nil {
		return nil, fmt.Errorf("store: bindings of agent %q of tenant %s: %w", agent, tenant, err)
	}
	return out, nil
}

// BindingsFor is Store.BindingsFor on PostgreSQL: one indexed query for
// the agent and one for AllAgents.
func (s *pgStore) BindingsFor(ctx context.Context, tenant, agent string, subjects []string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkBindingsFor(tenant, agent, subjects); err != nil {
		return nil, err
	}
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := sortedUnique(subjects)
	agents := []string{agent, AllAgents}
	if agent == AllAgents {
		agents = agents[:1]
	}
	var out []Binding
	for _, a := range agents {
		got, err := pgList[Binding](ctx, s, `SELECT data FROM bindings WHERE tenant = $1 AND agent = $2 AND subject = ANY($3)
			ORDER BY subject, kind, role`, tenant, a, subs)
		if err != nil {
			return nil, fmt.Errorf("store: bindings for agent %s of tenant %s: %w", agent, tenant, err)
		}
		out = append(out, got...)
	}
	return out, nil
}

// TenantSettings is Store.TenantSettings on PostgreSQL.
func (s *pgStore) TenantSettings(ctx context.Context, tenant string) (TenantSettings, error) {
	if err := checkKeyPart("settings tenant", tenant); err != nil {
		return TenantSettings{}, err
	}
	ts, err := pgGetJSON[TenantSettings](ctx, s, "settings of tenant", tenant, `SELECT data FROM tenant_settings WHERE tenant = $1`, tenant)
	if errors.Is(err, ErrNotFound) {
		return defaultTenantSettings(tenant), nil
	}
	if err != nil {
		return TenantSettings{}, fmt.Errorf("store: %w", err)
	}
	return ts, nil
}

// pgPutVersioned stores value as the record of tenant in table if the
// stored one is at wantVersion (none stored: 0), returning the stored
// record's data (nil if none). Of two replicas putting over the same
// version, the second finds the row locked, then moved on, or its insert
// conflicting: ErrConflict either way.
func pgPutVersioned(ctx context.Context, tx pgx.Tx, table, tenant string, wantVersion uint64, value []byte) ([]byte, error) {
	var old []byte
	var version uint64
	err := tx.QueryRow(ctx, `SELECT data, version FROM `+table+` WHERE tenant = $1 FOR UPDATE`, tenant).Scan(&old, &version)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		if wantVersion != 0 {
			return nil, fmt.Errorf("stored at version 0, not %d: %w", wantVersion, ErrConflict)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO `+table+` (tenant, version, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, tenant, wantVersion+1, value)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 0 {
			return nil, fmt.Errorf("stored meanwhile, not at version %d: %w", wantVersion, ErrConflict)
		}
		return nil, nil
	case err != nil:
		return nil, err
	}
	if version != wantVersion {
		return old, fmt.Errorf("stored at version %d, not %d: %w", version, wantVersion, ErrConflict)
	}
	_, err = tx.Exec(ctx, `UPDATE `+table+` SET version = $2, data = $3 WHERE tenant = $1`, tenant, wantVersion+1, value)
	return old, err
}

// PutTenantSettings is Store.PutTenantSettings on PostgreSQL.
func (s *pgStore) PutTenantSettings(ctx context.Context, ts TenantSettings, wantVersion uint64, audit ...AuditRecord) (prev TenantSettings, err error) {
	if err := ctx.Err(); err != nil {
		return TenantSettings{}, err
	}
	ts, value, prepared, err := s.prepareTenantSettings(ts, wantVersion, audit)
	if err != nil {
		return TenantSettings{}, err
	}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		prev = defaultTenantSettings(ts.TenantID)
		old, err := pgPutVersioned(ctx, tx, "tenant_settings", ts.TenantID, wantVersion, value)
		if err != nil {
			return err
		}
		if old != nil {
			var stored TenantSettings
			if err := json.Unmarshal(old, &stored); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			prev = stored
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return TenantSettings{}, fmt.Errorf("store: put settings of tenant %s: %w", ts.TenantID, err)
	}
	return prev, nil
}

// PolicySet is Store.PolicySet on PostgreSQL.
func (s *pgStore) PolicySet(ctx context.Context, tenant string) (PolicySet, error) {
	if err := checkKeyPart("policy set tenant", tenant); err != nil {
		return PolicySet{}, err
	}
	p, err := pgGetJSON[PolicySet](ctx, s, "policy set of tenant", tenant, `SELECT data FROM policy_sets WHERE tenant = $1`, tenant)
	if err != nil {
		return PolicySet{}, fmt.Errorf("store: %w", err)
	}
	return p, nil
}

// PutPolicySet is Store.PutPolicySet on PostgreSQL.
func (s *pgStore) PutPolicySet(ctx context.Context, p PolicySet, wantVersion uint64, audit ...AuditRecord) (prev PolicySet, err error) {
	if err := ctx.Err(); err != nil {
		return PolicySet{}, err
	}
	p, value, prepared, err := s.preparePolicySet(p, wantVersion, audit)
	if err != nil {
		return PolicySet{}, err
	}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		prev = PolicySet{TenantID: p.TenantID}
		old, err := pgPutVersioned(ctx, tx, "policy_sets", p.TenantID, wantVersion, value)
		if err != nil {
			return err
		}
		if old != nil {
			var stored PolicySet
			if err := json.Unmarshal(old, &stored); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			prev = stored
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return PolicySet{}, fmt.Errorf("store: put policy set of tenant %s: %w", p.TenantID, err)
	}
	return prev, nil
}

// PutAPIKey is Store.PutAPIKey on PostgreSQL: a taken id makes the insert
// conflict.
func (s *pgStore) PutAPIKey(ctx context.Context, k APIKey, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k, value, prepared, err := s.prepareAPIKey(k, audit)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO api_keys (id, tenant, revoked_ns, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
			k.ID, k.TenantID, revokedNS(k.RevokedAt), value)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("key id %s is taken: %w", k.ID, ErrConflict)
		}
		return pgAppendAudit(ctx, tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put API key %s of tenant %s: %w", k.ID, k.TenantID, err)
	}
	return nil
}

// revokedNS is the revoked_ns column of a key: NULL while it is not.
func revokedNS(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := ns(t)
	return &n
}

// APIKey is Store.APIKey on PostgreSQL.
func (s *pgStore) APIKey(ctx context.Context, id string) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key id", id); err != nil {
		return APIKey{}, err
	}
	k, err := pgGetJSON[APIKey](ctx, s, "API key", id, `SELECT data FROM api_keys WHERE id = $1`, id)
	if err != nil {
		return APIKey{}, fmt.Errorf("store: %w", err)
	}
	return k, nil
}

// APIKeys is Store.APIKeys on PostgreSQL.
func (s *pgStore) APIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("API keys tenant", tenant); err != nil {
		return nil, err
	}
	out, err := pgList[APIKey](ctx, s, `SELECT data FROM api_keys WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("store: API keys of tenant %s: %w", tenant, err)
	}
	slices.SortStableFunc(out, func(a, b APIKey) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// pgChangeAudited is changeAudited on PostgreSQL: the row that sel
// selects (FOR UPDATE) is decoded twice, change edits one copy, put stores
// it, and the audit records are written with it. No row is ErrNotFound.
func pgChangeAudited[T any](ctx context.Context, s *pgStore, tx pgx.Tx, tenant string, sel string, args []any,
	change func(before T, after *T) error, audit func(before, after T) []AuditRecord, put func(value []byte, after T) error) (T, error) {
	var before, after T
	var data []byte
	err := tx.QueryRow(ctx, sel, args...).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return after, ErrNotFound
	}
	if err != nil {
		return after, err
	}
	if err := json.Unmarshal(data, &before); err != nil {
		return after, fmt.Errorf("stored record: %w", err)
	}
	if err := json.Unmarshal(data, &after); err != nil {
		return after, fmt.Errorf("stored record: %w", err)
	}
	if err := change(before, &after); err != nil {
		return after, err
	}
	value, err := json.Marshal(after)
	if err != nil {
		return after, err
	}
	if err := put(value, after); err != nil {
		return after, err
	}
	if audit == nil {
		return after, nil
	}
	prepared, err := s.prepareTenantAudit(tenant, audit(before, after))
	if err != nil {
		return after, err
	}
	return after, pgAppendAudit(ctx, tx, prepared)
}

// updateAPIKey is boltStore.updateAPIKey on PostgreSQL.
func (s *pgStore) updateAPIKey(ctx context.Context, tenant, id string, change func(*APIKey) error, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key tenant", tenant); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key id", id); err != nil {
		return APIKey{}, err
	}
	var after APIKey
	err := s.tx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		var err error
		after, err = pgChangeAudited(ctx, s, tx, tenant, `SELECT data FROM api_keys WHERE tenant = $1 AND id = $2 FOR UPDATE`, []any{tenant, id},
			func(_ APIKey, k *APIKey) error {
				if err := change(k); err != nil {
					return err
				}
				return checkAPIKey(*k)
			}, audit, func(value []byte, k APIKey) error {
				_, err := tx.Exec(ctx, `UPDATE api_keys SET data = $3, revoked_ns = $4 WHERE tenant = $1 AND id = $2`, tenant, id, value, revokedNS(k.RevokedAt))
				return err
			})
		return err
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("store: API key %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// RevokeAPIKey is Store.RevokeAPIKey on PostgreSQL.
func (s *pgStore) RevokeAPIKey(ctx context.Context, tenant, id, by string, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := checkKeyPart("revoked by", by); err != nil {
		return APIKey{}, err
	}
	return s.updateAPIKey(ctx, tenant, id, revokeKey(s.now(), by), audit)
}

// UseAPIKey is Store.UseAPIKey on PostgreSQL.
func (s *pgStore) UseAPIKey(ctx context.Context, tenant, id string, at time.Time, audit ...AuditRecord) error {
	_, err := s.updateAPIKey(ctx, tenant, id, useKey(at), func(APIKey, APIKey) []AuditRecord { return audit })
	return err
}
