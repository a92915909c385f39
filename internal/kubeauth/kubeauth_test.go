package kubeauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Tokens of the fakes. They are long and distinctive so that a search for
// them in logs, errors and memory dumps cannot match by accident.
const (
	goodToken = "good-token-4f1d9c2b7e6a5d3c1b0a9f8e7d6c5b4a"
	badToken  = "bad-token-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// fakeTokenReviews authenticates goodToken as a ServiceAccount, fails with
// err when set, and counts its calls.
type fakeTokenReviews struct {
	calls     atomic.Int32
	err       error
	reject    atomic.Bool   // reject goodToken too (revoked)
	audiences []string      // status.audiences answered; nil: those asked for
	block     chan struct{} // when set, every call waits for it
	lastSpec  authnv1.TokenReviewSpec
	mu        sync.Mutex
}

func (f *fakeTokenReviews) Create(ctx context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.calls.Add(1)
	f.mu.Lock()
	f.lastSpec = tr.Spec
	f.mu.Unlock()
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	out := tr.DeepCopy()
	if tr.Spec.Token != goodToken || f.reject.Load() {
		out.Status = authnv1.TokenReviewStatus{Error: "invalid bearer token"}
		return out, nil
	}
	auds := f.audiences
	if auds == nil {
		auds = tr.Spec.Audiences
	}
	out.Status = authnv1.TokenReviewStatus{
		Authenticated: true,
		Audiences:     auds,
		User: authnv1.UserInfo{
			Username: "system:serviceaccount:shop:producer",
			UID:      "uid-1",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"},
			Extra:    map[string]authnv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"producer-7d9"}},
		},
	}
	return out, nil
}

// fakeSARs allows what allow says, fails with err when set, and records
// the reviews.
type fakeSARs struct {
	mu       sync.Mutex
	specs    []authzv1.SubjectAccessReviewSpec
	err      error
	evalErr  string
	allowSet func(authzv1.SubjectAccessReviewSpec) bool
}

func (f *fakeSARs) Create(_ context.Context, sar *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, *sar.Spec.DeepCopy())
	if f.err != nil {
		return nil, f.err
	}
	out := sar.DeepCopy()
	out.Status.Allowed = f.allowSet != nil && f.allowSet(sar.Spec)
	out.Status.EvaluationError = f.evalErr
	return out, nil
}

func (f *fakeSARs) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.specs)
}

func (f *fakeSARs) last() authzv1.SubjectAccessReviewSpec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.specs[len(f.specs)-1]
}

