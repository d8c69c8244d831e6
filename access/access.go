package access

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sync"
	"time"

	"teamsbot/store"
)

// Errors of the decision point.
var (
	// ErrDenied is wrapped by every refusal; the *DeniedError says what is
	// missing.
	ErrDenied = errors.New("access: denied")
	// ErrNotFound means the thing asked about belongs to another tenant:
	// callers answer exactly as for one that does not exist, so that an id
	// of another tenant tells nothing.
	ErrNotFound = errors.New("access: not found")
	// ErrUnavailable means a decision needed group membership that could
	// not be had (Microsoft Graph did not answer): the decision fails
	// closed.
	ErrUnavailable = errors.New("access: group membership cannot be checked right now")
)

// DeniedError is a refusal: the permission that is missing (PermRead,
// PermRun, PermAdmin; empty when a policy or the ownership rule refused)
// and why, in words a person can act on.
type DeniedError struct {
	Missing  string
	Reason   string
	Policies []string // the Cedar policies that denied, if any
}

func (e *DeniedError) Error() string { return "access: denied: " + e.Reason }

// Unwrap makes errors.Is(err, ErrDenied) hold.
func (e *DeniedError) Unwrap() error { return ErrDenied }

func denied(missing, format string, args ...any) error {
	return &DeniedError{Missing: missing, Reason: fmt.Sprintf(format, args...)}
}

// Person is who asks: the Entra tenant and object id, and the app roles of
// their sign-in token (none for a message from Teams, which carries no
// token of the person).
type Person struct {
	TenantID, UserID, Name string
	Roles                  []string
}

// Groups answers which of the given Entra groups a user is a transitive
// member of. access/graph implements it with Microsoft Graph.
type Groups interface {
	MemberGroups(ctx context.Context, tenantID, userID string, groupIDs []string) ([]string, error)
}

// DefaultCacheTTL is how long a tenant's bindings, settings and policies
// are read from memory before the store is asked again. A change made
// through this Service is seen at once; one made by another replica within
// this time.
const DefaultCacheTTL = 5 * time.Second

// maxCachedTenants bounds the tenant cache.
const maxCachedTenants = 10_000

// Options configures New.
type Options struct {
	// Store keeps bindings, tenant settings and policy sets. Required.
	Store *store.Store
	// Groups looks group membership up; nil means none can be: a rule that
	// needs it (a group binding, a default limited to a group, a policy
	// naming a group) then fails closed with ErrUnavailable.
	Groups Groups
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// CacheTTL; zero means DefaultCacheTTL, negative no cache.
	CacheTTL time.Duration
}

// Service is the one place that answers "may this person do this". It is
// safe for concurrent use.
type Service struct {
	store  *store.Store
	groups Groups
	log    *slog.Logger
	now    func() time.Time
	ttl    time.Duration

	mu      sync.Mutex
	tenants map[string]*tenantState

	defaultPolicies *Policies
}

// tenantState is what one tenant's decisions read, loaded together.
type tenantState struct {
	settings store.TenantSettings
	bindings []store.Binding
	policies *Policies
	// policyErr is set when the stored text is refused (over a limit, or
	// it no longer parses): every invoke is then denied.
	policyErr error
	version   uint64 // of the stored policy set; 0: the default
	// groups are the Entra groups any rule of the tenant names: bindings,
	// the default's group, the policy text. Membership is looked up for
	// these only.
	groups []string
	// rules are the tenant's own data rules; rulesErr is set when the
	// stored ones no longer compile: every call is then refused.
	rules    Rules
	rulesErr error
	loadedAt time.Time
}

// New builds the Service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil {
		return nil, errors.New("access: Options.Store is required")
	}
	def, err := ParsePolicies(DefaultPolicyText)
	if err != nil {
		return nil, fmt.Errorf("access: default policy: %w", err)
	}
	s := &Service{
		store: opts.Store, groups: opts.Groups, log: opts.Logger, now: opts.Now, ttl: opts.CacheTTL,
		tenants: map[string]*tenantState{}, defaultPolicies: def,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.ttl == 0 {
		s.ttl = DefaultCacheTTL
	}
	return s, nil
}

// groupRef finds the groups a policy text names.
var groupRef = regexp.MustCompile(`Group::"([^"\\]{1,128})"`)

