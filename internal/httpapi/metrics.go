package httpapi

import "github.com/prometheus/client_golang/prometheus"

// Reasons a connection or request is turned away by the server's limits,
// as metric labels.
const (
	closeRefused = "refused" // at the connection cap with no unproven connection waiting to evict
	closeEvicted = "evicted" // an unproven connection not serving a request, closed for a new one
	refuseBodies = "body_memory"
)

// serverMetrics are the Prometheus metrics of a Server's limits. A nil
// *serverMetrics records nothing.
type serverMetrics struct {
	open     prometheus.Gauge
	closed   *prometheus.CounterVec
	reserved prometheus.Gauge
	refused  *prometheus.CounterVec
}

func newServerMetrics(reg prometheus.Registerer) *serverMetrics {
	if reg == nil {
		return nil
	}
	m := &serverMetrics{
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookkeeper_api_connections_open",
			Help: "Connections the HTTP API holds open (at most --api-max-connections).",
		}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_api_connections_limited_total",
			Help: "Connections closed by the connection caps, by reason: evicted (at --api-max-connections, the oldest unproven connection not serving a request of the address holding the most, closed to admit a new one), refused (a new connection at --api-max-connections with no such connection to evict), source_evicted and source_refused (the same at one address's --api-max-unproven-connections-per-source).",
		}, []string{"reason"}),
		reserved: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hookkeeper_api_body_bytes_reserved",
			Help: "Bytes of request bodies the HTTP API is reading or handling (at most --api-max-body-bytes-in-flight).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_api_requests_limited_total",
			Help: "Requests answered 503 Unavailable by a limit of the HTTP API, by reason: body_memory (request bodies in progress already hold --api-max-body-bytes-in-flight).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.open, m.closed, m.reserved, m.refused)
	return m
}

func (m *serverMetrics) connectionsOpen(n int) {
	if m != nil {
		m.open.Set(float64(n))
	}
}

func (m *serverMetrics) connectionClosed(reason string) {
	if m != nil {
		m.closed.WithLabelValues(reason).Inc()
	}
}

func (m *serverMetrics) bodyBytesReserved(n int64) {
	if m != nil {
		m.reserved.Set(float64(n))
	}
}

func (m *serverMetrics) requestRefused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}
