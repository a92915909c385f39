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
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"

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

// fakeSARs is a SubjectAccessReview API on loopback, for the library's
// delegating authorizer (which posts to the REST endpoint itself): it
// allows what allowSet says, fails with err when set, and records the
// reviews.
type fakeSARs struct {
	mu       sync.Mutex
	specs    []authzv1.SubjectAccessReviewSpec
	err      *apierrors.StatusError
	evalErr  string
	allowSet func(authzv1.SubjectAccessReviewSpec) bool
	block    chan struct{} // when set, every review waits for it, as a silent API server
}

func (f *fakeSARs) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var sar authzv1.SubjectAccessReview
	if r.Method != http.MethodPost || r.URL.Path != "/apis/authorization.k8s.io/v1/subjectaccessreviews" ||
		json.NewDecoder(r.Body).Decode(&sar) != nil {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.specs = append(f.specs, sar.Spec)
	w.Header().Set("Content-Type", "application/json")
	if f.err != nil {
		st := f.err.Status()
		st.Kind, st.APIVersion = "Status", "v1"
		// No Retry-After header: client-go would wait for it and retry.
		w.WriteHeader(int(st.Code))
		_ = json.NewEncoder(w).Encode(st)
		return
	}
	sar.APIVersion, sar.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	sar.Status.Allowed = f.allowSet != nil && f.allowSet(sar.Spec)
	sar.Status.EvaluationError = f.evalErr
	_ = json.NewEncoder(w).Encode(&sar)
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
	srv := httptest.NewServer(sar)
	t.Cleanup(srv.Close)
	sars, err := authorizationv1.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{TokenReviews: tr, SubjectAccessReviews: sars, Now: clock.Now}
	if mod != nil {
		mod(&opts)
	}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// noTokenCache turns the library's token cache off, so that every call
// reaches the lanes.
func noTokenCache(o *Options) { o.AuthnTTL, o.AuthnNegativeTTL = -1, -1 }

func request(token string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func authenticate(t *testing.T, a *Auth, r *http.Request) (user.Info, error) {
	t.Helper()
	resp, ok, err := a.AuthenticateRequest(r)
	switch {
	case ok && err == nil && resp != nil && resp.User != nil:
		return resp.User, nil
	case ok || resp != nil:
		t.Fatalf("AuthenticateRequest = %v, %v, %v", resp, ok, err)
	case err == nil:
		return nil, errRejected
	}
	return nil, err
}

var errRejected = errors.New("rejected")

func TestNewRequiresClients(t *testing.T) {
	if _, err := New(Options{}); err == nil {
		t.Error("New without clients succeeded")
	}
}

// The library's token cache answers an accepted token, and a rejected one,
// without a second review.
func TestAuthenticateCachesAcceptedAndRejectedTokens(t *testing.T) {
	tr := &fakeTokenReviews{}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)
	for range 3 {
		u, err := authenticate(t, a, request(goodToken))
		if err != nil {
			t.Fatal(err)
		}
		if u.GetName() != "system:serviceaccount:shop:producer" || u.GetUID() != "uid-1" || len(u.GetGroups()) != 3 ||
			!slices.Equal(u.GetExtra()["authentication.kubernetes.io/pod-name"], []string{"producer-7d9"}) {
			t.Errorf("user = %+v", u)
		}
	}
	for range 3 {
		if _, err := authenticate(t, a, request(badToken)); err != errRejected {
			t.Fatalf("bad token: %v", err)
		}
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews = %d, want 2 (one per token)", n)
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
		if _, err := authenticate(t, a, r); err != errRejected {
			t.Errorf("Authorization %q: %v", h, err)
		}
	}
	if n := tr.calls.Load(); n != 0 {
		t.Errorf("TokenReviews = %d, want 0", n)
	}
}

func TestAuthenticateAPIErrorIsUnavailableUncachedAndRedacted(t *testing.T) {
	tr := &fakeTokenReviews{}
	tr.err = fmt.Errorf("connection refused while sending %s", goodToken) // a careless error
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)

	_, err := authenticate(t, a, request(goodToken))
	if !isUnavailable(err) {
		t.Fatalf("err = %v, want an UnavailableError with a Retry-After", err)
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", err, err, err), goodToken) {
		t.Errorf("the error carries the token: %v", err)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("the error lost its cause: %v", err)
	}
	tr.err = nil
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatalf("after the API server recovered: %v", err)
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews = %d, want 2 (errors are not cached)", n)
	}
}

