package kubeauth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
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
//	tokenLanes             decides the lane of a review about to be sent
//	review                 the TokenReview
//
// The library's cache runs the review under a context of its own (so that
// one caller giving up does not fail the others waiting for the same
// token), which carries nothing of the request: the source reaches the
// lanes through sourceNoting instead.

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
	sources   waitingSources
	adm       *admission
	now       func() time.Time
	timeout   time.Duration
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
	default:
		l.known.Remove(k) // revoked: no longer known
	}
	return resp, ok, err
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
