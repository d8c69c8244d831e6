package web

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"teamsbot/internal/telemetry"
)

// Each request is a server span named by its route, never its path; it
// has the status the caller got, also when a handler returned an error,
// and is failed for a 5xx only. A traceparent from the caller is a link,
// never the parent. The request log line names the span. Skipped routes
// make none.
func TestTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	var logs bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&logs, nil)))
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(logger)
	e.Use(Trace(tp, propagation.TraceContext{}, "/healthz"))
	e.Use(RequestLog(logger))
	e.GET("/mcp-apps/:id", func(c echo.Context) error { return c.String(http.StatusOK, "page") })
	e.GET("/api/mcp-apps/:id", func(echo.Context) error { return NewError(http.StatusForbidden, "Not yours.") })
	e.POST("/api/mcp-apps/:id/call", func(echo.Context) error { return errors.New("the server broke: token sk-1") })
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/mcp-apps/view-secret-id?token=t0ken"},
		{http.MethodGet, "/api/mcp-apps/view-secret-id"},
		{http.MethodPost, "/api/mcp-apps/view-secret-id/call"},
		{http.MethodGet, "/healthz"},
		{"BREW", "/nowhere"},
	} {
		req := httptest.NewRequest(r.method, r.path, nil)
		req.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
		e.ServeHTTP(httptest.NewRecorder(), req)
	}
	spans := rec.Ended()
	type want struct {
		name, route string
		status      int
		failed      bool
	}
	wants := []want{
		{"GET /mcp-apps/:id", "/mcp-apps/:id", 200, false},
		{"GET /api/mcp-apps/:id", "/api/mcp-apps/:id", 403, false},
		{"POST /api/mcp-apps/:id/call", "/api/mcp-apps/:id/call", 500, true},
		{"_OTHER", "", 404, false},
	}
	if len(spans) != len(wants) {
		t.Fatalf("%d spans, want %d", len(spans), len(wants))
	}
	for i, s := range spans {
		w := wants[i]
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		if s.Name() != w.name || got["http.route"] != w.route || got["http.response.status_code"] != strconv.Itoa(w.status) {
			t.Errorf("span %d: %q %v, want %+v", i, s.Name(), got, w)
		}
		if (s.Status().Code == codes.Error) != w.failed || strings.Contains(s.Status().Description, "sk-1") {
			t.Errorf("%s: status %v", s.Name(), s.Status())
		}
		if s.Parent().IsValid() || s.SpanContext().TraceID().String() == callerTrace {
			t.Errorf("%s: the caller's traceparent made its parent", s.Name())
		}
		if len(s.Links()) != 1 || s.Links()[0].SpanContext.TraceID().String() != callerTrace {
			t.Errorf("%s: links %v, want the caller's", s.Name(), s.Links())
		}
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "view-secret-id") || strings.Contains(kv.Value.Emit(), "t0ken") {
				t.Errorf("%s: the path or query is in %s", s.Name(), kv.Key)
			}
		}
	}
	// The request log and the error handler's line name the span.
	first := spans[0].SpanContext()
	if !strings.Contains(logs.String(), `"trace_id":"`+first.TraceID().String()+`","span_id":"`+first.SpanID().String()+`"`) {
		t.Errorf("no log line names the first request's span:\n%s", logs.String())
	}
	failed := spans[2].SpanContext().TraceID().String()
	if !strings.Contains(logs.String(), `"msg":"request failed"`) || strings.Count(logs.String(), failed) != 2 {
		t.Errorf("the failed request's two lines do not both name its trace:\n%s", logs.String())
	}

	// No provider: no span, and the request is served as before.
	e2 := echo.New()
	e2.Use(Trace(nil, nil))
	var inSpan bool
	e2.GET("/x", func(c echo.Context) error {
		inSpan = trace.SpanFromContext(c.Request().Context()).IsRecording()
		return c.NoContent(http.StatusNoContent)
	})
	res := httptest.NewRecorder()
	e2.ServeHTTP(res, httptest.NewRequest(http.MethodGet, "/x", nil))
	if res.Code != http.StatusNoContent || inSpan {
		t.Errorf("without a provider: %d, in a span %v", res.Code, inSpan)
	}
}