func newAuth(t *testing.T, tr *fakeTokenReviews, sar *fakeSARs, clock *fakeClock, mod func(*Options)) *Auth {
	t.Helper()
	opts := Options{TokenReviews: tr, SubjectAccessReviews: sar, Now: clock.Now}
	if mod != nil {
		mod(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func TestNewRequiresClients(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without clients succeeded")
	}
}

func TestAuthenticateCachesAcceptedTokensFor30s(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	a := newAuth(t, tr, &fakeSARs{}, clock, nil)

	p, err := a.Authenticate(request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	if p.Username != "system:serviceaccount:shop:producer" || p.UID != "uid-1" || len(p.Groups) != 3 ||
		!slices.Equal(p.Extra["authentication.kubernetes.io/pod-name"], []string{"producer-7d9"}) {
		t.Errorf("principal = %+v", p)
	}
	p.Groups[0] = "system:masters" // the caller's copy: must not change the cache
	clock.Advance(DefaultAuthnTTL - time.Second)
	p, err = a.Authenticate(request(goodToken))
	if err != nil || p.Groups[0] != "system:serviceaccounts" {
		t.Fatalf("cached: %+v, %v", p, err)
	}
	if n := tr.calls.Load(); n != 1 {
		t.Errorf("TokenReviews within the TTL = %d, want 1", n)
	}
	clock.Advance(time.Second)
	if _, err := a.Authenticate(request(goodToken)); err != nil {
		t.Fatal(err)
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews after the TTL = %d, want 2", n)
	}
}

func TestAuthenticateCachesRejectedTokensFor5s(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	a := newAuth(t, tr, &fakeSARs{}, clock, nil)

	for range 3 {
		_, err := a.Authenticate(request(badToken))
		if !errors.Is(err, httpapi.ErrUnauthenticated) {
			t.Fatalf("bad token: %v", err)
		}
	}
	if n := tr.calls.Load(); n != 1 {
		t.Errorf("TokenReviews within the negative TTL = %d, want 1", n)
	}
	clock.Advance(DefaultAuthnNegativeTTL)
	if _, err := a.Authenticate(request(badToken)); !errors.Is(err, httpapi.ErrUnauthenticated) {
		t.Fatal(err)
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews after the negative TTL = %d, want 2", n)
	}
}

func TestAuthenticateWithoutTokenAsksNobody(t *testing.T) {
	tr := &fakeTokenReviews{}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)
	for _, h := range []string{"", "Basic dXNlcjpwdw==", "Bearer ", "Bearer"} {
		r := request("")
		if h != "" {
			r.Header.Set("Authorization", h)
		}
		if _, err := a.Authenticate(r); !errors.Is(err, httpapi.ErrUnauthenticated) {
			t.Errorf("Authorization %q: %v", h, err)
		}
	}
	if n := tr.calls.Load(); n != 0 {
		t.Errorf("TokenReviews = %d, want 0", n)
	}
}

func TestAuthenticateAPIErrorIsUnavailableUncachedAndRedacted(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	tr.err = fmt.Errorf("connection refused while sending %s", goodToken) // a careless error
	a := newAuth(t, tr, &fakeSARs{}, clock, nil)

	_, err := a.Authenticate(request(goodToken))
	if ue, ok := errors.AsType[*httpapi.UnavailableError](err); !ok || ue.RetryAfter <= 0 {
		t.Fatalf("err = %v, want an UnavailableError with a Retry-After", err)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), goodToken) {
		t.Errorf("the error carries the token: %v", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the error lost its cause: %v", err)
	}
	tr.err = nil
	if _, err := a.Authenticate(request(goodToken)); err != nil {
		t.Fatalf("after the API server recovered: %v", err)
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews = %d, want 2 (errors are not cached)", n)
	}
}

func TestCachesNeverHoldTheToken(t *testing.T) {
	tr := &fakeTokenReviews{}
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return true }}
	a := newAuth(t, tr, sar, newClock(), nil)
	p, err := a.Authenticate(request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = a.Authenticate(request(badToken))
	if err := a.Authorize(t.Context(), p, httpapi.Access{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "shop"}); err != nil {
		t.Fatal(err)
	}
	if a.authn.len() != 1 || a.rejected.len() != 1 || a.authz.len() != 1 {
		t.Fatalf("cache sizes = %d, %d, %d", a.authn.len(), a.rejected.len(), a.authz.len())
	}

	// Everything the Auth holds, printed every way, and every key.
	var dump strings.Builder
	fmt.Fprintf(&dump, "%#v\n%+v\n", a.opts, a.opts)
	for _, c := range []interface {
		dump() (keys []cacheKey, values string)
	}{a.authn, a.rejected, a.authz, a.adm.sources} {
		keys, values := c.dump()
		dump.WriteString(values)
		for _, k := range keys {
			dump.Write(k[:])
			dump.WriteString(hex.EncodeToString(k[:]))
		}
	}
	for _, token := range []string{goodToken, badToken} {
		sum := sha256.Sum256([]byte(token))
		for _, needle := range []string{token, string(sum[:]), hex.EncodeToString(sum[:])} {
			if strings.Contains(dump.String(), needle) {
				t.Errorf("the Auth holds the token %q (or its plain SHA-256)", token)
			}
		}
	}
}

// dump returns the keys and a printout of the values, for tests.
func (c *ttlCache[V]) dump() ([]cacheKey, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []cacheKey
	var b strings.Builder
	for el := c.order.Front(); el != nil; el = el.Next() {
		e := el.Value.(*cacheEntry[V])
		keys = append(keys, e.key)
		fmt.Fprintf(&b, "%#v\n", *e)
	}
	return keys, b.String()
}

func TestCacheIsBoundedLeastRecentlyUsed(t *testing.T) {
	c, now := newTTLCache[int](2), time.Now()
	k := keyer{secret: []byte("k")}
	c.put(k.key("a"), 1, time.Minute, now)
	c.put(k.key("b"), 2, time.Minute, now)
	if _, ok := c.get(k.key("a"), now); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	c.put(k.key("c"), 3, time.Minute, now)
	if c.len() != 2 {
		t.Errorf("len = %d, want 2", c.len())
	}
	if _, ok := c.get(k.key("b"), now); ok {
		t.Error("b, the least recently used, was kept")
	}
	if v, ok := c.get(k.key("a"), now); !ok || v != 1 {
		t.Error("a was evicted")
	}
	if v, ok := c.get(k.key("c"), now.Add(time.Minute)); ok {
		t.Errorf("c after its TTL = %d", v)
	}
	c.put(k.key("d"), 4, 0, now)
	if _, ok := c.get(k.key("d"), now); ok {
		t.Error("a zero TTL was cached")
	}
}

func TestKeysAreUnambiguous(t *testing.T) {
	k := keyer{secret: []byte("k")}
	if k.key("ab", "c") == k.key("a", "bc") || k.key("a") == k.key("a", "") {
		t.Error("different parts share a key")
	}
	if (keyer{secret: []byte("other")}).key("a") == k.key("a") {
		t.Error("the key does not depend on the secret")
	}
}

func TestAuthenticateCoalescesConcurrentReviews(t *testing.T) {
	tr := &fakeTokenReviews{block: make(chan struct{})}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := a.Authenticate(request(goodToken))
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them queue behind the first review
	close(tr.block)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// A late goroutine either joins the review in flight or finds its
	// result cached (it is cached before the flight ends).
	if c := tr.calls.Load(); c != 1 {
		t.Errorf("TokenReviews for %d concurrent requests = %d, want 1", n, c)
	}
}

func TestAuthenticateWaiterGivesUp(t *testing.T) {
	tr := &fakeTokenReviews{block: make(chan struct{})}
	defer close(tr.block)
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := a.Authenticate(request(goodToken).WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}

func TestAudiences(t *testing.T) {
	tr := &fakeTokenReviews{}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), func(o *Options) { o.Audiences = []string{"hookkeeper"} })
	if _, err := a.Authenticate(request(goodToken)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.lastSpec.Audiences, []string{"hookkeeper"}) {
		t.Errorf("spec.audiences = %v", tr.lastSpec.Audiences)
	}

	tr = &fakeTokenReviews{audiences: []string{"https://kubernetes.default.svc"}}
	a = newAuth(t, tr, &fakeSARs{}, newClock(), func(o *Options) { o.Audiences = []string{"hookkeeper"} })
	if _, err := a.Authenticate(request(goodToken)); !errors.Is(err, httpapi.ErrUnauthenticated) {
		t.Errorf("a token of another audience: %v", err)
	}
}

