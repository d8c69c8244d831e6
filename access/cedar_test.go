package access

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const (
	tenantA = "11111111-1111-1111-1111-111111111111"
	tenantB = "22222222-2222-2222-2222-222222222222"
	userU   = "aaaaaaaa-0000-0000-0000-000000000001"
	groupG  = "99999999-0000-0000-0000-000000000001"
)

// invoke returns a model call by a run holder of tenant A on tenant A's
// agent; change tweaks it.
func invoke(change func(*Invoke)) Invoke {
	inv := Invoke{
		Principal: Principal{
			TenantID:    tenantA,
			UserID:      userU,
			Groups:      []string{groupG},
			Permissions: []string{PermRead, PermRun},
		},
		AgentID:       "helpdesk",
		AgentTenantID: tenantA,
		Server:        "crm",
		Tool:          "find_customer",
		Caller:        CallerModel,
	}
	if change != nil {
		change(&inv)
	}
	return inv
}

func withPerms(perms ...string) func(*Invoke) {
	return func(inv *Invoke) { inv.Principal.Permissions = perms }
}

func fromView(inv *Invoke) { inv.Caller, inv.ViewID = CallerView, "view-1" }

func mustParse(t testing.TB, text string) *Policies {
	t.Helper()
	p, err := ParsePolicies(text)
	if err != nil {
		t.Fatalf("ParsePolicies: %v\n%s", err, text)
	}
	return p
}

