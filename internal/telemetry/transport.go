package telemetry

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport returns base with the trace context of each request's context
// put on the request (traceparent, W3C Trace Context), so that the MCP
// server or the model it goes to can join its own spans to the call's. It
// returns base itself when p is nil (tracing off), and a nil base is Go's
// default transport. A request outside any span goes as it is.
func Transport(base http.RoundTripper, p propagation.TextMapPropagator) http.RoundTripper {
	if p == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &propagating{base: base, p: p}
}

// propagating is Transport's round tripper.
type propagating struct {
	base http.RoundTripper
	p    propagation.TextMapPropagator
}

// RoundTrip implements http.RoundTripper. The request is copied before a
// header is added: a RoundTripper must not change the one it is given.
func (t *propagating) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return t.base.RoundTrip(req)
	}
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = http.Header{}
	}
	t.p.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(&r)
}

// LogHandler returns h with the ids of the span of each record's context
// added to the record, as trace_id and span_id, so that a log line of a
// turn or a request leads to its trace. A record logged without a
// context, or outside a span, is written as it is.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

// Handle implements slog.Handler.
func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}

// WithGroup implements slog.Handler.
func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.Handler.WithGroup(name)}
}
