package web

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/internal/telemetry"
)

// Trace makes a span of each request, named by its method and its route
// as registered ("GET /mcp-apps/:id"), never by its path: a path and its
// query may hold what opens something (a view's id, a frame's token, a
// sign-in's code). The span carries the method, the route and the status,
// and is failed for a 5xx. The request's context carries the span, so
// that the request log line and the spans of what the handler calls (a
// view's tool call) join it.
//
// The service faces the internet: a traceparent a caller sends does not
// make its span their span's child (anyone could make the service's
// traces join theirs, or pick its trace ids), it is only linked. Routes
// named in skip (the probes) make no span, nor does a nil tp.
//
// It writes an error's answer itself (the error handler), as RequestLog
// does, so that the span has the status the caller got.
func Trace(tp trace.TracerProvider, p propagation.TextMapPropagator, skip ...string) echo.MiddlewareFunc {
	if tp == nil {
		return func(next echo.HandlerFunc) echo.HandlerFunc { return next }
	}
	tracer := tp.Tracer("teamsbot/internal/web")
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			route := c.Path()
			if slices.Contains(skip, route) {
				return next(c)
			}
			r := c.Request()
			method := methodName(r.Method)
			name := method
			opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(semconv.HTTPRequestMethodKey.String(method))}
			if route != "" {
				name += " " + route
				opts = append(opts, trace.WithAttributes(semconv.HTTPRoute(route)))
			}
			if p != nil {
				if sc := trace.SpanContextFromContext(p.Extract(r.Context(), propagation.HeaderCarrier(r.Header))); sc.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
				}
			}
			ctx, span := tracer.Start(r.Context(), name, opts...)
			defer span.End()
			c.SetRequest(r.WithContext(ctx))
			err := next(c)
			if err != nil && !c.Response().Committed {
				c.Error(err)
			}
			status := c.Response().Status
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
			if status >= 500 {
				telemetry.Fail(span, strconv.Itoa(status), http.StatusText(status))
			}
			return err
		}
	}
}

// methodName is the method as the semantic conventions name it: one of
// HTTP's own, or _OTHER, so that a caller cannot make spans of any name.
func methodName(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "_OTHER"
}