func TestDecide(t *testing.T) {
	const (
		noDelete = `@id("no-delete")
forbid (principal, action == Action::"invoke", resource)
when { context.tool == "delete_customer" };`
		noViews = `@id("no-views")
forbid (principal, action, resource) when { context.caller == "view" };`
		byGroup = `@id("support")
permit (principal in Group::"` + groupG + `", action == Action::"invoke", resource);`
		broken = `@id("broken")
forbid (principal, action, resource) when { context.nosuch == 1 };`
		// Every part of the request shape in the package doc, in one permit:
		// it matches only if each one is there with its documented value.
		contract = `@id("contract")
permit (principal == User::"` + userU + `", action == Action::"invoke", resource == Agent::"helpdesk")
when {
  principal.tenant == "` + tenantA + `" &&
  principal in Group::"` + groupG + `" &&
  principal in Role::"agents.read" &&
  principal in Role::"agents.admin" &&
  resource.tenant == "` + tenantA + `" &&
  resource.id == "helpdesk" &&
  context.server == "crm" &&
  context.tool == "find_customer" &&
  context.caller == "view" &&
  context.view == "view-1"
};`
	)
	tests := []struct {
		name         string
		text         string
		inv          Invoke
		wantAllowed  bool
		wantPolicies []string
		wantErrors   bool
	}{
		{
			name:         "default allows a holder of agents.run",
			text:         DefaultPolicyText,
			inv:          invoke(nil),
			wantAllowed:  true,
			wantPolicies: []string{"default.agents-run"},
		},
		{
			name: "default denies a reader without agents.run",
			text: DefaultPolicyText,
			inv:  invoke(withPerms(PermRead)),
		},
		{
			name: "default denies an admin without agents.run",
			text: DefaultPolicyText,
			inv:  invoke(withPerms(PermAdmin)),
		},
		{
			name: "forbid overrides permit",
			text: DefaultPolicyText + `
@id("not-this-user")
forbid (principal == User::"` + userU + `", action, resource);`,
			inv:          invoke(nil),
			wantPolicies: []string{"not-this-user"},
		},
		{
			name:         "forbid on a tool denies that tool",
			text:         DefaultPolicyText + "\n" + noDelete,
			inv:          invoke(func(inv *Invoke) { inv.Tool = "delete_customer" }),
			wantPolicies: []string{"no-delete"},
		},
		{
			name:         "forbid on a tool leaves the others",
			text:         DefaultPolicyText + "\n" + noDelete,
			inv:          invoke(nil),
			wantAllowed:  true,
			wantPolicies: []string{"default.agents-run"},
		},
		{
			name:         "forbid on view calls denies a view",
			text:         DefaultPolicyText + "\n" + noViews,
			inv:          invoke(fromView),
			wantPolicies: []string{"no-views"},
		},
		{
			name:         "forbid on view calls leaves the model",
			text:         DefaultPolicyText + "\n" + noViews,
			inv:          invoke(nil),
			wantAllowed:  true,
			wantPolicies: []string{"default.agents-run"},
		},
		{
			name:         "permit by group allows a member without agents.run",
			text:         byGroup,
			inv:          invoke(withPerms()),
			wantAllowed:  true,
			wantPolicies: []string{"support"},
		},
		{
			name: "permit by group denies a non-member",
			text: byGroup,
			inv:  invoke(func(inv *Invoke) { inv.Principal.Groups = []string{"other-group"} }),
		},
		{
			name:         "permit everything allows the same tenant",
			text:         `permit (principal, action, resource);`,
			inv:          invoke(nil),
			wantAllowed:  true,
			wantPolicies: []string{"policy0"},
		},
		{
			name:         "cross-tenant principal is denied by the platform rule",
			text:         `permit (principal, action, resource);`,
			inv:          invoke(func(inv *Invoke) { inv.Principal.TenantID = tenantB }),
			wantPolicies: []string{PlatformPolicyID},
		},
		{
			name:         "cross-tenant agent is denied by the platform rule",
			text:         DefaultPolicyText,
			inv:          invoke(func(inv *Invoke) { inv.AgentTenantID = tenantB }),
			wantPolicies: []string{PlatformPolicyID},
		},
		{
			name: "the platform rule comes first among the forbids",
			text: `@id("not-this-user")
forbid (principal == User::"` + userU + `", action, resource);`,
			inv:          invoke(func(inv *Invoke) { inv.Principal.TenantID = tenantB }),
			wantPolicies: []string{PlatformPolicyID, "not-this-user"},
		},
		{
			name:         "an erroring forbid denies what the default allows",
			text:         DefaultPolicyText + "\n" + broken,
			inv:          invoke(nil),
			wantPolicies: []string{"broken"},
			wantErrors:   true,
		},
		{
			name: "an erroring permit denies too",
			text: `@id("broken-permit")
permit (principal, action, resource) when { resource.nosuch == "x" };
permit (principal, action, resource);`,
			inv:          invoke(nil),
			wantPolicies: []string{"broken-permit"},
			wantErrors:   true,
		},
		{
			name:         "policies without @id are named by their place",
			text:         "forbid (principal, action, resource) when { context.server == \"hr\" };\n" + DefaultPolicyText + "\npermit (principal, action, resource) when { context.server == \"crm\" };",
			inv:          invoke(nil),
			wantAllowed:  true,
			wantPolicies: []string{"default.agents-run", "policy2"},
		},
		{
			name:         "the request has the documented shape",
			text:         contract,
			inv:          invoke(func(inv *Invoke) { fromView(inv); inv.Principal.Permissions = []string{PermRead, PermAdmin} }),
			wantAllowed:  true,
			wantPolicies: []string{"contract"},
		},
		{
			name: "an empty text permits nothing",
			text: "",
			inv:  invoke(nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustParse(t, tt.text).Decide(tt.inv)
			if got.Allowed != tt.wantAllowed {
				t.Errorf("Allowed = %v, want %v (decision %+v)", got.Allowed, tt.wantAllowed, got)
			}
			if !slices.Equal(got.Policies, tt.wantPolicies) {
				t.Errorf("Policies = %q, want %q", got.Policies, tt.wantPolicies)
			}
			if (len(got.Errors) > 0) != tt.wantErrors {
				t.Errorf("Errors = %q, want errors: %v", got.Errors, tt.wantErrors)
			}
		})
	}
}

func TestDecideErrorNamesThePolicy(t *testing.T) {
	p := mustParse(t, DefaultPolicyText+`
@id("broken")
forbid (principal, action, resource) when { context.nosuch == 1 };`)
	got := p.Decide(invoke(nil))
	if len(got.Errors) != 1 || !strings.Contains(got.Errors[0], `"broken"`) || !strings.Contains(got.Errors[0], "nosuch") {
		t.Errorf("Errors = %q, want one naming policy \"broken\" and attribute nosuch", got.Errors)
	}
}

