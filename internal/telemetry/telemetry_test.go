package telemetry

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"teamsbot/internal/testenv"
)

// getenv is a process environment of its own, for Load.
func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The endpoint follows "OpenTelemetry Protocol Exporter" of the
// specification: OTEL_EXPORTER_OTLP_ENDPOINT is a base to which v1/traces
// is added, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as it is (the root
// path when it has none) and wins; with neither, or with the SDK disabled
// or the exporter none, traces are off.
func TestLoadEndpoint(t *testing.T) {
	for _, c := range []struct {
		name     string
		env      map[string]string
		endpoint string
		off      string
	}{
		{"nothing set", nil, "", "no OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"the base", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces", ""},
		{"the base with a slash", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, "http://collector:4318/v1/traces", ""},
		{"the base with a path", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://otlp.example.com/tenant-a"}, "https://otlp.example.com/tenant-a/v1/traces", ""},
		{"traces' own", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://otlp.example.com/ingest/spans"}, "https://otlp.example.com/ingest/spans", ""},
		{"traces' own without a path", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318"}, "http://collector:4318/", ""},
		{"traces' own wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/x"}, "http://b:4318/x", ""},
		{"disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": "TRUE"}, "", "OTEL_SDK_DISABLED is true"},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_EXPORTER": "none"}, "", "OTEL_TRACES_EXPORTER is none"},
		{"an empty value is unset", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_SDK_DISABLED": " "}, "http://a:4318/v1/traces", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, errs := Load(getenv(c.env))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if cfg.Endpoint != c.endpoint || !strings.HasPrefix(cfg.Off, c.off) || (c.off == "") != (cfg.Off == "") {
				t.Errorf("endpoint %q off %q, want %q off %q", cfg.Endpoint, cfg.Off, c.endpoint, c.off)
			}
		})
	}
}

