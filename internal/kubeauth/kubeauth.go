// Package kubeauth authenticates and authorizes the HTTP API's callers
// against Kubernetes, on k8s.io/apiserver's delegating pieces, so that the
// HTTP API and the aggregated API decide with one stack: bearer tokens
// (ServiceAccount tokens, or any token the API server accepts) are
// reviewed with a TokenReview behind the library's token cache
// (authentication/token/cache), and permissions with the library's
// delegating authorizer (authorizerfactory.DelegatingAuthorizerConfig: a
// SubjectAccessReview behind its decision cache). Auth implements the
// library's interfaces (authenticator.Request, authorizer.Authorizer);
// what a route needs is the caller's to say (internal/httpapi's routes).
//
// What the library lacks, and this package adds, is admission in front of
// the TokenReview (admission.go, docs/adr/0005 and 0016): a review of a
// token never seen is limited per source address and in total and shed at
// once with an *UnavailableError (503, Retry-After), while tokens that
// authenticated before and permission checks go through a lane of their
// own that strangers cannot fill. The library's cache answers a cached
// token without a review; the lanes only see reviews about to be sent.
//
// A token accepted and a permission allowed within OutageGrace (default
// 10 minutes) are answered at once from memory, never past the token's
// own expiry, and re-reviewed in the background once their TTL is over
// (stale while revalidate, tokens.go): no request waits for a review of
// them, so a silent API server does not slow a known publisher. A verdict
// counts from the next request on: a revoked token or a removed
// RoleBinding takes effect within the TTL and one review (after an
// outage, of the API server's return). Whatever has no such answer is
// reviewed while the request waits, and gets an *UnavailableError (503,
// Retry-After) when the review finds no verdict.
// Tokens are never logged and never part of an error: the caches are keyed
// by HMACs under per-process random keys. A review that fails for want of
// the API server (unreachable, throttled, timed out) is an
// *UnavailableError: it says nothing about the token.
//
// It is an adapter between the HTTP API and Kubernetes, not part of the
// delivery engine, and imports neither (see test/architecture).
package kubeauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// The manager creates TokenReviews and SubjectAccessReviews; `make
// manifests` puts these rules into its ClusterRole.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Group is the API group of hookkeeper's resources, and of the RBAC-only
// resource events.
const Group = "hookkeeper.dev"

// ResourceEvents is what a publisher needs create on. It is not a served
// resource (Kubernetes' own events are in the groups "" and
// events.k8s.io): a name for RBAC rules only.
const ResourceEvents = "events"