// A token that authenticated is re-reviewed in the known lane, past the
// unknown lane's limits of its source; once revoked it is known no more.
func TestKnownTokensTakeTheKnownLane(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	a := newAuth(t, tr, &fakeSARs{}, clock, func(o *Options) {
		noTokenCache(o)
		o.OutageGrace = -1 // every call a review while the request waits
		o.UnknownReviewsPerSourcePerSecond, o.UnknownReviewPerSourceBurst = 1, 1
	})
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatal(err) // the source's one unknown review
	}
	if _, err := authenticate(t, a, request("never-seen-token")); !isUnavailable(err) {
		t.Fatalf("a second new token from the source: %v, want shed", err)
	}
	for range 3 {
		if _, err := authenticate(t, a, request(goodToken)); err != nil {
			t.Fatalf("the known token: %v", err)
		}
	}
	if n := tr.calls.Load(); n != 4 {
		t.Errorf("TokenReviews = %d, want 4 (the cache is off)", n)
	}
	tr.reject.Store(true)
	if _, err := authenticate(t, a, request(goodToken)); err != errRejected {
		t.Fatalf("revoked: %v", err)
	}
	if _, err := authenticate(t, a, request(goodToken)); !isUnavailable(err) {
		t.Errorf("the revoked token again: %v, want the unknown lane's refusal", err)
	}
	clock.Advance(DefaultKnownTokenTTL)
	tr.reject.Store(false)
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatal(err) // unknown again, with the source's bucket refilled
	}
	clock.Advance(DefaultKnownTokenTTL + time.Second)
	if _, err := authenticate(t, a, request("never-seen-token")); err != errRejected {
		t.Fatal(err)
	}
	if _, err := authenticate(t, a, request(goodToken)); !isUnavailable(err) {
		t.Errorf("a token known longer ago than KnownTokenTTL: %v, want the unknown lane's refusal", err)
	}
}

// What the lanes hold is keyed by HMACs: no token, nor its plain hash.
func TestLanesNeverHoldTheToken(t *testing.T) {
	tr := &fakeTokenReviews{block: make(chan struct{})}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), nil)
	done := make(chan error)
	go func() {
		_, err := authenticate(t, a, request(goodToken))
		done <- err
	}()
	for tr.calls.Load() == 0 {
		time.Sleep(time.Millisecond) // polling for the review to start
	}
	var dump strings.Builder
	a.lanes.sources.mu.Lock()
	for k, ws := range a.lanes.sources.m {
		fmt.Fprintf(&dump, "%s %x %+v\n", k[:], k[:], *ws)
	}
	a.lanes.sources.mu.Unlock()
	close(tr.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_, _ = authenticate(t, a, request(badToken))
	fmt.Fprintf(&dump, "%#v\n%+v\n", a.opts, a.opts)
	for _, k := range a.lanes.known.Keys() {
		k := k.(cacheKey)
		fmt.Fprintf(&dump, "%s %x\n", k[:], k[:])
	}
	if !strings.Contains(dump.String(), "192.0.2.1") || len(a.lanes.known.Keys()) != 1 {
		t.Fatalf("the dump missed the lanes' state:\n%s", dump.String())
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
			_, err := authenticate(t, a, request(goodToken))
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
	if c := tr.calls.Load(); c != 1 {
		t.Errorf("TokenReviews for %d concurrent requests = %d, want 1", n, c)
	}
}

func TestAudiences(t *testing.T) {
	tr := &fakeTokenReviews{}
	a := newAuth(t, tr, &fakeSARs{}, newClock(), func(o *Options) { o.Audiences = []string{"hookkeeper"} })
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.lastSpec.Audiences, []string{"hookkeeper"}) {
		t.Errorf("spec.audiences = %v", tr.lastSpec.Audiences)
	}

	tr = &fakeTokenReviews{audiences: []string{"https://kubernetes.default.svc"}}
	a = newAuth(t, tr, &fakeSARs{}, newClock(), func(o *Options) { o.Audiences = []string{"hookkeeper"} })
	if _, err := authenticate(t, a, request(goodToken)); err != errRejected {
		t.Errorf("a token of another audience: %v", err)
	}
}

