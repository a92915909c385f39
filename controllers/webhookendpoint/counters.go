package webhookendpoint

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// Writing an endpoint's status when something an admin acts on changes,
// and its fast-moving counters at a bounded rate (issue #45, item 3).
//
// An endpoint with traffic is reconciled every few seconds (the activity
// poller, activity.go), and each delivery moves its delivered
// total, its last success and its evidence. Written each time, that is a
// status write (and a watch event for every client watching endpoints,
// GitOps controllers among them) per endpoint every few seconds. So a
// status that differs from the one written only in the counter fields
// below is written at most once per CounterWriteInterval (default 1m) of
// the endpoint: the reconcile leaves it and runs again when the interval
// is over, so the counters land. Any other change (conditions, the
// breaker, pending, throttled and exhausted work, the last
// failure) is written at once, and the counters with it. The live counts
// are in the aggregated API (`kubectl get deliveries`) and the metrics.

// defaultCounterWriteInterval is the least time between two writes of an
// endpoint's status that change only its counters.
const defaultCounterWriteInterval = time.Minute

// counterFields are the fast-moving status fields: those that move with
// every delivery and that no admin acts on. Each is listed here and
// nowhere else: maskCounters sets them in a status from another.
//
//   - deliveries.delivered: the delivered total;
//   - deliveries.inFlight: the attempts in progress, which on a busy
//     endpoint move with every delivery (the apiload bench found one in
//     eight writes was an in-flight count alone, a second apart);
//   - lastSuccessTime: the last successful attempt;
//   - evidence: the outcome sums of the last 24 hours and 7 days;
//   - the message of condition Healthy while its status and reason stay
//     (it names the last success).
//
// A first value (the first delivery, the first success, the first
// evidence) is not a counter moving: it is written at once.
var counterFields = []func(dst, src *hookv1.WebhookEndpointStatus){
	func(dst, src *hookv1.WebhookEndpointStatus) {
		if src.Deliveries.Delivered != 0 {
			dst.Deliveries.Delivered = src.Deliveries.Delivered
		}
	},
	func(dst, src *hookv1.WebhookEndpointStatus) { dst.Deliveries.InFlight = src.Deliveries.InFlight },
	func(dst, src *hookv1.WebhookEndpointStatus) {
		if src.LastSuccessTime != nil && dst.LastSuccessTime != nil {
			dst.LastSuccessTime = src.LastSuccessTime
		}
	},
	func(dst, src *hookv1.WebhookEndpointStatus) {
		if src.Evidence != nil && dst.Evidence != nil {
			dst.Evidence = src.Evidence
		}
	},
	func(dst, src *hookv1.WebhookEndpointStatus) {
		d := meta.FindStatusCondition(dst.Conditions, hookv1.ConditionHealthy)
		s := meta.FindStatusCondition(src.Conditions, hookv1.ConditionHealthy)
		if d != nil && s != nil && d.Status == s.Status && d.Reason == s.Reason && d.ObservedGeneration == s.ObservedGeneration {
			d.Message = s.Message
		}
	},
}

// countersOnly reports whether next differs from written, the status
// last written, in counter fields alone (false when they are equal).
func countersOnly(written, next *hookv1.WebhookEndpointStatus) bool {
	if equality.Semantic.DeepEqual(written, next) {
		return false
	}
	masked := next.DeepCopy()
	for _, set := range counterFields {
		set(masked, written)
	}
	return equality.Semantic.DeepEqual(written, masked)
}

// counterHold is how long the write of next must wait: zero when it is
// written now (it changes more than counters, or the endpoint's status
// was not written by this process within the interval), else the rest of
// the interval since its last write.
func (r *WebhookEndpointReconciler) counterHold(uid types.UID, written, next *hookv1.WebhookEndpointStatus, now time.Time) time.Duration {
	if !countersOnly(written, next) {
		return 0
	}
	r.mu.Lock()
	last, ok := r.counterWrites[uid]
	r.mu.Unlock()
	if !ok {
		return 0
	}
	if rest := last.Add(r.counterWriteInterval()).Sub(now); rest > 0 {
		return rest
	}
	return 0
}

// statusWritten records when the endpoint's status was written; a zero
// time forgets the endpoint.
func (r *WebhookEndpointReconciler) statusWritten(uid types.UID, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at.IsZero() {
		delete(r.counterWrites, uid)
		return
	}
	if r.counterWrites == nil {
		r.counterWrites = map[types.UID]time.Time{}
	}
	r.counterWrites[uid] = at
}

func (r *WebhookEndpointReconciler) counterWriteInterval() time.Duration {
	if r.CounterWriteInterval <= 0 {
		return defaultCounterWriteInterval
	}
	return r.CounterWriteInterval
}
