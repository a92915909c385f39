package tracing

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestFromEnv(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want Settings
		err  bool
	}{
		{"nothing set: off", nil, Settings{}, false},
		{"an endpoint: on, http/protobuf", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, Settings{true, "http/protobuf"}, false},
		{"a traces endpoint: on", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, Settings{true, "http/protobuf"}, false},
		{"otlp exporter: on", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, Settings{true, "http/protobuf"}, false},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, Settings{true, "grpc"}, false},
		{"the traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, Settings{true, "http/protobuf"}, false},
		{"none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, Settings{}, false},
		{"the SDK disabled wins", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, Settings{}, false},
		{"an exporter hookkeeper lacks", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, Settings{}, true},
		{"a protocol hookkeeper lacks", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, Settings{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(func(k string) string { return tt.env[k] })
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("FromEnv = %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

const publisherParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestOffCarriesNothing: with tracing off, a publisher's traceparent is
// neither read nor stored nor sent on, even through a span of the no-op
// tracer (which would pass its parent's context through).
func TestOffCarriesNothing(t *testing.T) {
	off(t)
	h := http.Header{"Traceparent": {publisherParent}}
	ctx, span := Tracer().Start(Extract(context.Background(), h), "publish")
	defer span.End()
	if p, s := Carried(ctx); p != "" || s != "" {
		t.Fatalf("tracing off: Carried = %q, %q; want nothing", p, s)
	}
	ctx = Resume(context.Background(), publisherParent, "")
	out := http.Header{}
	Inject(ctx, out)
	if len(out) != 0 {
		t.Fatalf("tracing off: Inject wrote %v", out)
	}
}

// TestOnContinuesThePublishersTrace: the publish span is a child of the
// publisher's; what is stored resumes it, and the attempt's request
// carries the attempt span's own context in the same trace.
func TestOnContinuesThePublishersTrace(t *testing.T) {
	rec := on(t)
	h := http.Header{"Traceparent": {publisherParent}, "Tracestate": {"vendor=1"}}
	ctx, publish := Tracer().Start(Extract(context.Background(), h), "publish")
	parent, state := Carried(ctx)
	publish.End()
	if parent == "" || parent[3:35] != publisherParent[3:35] || state != "vendor=1" {
		t.Fatalf("Carried = %q, %q; want the publisher's trace 4bf9... and its tracestate", parent, state)
	}
	actx, attempt := Tracer().Start(Resume(context.Background(), parent, state), "attempt")
	out := http.Header{}
	Inject(actx, out)
	attempt.End()
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended; want 2", len(spans))
	}
	if got := spans[1].Parent().SpanID(); got != spans[0].SpanContext().SpanID() {
		t.Fatalf("the attempt's parent is %s; want the publish span %s", got, spans[0].SpanContext().SpanID())
	}
	if want := "00-" + spans[1].SpanContext().TraceID().String() + "-" + spans[1].SpanContext().SpanID().String() + "-01"; out.Get("Traceparent") != want {
		t.Fatalf("the attempt's request carries traceparent %q; want %q", out.Get("Traceparent"), want)
	}
	if got := Resume(context.Background(), "not a traceparent", ""); resumed(got) {
		t.Fatal("an invalid stored traceparent resumed a span context")
	}
}

// resumed reports whether ctx carries a span context to continue.
func resumed(ctx context.Context) bool {
	p, _ := Carried(ctx)
	return p != ""
}

// on turns tracing on into a recorder until the test ends.
func on(t *testing.T) *tracetest.SpanRecorder {
	rec := tracetest.NewSpanRecorder()
	t.Cleanup(Use(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
	return rec
}

// off turns tracing off until the test ends.
func off(t *testing.T) {
	t.Helper()
	was, wasOn := otel.GetTracerProvider(), enabled.Load()
	otel.SetTracerProvider(noop.NewTracerProvider())
	enabled.Store(false)
	t.Cleanup(func() {
		otel.SetTracerProvider(was)
		enabled.Store(wasOn)
	})
}

// TestSetup: nothing in the environment installs nothing; an endpoint
// installs an exporting provider and turns tracing on.
func TestSetup(t *testing.T) {
	off(t)
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
		t.Setenv(k, "")
	}
	s, stop, err := Setup(t.Context())
	if err != nil || s.Enabled || Enabled() {
		t.Fatalf("Setup with nothing set: %+v, %v, enabled %v; want off", s, err, Enabled())
	}
	if err := stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	s, stop, err = Setup(t.Context())
	if err != nil || !s.Enabled || !Enabled() {
		t.Fatalf("Setup with an endpoint: %+v, %v, enabled %v; want on", s, err, Enabled())
	}
	_, span := Tracer().Start(t.Context(), "probe")
	if !span.IsRecording() {
		t.Fatal("a span of the installed provider does not record")
	}
	span.End()
	_ = stop(t.Context()) // the export to a closed port fails: not the point
}

func TestTraceID(t *testing.T) {
	for parent, want := range map[string]string{
		publisherParent: "4bf92f3577b34da6a3ce929d0e0e4736",
		"":              "",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "", // an invalid trace id
		"not a traceparent": "",
	} {
		if got := TraceID(parent); got != want {
			t.Errorf("TraceID(%q) = %q; want %q", parent, got, want)
		}
	}
}
