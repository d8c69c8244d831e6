// Package access decides whether a person may call an agent's tool. It owns
// the Cedar policies of each tenant: it parses and checks the text a tenant
// admin writes, adds the platform's own rule to it, builds the Cedar request
// for one tool call and turns Cedar's answer into a Decision. It will become
// the one place that answers "may this person do this".
//
// It does not find out who the person is, which groups they are in or which
// app roles they hold (sign-in and Graph do that and fill a Principal), it
// does not store policies, and it does not audit decisions: callers keep the
// Decision, its policy ids and errors in the audit log.
//
// # The request policies are written against
//
// This is the contract for tenant admins; changing it breaks their policies.
//
//	principal  User::"<Entra object id>", or User::"run-without-person"
//	           for a run no person asked for
//	             attributes: tenant (string, the Entra tenant id)
//	             parents:    Group::"<group object id>" for each group,
//	                         Role::"agents.read", Role::"agents.run",
//	                         Role::"agents.admin" for each permission held
//	action     Action::"invoke"  (one tool call)
//	resource   Agent::"<agent id>"
//	             attributes: tenant (string, the tenant that owns the agent),
//	                         id (string, the agent id)
//	context    server (string): the MCP server that offers the tool
//	           tool   (string): the tool's name
//	           caller (string): "model" (the agent's model called it) or
//	                            "view" (an interactive view called it)
//	           view   (string): the view's id; "" when caller is "model"
//
// Ids are GUIDs or other immutable ids, never display names. Tenant ids are
// compared exactly. Group and Role entities carry no attributes and no
// parents of their own: nested groups must already be expanded into
// Principal.Groups.
//
// For example, the default policy and two rules a tenant might add:
//
//	@id("default.agents-run")
//	permit (principal in Role::"agents.run", action == Action::"invoke", resource);
//
//	@id("no-deletes-from-views")
//	forbid (principal, action == Action::"invoke", resource)
//	when { context.caller == "view" && context.tool == "delete_customer" };
//
//	@id("support-may-run-helpdesk")
//	permit (principal in Group::"6f1c...", action == Action::"invoke", resource == Agent::"helpdesk");
//
// # How a decision is made
//
// Cedar's rules apply: nothing is allowed unless a permit matches, and any
// matching forbid wins over every permit. On top of them:
//
//   - Every set holds the platform rule PlatformPolicyID (PlatformPolicyText),
//     which forbids everything unless the principal's tenant is the agent's
//     tenant. A tenant cannot remove, replace or reuse its id: ids that start
//     with "platform." are refused.
//   - A policy is reported by its @id annotation, or else by its place in the
//     text as policy0, policy1, .... Two policies with one id are refused.
//   - Fail closed: Cedar skips a policy whose evaluation fails (an attribute
//     that is not there, a type mismatch), which could silently drop a
//     forbid. Here any such failure makes the decision a deny, with the
//     failing policies in Decision.Policies and their messages in
//     Decision.Errors.
//   - An Invoke with a missing principal, tenant, agent, server or tool, or
//     a caller that is neither "model" nor "view", is denied with an error.
//
// # Limits of a policy text
//
// cedar-go's parser and compiler recurse without a bound of their own, so
// a text is checked against MaxPolicyBytes, MaxPolicyNesting,
// MaxPolicyDepth, MaxPolicyHasPath, MaxPolicyNamePath and MaxPolicyPattern
// before cedar-go sees it, wherever it comes from: a save, the tester, or
// a tenant's saved text when it is loaded. A saved text over a limit denies
// every call of its tenant until an admin saves a correct one.
package access
