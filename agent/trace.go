package agent

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/internal/telemetry"
)

// The agent's spans (docs/operations.md, "Traces"), children of the
// caller's (a turn, a view's request): each model call, each tool call on
// the governed path and the commit of a run. They carry names, counts and
// outcomes: never the prompt, the answer, a tool's arguments or result, a
// server's error text, a key or a header.

// askModel asks the run's model for its next step, in a span of its own:
// the model's kind and name, whether the answer streams, the round, the
// tool calls asked and, when the model's server says, the tokens. A model
// that is not an asker answers here (answered); an asker's reply goes to
// later, on the asker's goroutine, and askModel returns at once.
func (r *runState) askModel(ctx context.Context, t Turn, round int, later func(Message, error)) (reply Message, answered bool, err error) {
	ctx, span := r.startModelSpan(ctx)
	streamed := t.Stream != nil
	if m, ok := r.agent.model.(asker); ok {
		m.Ask(ctx, t, func(reply Message, err error) {
			endModelSpan(span, &r.agent.cfg.Model, streamed, round, len(reply.ToolCalls), err)
			later(reply, err)
		})
		return Message{}, false, nil
	}
	reply, err = r.agent.model.Next(ctx, t)
	endModelSpan(span, &r.agent.cfg.Model, streamed, round, len(reply.ToolCalls), err)
	return reply, true, err
}

// startModelSpan starts the span of a model call. It and endModelSpan
// are apart from askModel, whose frame stays on the stack of a run whose
// model answers on the run's goroutine.
//
//go:noinline
func (r *runState) startModelSpan(ctx context.Context) (context.Context, trace.Span) {
	spanKind := trace.SpanKindInternal // the built-in model runs in the process
	if r.agent.cfg.Model.Kind == ModelOpenAI {
		spanKind = trace.SpanKindClient
	}
	return r.svc.tracer.Start(ctx, "chat", trace.WithSpanKind(spanKind))
}

// endModelSpan describes a model call on its span, and ends it.
//
//go:noinline
func endModelSpan(span trace.Span, m *ModelConfig, streamed bool, round, toolCalls int, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	kind := m.Kind
	if kind == "" {
		kind = ModelBuiltin
	}
	span.SetAttributes(telemetry.GenAIOperation.String("chat"), telemetry.ModelKind.String(kind),
		telemetry.ModelStreamed.Bool(streamed), telemetry.ModelRound.Int(round),
		telemetry.ModelToolCalls.Int(toolCalls))
	if m.Model != "" {
		span.SetName("chat " + m.Model)
		span.SetAttributes(telemetry.GenAIModel.String(m.Model))
	}
	if err != nil {
		telemetry.Fail(span, "model", "the model could not answer")
	}
}

// noteUsage puts the tokens a model's server counted on the span of ctx,
// the model call's.
func noteUsage(ctx context.Context, input, output int64) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() && input+output > 0 {
		span.SetAttributes(telemetry.GenAIInputTokens.Int64(input), telemetry.GenAIOutputTokens.Int64(output))
	}
}

// startToolCall starts the span of a call on the governed path: the
// server as configured, the tool, and who calls (the model or a view).
func (s *Service) startToolCall(ctx context.Context, g governedCall) (context.Context, trace.Span) {
	ctx, span := s.tracer.Start(ctx, "execute_tool")
	if span.IsRecording() {
		caller := "model"
		if g.call.fromView {
			caller = "view"
		}
		span.SetName("execute_tool " + g.call.tool)
		span.SetAttributes(telemetry.GenAIOperation.String("execute_tool"), telemetry.MCPMethod.String("tools/call"),
			telemetry.GenAIToolName.String(g.call.tool), telemetry.MCPServer.String(g.conn.name), telemetry.ToolCaller.String(caller))
	}
	return ctx, span
}

// endToolCall ends a call's span with the access decision (when one was
// asked), the result (ResultOK, ResultError or ResultRefused) and, for a
// call that did not succeed, why by name (callReason).
func endToolCall(span trace.Span, d decision, result string, res *mcp.CallToolResult, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.ToolResult.String(result))
	if d.outcome != "" {
		span.SetAttributes(telemetry.ToolDecision.String(d.outcome))
	}
	reason := callReason(d, res, err)
	if reason != "" {
		span.SetAttributes(telemetry.ToolReason.String(reason))
	}
	if result == ResultError {
		telemetry.Fail(span, reason, "the tool call failed")
	}
}

// callReason names why a call did not succeed, from a fixed list; "" for
// one that did.
func callReason(d decision, res *mcp.CallToolResult, err error) string {
	switch {
	case err == nil && res != nil && res.IsError:
		return "tool_error"
	case err == nil:
		return ""
	case errors.Is(err, ErrDenied) && d.outcome == decisionDeny:
		return "policy"
	case errors.Is(err, ErrDenied) && d.outcome == decisionNone:
		return "no_decision"
	case errors.Is(err, ErrDenied):
		return "data_rule"
	case errors.Is(err, ErrBadRequest):
		return "bad_arguments"
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "call_failed"
}

// endStore ends a commit's span, failed when err is set.
func endStore(span trace.Span, err error) {
	if err != nil {
		telemetry.Fail(span, "store", "the commit failed")
	}
	span.End()
}
