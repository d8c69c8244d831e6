package access

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"teamsbot/store"
)

// AuditDataRulesSet is the audit action of a change of a tenant's own
// data rules.
const AuditDataRulesSet = "admin.datarules.set"

// DataRules are data rules as people write them: tools no call may reach
// ("tool", "server/tool" or "server/*"), and regular expressions (Go
// syntax) whose matches are replaced in tool results before the model or a
// view sees them. The configuration file gives each agent some; a tenant
// admin adds the tenant's own, which apply to every agent of the tenant.
type DataRules struct {
	DenyTools []string `json:"denyTools"`
	Redact    []string `json:"redact"`
}

// Rules are a tenant's data rules, compiled for the governed call path.
type Rules struct {
	Deny   []string
	Redact []*regexp.Regexp
}

// CheckDenyRule says what is wrong with one denyTools entry, or nil.
func CheckDenyRule(d string) error {
	if strings.TrimSpace(d) == "" {
		return errors.New("empty: use tool, server/tool or server/*")
	}
	if strings.IndexFunc(d, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errors.New("has a space or a control character: use tool, server/tool or server/*")
	}
	server, tool, scoped := strings.Cut(d, "/")
	switch {
	case !scoped && d == "*":
		return errors.New(`"*" alone would name a tool called "*": use server/* for every tool of a server`)
	case !scoped:
		return nil
	case server == "" || tool == "" || strings.Contains(tool, "/"):
		return errors.New("use tool, server/tool or server/*")
	case server == "*":
		return errors.New("name the server: a bare tool name already matches the tool on every server")
	}
	return nil
}

// CompileRedactPattern compiles one redact entry. A pattern that matches
// the empty string is refused: it would put the replacement between every
// two characters of every result.
func CompileRedactPattern(p string) (*regexp.Regexp, error) {
	if p == "" {
		return nil, errors.New("empty pattern")
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	if re.MatchString("") {
		return nil, errors.New("matches the empty string, so it would redact between every two characters")
	}
	return re, nil
}

// RulesError is data rules refused, with every problem found, each
// naming its entry. It is a store.ErrInvalid: nothing was saved.
type RulesError struct {
	Problems []string
}

func (e *RulesError) Error() string { return "data rules: " + strings.Join(e.Problems, "; ") }

// Unwrap makes a RulesError a store.ErrInvalid.
func (e *RulesError) Unwrap() error { return store.ErrInvalid }

// Compile checks every entry and compiles the rules; a *RulesError names
// every bad entry by its list, position and text.
func (r DataRules) Compile() (Rules, error) {
	var problems []string
	out := Rules{Deny: r.DenyTools}
	for i, d := range r.DenyTools {
		if err := CheckDenyRule(d); err != nil {
			problems = append(problems, fmt.Sprintf("denied tool %d (%q): %v", i+1, d, err))
		}
	}
	for i, p := range r.Redact {
		re, err := CompileRedactPattern(p)
		if err != nil {
			problems = append(problems, fmt.Sprintf("redacted pattern %d (%q): %v", i+1, p, err))
			continue
		}
		out.Redact = append(out.Redact, re)
	}
	if problems != nil {
		return Rules{}, &RulesError{Problems: problems}
	}
	return out, nil
}

// TenantDataRules returns tenantID's own data rules as the admin saved
// them, and the version of the tenant's settings they belong to (0: never
// saved), for an edit that SetDataRules then checks.
func (s *Service) TenantDataRules(ctx context.Context, tenantID string) (DataRules, uint64, error) {
	ts, err := s.store.TenantSettings(ctx, tenantID)
	if err != nil {
		return DataRules{}, 0, fmt.Errorf("access: data rules of %s: %w", tenantID, err)
	}
	return DataRules{DenyTools: ts.DenyTools, Redact: ts.Redact}, ts.Version, nil
}

// SetDataRules replaces the admin's tenant's own data rules after checking
// every entry (a *RulesError naming each bad one: nothing is saved then), and audits the change with the rules before and after.
// wantVersion is the settings version the admin edited
// (TenantDataRules'); store.ErrConflict (wrapped) means another admin
// changed the settings in between. The rules take effect at once on this
// replica and within the cache's lifetime on others.
func (s *Service) SetDataRules(ctx context.Context, admin Person, r DataRules, wantVersion uint64) error {
	if err := s.requireAdmin(ctx, admin, store.AllAgents); err != nil {
		return err
	}
	if _, err := r.Compile(); err != nil {
		return err
	}
	cur, err := s.store.TenantSettings(ctx, admin.TenantID)
	if err != nil {
		return fmt.Errorf("access: set data rules: %w", err)
	}
	next := cur
	next.DenyTools, next.Redact, next.UpdatedBy = r.DenyTools, r.Redact, admin.UserID
	rec := store.AuditRecord{TenantID: admin.TenantID, Action: AuditDataRulesSet, Actor: admin.UserID, Fields: map[string]any{
		"before": DataRules{DenyTools: nonNil(cur.DenyTools), Redact: nonNil(cur.Redact)},
		"after":  DataRules{DenyTools: nonNil(r.DenyTools), Redact: nonNil(r.Redact)},
	}}
	if _, err := s.store.PutTenantSettings(ctx, next, wantVersion, rec); err != nil {
		return fmt.Errorf("access: set data rules: %w", err)
	}
	s.forget(admin.TenantID)
	return nil
}

// TenantRules returns the compiled data rules tenantID's admins added, for
// every tool call of the tenant. An error means they cannot be known: the
// caller must refuse the call rather than run it unredacted.
func (s *Service) TenantRules(ctx context.Context, tenantID string) (Rules, error) {
	ts, err := s.tenant(ctx, tenantID)
	if err != nil {
		return Rules{}, err
	}
	return ts.rules, ts.rulesErr
}

// nonNil makes an empty list read as [] in audit records, not null.
func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