// Defaults of Options.
const (
	DefaultAuthnTTL         = 30 * time.Second
	DefaultAuthnNegativeTTL = 5 * time.Second
	DefaultAuthzTTL         = 10 * time.Second
	DefaultAuthzNegativeTTL = 5 * time.Second
	DefaultKnownTokenTTL    = time.Hour
	DefaultCacheSize        = 4096
	DefaultReviewTimeout    = 10 * time.Second
	DefaultOutageGrace      = 10 * time.Minute

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

// Options configure an Auth. TokenReviews and SubjectAccessReviews are
// required; zero durations and sizes take the defaults.
type Options struct {
	TokenReviews TokenReviewer
	// SubjectAccessReviews is the client of the library's delegating
	// authorizer.
	SubjectAccessReviews authorizationv1.AuthorizationV1Interface

	// Audiences, when set, are the audiences a token must be issued for
	// (TokenReview spec.audiences), for example "hookkeeper": callers then
	// send a projected ServiceAccount token made for hookkeeper, which the
	// Kubernetes API itself does not accept, rather than their API token.
	// Empty: the API server's own audiences.
	Audiences []string

	// AuthnTTL is how long the token cache trusts an authenticated token
	// (default 30s); AuthnNegativeTTL how long a rejected one stays
	// rejected (default 5s).
	AuthnTTL, AuthnNegativeTTL time.Duration
	// KnownTokenTTL is how long a token that authenticated stays known
	// (default 1h, a ServiceAccount token's usual lifetime): its re-reviews
	// take the known lane, exempt from the unknown lane's limits.
	KnownTokenTTL time.Duration
	// AuthzTTL is how long the authorizer reuses an allowed decision
	// (default 10s); AuthzNegativeTTL a denied one (default 5s: a new
	// RoleBinding takes effect quickly).
	AuthzTTL, AuthzNegativeTTL time.Duration
	// CacheSize bounds the known tokens and the sources remembered
	// (default 4096 each).
	CacheSize int
	// ReviewTimeout bounds one review, a known-lane wait for a slot
	// included (default 10s).
	ReviewTimeout time.Duration
	// OutageGrace is how long after its last accepting TokenReview a token
	// is still accepted, and after its last allowing SubjectAccessReview a
	// permission still allowed (the same user and attributes), while
	// reviews find no verdict: the API server unreachable, timing out or
	// failing (5xx), or the lanes too full to wait for it (default 10m; a
	// negative value turns it off). Within it they are answered at once,
	// and re-reviewed in the background every AuthnTTL (AuthzTTL): no
	// request waits for their review. A verdict counts from the next
	// request on: a token the API server rejects, or a permission it
	// denies, is refused from the first request after the review that
	// said so. A token is never accepted past its own expiry (its exp
	// claim when it is a JWT, which ServiceAccount tokens are: the
	// TokenReview status reports no expiry). A token or permission without
	// such a review is an *UnavailableError (503, Retry-After) while the
	// API server does not answer, never a rejection.
	OutageGrace time.Duration

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

	// Now is the clock of the lanes; default time.Now. (The library's
	// caches read the real clock.)
	Now func() time.Time
}

// Auth authenticates requests (authenticator.Request) and authorizes them
// (authorizer.Authorizer, with the library's conditions-unaware answers).
type Auth struct {
	opts  Options
	authn authenticator.Request
	authz authorizer.Authorizer
	lanes *tokenLanes
	// allowed: cacheKey → *allowedDecision, permissions allowed within
	// OutageGrace, answered from memory.
	allowed *utilcache.LRUExpireCache
	// background counts the reviews in the background (tokens and
	// permissions), for tests to wait for.
	background *sync.WaitGroup
}

var (
	_ authenticator.Request = (*Auth)(nil)
	_ authorizer.Authorizer = (*Auth)(nil)
)

// New returns an Auth.
func New(opts Options) (*Auth, error) {
	if opts.TokenReviews == nil || opts.SubjectAccessReviews == nil {
		return nil, errors.New("kubeauth: TokenReviews and SubjectAccessReviews are required")
	}
	if err := defaults(&opts); err != nil {
		return nil, err
	}
	lanes, err := newTokenLanes(opts)
	if err != nil {
		return nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: opts.SubjectAccessReviews,
		AllowCacheTTL:             opts.AuthzTTL,
		DenyCacheTTL:              opts.AuthzNegativeTTL,
		// One attempt: a client retries a 503 itself, and retries here
		// would hold a known-lane slot while the API server is overloaded.
		WebhookRetryBackoff: &wait.Backoff{Steps: 1, Duration: time.Second},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("kubeauth: building the delegating authorizer: %w", err)
	}
	background := &sync.WaitGroup{}
	tokens := staleWhileRevalidate{
		next:       cache.New(lanes, false, opts.AuthnTTL, opts.AuthnNegativeTTL),
		lanes:      lanes,
		background: background,
	}
	return &Auth{
		opts:       opts,
		authn:      bearertoken.New(sourceNoting{next: tokens, lanes: lanes}),
		authz:      authz,
		lanes:      lanes,
		allowed:    utilcache.NewLRUExpireCacheWithClock(opts.CacheSize, clockFunc(opts.Now)),
		background: background,
	}, nil
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
	opts.SubjectAccessReviews = cs.AuthorizationV1()
	return New(opts)
}

// AuthenticateRequest implements authenticator.Request: the bearer token
// of r, answered by the token cache or reviewed in a lane (tokens.go).
// A missing or rejected token is (nil, false, nil); an error means no
// decision: an *UnavailableError (retry later) or a review the API server
// refused itself (the manager lacks RBAC: an internal error).
func (a *Auth) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	ctx := context.WithValue(r.Context(), sourceKey{}, sourceOf(r.RemoteAddr))
	resp, ok, err := a.authn.AuthenticateRequest(r.WithContext(ctx))
	switch {
	case ok:
		return resp, true, nil
	case err == nil:
		return nil, false, nil
	}
	if _, unavailable := errors.AsType[*UnavailableError](err); unavailable || errors.Is(err, errReviewRefused) {
		return nil, false, err
	}
	if ctxErr := r.Context().Err(); ctxErr != nil {
		return nil, false, &UnavailableError{RetryAfter: time.Second, Reason: "the review did not finish in time",
			Err: fmt.Errorf("waiting for a review: %w", ctxErr)}
	}
	return nil, false, nil // bearertoken's "invalid bearer token": a rejection
}

