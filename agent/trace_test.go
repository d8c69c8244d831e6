package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"teamsbot/access"
	"teamsbot/agent"
)

// Each call on the governed path is a span under the caller's: the server,
// the tool, who called, the Cedar decision, the result and, for a call
// that did not succeed, why by name. A denial by a policy, one by a data
// rule, a tool's own error, a timeout and an allowed call each say so; a
// failed call is failed with the service's words. Nothing of the
// arguments, the result or the server's error text is in any span. The
// run's model call and commit are spans under the caller's too.
func TestToolCallSpans(t *testing.T) {
	var g govServer
	st := openStore(t)
	ax, err := access.New(access.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	admin := access.Person{TenantID: alice.TenantID, UserID: "user-admin", Roles: []string{access.PermAdmin}}
	ctx := context.Background()
	if _, err := ax.SetPolicies(ctx, admin, access.DefaultPolicyText+`
@id("nobody-leaks")
forbid (principal, action, resource) when { context.tool == "leaky" };
`, 0); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := newService(t, govConfig("200ms"), agent.Options{Store: st, AppsEnabled: true, Access: ax, TracerProvider: tp,
		Builtins: map[string]func() *mcp.Server{"gov": g.new}})

	type want struct{ decision, result, reason string }
	for _, c := range []struct {
		ask  string
		tool string
		want want
	}{
		{"/leaky {}", "leaky", want{"deny", "refused", "policy"}},
		{"/danger {}", "danger", want{"", "refused", "data_rule"}},
		{"/fails {}", "fails", want{"allow", "error", "tool_error"}},
		{"/slow {}", "slow", want{"allow", "error", "timeout"}},
		{`/secret {"note":"arg-Bilby-3390"}`, "secret", want{"allow", "ok", ""}},
	} {
		rec.Reset()
		turn, span := tp.Tracer("test").Start(ctx, "turn")
		if _, err := s.Run(turn, agent.Request{Person: alice, Text: c.ask}); err != nil {
			t.Fatalf("%s: %v", c.ask, err)
		}
		span.End()
		var call, commit sdktrace.ReadOnlySpan
		var models []sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			switch {
			case strings.HasPrefix(sp.Name(), "execute_tool"):
				call = sp
			case sp.Name() == "chat":
				models = append(models, sp)
			case strings.HasPrefix(sp.Name(), "store SaveRun"):
				commit = sp
			}
		}
		// The built-in model calls the tool, then answers from its result.
		if call == nil || len(models) != 2 || commit == nil {
			t.Fatalf("%s: spans %v", c.ask, names(rec.Ended()))
		}
		for _, sp := range []sdktrace.ReadOnlySpan{call, models[0], models[1], commit} {
			if sp.Parent().SpanID() != span.SpanContext().SpanID() {
				t.Errorf("%s: %s is not under the caller's span", c.ask, sp.Name())
			}
		}
		got := attrsOf(call)
		if call.Name() != "execute_tool "+c.tool || got["gen_ai.tool.name"] != c.tool || got["teamsbot.mcp.server"] != "gov" ||
			got["teamsbot.tool.caller"] != "model" || got["teamsbot.tool.decision"] != c.want.decision ||
			got["teamsbot.tool.result"] != c.want.result || got["teamsbot.tool.reason"] != c.want.reason {
			t.Errorf("%s: %q %v, want %+v", c.ask, call.Name(), got, c.want)
		}
		if failed := call.Status().Code == codes.Error; failed != (c.want.result == "error") || (failed && call.Status().Description != "the tool call failed") {
			t.Errorf("%s: status %v", c.ask, call.Status())
		}
		if m := attrsOf(models[0]); m["teamsbot.model.kind"] != "builtin" || m["teamsbot.model.streamed"] != "false" ||
			m["teamsbot.model.round"] != "0" || m["teamsbot.model.tool_calls"] != "1" || models[0].SpanKind().String() != "internal" {
			t.Errorf("%s: the first model call's span %v", c.ask, m)
		}
		for _, sp := range rec.Ended() {
			for k, v := range attrsOf(sp) {
				if strings.Contains(v, "Bilby") || strings.Contains(v, secretCard) || strings.Contains(v, "backend is down") || strings.Contains(v, "denyTools") {
					t.Errorf("%s: %s of %s is %q", c.ask, k, sp.Name(), v)
				}
			}
		}
	}
}

func attrsOf(sp sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range sp.Attributes() {
		m[string(kv.Key)] = kv.Value.Emit()
	}
	return m
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, sp.Name())
	}
	return out
}
