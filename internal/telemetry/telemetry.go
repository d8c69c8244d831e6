// Package telemetry owns the service's OpenTelemetry traces, which are off
// unless an operator configures them: the standard OTEL_* variables read
// through the caller's getenv and checked once (Load), the tracer provider
// they make (New: the OpenTelemetry SDK exporting OTLP over HTTP with
// protobuf, flushed on Shutdown; a no-op provider when tracing is off), the
// W3C trace context put on outgoing HTTP requests (Transport), the log
// handler that writes each line's trace and span ids (LogHandler), and the
// names of the attributes the service's spans carry.
//
// Nothing here is global: the provider and its propagator are handed to
// the parts through their options, and a part given none makes no spans
// and adds no header, at no cost. Neither is the process environment read
// behind the caller's back: every option the SDK and the exporter would
// read from an OTEL_ variable of their own accord is given to them
// explicitly, from Load's Config.
//
// What the parts put in their spans is theirs to keep safe: names,
// counts, outcomes and ids, never a secret, a token, a person's words, a
// tool's arguments or its result.
package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Provider is the service's tracer provider and the propagator of its
// outgoing calls.
type Provider struct {
	trace.TracerProvider
	// Propagator puts W3C trace context (traceparent) on outgoing
	// requests; nil when tracing is off, so that nothing is added.
	Propagator propagation.TextMapPropagator
	sdk        *sdktrace.TracerProvider
}

// Options are what New needs besides the Config.
type Options struct {
	// Version is service.version.
	Version string
	// Logger hears of exports that fail; nil discards.
	Logger *slog.Logger
}

// maxAttributeBytes bounds an attribute's value. The parts' own are
// names, counts and ids, far shorter; the bound is for a name that came
// from outside (a tool's, as its server gave it).
const maxAttributeBytes = 1024

// New makes the provider of c: a no-op one when c.Off says tracing is off,
// else the SDK's, with a batch span processor exporting to c.Endpoint. It
// does no network I/O.
func New(ctx context.Context, c Config, o Options) (*Provider, error) {
	if c.Off != "" {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	compression := otlptracehttp.NoCompression
	if c.Gzip {
		compression = otlptracehttp.GzipCompression
	}
	headers := c.Headers
	if headers == nil {
		headers = map[string]string{}
	}
	// Every option is given, so that the exporter reads none of its
	// OTEL_EXPORTER_OTLP_* variables from the process itself (TLS has no
	// meaning for an http:// endpoint, and the exporter refuses it there).
	opts := []otlptracehttp.Option{
		otlptracehttp.WithEndpointURL(c.Endpoint),
		otlptracehttp.WithEncoding(otlptracehttp.EncodingProtobuf),
		otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithTimeout(c.Timeout),
		otlptracehttp.WithCompression(compression),
	}
	if strings.HasPrefix(c.Endpoint, "https://") {
		opts = append(opts, otlptracehttp.WithTLSClientConfig(c.TLS))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: the OTLP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceVersion(o.Version)}
	attrs = append(attrs, c.Resource...)
	attrs = append(attrs, semconv.ServiceName(c.ServiceName))
	res, err := resource.New(ctx, resource.WithTelemetrySDK(), resource.WithAttributes(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: the resource: %w", err)
	}
	// The same for the batch processor, the sampler and the span limits:
	// the SDK would read OTEL_BSP_*, OTEL_TRACES_SAMPLER and OTEL_SPAN_*
	// itself.
	limits := sdktrace.SpanLimits{
		AttributeValueLengthLimit:   maxAttributeBytes,
		AttributeCountLimit:         sdktrace.DefaultAttributeCountLimit,
		EventCountLimit:             sdktrace.DefaultEventCountLimit,
		LinkCountLimit:              sdktrace.DefaultLinkCountLimit,
		AttributePerEventCountLimit: sdktrace.DefaultAttributePerEventCountLimit,
		AttributePerLinkCountLimit:  sdktrace.DefaultAttributePerLinkCountLimit,
	}
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&loggedExporter{SpanExporter: exp, logger: o.Logger},
			sdktrace.WithBatchTimeout(c.BatchDelay),
			sdktrace.WithExportTimeout(c.ExportTimeout),
			sdktrace.WithMaxQueueSize(c.MaxQueue),
			sdktrace.WithMaxExportBatchSize(c.MaxBatch),
		),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler(c.Sampler, c.SamplerArg)),
		sdktrace.WithRawSpanLimits(limits),
	)
	return &Provider{TracerProvider: sdk, Propagator: propagation.TraceContext{}, sdk: sdk}, nil
}

// On reports whether spans are made and exported.
func (p *Provider) On() bool { return p.sdk != nil }

// Shutdown exports the spans still waiting and stops the exporter, within
// ctx. A provider that is off has nothing to do.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: flushing the last spans: %w", err)
	}
	return nil
}

// sampler is the sampler OTEL_TRACES_SAMPLER names (Load checked it).
func sampler(name string, ratio float64) sdktrace.Sampler {
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio)
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
}

// failureLogEvery spaces the log lines of failed exports: a collector that
// is down fails every export, every few seconds.
const failureLogEvery = time.Minute

// loggedExporter logs the exports that fail, at most once a minute with
// the count of those not logged, in the service's own log. It reports
// success to the batch processor, which would otherwise hand the error to
// OpenTelemetry's global error handler (a plain line on the process's
// standard error); the exporter has already retried it.
type loggedExporter struct {
	sdktrace.SpanExporter
	logger *slog.Logger

	mu     sync.Mutex
	last   time.Time
	missed int
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if err == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if now := time.Now(); now.Sub(e.last) >= failureLogEvery {
		e.logger.Warn("spans not exported: the collector did not take them", "spans", len(spans), "failures_not_logged", e.missed, "err", err)
		e.last, e.missed = now, 0
	} else {
		e.missed++
	}
	return nil
}

// Tracer is the tracer name of tp, or a no-op one when tp is nil: a part
// given no provider makes no spans.
func Tracer(tp trace.TracerProvider, name string) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(name)
}

// StoreSpan starts the span of a store commit made with tracer: named
// "store " and op, the store's method, which it also carries as an
// attribute. The bot and the agent commit through it.
func StoreSpan(ctx context.Context, tracer trace.Tracer, op string) (context.Context, trace.Span) {
	ctx, span := tracer.Start(ctx, "store "+op)
	if span.IsRecording() {
		span.SetAttributes(StoreOperation.String(op))
	}
	return ctx, span
}

// Fail marks span as failed: the status Error with a message that is safe
// to export (the part's own words, never an error's text, which may quote
// a server, a URL or a secret), and error.type, a short name of what
// failed.
func Fail(span trace.Span, errorType, message string) {
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType))
	span.SetStatus(codes.Error, message)
}
