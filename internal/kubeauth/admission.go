package kubeauth

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
)

// Reviews go through one of two lanes (see docs/adr/0005):
//
//   - the known lane: re-reviews of tokens that authenticated before (still
//     within KnownTokenTTL) and every SubjectAccessReview (only an
//     authenticated caller gets that far). Bounded in concurrency; a review
//     waits for a slot at most until its deadline. Its volume is bounded by
//     the number of valid tokens and principals divided by the TTLs, which
//     strangers cannot raise.
//   - the unknown lane: first reviews of tokens never seen. Rate limited per
//     source address and in total, bounded in concurrency, and never
//     queued: a review that cannot start now is refused at once with
//     an *UnavailableError (503 and Retry-After), so a flood of random
//     tokens is shed in microseconds instead of filling a queue that
//     legitimate callers would wait in.
type lane int

const (
	laneKnown lane = iota
	laneUnknown
)

// limits are the unknown lane's rates.
type limits struct {
	rate            float64 // unknown-token reviews a second, in total
	burst           int
	perSourceRate   float64 // unknown-token reviews a second from one source
	perSourceBurst  int
	maxSources      int // sources remembered; the least recently seen is forgotten
	maxUnknownSlots int // unknown-token reviews in flight
	maxKnownSlots   int // known-lane reviews in flight
}

// admission decides which reviews may run. It holds no token: sources are
// network addresses, lanes are counters.
type admission struct {
	lim     limits
	mu      sync.Mutex
	global  *rate.Limiter
	sources *cache.LRUExpireCache // source → *rate.Limiter
	unknown chan struct{}
	known   chan struct{}
}

func newAdmission(lim limits, now func() time.Time) *admission {
	return &admission{
		lim:     lim,
		global:  rate.NewLimiter(rate.Limit(lim.rate), lim.burst),
		sources: cache.NewLRUExpireCacheWithClock(lim.maxSources, clockFunc(now)),
		unknown: make(chan struct{}, lim.maxUnknownSlots),
		known:   make(chan struct{}, lim.maxKnownSlots),
	}
}

// admitUnknown decides at now whether a review of a never-seen token from
// source may start, and charges it: it needs a token in the source's
// bucket and in the global one, and takes from both or neither (a source
// over its own limit does not drain what other sources may use). When it
// refuses, retryAfter is when a token is due.
func (a *admission) admitUnknown(source string, now time.Time) (ok bool, retryAfter time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	src := rate.NewLimiter(rate.Limit(a.lim.perSourceRate), a.lim.perSourceBurst)
	if v, found := a.sources.Get(source); found {
		src = v.(*rate.Limiter)
	}
	// A source's bucket is forgotten once it would be full again anyway.
	keep := time.Duration(float64(a.lim.perSourceBurst)/a.lim.perSourceRate*float64(time.Second)) + time.Second
	a.sources.Add(source, src, keep)
	// Both reserve a token; unless both have one now, both reservations
	// are given back (the mutex keeps them the latest of each limiter, so
	// each gets its whole token back).
	fromSource, fromGlobal := src.ReserveN(now, 1), a.global.ReserveN(now, 1)
	if w := max(delay(fromSource, now), delay(fromGlobal, now)); w > 0 {
		fromSource.CancelAt(now)
		fromGlobal.CancelAt(now)
		return false, w
	}
	return true, 0
}

// delay is how long until r's token is due; forever when it never is.
func delay(r *rate.Reservation, now time.Time) time.Duration {
	if !r.OK() {
		return time.Duration(math.MaxInt64)
	}
	return r.DelayFrom(now)
}

// enter takes a slot of l for one review and returns its release. The
// unknown lane never waits; the known lane waits until ctx ends.
func (a *admission) enter(ctx context.Context, l lane) (func(), error) {
	slots := a.known
	if l == laneUnknown {
		slots = a.unknown
		select {
		case slots <- struct{}{}:
			return func() { <-slots }, nil
		default:
			return nil, &UnavailableError{RetryAfter: time.Second,
				Reason: "too many new bearer tokens are being reviewed"}
		}
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, &UnavailableError{RetryAfter: time.Second,
			Reason: "token and permission reviews are overloaded",
			Err:    fmt.Errorf("waiting for a review slot: %w", context.Cause(ctx))}
	}
}

// sourceOf is the source a request is limited as: the peer address of its
// connection, IPv6 addresses by their /64 (one host usually holds a whole
// /64). Forwarding headers are not trusted: anyone can send them.
func sourceOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return "unparsed:" + host
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is4() {
		return addr.String()
	}
	p, _ := addr.Prefix(64)
	return p.String()
}