// With an endpoint alone, every other setting has the specification's
// default, and the service's name.
func TestLoadDefaults(t *testing.T) {
	cfg, errs := Load(getenv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if cfg.ServiceName != DefaultServiceName || cfg.Sampler != "parentbased_always_on" || cfg.SamplerArg != 1 ||
		cfg.Timeout != 10*time.Second || cfg.Gzip || len(cfg.Headers) != 0 ||
		cfg.BatchDelay != 5*time.Second || cfg.ExportTimeout != 30*time.Second || cfg.MaxQueue != 2048 || cfg.MaxBatch != 512 {
		t.Errorf("defaults: %+v", cfg)
	}
}

// Each setting is read, the traces-only form winning over the one for
// every signal, and OTEL_SERVICE_NAME over a service.name in the resource
// attributes; pairs are percent-decoded.
func TestLoadEverySetting(t *testing.T) {
	cfg, errs := Load(getenv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":           "http://collector:4318",
		"OTEL_EXPORTER_OTLP_HEADERS":            "api-key=general",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS":     "Authorization=Bearer%20abc%3D%3D, x-tenant = a",
		"OTEL_EXPORTER_OTLP_TIMEOUT":            "5000",
		"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT":     "0",
		"OTEL_EXPORTER_OTLP_COMPRESSION":        "GZIP",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":    "http/protobuf",
		"OTEL_SERVICE_NAME":                     "bot-eu",
		"OTEL_RESOURCE_ATTRIBUTES":              "service.name=ignored,deployment.environment.name=prod,k8s.pod.name=teamsbot%2D0",
		"OTEL_TRACES_SAMPLER":                   "parentbased_traceidratio",
		"OTEL_TRACES_SAMPLER_ARG":               "0.25",
		"OTEL_BSP_SCHEDULE_DELAY":               "200",
		"OTEL_BSP_EXPORT_TIMEOUT":               "1000",
		"OTEL_BSP_MAX_QUEUE_SIZE":               "100",
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE":        "10",
		"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "",
	}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(cfg.Headers) != 2 || cfg.Headers["Authorization"] != "Bearer abc==" || cfg.Headers["x-tenant"] != "a" {
		t.Errorf("headers: %q", cfg.Headers)
	}
	if cfg.Timeout != maxInt*time.Millisecond || !cfg.Gzip || cfg.ServiceName != "bot-eu" ||
		cfg.Sampler != "parentbased_traceidratio" || cfg.SamplerArg != 0.25 ||
		cfg.BatchDelay != 200*time.Millisecond || cfg.ExportTimeout != time.Second || cfg.MaxQueue != 100 || cfg.MaxBatch != 10 {
		t.Errorf("settings: %+v", cfg)
	}
	if len(cfg.Resource) != 2 || cfg.Resource[0].Value.AsString() != "prod" || cfg.Resource[1].Value.AsString() != "teamsbot-0" {
		t.Errorf("resource: %v", cfg.Resource)
	}
	cfg, _ = Load(getenv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_RESOURCE_ATTRIBUTES": "service.name=from-resource"}))
	if cfg.ServiceName != "from-resource" {
		t.Errorf("service.name of the resource attributes, without OTEL_SERVICE_NAME: %q", cfg.ServiceName)
	}
}

// Every mistake is reported at once, each by the variable it is in (the
// traces-only one when that is where the value came from), and a header's
// value is never quoted: it is often a key. The variables are checked even
// while traces are off.
func TestLoadReportsEveryMistakeByName(t *testing.T) {
	const secret = "Bearer sk-collector-9931"
	_, errs := Load(getenv(map[string]string{
		"OTEL_SDK_DISABLED":                     "yes",
		"OTEL_TRACES_EXPORTER":                  "zipkin",
		"OTEL_EXPORTER_OTLP_ENDPOINT":           "collector:4318",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL":    "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS":            "Authorization " + secret,
		"OTEL_EXPORTER_OTLP_TIMEOUT":            "10s",
		"OTEL_EXPORTER_OTLP_COMPRESSION":        "zstd",
		"OTEL_EXPORTER_OTLP_CERTIFICATE":        "/no/such/ca.pem",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/no/such/client.pem",
		"OTEL_TRACES_SAMPLER":                   "jaeger_remote",
		"OTEL_TRACES_SAMPLER_ARG":               "2",
		"OTEL_BSP_SCHEDULE_DELAY":               "-1",
		"OTEL_BSP_MAX_QUEUE_SIZE":               "0",
		"OTEL_RESOURCE_ATTRIBUTES":              "a=%zz",
	}))
	want := []string{
		"OTEL_SDK_DISABLED: \"yes\": want true or false",
		"OTEL_TRACES_EXPORTER: \"zipkin\"",
		"OTEL_EXPORTER_OTLP_ENDPOINT: ",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: \"grpc\": the service exports with http/protobuf only",
		"OTEL_EXPORTER_OTLP_HEADERS: pair 1 is not key=value",
		"OTEL_EXPORTER_OTLP_TIMEOUT: \"10s\": want whole milliseconds",
		"OTEL_EXPORTER_OTLP_COMPRESSION: \"zstd\": want gzip or none",
		"OTEL_EXPORTER_OTLP_CERTIFICATE: /no/such/ca.pem: cannot be read",
		"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: the client certificate and its key",
		"OTEL_TRACES_SAMPLER: \"jaeger_remote\": want one of always_on",
		"OTEL_TRACES_SAMPLER_ARG: \"2\": want a ratio from 0 to 1",
		"OTEL_BSP_SCHEDULE_DELAY: \"-1\"",
		"OTEL_BSP_MAX_QUEUE_SIZE: \"0\"",
		"OTEL_RESOURCE_ATTRIBUTES: pair 1 has a %",
	}
	var said []string
	for _, e := range errs {
		said = append(said, e.Error())
	}
	all := strings.Join(said, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no mistake %q among:\n%s", w, all)
		}
	}
	if len(errs) != len(want) {
		t.Errorf("%d mistakes, want %d:\n%s", len(errs), len(want), all)
	}
	if strings.Contains(all, "sk-collector") {
		t.Errorf("a header's value is quoted:\n%s", all)
	}
}

// A batch larger than the queue is a mistake when set; an endpoint with
// credentials, a query or another scheme is refused without showing them.
func TestLoadRefusesWhatCannotWork(t *testing.T) {
	for env, want := range map[string]map[string]string{
		"OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 600 is more than OTEL_BSP_MAX_QUEUE_SIZE (500)": {"OTEL_BSP_MAX_QUEUE_SIZE": "500", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "600"},
		"OTEL_EXPORTER_OTLP_ENDPOINT: https://c: a query or fragment is not sent":        {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/?key=hunter2"},
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: https://c: credentials do not belong":       {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://u:hunter2@c/v1/traces"},
		"OTEL_EXPORTER_OTLP_ENDPOINT: want an absolute http:// or https:// URL":          {"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://c:4317"},
		"OTEL_EXPORTER_OTLP_HEADERS: pair 2: the key is not a header name":               {"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b c=hunter2"},
	} {
		_, errs := Load(getenv(want))
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), env) || strings.Contains(errs[0].Error(), "hunter2") {
			t.Errorf("%v: %v, want %q", want, errs, env)
		}
	}
}