func TestDecideRefusesIncompleteInvoke(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Invoke)
		want   string
	}{
		{"no user", func(inv *Invoke) { inv.Principal.UserID = "" }, "principal user id"},
		{"no principal tenant", func(inv *Invoke) { inv.Principal.TenantID = "" }, "principal tenant id"},
		{"no agent", func(inv *Invoke) { inv.AgentID = "" }, "agent id"},
		{"no agent tenant", func(inv *Invoke) { inv.AgentTenantID = "" }, "agent tenant id"},
		{"no server", func(inv *Invoke) { inv.Server = "" }, "server"},
		{"no tool", func(inv *Invoke) { inv.Tool = "" }, "tool"},
		{"no caller", func(inv *Invoke) { inv.Caller = "" }, "caller"},
		{"unknown caller", func(inv *Invoke) { inv.Caller = "trigger" }, `caller "trigger"`},
		{"view call without view", func(inv *Invoke) { inv.Caller = CallerView }, "view id"},
		{"model call with a view", func(inv *Invoke) { inv.ViewID = "view-1" }, "view id"},
		{"empty invoke", func(inv *Invoke) { *inv = Invoke{} }, "principal user id"},
	}
	// A policy that permits everything, so that only the checks can deny.
	p := mustParse(t, `permit (principal, action, resource);`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := p.Decide(invoke(tt.change))
			if got.Allowed {
				t.Fatalf("Allowed, want a deny: %+v", got)
			}
			if !slices.ContainsFunc(got.Errors, func(e string) bool { return strings.Contains(e, tt.want) }) {
				t.Errorf("Errors = %q, want one about %q", got.Errors, tt.want)
			}
		})
	}
}

func TestDecideWithoutPolicies(t *testing.T) {
	for name, p := range map[string]*Policies{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			got := p.Decide(invoke(nil))
			if got.Allowed || len(got.Errors) == 0 {
				t.Errorf("Decide = %+v, want a deny with an error", got)
			}
		})
	}
}