// Authorize implements authorizer.Authorizer with the library's
// delegating authorizer, in the known lane. A permission the same user
// was allowed within OutageGrace is answered at once, and re-reviewed in
// the background once AuthzTTL is over (stale while revalidate, as tokens
// are: see tokens.go); any other is reviewed while the request waits. A
// review the API server could not do is an *UnavailableError; one it
// refused itself, an internal error.
func (a *Auth) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	k, keyed := a.decisionKey(attrs)
	if !keyed {
		decision, reason, err := a.authorize(ctx, attrs)
		a.lanes.health.note(err)
		return decision, reason, err
	}
	if d, found := a.allowedBefore(k); found {
		if d.due(a.opts.Now()) {
			ctx := context.WithoutCancel(ctx)
			a.background.Go(func() { a.reauthorize(ctx, k, attrs, d) })
		}
		return authorizer.DecisionAllow, d.reason, nil
	}
	decision, reason, err := a.authorize(ctx, attrs)
	a.noteDecision(k, decision, reason, err)
	return decision, reason, err
}

// reauthorize reviews the permission of k in the background after its
// allow last was given from memory (d).
func (a *Auth) reauthorize(ctx context.Context, k cacheKey, attrs authorizer.Attributes, d *allowedDecision) {
	decision, reason, err := a.authorize(ctx, attrs)
	now := a.opts.Now()
	if retryAfter, noVerdict := a.noteDecision(k, decision, reason, err); noVerdict {
		d.done(now.Add(max(a.opts.AuthzTTL, retryAfter)))
		return
	}
	d.done(now.Add(a.opts.AuthzTTL)) // replaced or forgotten already
}

// noteDecision notes the outcome of a review of k: an allow is
// remembered, a review without a verdict changes nothing, and anything
// else (a denial, no opinion, a refused review) forgets the allow.
// Without a verdict, retryAfter is the failure's Retry-After.
func (a *Auth) noteDecision(k cacheKey, decision authorizer.Decision, reason string, err error) (retryAfter time.Duration, noVerdict bool) {
	a.lanes.health.note(err)
	unavailable, noVerdict := errors.AsType[*UnavailableError](err)
	switch {
	case err == nil && decision == authorizer.DecisionAllow:
		a.noteAllowed(k, reason)
	case noVerdict:
	default:
		a.allowed.Remove(k)
	}
	if noVerdict {
		retryAfter = unavailable.RetryAfter
	}
	return retryAfter, noVerdict
}

// authorize asks the library's delegating authorizer, in the known lane.
func (a *Auth) authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	ctx, cancel := context.WithTimeout(ctx, a.opts.ReviewTimeout)
	defer cancel()
	release, err := a.lanes.adm.enter(ctx, laneKnown)
	if err != nil {
		return authorizer.DecisionNoOpinion, "", err
	}
	defer release()
	decision, reason, err := a.authz.Authorize(ctx, attrs)
	if err != nil && decision != authorizer.DecisionAllow {
		return decision, reason, reviewFailure("SubjectAccessReview", err)
	}
	return decision, reason, nil
}

// allowedDecision is a permission's last allowing review: reviewed is
// when it was made, askAgain when the next review is due; reviewing says
// whether one is under way.
type allowedDecision struct {
	reason   string
	reviewed time.Time

	mu        sync.Mutex
	askAgain  time.Time
	reviewing bool
}

// due says whether a review of the permission is due at now and none is
// under way; if so, the caller is to send it, and call done after it.
func (d *allowedDecision) due(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.reviewing || now.Before(d.askAgain) {
		return false
	}
	d.reviewing = true
	return true
}

// done ends the review under way: the next is due at askAgain.
func (d *allowedDecision) done(askAgain time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reviewing, d.askAgain = false, askAgain
}

// decisionKey is the key of attrs's decision: the user and the attributes
// the SubjectAccessReview is made of, under the lanes' HMAC key. Requests
// with selectors (which the HTTP API does not make) have none: their
// decisions are never answered from before.
func (a *Auth) decisionKey(attrs authorizer.Attributes) (cacheKey, bool) {
	if a.opts.OutageGrace <= 0 {
		return cacheKey{}, false
	}
	if fs, err := attrs.GetFieldSelector(); err != nil || len(fs) > 0 {
		return cacheKey{}, false
	}
	if ls, err := attrs.GetLabelSelector(); err != nil || len(ls) > 0 {
		return cacheKey{}, false
	}
	type who struct {
		Name, UID string
		Groups    []string
		Extra     map[string][]string
	}
	var u *who
	if usr := attrs.GetUser(); usr != nil {
		u = &who{Name: usr.GetName(), UID: usr.GetUID(), Groups: usr.GetGroups(), Extra: usr.GetExtra()}
	}
	data, err := json.Marshal(struct {
		User                                                        *who
		Verb, APIGroup, APIVersion, Resource, Subresource, NS, Name string
		Path                                                        string
		ResourceRequest                                             bool
	}{u, attrs.GetVerb(), attrs.GetAPIGroup(), attrs.GetAPIVersion(), attrs.GetResource(), attrs.GetSubresource(),
		attrs.GetNamespace(), attrs.GetName(), attrs.GetPath(), attrs.IsResourceRequest()})
	if err != nil {
		return cacheKey{}, false
	}
	return a.lanes.keys.key("authz", string(data)), true
}

