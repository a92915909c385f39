package kubeauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// The token path, outermost first:
//
//	bearertoken (library)  the Authorization header
//	sourceNoting           notes the request's source address under the token's key
//	staleWhileRevalidate   answers a token accepted within the grace at once;
//	                       re-reviews it in the background when its answer is due
//	cache (library)        answers a token seen within its TTLs; coalesces
//	tokenLanes             decides the lane of a review about to be sent
//	review                 the TokenReview
//
// The library's cache runs the review under a context of its own (so that
// one caller giving up does not fail the others waiting for the same
// token), which carries nothing of the request: the source reaches the
// lanes through sourceNoting instead.
//
// Stale while revalidate (Options.OutageGrace): a token whose last review
// accepted it within the grace is answered at once from memory, and never
// waits for a review: when its answer is due again (AuthnTTL after that
// review, as the library's cache would keep it), one review of it is sent
// in the background, however many requests carry it. Its verdict counts
// from the next request on: an acceptance starts the grace over, a
// rejection (or a review the API server refuses itself) forgets the token,
// so that its next request is reviewed like a stranger's; a review
// without a verdict (the API server unreachable, timing out, failing)
// changes nothing, and the next one is sent AuthnTTL later. This is why a
// silent API server costs a known publisher nothing: the alternative, a
// breaker that stops waiting for reviews after one failed, still makes
// the requests that find it closed wait ReviewTimeout (the library's
// cache coalesces every request with the token into that wait), and
// stale-if-error answers only after the wait. The price is bounded: a
// revoked token is refused from the first request after the review that
// sees it revoked, which is sent with the first request at least AuthnTTL
// after the last one: within AuthnTTL and one review of the revocation
// (of the API server's return, after an outage), as before. The answer
// from memory is never put into the library's cache, which would keep it
// another AuthnTTL, and it is never given past the grace nor past the
// token's own expiry. A token without such a review is reviewed while the
// request waits, and gets the *UnavailableError (503, Retry-After) when
// the review finds no verdict.

// staleWhileRevalidate is an authenticator.Token answering the tokens the
// lanes accepted within the grace from memory (see above), and passing
// the others to next (the library's cache, in front of the lanes).
type staleWhileRevalidate struct {
	next  authenticator.Token
	lanes *tokenLanes
	// background counts the reviews in the background, for tests to wait.
	background *sync.WaitGroup
}

func (s staleWhileRevalidate) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	k := s.lanes.keys.key("authn", token)
	last, found := s.lanes.lastAccepted(k)
	if !found {
		return s.next.AuthenticateToken(ctx, token)
	}
	if last.due(s.lanes.now()) {
		source, _ := ctx.Value(sourceKey{}).(string)
		s.background.Go(func() { s.revalidate(k, token, source, last) })
	}
	return last.resp, true, nil
}

// revalidate reviews the token of k (through the library's cache, which
// coalesces it with any review of the same token) after its answer last
// was given from memory. The lanes note a verdict; what is left is a
// review without one, which asks again AuthnTTL later (at least after the
// Retry-After of its failure), and a refused review, which forgets the
// token.
func (s staleWhileRevalidate) revalidate(k cacheKey, token, source string, last *acceptedToken) {
	defer s.lanes.sources.hold(k, source)()
	ctx, cancel := context.WithTimeout(context.Background(), s.lanes.timeout)
	defer cancel()
	_, _, err := s.next.AuthenticateToken(ctx, token)
	now := s.lanes.now()
	unavailable, noVerdict := errors.AsType[*UnavailableError](err)
	switch {
	case err == nil: // a verdict, noted by the lanes
		last.done(now.Add(s.lanes.cacheTTL))
	case noVerdict:
		last.done(now.Add(max(s.lanes.cacheTTL, unavailable.RetryAfter)))
	case ctx.Err() != nil: // the library's wait ended first
		last.done(now.Add(max(s.lanes.cacheTTL, time.Second)))
	default: // refused by the API server itself: not answered from memory
		s.lanes.forget(k, last)
		last.done(now)
	}
}

