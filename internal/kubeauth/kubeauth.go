// Package kubeauth is the Kubernetes implementation of httpapi.Auth: bearer
// tokens (ServiceAccount tokens, or any token the API server accepts) are
// authenticated with a TokenReview, and what the caller wants to do is
// authorized with a SubjectAccessReview, so that who may publish and read
// is decided by ordinary RBAC.
//
// It is the adapter between the HTTP API and Kubernetes, not part of the
// delivery engine: it is the one package under internal/ allowed to import
// Kubernetes packages (see test/architecture), and nothing else under
// internal/ imports it.
//
// Each route names what it needs in Kubernetes terms (httpapi.Access), and
// the SubjectAccessReview asks exactly that: create on events.hookkeeper.dev
// to publish (a resource named for RBAC only, granted by the ClusterRole
// hookkeeper-event-publisher), and for reads the permissions of the
// aggregated API delivery.hookkeeper.dev, event data included (see
// internal/httpapi and docs/adr/0014).
//
// Decisions are cached briefly (see Options): a revoked token or a removed
// RoleBinding takes effect within the TTLs. Caches are keyed by an HMAC of
// the token under a per-process random key; a token is never stored, never
// logged and never part of an error. Accepted and rejected tokens are
// cached apart, so that rejections (a flood of made-up tokens) never evict
// an accepted one.
//
// Reviews are admitted through two lanes (admission.go): a flood of tokens
// never seen is limited per source address and in total and shed at once
// with httpapi.UnavailableError (503, Retry-After), while tokens that
// authenticated before and permission checks go through a lane of their
// own that strangers cannot fill. A review that fails for want of the API
// server (unreachable, throttled, timed out) is an UnavailableError too: it
// says nothing about the token.
package kubeauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/singleflight"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hookkeeper/hookkeeper/internal/httpapi"
)

// The manager creates TokenReviews and SubjectAccessReviews; `make
// manifests` puts these rules into its ClusterRole.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Defaults of Options.
const (
	DefaultAuthnTTL         = 30 * time.Second
	DefaultAuthnNegativeTTL = 5 * time.Second
	DefaultAuthzTTL         = 10 * time.Second
	DefaultAuthzNegativeTTL = 5 * time.Second
	DefaultKnownTokenTTL    = time.Hour
	DefaultCacheSize        = 4096
	DefaultReviewTimeout    = 10 * time.Second

	// The unknown lane: first reviews of tokens never seen.
	DefaultUnknownReviewsPerSecond          = 50
	DefaultUnknownReviewBurst               = 100
	DefaultUnknownReviewsPerSourcePerSecond = 5
	DefaultUnknownReviewPerSourceBurst      = 10
	DefaultMaxUnknownReviews                = 16
	// The known lane: re-reviews of known tokens, SubjectAccessReviews.
	DefaultMaxKnownReviews = 32
)

