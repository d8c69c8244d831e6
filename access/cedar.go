package access

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cedar-policy/cedar-go"
)

// Who called a tool: the value of context.caller.
const (
	// CallerModel is a call the agent's model made.
	CallerModel = "model"
	// CallerView is a call an interactive view made (MCP Apps tools/call).
	CallerView = "view"
)

// The permissions a person can hold for an agent, as Entra app role values.
// Each one held is a Role parent of the principal.
const (
	// PermRead lets a person see an agent and the views its runs made.
	PermRead = "agents.read"
	// PermRun lets a person run an agent and call its tools.
	PermRun = "agents.run"
	// PermAdmin lets a person manage an agent and the tenant's policies.
	PermAdmin = "agents.admin"
)

// PlatformPolicyID is the id of the platform rule that is part of every
// policy set. Tenant policies may not use it, nor any id with its
// "platform." prefix.
const PlatformPolicyID = "platform.same-tenant"

// reservedPrefix marks the ids kept for the platform's own rules.
const reservedPrefix = "platform."

// PlatformPolicyText is the platform rule: nobody acts on another tenant's
// agent, whatever the tenant's own policies permit. It forbids every action,
// not only invoke, so that actions added later are covered too; the has
// checks keep it from failing (and so from being skipped) when an attribute
// is missing.
const PlatformPolicyText = `@id("` + PlatformPolicyID + `")
forbid (principal, action, resource)
unless { principal has tenant && resource has tenant && principal.tenant == resource.tenant };`

// DefaultPolicyText is the policy of a tenant that has written none: anyone
// holding agents.run may call the tools of the tenant's agents.
const DefaultPolicyText = `@id("default.agents-run")
permit (principal in Role::"` + PermRun + `", action == Action::"invoke", resource);`

// Entity types and the action, as named in the package doc.
const (
	typeUser   = cedar.EntityType("User")
	typeGroup  = cedar.EntityType("Group")
	typeRole   = cedar.EntityType("Role")
	typeAgent  = cedar.EntityType("Agent")
	typeAction = cedar.EntityType("Action")
)

var actionInvoke = cedar.NewEntityUID(typeAction, "invoke")

// Principal is the person (Entra tenant id and object id), the Entra groups
// they are in (object ids, already expanded) and the permissions they hold
// for the agent (PermRead, PermRun, PermAdmin).
type Principal struct {
	TenantID    string
	UserID      string
	Groups      []string
	Permissions []string
}

// Invoke is one tool call to decide: who calls, which agent (and the tenant
// that owns it), which server's tool, and whether the model or a view calls
// it. ViewID is the calling view's id and must be empty when the model calls.
type Invoke struct {
	Principal     Principal
	AgentID       string
	AgentTenantID string
	Server        string
	Tool          string
	Caller        string
	ViewID        string
}

// Decision is the answer for one Invoke. Policies holds the ids of the
// policies that decided it: the matching permits when it is allowed, the
// matching forbids and the policies that failed when it is denied, none
// when nothing matched. Errors holds why the request or a policy failed;
// a Decision with errors is never allowed.
type Decision struct {
	Allowed  bool
	Policies []string
	Errors   []string
}

// PolicyError is a policy text that is refused: it is over a limit
// (Err is ErrPolicyLimit), it does not parse, or a policy's id is a
// duplicate, empty or reserved. Line and Column are 1-based and locate the
// fault (for an id, the policy that carries it). Column is 0 when only the
// line is known and Line is 0 when neither is. Msg says in plain words
// what is wrong, and Error adds where: it carries no package prefix, so it
// can be shown to the admin as it is.
type PolicyError struct {
	Line   int
	Column int
	Msg    string
	// Err is ErrPolicyLimit for a text over a limit, nil otherwise.
	Err error
}

func (e *PolicyError) Error() string {
	switch {
	case e.Line == 0:
		return e.Msg
	case e.Column == 0:
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	default:
		return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
	}
}

// Unwrap makes errors.Is(err, ErrPolicyLimit) hold for a text over a
// limit.
func (e *PolicyError) Unwrap() error { return e.Err }

// Policies is the parsed, checked policy set of one tenant, with the
// platform rule added. It is immutable and safe for concurrent use.
type Policies struct {
	text string
	ids  []string // the tenant's ids, in the order of the text
	set  *cedar.PolicySet
	// rank orders reported ids: the platform rule first, then text order.
	rank map[cedar.PolicyID]int
}

// ParsePolicies parses a tenant's Cedar text and adds the platform rule.
// A text over one of the limits (MaxPolicyBytes, MaxPolicyNesting, ...),
// checked before cedar-go sees it, a text that does not parse, or one that
// gives two policies one id, an empty @id or a reserved one, is refused
// with a *PolicyError. An empty text is valid and permits nothing.
func ParsePolicies(text string) (*Policies, error) {
	if pe := checkPolicyLimits(text); pe != nil {
		return nil, pe
	}
	list, err := cedar.NewPolicyListFromBytes("", []byte(text))
	if err != nil {
		return nil, parseError(text, err)
	}
	platform, err := cedar.NewPolicyListFromBytes("platform", []byte(PlatformPolicyText))
	if err != nil || len(platform) != 1 {
		return nil, fmt.Errorf("access: the platform rule does not parse: %v", err)
	}

	p := &Policies{
		text: text,
		ids:  make([]string, 0, len(list)),
		set:  cedar.NewPolicySet(),
		rank: make(map[cedar.PolicyID]int, len(list)+1),
	}
	p.set.Add(PlatformPolicyID, platform[0])
	p.rank[PlatformPolicyID] = 0

	first := make(map[string]cedar.Position, len(list))
	for i, pol := range list {
		pos := pol.Position()
		id := "policy" + strconv.Itoa(i)
		if v, ok := pol.Annotations()["id"]; ok {
			id = string(v)
		}
		refuse := func(msg string) error {
			return &PolicyError{Line: pos.Line, Column: pos.Column, Msg: msg}
		}
		switch {
		case id == "":
			return nil, refuse("the policy's @id is empty: give it a name, such as `@id(\"no-deletes\")`")
		case strings.HasPrefix(id, reservedPrefix):
			return nil, refuse(fmt.Sprintf("the id `%s` is kept for the platform's own rules (ids that start with `%s`): choose another", id, reservedPrefix))
		}
		if prev, dup := first[id]; dup {
			return nil, refuse(fmt.Sprintf("the id `%s` is given to two policies (first on line %d): give each policy its own", id, prev.Line))
		}
		first[id] = pos
		p.ids = append(p.ids, id)
		p.set.Add(cedar.PolicyID(id), pol)
		p.rank[cedar.PolicyID(id)] = i + 1
	}
	return p, nil
}

