package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
	"github.com/hookkeeper/hookkeeper/internal/tracing/tracingtest"
)

const publisherTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// TestPublishContinuesThePublishersTrace: with tracing on, a publish with
// a traceparent is a server span, child of the publisher's, covering the
// request (authentication included); the event is committed with that
// span's context, in the publisher's trace; a refused publish's span
// records the answer. No span and no stored context with tracing off.
// (Not parallel: tracing is process-wide.)
func TestPublishContinuesThePublishersTrace(t *testing.T) {
	body := `{"type":"order.created","data":{"order":1}}`
	t.Run("off", func(t *testing.T) {
		e := newEnv(t)
		if rec := e.do(t, req{body: body, headers: map[string]string{"Traceparent": publisherTraceparent}}); rec.Code != http.StatusCreated {
			t.Fatalf("publish: %d %s", rec.Code, rec.Body)
		}
		if got := e.pub.last().Trace; !got.IsZero() {
			t.Fatalf("tracing off: the event was committed with trace context %+v", got)
		}
	})
	t.Run("on", func(t *testing.T) {
		rec := tracingtest.Record(t)
		e := newEnv(t)
		if r := e.do(t, req{body: body, headers: map[string]string{"Traceparent": publisherTraceparent, "Tracestate": "vendor=1"}}); r.Code != http.StatusCreated {
			t.Fatalf("publish: %d %s", r.Code, r.Body)
		}
		spans := tracingtest.Named(rec, tracing.PublishSpan)
		if len(spans) != 1 {
			t.Fatalf("%d publish spans; want 1", len(spans))
		}
		s := spans[0]
		if s.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
			t.Fatalf("the publish span's parent is %s/%s; want the publisher's span", s.Parent().TraceID(), s.Parent().SpanID())
		}
		stored := e.pub.last().Trace
		if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; stored.Parent != want || stored.State != "vendor=1" {
			t.Fatalf("the event was committed with trace context %+v; want the publish span's %s and the publisher's tracestate", stored, want)
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs[string(tracing.AttrNamespace)] != ns || !strings.HasPrefix(attrs[string(tracing.AttrEventID)], "evt_") ||
			attrs["http.response.status_code"] != "201" {
			t.Fatalf("the publish span's attributes %v; want its namespace, event id and 201", attrs)
		}

		// A refusal (no token) still ends the span, with the answer.
		if r := e.do(t, req{body: body, headers: map[string]string{"Authorization": "", "Traceparent": publisherTraceparent}}); r.Code != http.StatusUnauthorized {
			t.Fatalf("publish without a token: %d", r.Code)
		}
		spans = tracingtest.Named(rec, tracing.PublishSpan)
		if len(spans) != 2 {
			t.Fatalf("%d publish spans after a refusal; want 2", len(spans))
		}
		var status int64
		for _, kv := range spans[1].Attributes() {
			if kv.Key == "http.response.status_code" {
				status = kv.Value.AsInt64()
			}
		}
		if status != http.StatusUnauthorized {
			t.Fatalf("the refused publish's span records status %d; want 401", status)
		}
	})
}

// TestAcknowledgementJoinsTheReceiversTrace: with tracing on, a Callback
// acknowledgement is a server span continuing the traceparent the
// receiver sends (the attempt's, when the receiver propagates it), naming
// the delivery, with the answer. (Not parallel: tracing is process-wide.)
func TestAcknowledgementJoinsTheReceiversTrace(t *testing.T) {
	rec := tracingtest.Record(t)
	secret, err := signing.GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	acks := &fakeAcknowledger{secrets: map[string][]sensitive.Bytes{"dlv_a": {secret}},
		states: map[string]ledger.DeliveryState{"dlv_a": ledger.StateAwaitingAck}}
	e := newEnv(t, func(c *Config) { c.Acknowledger = acks })
	body := `{"deliveryID":"dlv_a","outcome":"processed"}`
	sig, err := signing.Sign(secret, "ack_1", testNow, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	r := e.do(t, req{path: "/v1/acks/dlv_a", body: body, headers: map[string]string{
		signing.HeaderID: "ack_1", signing.HeaderTimestamp: fmt.Sprint(testNow.Unix()), signing.HeaderSignature: sig,
		"Traceparent": publisherTraceparent,
	}})
	if r.Code != http.StatusOK {
		t.Fatalf("ack: %d %s", r.Code, r.Body)
	}
	spans := tracingtest.Named(rec, tracing.AckSpan)
	if len(spans) != 1 {
		t.Fatalf("%d acknowledgement spans; want 1", len(spans))
	}
	s := spans[0]
	if s.Parent().SpanID().String() != "00f067aa0ba902b7" || s.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("the acknowledgement span's parent %s in trace %s; want the receiver's span", s.Parent().SpanID(), s.SpanContext().TraceID())
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs[string(tracing.AttrDelivery)] != "dlv_a" || attrs["http.response.status_code"] != "200" {
		t.Fatalf("the acknowledgement span's attributes %v; want the delivery and 200", attrs)
	}
}