// The library's delegating authorizer gets the attributes as they are
// (group and subresource included) with the whole user, and caches its
// decisions.
func TestAuthorizeAsksForTheAttributes(t *testing.T) {
	sar := &fakeSARs{allowSet: func(s authzv1.SubjectAccessReviewSpec) bool { return s.ResourceAttributes.Namespace == "shop" }}
	a := newAuth(t, &fakeTokenReviews{}, sar, newClock(), nil)
	u, err := authenticate(t, a, request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	read := authorizer.AttributesRecord{User: u, Verb: "get", APIGroup: "delivery.hookkeeper.dev", Resource: "webhookevents",
		Subresource: "data", Namespace: "shop", Name: "evt_1", ResourceRequest: true}
	for range 3 {
		if d, _, err := a.Authorize(t.Context(), read); d != authorizer.DecisionAllow || err != nil {
			t.Fatalf("Authorize = %v, %v", d, err)
		}
	}
	want := authzv1.ResourceAttributes{Namespace: "shop", Verb: "get", Group: "delivery.hookkeeper.dev", Resource: "webhookevents",
		Subresource: "data", Name: "evt_1"}
	got := sar.last()
	if got.ResourceAttributes == nil || *got.ResourceAttributes != want {
		t.Errorf("resource attributes = %+v, want %+v", got.ResourceAttributes, want)
	}
	if got.User != u.GetName() || got.UID != u.GetUID() || !slices.Equal(got.Groups, u.GetGroups()) ||
		!slices.Equal([]string(got.Extra["authentication.kubernetes.io/pod-name"]), []string{"producer-7d9"}) {
		t.Errorf("user info = %+v", got)
	}
	other := read
	other.Namespace = "other"
	if d, _, err := a.Authorize(t.Context(), other); d == authorizer.DecisionAllow || err != nil {
		t.Errorf("another namespace: %v, %v", d, err)
	}
	if n := sar.count(); n != 2 {
		t.Errorf("SubjectAccessReviews = %d, want 2 (decisions are cached)", n)
	}
}

// A SubjectAccessReview the API server could not do is Unavailable, with
// its Retry-After; one it refused is an internal error.
func TestAuthorizeAPIErrors(t *testing.T) {
	sar := &fakeSARs{err: apierrors.NewTooManyRequests("throttled", 7)}
	a := newAuth(t, &fakeTokenReviews{}, sar, newClock(), nil)
	attrs := authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "alice"}, Verb: "create", APIGroup: Group,
		Resource: ResourceEvents, Namespace: "shop", ResourceRequest: true}
	d, _, err := a.Authorize(t.Context(), attrs)
	if ue, ok := errors.AsType[*UnavailableError](err); !ok || ue.RetryAfter != 7*time.Second || d == authorizer.DecisionAllow {
		t.Errorf("throttled: %v, %v; want Unavailable after 7s", d, err)
	}
	sar.mu.Lock()
	sar.err = apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"}, "", errors.New("no RBAC"))
	sar.mu.Unlock()
	d, _, err = a.Authorize(t.Context(), attrs)
	if !errors.Is(err, errReviewRefused) || isUnavailable(err) || d == authorizer.DecisionAllow {
		t.Errorf("refused: %v, %v; want an internal error", d, err)
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
	sar.mu.Lock()
	sar.err = apierrors.NewTooManyRequests("SubjectAccessReview API throttled", 7)
	sar.mu.Unlock()
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
