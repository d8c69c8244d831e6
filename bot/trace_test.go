package bot

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"teamsbot/internal/telemetry"
)

// Each call to the Bot Connector is a client span under the caller's: what
// it does, the activity's type, the last status and the retries made. A
// call that fails says what failed in words of the bot's own, never the
// connector's answer or the activity's text.
func TestConnectorSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := newScriptedConnector(t,
		scripted{status: http.StatusTooManyRequests},
		scripted{status: http.StatusCreated},
		scripted{status: http.StatusForbidden},
	)
	c, _ := testConnector(t)
	c.tracer = tp.Tracer("test")
	ctx, turn := tp.Tracer("test").Start(context.Background(), "turn")
	if _, err := sendOne(c, ctx, s.srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := sendOne(c, ctx, s.srv.URL); err == nil {
		t.Fatal("a 403 was taken")
	}
	turn.End()
	spans := rec.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want the two calls and the turn", len(spans))
	}
	for i, want := range []struct {
		status, retries string
		failed          bool
		errorType       string
	}{{"201", "1", false, ""}, {"403", "0", true, "not_in_conversation"}} {
		sp := spans[i]
		got := map[string]string{}
		for _, kv := range sp.Attributes() {
			got[string(kv.Key)] = kv.Value.Emit()
		}
		if sp.Name() != "bot connector send" || sp.Parent().SpanID() != turn.SpanContext().SpanID() ||
			got["teamsbot.connector.operation"] != "send" || got["teamsbot.activity.type"] != "message" ||
			got["http.response.status_code"] != want.status || got["teamsbot.connector.retries"] != want.retries ||
			got["error.type"] != want.errorType {
			t.Errorf("call %d: %q under %v: %v", i, sp.Name(), sp.Parent().SpanID(), got)
		}
		if (sp.Status().Code == codes.Error) != want.failed || strings.Contains(sp.Status().Description, "try later") {
			t.Errorf("call %d: status %v", i, sp.Status())
		}
		for k, v := range got {
			if v == "hi" {
				t.Errorf("call %d: the activity's text is in %s", i, k)
			}
		}
	}
}

// BenchmarkTurnsTraced is BenchmarkTurns with traces on: every span of
// each turn (the request, the turn, the model, the tool call, the commits,
// the sends) made by the SDK and exported over OTLP/HTTP, in batches, to
// a collector on loopback that takes them and throws them away. Compared
// with BenchmarkTurns it is what tracing costs a turn
// (docs/performance.md).
func BenchmarkTurnsTraced(b *testing.B) {
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	cfg, errs := telemetry.Load(func(name string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL}[name]
	})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	traces, err := telemetry.New(context.Background(), cfg, telemetry.Options{Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer traces.Shutdown(context.Background())
	benchTurns(b, traces)
}
