package store

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The part of a write that is the same on every backend: the checks of its
// input, the defaults taken from the store's clock, the record's encoding
// and the preparation of its audit records. A backend then only stores
// what these return, so that both backends refuse and fill in alike.

// encodeWithAudit encodes v and prepares tenant's audit records.
func (s *base) encodeWithAudit(v any, tenant string, audit []AuditRecord) ([]byte, []preparedAudit, error) {
	value, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return nil, nil, err
	}
	return value, prepared, nil
}

// prepareTenantSettings is PutTenantSettings' preparation. The put
// succeeds only over wantVersion, so the new version is known here and the
// record is encoded outside the transaction.
func (s *base) prepareTenantSettings(ts TenantSettings, wantVersion uint64, audit []AuditRecord) (TenantSettings, []byte, []preparedAudit, error) {
	if err := checkTenantSettings(ts); err != nil {
		return ts, nil, nil, err
	}
	if ts.UpdatedAt.IsZero() {
		ts.UpdatedAt = s.now()
	}
	ts.Version = wantVersion + 1
	value, prepared, err := s.encodeWithAudit(ts, ts.TenantID, audit)
	if err != nil {
		return ts, nil, nil, fmt.Errorf("settings of tenant %s: %w", ts.TenantID, err)
	}
	return ts, value, prepared, nil
}

// preparePolicySet is PutPolicySet's preparation, as prepareTenantSettings.
func (s *base) preparePolicySet(p PolicySet, wantVersion uint64, audit []AuditRecord) (PolicySet, []byte, []preparedAudit, error) {
	if err := checkPolicySet(p); err != nil {
		return p, nil, nil, err
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = s.now()
	}
	p.Version = wantVersion + 1
	value, prepared, err := s.encodeWithAudit(p, p.TenantID, audit)
	if err != nil {
		return p, nil, nil, fmt.Errorf("policy set of tenant %s: %w", p.TenantID, err)
	}
	return p, value, prepared, nil
}

// prepareAPIKey is PutAPIKey's preparation: a zero CreatedAt is now.
func (s *base) prepareAPIKey(k APIKey, audit []AuditRecord) (APIKey, []byte, []preparedAudit, error) {
	if err := checkAPIKey(k); err != nil {
		return k, nil, nil, err
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = s.now()
	}
	value, prepared, err := s.encodeWithAudit(k, k.TenantID, audit)
	if err != nil {
		return k, nil, nil, fmt.Errorf("key %s: %w", k.ID, err)
	}
	return k, value, prepared, nil
}

// prepareTrigger is PutTrigger's preparation: a zero CreatedAt is now and
// a zero LastDue is CreatedAt, so the first run is the first due time
// after the trigger was made.
func (s *base) prepareTrigger(t Trigger, audit []AuditRecord) (Trigger, []byte, []preparedAudit, error) {
	if err := checkTrigger(t); err != nil {
		return t, nil, nil, err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	if t.LastDue.IsZero() {
		t.LastDue = t.CreatedAt
	}
	t.Version = 1
	value, prepared, err := s.encodeWithAudit(t, t.TenantID, audit)
	if err != nil {
		return t, nil, nil, fmt.Errorf("trigger %s: %w", t.ID, err)
	}
	return t, value, prepared, nil
}

// prepareRevokeView is RevokeView's preparation: the checks of its input
// and the audit records.
func (s *base) prepareRevokeView(tenant, id, by string, audit []AuditRecord) ([]preparedAudit, error) {
	if err := checkKeyPart("revoke tenant", tenant); err != nil {
		return nil, err
	}
	if err := checkID("view", id); err != nil {
		return nil, err
	}
	if err := checkKeyPart("revoked by", by); err != nil {
		return nil, fmt.Errorf("revoke view %s: %w", id, err)
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return nil, fmt.Errorf("revoke view %s: %w", id, err)
	}
	return prepared, nil
}

// checkBindingsFor is what BindingsFor checks of its input on every
// backend.
func checkBindingsFor(tenant, agent string, subjects []string) error {
	if err := checkKeyPart("bindings tenant", tenant); err != nil {
		return err
	}
	if err := checkKeyPart("the agent id", agent); err != nil {
		return err
	}
	if len(subjects) > maxBindingSubjects {
		return fmt.Errorf("bindings of agent %s of tenant %s: %w",
			agent, tenant, invalid("%d subjects, at most %d", len(subjects), maxBindingSubjects))
	}
	for _, sub := range subjects {
		if err := checkKeyPart("a subject", sub); err != nil {
			return fmt.Errorf("bindings of agent %s of tenant %s: %w", agent, tenant, err)
		}
	}
	return nil
}

// prepareBinding is PutBinding's preparation: it also returns the
// binding's key and its name for messages. A zero CreatedAt is now.
func (s *base) prepareBinding(b Binding, audit []AuditRecord) (Binding, []byte, string, []byte, []preparedAudit, error) {
	key, name, err := checkBindingKey(b.TenantID, b.AgentID, b.Kind, b.Subject, b.Role)
	if err != nil {
		return b, nil, "", nil, nil, err
	}
	if err := errors.Join(
		checkText("the display name", b.DisplayName, maxDisplayName),
		checkText("binding creator", b.CreatedBy, maxIDLen),
	); err != nil {
		return b, nil, "", nil, nil, fmt.Errorf("binding %s: %w", name, err)
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = s.now()
	}
	value, prepared, err := s.encodeWithAudit(b, b.TenantID, audit)
	if err != nil {
		return b, nil, "", nil, nil, fmt.Errorf("binding %s: %w", name, err)
	}
	return b, key, name, value, prepared, nil
}
