package webhookendpoint

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"time"

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
// forbidden address (nil when not, or when the lookup failed).
type destinationVerdicts struct {
	mu sync.Mutex
	m  map[string]destinationVerdict
}

type destinationVerdict struct {
	forbidden *destination.ForbiddenError
	expires   time.Time
}

func (v *destinationVerdicts) get(host string, now time.Time) (*destination.ForbiddenError, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	d, ok := v.m[host]
	if !ok || !now.Before(d.expires) {
		return nil, false
	}
	return d.forbidden, true
}

func (v *destinationVerdicts) put(host string, forbidden *destination.ForbiddenError, now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]destinationVerdict{}
	}
	if len(v.m) >= maxDestinationVerdicts {
		for h, d := range v.m {
			if !now.Before(d.expires) {
				delete(v.m, h)
			}
		}
		if len(v.m) >= maxDestinationVerdicts {
			clear(v.m)
		}
	}
	v.m[host] = destinationVerdict{forbidden: forbidden, expires: now.Add(destinationVerdictTTL)}
}

// destinationProblem checks the endpoint's URL against the destination
// policy: an IP literal always, a host name through a lookup bounded by
// the lookup timeout. It is nil when the destination is allowed, when there
// is no policy, when the URL does not parse (admission and the sender
// refuse those), and when the lookup fails: DNS can be down for a moment,
// and the dial-time check still refuses a forbidden address.
func (r *WebhookEndpointReconciler) destinationProblem(ctx context.Context, rawURL string, now time.Time) *conditions.Problem {
	if r.Destinations == nil {
		return nil
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	host := u.Hostname()
	forbidden, ok := r.verdicts.get(host, now)
	if !ok {
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
		r.verdicts.put(host, forbidden, now)
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