// Every refusal says where (line and column, or only the line when that
// is all that is known) and, in plain words with no package prefix, what
// was expected and what was found.
func TestParsePoliciesRefuses(t *testing.T) {
	const head = "permit (principal, action, resource)"
	tests := []struct {
		name     string
		text     string
		wantLine int
		wantCol  int
		want     string // the whole of Error()
	}{
		{
			// cedar-go points at ")", after the fault: the fault is
			// "resource", where a comma was expected.
			name: "syntax error on line 3",
			text: "permit (principal, action, resource);\n" +
				"// a comment\n" +
				"permit (principal, action resource);\n" +
				"permit (principal, action, resource);\n",
			wantLine: 3,
			wantCol:  27,
			want:     "line 3, column 27: expected `,` between principal, action and resource; found `resource`",
		},
		{
			// Here cedar-go's token is the fault; the column counts
			// characters, not bytes.
			name: "list without a comma on line 3",
			text: "permit (principal, action, resource);\n" +
				"\n" +
				"  permit (principal, action in [Action::\"é\" Action::\"b\"], resource);\n",
			wantLine: 3,
			wantCol:  45,
			want:     "line 3, column 45: expected `,` between two items, or the bracket that closes the list; found `Action`",
		},
		{
			// cedar-go itself points at ")" on line 5.
			name: "fault at the end of line 3",
			text: "permit (principal, action, resource);\n" +
				"permit (principal,\n" +
				"  action resource\n" +
				"\n" +
				");\n",
			wantLine: 3,
			wantCol:  10,
			want:     "line 3, column 10: expected `,` between principal, action and resource; found `resource`",
		},
		{
			name:     "missing semicolon before the next policy",
			text:     head + "\n" + head + ";\n",
			wantLine: 2,
			wantCol:  1,
			want:     "line 2, column 1: expected `;` after the policy's closing `)` or `}`; found `permit`",
		},
		{
			name: "unterminated string on line 3",
			text: head + "\n" +
				"when {\n" +
				"  context.tool == \"delete_customer\n" +
				"};\n",
			wantLine: 3,
			wantCol:  19,
			want:     "line 3, column 19: the string is not closed: add its closing `\"` on the same line",
		},
		{
			// cedar-go gives no position for this one.
			name: "integer out of range on line 3",
			text: head + "\n" +
				"when {\n" +
				"  context.tool == 99999999999999999999\n" +
				"};\n",
			wantLine: 3,
			wantCol:  19,
			want:     "line 3, column 19: the number `99999999999999999999` is out of range: Cedar's whole numbers go from -9223372036854775808 to 9223372036854775807",
		},
		{
			// Nor for these: the first string that has the escape is.
			name:     "escape only patterns may hold",
			text:     head + "\nwhen { context.tool like \"a\\*\" && context.tool == \"a\\*\" };\n",
			wantLine: 2,
			wantCol:  51,
			want:     "line 2, column 51: the string holds an escape Cedar cannot read: `\\*` is for `like` patterns only, `\\x` takes 00 to 7F, and `\\u{…}` one to six hex digits of a Unicode character",
		},
		{
			name:     "hex escape beyond ASCII",
			text:     head + "\nwhen { context.tool == \"\\x7f\" || context.tool == \"\\x80\" };\n",
			wantLine: 2,
			wantCol:  50,
			want:     "line 2, column 50: the string holds an escape Cedar cannot read: `\\*` is for `like` patterns only, `\\x` takes 00 to 7F, and `\\u{…}` one to six hex digits of a Unicode character",
		},
		{
			name:     "a surrogate in a pattern",
			text:     head + "\nwhen { context.tool like \"\\u{1F_600}*\" || context.tool like \"\\u{D800}\" };\n",
			wantLine: 2,
			wantCol:  61,
			want:     "line 2, column 61: the string holds an escape Cedar cannot read: `\\*` is for `like` patterns only, `\\x` takes 00 to 7F, and `\\u{…}` one to six hex digits of a Unicode character",
		},
		{
			name: "missing semicolon at the end",
			text: "permit (principal, action, resource);\n" +
				"\n" +
				"forbid (principal, action, resource)\n",
			wantLine: 3,
			wantCol:  37,
			want:     "line 3, column 37: expected `;` after the policy's closing `)` or `}`; found the end of the text",
		},
		{
			name:     "a value missing",
			text:     head + " when { context.tool == };",
			wantLine: 1,
			wantCol:  61,
			want:     "line 1, column 61: expected a value here: `principal`, `action`, `resource`, `context`, a quoted string, a number, `true`, `false`, an entity such as `Group::\"…\"`, or an expression in brackets; found `}`",
		},
		{
			name:     "an unknown method",
			text:     head + " when {\n  context.tool.startsWith(\"x\") };",
			wantLine: 2,
			wantCol:  16,
			want:     "line 2, column 16: `startsWith` is not a method Cedar knows (such as `contains`, `containsAll`, `containsAny` or `isEmpty`)",
		},
		{
			name:     "if without else",
			text:     head + " when { if context.caller == \"view\" then true };",
			wantLine: 1,
			wantCol:  83,
			want:     "line 1, column 83: expected `else`: an `if` needs `then` and `else`; found `}`",
		},
		{
			name:     "an effect Cedar does not have",
			text:     "allow (principal, action, resource);",
			wantLine: 1,
			wantCol:  1,
			want:     "line 1, column 1: expected `permit` or `forbid` to start a policy; found `allow`",
		},
		{
			name: "duplicate @id",
			text: DefaultPolicyText + "\n\n" +
				`@id("default.agents-run") forbid (principal, action, resource);`,
			wantLine: 4,
			wantCol:  1,
			want:     "line 4, column 1: the id `default.agents-run` is given to two policies (first on line 1): give each policy its own",
		},
		{
			name: "@id that is another policy's place",
			text: "@id(\"policy1\") permit (principal, action, resource);\n" +
				"permit (principal, action, resource);\n",
			wantLine: 2,
			wantCol:  1,
			want:     "line 2, column 1: the id `policy1` is given to two policies (first on line 1): give each policy its own",
		},
		{
			name:     "the platform rule's id",
			text:     "permit (principal, action, resource);\n  @id(\"" + PlatformPolicyID + "\") permit (principal, action, resource);",
			wantLine: 2,
			wantCol:  3,
			want:     "line 2, column 3: the id `platform.same-tenant` is kept for the platform's own rules (ids that start with `platform.`): choose another",
		},
		{
			name:     "another platform id",
			text:     `@id("platform.anything") permit (principal, action, resource);`,
			wantLine: 1,
			wantCol:  1,
			want:     "line 1, column 1: the id `platform.anything` is kept for the platform's own rules (ids that start with `platform.`): choose another",
		},
		{
			name:     "empty @id",
			text:     `@id("") permit (principal, action, resource);`,
			wantLine: 1,
			wantCol:  1,
			want:     "line 1, column 1: the policy's @id is empty: give it a name, such as `@id(\"no-deletes\")`",
		},
		{
			name:     "the platform rule itself",
			text:     PlatformPolicyText,
			wantLine: 1,
			wantCol:  1,
			want:     "line 1, column 1: the id `platform.same-tenant` is kept for the platform's own rules (ids that start with `platform.`): choose another",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicies(tt.text)
			if err == nil {
				t.Fatalf("ParsePolicies accepted it, ids %q", p.IDs())
			}
			var pe *PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T), want a *PolicyError", err, err)
			}
			if pe.Line != tt.wantLine || pe.Column != tt.wantCol {
				t.Errorf("Line, Column = %d, %d, want %d, %d (%v)", pe.Line, pe.Column, tt.wantLine, tt.wantCol, err)
			}
			if err.Error() != tt.want {
				t.Errorf("Error() =\n%s\nwant\n%s", err, tt.want)
			}
			if errors.Is(err, ErrPolicyLimit) {
				t.Errorf("a syntax fault is ErrPolicyLimit: %v", err)
			}
		})
	}
}

