// Package kubeauth is the Kubernetes implementation of ingest.Auth: bearer
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
// What each route needs, in Kubernetes terms (ingest.Access → SAR):
//
//   - publishing (POST /v1/namespaces/{ns}/events): verb create on
//     resource events in group hookkeeper.dev in namespace {ns}. No such
//     resource is served: RBAC rules can name it anyway, and the
//     ClusterRole hookkeeper-event-publisher grants it.
//   - every read (events, deliveries, attempts): verb get on
//     webhookendpoints in group hookkeeper.dev in namespace {ns}, without a
//     resource name. A delivery or event is read through the endpoints of
//     its namespace; the object read is named by a ledger ID, not by an
//     endpoint name, so a Role limited by resourceNames does not grant it.
//     The ClusterRoles hookkeeper-delivery-reader and the built-in view
//     role (which aggregates webhookendpoints-viewer-role) grant it.
//
// Decisions are cached briefly (see Options): a revoked token or a removed
// RoleBinding takes effect within the TTLs. Caches are keyed by an HMAC of
// the token under a per-process random key; a token is never stored, never
// logged and never part of an error.
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hookkeeper/hookkeeper/internal/ingest"
)

// The manager creates TokenReviews and SubjectAccessReviews; `make
// manifests` puts these rules into its ClusterRole.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Group is the API group of the resources checked.
const Group = "hookkeeper.dev"

// Resources named in SubjectAccessReviews.
const (
	// ResourceEvents is what a publisher needs create on. It is not a
	// served resource (Kubernetes' own events are in the groups "" and
	// events.k8s.io): a name for RBAC rules only.
	ResourceEvents = "events"
	// ResourceWebhookEndpoints is what a reader needs get on.
	ResourceWebhookEndpoints = "webhookendpoints"
)

// Defaults of Options.
const (
	DefaultAuthnTTL         = 30 * time.Second
	DefaultAuthnNegativeTTL = 5 * time.Second
	DefaultAuthzTTL         = 10 * time.Second
	DefaultAuthzNegativeTTL = 5 * time.Second
	DefaultCacheSize        = 4096
	DefaultReviewTimeout    = 10 * time.Second
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
	// stays rejected (default 5s).
	AuthnTTL, AuthnNegativeTTL time.Duration
	// AuthzTTL is how long an allowed decision is reused (default 10s);
	// AuthzNegativeTTL a denied one (default 5s: a new RoleBinding takes
	// effect quickly).
	AuthzTTL, AuthzNegativeTTL time.Duration
	// CacheSize bounds each of the two caches (default 4096 entries).
	CacheSize int
	// ReviewTimeout bounds one call to the API server (default 10s).
	ReviewTimeout time.Duration

	// Now is the clock of the caches; default time.Now.
	Now func() time.Time
	// Log receives nothing sensitive; default discard.
	Log logr.Logger
}

// Auth implements ingest.Auth with TokenReview and SubjectAccessReview.
type Auth struct {
	opts   Options
	keys   keyer
	authn  *ttlCache[authnResult]
	authz  *ttlCache[bool]
	flight singleflight.Group
}

var _ ingest.Auth = (*Auth)(nil)

// authnResult is a cached TokenReview outcome: the principal, or a
// rejection with its (redacted) reason.
type authnResult struct {
	ok        bool
	principal ingest.Principal
	reason    string
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
		opts:  opts,
		keys:  keyer{secret: secret},
		authn: newTTLCache[authnResult](opts.CacheSize),
		authz: newTTLCache[bool](opts.CacheSize),
	}, nil
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Client-side rate limits of the clientset NewForConfig builds: its own,
// so that a burst of unknown tokens slows the API, not the controllers.
const (
	reviewQPS   = 50
	reviewBurst = 100
)

// NewForConfig returns an Auth that reviews through the API server of cfg
// with a clientset of its own.
func NewForConfig(cfg *rest.Config, opts Options) (*Auth, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = reviewQPS, reviewBurst
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeauth: building the clientset: %w", err)
	}
	opts.TokenReviews = cs.AuthenticationV1().TokenReviews()
	opts.SubjectAccessReviews = cs.AuthorizationV1().SubjectAccessReviews()
	return New(opts)
}

