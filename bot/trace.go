package bot

import (
	"context"
	"errors"
	"net/http"

	"github.com/infracloudio/msbotbuilder-go/schema"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/agent"
	"teamsbot/internal/telemetry"
	"teamsbot/internal/textclip"
)

// The bot's spans (docs/operations.md, "Traces"): one for each turn, in
// the trace of the request that brought its message, with a child for
// each call to the Bot Connector and for the commit of where the answer
// went; the agent adds the model's, the tools' and the run's commit below
// it. A span carries the activity's type, the conversation's kind, the
// tenant, the outcome, statuses and counts: never the text, a name, the
// bot's token or an activity's body.

// startTurn starts the span of a message's turn. The turn runs under the
// bot's life, as it outlives its request, in the request's trace.
func (b *Bot) startTurn(reqCtx context.Context, a *schema.Activity, p agent.Person) (context.Context, trace.Span) {
	ctx := b.ctx
	if sc := trace.SpanContextFromContext(reqCtx); sc.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, sc)
	}
	ctx, span := b.tracer.Start(ctx, "turn")
	if span.IsRecording() {
		span.SetAttributes(
			telemetry.ActivityType.String(textclip.Clip(string(a.Type), 32)),
			telemetry.ConversationKind.String(conversationKind(a)),
			telemetry.TenantID.String(textclip.Clip(p.TenantID, 64)))
	}
	return ctx, span
}

// startTriggered starts the span of a run without a person (RunTriggered),
// in the trace of its caller's context.
func (b *Bot) startTriggered(ctx context.Context, tenant string) (context.Context, trace.Span) {
	ctx, span := b.tracer.Start(ctx, "triggered run")
	if span.IsRecording() {
		span.SetAttributes(telemetry.TenantID.String(textclip.Clip(tenant, 64)))
	}
	return ctx, span
}

// endTurn notes how the turn of ctx ended: outcome is its metric's label,
// runID its run's id ("" when none ran).
func endTurn(ctx context.Context, outcome, runID string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(telemetry.TurnOutcome.String(outcome))
	if runID != "" {
		span.SetAttributes(telemetry.RunID.String(runID))
	}
	if outcome == "failed" {
		telemetry.Fail(span, "turn", "the turn failed: the person got no answer, or the failure card")
	}
}

// conversationKind is the conversation's type as Teams names it, or
// "other".
func conversationKind(a *schema.Activity) string {
	switch k := a.Conversation.ConversationType; k {
	case "personal", "groupChat", "channel":
		return k
	}
	return "other"
}

// startCall starts the span of one call to the Bot Connector: what it
// does (send, update or delete) and the activity's type.
func (c *connector) startCall(ctx context.Context, method string, body any) (context.Context, trace.Span) {
	op := "send"
	switch method {
	case http.MethodPut:
		op = "update"
	case http.MethodDelete:
		op = "delete"
	}
	tracer := c.tracer
	if tracer == nil { // a connector made without one, in tests
		tracer = telemetry.Tracer(nil, "")
	}
	ctx, span := tracer.Start(ctx, "bot connector "+op, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(telemetry.ConnectorOperation.String(op), telemetry.HTTPMethod.String(method))
		if a, ok := body.(*outActivity); ok {
			span.SetAttributes(telemetry.ActivityType.String(string(a.Type)))
		}
	}
	return ctx, span
}

// endCall ends a call's span with the Bot Connector's last status (0:
// none came) and the retries made; a call that failed says so in words
// of its own, never the connector's answer.
func endCall(span trace.Span, status, retries int, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if status != 0 {
		span.SetAttributes(telemetry.HTTPStatus.Int(status))
	}
	span.SetAttributes(telemetry.ConnectorRetries.Int(retries))
	switch {
	case err == nil:
	case errors.Is(err, ErrToken):
		telemetry.Fail(span, "token", "no bot token could be had")
	case errors.Is(err, ErrServiceURL):
		telemetry.Fail(span, "service_url", "the serviceUrl was refused")
	case errors.Is(err, ErrTooLarge):
		telemetry.Fail(span, "too_large", "Teams refused the message as too large")
	case errors.Is(err, ErrNotInConversation):
		telemetry.Fail(span, "not_in_conversation", "the bot is not in the conversation")
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		telemetry.Fail(span, "cancelled", "the call ran out of time")
	case status != 0:
		telemetry.Fail(span, "status", "the Bot Connector refused the call")
	default:
		telemetry.Fail(span, "unreachable", "the Bot Connector did not answer")
	}
}
