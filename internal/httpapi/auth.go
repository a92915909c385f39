package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Auth authenticates requests and authorizes what they do, in the
// vocabulary of k8s.io/apiserver: the same interfaces the aggregated API's
// delegating authentication and authorization implement, so that both
// doors ask one permission model. The Kubernetes implementation
// (TokenReview and SubjectAccessReview behind admission lanes) is
// internal/kubeauth; StaticTokens serves local development and tests.
//
// What the answers mean here:
//   - AuthenticateRequest: (resp, true, nil) is the caller; (nil, false,
//     nil) is no valid credential, answered 401; an error says it could
//     not decide: 503 with Retry-After when it is an Unavailable, else 500.
//   - Authorize: DecisionAllow lets the request through; an error without
//     an allow is 503 when it is an Unavailable, else 500; anything else
//     is 403.
type Auth interface {
	authenticator.Request
	authorizer.UnconditionalAuthorizer
}

// Unavailable is an Auth error that is not a verdict: the Auth is
// overloaded, or what it asks (the TokenReview API) is unreachable. The
// API answers 503 Unavailable with Retry-After, and the caller retries.
// UnavailableError is one; an implementation elsewhere (internal/kubeauth)
// implements the method on its own error, so that it need not import this
// package.
type Unavailable interface {
	error
	// Unavailable returns when a retry may succeed (at least one second
	// is answered); the reason answered to the client (what is overloaded
	// or unreachable, never a token); and shed, true when the Auth refused
	// by its own limits rather than failed: logged at V(1) only, so that a
	// flood does not become a flood of error logs.
	Unavailable() (retryAfter time.Duration, reason string, shed bool)
}

// UnavailableError is this package's Unavailable.
type UnavailableError struct {
	RetryAfter time.Duration
	// Reason is answered to the client.
	Reason string
	// Err is the cause, logged and never answered; nil means shed.
	Err error
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Unavailable implements Unavailable.
func (e *UnavailableError) Unavailable() (time.Duration, string, bool) {
	return e.RetryAfter, e.Reason, e.Err == nil
}

// retryAfterSeconds is d as a Retry-After value: whole seconds, rounded up,
// at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

// authError maps an Auth error that is not a verdict: an Unavailable to
// 503 with Retry-After, anything else to an internal error.
func authError(err error) *apiError {
	if u, ok := errors.AsType[Unavailable](err); ok {
		retryAfter, reason, shed := u.Unavailable()
		return &apiError{status: http.StatusServiceUnavailable, code: CodeUnavailable, cause: err,
			retryAfter: retryAfterSeconds(retryAfter), quiet: shed,
			message: reason + "; retry after the time in Retry-After"}
	}
	return internalError(fmt.Errorf("auth: %w", err))
}

// Names of the permissions the routes check, in Kubernetes' RBAC terms.
// Publishing needs create on events.hookkeeper.dev. Reading is authorised
// as the aggregated API delivery.hookkeeper.dev authorises the same read,
// so that one role grants or refuses it at both doors: get or list on
// deliveries or webhookevents, and for an event's data get on
// webhookevents/data (docs/adr/0014).
const (
	VerbCreate = "create"
	VerbGet    = "get"
	VerbList   = "list"
	// PublishGroup is the API group of hookkeeper's custom resources, and
	// of events: no such resource is served, RBAC rules name it to grant
	// publishing (the ClusterRole hookkeeper-event-publisher).
	PublishGroup   = "hookkeeper.dev"
	ResourceEvents = "events"

	HistoryGroup          = "delivery.hookkeeper.dev"
	ResourceDeliveries    = "deliveries"
	ResourceWebhookEvents = "webhookevents"
	SubresourceData       = "data"
)

type userKey struct{}

// withUser returns ctx carrying the authenticated caller, for handlers
// that authorise more than their route (event data).
func withUser(ctx context.Context, u user.Info) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userFrom returns the caller withUser stored.
func userFrom(ctx context.Context) user.Info {
	u, _ := ctx.Value(userKey{}).(user.Info)
	return u
}

// Access is the permission a route needs: the resource attributes of a
// Kubernetes authorization request (authorizer.AttributesRecord), which
// serve completes with the caller and hands to the Auth. Name is empty for
// publish and list.
type Access struct {
	Verb        string
	APIGroup    string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
}

// attributes is a as what an authorizer decides for u.
func (a Access) attributes(u user.Info) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: a.Verb, APIGroup: a.APIGroup, Resource: a.Resource,
		Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name, ResourceRequest: true}
}

// String names the permission as kubectl auth can-i does:
// verb resource[/subresource][.group].
func (a Access) String() string {
	s := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.APIGroup != "" {
		s += "." + a.APIGroup
	}
	return s
}

// Principal is a user of StaticTokens.
type Principal struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
}

// StaticTokens maps bearer tokens to principals; a known token may do
// anything. For local development and tests only.
type StaticTokens map[string]Principal

// AuthenticateRequest implements Auth. Tokens are compared in constant
// time.
func (s StaticTokens) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	token, ok := BearerToken(r)
	if !ok {
		return nil, false, nil
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
		return nil, false, nil
	}
	return &authenticator.Response{User: &user.DefaultInfo{
		Name: who.Username, UID: who.UID, Groups: slices.Clone(who.Groups), Extra: maps.Clone(who.Extra),
	}}, true, nil
}

// Authorize implements Auth: every authenticated user may do anything.
func (StaticTokens) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, "", nil
}

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