// A private CA's certificate, and a client certificate with its key, are
// read from their files.
func TestLoadCertificates(t *testing.T) {
	c := testenv.NewCertificate(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	ca := c.File(t, nil) // the key, then the certificate
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, errs := Load(getenv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":                  "https://collector.example.com:4318",
		"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE":        ca,
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": ca,
		"OTEL_EXPORTER_OTLP_CLIENT_KEY":                key,
	}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if cfg.TLS == nil || cfg.TLS.RootCAs == nil || len(cfg.TLS.Certificates) != 1 {
		t.Errorf("TLS: %+v", cfg.TLS)
	}
	if _, errs := Load(getenv(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": key})); len(errs) != 1 || !strings.Contains(errs[0].Error(), "holds no PEM certificate") {
		t.Errorf("a key as the CA: %v", errs)
	}
	if _, errs := Load(getenv(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_EXPORTER_OTLP_CERTIFICATE": ca})); len(errs) != 1 ||
		!strings.Contains(errs[0].Error(), "OTEL_EXPORTER_OTLP_CERTIFICATE: the collector's endpoint is http://") {
		t.Errorf("a certificate for an http:// endpoint: %v", errs)
	}
}

// The variables of other programs are named, the service's own are not.
func TestUnread(t *testing.T) {
	got := Unread([]string{"OTEL_METRICS_EXPORTER", "OTEL_SERVICE_NAME", "PATH", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_PROPAGATORS"})
	if strings.Join(got, " ") != "OTEL_METRICS_EXPORTER OTEL_PROPAGATORS" {
		t.Errorf("%q", got)
	}
}

// Off, the provider is a no-op one with no propagator: no span is
// recorded, no header is added, and shutting down does nothing.
func TestNewOff(t *testing.T) {
	p, err := New(context.Background(), Config{Off: "no endpoint"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("t").Start(context.Background(), "s")
	if p.On() || p.Propagator != nil || span.IsRecording() {
		t.Errorf("on %v, propagator %v, recording %v", p.On(), p.Propagator, span.IsRecording())
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// On, the spans go to the collector when the provider shuts down, with
// the configured headers; an export that fails is logged once, without
// the headers.
func TestNewExportsAndFlushesOnShutdown(t *testing.T) {
	got := make(chan http.Header, 10)
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(status)
	}))
	defer srv.Close()
	cfg, errs := Load(getenv(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": srv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS":  "x-api-key=sk-9931",
		"OTEL_BSP_SCHEDULE_DELAY":     "3600000", // only the shutdown sends
		"OTEL_EXPORTER_OTLP_TIMEOUT":  "2000",
	}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var logs bytes.Buffer
	p, err := New(context.Background(), cfg, Options{Version: "1.2.3", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("t").Start(context.Background(), "s")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-got:
		if h.Get("X-Api-Key") != "sk-9931" || h.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("headers: %v", h)
		}
	default:
		t.Fatal("nothing was exported on shutdown")
	}

	status = http.StatusBadRequest // not retried
	p, err = New(context.Background(), cfg, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, span = p.Tracer("t").Start(context.Background(), "s")
		span.End()
		_ = p.sdk.ForceFlush(context.Background())
	}
	_ = p.Shutdown(context.Background())
	if n := strings.Count(logs.String(), "spans not exported"); n != 1 || strings.Contains(logs.String(), "sk-9931") {
		t.Errorf("%d lines of failed exports, want 1, without the header:\n%s", n, logs.String())
	}
}

// The trace context of a request's span goes with it, on a copy of the
// request; without a span, or with tracing off, nothing is added.
func TestTransport(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("traceparent"))
	}))
	defer srv.Close()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(context.Background(), "call")
	defer span.End()

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if _, err := (&http.Client{Transport: Transport(nil, propagation.TraceContext{})}).Do(req); err != nil {
		t.Fatal(err)
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if seen[0] != want || req.Header.Get("traceparent") != "" {
		t.Errorf("sent %q, want %q; the caller's request has %q", seen[0], want, req.Header.Get("traceparent"))
	}
	plain, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, err := (&http.Client{Transport: Transport(nil, propagation.TraceContext{})}).Do(plain); err != nil {
		t.Fatal(err)
	}
	if base := http.DefaultTransport; Transport(base, nil) != base {
		t.Error("with tracing off the transport is not the base itself")
	}
	if seen[1] != "" {
		t.Errorf("a request outside any span carried %q", seen[1])
	}
}

// A line logged with a span's context names the trace and the span; one
// without is written as it is, and so are the handler's attributes.
func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("part", "bot")
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("t").Start(context.Background(), "turn")
	logger.InfoContext(ctx, "in a span")
	logger.Info("outside")
	span.End()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var in, out map[string]any
	if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &in) != nil || json.Unmarshal([]byte(lines[1]), &out) != nil {
		t.Fatalf("%q", lines)
	}
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() || in["part"] != "bot" {
		t.Errorf("in a span: %v", in)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("outside a span: %v", out)
	}
}