// tenant returns the tenant's state, from memory while it is fresh.
func (s *Service) tenant(ctx context.Context, tenantID string) (*tenantState, error) {
	now := s.now()
	s.mu.Lock()
	ts := s.tenants[tenantID]
	s.mu.Unlock()
	if ts != nil && s.ttl > 0 && now.Sub(ts.loadedAt) < s.ttl {
		return ts, nil
	}
	settings, err := s.store.TenantSettings(ctx, tenantID)
	if err != nil {
		return nil, fmt.Errorf("access: tenant %s settings: %w", tenantID, err)
	}
	bindings, err := s.store.Bindings(ctx, tenantID, "")
	if err != nil {
		return nil, fmt.Errorf("access: tenant %s bindings: %w", tenantID, err)
	}
	ts = &tenantState{settings: settings, bindings: bindings, policies: s.defaultPolicies, loadedAt: now}
	if ts.rules, err = (DataRules{DenyTools: settings.DenyTools, Redact: settings.Redact}).Compile(); err != nil {
		// Saved rules are checked first, so this is a file from a newer
		// or broken version: refuse every call rather than leak data.
		ts.rulesErr = fmt.Errorf("access: tenant %s data rules: %w", tenantID, err)
		s.log.Error("stored data rules do not compile; every tool call of the tenant is refused", "tenant", tenantID, "err", err)
	}
	switch ps, err := s.store.PolicySet(ctx, tenantID); {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, fmt.Errorf("access: tenant %s policies: %w", tenantID, err)
	default:
		ts.version = ps.Version
		if ts.policies, err = ParsePolicies(ps.Text); err != nil {
			// Saved texts are checked first, so this is a text saved
			// before a limit existed, or a file from a newer or broken
			// version: refuse every call of this tenant rather than guess.
			// The limits are checked before cedar-go parses, so a text
			// too deep for it costs nothing here.
			ts.policies, ts.policyErr = nil, err
			s.log.Error("stored policy set refused; every tool call of the tenant is denied until an admin saves a correct one",
				"tenant", tenantID, "err", err, "over_limit", errors.Is(err, ErrPolicyLimit))
		}
		for _, m := range groupRef.FindAllStringSubmatch(ps.Text, -1) {
			ts.groups = append(ts.groups, m[1])
		}
	}
	for _, b := range bindings {
		if b.Kind == store.KindGroup {
			ts.groups = append(ts.groups, b.Subject)
		}
	}
	if settings.DefaultGroup != "" {
		ts.groups = append(ts.groups, settings.DefaultGroup)
	}
	slices.Sort(ts.groups)
	ts.groups = slices.Compact(ts.groups)
	if s.ttl > 0 {
		s.mu.Lock()
		if len(s.tenants) >= maxCachedTenants {
			clear(s.tenants)
		}
		s.tenants[tenantID] = ts
		s.mu.Unlock()
	}
	return ts, nil
}

// forget drops a tenant's cached state after a change.
func (s *Service) forget(tenantID string) {
	s.mu.Lock()
	delete(s.tenants, tenantID)
	s.mu.Unlock()
}

// Grants are what a person holds for one agent. Read, Run and Admin come
// from app roles of the sign-in token or from role bindings (directly or
// through a group); OwnRuns from the tenant default, which makes every
// signed-in member a runner of their own runs. Groups are the groups, of
// those the tenant's rules name, that the person is a member of.
type Grants struct {
	Read, Run, Admin bool
	OwnRuns          bool
	Groups           []string
}

// Permissions are the permissions held, as Cedar's Role entities name
// them: the default's runner of their own runs counts as agents.read and
// agents.run.
func (g Grants) Permissions() []string {
	var out []string
	if g.Read || g.OwnRuns {
		out = append(out, PermRead)
	}
	if g.Run || g.OwnRuns {
		out = append(out, PermRun)
	}
	if g.Admin {
		out = append(out, PermAdmin)
	}
	return out
}

// Grants resolves what p holds for agentID (store.AllAgents: for the
// tenant as a whole). It looks group membership up only when a rule of
// the tenant names a group, and fails closed with ErrUnavailable when that
// cannot be done.
func (s *Service) Grants(ctx context.Context, p Person, agentID string) (Grants, error) {
	return s.resolve(ctx, p, agentID, nil)
}

