package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"
)

// Bounds of the texts of API keys and triggers.
const (
	// maxRecordName bounds the name an admin gives a key or a trigger.
	maxRecordName = 200
	// MaxTriggerText bounds the text a trigger asks the agent; the runs
	// API takes no more either.
	MaxTriggerText = 8 << 10
	// maxCronText bounds a trigger's cron expression and time zone.
	maxCronText = 256
	// maxTriggerNote bounds a trigger's last error and paused reason.
	maxTriggerNote = 1024
)

// APIKey is a tenant's key for the runs API, scoped to one agent. The
// store keeps only Hash, the SHA-256 of the secret, never the secret.
type APIKey struct {
	ID       string `json:"id"`
	TenantID string `json:"tenantId"`
	AgentID  string `json:"agentId"`
	Name     string `json:"name"`
	// Hash is the hex SHA-256 of the key's secret.
	Hash       string    `json:"hash"`
	CreatedBy  string    `json:"createdBy"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt,omitzero"`
	RevokedBy  string    `json:"revokedBy,omitempty"`
	RevokedAt  time.Time `json:"revokedAt,omitzero"`
}

// Revoked reports whether the key was revoked.
func (k APIKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// Trigger is a scheduled run of an agent without a person: at each due
// time of Cron in TimeZone, Text is asked and the answer posted into
// ConversationID (a conversation of the tenant where the app is
// installed). Version counts the changes: the store sets it.
type Trigger struct {
	ID             string    `json:"id"`
	TenantID       string    `json:"tenantId"`
	Name           string    `json:"name"`
	AgentID        string    `json:"agentId"`
	Cron           string    `json:"cron"`
	TimeZone       string    `json:"timeZone"`
	Text           string    `json:"text"`
	ConversationID string    `json:"conversationId"`
	CreatedBy      string    `json:"createdBy"`
	CreatedAt      time.Time `json:"createdAt"`
	// Paused triggers are not run; PausedReason says why (an admin's
	// pause, or the app removed from the conversation).
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"pausedReason,omitempty"`
	PausedBy     string    `json:"pausedBy,omitempty"`
	PausedAt     time.Time `json:"pausedAt,omitzero"`
	// LastDue is the due time last claimed for a run, or when the
	// trigger was created or resumed: the next run is the first due time
	// after it. It is stored before the run starts.
	LastDue time.Time `json:"lastDue"`
	// LastRunAt, LastRunID, LastResult ("ok", "failed") and LastError
	// describe the last run.
	LastRunAt  time.Time `json:"lastRunAt,omitzero"`
	LastRunID  string    `json:"lastRunId,omitempty"`
	LastResult string    `json:"lastResult,omitempty"`
	LastError  string    `json:"lastError,omitempty"`
	Version    uint64    `json:"version"`
}

// checkAPIKey checks a key record before it is stored.
func checkAPIKey(k APIKey) error {
	for _, p := range []struct{ what, v string }{{"key id", k.ID}, {"key tenant", k.TenantID}, {"key agent", k.AgentID}, {"key creator", k.CreatedBy}} {
		if err := checkKeyPart(p.what, p.v); err != nil {
			return err
		}
	}
	if err := checkText("key name", k.Name, maxRecordName); err != nil {
		return err
	}
	if len(k.Hash) != 64 {
		return invalid("key %s: hash of %d characters, want 64 hex digits", k.ID, len(k.Hash))
	}
	return nil
}

// PutAPIKey stores a new API key, with the audit records of its creation
// in the same commit. An id already stored (in any tenant) is ErrConflict;
// ids, agent and creator are checked as binding parts, the name is at most
// 200 bytes, the hash 64 hex digits (ErrInvalid otherwise). A zero
// CreatedAt is set from the store's clock.
func (s *boltStore) PutAPIKey(ctx context.Context, k APIKey, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k, value, prepared, err := s.prepareAPIKey(k, audit)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		ids := tx.Bucket([]byte(bucketAPIKeyIDs))
		if ids.Get([]byte(k.ID)) != nil {
			return fmt.Errorf("key id %s is taken: %w", k.ID, ErrConflict)
		}
		if err := ids.Put([]byte(k.ID), []byte(k.TenantID)); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketAPIKeys)).Put(indexKey([]byte(k.ID), k.TenantID), value); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put API key %s of tenant %s: %w", k.ID, k.TenantID, err)
	}
	return nil
}

// APIKey returns a key by its id alone, whatever its tenant: the runs API
// learns the tenant from the key. Unknown ids are ErrNotFound.
func (s *boltStore) APIKey(ctx context.Context, id string) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key id", id); err != nil {
		return APIKey{}, err
	}
	var k APIKey
	err := s.read(func(tx *bbolt.Tx) error {
		tenant := tx.Bucket([]byte(bucketAPIKeyIDs)).Get([]byte(id))
		if tenant == nil {
			return ErrNotFound
		}
		data := tx.Bucket([]byte(bucketAPIKeys)).Get(indexKey([]byte(id), string(tenant)))
		if data == nil {
			return fmt.Errorf("api_key_ids names tenant %q without its key", tenant)
		}
		return json.Unmarshal(data, &k)
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("store: API key %.128s: %w", id, err)
	}
	return k, nil
}

// APIKeys returns the tenant's keys, revoked ones too, newest first.
func (s *boltStore) APIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	out, err := listTenant[APIKey](ctx, s, bucketAPIKeys, "API keys", tenant)
	slices.SortStableFunc(out, func(a, b APIKey) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, err
}

// updateAPIKey changes one key of tenant in a write, with the audit
// records audit makes of the key before and after the change.
func (s *boltStore) updateAPIKey(ctx context.Context, tenant, id string, change func(*APIKey) error, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key tenant", tenant); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key id", id); err != nil {
		return APIKey{}, err
	}
	key := indexKey([]byte(id), tenant)
	var after APIKey
	apply := func(tx *bbolt.Tx) error {
		var err error
		after, err = changeAudited(s, tx.Bucket([]byte(bucketAPIKeys)), tx, key, tenant, func(_ APIKey, k *APIKey) error {
			if err := change(k); err != nil {
				return err
			}
			return checkAPIKey(*k)
		}, audit)
		return err
	}
	if err := s.write(ctx, apply); err != nil {
		return APIKey{}, fmt.Errorf("store: API key %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// changeAudited reads the record under key in b, lets change edit a copy
// (given the record as stored, to keep what may not change) and check it,
// and stores the copy with its audit records (putAudited). A missing
// record is ErrNotFound. It runs inside a write, which may run it more
// than once: change and audit must only compute.
func changeAudited[T any](s *boltStore, b *bbolt.Bucket, tx *bbolt.Tx, key []byte, tenant string, change func(before T, after *T) error, audit func(before, after T) []AuditRecord) (T, error) {
	var before, after T
	data := b.Get(key)
	if data == nil {
		return after, ErrNotFound
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
	return after, putAudited(s, tx, b, key, tenant, before, after, audit)
}

// putAudited stores after under key in b, with the audit records made of
// the record before and after the change, checked as tenant's. It runs
// inside a write, which may run it more than once: audit must only build
// records.
func putAudited[T any](s *boltStore, tx *bbolt.Tx, b *bbolt.Bucket, key []byte, tenant string, before, after T, audit func(before, after T) []AuditRecord) error {
	value, err := json.Marshal(after)
	if err != nil {
		return err
	}
	if err := b.Put(key, value); err != nil {
		return err
	}
	if audit == nil {
		return nil
	}
	prepared, err := s.prepareTenantAudit(tenant, audit(before, after))
	if err != nil {
		return err
	}
	return appendAudit(tx, prepared)
}

// RevokeAPIKey revokes a key of tenant for good, with the audit records
// audit makes of it before and after, in the same commit, and returns the
// revoked key. A key that is unknown or of another tenant is ErrNotFound;
// one revoked already is ErrConflict, and nothing is written.
func (s *boltStore) RevokeAPIKey(ctx context.Context, tenant, id, by string, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := checkKeyPart("revoked by", by); err != nil {
		return APIKey{}, err
	}
	return s.updateAPIKey(ctx, tenant, id, revokeKey(s.now(), by), audit)
}

// revokeKey is RevokeAPIKey's change of a stored key, on every backend: a
// key revoked already is ErrConflict.
func revokeKey(now time.Time, by string) func(*APIKey) error {
	return func(k *APIKey) error {
		if k.Revoked() {
			return fmt.Errorf("revoked already at %s: %w", k.RevokedAt.UTC().Format(time.RFC3339), ErrConflict)
		}
		k.RevokedAt, k.RevokedBy = now, by
		return nil
	}
}

// useKey is UseAPIKey's change of a stored key, on every backend: a
// revoked key is ErrConflict (it was revoked after the caller read it).
func useKey(at time.Time) func(*APIKey) error {
	return func(k *APIKey) error {
		if k.Revoked() {
			return fmt.Errorf("revoked at %s: %w", k.RevokedAt.UTC().Format(time.RFC3339), ErrConflict)
		}
		k.LastUsedAt = at
		return nil
	}
}

// UseAPIKey records that a key of tenant was used at at (its LastUsedAt),
// with the audit records of the use in the same commit. A revoked key is
// ErrConflict: it was revoked after the caller read it.
func (s *boltStore) UseAPIKey(ctx context.Context, tenant, id string, at time.Time, audit ...AuditRecord) error {
	_, err := s.updateAPIKey(ctx, tenant, id, useKey(at), func(APIKey, APIKey) []AuditRecord { return audit })
	return err
}

// listTenant decodes every record of bucket under tenant's prefix.
func listTenant[T any](ctx context.Context, s *boltStore, bucket, what, tenant string) ([]T, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart(what+" tenant", tenant); err != nil {
		return nil, err
	}
	prefix := indexKey(nil, tenant)
	var out []T
	err := s.read(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucket)).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var r T
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: %s of tenant %s: %w", what, tenant, err)
	}
	return out, nil
}

// checkTrigger checks a trigger record before it is stored.
func checkTrigger(t Trigger) error {
	for _, p := range []struct{ what, v string }{
		{"trigger id", t.ID}, {"trigger tenant", t.TenantID}, {"trigger agent", t.AgentID},
		{"trigger conversation", t.ConversationID}, {"trigger creator", t.CreatedBy},
	} {
		if err := checkKeyPart(p.what, p.v); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		what, v string
		limit   int
	}{
		{"trigger name", t.Name, maxRecordName}, {"trigger cron expression", t.Cron, maxCronText},
		{"trigger time zone", t.TimeZone, maxCronText}, {"trigger text", t.Text, MaxTriggerText},
		{"trigger paused reason", t.PausedReason, maxTriggerNote}, {"trigger paused by", t.PausedBy, maxIDLen},
		{"trigger last run", t.LastRunID, maxIDLen}, {"trigger last result", t.LastResult, maxIDLen},
		{"trigger last error", t.LastError, maxTriggerNote},
	} {
		if err := checkText(p.what, p.v, p.limit); err != nil {
			return err
		}
	}
	return nil
}

// triggerKey is a trigger's key in triggers/; convKey its entry in
// triggers_by_conversation/.
func triggerKey(tenant, id string) []byte { return indexKey([]byte(id), tenant) }
func convTriggerKey(tenant, conv, id string) []byte {
	return indexKey([]byte(id), tenant, conv)
}

// PutTrigger stores a new trigger, with the audit records of its creation
// in the same commit. An id already stored in the tenant is ErrConflict;
// ids are checked as binding parts, the name is at most 200 bytes, the
// text at most MaxTriggerText (ErrInvalid otherwise). A zero CreatedAt is
// set from the store's clock, and a zero LastDue to CreatedAt: the first
// run is the first due time after the trigger was made. The store does
// not parse the cron expression or the time zone; the caller does.
func (s *boltStore) PutTrigger(ctx context.Context, t Trigger, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t, value, prepared, err := s.prepareTrigger(t, audit)
	if err != nil {
		return err
	}
	key := triggerKey(t.TenantID, t.ID)
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketTriggers))
		if b.Get(key) != nil {
			return fmt.Errorf("trigger id %s is taken: %w", t.ID, ErrConflict)
		}
		if err := b.Put(key, value); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketTriggersByConv)).Put(convTriggerKey(t.TenantID, t.ConversationID, t.ID), []byte{}); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put trigger %s of tenant %s: %w", t.ID, t.TenantID, err)
	}
	return nil
}

// Trigger returns a trigger of tenant; ErrNotFound when it has none of
// that id.
func (s *boltStore) Trigger(ctx context.Context, tenant, id string) (Trigger, error) {
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return Trigger{}, err
	}
	t, err := getJSON[Trigger](ctx, s, bucketTriggers, "trigger", string(triggerKey(tenant, id)))
	if err != nil {
		return Trigger{}, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// Triggers returns the tenant's triggers, ordered by name.
func (s *boltStore) Triggers(ctx context.Context, tenant string) ([]Trigger, error) {
	out, err := listTenant[Trigger](ctx, s, bucketTriggers, "triggers", tenant)
	slices.SortStableFunc(out, func(a, b Trigger) int { return cmpStrings(a.Name, b.Name) })
	return out, err
}

func cmpStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ActiveTriggers returns every tenant's triggers that are not paused, for
// the scheduler. Triggers are few (an admin makes each), so it reads them
// all in one short transaction.
func (s *boltStore) ActiveTriggers(ctx context.Context) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Trigger
	err := s.read(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(bucketTriggers)).ForEach(func(k, v []byte) error {
			var t Trigger
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("trigger %q: %w", k, err)
			}
			if !t.Paused {
				out = append(out, t)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: active triggers: %w", err)
	}
	return out, nil
}

// UpdateTrigger changes a trigger of tenant in one commit: change edits
// the stored record (returning an error writes nothing, and the error is
// returned wrapped), and audit, when not nil, makes the audit records of
// the change from the record before and after it, written in the same
// commit. Both may run more than once and must only compute. The id,
// tenant, conversation and creator cannot change; Version goes up by one.
// An unknown trigger is ErrNotFound. It returns the trigger as stored.
//
// The scheduler claims a due time with it (compare LastDue, set the new
// one) before it starts the run, so that the claim is on disk first and a
// restart never runs that due time again.
func (s *boltStore) UpdateTrigger(ctx context.Context, tenant, id string, change func(*Trigger) error, audit func(before, after Trigger) []AuditRecord) (Trigger, error) {
	if err := ctx.Err(); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return Trigger{}, err
	}
	key := triggerKey(tenant, id)
	var after Trigger
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		var err error
		after, err = changeAudited(s, tx.Bucket([]byte(bucketTriggers)), tx, key, tenant, func(before Trigger, t *Trigger) error {
			if err := change(t); err != nil {
				return err
			}
			t.ID, t.TenantID, t.ConversationID, t.CreatedBy, t.CreatedAt = before.ID, before.TenantID, before.ConversationID, before.CreatedBy, before.CreatedAt
			t.Version = before.Version + 1
			return checkTrigger(*t)
		}, audit)
		return err
	})
	if err != nil {
		return Trigger{}, fmt.Errorf("store: update trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// DeleteTrigger deletes a trigger of tenant, with the audit records audit
// makes of it in the same commit. An unknown trigger is ErrNotFound.
func (s *boltStore) DeleteTrigger(ctx context.Context, tenant, id string, audit func(before Trigger) []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKeyPart("trigger tenant", tenant); err != nil {
		return err
	}
	if err := checkKeyPart("trigger id", id); err != nil {
		return err
	}
	key := triggerKey(tenant, id)
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(bucketTriggers))
		data := b.Get(key)
		if data == nil {
			return ErrNotFound
		}
		var before Trigger
		if err := json.Unmarshal(data, &before); err != nil {
			return fmt.Errorf("stored record: %w", err)
		}
		if err := b.Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket([]byte(bucketTriggersByConv)).Delete(convTriggerKey(tenant, before.ConversationID, id)); err != nil {
			return err
		}
		if audit == nil {
			return nil
		}
		prepared, err := s.prepareTenantAudit(tenant, audit(before))
		if err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: delete trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// checkRemoveConversation is what RemoveConversation checks of its input
// on every backend before it writes anything.
func checkRemoveConversation(key, tenant, conversationID, reason string) error {
	if err := checkID("conversation", key); err != nil {
		return err
	}
	if err := checkKeyPart("conversation tenant", tenant); err != nil {
		return err
	}
	if err := checkKeyPart("conversation id", conversationID); err != nil {
		return err
	}
	return checkText("paused reason", reason, maxTriggerNote)
}

// RemoveConversation forgets that the app is in a conversation of tenant
// (the reference under key) and pauses, with reason, every active trigger
// that posts into it, in one commit with the audit records audit makes of
// the triggers it paused (given before and after each). It returns the
// triggers paused. The app was uninstalled there, or the Bot Connector
// refused a send: retrying would fail the same way.
//
// A removal happens once: when no reference is stored under key (it was
// never kept, or an earlier removal took it), nothing is written, audit is
// not called, and the error wraps ErrNotFound. Teams announces one
// uninstall twice (an installationUpdate and a conversationUpdate), and a
// send refused with 403 may race either; whichever comes second finds the
// reference gone inside the same transaction that would write its record.
func (s *boltStore) RemoveConversation(ctx context.Context, key, tenant, conversationID, reason string, audit func(paused [][2]Trigger) []AuditRecord) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkRemoveConversation(key, tenant, conversationID, reason); err != nil {
		return nil, err
	}
	now := s.now()
	var paused []Trigger
	err := s.write(ctx, func(tx *bbolt.Tx) error {
		paused = paused[:0]
		k := []byte(key)
		convs := tx.Bucket([]byte(bucketConversations))
		if convs.Get(k) == nil {
			return fmt.Errorf("no conversation reference: %w", ErrNotFound)
		}
		if err := unindexConversation(tx, k); err != nil {
			return err
		}
		if err := convs.Delete(k); err != nil {
			return err
		}
		b := tx.Bucket([]byte(bucketTriggers))
		prefix := indexKey(nil, tenant, conversationID)
		var ids [][]byte
		c := tx.Bucket([]byte(bucketTriggersByConv)).Cursor()
		for ck, _ := c.Seek(prefix); ck != nil && bytes.HasPrefix(ck, prefix); ck, _ = c.Next() {
			ids = append(ids, bytes.Clone(ck[len(prefix):]))
		}
		var pairs [][2]Trigger
		for _, id := range ids {
			tk := triggerKey(tenant, string(id))
			data := b.Get(tk)
			if data == nil {
				continue
			}
			var before Trigger
			if err := json.Unmarshal(data, &before); err != nil {
				return fmt.Errorf("trigger %q: %w", id, err)
			}
			if before.Paused {
				continue
			}
			after := before
			after.Paused, after.PausedReason, after.PausedBy, after.PausedAt = true, reason, "", now
			after.Version++
			if err := putAudited[Trigger](s, tx, b, tk, tenant, before, after, nil); err != nil {
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
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return nil, fmt.Errorf("store: remove conversation %s: %w", key, err)
	}
	return paused, nil
}
