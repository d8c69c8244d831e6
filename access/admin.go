package access

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"teamsbot/internal/textclip"
	"teamsbot/store"
)

// Audit actions of the admin operations. Each record names the admin
// (Actor), what changed, and the state before and after.
const (
	AuditBindingAdd    = "admin.binding.add"
	AuditBindingRemove = "admin.binding.remove"
	AuditDefaultSet    = "admin.default.set"
	AuditPolicySet     = "admin.policy.set"
)

// maxAuditedPolicyText bounds each policy text kept in an admin.policy.set
// record; the whole text is in the store.
const maxAuditedPolicyText = 16 << 10

// requireAdmin refuses admin operations to anyone who is not an admin of
// their own tenant for agentID (store.AllAgents: for the tenant).
func (s *Service) requireAdmin(ctx context.Context, admin Person, agentID string) error {
	g, err := s.resolve(ctx, admin, agentID, func(g Grants) bool { return g.Admin })
	if err != nil {
		return err
	}
	if !g.Admin {
		return denied(PermAdmin, "this needs the %s role for the tenant. %s", PermAdmin, whomToAsk)
	}
	return nil
}

// AddBinding gives a user or a group a role (store.RoleReader, RoleRunner,
// RoleAdmin) for an agent of the admin's own tenant, and audits it.
func (s *Service) AddBinding(ctx context.Context, admin Person, b store.Binding) error {
	b.TenantID = admin.TenantID
	if err := s.requireAdmin(ctx, admin, b.AgentID); err != nil {
		return err
	}
	b.CreatedBy = admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditBindingAdd, Actor: admin.UserID, Fields: map[string]any{
		"agent": b.AgentID, "kind": b.Kind, "subject": b.Subject, "role": b.Role, "name": textclip.Clip(b.DisplayName, 256),
		"before": nil, "after": map[string]any{"agent": b.AgentID, "kind": b.Kind, "subject": b.Subject, "role": b.Role},
	}}
	if err := s.store.PutBinding(ctx, b, rec); err != nil {
		return fmt.Errorf("access: add binding: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// RemoveBinding takes a role back; store.ErrNotFound (wrapped) when there
// was no such binding.
func (s *Service) RemoveBinding(ctx context.Context, admin Person, agentID, kind, subject, role string) error {
	if err := s.requireAdmin(ctx, admin, agentID); err != nil {
		return err
	}
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditBindingRemove, Actor: admin.UserID, Fields: map[string]any{
		"agent": agentID, "kind": kind, "subject": subject, "role": role,
		"before": map[string]any{"agent": agentID, "kind": kind, "subject": subject, "role": role}, "after": nil,
	}}
	if err := s.store.DeleteBinding(ctx, admin.TenantID, agentID, kind, subject, role, rec); err != nil {
		return fmt.Errorf("access: remove binding: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// Default is the tenant default an admin sets: whether every signed-in
// member is a runner of their own runs, optionally only the members of
// one Entra group.
type Default struct {
	Runner bool
	Group  string // empty: every member
}

// SetDefault changes the admin's tenant default, and audits the change
// with the settings before and after.
func (s *Service) SetDefault(ctx context.Context, admin Person, d Default) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set default: %w", err)
	}
	next := cur
	next.DefaultRunner, next.DefaultGroup, next.UpdatedBy = d.Runner, d.Group, admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditDefaultSet, Actor: admin.UserID, Fields: map[string]any{
		"before": map[string]any{"runner": cur.DefaultRunner, "group": cur.DefaultGroup},
		"after":  map[string]any{"runner": d.Runner, "group": d.Group},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, cur.Version, rec); err != nil {
		return fmt.Errorf("access: set default: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// PolicyText returns the tenant's Cedar policy text and its version; the
// default text with version 0 when the tenant saved none.
func (s *Service) PolicyText(ctx context.Context, tenantID string) (string, uint64, error) {
	ps, err := s.store.PolicySet(ctx, tenantID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return DefaultPolicyText, 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("access: policies of %s: %w", tenantID, err)
	}
	return ps.Text, ps.Version, nil
}

// SavedPoliciesRefused returns why the tenant's saved policy text is
// refused (a *PolicyError: over a limit, or it no longer parses), or nil
// when it is in force. While it is refused every tool call of the tenant
// is denied.
func (s *Service) SavedPoliciesRefused(ctx context.Context, tenantID string) (*PolicyError, error) {
	ts, err := s.tenant(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	var pe *PolicyError
	if errors.As(ts.policyErr, &pe) {
		return pe, nil
	}
	return nil, nil
}

// SetPolicies saves the admin's tenant's Cedar policy text after checking
// it: a text over a limit or that does not parse is refused with a
// *PolicyError that says where and why in plain words, and nothing is
// saved. wantVersion is the version the admin edited (PolicyText's);
// store.ErrConflict (wrapped) means another admin saved in between. It
// returns the new version.
func (s *Service) SetPolicies(ctx context.Context, admin Person, text string, wantVersion uint64) (uint64, error) {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return 0, err
	}
	parsed, err := ParsePolicies(text)
	if err != nil {
		return 0, err
	}
	before, _, err := s.PolicyText(ctx, admin.TenantID)
	if err != nil {
		return 0, err
	}
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditPolicySet, Actor: admin.UserID, Fields: map[string]any{
		"before": textclip.Clip(before, maxAuditedPolicyText), "after": textclip.Clip(text, maxAuditedPolicyText),
		"policies": parsed.IDs(), "version": wantVersion + 1,
	}}
	if _, err := s.store.PutPolicySet(ctx, store.PolicySet{TenantID: admin.TenantID, Text: text, UpdatedBy: admin.UserID}, wantVersion, rec); err != nil {
		return 0, fmt.Errorf("access: save policies: %w", err)
	}
	s.forget(admin.TenantID)
	return wantVersion + 1, nil
}

// AuditSettingsSet is the audit action of a change of tenant settings
// other than the default and the memory of runs without a person (MCP
// Apps on or off, the permissions of views).
const AuditSettingsSet = "admin.settings.set"

// AuditHistoryForTriggersSet is the audit action of the tenant's admin
// letting runs without a person (schedules, the runs API) read and add to
// the memory of the conversation they post into, or no longer: a change
// of its own, as what people said to the agent is then read by runs no
// person asked for.
const AuditHistoryForTriggersSet = "admin.settings.history_for_triggers"

// AuditElicitationSet is the audit action of the tenant's admin letting
// one MCP server ask the tenant's people for input during a tool call
// (MCP elicitation), or no longer: its fields name the server and say
// whether it may ask, before and after.
const AuditElicitationSet = "admin.settings.elicitation"

// Settings are what the admin console shows of a tenant: the default,
// whether MCP Apps are on, the permissions the tenant allows each
// server's views, whether runs without a person use the memory of the
// conversation they post into, and the servers that may not ask people
// for input.
type Settings struct {
	Default     Default
	AppsEnabled bool
	// HistoryForTriggers: runs without a person (schedules, the runs API)
	// read and add to the memory of the conversation they post into. Off
	// by default.
	HistoryForTriggers bool
	// AppPermissions are, by server name, the permissions the tenant's
	// admin allows that server's views (camera, microphone, geolocation,
	// clipboardWrite).
	AppPermissions map[string][]string
	// ElicitationOff are the MCP servers (by name, sorted) the tenant's
	// admin does not let ask people for input during a tool call; every
	// other server may.
	ElicitationOff []string
}

// TenantSettings returns the admin's view of tenantID's settings.
func (s *Service) TenantSettings(ctx context.Context, tenantID string) (Settings, error) {
	ts, err := s.store.TenantSettings(ctx, tenantID)
	if err != nil {
		return Settings{}, fmt.Errorf("access: settings of %s: %w", tenantID, err)
	}
	return Settings{Default: Default{Runner: ts.DefaultRunner, Group: ts.DefaultGroup}, AppsEnabled: !ts.AppsDisabled,
		HistoryForTriggers: ts.HistoryForTriggers, AppPermissions: ts.AppPermissions, ElicitationOff: ts.ElicitationOff}, nil
}

// AppPermissions returns the permissions tenantID's admin allows the views
// of server. When the settings cannot be read it allows none.
func (s *Service) AppPermissions(ctx context.Context, tenantID, server string) []string {
	ts, err := s.tenant(ctx, tenantID)
	if err != nil {
		s.log.Warn("tenant settings unreadable; no permissions for views", "tenant", tenantID, "err", err)
		return nil
	}
	return slices.Clone(ts.settings.AppPermissions[server])
}

// SetAppPermissions sets the permissions the admin's tenant allows the
// views of server (none: take them all back), and audits the change as
// admin.settings.set with the server's permissions before and after. The
// store refuses a name that is not a permission (store.ErrInvalid).
func (s *Service) SetAppPermissions(ctx context.Context, admin Person, server string, names []string) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set permissions: %w", err)
	}
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	before := slices.Clone(cur.AppPermissions[server])
	next := cur
	next.AppPermissions = maps.Clone(cur.AppPermissions)
	if next.AppPermissions == nil {
		next.AppPermissions = map[string][]string{}
	}
	if len(names) == 0 {
		delete(next.AppPermissions, server)
	} else {
		next.AppPermissions[server] = names
	}
	next.UpdatedBy = admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditSettingsSet, Actor: admin.UserID, Fields: map[string]any{
		"server": server,
		"before": map[string]any{"appPermissions": orEmpty(before)}, "after": map[string]any{"appPermissions": orEmpty(names)},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, cur.Version, rec); err != nil {
		return fmt.Errorf("access: set permissions of %s: %w", server, err)
	}
	s.forget(admin.TenantID)
	return nil
}

// orEmpty makes a nil list an empty one, so that the audit record shows [].
func orEmpty(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// AppsEnabled reports whether MCP Apps are on for tenantID (views made,
// app-only tools kept from the model). A tenant admin can turn them off
// for their tenant; TICKETIQ_MCP_APPS_ENABLED=false turns them off for
// all, whatever this says. When the settings cannot be read it says off.
func (s *Service) AppsEnabled(ctx context.Context, tenantID string) bool {
	ts, err := s.tenant(ctx, tenantID)
	if err != nil {
		s.log.Warn("tenant settings unreadable; MCP Apps off for the run", "tenant", tenantID, "err", err)
		return false
	}
	return !ts.settings.AppsDisabled
}

// SetAppsEnabled turns MCP Apps on or off for the admin's tenant, and
// audits the change.
func (s *Service) SetAppsEnabled(ctx context.Context, admin Person, on bool) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set apps: %w", err)
	}
	next := cur
	next.AppsDisabled, next.UpdatedBy = !on, admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditSettingsSet, Actor: admin.UserID, Fields: map[string]any{
		"before": map[string]any{"appsEnabled": !cur.AppsDisabled}, "after": map[string]any{"appsEnabled": on},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, cur.Version, rec); err != nil {
		return fmt.Errorf("access: set apps: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// SetHistoryForTriggers lets the runs without a person of the admin's
// tenant (schedules, the runs API) read and add to the memory of the
// conversation they post into, or stops them, and audits the change as
// admin.settings.history_for_triggers with the setting before and after.
// The bot reads the setting from the store at each such run, so a change
// applies from the next one.
func (s *Service) SetHistoryForTriggers(ctx context.Context, admin Person, on bool) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set memory for runs without a person: %w", err)
	}
	next := cur
	next.HistoryForTriggers, next.UpdatedBy = on, admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditHistoryForTriggersSet, Actor: admin.UserID, Fields: map[string]any{
		"before": map[string]any{"historyForTriggers": cur.HistoryForTriggers}, "after": map[string]any{"historyForTriggers": on},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, cur.Version, rec); err != nil {
		return fmt.Errorf("access: set memory for runs without a person: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// ElicitationAllowed reports whether server (a configured MCP server's
// name) may ask the people of tenantID for input during a tool call (an
// elicitation/create request): not when the tenant's admin turned it off
// for that server. When the settings cannot be read it says no: a
// request is declined rather than shown against the admin's wish.
func (s *Service) ElicitationAllowed(ctx context.Context, tenantID, server string) bool {
	ts, err := s.tenant(ctx, tenantID)
	if err != nil {
		s.log.Warn("tenant settings unreadable; elicitation declined", "tenant", tenantID, "server", server, "err", err)
		return false
	}
	return !slices.Contains(ts.settings.ElicitationOff, server)
}

// SetElicitation lets server ask the people of the admin's tenant for
// input during a tool call (on), or stops it, and audits the change as
// admin.settings.elicitation with the server and the setting before and
// after. The service does not know which servers are configured: the
// caller checks that server is one (the admin console and API do). A
// change applies to the next request of that server.
func (s *Service) SetElicitation(ctx context.Context, admin Person, server string, on bool) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	if server == "" {
		return fmt.Errorf("access: set elicitation: name the MCP server: %w", store.ErrInvalid)
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set elicitation of %s: %w", server, err)
	}
	was := !slices.Contains(cur.ElicitationOff, server)
	next := cur
	next.ElicitationOff = slices.DeleteFunc(slices.Clone(cur.ElicitationOff), func(n string) bool { return n == server })
	if !on {
		next.ElicitationOff = append(next.ElicitationOff, server)
		slices.Sort(next.ElicitationOff)
	}
	next.UpdatedBy = admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditElicitationSet, Actor: admin.UserID, Fields: map[string]any{
		"server": server,
		"before": map[string]any{"elicitation": was}, "after": map[string]any{"elicitation": on},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, cur.Version, rec); err != nil {
		return fmt.Errorf("access: set elicitation of %s: %w", server, err)
	}
	s.forget(admin.TenantID)
	return nil
}

// RequireAdmin refuses anyone who is not an admin of their own tenant:
// the admin console and API ask it before showing anything.
func (s *Service) RequireAdmin(ctx context.Context, p Person) error {
	return s.requireAdmin(ctx, p, store.AllAgents)
}

// Bindings lists the role bindings of the admin's tenant.
func (s *Service) Bindings(ctx context.Context, admin Person) ([]store.Binding, error) {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return nil, err
	}
	return s.store.Bindings(ctx, admin.TenantID, "")
}

// Explain is the policy tester: the decision a tool call of user (an Entra
// object id of the admin's tenant) would get, with the policies that would
// make it. text, when not empty, is tested instead of the saved policies
// (it must parse). The user's grants come from bindings, groups and the
// default; app roles of their token are not known here.
func (s *Service) Explain(ctx context.Context, admin Person, text, user string, c Call) (Decision, error) {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return Decision{}, err
	}
	ts, err := s.tenant(ctx, admin.TenantID)
	if err != nil {
		return Decision{}, err
	}
	policies := ts.policies
	if text != "" {
		if policies, err = ParsePolicies(text); err != nil {
			return Decision{}, err
		}
	} else if ts.policyErr != nil {
		return Decision{}, ts.policyErr
	}
	c.AgentTenantID = admin.TenantID
	principal, err := s.principal(ctx, Person{TenantID: admin.TenantID, UserID: user}, c.AgentID, ts)
	if err != nil {
		return Decision{}, err
	}
	return policies.Decide(c.by(principal)), nil
}
