package webhookendpoint

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/engine"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// BreakerMetrics are the circuit metrics, kept by the WebhookEndpoint
// controller from the status it writes: the controllers run on the leader
// only, so they are one replica's view of the shared ledger, not one per
// replica, and an opening is counted once, when its status is written.
type BreakerMetrics struct {
	open     *prometheus.GaugeVec
	openings *prometheus.CounterVec
	owners   *engine.OwnerLabels

	mu sync.Mutex
	// shown is the gauge's labels per endpoint ID, so that a change of
	// reason or owner replaces the endpoint's series instead of adding one.
	shown map[string]prometheus.Labels
}

// NewBreakerMetrics registers the circuit metrics with reg (the manager's
// controller-runtime registry).
func NewBreakerMetrics(reg prometheus.Registerer) *BreakerMetrics {
	m := &BreakerMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookkeeper_endpoint_circuit_open",
			Help: "1 while the endpoint's circuit breaker is open (reason Failing or Gone), 0 while it is closed (no reason); per endpoint (\"<namespace>/<name>\") with its owner (spec.owner).",
		}, []string{"namespace", "endpoint", "owner", "reason"}),
		openings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_endpoint_circuit_openings_total",
			Help: "Openings of endpoints' circuit breakers, by reason (Failing, Gone) and the endpoint's owner (spec.owner; at most 64 owners per process, later ones as _other), counted once when the controller shows them.",
		}, []string{"owner", "reason"}),
		owners: engine.NewOwnerLabels(),
		shown:  map[string]prometheus.Labels{},
	}
	// Both reasons exist from the start, so that a rule or panel on the
	// counter finds it before the first opening.
	for _, r := range []ledger.BreakerReason{ledger.BreakerFailing, ledger.BreakerGone} {
		m.openings.WithLabelValues("", string(r))
	}
	reg.MustRegister(m.open, m.openings)
	return m
}

// breakerLabels are the gauge's labels and value for an endpoint's
// breaker status.
func breakerLabels(ep *hookv1.WebhookEndpoint, st *hookv1.CircuitBreakerStatus) (prometheus.Labels, float64) {
	l := prometheus.Labels{
		"namespace": ep.Namespace,
		"endpoint":  ledger.EndpointID(ep.Namespace, ep.Name),
		"owner":     engine.OwnerLabel(ep.Spec.Owner),
		"reason":    "",
	}
	if st.State != hookv1.CircuitOpen {
		return l, 0
	}
	l["reason"] = st.Reason
	return l, 1
}

// observe sets the endpoint's gauge from the status just written and
// counts the openings it showed for the first time. A nil m keeps nothing.
func (m *BreakerMetrics) observe(ep *hookv1.WebhookEndpoint, opened int64) {
	st := ep.Status.Breaker
	if m == nil || st == nil {
		return
	}
	labels, v := breakerLabels(ep, st)
	id := labels["endpoint"]
	m.mu.Lock()
	if prev, ok := m.shown[id]; ok && !sameLabels(prev, labels) {
		m.open.Delete(prev)
	}
	m.shown[id] = labels
	m.open.With(labels).Set(v)
	m.mu.Unlock()
	if opened > 0 {
		m.openings.WithLabelValues(m.owners.Value(ep.Spec.Owner), st.Reason).Add(float64(opened))
	}
}

// forget drops a deleted endpoint's gauge.
func (m *BreakerMetrics) forget(namespace, name string) {
	if m == nil {
		return
	}
	id := ledger.EndpointID(namespace, name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.shown[id]; ok {
		m.open.Delete(prev)
		delete(m.shown, id)
	}
}

func sameLabels(a, b prometheus.Labels) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
