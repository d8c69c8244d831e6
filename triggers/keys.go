package triggers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"teamsbot/access"
	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// keyPrefix starts every API key, so that secret scanners and people can
// tell one at a glance.
const keyPrefix = "tbk_"

// secretBytes is the entropy of a key's secret: 256 bits, which makes a
// plain SHA-256 of it as safe to store as a slow password hash would be.
const secretBytes = 32

// NewKey is a key just created: Secret is the whole bearer token, shown
// to the admin once and never stored.
type NewKey struct {
	Key    store.APIKey
	Secret string
}

// parseToken splits a bearer token "tbk_<id>_<secret>" into the key id
// and the secret's SHA-256.
func parseToken(tok string) (id string, sum [32]byte, ok bool) {
	rest, found := strings.CutPrefix(tok, keyPrefix)
	if !found {
		return "", sum, false
	}
	id, secret, found := strings.Cut(rest, "_")
	if !found || len(id) != 24 || len(secret) != base64.RawURLEncoding.EncodedLen(secretBytes) {
		return "", sum, false
	}
	if _, err := hex.DecodeString(id); err != nil {
		return "", sum, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil {
		return "", sum, false
	}
	return id, sha256.Sum256(raw), true
}

// CreateKey makes an API key for one agent of the admin's tenant, audited
// (admin.apikey.create) in the same commit. The secret comes back once,
// in NewKey.Secret: only its SHA-256 is kept.
func (s *Service) CreateKey(ctx context.Context, admin access.Person, name, agentID string) (NewKey, error) {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return NewKey{}, err
	}
	name, err := checkName(name)
	if err := errors.Join(err, s.checkAgent(agentID)); err != nil {
		return NewKey{}, err
	}
	secret := make([]byte, secretBytes)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	sum := sha256.Sum256(secret)
	k := store.APIKey{
		ID: newID(12), TenantID: admin.TenantID, AgentID: agentID, Name: name,
		Hash: hex.EncodeToString(sum[:]), CreatedBy: admin.UserID, CreatedAt: s.now(),
	}
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditKeyCreate, Actor: admin.UserID, Fields: map[string]any{
		"key": k.ID, "name": k.Name, "agent": k.AgentID,
		"before": nil, "after": map[string]any{"key": k.ID, "name": k.Name, "agent": k.AgentID, "revoked": false},
	}}
	if err := s.opts.Store.PutAPIKey(ctx, k, rec); err != nil {
		return NewKey{}, fmt.Errorf("triggers: create key: %w", err)
	}
	return NewKey{Key: k, Secret: keyPrefix + k.ID + "_" + base64.RawURLEncoding.EncodeToString(secret)}, nil
}

// Keys returns the admin's tenant's keys, newest first.
func (s *Service) Keys(ctx context.Context, admin access.Person) ([]store.APIKey, error) {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return nil, err
	}
	return s.opts.Store.APIKeys(ctx, admin.TenantID)
}

// RevokeKey revokes a key of the admin's tenant for good, audited
// (admin.apikey.revoke) in the same commit. ErrNotFound: no such key in
// the tenant; ErrInvalid: revoked already.
func (s *Service) RevokeKey(ctx context.Context, admin access.Person, id string) error {
	if err := s.opts.Access.RequireAdmin(ctx, admin); err != nil {
		return err
	}
	if id == "" || len(id) > 64 {
		return notFound(nil, "no API key of your organisation has the id %q", textclip.Clip(id, 64))
	}
	_, err := s.opts.Store.RevokeAPIKey(ctx, admin.TenantID, id, admin.UserID, func(before, after store.APIKey) []store.AuditRecord {
		return []store.AuditRecord{{Action: AuditKeyRevoke, Actor: admin.UserID, Fields: map[string]any{
			"key": id, "name": before.Name, "agent": before.AgentID,
			"before": map[string]any{"revoked": before.Revoked()}, "after": map[string]any{"revoked": after.Revoked()},
		}}}
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return notFound(err, "no API key of your organisation has the id %q", textclip.Clip(id, 64))
	case errors.Is(err, store.ErrConflict):
		return invalid("that key was revoked already")
	case err != nil:
		return fmt.Errorf("triggers: revoke key: %w", err)
	}
	return nil
}

// Why a runs API call was refused, in the trigger.apikey.refused record.
const (
	RefusedNoKey     = "no key"
	RefusedMalformed = "malformed"
	RefusedUnknown   = "unknown key"
	RefusedSecret    = "wrong secret"
	RefusedRevoked   = "revoked"
	RefusedAgent     = "another agent"
)

// refusal is a refused call: why, and the key's tenant when the key is
// known (the record goes to no tenant's log otherwise).
type refusal struct {
	why    string
	key    store.APIKey
	tenant string
}

func (r *refusal) Error() string { return "triggers: API key refused: " + r.why }

// authenticate finds the key a bearer token names and checks its secret
// in constant time. A known key is returned even when revoked or of
// another agent; the caller refuses those.
func (s *Service) authenticate(ctx context.Context, token, agentID string) (store.APIKey, error) {
	if token == "" {
		return store.APIKey{}, &refusal{why: RefusedNoKey}
	}
	id, sum, ok := parseToken(token)
	if !ok {
		return store.APIKey{}, &refusal{why: RefusedMalformed}
	}
	k, err := s.opts.Store.APIKey(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.APIKey{}, &refusal{why: RefusedUnknown}
	}
	if err != nil {
		return store.APIKey{}, err
	}
	want, err := hex.DecodeString(k.Hash)
	if err != nil || subtle.ConstantTimeCompare(want, sum[:]) != 1 {
		// Someone holds the key's id but not its secret: its tenant's
		// admins should know.
		return store.APIKey{}, &refusal{why: RefusedSecret, tenant: k.TenantID, key: k}
	}
	switch {
	case k.Revoked():
		return store.APIKey{}, &refusal{why: RefusedRevoked, tenant: k.TenantID, key: k}
	case k.AgentID != agentID:
		return store.APIKey{}, &refusal{why: RefusedAgent, tenant: k.TenantID, key: k}
	}
	return k, nil
}