func TestAuthorizeAsksForTheMappedPermission(t *testing.T) {
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return true }}
	a := newAuth(t, &fakeTokenReviews{}, sar, newClock(), nil)
	p, err := a.Authenticate(request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		access httpapi.Access
		want   authzv1.ResourceAttributes
	}{
		{httpapi.Access{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "shop"},
			authzv1.ResourceAttributes{Namespace: "shop", Verb: "create", Group: "hookkeeper.dev", Resource: "events"}},
		{httpapi.Access{Verb: httpapi.VerbGet, Group: httpapi.HistoryGroup, Resource: httpapi.ResourceWebhookEvents, Namespace: "shop", Name: "evt_1"},
			authzv1.ResourceAttributes{Namespace: "shop", Verb: "get", Group: "delivery.hookkeeper.dev", Resource: "webhookevents", Name: "evt_1"}},
		{httpapi.Access{Verb: httpapi.VerbGet, Group: httpapi.HistoryGroup, Resource: httpapi.ResourceWebhookEvents, Subresource: httpapi.SubresourceData, Namespace: "shop"},
			authzv1.ResourceAttributes{Namespace: "shop", Verb: "get", Group: "delivery.hookkeeper.dev", Resource: "webhookevents", Subresource: "data"}},
		{httpapi.Access{Verb: httpapi.VerbList, Group: httpapi.HistoryGroup, Resource: httpapi.ResourceDeliveries, Namespace: "tools"},
			authzv1.ResourceAttributes{Namespace: "tools", Verb: "list", Group: "delivery.hookkeeper.dev", Resource: "deliveries"}},
	} {
		if err := a.Authorize(t.Context(), p, tc.access); err != nil {
			t.Fatalf("%+v: %v", tc.access, err)
		}
		got := sar.last()
		if got.ResourceAttributes == nil || *got.ResourceAttributes != tc.want {
			t.Errorf("%+v: resource attributes = %+v, want %+v", tc.access, got.ResourceAttributes, tc.want)
		}
		if got.User != p.Username || got.UID != p.UID || !slices.Equal(got.Groups, p.Groups) ||
			!slices.Equal([]string(got.Extra["authentication.kubernetes.io/pod-name"]), []string{"producer-7d9"}) {
			t.Errorf("user info = %+v", got)
		}
	}

	// An access that does not name a whole permission is refused without
	// asking.
	before := sar.count()
	for _, acc := range []httpapi.Access{
		{Verb: httpapi.VerbCreate, Resource: httpapi.ResourceEvents, Namespace: "shop"},
		{Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "shop"},
		{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Namespace: "shop"},
		{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents},
	} {
		if err := a.Authorize(t.Context(), p, acc); !errors.Is(err, httpapi.ErrForbidden) {
			t.Errorf("%+v: %v", acc, err)
		}
	}
	if sar.count() != before {
		t.Error("an unmapped access was reviewed")
	}
}