// TokenReviewer creates TokenReviews; client-go's TokenReviewInterface is
// one.
type TokenReviewer interface {
	Create(ctx context.Context, review *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// SubjectAccessReviewer creates SubjectAccessReviews; client-go's
// SubjectAccessReviewInterface is one.
type SubjectAccessReviewer interface {
	Create(ctx context.Context, review *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// Options configure an Auth. TokenReviews and SubjectAccessReviews are
// required; zero durations and sizes take the defaults, a negative TTL
// disables that cache.
type Options struct {
	TokenReviews         TokenReviewer
	SubjectAccessReviews SubjectAccessReviewer

	// Audiences, when set, are the audiences a token must be issued for
	// (TokenReview spec.audiences), for example "hookkeeper": callers then
	// send a projected ServiceAccount token made for hookkeeper, which the
	// Kubernetes API itself does not accept, rather than their API token.
	// Empty: the API server's own audiences.
	Audiences []string

	// AuthnTTL is how long an authenticated token is trusted without
	// asking again (default 30s); AuthnNegativeTTL how long a rejected one
	// stays rejected (default 5s). A negative AuthnTTL disables the cache
	// and with it the known lane: every review is then a first one.
	AuthnTTL, AuthnNegativeTTL time.Duration
	// KnownTokenTTL is how long a token that authenticated stays known
	// (default 1h, a ServiceAccount token's usual lifetime): its re-reviews
	// take the known lane, exempt from the unknown lane's limits.
	KnownTokenTTL time.Duration
	// AuthzTTL is how long an allowed decision is reused (default 10s);
	// AuthzNegativeTTL a denied one (default 5s: a new RoleBinding takes
	// effect quickly).
	AuthzTTL, AuthzNegativeTTL time.Duration
	// CacheSize bounds each cache (accepted tokens, rejected tokens,
	// decisions, sources; default 4096 entries each).
	CacheSize int
	// ReviewTimeout bounds one call to the API server, and a known-lane
	// review's wait for a slot (default 10s).
	ReviewTimeout time.Duration

	// UnknownReviewsPerSecond and UnknownReviewBurst limit first reviews
	// of tokens never seen, in total (default 50/s, burst 100: about what
	// the API server's default priority level spares); the PerSource pair
	// limits them per source address, an IPv6 one by its /64 (default
	// 5/s, burst 10). A review over a limit is refused at once (503,
	// Retry-After when a review is due).
	UnknownReviewsPerSecond          float64
	UnknownReviewBurst               int
	UnknownReviewsPerSourcePerSecond float64
	UnknownReviewPerSourceBurst      int
	// MaxUnknownReviews bounds first reviews in flight (default 16; more
	// are refused at once), MaxKnownReviews the known lane's (default 32;
	// more wait up to ReviewTimeout).
	MaxUnknownReviews, MaxKnownReviews int

	// Now is the clock of the caches; default time.Now.
	Now func() time.Time
	// Log receives nothing sensitive; default discard.
	Log logr.Logger
}

// Auth implements httpapi.Auth with TokenReview and SubjectAccessReview.
type Auth struct {
	opts     Options
	keys     keyer
	authn    *ttlCache[authnResult] // accepted tokens, kept KnownTokenTTL
	rejected *ttlCache[string]      // rejected tokens and why
	authz    *ttlCache[bool]
	adm      *admission
	flight   singleflight.Group
}

var _ httpapi.Auth = (*Auth)(nil)

// authnResult is a TokenReview outcome: the principal, or a rejection with
// its (redacted) reason. An accepted one is trusted until fresh, and known
// (re-reviewed in the known lane) until it leaves the cache.
type authnResult struct {
	ok        bool
	principal httpapi.Principal
	reason    string
	fresh     time.Time
}

// New returns an Auth.
func New(opts Options) (*Auth, error) {
	if opts.TokenReviews == nil || opts.SubjectAccessReviews == nil {
		return nil, errors.New("kubeauth: TokenReviews and SubjectAccessReviews are required")
	}
	defaultDuration(&opts.AuthnTTL, DefaultAuthnTTL)
	defaultDuration(&opts.AuthnNegativeTTL, DefaultAuthnNegativeTTL)
	defaultDuration(&opts.AuthzTTL, DefaultAuthzTTL)
	defaultDuration(&opts.AuthzNegativeTTL, DefaultAuthzNegativeTTL)
	defaultDuration(&opts.ReviewTimeout, DefaultReviewTimeout)
	defaultDuration(&opts.KnownTokenTTL, DefaultKnownTokenTTL)
	if err := defaultLimits(&opts); err != nil {
		return nil, err
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	opts.Audiences = slices.Clone(opts.Audiences)
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("kubeauth: drawing the cache key: %w", err)
	}
	return &Auth{
		opts:     opts,
		keys:     keyer{secret: secret},
		authn:    newTTLCache[authnResult](opts.CacheSize),
		rejected: newTTLCache[string](opts.CacheSize),
		authz:    newTTLCache[bool](opts.CacheSize),
		adm: newAdmission(limits{
			rate: opts.UnknownReviewsPerSecond, burst: opts.UnknownReviewBurst,
			perSourceRate: opts.UnknownReviewsPerSourcePerSecond, perSourceBurst: opts.UnknownReviewPerSourceBurst,
			maxSources: opts.CacheSize, maxUnknownSlots: opts.MaxUnknownReviews, maxKnownSlots: opts.MaxKnownReviews,
		}),
	}, nil
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// defaultLimits fills the admission limits of opts and refuses negative
// ones, naming the field.
func defaultLimits(opts *Options) error {
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
	} {
		if *f.v < 0 {
			return fmt.Errorf("kubeauth: %s must not be negative, got %d", f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return nil
}

// NewForConfig returns an Auth that reviews through the API server of cfg
// with a clientset of its own. Its client-side rate limiter is off: the
// Auth's lanes limit what reaches the API server, and a shared limiter
// would make every caller queue behind a flood of unknown tokens.
func NewForConfig(cfg *rest.Config, opts Options) (*Auth, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: building the clientset: %w", err)
	}
	opts.TokenReviews = cs.AuthenticationV1().TokenReviews()
	opts.SubjectAccessReviews = cs.AuthorizationV1().SubjectAccessReviews()
	return New(opts)
}

// Authenticate implements httpapi.Auth with a (cached) TokenReview. A token
// accepted within AuthnTTL or rejected within AuthnNegativeTTL is answered
// from memory; one accepted within KnownTokenTTL is reviewed again in the
// known lane; any other is a first review, admitted by the unknown lane's
// limits for the request's source address or refused at once. A review
// the API server could not do is an *httpapi.UnavailableError (503), never
// a 401; the token is redacted from every error.
func (a *Auth) Authenticate(r *http.Request) (httpapi.Principal, error) {
	token, ok := httpapi.BearerToken(r)
	if !ok {
		return httpapi.Principal{}, fmt.Errorf("no bearer token: %w", httpapi.ErrUnauthenticated)
	}
	k := a.keys.key("authn", token)
	now := a.opts.Now()
	l := laneUnknown
	if res, found := a.authn.get(k, now); found {
		if now.Before(res.fresh) {
			return clonePrincipal(res.principal), nil
		}
		l = laneKnown
	} else if reason, found := a.rejected.get(k, now); found {
		return httpapi.Principal{}, rejectedErr(reason)
	}
	v, err := a.coalesce(r.Context(), k, l, sourceOf(r.RemoteAddr), func(ctx context.Context) (any, error) {
		return a.review(ctx, k, token)
	})
	if err != nil {
		return httpapi.Principal{}, err
	}
	res := v.(authnResult)
	if !res.ok {
		return httpapi.Principal{}, rejectedErr(res.reason)
	}
	return clonePrincipal(res.principal), nil
}

func rejectedErr(reason string) error {
	return fmt.Errorf("token rejected: %s: %w", reason, httpapi.ErrUnauthenticated)
}

// review asks the API server about token and caches the answer under k.
func (a *Auth) review(ctx context.Context, k cacheKey, token string) (authnResult, error) {
	tr, err := a.opts.TokenReviews.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return authnResult{}, reviewFailure("TokenReview", redact(err, token))
	}
	res := authnResult{ok: tr.Status.Authenticated}
	switch {
	case !res.ok:
		res.reason = "not authenticated by the API server"
		if tr.Status.Error != "" {
			res.reason = redact(errors.New(tr.Status.Error), token).Error()
		}
	case tr.Status.User.Username == "":
		res.ok, res.reason = false, "the TokenReview names no user"
	case len(a.opts.Audiences) > 0 && !intersects(a.opts.Audiences, tr.Status.Audiences):
		// The API server only authenticates a token for the audiences
		// asked for; check anyway, as the TokenReview API asks clients to.
		res.ok, res.reason = false, "the token is not issued for this API's audiences"
	default:
		u := tr.Status.User
		res.principal = httpapi.Principal{Username: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}
		if len(u.Extra) > 0 {
			res.principal.Extra = make(map[string][]string, len(u.Extra))
			for key, v := range u.Extra {
				res.principal.Extra[key] = slices.Clone([]string(v))
			}
		}
	}
	now := a.opts.Now()
	if res.ok {
		res.fresh = now.Add(a.opts.AuthnTTL)
		if a.opts.AuthnTTL > 0 {
			a.authn.put(k, res, max(a.opts.AuthnTTL, a.opts.KnownTokenTTL), now)
		}
		a.rejected.remove(k)
	} else {
		a.rejected.put(k, res.reason, a.opts.AuthnNegativeTTL, now)
		a.authn.remove(k) // revoked: no longer known
	}
	return res, nil
}

// Authorize implements httpapi.Auth with a (cached) SubjectAccessReview.
func (a *Auth) Authorize(ctx context.Context, p httpapi.Principal, acc httpapi.Access) error {
	attrs, err := resourceAttributes(acc)
	if err != nil {
		return err
	}
	k := a.keys.key(authzKeyParts(p, attrs)...)
	allowed, cached := a.authz.get(k, a.opts.Now())
	if !cached {
		v, err := a.coalesce(ctx, k, laneKnown, "", func(ctx context.Context) (any, error) {
			return a.access(ctx, k, p, attrs)
		})
		if err != nil {
			return err
		}
		allowed = v.(bool)
	}
	if !allowed {
		return fmt.Errorf("%s %s.%s in namespace %q not allowed: %w",
			attrs.Verb, attrs.Resource, attrs.Group, attrs.Namespace, httpapi.ErrForbidden)
	}
	return nil
}

// access asks the API server whether p may do attrs and caches the answer
// under k. A denial with an evaluation error is answered but not cached:
// the authorizer may have failed only for now.
func (a *Auth) access(ctx context.Context, k cacheKey, p httpapi.Principal, attrs *authzv1.ResourceAttributes) (bool, error) {
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		ResourceAttributes: attrs,
		User:               p.Username,
		UID:                p.UID,
		Groups:             p.Groups,
	}}
	if len(p.Extra) > 0 {
		sar.Spec.Extra = make(map[string]authzv1.ExtraValue, len(p.Extra))
		for key, v := range p.Extra {
			sar.Spec.Extra[key] = authzv1.ExtraValue(v)
		}
	}
	res, err := a.opts.SubjectAccessReviews.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, reviewFailure("SubjectAccessReview", err)
	}
	allowed := res.Status.Allowed && !res.Status.Denied
	if !allowed && res.Status.EvaluationError != "" {
		a.opts.Log.V(1).Info("SubjectAccessReview denied with an evaluation error",
			"user", p.Username, "verb", attrs.Verb, "resource", attrs.Resource, "namespace", attrs.Namespace,
			"evaluationError", res.Status.EvaluationError)
		return false, nil
	}
	ttl := a.opts.AuthzTTL
	if !allowed {
		ttl = a.opts.AuthzNegativeTTL
	}
	a.authz.put(k, allowed, ttl, a.opts.Now())
	return allowed, nil
}

// coalesce runs one review per key at a time, in lane l: concurrent
// requests with the same new token wait for the same TokenReview, and only
// the review started is charged to the unknown lane's limits (of source,
// the first caller's). The
// review runs under its own deadline, not the first caller's context, so
// that one caller giving up does not fail the others; each caller still
// stops waiting when its own context ends.
func (a *Auth) coalesce(ctx context.Context, k cacheKey, l lane, source string, fn func(context.Context) (any, error)) (any, error) {
	ch := a.flight.DoChan(string(k[:]), func() (any, error) {
		if l == laneUnknown {
			if ok, wait := a.adm.admitUnknown(source, a.opts.Now()); !ok {
				return nil, &httpapi.UnavailableError{RetryAfter: wait,
					Reason: "too many new bearer tokens to review, from this address or in total"}
			}
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.ReviewTimeout)
		defer cancel()
		release, err := a.adm.enter(rctx, l)
		if err != nil {
			return nil, err
		}
		defer release()
		return fn(rctx)
	})
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, &httpapi.UnavailableError{RetryAfter: time.Second, Reason: "the review did not finish in time",
			Err: fmt.Errorf("waiting for a review: %w", context.Cause(ctx))}
	}
}

// reviewFailure classifies a failed review: the API server refusing the
// request itself (the manager lacks RBAC, a malformed review) is an
// internal error; anything else (unreachable, throttled, timed out,
// failing) is an *httpapi.UnavailableError, with the API server's own
// Retry-After when it sent one.
func reviewFailure(what string, err error) error {
	err = fmt.Errorf("creating a %s: %w", what, err)
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsBadRequest(err),
		apierrors.IsInvalid(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		return err
	}
	retry := time.Second
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	return &httpapi.UnavailableError{RetryAfter: retry, Reason: "the Kubernetes API could not review the request now", Err: err}
}

// resourceAttributes is what RBAC checks for acc: the attributes the route
// names, as they are. An access that names no namespace, verb, group or
// resource is refused.
func resourceAttributes(acc httpapi.Access) (*authzv1.ResourceAttributes, error) {
	if acc.Namespace == "" {
		return nil, fmt.Errorf("no namespace to authorize in: %w", httpapi.ErrForbidden)
	}
	if acc.Verb == "" || acc.Group == "" || acc.Resource == "" {
		return nil, fmt.Errorf("no Kubernetes permission names %s on %s.%s: %w", acc.Verb, acc.Resource, acc.Group, httpapi.ErrForbidden)
	}
	return &authzv1.ResourceAttributes{Namespace: acc.Namespace, Verb: acc.Verb, Group: acc.Group,
		Resource: acc.Resource, Subresource: acc.Subresource, Name: acc.Name}, nil
}

// authzKeyParts is everything a SubjectAccessReview decision depends on.
func authzKeyParts(p httpapi.Principal, attrs *authzv1.ResourceAttributes) []string {
	groups := slices.Clone(p.Groups)
	slices.Sort(groups)
	parts := []string{"authz", p.Username, p.UID, fmt.Sprint(len(groups))}
	parts = append(parts, groups...)
	keys := make([]string, 0, len(p.Extra))
	for key := range p.Extra {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	parts = append(parts, fmt.Sprint(len(keys)))
	for _, key := range keys {
		parts = append(parts, key, fmt.Sprint(len(p.Extra[key])))
		parts = append(parts, p.Extra[key]...)
	}
	return append(parts, attrs.Verb, attrs.Group, attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name)
}

func clonePrincipal(p httpapi.Principal) httpapi.Principal {
	p.Groups = slices.Clone(p.Groups)
	if p.Extra != nil {
		extra := make(map[string][]string, len(p.Extra))
		for k, v := range p.Extra {
			extra[k] = slices.Clone(v)
		}
		p.Extra = extra
	}
	return p
}

func intersects(a, b []string) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

// redact returns err, or when its message contains token, an error with
// the same message and the token replaced (and no wrapped chain left that
// could still print it).
func redact(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "[REDACTED]"))
}