// Authenticate implements ingest.Auth with a (cached) TokenReview. An
// error from the API server is returned as is (an internal error, not a
// 401), with the token redacted from it.
func (a *Auth) Authenticate(r *http.Request) (ingest.Principal, error) {
	token, ok := ingest.BearerToken(r)
	if !ok {
		return ingest.Principal{}, fmt.Errorf("no bearer token: %w", ingest.ErrUnauthenticated)
	}
	k := a.keys.key("authn", token)
	res, cached := a.authn.get(k, a.opts.Now())
	if !cached {
		v, err := a.coalesce(r.Context(), k, func(ctx context.Context) (any, error) {
			return a.review(ctx, k, token)
		})
		if err != nil {
			return ingest.Principal{}, err
		}
		res = v.(authnResult)
	}
	if !res.ok {
		return ingest.Principal{}, fmt.Errorf("token rejected: %s: %w", res.reason, ingest.ErrUnauthenticated)
	}
	return clonePrincipal(res.principal), nil
}

// review asks the API server about token and caches the answer under k.
func (a *Auth) review(ctx context.Context, k cacheKey, token string) (authnResult, error) {
	tr, err := a.opts.TokenReviews.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return authnResult{}, fmt.Errorf("creating a TokenReview: %w", redact(err, token))
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
		res.principal = ingest.Principal{Username: u.Username, UID: u.UID, Groups: slices.Clone(u.Groups)}
		if len(u.Extra) > 0 {
			res.principal.Extra = make(map[string][]string, len(u.Extra))
			for key, v := range u.Extra {
				res.principal.Extra[key] = slices.Clone([]string(v))
			}
		}
	}
	ttl := a.opts.AuthnTTL
	if !res.ok {
		ttl = a.opts.AuthnNegativeTTL
	}
	a.authn.put(k, res, ttl, a.opts.Now())
	return res, nil
}

// Authorize implements ingest.Auth with a (cached) SubjectAccessReview.
func (a *Auth) Authorize(ctx context.Context, p ingest.Principal, acc ingest.Access) error {
	attrs, err := resourceAttributes(acc)
	if err != nil {
		return err
	}
	k := a.keys.key(authzKeyParts(p, attrs)...)
	allowed, cached := a.authz.get(k, a.opts.Now())
	if !cached {
		v, err := a.coalesce(ctx, k, func(ctx context.Context) (any, error) {
			return a.access(ctx, k, p, attrs)
		})
		if err != nil {
			return err
		}
		allowed = v.(bool)
	}
	if !allowed {
		return fmt.Errorf("%s %s.%s in namespace %q not allowed: %w",
			attrs.Verb, attrs.Resource, attrs.Group, attrs.Namespace, ingest.ErrForbidden)
	}
	return nil
}

// access asks the API server whether p may do attrs and caches the answer
// under k. A denial with an evaluation error is answered but not cached:
// the authorizer may have failed only for now.
func (a *Auth) access(ctx context.Context, k cacheKey, p ingest.Principal, attrs *authzv1.ResourceAttributes) (bool, error) {
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
		return false, fmt.Errorf("creating a SubjectAccessReview: %w", err)
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

// coalesce runs one review per key at a time: concurrent requests with the
// same new token wait for the same TokenReview. The review runs under its
// own deadline, not the first caller's context, so that one caller giving
// up does not fail the others; each caller still stops waiting when its
// own context ends.
func (a *Auth) coalesce(ctx context.Context, k cacheKey, fn func(context.Context) (any, error)) (any, error) {
	ch := a.flight.DoChan(string(k[:]), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.opts.ReviewTimeout)
		defer cancel()
		return fn(rctx)
	})
	select {
	case res := <-ch:
		return res.Val, res.Err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// resourceAttributes maps what a route asks for to what RBAC checks (see
// the package documentation). Anything unmapped is refused.
func resourceAttributes(acc ingest.Access) (*authzv1.ResourceAttributes, error) {
	if acc.Namespace == "" {
		return nil, fmt.Errorf("no namespace to authorize in: %w", ingest.ErrForbidden)
	}
	switch {
	case acc.Verb == ingest.VerbCreate && acc.Resource == ingest.ResourceEvents:
		return &authzv1.ResourceAttributes{Namespace: acc.Namespace, Verb: "create", Group: Group, Resource: ResourceEvents}, nil
	case acc.Verb == ingest.VerbGet && (acc.Resource == ingest.ResourceEvents || acc.Resource == ingest.ResourceDeliveries):
		return &authzv1.ResourceAttributes{Namespace: acc.Namespace, Verb: "get", Group: Group, Resource: ResourceWebhookEndpoints}, nil
	}
	return nil, fmt.Errorf("no Kubernetes permission grants %s on %s: %w", acc.Verb, acc.Resource, ingest.ErrForbidden)
}

// authzKeyParts is everything a SubjectAccessReview decision depends on.
func authzKeyParts(p ingest.Principal, attrs *authzv1.ResourceAttributes) []string {
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

func clonePrincipal(p ingest.Principal) ingest.Principal {
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