func TestAuthorizeCachesDecisions(t *testing.T) {
	var allowed atomic.Bool
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return allowed.Load() }}
	clock := newClock()
	a := newAuth(t, &fakeTokenReviews{}, sar, clock, nil)
	p := httpapi.Principal{Username: "alice", Groups: []string{"b", "a"}}
	publish := httpapi.Access{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "shop"}

	if err := a.Authorize(t.Context(), p, publish); !errors.Is(err, httpapi.ErrForbidden) {
		t.Fatalf("denied: %v", err)
	}
	allowed.Store(true) // a RoleBinding is created
	clock.Advance(DefaultAuthzNegativeTTL - time.Millisecond)
	if err := a.Authorize(t.Context(), p, publish); !errors.Is(err, httpapi.ErrForbidden) {
		t.Fatalf("denial within its TTL: %v", err)
	}
	clock.Advance(time.Millisecond)
	if err := a.Authorize(t.Context(), p, publish); err != nil {
		t.Fatalf("after the negative TTL: %v", err)
	}
	if sar.count() != 2 {
		t.Errorf("SARs = %d, want 2", sar.count())
	}
	allowed.Store(false) // the RoleBinding is removed
	clock.Advance(DefaultAuthzTTL - time.Millisecond)
	if err := a.Authorize(t.Context(), p, publish); err != nil {
		t.Fatalf("allowed within its TTL: %v", err)
	}
	// The same groups in another order share the decision; anything else
	// that matters does not.
	if err := a.Authorize(t.Context(), httpapi.Principal{Username: "alice", Groups: []string{"a", "b"}}, publish); err != nil {
		t.Fatalf("same groups reordered: %v", err)
	}
	for _, other := range []httpapi.Principal{
		{Username: "alice", Groups: []string{"a"}},
		{Username: "alice", Groups: []string{"a", "b"}, UID: "u"},
		{Username: "alice", Groups: []string{"a", "b"}, Extra: map[string][]string{"x": {"y"}}},
		{Username: "bob", Groups: []string{"a", "b"}},
	} {
		if err := a.Authorize(t.Context(), other, publish); !errors.Is(err, httpapi.ErrForbidden) {
			t.Errorf("%+v shared alice's decision: %v", other, err)
		}
	}
	if err := a.Authorize(t.Context(), p, httpapi.Access{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "other"}); !errors.Is(err, httpapi.ErrForbidden) {
		t.Errorf("another namespace shared the decision: %v", err)
	}
	clock.Advance(time.Millisecond)
	if err := a.Authorize(t.Context(), p, publish); !errors.Is(err, httpapi.ErrForbidden) {
		t.Errorf("after the TTL: %v", err)
	}
}

func TestAuthorizeEvaluationErrorDeniesWithoutCaching(t *testing.T) {
	sar := &fakeSARs{evalErr: "webhook authorizer timed out"}
	a := newAuth(t, &fakeTokenReviews{}, sar, newClock(), nil)
	p := httpapi.Principal{Username: "alice"}
	publish := httpapi.Access{Verb: httpapi.VerbCreate, Group: httpapi.PublishGroup, Resource: httpapi.ResourceEvents, Namespace: "shop"}
	for range 2 {
		if err := a.Authorize(t.Context(), p, publish); !errors.Is(err, httpapi.ErrForbidden) {
			t.Fatal(err)
		}
	}
	if sar.count() != 2 {
		t.Errorf("SARs = %d, want 2 (not cached)", sar.count())
	}
}

