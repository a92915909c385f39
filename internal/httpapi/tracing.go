package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// tracedWriter records the status of the answer on the request's span.
type tracedWriter struct {
	http.ResponseWriter
	span trace.Span
}

func (w *tracedWriter) WriteHeader(status int) {
	tracing.AnswerStatus(w.span, status)
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *tracedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
