package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

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

// key checks the parts that identify a binding and returns a name of it
// for errors.
func (b Binding) key() (name string, err error) {
	if err := checkKeyParts("the tenant id", b.TenantID, "the agent id", b.AgentID, "the subject", b.Subject); err != nil {
		return "", err
	}
	switch b.Kind {
	case KindUser, KindGroup:
	default:
		return "", fmt.Errorf("binding of %s to agent %s of tenant %s: %w",
			b.Subject, b.AgentID, b.TenantID, invalid("the kind %.64q is neither %q nor %q", b.Kind, KindUser, KindGroup))
	}
	switch b.Role {
	case RoleReader, RoleRunner, RoleAdmin:
	default:
		return "", fmt.Errorf("binding of %s %s to agent %s of tenant %s: %w",
			b.Kind, b.Subject, b.AgentID, b.TenantID, invalid("the role %.64q is not %q, %q or %q", b.Role, RoleReader, RoleRunner, RoleAdmin))
	}
	return fmt.Sprintf("of %s %s as %s on agent %s of tenant %s", b.Kind, b.Subject, b.Role, b.AgentID, b.TenantID), nil
}

// storedBinding reads the binding of b's key, with the others of its
// subject on its agent.
func storedBinding(r reader, b Binding) (Binding, error) {
	bs, err := r.bindings(b.TenantID, b.AgentID, []string{b.Subject})
	if err != nil {
		return Binding{}, err
	}
	for _, s := range bs {
		if s.Kind == b.Kind && s.Role == b.Role {
			return s, nil
		}
	}
	return Binding{}, ErrNotFound
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
func (s *Store) PutBinding(ctx context.Context, b Binding, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name, err := b.key()
	if err != nil {
		return err
	}
	if err := errors.Join(
		checkText("the display name", b.DisplayName, maxDisplayName),
		checkText("binding creator", b.CreatedBy, maxIDLen),
	); err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	if b.CreatedAt.IsZero() {
		b.CreatedAt = s.now()
	}
	enc, err := encode(b)
	if err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	prepared, err := s.prepareTenantAudit(b.TenantID, audit)
	if err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	err = s.write(ctx, false, func(w writer) error {
		put, old := enc, (*Binding)(nil)
		switch stored, err := storedBinding(w, b); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			// Already granted: keep who granted it and when. This
			// encodes one small record inside the transaction, only
			// on a repeated put.
			old = &stored
			kept := stored
			kept.DisplayName = b.DisplayName
			if put, err = encode(kept); err != nil {
				return err
			}
		}
		if err := w.putBinding(put, old); err != nil {
			return err
		}
		return w.appendAudit(prepared)
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
func (s *Store) DeleteBinding(ctx context.Context, tenant, agent, kind, subject, role string, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := Binding{TenantID: tenant, AgentID: agent, Kind: kind, Subject: subject, Role: role}
	name, err := b.key()
	if err != nil {
		return err
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return fmt.Errorf("binding %s: %w", name, err)
	}
	err = s.write(ctx, false, func(w writer) error {
		stored, err := storedBinding(w, b)
		if err != nil {
			return err
		}
		if err := w.deleteBinding(stored); err != nil {
			return err
		}
		return w.appendAudit(prepared)
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
func (s *Store) Bindings(ctx context.Context, tenant, agent string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyPart("bindings tenant", tenant); err != nil {
		return nil, err
	}
	if agent != "" {
		if err := checkKeyPart("the agent id", agent); err != nil {
			return nil, err
		}
	}
	var out []Binding
	err := s.be.read(ctx, func(r reader) error {
		var err error
		out, err = r.bindings(tenant, agent, nil)
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
func (s *Store) BindingsFor(ctx context.Context, tenant, agent string, subjects []string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKeyParts("the tenant id", tenant, "the agent id", agent); err != nil {
		return nil, err
	}
	if len(subjects) > maxBindingSubjects {
		return nil, fmt.Errorf("bindings of agent %s of tenant %s: %w",
			agent, tenant, invalid("%d subjects, at most %d", len(subjects), maxBindingSubjects))
	}
	for _, sub := range subjects {
		if err := checkKeyPart("a subject", sub); err != nil {
			return nil, fmt.Errorf("bindings of agent %s of tenant %s: %w", agent, tenant, err)
		}
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
	err := s.be.read(ctx, func(r reader) error {
		out = nil
		for _, a := range agents {
			bs, err := r.bindings(tenant, a, subs)
			if err != nil {
				return err
			}
			if out == nil {
				out = bs
			} else {
				out = append(out, bs...)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: bindings for agent %s of tenant %s: %w", agent, tenant, err)
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
	// HistoryForTriggers is the tenant's admin allowing the runs without
	// a person (scheduled triggers, the runs API) to read the history of
	// the conversation they post into. False, the default: they run
	// without its earlier turns.
	HistoryForTriggers bool `json:"historyForTriggers"`
	// ElicitationOff are the MCP servers (by their configured names, as
	// the keys of AppPermissions) that the tenant's admin does not let
	// ask the tenant's people for input during a tool call (MCP
	// elicitation); the service declines their requests. None, the
	// default: every server may ask. The store checks their number and
	// size, refuses an empty or a repeated name, and keeps them sorted;
	// access checks that each is a configured server.
	ElicitationOff []string  `json:"elicitationOff,omitempty"`
	UpdatedBy      string    `json:"updatedBy,omitempty"`
	UpdatedAt      time.Time `json:"updatedAt"`
	Version        uint64    `json:"version"`
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

// MaxElicitationOff bounds the servers a tenant turns elicitation off
// for: as many as may have permissions for views.
const MaxElicitationOff = MaxAppPermissionServers

// checkElicitationOff bounds a tenant's servers without elicitation.
func checkElicitationOff(servers []string) error {
	if len(servers) > MaxElicitationOff {
		return invalid("elicitation off for %d servers, at most %d", len(servers), MaxElicitationOff)
	}
	seen := make(map[string]bool, len(servers))
	for i, server := range servers {
		if server == "" {
			return invalid("elicitation off: server %d has an empty name", i+1)
		}
		if err := checkText(fmt.Sprintf("elicitation off: server %d", i+1), server, maxIDLen); err != nil {
			return err
		}
		if seen[server] {
			return invalid("elicitation off: server %.64q is named twice", server)
		}
		seen[server] = true
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
func (s *Store) TenantSettings(ctx context.Context, tenant string) (TenantSettings, error) {
	if err := checkKeyPart("settings tenant", tenant); err != nil {
		return TenantSettings{}, err
	}
	ts, err := get(ctx, s, "settings of tenant", tenant, reader.tenantSettings)
	if errors.Is(err, ErrNotFound) {
		return defaultTenantSettings(tenant), nil
	}
	if err != nil {
		return TenantSettings{}, fmt.Errorf("store: %w", err)
	}
	return ts, nil
}

// checkTenantSettings is what PutTenantSettings checks of the settings
// before it writes anything.
func checkTenantSettings(ts TenantSettings) error {
	if err := checkKeyPart("settings tenant", ts.TenantID); err != nil {
		return err
	}
	if err := errors.Join(
		checkText("default group", ts.DefaultGroup, maxIDLen),
		checkText("settings updater", ts.UpdatedBy, maxIDLen),
		checkRules("denied tools", ts.DenyTools), checkRules("redacted patterns", ts.Redact),
		checkAppPermissions(ts.AppPermissions), checkElicitationOff(ts.ElicitationOff),
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
func (s *Store) PutTenantSettings(ctx context.Context, ts TenantSettings, wantVersion uint64, audit ...AuditRecord) (prev TenantSettings, err error) {
	if err := checkTenantSettings(ts); err != nil {
		return TenantSettings{}, err
	}
	if ts.UpdatedAt.IsZero() {
		ts.UpdatedAt = s.now()
	}
	ts.Version = wantVersion + 1
	// Sorted, so that the stored list does not depend on the order the
	// admin turned servers off in (a copy: the caller's is left alone).
	ts.ElicitationOff = slices.Sorted(slices.Values(ts.ElicitationOff))
	// A field the stored settings leave out reads as false, not as the
	// default.
	return putVersioned(ctx, s, "settings of tenant", ts.TenantID, ts, defaultTenantSettings(ts.TenantID), wantVersion, audit,
		reader.tenantSettings, writer.putTenantSettings, func(ts TenantSettings) uint64 { return ts.Version })
}

// putVersioned stores rec, a tenant's record at version wantVersion + 1,
// if the stored one is at wantVersion (none stored: 0, and it is def),
// with the audit records in the same commit, and returns the record it
// replaced. rec is encoded before the transaction, as the version it
// stores at is known.
func putVersioned[T any](ctx context.Context, s *Store, what, tenant string, rec, def T, wantVersion uint64, audit []AuditRecord,
	get func(reader, string) (T, error), put func(writer, encoded[T], *T) error, version func(T) uint64) (prev T, err error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	enc, err := encode(rec)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, tenant, err)
	}
	prepared, err := s.prepareTenantAudit(tenant, audit)
	if err != nil {
		return zero, fmt.Errorf("%s %s: %w", what, tenant, err)
	}
	err = s.write(ctx, false, func(w writer) error {
		prev = def
		var old *T
		switch stored, err := get(w, tenant); {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		default:
			prev, old = stored, &stored
		}
		if v := version(prev); v != wantVersion {
			return fmt.Errorf("stored at version %d, not %d: %w", v, wantVersion, ErrConflict)
		}
		if err := put(w, enc, old); err != nil {
			return err
		}
		return w.appendAudit(prepared)
	})
	if err != nil {
		return zero, fmt.Errorf("store: put %s %s: %w", what, tenant, err)
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
func (s *Store) PolicySet(ctx context.Context, tenant string) (PolicySet, error) {
	if err := checkKeyPart("policy set tenant", tenant); err != nil {
		return PolicySet{}, err
	}
	p, err := get(ctx, s, "policy set of tenant", tenant, reader.policySet)
	if err != nil {
		return PolicySet{}, fmt.Errorf("store: %w", err)
	}
	return p, nil
}

// checkPolicySet is what PutPolicySet checks of the set before it writes
// anything. Cedar text may hold any character in its
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
func (s *Store) PutPolicySet(ctx context.Context, p PolicySet, wantVersion uint64, audit ...AuditRecord) (prev PolicySet, err error) {
	if err := checkPolicySet(p); err != nil {
		return PolicySet{}, err
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = s.now()
	}
	p.Version = wantVersion + 1
	return putVersioned(ctx, s, "policy set of tenant", p.TenantID, p, PolicySet{TenantID: p.TenantID}, wantVersion, audit,
		reader.policySet, writer.putPolicySet, func(p PolicySet) uint64 { return p.Version })
}
