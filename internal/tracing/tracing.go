// Package tracing sets up OpenTelemetry traces the standard way, from the
// OTEL_* environment, and carries a trace context in and out of the
// places hookkeeper keeps one: a publisher's headers, an event in the
// ledger, an attempt's request (issue #46, docs/adr/0051).
//
// Tracing is off unless the environment asks for it (an OTLP endpoint or
// OTEL_TRACES_EXPORTER=otlp). Off, the global tracer provider is
// OpenTelemetry's no-op one: spans cost a context lookup, and no trace
// context is stored or sent.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of hookkeeper's spans.
const ScopeName = "github.com/hookkeeper/hookkeeper"

// Tracer is hookkeeper's tracer from the global provider (no-op until
// Setup turns tracing on).
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// propagator is W3C Trace Context, the only format hookkeeper reads and
// writes: it is what Standard Webhooks receivers and every OpenTelemetry
// SDK understand.
var propagator = propagation.TraceContext{}

// Settings is what Setup read from the environment.
type Settings struct {
	// Enabled is false unless the environment asks for traces.
	Enabled bool
	// Protocol is the OTLP protocol: "grpc" or "http/protobuf".
	Protocol string
}

// FromEnv reads the tracing settings from getenv (os.Getenv in Setup),
// following the OpenTelemetry SDK environment specification, except that
// traces are off by default: OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none turn them off, OTEL_TRACES_EXPORTER=otlp or an
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT turns them on.
func FromEnv(getenv func(string) string) (Settings, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return Settings{}, nil
	}
	var s Settings
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return Settings{}, nil
	case "otlp":
		s.Enabled = true
	case "":
		s.Enabled = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return Settings{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: hookkeeper exports traces with otlp, or none", exp)
	}
	s.Protocol = getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if s.Protocol == "" {
		s.Protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch s.Protocol {
	case "":
		s.Protocol = "http/protobuf" // the specification's default
	case "grpc", "http/protobuf":
	default:
		return Settings{}, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: hookkeeper exports traces over grpc or http/protobuf", s.Protocol)
	}
	if !s.Enabled {
		s.Protocol = ""
	}
	return s, nil
}

// Setup installs the global tracer provider and propagator the environment
// asks for and returns a function that flushes and stops them (a no-op
// when tracing is off). The exporter reads its endpoint, headers, TLS and
// timeout from OTEL_EXPORTER_OTLP_*, the provider its sampler from
// OTEL_TRACES_SAMPLER (parent-based, always on, by default), the resource
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func Setup(ctx context.Context) (Settings, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	s, err := FromEnv(os.Getenv)
	if err != nil || !s.Enabled {
		return s, noop, err
	}
	var exp sdktrace.SpanExporter
	if s.Protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return s, noop, fmt.Errorf("the OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("hookkeeper"), semconv.ServiceVersion(buildVersion())),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return s, noop, fmt.Errorf("the trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	_ = Use(tp) // for the life of the process
	return s, tp.Shutdown, nil
}

// enabled is set once a provider is in use: until then no trace context is
// read from a publisher, stored or sent (OpenTelemetry's no-op tracer
// would otherwise pass a publisher's context through as its own).
var enabled atomic.Bool

// Use installs tp as the global tracer provider, with the W3C Trace
// Context propagator, and turns tracing on: Setup's last step, and how
// tests trace into an in-process recorder (tracingtest). restore puts back
// the provider and the state before.
func Use(tp trace.TracerProvider) (restore func()) {
	was, wasOn := otel.GetTracerProvider(), enabled.Load()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagator)
	enabled.Store(true)
	return func() {
		enabled.Store(wasOn)
		otel.SetTracerProvider(was)
	}
}

// Enabled reports whether tracing is on.
func Enabled() bool { return enabled.Load() }

// Extract returns ctx carrying the remote span context of the traceparent
// and tracestate headers in h, when tracing is on and they are valid.
func Extract(ctx context.Context, h http.Header) context.Context {
	if !Enabled() {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Carried returns the traceparent and tracestate of ctx's span, to store
// with an event; empty when tracing is off or ctx has no valid span.
func Carried(ctx context.Context) (parent, state string) {
	if !Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var c carrier
	propagator.Inject(ctx, &c)
	return c.parent, c.state
}

// Resume returns ctx carrying, as its remote parent, the span context that
// Carried returned; ctx unchanged when parent is empty or invalid.
func Resume(ctx context.Context, parent, state string) context.Context {
	if !Enabled() || parent == "" {
		return ctx
	}
	return propagator.Extract(ctx, &carrier{parent: parent, state: state})
}

// Inject writes the traceparent (and tracestate) of ctx's span into h;
// nothing when ctx has no valid span.
func Inject(ctx context.Context, h http.Header) {
	if Enabled() && trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// carrier is a TextMapCarrier of the two Trace Context fields.
type carrier struct{ parent, state string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }

// Span names and attributes hookkeeper records (docs/operations/tracing.md).
const (
	// PublishSpan covers one publish through a door: authentication,
	// contract checks, filters and the commit.
	PublishSpan = "hookkeeper.publish"
	// AttemptSpan is one attempt to deliver an event to an endpoint.
	AttemptSpan = "hookkeeper.attempt"
	// AckSpan is a receiver's Callback acknowledgement of a delivery.
	AckSpan = "hookkeeper.acknowledge"

	AttrNamespace  = attribute.Key("hookkeeper.namespace")
	AttrEventID    = attribute.Key("hookkeeper.event.id")
	AttrEventType  = attribute.Key("hookkeeper.event.type")
	AttrDuplicate  = attribute.Key("hookkeeper.publish.duplicate")
	AttrDeliveries = attribute.Key("hookkeeper.event.deliveries")
	AttrDelivery   = attribute.Key("hookkeeper.delivery.id")
	AttrEndpoint   = attribute.Key("hookkeeper.endpoint")
	AttrAttempt    = attribute.Key("hookkeeper.attempt.number")
	AttrOutcome    = attribute.Key("hookkeeper.attempt.outcome")
	AttrBreaker    = attribute.Key("hookkeeper.breaker.state")
)

// StartServer starts the server span name over a request with headers h,
// continuing the caller's trace.
func StartServer(ctx context.Context, h http.Header, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(Extract(ctx, h), name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// AnswerStatus records an HTTP answer's status on span: an error from 500
// on, as the HTTP semantic conventions ask of a server span.
func AnswerStatus(span trace.Span, status int) {
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
}

// buildVersion is the main module's version as the Go toolchain stamped it
// ("(devel)" for a build from a checkout).
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// TraceID is the trace ID of a stored traceparent; empty when it is not a
// valid one.
func TraceID(parent string) string {
	sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), &carrier{parent: parent}))
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
