package engine

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Metrics are the engine's Prometheus metrics. A nil *Metrics records
// nothing, so tests and tools can run without a registry.
type Metrics struct {
	attempts        *prometheus.CounterVec
	exhausted       *prometheus.CounterVec
	expired         *prometheus.CounterVec
	owners          *ownerLabels
	attemptDuration prometheus.Histogram
	schedulingLag   prometheus.Histogram
	events          *prometheus.CounterVec
	released        *prometheus.CounterVec
	deferred        prometheus.Counter
	yields          prometheus.Counter
	scrubbed        prometheus.Counter
	pruned          *prometheus.CounterVec
	acks            *prometheus.CounterVec
	recovery        *prometheus.CounterVec
	probes          *prometheus.CounterVec
}

// NewMetrics registers the engine's metrics with reg (the manager passes
// controller-runtime's registry), and a collector that reports each
// endpoint's pending and exhausted-unresolved deliveries from the ledger's
// counters when scraped.
func NewMetrics(reg prometheus.Registerer, store ledger.Store) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_delivery_attempts_total",
			Help: "Delivery attempts by what followed them: delivered, accepted (awaiting acknowledgement), retry or exhausted.",
		}, []string{"outcome"}),
		exhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_deliveries_exhausted_total",
			Help: "Deliveries given up on, by reason (MaxAttempts, MaxAge, NonRetryable, Gone, AckRejected, AckTimeout) and the endpoint's owner (spec.owner; at most 64 owners per process, later ones as _other), counted once committed.",
		}, []string{"reason", "owner"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_deliveries_expired_total",
			Help: "Deliveries cancelled unsent because their event's validUntil passed (its WebhookEventType's validFor, or the publisher's validUntil), by the endpoint's owner, counted once committed.",
		}, []string{"owner"}),
		owners: newOwnerLabels(MaxOwnerLabels),
		attemptDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookkeeper_attempt_duration_seconds",
			Help:    "Duration of delivery attempts, from request to response or failure.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		schedulingLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookkeeper_scheduling_lag_seconds",
			Help:    "Time from when a delivery was due to when its attempt started.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_events_published_total",
			Help: "Events published, by result: created, duplicate (idempotent replay), conflict (idempotency key reused with another body), fan_out_limit (refused: matches more endpoints than --max-fan-out) or error.",
		}, []string{"result"}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookkeeper_deliveries_released_total",
			Help: "Claimed deliveries returned to the ledger without an attempt, by reason.",
		}, []string{"reason"}),
	}
	m.deferred = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookkeeper_retries_deferred_total",
		Help: "Retries put off to the next minute because the endpoint's retry budget was spent (never dropped).",
	})
	m.yields = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookkeeper_publish_yields_total",
		Help: "Publishes that waited for the next claim round before committing because the last claim left due deliveries behind (ingest yielding to delivery under saturation).",
	})
	m.scrubbed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookkeeper_secrets_scrubbed_total",
		Help: "Events whose one-time secrets were scrubbed after their grace period by the background sweep.",
	})
	m.pruned = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_retention_pruned_total",
		Help: "What retention removed: payloads (event data and attempt bodies) and events (all evidence).",
	}, []string{"kind"})
	m.acks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_acknowledgements_total",
		Help: "Callback acknowledgements by outcome: processed, rejected, or timeout (none came in time).",
	}, []string{"outcome"})
	m.recovery = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_recovery_items_total",
		Help: "Recovery and replay items by outcome: Retried, Replayed, Reissued, AwaitingReissue, Refused, Skipped or Dismissed.",
	}, []string{"outcome", "reason"})
	m.probes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookkeeper_circuit_probes_total",
		Help: "Probes of endpoints whose circuit breaker is open, by result: closed (the breaker closed) or failed, counted by the engine that made them.",
	}, []string{"result"})
	reg.MustRegister(m.deferred, m.yields, m.scrubbed, m.pruned, m.acks, m.recovery, m.probes)
	reg.MustRegister(m.attempts, m.exhausted, m.expired, m.attemptDuration, m.schedulingLag, m.events, m.released,
		&statsCollector{store: store})
	return m
}

func (m *Metrics) observeLag(d time.Duration) {
	if m != nil {
		m.schedulingLag.Observe(max(d, 0).Seconds())
	}
}

func (m *Metrics) observeAttempt(d time.Duration, next ledger.Next, span trace.SpanContext) {
	if m == nil {
		return
	}
	if span.IsSampled() {
		// An exemplar: from a slow bucket to the attempt's trace
		// (served in the OpenMetrics format only).
		m.attemptDuration.(prometheus.ExemplarObserver).ObserveWithExemplar(d.Seconds(),
			prometheus.Labels{"trace_id": span.TraceID().String()})
	} else {
		m.attemptDuration.Observe(d.Seconds())
	}
	switch next.State {
	case ledger.StateDelivered:
		m.attempts.WithLabelValues("delivered").Inc()
	case ledger.StateAwaitingAck:
		m.attempts.WithLabelValues("accepted").Inc()
	case ledger.StateScheduled:
		m.attempts.WithLabelValues("retry").Inc()
	case ledger.StateExhausted:
		m.attempts.WithLabelValues("exhausted").Inc()
	}
}

func (m *Metrics) observeExhausted(reason ledger.ExhaustReason, owner string) {
	if m != nil {
		m.exhausted.WithLabelValues(string(reason), m.owners.value(owner)).Inc()
	}
}

func (m *Metrics) observeExpired(owner string) {
	if m != nil {
		m.expired.WithLabelValues(m.owners.value(owner)).Inc()
	}
}

