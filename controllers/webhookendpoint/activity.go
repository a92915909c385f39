package webhookendpoint

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// defaultActivityInterval is how often the activity poller reads the
// ledger's counters when WebhookEndpointReconciler.ActivityInterval is 0.
const defaultActivityInterval = 5 * time.Second

// EndpointActivitySource is the ledger's read of the endpoints whose
// counters changed (ledger.Store implements it).
type EndpointActivitySource interface {
	EndpointActivitySince(ctx context.Context, c ledger.ActivityCursor) ([]ledger.EndpointActivity, ledger.ActivityCursor, error)
}

// activityPoller refreshes the status of the endpoints whose deliveries
// moved, and of no other: every interval it reads the counters of the
// endpoints that changed since its previous read (EndpointActivitySince,
// a change feed the ledger's writers stamp), compares them with what it
// last read of each, and sends the endpoints whose counters, last
// success, last failure or latest deferral changed to the WebhookEndpoint
// controller. So an idle endpoint costs nothing but a row the read's
// filter skips, and its status still follows the deliveries of every
// replica (the ledger is shared) within an interval. The engine's
// exhaustion and breaker notices stay the fast path on the replica that
// made them.
//
// It runs on the leader only, like the controller it feeds. Its first read
// (the zero cursor) sends every endpoint: a change between a reconcile's
// read and the poller's first look is thus never missed; the workqueue
// merges these with the reconciles of the controller's start.
type activityPoller struct {
	source   EndpointActivitySource
	interval time.Duration
	out      chan event.GenericEvent
	// cursor is where the last successful read left off.
	cursor ledger.ActivityCursor
	// seen is the last read of each endpoint, by endpoint ID. Deleted
	// endpoints stay: the ledger keeps their counters, which every full
	// read listed too, and a few hundred bytes each is less than telling
	// them apart.
	seen map[string]ledger.EndpointActivity
}

func newActivityPoller(source EndpointActivitySource, interval time.Duration) *activityPoller {
	if interval <= 0 {
		interval = defaultActivityInterval
	}
	return &activityPoller{source: source, interval: interval, out: make(chan event.GenericEvent, 1024),
		seen: map[string]ledger.EndpointActivity{}}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *activityPoller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it polls until ctx ends. A failed
// read is logged and retried at the next tick; what it would have shown
// is found then, as the next read starts from the cursor of the last read
// that succeeded.
func (p *activityPoller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("endpoint-activity")
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if err := p.poll(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "reading the endpoints' counters from the ledger")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poll reads what changed once and sends the endpoints that moved.
func (p *activityPoller) poll(ctx context.Context) error {
	list, next, err := p.source.EndpointActivitySince(ctx, p.cursor)
	if err != nil {
		return err
	}
	p.cursor = next
	moved := activityChanges(p.seen, list)
	for _, id := range moved {
		ns, name, ok := strings.Cut(id, "/")
		if !ok || ns == "" || name == "" {
			continue
		}
		ev := event.GenericEvent{Object: &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
		select {
		case p.out <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// activityChanges compares a read of the ledger's counters, whole or of
// what changed, with seen, the last read of each endpoint, and records the
// read in seen. It returns the IDs of the endpoints that are new or whose
// activity changed, in the read's order. An endpoint read again unchanged
// (the ledger's feed re-reads the changes of a short overlap) is not
// returned; one absent from the read keeps its entry.
func activityChanges(seen map[string]ledger.EndpointActivity, list []ledger.EndpointActivity) []string {
	var moved []string
	for _, a := range list {
		id := a.Stats.EndpointID
		if old, ok := seen[id]; !ok || !sameActivity(&old, &a) {
			moved = append(moved, id)
		}
		seen[id] = a
	}
	return moved
}

// sameActivity reports whether two reads of an endpoint show the same
// counters, last outcomes and latest deferral.
func sameActivity(a, b *ledger.EndpointActivity) bool {
	x, y := &a.Stats, &b.Stats
	return x.Pending == y.Pending && x.InFlight == y.InFlight && x.AwaitingAck == y.AwaitingAck &&
		x.Delivered == y.Delivered && x.ExhaustedUnresolved == y.ExhaustedUnresolved && x.Cancelled == y.Cancelled &&
		x.LastFailureReason == y.LastFailureReason &&
		sameTime(x.LastSuccessAt, y.LastSuccessAt) && sameTime(x.LastFailureAt, y.LastFailureAt) &&
		sameTime(a.LastDeferralAt, b.LastDeferralAt)
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// cachedEndpoint maps the poller's request to a reconcile only for an
// endpoint the manager's cache holds: the ledger also counts deleted
// endpoints, and, on a shared ledger, those of namespaces this manager
// does not watch (--watch-namespaces).
func cachedEndpoint(c client.Reader) func(ctx context.Context, o client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		key := client.ObjectKeyFromObject(o)
		var ep hookv1.WebhookEndpoint
		if err := c.Get(ctx, key, &ep); err != nil {
			return nil
		}
		return []reconcile.Request{{NamespacedName: key}}
	}
}
