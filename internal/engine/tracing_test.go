package engine_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"

	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
	"github.com/hookkeeper/hookkeeper/internal/tracing/tracingtest"
)

// publishTrace is the context a publish span stored with an event.
var publishTrace = ledger.TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=1"}

// traceparents is a receiver that answers 503 twice and then 204, and
// keeps the traceparent of each request (or "" when it had none).
type traceparents struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newTraceparents(t *testing.T) *traceparents {
	r := &traceparents{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.Header.Get("Traceparent"))
		n := len(r.seen)
		r.mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *traceparents) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// publishTraced publishes an event carrying publishTrace, as the publish
// core stores it, to an endpoint of rcv, and waits for its three attempts.
func publishTraced(t *testing.T, sf storeFactory, rcv *traceparents) *prometheus.Registry {
	t.Helper()
	store := sf.open(t)
	reg := prometheus.NewPedanticRegistry()
	e := run(t, engine.Options{Store: store, Metrics: engine.NewMetrics(reg, store)})
	if _, err := e.RegisterEndpoint(context.Background(), endpoint(t, "shop", "orders", rcv.URL, []string{"*"}, policy(3, time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res, err := e.Publish(context.Background(), &ledger.EventInsertParams{
		ID: ledger.NewID("evt", now), Namespace: "shop", Type: "order.created", Data: json.RawMessage(`{}`), Now: now, Trace: publishTrace,
	})
	if err != nil || res.Err != nil {
		t.Fatalf("publish: %v / %v", err, res.Err)
	}
	eventually(t, "three attempts", func() bool { return len(rcv.got()) == 3 })
	return reg
}

// exemplarTraces returns the trace IDs of the attempt duration
// histogram's exemplars.
func exemplarTraces(t *testing.T, reg *prometheus.Registry) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != "hookkeeper_attempt_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == "trace_id" {
						out = append(out, l.GetValue())
					}
				}
			}
		}
	}
	return out
}

// TestAttemptsContinueThePublishTrace: with tracing on, each attempt is a
// client span, child of the publish span the event stored and linked to
// it, numbered, with its answer; its request carries its own traceparent,
// in the publisher's trace. With tracing off, no request carries one.
// (Not parallel: tracing is process-wide.)
func TestAttemptsContinueThePublishTrace(t *testing.T) {
	for _, sf := range stores() {
		t.Run(sf.name+"/off", func(t *testing.T) {
			rcv := newTraceparents(t)
			reg := publishTraced(t, sf, rcv)
			for i, tp := range rcv.got() {
				if tp != "" {
					t.Fatalf("tracing off: attempt %d carried traceparent %q", i+1, tp)
				}
			}
			if ex := exemplarTraces(t, reg); len(ex) != 0 {
				t.Fatalf("tracing off: the attempt duration histogram has exemplars %v", ex)
			}
		})
		t.Run(sf.name+"/on", func(t *testing.T) {
			rec := tracingtest.Record(t)
			rcv := newTraceparents(t)
			reg := publishTraced(t, sf, rcv)
			eventually(t, "three attempt spans ended", func() bool { return len(tracingtest.Named(rec, tracing.AttemptSpan)) == 3 })
			spans := tracingtest.Named(rec, tracing.AttemptSpan)
			seen := rcv.got()
			for i, s := range spans {
				attrs := map[string]int64{}
				for _, kv := range s.Attributes() {
					attrs[string(kv.Key)] = kv.Value.AsInt64()
				}
				if got := attrs[string(tracing.AttrAttempt)]; got != int64(i+1) {
					t.Fatalf("span %d is attempt %d", i+1, got)
				}
				if s.Parent().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent().SpanID().String() != "00f067aa0ba902b7" {
					t.Fatalf("attempt %d's parent is %s/%s; want the publish span", i+1, s.Parent().TraceID(), s.Parent().SpanID())
				}
				if links := s.Links(); len(links) != 1 || links[0].SpanContext.SpanID().String() != "00f067aa0ba902b7" {
					t.Fatalf("attempt %d's links %v; want one, to the publish span", i+1, links)
				}
				if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + s.SpanContext().SpanID().String() + "-01"; seen[i] != want {
					t.Fatalf("attempt %d's request carried traceparent %q; want its span's %q", i+1, seen[i], want)
				}
				wantStatus := int64(http.StatusServiceUnavailable)
				wantCode := codes.Error
				if i == 2 {
					wantStatus, wantCode = http.StatusNoContent, codes.Unset
				}
				if attrs["http.response.status_code"] != wantStatus || s.Status().Code != wantCode {
					t.Fatalf("attempt %d's span: status %d, %v; want %d, %v", i+1, attrs["http.response.status_code"], s.Status().Code, wantStatus, wantCode)
				}
			}
			// Exemplars link the attempt duration histogram to the trace.
			ex := exemplarTraces(t, reg)
			if len(ex) == 0 || !slices.Contains(ex, "4bf92f3577b34da6a3ce929d0e0e4736") {
				t.Fatalf("the attempt duration histogram's exemplars %v; want the publish's trace", ex)
			}
		})
	}
}