// Text returns the tenant's policy text as it was parsed, without the
// platform rule.
func (p *Policies) Text() string { return p.text }

// IDs returns the ids of the tenant's policies in the order of the text. The
// platform rule, always present, is not among them.
func (p *Policies) IDs() []string { return slices.Clone(p.ids) }

// Decide evaluates one invoke against the tenant's policies and the
// platform rule. It never panics: an incomplete Invoke, or a nil or empty
// Policies, is denied with errors.
func (p *Policies) Decide(inv Invoke) Decision {
	if p == nil || p.set == nil {
		return Decision{Errors: []string{"access: no policy set"}}
	}
	if errs := inv.problems(); len(errs) > 0 {
		return Decision{Errors: errs}
	}
	entities, req := inv.request()
	decision, diag := p.set.IsAuthorized(entities, req)

	var d Decision
	if decision == cedar.Deny || len(diag.Errors) > 0 {
		// On a deny, Reasons are the matching forbids. On an allow that
		// failed closed, the permits did not decide, so they are left out.
		if decision == cedar.Deny {
			for _, r := range diag.Reasons {
				d.Policies = append(d.Policies, string(r.PolicyID))
			}
		}
		slices.SortFunc(diag.Errors, func(a, b cedar.DiagnosticError) int {
			return p.rank[a.PolicyID] - p.rank[b.PolicyID]
		})
		for _, e := range diag.Errors {
			d.Policies = append(d.Policies, string(e.PolicyID))
			d.Errors = append(d.Errors, fmt.Sprintf("policy %q: %s", e.PolicyID, e.Message))
		}
	} else {
		d.Allowed = true
		for _, r := range diag.Reasons {
			d.Policies = append(d.Policies, string(r.PolicyID))
		}
	}
	// Cedar walks its policies in map order; report them in a stable one.
	slices.SortFunc(d.Policies, func(a, b string) int {
		return p.rank[cedar.PolicyID(a)] - p.rank[cedar.PolicyID(b)]
	})
	return d
}

// problems lists what makes inv impossible to decide.
func (inv Invoke) problems() []string {
	var errs []string
	need := func(v, what string) {
		if v == "" {
			errs = append(errs, "access: invoke without "+what)
		}
	}
	need(inv.Principal.UserID, "a principal user id")
	need(inv.Principal.TenantID, "a principal tenant id")
	need(inv.AgentID, "an agent id")
	need(inv.AgentTenantID, "an agent tenant id")
	need(inv.Server, "a server")
	need(inv.Tool, "a tool")
	switch inv.Caller {
	case CallerModel:
		if inv.ViewID != "" {
			errs = append(errs, "access: a model call with a view id")
		}
	case CallerView:
		need(inv.ViewID, "a view id for a view call")
	default:
		errs = append(errs, fmt.Sprintf("access: invoke with caller %q, want %q or %q", inv.Caller, CallerModel, CallerView))
	}
	return errs
}

// request builds the entities and the Cedar request described in the
// package doc. Empty group ids and permissions are left out.
func (inv Invoke) request() (cedar.EntityMap, cedar.Request) {
	pr := inv.Principal
	entities := make(cedar.EntityMap, 2+len(pr.Groups)+len(pr.Permissions))
	parents := make([]cedar.EntityUID, 0, len(pr.Groups)+len(pr.Permissions))
	addParent := func(typ cedar.EntityType, id string) {
		if id == "" {
			return
		}
		uid := cedar.NewEntityUID(typ, cedar.String(id))
		entities[uid] = cedar.Entity{UID: uid}
		parents = append(parents, uid)
	}
	for _, g := range pr.Groups {
		addParent(typeGroup, g)
	}
	for _, perm := range pr.Permissions {
		addParent(typeRole, perm)
	}

	user := cedar.NewEntityUID(typeUser, cedar.String(pr.UserID))
	entities[user] = cedar.Entity{
		UID:        user,
		Parents:    cedar.NewEntityUIDSet(parents...),
		Attributes: cedar.NewRecord(cedar.RecordMap{"tenant": cedar.String(pr.TenantID)}),
	}
	agent := cedar.NewEntityUID(typeAgent, cedar.String(inv.AgentID))
	entities[agent] = cedar.Entity{
		UID: agent,
		Attributes: cedar.NewRecord(cedar.RecordMap{
			"tenant": cedar.String(inv.AgentTenantID),
			"id":     cedar.String(inv.AgentID),
		}),
	}
	return entities, cedar.Request{
		Principal: user,
		Action:    actionInvoke,
		Resource:  agent,
		Context: cedar.NewRecord(cedar.RecordMap{
			"server": cedar.String(inv.Server),
			"tool":   cedar.String(inv.Tool),
			"caller": cedar.String(inv.Caller),
			"view":   cedar.String(inv.ViewID),
		}),
	}
}