// tokenLanes is an authenticator.Token that sees only the tokens the
// library's cache could not answer: every call is a review about to be
// sent. A token that authenticated within KnownTokenTTL is re-reviewed in
// the known lane; any other is a first review, admitted by the unknown
// lane's limits for its source or refused at once.
type tokenLanes struct {
	reviews   TokenReviewer
	audiences []string
	keys      keyer
	known     *cache.LRUExpireCache // cacheKey → struct{}: tokens that authenticated
	knownTTL  time.Duration
	// accepted: cacheKey → *acceptedToken, tokens that authenticated
	// within the grace, answered from memory (staleWhileRevalidate).
	accepted *cache.LRUExpireCache
	grace    time.Duration // OutageGrace; <= 0: none
	cacheTTL time.Duration // AuthnTTL: how long an answer is given before a review is due
	health   apiHealth
	sources  waitingSources
	adm      *admission
	now      func() time.Time
	timeout  time.Duration
}

func newTokenLanes(opts Options) (*tokenLanes, error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("kubeauth: drawing the cache key: %w", err)
	}
	return &tokenLanes{
		reviews:   opts.TokenReviews,
		audiences: slices.Clone(opts.Audiences),
		keys:      keyer{secret: secret},
		known:     cache.NewLRUExpireCacheWithClock(opts.CacheSize, clockFunc(opts.Now)),
		knownTTL:  opts.KnownTokenTTL,
		accepted:  cache.NewLRUExpireCacheWithClock(opts.CacheSize, clockFunc(opts.Now)),
		grace:     opts.OutageGrace,
		cacheTTL:  max(opts.AuthnTTL, 0),
		sources:   waitingSources{m: make(map[cacheKey]*waitingSource)},
		adm: newAdmission(limits{
			rate: opts.UnknownReviewsPerSecond, burst: opts.UnknownReviewBurst,
			perSourceRate: opts.UnknownReviewsPerSourcePerSecond, perSourceBurst: opts.UnknownReviewPerSourceBurst,
			maxSources: opts.CacheSize, maxUnknownSlots: opts.MaxUnknownReviews, maxKnownSlots: opts.MaxKnownReviews,
		}, opts.Now),
		now:     opts.Now,
		timeout: opts.ReviewTimeout,
	}, nil
}

// AuthenticateToken implements authenticator.Token (see tokenLanes).
func (l *tokenLanes) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	return l.reviewInLane(ctx, l.keys.key("authn", token), token)
}

