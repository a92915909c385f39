// Package tracingtest turns tracing on for a test, into an in-process
// recorder of the spans that end.
package tracingtest

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Record turns tracing on, every span sampled, until the test ends, and
// returns the recorder of the spans that end. Tracing is process-wide:
// call it from a test that does not run in parallel with others of its
// package (a test without t.Parallel never does).
func Record(t testing.TB) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	restore := tracing.Use(tp)
	t.Cleanup(func() {
		restore()
		_ = tp.Shutdown(t.Context())
	})
	return rec
}

// Named returns the ended spans called name.
func Named(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}