// allowedBefore is k's last allowing review, while within the grace.
func (a *Auth) allowedBefore(k cacheKey) (*allowedDecision, bool) {
	v, found := a.allowed.Get(k)
	if !found {
		return nil, false
	}
	d := v.(*allowedDecision)
	return d, !a.opts.Now().After(d.reviewed.Add(a.opts.OutageGrace))
}

// noteAllowed notes that k was allowed now. The authorizer answers an
// allow from its cache for AuthzTTL after the review: an allow within
// that time of the review noted may be that one, and is not a review.
func (a *Auth) noteAllowed(k cacheKey, reason string) {
	now := a.opts.Now()
	if d, found := a.allowedBefore(k); found && now.Sub(d.reviewed) < a.opts.AuthzTTL {
		return
	}
	a.allowed.Add(k, &allowedDecision{reason: reason, reviewed: now, askAgain: now.Add(a.opts.AuthzTTL)}, a.opts.OutageGrace)
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: no
// conditions.
func (a *Auth) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer: conditions are not
// supported, so none are evaluated.
func (a *Auth) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

// review asks the API server about token: the user, (nil, false, nil) for
// a rejection, or an error when it could not say.
func (l *tokenLanes) review(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	tr, err := l.reviews.Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: l.audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, reviewFailure("TokenReview", redact(err, token))
	}
	st := tr.Status
	switch {
	case !st.Authenticated, st.User.Username == "":
		return nil, false, nil
	case len(l.audiences) > 0 && !slices.ContainsFunc(l.audiences, func(a string) bool { return slices.Contains(st.Audiences, a) }):
		// The API server only authenticates a token for the audiences
		// asked for; check anyway, as the TokenReview API asks clients to.
		return nil, false, nil
	}
	u := &user.DefaultInfo{Name: st.User.Username, UID: st.User.UID, Groups: slices.Clone(st.User.Groups)}
	if len(st.User.Extra) > 0 {
		u.Extra = make(map[string][]string, len(st.User.Extra))
		for k, v := range st.User.Extra {
			u.Extra[k] = slices.Clone([]string(v))
		}
	}
	return &authenticator.Response{User: u, Audiences: st.Audiences}, true, nil
}

// UnavailableError is the answer of an Auth that cannot decide now: it is
// overloaded, or what it asks (the TokenReview API) is unreachable. It is
// not a verdict on the token: the HTTP API answers 503 with Retry-After.
type UnavailableError struct {
	// RetryAfter is when a retry may succeed.
	RetryAfter time.Duration
	// Reason may be answered to the client: what is overloaded or
	// unreachable, never a token.
	Reason string
	// Err is the cause, to log and never to answer. Nil means the Auth
	// shed the request by its own limits.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable is what the HTTP API asks an error that is not a verdict
// (httpapi.Unavailable): when to retry, what to answer, and whether the
// request was shed rather than failed.
func (e *UnavailableError) Unavailable() (time.Duration, string, bool) {
	return e.RetryAfter, e.Reason, e.Err == nil
}

// errReviewRefused marks a review the API server refused itself.
var errReviewRefused = errors.New("the API server refused the review")

// reviewFailure classifies a failed review: the API server refusing the
// request itself (the manager lacks RBAC, a malformed review) is an
// internal error; anything else (unreachable, throttled, timed out,
// failing) is an *UnavailableError, with the API server's own Retry-After
// when it sent one.
func reviewFailure(what string, err error) error {
	err = fmt.Errorf("creating a %s: %w", what, err)
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsBadRequest(err),
		apierrors.IsInvalid(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
		return fmt.Errorf("%w: %w", errReviewRefused, err)
	}
	retry := time.Second
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		retry = time.Duration(s) * time.Second
	}
	return &UnavailableError{RetryAfter: retry, Reason: "the Kubernetes API could not review the request now", Err: err}
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
