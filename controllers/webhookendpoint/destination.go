package webhookendpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/destination"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Defaults of the reconcile-time destination check.
const (
	// defaultDestinationLookupTimeout bounds the DNS lookup of an
	// endpoint's host: reconciles run one at a time, and the dial-time
	// check guards anyway.
	defaultDestinationLookupTimeout = 2 * time.Second
	// destinationVerdictTTL is how long the outcome of a host's lookup is
	// reused, so that resyncs do not look every host up every time and a
	// DNS outage costs one timeout per host and period.
	destinationVerdictTTL = 30 * time.Second
	// maxDestinationVerdicts bounds the remembered outcomes.
	maxDestinationVerdicts = 4096
)

// destinationVerdicts remembers, per host name, whether it resolved to a
// forbidden address (a nil *destination.ForbiddenError when not, or when
// the lookup failed), for destinationVerdictTTL on the reconciler's clock,
// the least recently used first out.
type destinationVerdicts struct {
	once  sync.Once
	cache *cache.LRUExpireCache
}

func (v *destinationVerdicts) of(clk cache.Clock) *cache.LRUExpireCache {
	v.once.Do(func() { v.cache = cache.NewLRUExpireCacheWithClock(maxDestinationVerdicts, clk) })
	return v.cache
}

// destinationProblem checks the endpoint's URL against the destination
// policy: an IP literal always, a host name through a lookup bounded by
// the lookup timeout. It is nil when the destination is allowed, when there
// is no policy, when the URL does not parse (admission and the sender
// refuse those), and when the lookup fails: DNS can be down for a moment,
// and the dial-time check still refuses a forbidden address.
func (r *WebhookEndpointReconciler) destinationProblem(ctx context.Context, rawURL string) *conditions.Problem {
	if r.Destinations == nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	host := u.Hostname()
	verdicts := r.verdicts.of(r.clock())
	var forbidden *destination.ForbiddenError
	if v, ok := verdicts.Get(host); ok {
		forbidden = v.(*destination.ForbiddenError)
	} else {
		timeout := r.DestinationLookupTimeout
		if timeout <= 0 {
			timeout = defaultDestinationLookupTimeout
		}
		lctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.Destinations.CheckHost(lctx, host)
		cancel()
		if !errors.As(err, &forbidden) {
			forbidden = nil
			if err != nil {
				log.FromContext(ctx).V(1).Info("looking up the endpoint's host failed; the check happens again when a connection is dialled",
					"host", host, "error", err.Error())
			}
		}
		verdicts.Add(host, forbidden, destinationVerdictTTL)
	}
	if forbidden == nil {
		return nil
	}
	return &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: destinationMessage(forbidden)}
}

// destinationMessage is the Ready condition's message for a forbidden
// destination: "url resolves to 169.254.169.254, a cloud metadata address;
// hookkeeper does not deliver there unless --allowed-destination-cidrs
// allows it" (naming the host when it is a name).
func destinationMessage(f *destination.ForbiddenError) string {
	if f.Host != "" {
		return fmt.Sprintf("url host %s resolves to %s; %s", f.Host, f.Subject(), destination.AllowHint)
	}
	return fmt.Sprintf("url resolves to %s; %s", f.Subject(), destination.AllowHint)
}

// hold pauses the configuration the engine has of an endpoint whose
// destination became forbidden, or whose spec can never be sent: its
// deliveries wait (nothing is cancelled or sent) until the spec is usable,
// when it is registered again.
func (r *WebhookEndpointReconciler) hold(ctx context.Context, registered ledger.Endpoint) error {
	if registered.Paused {
		return nil
	}
	registered.Paused = true
	stored, err := r.Engine.RegisterEndpoint(ctx, registered)
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("paused in the delivery engine: the endpoint's destination is forbidden or its spec cannot be sent", "version", stored.Version)
	return nil
}