// resolve is Grants with a test of what is enough for the question asked.
func (s *Service) resolve(ctx context.Context, p Person, agentID string, enough func(Grants) bool) (Grants, error) {
	if p.TenantID == "" || p.UserID == "" {
		return Grants{}, denied("", "who you are is not known (no tenant or user id)")
	}
	ts, err := s.tenant(ctx, p.TenantID)
	if err != nil {
		return Grants{}, err
	}
	return s.grants(ctx, p, agentID, ts, enough)
}

// grants resolves p's grants in two steps: app roles, user bindings and an
// unrestricted default first; group membership only when a rule of the
// tenant names a group and enough does not already hold (nil: always, as
// Cedar needs every group for its decision). So a tenant admin by app role
// can always undo a group rule, even while Graph cannot answer.
func (s *Service) grants(ctx context.Context, p Person, agentID string, ts *tenantState, enough func(Grants) bool) (Grants, error) {
	var g Grants
	for _, r := range p.Roles {
		switch r {
		case PermRead:
			g.Read = true
		case PermRun:
			g.Run = true
		case PermAdmin:
			g.Admin = true
		}
	}
	bind := func(kind string, member func(string) bool) {
		for _, b := range ts.bindings {
			if (b.AgentID != agentID && b.AgentID != store.AllAgents) || b.Kind != kind || !member(b.Subject) {
				continue
			}
			switch b.Role {
			case store.RoleReader:
				g.Read = true
			case store.RoleRunner:
				g.Run = true
			case store.RoleAdmin:
				g.Admin = true
			}
		}
	}
	bind(store.KindUser, func(id string) bool { return id == p.UserID })
	d := ts.settings
	if d.DefaultRunner && d.DefaultGroup == "" {
		g.OwnRuns = true
	}
	if len(ts.groups) == 0 || (enough != nil && enough(g)) {
		return g, nil
	}
	if s.groups == nil {
		return Grants{}, fmt.Errorf("%w: the tenant's rules name groups, and no Microsoft Graph access is configured", ErrUnavailable)
	}
	in, err := s.groups.MemberGroups(ctx, p.TenantID, p.UserID, ts.groups)
	if err != nil {
		return Grants{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	g.Groups = in
	bind(store.KindGroup, func(id string) bool { return slices.Contains(in, id) })
	if d.DefaultRunner && d.DefaultGroup != "" && slices.Contains(in, d.DefaultGroup) {
		g.OwnRuns = true
	}
	return g, nil
}

// whomToAsk ends every refusal that a tenant admin can lift.
const whomToAsk = "Ask an administrator of your organisation's Teams app to give you the role (an app role in Microsoft Entra ID, or a role binding in the bot's admin settings)."

// CanRun reports whether p may start a run of agentID: they hold agents.run,
// or the tenant default makes them a runner of their own runs.
func (s *Service) CanRun(ctx context.Context, p Person, agentID string) error {
	g, err := s.resolve(ctx, p, agentID, func(g Grants) bool { return g.Run || g.OwnRuns })
	if err != nil {
		return err
	}
	if !g.Run && !g.OwnRuns {
		return denied(PermRun, "using %s needs the %s role. %s", agentID, PermRun, whomToAsk)
	}
	return nil
}

// View is what the ownership rule needs of a view.
type View struct {
	ID, TenantID, UserID, AgentID string
}

// CanRead reports whether p may open v (its page, its API, its frames):
//
//   - nobody of another tenant, ever: ErrNotFound, as for an unknown view;
//   - a view of a run for a person: that person only, while they hold
//     agents.read or agents.run (the tenant default counts). Roles do not
//     widen this: an admin cannot open someone else's view;
//   - a view of a run without a person: the tenant's agent readers
//     (agents.read, from a role or a binding; the default does not make
//     anyone a reader).
func (s *Service) CanRead(ctx context.Context, p Person, v View) error {
	g, err := s.owner(ctx, p, v, func(g Grants) bool { return mayRead(g, v) == nil })
	if err != nil {
		return err
	}
	return mayRead(g, v)
}

func mayRead(g Grants, v View) error {
	switch {
	case v.UserID != "" && (g.Read || g.Run || g.OwnRuns):
		return nil
	case v.UserID != "":
		return denied(PermRead, "opening your views needs the %s or %s role. %s", PermRead, PermRun, whomToAsk)
	case g.Read:
		return nil
	default:
		return denied(PermRead, "views of runs without a person are for the tenant's agent readers (the %s role). %s", PermRead, whomToAsk)
	}
}

// CanCall reports whether p may call tools from v: whoever may open it and
// holds agents.run; for one's own view the tenant default counts. Each
// call is then decided by Invoke on the governed path.
func (s *Service) CanCall(ctx context.Context, p Person, v View) error {
	g, err := s.owner(ctx, p, v, func(g Grants) bool { return mayCall(g, v) == nil })
	if err != nil {
		return err
	}
	return mayCall(g, v)
}

func mayCall(g Grants, v View) error {
	if err := mayRead(g, v); err != nil {
		return err
	}
	if g.Run || (v.UserID != "" && g.OwnRuns) {
		return nil
	}
	return denied(PermRun, "running this view's tools needs the %s role. %s", PermRun, whomToAsk)
}

// owner applies the tenant and person parts of the ownership rule and
// returns the grants for the view's agent.
func (s *Service) owner(ctx context.Context, p Person, v View, enough func(Grants) bool) (Grants, error) {
	if p.TenantID == "" || v.TenantID == "" || p.TenantID != v.TenantID {
		return Grants{}, fmt.Errorf("view %s: %w", v.ID, ErrNotFound)
	}
	if v.UserID != "" && p.UserID != v.UserID {
		return Grants{}, &DeniedError{Reason: "this view is not yours: a view can be opened only by the person the agent answered"}
	}
	return s.resolve(ctx, p, v.AgentID, enough)
}

// RunWithoutPerson is the principal of the tool calls of a run that no
// person asked for (a trigger): User::"run-without-person", in the run's
// tenant, holding agents.run (whoever set the run up was entitled to). A
// tenant's policies can name it to allow or forbid such calls.
const RunWithoutPerson = "run-without-person"

// Call is one tool call for Invoke to decide.
type Call struct {
	// AgentID is the agent; AgentTenantID the tenant it runs for (the
	// person's for a run, the view's for a view's call).
	AgentID, AgentTenantID string
	Server, Tool           string
	// Caller is CallerModel or CallerView; ViewID the calling view.
	Caller, ViewID string
}

// Invoke decides one tool call of the governed path with the tenant's
// Cedar policies (its own set, or DefaultPolicyText, and always the
// platform rule). The Decision names the policies that decided, for the
// audit record. A refusal is a Decision that is not Allowed; an error
// means no decision could be made (Graph down, the store failing), and
// the call must not go ahead.
func (s *Service) Invoke(ctx context.Context, p Person, c Call) (Decision, error) {
	if p.TenantID == "" {
		return Decision{Errors: []string{"no tenant to decide for"}}, nil
	}
	ts, err := s.tenant(ctx, p.TenantID)
	if err != nil {
		return Decision{}, err
	}
	if ts.policyErr != nil {
		return Decision{Errors: []string{storedPoliciesRefused(ts.policyErr)}}, nil
	}
	principal, err := s.principal(ctx, p, c.AgentID, ts)
	if err != nil {
		return Decision{}, err
	}
	return ts.policies.Decide(c.by(principal)), nil
}

// storedPoliciesRefused says why every call of a tenant whose saved
// policies are refused is denied, and who can change that.
func storedPoliciesRefused(err error) string {
	return "the organisation's saved Cedar policies are refused (" + err.Error() +
		"), so every tool call is denied until an administrator corrects them on the Policies page of the admin console"
}

// principal is p as Cedar sees it, with every group any rule of the
// tenant names resolved; a run without a person is RunWithoutPerson.
func (s *Service) principal(ctx context.Context, p Person, agentID string, ts *tenantState) (Principal, error) {
	if p.UserID == "" {
		return Principal{TenantID: p.TenantID, UserID: RunWithoutPerson, Permissions: []string{PermRun}}, nil
	}
	g, err := s.grants(ctx, p, agentID, ts, nil)
	if err != nil {
		return Principal{}, err
	}
	return Principal{TenantID: p.TenantID, UserID: p.UserID, Groups: g.Groups, Permissions: g.Permissions()}, nil
}

// by is the call made by principal.
func (c Call) by(principal Principal) Invoke {
	return Invoke{Principal: principal, AgentID: c.AgentID, AgentTenantID: c.AgentTenantID,
		Server: c.Server, Tool: c.Tool, Caller: c.Caller, ViewID: c.ViewID}
}
