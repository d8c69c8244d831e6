package access_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"teamsbot/access"
	"teamsbot/store"
)

func TestCheckDenyRuleAndRedactPattern(t *testing.T) {
	for rule, ok := range map[string]bool{
		"export_all": true, "crm/delete_customer": true, "debug/*": true, "crm.v2/x-y_z": true,
		"": false, "  ": false, "*": false, "*/tool": false, "crm/": false, "/tool": false,
		"a/b/c": false, "crm/ delete": false, "crm/delete\x00": false, "crm\t/x": false,
	} {
		if err := access.CheckDenyRule(rule); (err == nil) != ok {
			t.Errorf("CheckDenyRule(%q) = %v, want ok %v", rule, err, ok)
		}
	}
	for pattern, ok := range map[string]bool{
		`\b\d{3}-\d{2}-\d{4}\b`: true, `(?i)secret`: true, `[a-z]+@example\.com`: true,
		"": false, `(`: false, `a*`: false, `x?`: false, `^`: false, `(?:)`: false,
	} {
		if _, err := access.CompileRedactPattern(pattern); (err == nil) != ok {
			t.Errorf("CompileRedactPattern(%q) = %v, want ok %v", pattern, err, ok)
		}
	}
}

// A tenant admin's own data rules: saved after every entry is checked,
// versioned, audited with before and after, in force at once for their
// tenant only, and kept apart from the other tenant settings.
func TestSetDataRules(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	rules := access.DataRules{DenyTools: []string{"crm/delete_customer", "debug/*"}, Redact: []string{`\b\d{3}-\d{2}-\d{4}\b`}}

	if err := e.svc.SetDataRules(ctx, person(tenantA, bob, access.PermRead, access.PermRun), rules, 0); missing(err) != access.PermAdmin {
		t.Errorf("a non-admin saved data rules: %v", err)
	}

	// Every bad entry is named at once, and nothing is saved.
	bad := access.DataRules{DenyTools: []string{"ok_tool", "a/b/c", "*"}, Redact: []string{`(`, `ok`, `.*`}}
	err := e.svc.SetDataRules(ctx, tenantAdmin, bad, 0)
	var re *access.RulesError
	if !errors.As(err, &re) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad rules: %v, want a RulesError that is ErrInvalid", err)
	}
	var named []string
	for _, p := range re.Problems {
		named = append(named, p[:strings.Index(p, ":")])
	}
	if want := []string{`denied tool 2 ("a/b/c")`, `denied tool 3 ("*")`, `redacted pattern 1 ("(")`, `redacted pattern 3 (".*")`}; !cmp.Equal(named, want) {
		t.Errorf("problems name %q, want %q (all: %q)", named, want, re.Problems)
	}
	if got, v, err := e.svc.TenantDataRules(ctx, tenantA); err != nil || v != 0 || len(got.DenyTools)+len(got.Redact) != 0 {
		t.Errorf("after refused rules: %+v version %d %v; want none at version 0", got, v, err)
	}

	if err := e.svc.SetDataRules(ctx, tenantAdmin, rules, 0); err != nil {
		t.Fatal(err)
	}
	got, version, err := e.svc.TenantDataRules(ctx, tenantA)
	if err != nil || version != 1 || !cmp.Equal(got, rules) {
		t.Errorf("TenantDataRules = %+v, %d, %v; want %+v at version 1", got, version, err, rules)
	}
	compiled, err := e.svc.TenantRules(ctx, tenantA)
	if err != nil || !cmp.Equal(compiled.Deny, rules.DenyTools) || len(compiled.Redact) != 1 || compiled.Redact[0].ReplaceAllString("ssn 123-45-6789", "X") != "ssn X" {
		t.Errorf("TenantRules = %+v, %v", compiled, err)
	}
	if other, err := e.svc.TenantRules(ctx, tenantB); err != nil || len(other.Deny)+len(other.Redact) != 0 {
		t.Errorf("tenant B has rules %+v (%v)", other, err)
	}

	// A save over a stale version loses; another setting saved since keeps
	// the rules, and the rules keep it.
	if err := e.svc.SetDataRules(ctx, tenantAdmin, access.DataRules{}, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("stale save: %v, want ErrConflict", err)
	}
	if err := e.svc.SetAppsEnabled(ctx, tenantAdmin, false); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := e.svc.TenantDataRules(ctx, tenantA); !cmp.Equal(got, rules) {
		t.Errorf("turning MCP Apps off changed the rules to %+v", got)
	}
	if err := e.svc.SetDataRules(ctx, tenantAdmin, access.DataRules{Redact: []string{"secret"}}, 2); err != nil {
		t.Fatal(err)
	}
	if e.svc.AppsEnabled(ctx, tenantA) {
		t.Error("saving rules turned MCP Apps back on")
	}
	if compiled, _ := e.svc.TenantRules(ctx, tenantA); len(compiled.Deny) != 0 || len(compiled.Redact) != 1 {
		t.Errorf("after the second save the rules in force are %+v", compiled)
	}

	recs, err := e.st.Audit(ctx, store.AuditQuery{TenantID: tenantA, Action: access.AuditDataRulesSet})
	if err != nil || len(recs) != 2 {
		t.Fatalf("data rules audit: %d records, %v", len(recs), err)
	}
	first := recs[0]
	if first.Actor != admin {
		t.Errorf("actor %q", first.Actor)
	}
	wantBefore := map[string]any{"denyTools": []any{}, "redact": []any{}}
	wantAfter := map[string]any{"denyTools": []any{"crm/delete_customer", "debug/*"}, "redact": []any{`\b\d{3}-\d{2}-\d{4}\b`}}
	if diff := cmp.Diff(map[string]any{"before": wantBefore, "after": wantAfter}, map[string]any{"before": first.Fields["before"], "after": first.Fields["after"]}); diff != "" {
		t.Errorf("first record's before and after (-want +got):\n%s", diff)
	}
	if !cmp.Equal(recs[1].Fields["before"], wantAfter) {
		t.Errorf("second record's before = %v, want the first save", recs[0].Fields["before"])
	}
}
