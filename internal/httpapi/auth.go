package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors of an Auth. Implementations wrap them, or return an
// *UnavailableError when they cannot decide now; anything else is an
// internal error (for example, the Auth lacking permission to review).
var (
	// ErrUnauthenticated answers 401 with WWW-Authenticate: Bearer.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden answers 403.
	ErrForbidden = errors.New("forbidden")
)

// UnavailableError is an Auth's answer when it cannot decide now: it is
// overloaded, or what it asks (the TokenReview API) is unreachable. It is
// not a verdict on the token: the API answers 503 Unavailable with
// Retry-After, and the caller retries.
type UnavailableError struct {
	// RetryAfter is when a retry may succeed; at least one second is
	// answered.
	RetryAfter time.Duration
	// Reason is answered to the client: what is overloaded or unreachable,
	// never a token.
	Reason string
	// Err is the cause, logged and never answered. Nil means the Auth shed
	// the request by its own limits: that is logged at V(1) only, so that a
	// flood does not become a flood of error logs.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// authError maps an Auth error: an *UnavailableError to 503 with
// Retry-After, the sentinel to its answer, anything else to an internal
// error.
func authError(err, sentinel error, status int, code Code, message string) *apiError {
	if ue, ok := errors.AsType[*UnavailableError](err); ok {
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, cause: err,
			retryAfter: retryAfterSeconds(ue.RetryAfter), quiet: ue.Err == nil,
			message: ue.Reason + "; retry after the time in Retry-After"}
	}
	if !errors.Is(err, sentinel) {
		return internalError(fmt.Errorf("auth: %w", err))
	}
	return &apiError{status: status, code: code, message: message, cause: err}
}

// What the handler authorises. Publishing needs create on
// events.hookkeeper.dev (a name for RBAC only). Reading is authorised as
// the aggregated API delivery.hookkeeper.dev authorises the same read, so
// that one role grants or refuses it at both doors: get or list on
// deliveries or webhookevents, and for an event's data get on
// webhookevents/data (docs/adr/0014).
const (
	VerbCreate = "create"
	VerbGet    = "get"
	VerbList   = "list"

	PublishGroup   = "hookkeeper.dev"
	ResourceEvents = "events"

	HistoryGroup          = "delivery.hookkeeper.dev"
	ResourceDeliveries    = "deliveries"
	ResourceWebhookEvents = "webhookevents"
	SubresourceData       = "data"
)

// Principal is an authenticated caller, shaped like a Kubernetes user so
// that a TokenReview implementation can fill it.
type Principal struct {
	Username string
	UID      string
	Groups   []string
	// Extra is what the authenticator adds (for a ServiceAccount token: the
	// pod and node it was issued for); passed on to authorization as is.
	Extra map[string][]string
}

// Access is what a request wants to do, as Kubernetes resource attributes.
// Name is empty for publish and list.
type Access struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

type principalKey struct{}

// withPrincipal returns ctx carrying the authenticated caller, for handlers
// that authorise more than their route (event data).
func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalFrom returns the caller withPrincipal stored.
func principalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Auth authenticates requests and authorizes what they do. The Kubernetes
// implementation (TokenReview and SubjectAccessReview) is the adapter
// package internal/kubeauth, the one package under internal/ allowed to
// import Kubernetes; StaticTokens serves local development and tests.
type Auth interface {
	// Authenticate identifies the caller of r, or returns an error wrapping
	// ErrUnauthenticated.
	Authenticate(r *http.Request) (Principal, error)
	// Authorize returns nil when p may perform a, or an error wrapping
	// ErrForbidden.
	Authorize(ctx context.Context, p Principal, a Access) error
}

// StaticTokens maps bearer tokens to principals; a known token may do
// anything. For local development and tests only.
type StaticTokens map[string]Principal

// Authenticate implements Auth. Tokens are compared in constant time.
func (s StaticTokens) Authenticate(r *http.Request) (Principal, error) {
	token, ok := BearerToken(r)
	if !ok {
		return Principal{}, fmt.Errorf("no bearer token: %w", ErrUnauthenticated)
	}
	var (
		found bool
		who   Principal
	)
	for t, p := range s {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			found, who = true, p
		}
	}
	if !found {
		return Principal{}, fmt.Errorf("unknown bearer token: %w", ErrUnauthenticated)
	}
	return who, nil
}

// Authorize implements Auth: every authenticated principal may do anything.
func (StaticTokens) Authorize(context.Context, Principal, Access) error { return nil }

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header (scheme case-insensitive, RFC 6750).
func BearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
