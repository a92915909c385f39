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
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
)

// The token path, outermost first:
//
//	bearertoken (library)  the Authorization header
//	sourceNoting           notes the request's source address under the token's key
//	cache (library)        answers a token seen within its TTLs; coalesces
//	tokenLanes             decides the lane of a review about to be sent;
//	                       answers the last verdict when none comes (outage)
//	review                 the TokenReview
//
// The library's cache runs the review under a context of its own (so that
// one caller giving up does not fail the others waiting for the same
// token), which carries nothing of the request: the source reaches the
// lanes through sourceNoting instead.
//
// Stale if error (Options.OutageGrace): a token whose last review
// accepted it within the grace, and whose re-review now fails without a
// verdict (the API server unreachable, timing out, failing, or the lanes
// too full to wait for it), is accepted as it was, so that publishers
// keep publishing while the control plane is down. The library's cache
// then keeps that answer for AuthnTTL like any other, which is why it is
// only given while AuthnTTL still fits in the grace: no token is accepted
// past the grace, nor past its own expiry. A verdict always wins at once:
// a rejection forgets the token. A token without such a review gets the
// *UnavailableError (503, Retry-After).

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
	// within the grace, answered when a re-review finds no verdict.
	accepted *cache.LRUExpireCache
	grace    time.Duration // OutageGrace; <= 0: none
	cacheTTL time.Duration // AuthnTTL: how long the library keeps an answer
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
	k := l.keys.key("authn", token)
	resp, ok, err := l.reviewInLane(ctx, k, token)
	if _, noVerdict := errors.AsType[*UnavailableError](err); noVerdict {
		if last, found := l.lastAccepted(k); found {
			return last, true, nil
		}
	}
	return resp, ok, err
}

// reviewInLane reviews token in its lane and records the verdict.
func (l *tokenLanes) reviewInLane(ctx context.Context, k cacheKey, token string) (*authenticator.Response, bool, error) {
	ln := laneUnknown
	if _, known := l.known.Get(k); known {
		ln = laneKnown
	} else if ok, wait := l.adm.admitUnknown(l.sources.of(k), l.now()); !ok {
		return nil, false, &UnavailableError{RetryAfter: wait,
			Reason: "too many new bearer tokens to review, from this address or in total"}
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	release, err := l.adm.enter(ctx, ln)
	if err != nil {
		return nil, false, err
	}
	defer release()
	resp, ok, err := l.review(ctx, token)
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
// up to until when a re-review finds no verdict.
type acceptedToken struct {
	resp  *authenticator.Response
	until time.Time
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
	l.accepted.Add(k, &acceptedToken{resp: resp, until: until}, until.Sub(now))
}

// lastAccepted is the answer to give for the token of k when its review
// found no verdict: its last accepting review's, while the library's cache
// would keep it (AuthnTTL) within the grace and the token's expiry.
func (l *tokenLanes) lastAccepted(k cacheKey) (*authenticator.Response, bool) {
	v, found := l.accepted.Get(k)
	if !found {
		return nil, false
	}
	a := v.(*acceptedToken)
	if l.now().Add(l.cacheTTL).After(a.until) {
		return nil, false
	}
	return a.resp, true
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
