package kubeauth

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"time"

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

// bucket is a token bucket: it holds up to burst tokens and gains rate a
// second. The zero bucket is full (it is filled on first use).
type bucket struct {
	tokens float64
	last   time.Time
	used   bool
}

// refill brings b to now.
func (b *bucket) refill(now time.Time, rate float64, burst int) {
	if !b.used {
		b.tokens, b.last, b.used = float64(burst), now, true
		return
	}
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = math.Min(float64(burst), b.tokens+elapsed.Seconds()*rate)
		b.last = now
	}
}

// wait is how long until b holds a whole token (0 when it does).
func (b *bucket) wait(rate float64) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	if rate <= 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

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
	global  bucket
	sources *cache.LRUExpireCache // source → *bucket
	unknown chan struct{}
	known   chan struct{}
}

func newAdmission(lim limits, now func() time.Time) *admission {
	return &admission{
		lim:     lim,
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
	src := &bucket{}
	if v, found := a.sources.Get(source); found {
		src = v.(*bucket)
	}
	// A source's bucket is forgotten once it would be full again anyway.
	keep := time.Duration(float64(a.lim.perSourceBurst)/a.lim.perSourceRate*float64(time.Second)) + time.Second
	a.sources.Add(source, src, keep)
	src.refill(now, a.lim.perSourceRate, a.lim.perSourceBurst)
	a.global.refill(now, a.lim.rate, a.lim.burst)
	if w := max(src.wait(a.lim.perSourceRate), a.global.wait(a.lim.rate)); w > 0 {
		return false, w
	}
	src.tokens--
	a.global.tokens--
	return true, 0
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