// reviewInLane reviews token in its lane and records the verdict.
func (l *tokenLanes) reviewInLane(ctx context.Context, k cacheKey, token string) (*authenticator.Response, bool, error) {
	ln := laneUnknown
	if _, known := l.known.Get(k); known {
		ln = laneKnown
	} else {
		probing, ok := l.health.probe()
		if !ok {
			return nil, false, &UnavailableError{RetryAfter: time.Second,
				Reason: "the Kubernetes API is not answering reviews now"}
		}
		defer probing()
		if ok, wait := l.adm.admitUnknown(l.sources.of(k), l.now()); !ok {
			return nil, false, &UnavailableError{RetryAfter: wait,
				Reason: "too many new bearer tokens to review, from this address or in total"}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	release, err := l.adm.enter(ctx, ln)
	if err != nil {
		return nil, false, err
	}
	defer release()
	resp, ok, err := l.review(ctx, token)
	l.health.note(err)
	switch {
	case err != nil: // no verdict: the token stays what it was
	case ok:
		l.known.Add(k, struct{}{}, l.knownTTL)
		l.accept(k, token, resp)
	default:
		l.known.Remove(k) // revoked: no longer known
		l.accepted.Remove(k)
	}
	return resp, ok, err
}

// acceptedToken is the answer of a token's last accepting review, given
// from memory up to until (staleWhileRevalidate).
type acceptedToken struct {
	resp  *authenticator.Response
	until time.Time
	mu    sync.Mutex
	// askAgain is when the next review is due; reviewing, whether one is
	// under way.
	askAgain  time.Time
	reviewing bool
}

// due says whether a review of the token is due at now and none is under
// way; if so, the caller is to send it, and call done after it.
func (a *acceptedToken) due(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reviewing || now.Before(a.askAgain) {
		return false
	}
	a.reviewing = true
	return true
}

// done ends the review under way: the next is due at askAgain.
func (a *acceptedToken) done(askAgain time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reviewing, a.askAgain = false, askAgain
}

// forget forgets the token of k unless a newer review accepted it since
// last.
func (l *tokenLanes) forget(k cacheKey, last *acceptedToken) {
	if v, found := l.accepted.Get(k); found && v.(*acceptedToken) == last {
		l.accepted.Remove(k)
	}
}

// accept notes that token (key k) was accepted now, as resp: until the
// grace is over, or the token expires if that is sooner.
func (l *tokenLanes) accept(k cacheKey, token string, resp *authenticator.Response) {
	if l.grace <= 0 {
		return
	}
	now := l.now()
	until := now.Add(l.grace)
	if exp, ok := tokenExpiry(token); ok && exp.Before(until) {
		until = exp
	}
	if !until.After(now) {
		l.accepted.Remove(k)
		return
	}
	l.accepted.Add(k, &acceptedToken{resp: resp, until: until, askAgain: now.Add(l.cacheTTL)}, until.Sub(now))
}

// lastAccepted is the last accepting review of the token of k, while
// within the grace and the token's expiry.
func (l *tokenLanes) lastAccepted(k cacheKey) (*acceptedToken, bool) {
	v, found := l.accepted.Get(k)
	if !found {
		return nil, false
	}
	a := v.(*acceptedToken)
	if l.now().After(a.until) {
		return nil, false
	}
	return a, true
}

// apiHealth is whether the last review (a TokenReview or a
// SubjectAccessReview) found no verdict. While it did, first reviews of
// tokens never seen go to the API server one at a time, as a probe, and
// the others are refused at once (503, Retry-After) rather than each
// waiting ReviewTimeout for an API server that does not answer; any
// verdict ends it. (A known token never waits: staleWhileRevalidate.)
type apiHealth struct {
	down     atomic.Bool
	probeMu  sync.Mutex
	probeOut bool
}

// probe admits a first review: at once while the API server answers, one
// at a time while it does not. done is to be called when the review ends.
func (h *apiHealth) probe() (done func(), ok bool) {
	if !h.down.Load() {
		return func() {}, true
	}
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	if h.probeOut {
		return nil, false
	}
	h.probeOut = true
	return func() {
		h.probeMu.Lock()
		defer h.probeMu.Unlock()
		h.probeOut = false
	}, true
}

// note notes the outcome of a review: err is an *UnavailableError when it
// found no verdict, nil for a verdict. A refusal says nothing about the
// API server's health.
func (h *apiHealth) note(err error) {
	if _, noVerdict := errors.AsType[*UnavailableError](err); noVerdict {
		h.down.Store(true)
	} else if err == nil {
		h.down.Store(false)
	}
}

// tokenExpiry is the exp claim of token when it is a JWT (ServiceAccount
// tokens and OIDC ID tokens are), or false. The TokenReview's status
// reports no expiry (authentication/v1 has no field for it, and the
// library's cache ignores expiry), so the token is read itself. Its
// signature is not checked here: the API server has just accepted these
// very bytes, so the claim is the issuer's, and it can only shorten the
// grace. A token that is not a JWT has no expiry known here: the grace
// alone bounds it.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil || claims.Exp == nil ||
		math.IsNaN(*claims.Exp) || math.Abs(*claims.Exp) > 1e12 {
		return time.Time{}, false
	}
	sec, frac := math.Modf(*claims.Exp)
	return time.Unix(int64(sec), int64(frac*1e9)), true
}

// sourceKey is the context key of the request's source address.
type sourceKey struct{}

// sourceNoting notes the source of each request under its token's key for
// as long as it waits for the cache, so that the review the cache may
// start is charged to a source.
type sourceNoting struct {
	next  authenticator.Token
	lanes *tokenLanes
}

func (s sourceNoting) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	source, _ := ctx.Value(sourceKey{}).(string)
	defer s.lanes.sources.hold(s.lanes.keys.key("authn", token), source)()
	return s.next.AuthenticateToken(ctx, token)
}

