package engine

import (
	"context"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// An attempt is a span of its own (issue #46, docs/adr/0051): a child of
// the publish span whose context the event stored, so that the publisher,
// the attempts and the receiver share one trace id, and linked to it, so
// that a backend that draws links shows what caused the attempt. Nothing
// is written to the ledger for it: the stored context is the event's.
// With tracing off, or an event stored without a context, the span is a
// no-op one and the request carries no traceparent.

// startAttempt starts the span of attempt c to endpoint ep; probe marks a
// breaker's probe.
func startAttempt(ctx context.Context, ep *ledger.Endpoint, c *ledger.ClaimedDelivery, probe bool) (context.Context, trace.Span) {
	if !tracing.Enabled() || c.Event.Trace.IsZero() {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span
	}
	ctx = tracing.Resume(ctx, c.Event.Trace.Parent, c.Event.Trace.State)
	publish := trace.SpanContextFromContext(ctx)
	breaker := "closed"
	if probe {
		breaker = "half-open"
	}
	return tracing.Tracer().Start(ctx, tracing.AttemptSpan,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: publish}),
		trace.WithAttributes(
			tracing.AttrNamespace.String(ep.Namespace),
			tracing.AttrEndpoint.String(ep.ID),
			tracing.AttrEventID.String(c.Event.ID),
			tracing.AttrEventType.String(c.Event.Type),
			tracing.AttrDelivery.String(c.Delivery.ID),
			tracing.AttrAttempt.Int(c.Delivery.Attempts+1),
			tracing.AttrBreaker.String(breaker),
		))
}

// endAttempt records the answer and what the engine decided on span.
func endAttempt(span trace.Span, res *dispatch.Result, out *outcome) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if res.StatusCode != 0 {
		tracing.AnswerStatus(span, res.StatusCode)
	}
	span.SetAttributes(tracing.AttrOutcome.String(string(out.next.State)))
	if out.failure != "" {
		span.SetStatus(codes.Error, out.failure)
	}
}
