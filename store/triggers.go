package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
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

// check checks a key before it is stored.
func (k APIKey) check() error {
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
func (s *Store) PutAPIKey(ctx context.Context, k APIKey, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := k.check(); err != nil {
		return err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	enc, err := encode(k)
	if err != nil {
		return fmt.Errorf("key %s: %w", k.ID, err)
	}
	err = create(ctx, s, k.TenantID, "key id "+k.ID, enc, audit, func(r reader) error {
		_, err := r.apiKey(k.ID)
		return err
	}, writer.putAPIKey)
	if err != nil {
		return fmt.Errorf("store: put API key %s of tenant %s: %w", k.ID, k.TenantID, err)
	}
	return nil
}

// create stores enc, a new record of tenant, with its audit records in
// the same commit; a record stored under its key (stored finds it) is
// ErrConflict: the key is taken.
func create[T any](ctx context.Context, s *Store, tenant, key string, enc encoded[T], audit []AuditRecord,
	stored func(r reader) error, put func(w writer, rec encoded[T], old *T) error) error {
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return err
	}
	return s.write(ctx, false, func(w writer) error {
		switch err := stored(w); {
		case err == nil:
			return fmt.Errorf("%s is taken: %w", key, ErrConflict)
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err := put(w, enc, nil); err != nil {
			return err
		}
		return w.appendAudit(prepared)
	})
}

// APIKey returns a key by its id alone, whatever its tenant: the runs API
// learns the tenant from the key. Unknown ids are ErrNotFound.
func (s *Store) APIKey(ctx context.Context, id string) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyPart("key id", id); err != nil {
		return APIKey{}, err
	}
	k, err := get(ctx, s, "API key", id, reader.apiKey)
	if err != nil {
		return APIKey{}, fmt.Errorf("store: %w", err)
	}
	return k, nil
}

// APIKeys returns the tenant's keys, revoked ones too, newest first.
func (s *Store) APIKeys(ctx context.Context, tenant string) ([]APIKey, error) {
	out, err := list(ctx, s, "API keys", tenant, func(r reader) ([]APIKey, error) { return r.apiKeys(tenant) })
	slices.SortStableFunc(out, func(a, b APIKey) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, err
}

// RevokeAPIKey revokes a key of tenant for good, with the audit records
// audit makes of it before and after, in the same commit, and returns the
// revoked key. A key that is unknown or of another tenant is ErrNotFound;
// one revoked already is ErrConflict, and nothing is written.
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, id, by string, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := checkKeyPart("revoked by", by); err != nil {
		return APIKey{}, err
	}
	now := s.now()
	return s.updateAPIKey(ctx, tenant, id, func(k *APIKey) error {
		if k.Revoked() {
			return fmt.Errorf("revoked already at %s: %w", k.RevokedAt.UTC().Format(time.RFC3339), ErrConflict)
		}
		k.RevokedAt, k.RevokedBy = now, by
		return nil
	}, audit)
}

// UseAPIKey records that a key of tenant was used at at (its LastUsedAt),
// with the audit records of the use in the same commit. A revoked key is
// ErrConflict: it was revoked after the caller read it.
func (s *Store) UseAPIKey(ctx context.Context, tenant, id string, at time.Time, audit ...AuditRecord) error {
	_, err := s.updateAPIKey(ctx, tenant, id, func(k *APIKey) error {
		if k.Revoked() {
			return fmt.Errorf("revoked at %s: %w", k.RevokedAt.UTC().Format(time.RFC3339), ErrConflict)
		}
		k.LastUsedAt = at
		return nil
	}, func(APIKey, APIKey) []AuditRecord { return audit })
	return err
}

// updateAPIKey changes one key of tenant in a write, with the audit
// records audit makes of the key before and after the change. A key of
// another tenant is ErrNotFound, as an unknown one.
func (s *Store) updateAPIKey(ctx context.Context, tenant, id string, change func(*APIKey) error, audit func(before, after APIKey) []AuditRecord) (APIKey, error) {
	if err := ctx.Err(); err != nil {
		return APIKey{}, err
	}
	if err := checkKeyParts("key tenant", tenant, "key id", id); err != nil {
		return APIKey{}, err
	}
	var after APIKey
	err := s.write(ctx, false, func(w writer) error {
		before, err := w.apiKey(id)
		if err != nil {
			return err
		}
		if before.TenantID != tenant {
			return ErrNotFound
		}
		after = before
		if err := change(&after); err != nil {
			return err
		}
		if err := after.check(); err != nil {
			return err
		}
		enc, err := encode(after)
		if err != nil {
			return err
		}
		if err := w.putAPIKey(enc, &before); err != nil {
			return err
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, tenant, func() []AuditRecord { return audit(before, after) })
	})
	if err != nil {
		return APIKey{}, fmt.Errorf("store: API key %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// check checks a trigger before it is stored.
func (t Trigger) check() error {
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

// PutTrigger stores a new trigger, with the audit records of its creation
// in the same commit. An id already stored in the tenant is ErrConflict;
// ids are checked as binding parts, the name is at most 200 bytes, the
// text at most MaxTriggerText (ErrInvalid otherwise). A zero CreatedAt is
// set from the store's clock, and a zero LastDue to CreatedAt: the first
// run is the first due time after the trigger was made. The store does
// not parse the cron expression or the time zone; the caller does.
func (s *Store) PutTrigger(ctx context.Context, t Trigger, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	if t.LastDue.IsZero() {
		t.LastDue = t.CreatedAt
	}
	t.Version = 1
	enc, err := encode(t)
	if err != nil {
		return fmt.Errorf("trigger %s: %w", t.ID, err)
	}
	err = create(ctx, s, t.TenantID, "trigger id "+t.ID, enc, audit, func(r reader) error {
		_, err := r.trigger(t.TenantID, t.ID)
		return err
	}, writer.putTrigger)
	if err != nil {
		return fmt.Errorf("store: put trigger %s of tenant %s: %w", t.ID, t.TenantID, err)
	}
	return nil
}

// Trigger returns a trigger of tenant; ErrNotFound when it has none of
// that id.
func (s *Store) Trigger(ctx context.Context, tenant, id string) (Trigger, error) {
	if err := checkKeyParts("trigger tenant", tenant, "trigger id", id); err != nil {
		return Trigger{}, err
	}
	var t Trigger
	err := s.be.read(ctx, func(r reader) error {
		var err error
		t, err = r.trigger(tenant, id)
		return err
	})
	if err != nil {
		err = fmt.Errorf("trigger %.128s: %w", id, err)
	}
	if err != nil {
		return Trigger{}, fmt.Errorf("store: %w", err)
	}
	return t, nil
}

// Triggers returns the tenant's triggers, ordered by name.
func (s *Store) Triggers(ctx context.Context, tenant string) ([]Trigger, error) {
	out, err := list(ctx, s, "triggers", tenant, func(r reader) ([]Trigger, error) { return r.triggers(tenant, "") })
	slices.SortStableFunc(out, func(a, b Trigger) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// ActiveTriggers returns every tenant's triggers that are not paused, for
// the scheduler. Triggers are few (an admin makes each), so it reads them
// all in one short transaction.
func (s *Store) ActiveTriggers(ctx context.Context) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []Trigger
	err := s.be.read(ctx, func(r reader) error {
		all, err := r.triggers("", "")
		out = slices.DeleteFunc(all, func(t Trigger) bool { return t.Paused })
		return err
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
func (s *Store) UpdateTrigger(ctx context.Context, tenant, id string, change func(*Trigger) error, audit func(before, after Trigger) []AuditRecord) (Trigger, error) {
	if err := ctx.Err(); err != nil {
		return Trigger{}, err
	}
	if err := checkKeyParts("trigger tenant", tenant, "trigger id", id); err != nil {
		return Trigger{}, err
	}
	var after Trigger
	err := s.write(ctx, false, func(w writer) error {
		before, err := w.trigger(tenant, id)
		if err != nil {
			return err
		}
		after = before
		if err := change(&after); err != nil {
			return err
		}
		after.ID, after.TenantID, after.ConversationID, after.CreatedBy, after.CreatedAt = before.ID, before.TenantID, before.ConversationID, before.CreatedBy, before.CreatedAt
		after.Version = before.Version + 1
		if err := after.check(); err != nil {
			return err
		}
		enc, err := encode(after)
		if err != nil {
			return err
		}
		if err := w.putTrigger(enc, &before); err != nil {
			return err
		}
		if after.LastDue.After(before.LastDue) {
			if err := w.claimDue(after); err != nil {
				return err
			}
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, tenant, func() []AuditRecord { return audit(before, after) })
	})
	if err != nil {
		return Trigger{}, fmt.Errorf("store: update trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return after, nil
}

// DeleteTrigger deletes a trigger of tenant, with the audit records audit
// makes of it in the same commit. An unknown trigger is ErrNotFound.
func (s *Store) DeleteTrigger(ctx context.Context, tenant, id string, audit func(before Trigger) []AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKeyParts("trigger tenant", tenant, "trigger id", id); err != nil {
		return err
	}
	err := s.write(ctx, false, func(w writer) error {
		before, err := w.trigger(tenant, id)
		if err != nil {
			return err
		}
		if err := w.deleteTrigger(before); err != nil {
			return err
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, tenant, func() []AuditRecord { return audit(before) })
	})
	if err != nil {
		return fmt.Errorf("store: delete trigger %.128s of tenant %s: %w", id, tenant, err)
	}
	return nil
}

// RemoveConversation forgets that the app is in a conversation of tenant
// (the reference under key), clears its history as ClearHistory does
// (its threads' too, for a channel), and pauses, with reason, every
// active trigger that posts into it, in one commit with the audit records
// audit makes of the triggers it paused (given before and after each). It
// returns the triggers paused. The app was uninstalled there, or the Bot Connector
// refused a send: retrying would fail the same way.
//
// A removal happens once: when no reference is stored under key (it was
// never kept, or an earlier removal took it), nothing is written, audit is
// not called, and the error wraps ErrNotFound. Teams announces one
// uninstall twice (an installationUpdate and a conversationUpdate), and a
// send refused with 403 may race either; whichever comes second finds the
// reference gone inside the same transaction that would write its record.
func (s *Store) RemoveConversation(ctx context.Context, key, tenant, conversationID, reason string, audit func(paused [][2]Trigger) []AuditRecord) ([]Trigger, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID("conversation", key); err != nil {
		return nil, err
	}
	if err := checkKeyParts("conversation tenant", tenant, "conversation id", conversationID); err != nil {
		return nil, err
	}
	if err := checkText("paused reason", reason, maxTriggerNote); err != nil {
		return nil, err
	}
	now := s.now()
	var paused []Trigger
	err := s.write(ctx, false, func(w writer) error {
		paused = paused[:0]
		// Of two removals at once, the second finds the reference gone.
		if _, err := w.conversation(key); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("no conversation reference: %w", ErrNotFound)
		} else if err != nil {
			return err
		}
		if err := w.deleteConversation(key); err != nil {
			return err
		}
		if err := w.deleteTurns(tenant, conversationID, threadPrefix(conversationID), func(int) {}); err != nil {
			return err
		}
		stored, err := w.triggers(tenant, conversationID)
		if err != nil {
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
			enc, err := encode(after)
			if err != nil {
				return err
			}
			if err := w.putTrigger(enc, &before); err != nil {
				return err
			}
			pairs = append(pairs, [2]Trigger{before, after})
			paused = append(paused, after)
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, tenant, func() []AuditRecord { return audit(pairs) })
	})
	if err != nil {
		return nil, fmt.Errorf("store: remove conversation %s: %w", key, err)
	}
	return paused, nil
}
