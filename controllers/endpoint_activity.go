package controllers

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

// EndpointActivitySource is the ledger's read of every endpoint's counters
// (ledger.Store implements it).
type EndpointActivitySource interface {
	EndpointActivityList(ctx context.Context) ([]ledger.EndpointActivity, error)
}

// activityPoller refreshes the status of the endpoints whose deliveries
// moved, and of no other: every interval it reads every endpoint's
// counters in one ledger read (EndpointActivityList), compares them with
// its previous read, and sends the endpoints whose counters, last
// success, last failure or latest deferral changed to the WebhookEndpoint
// controller. So an idle endpoint costs one row of that read, not a
// reconcile, and its status still follows the deliveries of every
// replica (the ledger is shared) within an interval. The engine's
// exhaustion and breaker notices stay the fast path on the replica that
// made them.
//
// It runs on the leader only, like the controller it feeds. Its first read
// sends every endpoint: a change between a reconcile's read and the
// poller's first look is thus never missed; the workqueue merges these
// with the reconciles of the controller's start.
type activityPoller struct {
	source   EndpointActivitySource
	interval time.Duration
	out      chan event.GenericEvent
	// seen is the previous read, by endpoint ID; nil before the first.
	seen map[string]ledger.EndpointActivity
}

func newActivityPoller(source EndpointActivitySource, interval time.Duration) *activityPoller {
	if interval <= 0 {
		interval = defaultActivityInterval
	}
	return &activityPoller{source: source, interval: interval, out: make(chan event.GenericEvent, 1024)}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (p *activityPoller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it polls until ctx ends. A failed
// read is logged and retried at the next tick; what it would have shown
// is found then, as the comparison is with the last read that succeeded.
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

// poll reads the counters once and sends the endpoints that moved.
func (p *activityPoller) poll(ctx context.Context) error {
	list, err := p.source.EndpointActivityList(ctx)
	if err != nil {
		return err
	}
	moved, seen := activityChanges(p.seen, list)
	p.seen = seen
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

// activityChanges compares a read of the ledger's counters with the
// previous one (nil: none yet, and every endpoint counts as moved). It
// returns the IDs of the endpoints that are new or whose activity changed,
// in the read's order, and the read as the next comparison's previous.
// Endpoints gone from the read are forgotten.
func activityChanges(prev map[string]ledger.EndpointActivity, list []ledger.EndpointActivity) ([]string, map[string]ledger.EndpointActivity) {
	next := make(map[string]ledger.EndpointActivity, len(list))
	var moved []string
	for _, a := range list {
		id := a.Stats.EndpointID
		next[id] = a
		if old, ok := prev[id]; !ok || !sameActivity(&old, &a) {
			moved = append(moved, id)
		}
	}
	return moved, next
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