func TestTextAndIDs(t *testing.T) {
	text := `@id("b") permit (principal, action, resource);
forbid (principal, action, resource) when { context.tool == "x" };
@id("a") permit (principal, action, resource);`
	p := mustParse(t, text)
	if p.Text() != text {
		t.Errorf("Text() = %q, want the text as given", p.Text())
	}
	want := []string{"b", "policy1", "a"}
	if got := p.IDs(); !slices.Equal(got, want) {
		t.Errorf("IDs() = %q, want %q", got, want)
	}
	p.IDs()[0] = "changed"
	if got := p.IDs(); !slices.Equal(got, want) {
		t.Errorf("IDs() after changing a returned slice = %q, want %q", got, want)
	}
}

// tenPolicies is a plausible tenant set on top of the default: forbids on
// tools and views, group permits, conditions on every part of the request.
func tenPolicies() string {
	var b strings.Builder
	b.WriteString(DefaultPolicyText)
	for i := range 10 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "\n@id(\"no-tool-%d\")\nforbid (principal, action == Action::\"invoke\", resource)\nwhen { context.server == \"crm\" && context.tool == \"delete_%d\" };", i, i)
		case 1:
			fmt.Fprintf(&b, "\n@id(\"group-%d\")\npermit (principal in Group::\"group-%d\", action == Action::\"invoke\", resource == Agent::\"agent-%d\");", i, i, i)
		case 2:
			fmt.Fprintf(&b, "\n@id(\"view-%d\")\nforbid (principal, action, resource)\nwhen { context.caller == \"view\" && context.tool like \"admin_%d*\" };", i, i)
		case 3:
			fmt.Fprintf(&b, "\n@id(\"admins-%d\")\nforbid (principal, action, resource)\nwhen { resource.id == \"agent-%d\" } unless { principal in Role::\"agents.admin\" };", i, i)
		}
	}
	return b.String()
}

func TestTenPolicies(t *testing.T) {
	p := mustParse(t, tenPolicies())
	if n := len(p.IDs()); n != 11 {
		t.Fatalf("%d policies, want 11", n)
	}
	got := p.Decide(invoke(nil))
	if !got.Allowed || !slices.Equal(got.Policies, []string{"default.agents-run"}) || len(got.Errors) > 0 {
		t.Errorf("Decide = %+v, want allowed by default.agents-run", got)
	}
	got = p.Decide(invoke(func(inv *Invoke) { inv.Tool = "delete_4" }))
	if got.Allowed || !slices.Equal(got.Policies, []string{"no-tool-4"}) {
		t.Errorf("Decide(delete_4) = %+v, want denied by no-tool-4", got)
	}
}

func BenchmarkDecide(b *testing.B) {
	p := mustParse(b, tenPolicies())
	inv := invoke(nil)
	for b.Loop() {
		if d := p.Decide(inv); !d.Allowed {
			b.Fatalf("Decide = %+v, want allowed", d)
		}
	}
}
