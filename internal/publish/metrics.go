package publish

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Doors, as metric labels.
const (
	DoorHTTP = "http"
	DoorKube = "kube"
)

// Metrics are publishing's Prometheus metrics, shared by the cores of
// both doors. A nil *Metrics records nothing.
type Metrics struct {
	unavailable *prometheus.CounterVec
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
	reg.MustRegister(m.unavailable)
	return m
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