func (m *Metrics) observePublish(res ledger.EventInsertResult, err error) {
	if m == nil {
		return
	}
	switch {
	case err != nil:
		m.events.WithLabelValues("error").Inc()
	case errors.Is(res.Err, ledger.ErrFanOutLimit):
		m.events.WithLabelValues("fan_out_limit").Inc()
	case res.Err != nil:
		m.events.WithLabelValues("conflict").Inc()
	case res.Duplicate:
		m.events.WithLabelValues("duplicate").Inc()
	default:
		m.events.WithLabelValues("created").Inc()
	}
}

func (m *Metrics) observeYield() {
	if m != nil {
		m.yields.Inc()
	}
}

func (m *Metrics) observeRelease(reason string) {
	if m != nil {
		m.released.WithLabelValues(reason).Inc()
	}
}

// statsCollector reads the per-endpoint counters on scrape.
type statsCollector struct{ store ledger.Store }

var (
	pendingDesc = prometheus.NewDesc("hookkeeper_deliveries_pending",
		"Deliveries scheduled for a first attempt or a retry, per endpoint.", []string{"endpoint"}, nil)
	// owner adds no series: an endpoint has one owner at a time, and the
	// gauge is computed afresh on every scrape.
	exhaustedDesc = prometheus.NewDesc("hookkeeper_deliveries_exhausted_unresolved",
		"Exhausted deliveries waiting for a DeliveryRecovery, per endpoint, with the endpoint's owner (spec.owner).", []string{"endpoint", "owner"}, nil)
	// The last success and failure let an alert tell an endpoint that has
	// been failing for a while (failure newer than success, for long) from
	// one that failed once; 0 means never.
	lastSuccessDesc = prometheus.NewDesc("hookkeeper_endpoint_last_success_timestamp_seconds",
		"When an attempt to the endpoint last succeeded (Unix seconds; 0: never).", []string{"endpoint"}, nil)
	lastFailureDesc = prometheus.NewDesc("hookkeeper_endpoint_last_failure_timestamp_seconds",
		"When an attempt to the endpoint last failed (Unix seconds; 0: never).", []string{"endpoint"}, nil)
	// The throttled backlog: deliveries due and not sent of an endpoint
	// not paused, held by its limits, its fair share, an open breaker, or
	// engines falling behind (ledger.Waiting). The age is what the shipped
	// alert watches; 0 when nothing waits.
	throttledDesc = prometheus.NewDesc("hookkeeper_endpoint_throttled_deliveries",
		"Deliveries due and not sent yet, per endpoint not paused, with the endpoint's owner.", []string{"endpoint", "owner"}, nil)
	throttledAgeDesc = prometheus.NewDesc("hookkeeper_endpoint_throttled_oldest_age_seconds",
		"How long the oldest delivery due and not sent has been due, per endpoint not paused (0: none).", []string{"endpoint", "owner"}, nil)
)

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pendingDesc
	ch <- throttledDesc
	ch <- throttledAgeDesc
	ch <- exhaustedDesc
	ch <- lastSuccessDesc
	ch <- lastFailureDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	eps, err := c.store.EndpointList(ctx)
	if err != nil {
		return
	}
	now := time.Now()
	waiting := map[string]ledger.Waiting{}
	if ws, err := c.store.WaitingList(ctx, now); err == nil {
		for _, w := range ws {
			waiting[w.EndpointID] = w
		}
	}
	for _, ep := range eps {
		s, err := c.store.EndpointStats(ctx, ep.ID)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(s.Pending), ep.ID)
		owner := ep.Owner
		if !validOwner(owner) {
			owner = OtherOwner
		}
		ch <- prometheus.MustNewConstMetric(exhaustedDesc, prometheus.GaugeValue, float64(s.ExhaustedUnresolved), ep.ID, owner)
		var w ledger.Waiting
		if !ep.Paused {
			w = waiting[ep.ID]
		}
		age := 0.0
		if w.Deliveries > 0 {
			age = max(now.Sub(w.OldestDue).Seconds(), 0)
		}
		ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.GaugeValue, float64(w.Deliveries), ep.ID, owner)
		ch <- prometheus.MustNewConstMetric(throttledAgeDesc, prometheus.GaugeValue, age, ep.ID, owner)
		ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, unixSeconds(s.LastSuccessAt), ep.ID)
		ch <- prometheus.MustNewConstMetric(lastFailureDesc, prometheus.GaugeValue, unixSeconds(s.LastFailureAt), ep.ID)
	}
}

// unixSeconds is t in Unix seconds, 0 for nil.
func unixSeconds(t *time.Time) float64 {
	if t == nil {
		return 0
	}
	return float64(t.UnixNano()) / 1e9
}

func (m *Metrics) observeDeferred() {
	if m != nil {
		m.deferred.Inc()
	}
}

func (m *Metrics) observeScrubbed(n int) {
	if m != nil && n > 0 {
		m.scrubbed.Add(float64(n))
	}
}

func (m *Metrics) observePruned(res ledger.PruneResult) {
	if m != nil {
		m.pruned.WithLabelValues("payload").Add(float64(res.PayloadsPruned))
		m.pruned.WithLabelValues("event").Add(float64(res.EventsDeleted))
	}
}

func (m *Metrics) observeAck(outcome string) {
	if m != nil {
		m.acks.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) observeRecovery(item ledger.RecoveryItem) {
	if m != nil {
		m.recovery.WithLabelValues(string(item.Outcome), item.Reason).Inc()
	}
}

func (m *Metrics) observeProbe(success bool) {
	if m == nil {
		return
	}
	if success {
		m.probes.WithLabelValues("closed").Inc()
	} else {
		m.probes.WithLabelValues("failed").Inc()
	}
}
