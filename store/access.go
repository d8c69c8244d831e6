package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.etcd.io/bbolt"

	"teamsbot/mcpapps"
)

// Kinds of binding subjects.
const (
	KindUser  = "user"
	KindGroup = "group"
)

// Roles a binding grants. The store only checks that a role is one of
// these; what each allows is the caller's policy.
const (
	RoleReader = "reader"
	RoleRunner = "runner"
	RoleAdmin  = "admin"
)

// AllAgents as a binding's AgentID grants its role on every agent of the
// tenant.
const AllAgents = "*"

// maxBindingSubjects bounds the subjects of one BindingsFor lookup (a user
// and the groups it is in); each costs two seeks in one read transaction.
const maxBindingSubjects = 10_000

// maxDisplayName bounds a display name (Entra allows 256 characters).
const maxDisplayName = 1024

// Binding grants a role on an agent (or AllAgents) of a tenant to a user or
// a group. Bindings are identified by (TenantID, AgentID, Kind, Subject,
// Role): a subject can hold several roles on an agent, each its own
// binding.
type Binding struct {
	TenantID string `json:"tenantId"`
	AgentID  string `json:"agentId"` // or AllAgents
	// Subject is the Entra object id of the user or group, compared byte
	// for byte: pass ids as Entra gives them.
	Subject     string    `json:"subject"`
	Kind        string    `json:"kind"` // KindUser or KindGroup
	Role        string    `json:"role"` // RoleReader, RoleRunner or RoleAdmin
	DisplayName string    `json:"displayName,omitempty"`
	CreatedBy   string    `json:"createdBy,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// checkKeyPart checks a string used as a part of a key: present, bounded,
// valid UTF-8 (JSON would silently change it otherwise, and the record
// would no longer match its key) and free of the NUL byte that ends key
// parts, so that no id can reach into the keys of another.
func checkKeyPart(what, v string) error {
	if err := checkID(what, v); err != nil {
		return err
	}
	return checkText(what, v, maxIDLen)
}

// checkText checks a string stored in a record: bounded, valid UTF-8, no
// NUL byte.
func checkText(what, v string, limit int) error {
	switch {
	case len(v) > limit:
		return invalid("%s is %d bytes long, at most %d", what, len(v), limit)
	case !utf8.ValidString(v):
		return invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(v, 0) >= 0:
		return invalid("%s contains a NUL byte", what)
	}
	return nil
}

// checkBindingKey checks the parts that identify a binding and returns its
// key and a name for errors.
func checkBindingKey(tenant, agent, kind, subject, role string) (key []byte, name string, err error) {
	for _, p := range []struct{ what, v string }{
		{"the tenant id", tenant}, {"the agent id", agent}, {"the subject", subject},
	} {
		if err := checkKeyPart(p.what, p.v); err != nil {
			return nil, "", err
		}
	}
	switch kind {
	case KindUser, KindGroup:
	default:
		return nil, "", fmt.Errorf("binding of %s to agent %s of tenant %s: %w",
			subject, agent, tenant, invalid("the kind %.64q is neither %q nor %q", kind, KindUser, KindGroup))
	}
	switch role {
	case RoleReader, RoleRunner, RoleAdmin:
	default:
		return nil, "", fmt.Errorf("binding of %s %s to agent %s of tenant %s: %w",
			kind, subject, agent, tenant, invalid("the role %.64q is not %q, %q or %q", role, RoleReader, RoleRunner, RoleAdmin))
	}
	name = fmt.Sprintf("of %s %s as %s on agent %s of tenant %s", kind, subject, role, agent, tenant)
	return indexKey(nil, tenant, agent, subject, kind, role), name, nil
}

// prepareTenantAudit checks and encodes the audit records of a change to
// tenant's access records. A record without a tenant is the change's
// tenant's; one naming another tenant is refused, so that an admin of one
// tenant never writes into another's audit log.
func (s *base) prepareTenantAudit(tenant string, recs []AuditRecord) ([]preparedAudit, error) {
	own := make([]AuditRecord, len(recs)) // never change the caller's slice
	for i, r := range recs {
		switch r.TenantID {
		case "":
			r.TenantID = tenant
		case tenant:
		default:
			return nil, invalid("audit record %d is of tenant %.128s, the change of tenant %s", i, r.TenantID, tenant)
		}
		own[i] = r
	}
	return s.prepareAudit(own)
}

// PutBinding stores a binding, with the audit records of the change in the
// same commit: both are stored or neither is. Kind and role must be among
// the package's constants, and tenant, agent and subject ids present, at
// most 512 bytes of valid UTF-8 and free of NUL bytes (ErrInvalid
// otherwise, saying which, and nothing is written). A zero CreatedAt is
// set from the store's clock.
//
// It is idempotent: putting a binding that is already stored keeps its
// CreatedBy and CreatedAt (when it was first granted, and by whom) and
// only refreshes its DisplayName. The audit records are written either
// way, as a record of what was asked. An audit record's empty TenantID is
// the binding's; another tenant's is ErrInvalid.
func (s *boltStore) PutBinding(ctx context.Context, b Binding, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b, key, name, value, prepared, err := s.prepareBinding(b, audit)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(bucketBindings))
		v := value
		if old := bucket.Get(key); old != nil {
			// Already granted: keep who granted it and when. This
			// decodes and encodes one small record inside the
			// transaction, only on a repeated put.
			var kept Binding
			if err := json.Unmarshal(old, &kept); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			kept.DisplayName = b.DisplayName
			if v, err = json.Marshal(kept); err != nil {
				return err
			}
		}
		if err := bucket.Put(key, v); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: put binding %s: %w", name, err)
	}
	return nil
}

// DeleteBinding removes a binding, with the audit records of the change in
// the same commit. A binding that is not stored gives ErrNotFound, and its
// audit records are not written either. Arguments are checked as by
// PutBinding.
func (s *boltStore) DeleteBinding(ctx context.Context, tenant, agent, kind, subject, role string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, name, err := checkBindingKey(tenant, agent, kind, subject, role)
	if err != nil {
		return err
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(bucketBindings))
		if bucket.Get(key) == nil {
			return ErrNotFound
		}
		if err := bucket.Delete(key); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return fmt.Errorf("store: delete binding %s: %w", name, err)
	}
	return nil
}

// Bindings returns the bindings of an agent of tenant, or with agent ""
// those of every agent of the tenant (AllAgents' among them), ordered by
// agent, then subject, kind and role. Agent AllAgents returns only the
// bindings made for every agent. A tenant without bindings has none, and
// no error.
func (s *boltStore) Bindings(ctx context.Context, tenant, agent string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("bindings tenant", tenant); err != nil {
		return nil, err
	}
	prefix := indexKey(nil, tenant)
	if agent != "" {
		if err := checkKeyPart("bindings agent", agent); err != nil {
			return nil, err
		}
		prefix = indexKey(nil, tenant, agent)
	}
	var out []Binding
	err := s.read(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketBindings)).Cursor()
		var err error
		out, err = appendBindings(out, c, prefix)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: bindings of agent %q of tenant %s: %w", agent, tenant, err)
	}
	return out, nil
}

// BindingsFor returns the bindings that apply to a signed-in user on an
// agent: those of tenant whose Subject is one of subjects (the user's id
// and the ids of its groups), made for agent or for AllAgents. It is the
// lookup of every access decision, so it reads only the matching records:
// one seek per subject and agent. The agent's own bindings come first,
// then AllAgents', each ordered by subject, kind and role; a subject given
// twice counts once. No subjects, or none bound, give no bindings and no
// error.
//
// An empty subject, or more than 10,000 of them, is ErrInvalid: the
// caller has not identified the user, and denies.
func (s *boltStore) BindingsFor(ctx context.Context, tenant, agent string, subjects []string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkBindingsFor(tenant, agent, subjects); err != nil {
		return nil, err
	}
	if len(subjects) == 0 {
		return nil, nil
	}
	subs := slices.Clone(subjects)
	slices.Sort(subs)
	subs = slices.Compact(subs)
	agents := []string{agent, AllAgents}
	if agent == AllAgents {
		agents = agents[:1]
	}
	var out []Binding
	err := s.read(func(tx *bbolt.Tx) error {
		c := tx.Bucket([]byte(bucketBindings)).Cursor()
		for _, a := range agents {
			for _, sub := range subs {
				var err error
				if out, err = appendBindings(out, c, indexKey(nil, tenant, a, sub)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: bindings for agent %s of tenant %s: %w", agent, tenant, err)
	}
	return out, nil
}

// appendBindings decodes the bindings whose keys start with prefix.
func appendBindings(out []Binding, c *bbolt.Cursor, prefix []byte) ([]Binding, error) {
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var b Binding
		if err := json.Unmarshal(v, &b); err != nil {
			return out, fmt.Errorf("binding %q: %w", k, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// TenantSettings are a tenant's own access settings. Version counts the
// puts: the store sets it.
type TenantSettings struct {
	TenantID string `json:"tenantId"`
	// DefaultRunner makes every signed-in member of the tenant a runner
	// of its own runs, without a binding.
	DefaultRunner bool `json:"defaultRunner"`
	// DefaultGroup, when set, limits DefaultRunner to the members of this
	// group (an Entra object id).
	DefaultGroup string `json:"defaultGroup,omitempty"`
	AppsDisabled bool   `json:"appsDisabled"`
	// DenyTools and Redact are the tenant's own data rules: they apply to
	// every call of every agent in the tenant, on top of the rules the
	// service's configuration gives each agent. The store checks only
	// their number and size; access checks their syntax.
	DenyTools []string `json:"denyTools,omitempty"`
	Redact    []string `json:"redact,omitempty"`
	// AppPermissions are the permissions the tenant's admin allows the
	// views of each MCP server (by the server's configured name), beside
	// what the configuration file allows every tenant: camera, microphone,
	// geolocation, clipboardWrite. The store checks only their number and
	// size; access checks the names.
	AppPermissions map[string][]string `json:"appPermissions,omitempty"`
	UpdatedBy      string              `json:"updatedBy,omitempty"`
	UpdatedAt      time.Time           `json:"updatedAt"`
	Version        uint64              `json:"version"`
}

// Bounds of a tenant's own data rules.
const (
	MaxTenantRules    = 100 // entries in DenyTools, and in Redact
	MaxTenantRuleText = 512 // bytes of one entry
)

// checkRules bounds one list of a tenant's data rules.
func checkRules(what string, rules []string) error {
	if len(rules) > MaxTenantRules {
		return invalid("%d %s, at most %d", len(rules), what, MaxTenantRules)
	}
	for i, r := range rules {
		if r == "" {
			return invalid("%s: entry %d is empty", what, i+1)
		}
		if err := checkText(fmt.Sprintf("%s: entry %d", what, i+1), r, MaxTenantRuleText); err != nil {
			return err
		}
	}
	return nil
}

// Bounds of a tenant's permissions for views.
const (
	MaxAppPermissionServers = 100 // servers with permissions
	maxPermissionsPerServer = 8
	maxPermissionName       = 32
)

// checkAppPermissions bounds a tenant's permissions for views.
func checkAppPermissions(m map[string][]string) error {
	if len(m) > MaxAppPermissionServers {
		return invalid("permissions for %d servers, at most %d", len(m), MaxAppPermissionServers)
	}
	for server, names := range m {
		if err := checkText("permission server", server, maxIDLen); err != nil {
			return err
		}
		if server == "" || len(names) > maxPermissionsPerServer {
			return invalid("permissions of server %.64q: an empty name or more than %d", server, maxPermissionsPerServer)
		}
		for _, n := range names {
			if err := checkText("permission", n, maxPermissionName); err != nil {
				return err
			}
		}
		if _, err := mcpapps.ParsePermissions(names); err != nil {
			return invalid("permissions of server %.64q: %v", server, err)
		}
	}
	return nil
}

// defaultTenantSettings are the settings of a tenant that stored none:
// every member may run agents, as before tenants had settings.
func defaultTenantSettings(tenant string) TenantSettings {
	return TenantSettings{TenantID: tenant, DefaultRunner: true}
}

// TenantSettings returns a tenant's settings. A tenant that stored none
// has the defaults (DefaultRunner, Version 0), and no error.
func (s *boltStore) TenantSettings(ctx context.Context, tenant string) (TenantSettings, error) {
	if err := checkKeyPart("settings tenant", tenant); err != nil {
		return TenantSettings{}, err
	}
	ts, err := getJSON[TenantSettings](ctx, s, bucketTenantSettings, "settings of tenant", tenant)
	if errors.Is(err, ErrNotFound) {
		return defaultTenantSettings(tenant), nil
	}
	if err != nil {
		return TenantSettings{}, fmt.Errorf("store: %w", err)
	}
	return ts, nil
}

// checkTenantSettings is what PutTenantSettings checks of the settings on
// every backend before it writes anything.
func checkTenantSettings(ts TenantSettings) error {
	if err := checkKeyPart("settings tenant", ts.TenantID); err != nil {
		return err
	}
	if err := errors.Join(
		checkText("default group", ts.DefaultGroup, maxIDLen),
		checkText("settings updater", ts.UpdatedBy, maxIDLen),
		checkRules("denied tools", ts.DenyTools), checkRules("redacted patterns", ts.Redact),
		checkAppPermissions(ts.AppPermissions),
	); err != nil {
		return fmt.Errorf("settings of tenant %s: %w", ts.TenantID, err)
	}
	return nil
}

// PutTenantSettings stores a tenant's settings if the stored ones are at
// wantVersion (0: none are stored), with the audit records of the change
// in the same commit, and returns the settings it replaced (the defaults
// if there were none). The stored Version is wantVersion plus one,
// whatever ts.Version says; a zero UpdatedAt is set from the store's
// clock. Settings at another version give ErrConflict: someone changed
// them since the caller read them, and their change stands. Audit records
// are checked as by PutBinding. On any error nothing is written and prev
// is zero.
func (s *boltStore) PutTenantSettings(ctx context.Context, ts TenantSettings, wantVersion uint64, audit ...AuditRecord) (prev TenantSettings, err error) {
	if err := ctx.Err(); err != nil {
		return TenantSettings{}, err
	}
	ts, value, prepared, err := s.prepareTenantSettings(ts, wantVersion, audit)
	if err != nil {
		return TenantSettings{}, err
	}
	key := []byte(ts.TenantID)
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(bucketTenantSettings))
		prev = defaultTenantSettings(ts.TenantID)
		if old := bucket.Get(key); old != nil {
			// Decode into a zero record: a field the stored one
			// leaves out is false, not the default.
			var stored TenantSettings
			if err := json.Unmarshal(old, &stored); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			prev = stored
		}
		if prev.Version != wantVersion {
			return fmt.Errorf("stored at version %d, not %d: %w", prev.Version, wantVersion, ErrConflict)
		}
		if err := bucket.Put(key, value); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return TenantSettings{}, fmt.Errorf("store: put settings of tenant %s: %w", ts.TenantID, err)
	}
	return prev, nil
}

// MaxPolicySetText bounds the Cedar text of one policy set.
const MaxPolicySetText = 256 << 10

// PolicySet is a tenant's Cedar policy text. The store neither parses nor
// checks it. Version counts the puts: the store sets it.
type PolicySet struct {
	TenantID  string    `json:"tenantId"`
	Text      string    `json:"text"`
	Version   uint64    `json:"version"`
	UpdatedBy string    `json:"updatedBy,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// PolicySet returns a tenant's policy set; ErrNotFound when it stored
// none, and the caller uses its default.
func (s *boltStore) PolicySet(ctx context.Context, tenant string) (PolicySet, error) {
	if err := checkKeyPart("policy set tenant", tenant); err != nil {
		return PolicySet{}, err
	}
	p, err := getJSON[PolicySet](ctx, s, bucketPolicySets, "policy set of tenant", tenant)
	if err != nil {
		return PolicySet{}, fmt.Errorf("store: %w", err)
	}
	return p, nil
}

// checkPolicySet is what PutPolicySet checks of the set on every backend
// before it writes anything. Cedar text may hold any character in its
// strings, NUL too: only its size and encoding are checked.
func checkPolicySet(p PolicySet) error {
	if err := checkKeyPart("policy set tenant", p.TenantID); err != nil {
		return err
	}
	switch {
	case len(p.Text) > MaxPolicySetText:
		return fmt.Errorf("policy set of tenant %s: %w", p.TenantID, invalid("the policy text is %d bytes long, at most %d", len(p.Text), MaxPolicySetText))
	case !utf8.ValidString(p.Text):
		return fmt.Errorf("policy set of tenant %s: %w", p.TenantID, invalid("the policy text is not valid UTF-8"))
	}
	if err := checkText("policy set updater", p.UpdatedBy, maxIDLen); err != nil {
		return fmt.Errorf("policy set of tenant %s: %w", p.TenantID, err)
	}
	return nil
}

// PutPolicySet stores a tenant's policy set if the stored one is at
// wantVersion (0: none is stored), with the audit records of the change in
// the same commit, and returns the set it replaced (Version 0 and no text
// if there was none). The stored set's Version is wantVersion plus one,
// whatever p.Version says; a zero UpdatedAt is set from the store's clock.
// A stored set at another version gives ErrConflict: someone changed it
// since the caller read it, and their change stands. Text of more than
// MaxPolicySetText bytes, or not valid UTF-8, is ErrInvalid. Audit records
// are checked as by PutBinding. On any error nothing is written and prev
// is zero.
func (s *boltStore) PutPolicySet(ctx context.Context, p PolicySet, wantVersion uint64, audit ...AuditRecord) (prev PolicySet, err error) {
	if err := ctx.Err(); err != nil {
		return PolicySet{}, err
	}
	p, value, prepared, err := s.preparePolicySet(p, wantVersion, audit)
	if err != nil {
		return PolicySet{}, err
	}
	key := []byte(p.TenantID)
	err = s.write(ctx, func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(bucketPolicySets))
		prev = PolicySet{TenantID: p.TenantID}
		if old := bucket.Get(key); old != nil {
			// Decoding costs about what checking the version alone
			// would: the decoder scans the whole record either way.
			var stored PolicySet
			if err := json.Unmarshal(old, &stored); err != nil {
				return fmt.Errorf("stored record: %w", err)
			}
			prev = stored
		}
		if prev.Version != wantVersion {
			return fmt.Errorf("stored at version %d, not %d: %w", prev.Version, wantVersion, ErrConflict)
		}
		if err := bucket.Put(key, value); err != nil {
			return err
		}
		return appendAudit(tx, prepared)
	})
	if err != nil {
		return PolicySet{}, fmt.Errorf("store: put policy set of tenant %s: %w", p.TenantID, err)
	}
	return prev, nil
}