func TestAuthorizeAPIErrorIsUnavailable(t *testing.T) {
	sar := &fakeSARs{err: apierrors.NewServiceUnavailable("the server is currently unable to handle the request")}
	a := newAuth(t, &fakeTokenReviews{}, sar, newClock(), nil)
	err := a.Authorize(t.Context(), httpapi.Principal{Username: "alice"}, httpapi.Access{Verb: httpapi.VerbGet, Group: httpapi.HistoryGroup, Resource: httpapi.ResourceWebhookEvents, Namespace: "shop"})
	if _, ok := errors.AsType[*httpapi.UnavailableError](err); !ok || errors.Is(err, httpapi.ErrForbidden) {
		t.Errorf("err = %v, want an UnavailableError", err)
	}
}

// Through the API handler: 401, 403, 503 with Retry-After for a review the
// API server could not do, 500 for one it refused, with the cause logged
// and the token nowhere.
func TestThroughTheHandler(t *testing.T) {
	tr := &fakeTokenReviews{}
	sar := &fakeSARs{allowSet: func(s authzv1.SubjectAccessReviewSpec) bool {
		return s.ResourceAttributes.Namespace == "shop"
	}}
	a := newAuth(t, tr, sar, newClock(), nil)
	var logs strings.Builder
	var logMu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
	h, err := httpapi.New(httpapi.Config{Publisher: nopStore{}, Reader: nopStore{}, Auth: a, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	var retryAfter string
	call := func(token, path string) (int, string) {
		t.Helper()
		r := request(token)
		r.URL.Path = path
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var body httpapi.ErrorBody
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		retryAfter = w.Header().Get("Retry-After")
		return w.Code, string(body.Error.Code)
	}
	if code, c := call("", "/v1/namespaces/shop/events/evt_1"); code != http.StatusUnauthorized || c != "Unauthenticated" {
		t.Errorf("no token: %d %s", code, c)
	}
	if code, c := call(badToken, "/v1/namespaces/shop/events/evt_1"); code != http.StatusUnauthorized || c != "Unauthenticated" {
		t.Errorf("bad token: %d %s", code, c)
	}
	if code, c := call(goodToken, "/v1/namespaces/other/events/evt_1"); code != http.StatusForbidden || c != "Forbidden" {
		t.Errorf("not allowed: %d %s", code, c)
	}
	if code, c := call(goodToken, "/v1/namespaces/shop/events/evt_1"); code != http.StatusNotFound {
		t.Errorf("allowed: %d %s", code, c)
	}
	const unseenToken = "unseen-token-9e8d7c6b5a4f3e2d1c0b"
	tr.err = fmt.Errorf("dial tcp 10.0.0.1:443: connect: connection refused (token %s)", unseenToken)
	if code, c := call(unseenToken, "/v1/namespaces/shop/events/evt_1"); code != http.StatusServiceUnavailable || c != "Unavailable" || retryAfter != "1" {
		t.Errorf("TokenReview failing: %d %s, Retry-After %q", code, c, retryAfter)
	}
	tr.err = apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("the manager may not create TokenReviews"))
	if code, c := call(unseenToken, "/v1/namespaces/shop/events/evt_1"); code != http.StatusInternalServerError || c != "Internal" || retryAfter != "" {
		t.Errorf("TokenReview refused: %d %s, Retry-After %q", code, c, retryAfter)
	}
	sar.err = apierrors.NewTooManyRequests("SubjectAccessReview API throttled", 7)
	if code, c := call(goodToken, "/v1/namespaces/tools/events/evt_1"); code != http.StatusServiceUnavailable || c != "Unavailable" || retryAfter != "7" {
		t.Errorf("SubjectAccessReview throttled: %d %s, Retry-After %q", code, c, retryAfter)
	}
	logMu.Lock()
	defer logMu.Unlock()
	for _, want := range []string{"connection refused", "may not create TokenReviews", "SubjectAccessReview API throttled"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks the cause %q:\n%s", want, logs.String())
		}
	}
	for _, token := range []string{goodToken, badToken, unseenToken} {
		if strings.Contains(logs.String(), token) {
			t.Errorf("the log contains a token:\n%s", logs.String())
		}
	}
}

// nopStore publishes and finds nothing.
type nopStore struct{}

func (nopStore) Publish(context.Context, *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	return ledger.EventInsertResult{}, errors.New("not implemented")
}
func (nopStore) EventBrowse(context.Context, *ledger.EventBrowseParams) ([]ledger.Event, error) {
	return nil, nil
}
func (nopStore) DeliveryBrowse(context.Context, *ledger.DeliveryBrowseParams) ([]ledger.DeliveryView, error) {
	return nil, nil
}
func (nopStore) AttemptList(context.Context, string) ([]ledger.Attempt, error) {
	return nil, ledger.ErrNotFound
}