// waitingSources maps the key of each token being authenticated to the
// source of the first request still waiting with it: concurrent requests
// with one token share one review, charged to that source, as a
// coalesced review always was.
type waitingSources struct {
	mu sync.Mutex
	m  map[cacheKey]*waitingSource
}

type waitingSource struct {
	source  string
	waiters int
}

// hold notes source under k until the returned release is called.
func (w *waitingSources) hold(k cacheKey, source string) (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.m[k]
	if ws == nil {
		ws = &waitingSource{source: source}
		w.m[k] = ws
	}
	ws.waiters++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if ws.waiters--; ws.waiters == 0 {
			delete(w.m, k)
		}
	}
}

// of is the source noted under k, or "" (one shared source) when none is.
func (w *waitingSources) of(k cacheKey) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ws := w.m[k]; ws != nil {
		return ws.source
	}
	return ""
}

// cacheKey is an HMAC-SHA256 under a key drawn at random when the Auth is
// built: the lanes remember tokens by it, never by the token, and a heap
// dump does not even allow guessing a token offline.
type cacheKey [sha256.Size]byte

// keyer derives cache keys. Every part is length-prefixed, so that no two
// different lists of parts share an encoding.
type keyer struct{ secret []byte }

func (k keyer) key(parts ...string) cacheKey {
	mac := hmac.New(sha256.New, k.secret)
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		mac.Write(n[:])
		mac.Write([]byte(p))
	}
	var out cacheKey
	mac.Sum(out[:0])
	return out
}

// clockFunc adapts a func to the clock of LRUExpireCache.
type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// defaults fills the zero fields of opts and refuses negative limits,
// naming the field.
func defaults(opts *Options) error {
	for _, f := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&opts.AuthnTTL, DefaultAuthnTTL}, {&opts.AuthnNegativeTTL, DefaultAuthnNegativeTTL},
		{&opts.AuthzTTL, DefaultAuthzTTL}, {&opts.AuthzNegativeTTL, DefaultAuthzNegativeTTL},
		{&opts.ReviewTimeout, DefaultReviewTimeout}, {&opts.KnownTokenTTL, DefaultKnownTokenTTL},
		{&opts.OutageGrace, DefaultOutageGrace},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *float64
		def  float64
	}{
		{"UnknownReviewsPerSecond", &opts.UnknownReviewsPerSecond, DefaultUnknownReviewsPerSecond},
		{"UnknownReviewsPerSourcePerSecond", &opts.UnknownReviewsPerSourcePerSecond, DefaultUnknownReviewsPerSourcePerSecond},
	} {
		if *f.v < 0 {
			return fmt.Errorf("kubeauth: %s must not be negative, got %v", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"UnknownReviewBurst", &opts.UnknownReviewBurst, DefaultUnknownReviewBurst},
		{"UnknownReviewPerSourceBurst", &opts.UnknownReviewPerSourceBurst, DefaultUnknownReviewPerSourceBurst},
		{"MaxUnknownReviews", &opts.MaxUnknownReviews, DefaultMaxUnknownReviews},
		{"MaxKnownReviews", &opts.MaxKnownReviews, DefaultMaxKnownReviews},
		{"CacheSize", &opts.CacheSize, DefaultCacheSize},
	} {
		if *f.v < 0 {
			return fmt.Errorf("kubeauth: %s must not be negative, got %d", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return nil
}
