package publish

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
)

// Doors, as metric labels.
const (
	DoorHTTP = "http"
	DoorKube = "kube"
)

// Metrics are publishing's Prometheus metrics, shared by the cores of
// both doors. A nil *Metrics records nothing.
type Metrics struct {
	unavailable  *prometheus.CounterVec
	filterErrors *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_api_ledger_unavailable_total",
		Help: "Publishes answered Unavailable (503 with Retry-After) because the ledger could not be reached or did not commit in time, by door: http (POST /v1/namespaces/{ns}/events) or kube (create of a webhookevent).",
	}, []string{"door"})}
	for _, d := range []string{DoorHTTP, DoorKube} {
		m.unavailable.WithLabelValues(d)
	}
	m.filterErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_filter_evaluation_errors_total",
		Help: "Endpoint filters (spec.filter) that gave no answer on an event, so that the endpoint did not receive it, by reason: no_such_key (a field the event lacks), type (a value of another type), cost (data too large for filters, or an evaluation that built too much), timeout (an evaluation over its time budget), budget (the event's filter budget spent, waiting for its namespace's evaluator included), canceled (the publish was canceled), data (data not JSON), compile (the expression does not compile) or other.",
	}, []string{"reason"})
	for _, r := range eventfilter.Reasons {
		m.filterErrors.WithLabelValues(r)
	}
	reg.MustRegister(m.unavailable, m.filterErrors)
	return m
}

func (m *Metrics) countFilterError(reason string) {
	if m != nil {
		m.filterErrors.WithLabelValues(reason).Inc()
	}
}

// FilterErrors returns how many filter evaluations gave no answer for
// reason: what hookkeeper_filter_evaluation_errors_total holds.
func (m *Metrics) FilterErrors(reason string) float64 {
	var out dto.Metric
	if m == nil || m.filterErrors.WithLabelValues(reason).Write(&out) != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}

func (m *Metrics) countLedgerUnavailable(door string) {
	if m != nil {
		m.unavailable.WithLabelValues(door).Inc()
	}
}

// LedgerUnavailable returns how many publishes through door the ledger
// could not take: what hookkeeper_api_ledger_unavailable_total holds.
func (m *Metrics) LedgerUnavailable(door string) float64 {
	var out dto.Metric
	if m == nil || m.unavailable.WithLabelValues(door).Write(&out) != nil {
		return 0
	}
	return out.GetCounter().GetValue()
}
