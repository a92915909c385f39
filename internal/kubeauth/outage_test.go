package kubeauth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/hookkeeper/hookkeeper/internal/httpapi"
)

// The API server stopped: what a TokenReview and a SubjectAccessReview get.
var errRefused = fmt.Errorf("dial tcp 10.96.0.1:443: connect: %w", syscall.ECONNREFUSED)

func stopAPIServer(tr *fakeTokenReviews, sar *fakeSARs) {
	tr.err = errRefused
	sar.mu.Lock()
	defer sar.mu.Unlock()
	sar.err = apierrors.NewServiceUnavailable("the API server is down")
}

func restartAPIServer(tr *fakeTokenReviews, sar *fakeSARs) {
	tr.err = nil
	sar.mu.Lock()
	defer sar.mu.Unlock()
	sar.err = nil
}

// noCaches turns the library's token and decision caches off (they read
// the real clock), so that every call reaches a review.
func noCaches(o *Options) {
	noTokenCache(o)
	o.AuthzTTL, o.AuthzNegativeTTL = -1, -1
}

func publishIn(u user.Info, ns string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: "create", APIGroup: Group, Resource: ResourceEvents,
		Namespace: ns, ResourceRequest: true}
}

func allowShop(s authzv1.SubjectAccessReviewSpec) bool {
	return s.ResourceAttributes.Namespace == "shop"
}

// A token accepted and a permission allowed before the API server stopped
// answering are answered as they were for OutageGrace after their last
// review, each failed review notwithstanding; a token or a permission
// never reviewed, or reviewed longer ago, is Unavailable; once the API
// server answers, its verdicts count again.
func TestOutageGraceKeepsWhatWasReviewed(t *testing.T) {
	tr, sar, clock := &fakeTokenReviews{}, &fakeSARs{allowSet: allowShop}, newClock()
	a := newAuth(t, tr, sar, clock, noCaches)
	u, err := authenticate(t, a, request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatalf("before the outage: %v, %v", d, err)
	}

	stopAPIServer(tr, sar)
	clock.Advance(DefaultOutageGrace - time.Second)
	reviews, sars := tr.calls.Load(), sar.count()
	got, err := authenticate(t, a, request(goodToken))
	if err != nil || got.GetName() != u.GetName() || got.GetUID() != u.GetUID() {
		t.Fatalf("a token accepted %v ago: %v, %v; want accepted as before", DefaultOutageGrace-time.Second, got, err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(got, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Errorf("a permission allowed %v ago: %v, %v; want allowed", DefaultOutageGrace-time.Second, d, err)
	}
	a.background.Wait()
	if tr.calls.Load() != reviews+1 || sar.count() != sars+1 {
		t.Errorf("reviews during the outage: %d TokenReviews, %d SubjectAccessReviews; want one of each tried",
			tr.calls.Load()-reviews, sar.count()-sars)
	}

	// Never reviewed: Unavailable, on either step.
	if _, err := authenticate(t, a, request(badToken)); !isUnavailable(err) {
		t.Errorf("a token never seen: %v, want Unavailable", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(got, "tools")); d == authorizer.DecisionAllow || !isUnavailable(err) {
		t.Errorf("a permission never reviewed: %v, %v; want Unavailable", d, err)
	}
	// The grace is over.
	clock.Advance(time.Second + time.Nanosecond)
	if _, err := authenticate(t, a, request(goodToken)); !isUnavailable(err) {
		t.Errorf("a token accepted longer ago than the grace: %v, want Unavailable", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d == authorizer.DecisionAllow || !isUnavailable(err) {
		t.Errorf("a permission allowed longer ago than the grace: %v, %v; want Unavailable", d, err)
	}

	// Back: reviewed, accepted and allowed again, and the grace starts over.
	restartAPIServer(tr, sar)
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatal(err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatalf("after the outage: %v, %v", d, err)
	}
	a.background.Wait()
	stopAPIServer(tr, sar)
	clock.Advance(time.Minute)
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Errorf("a second outage: %v", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Errorf("a second outage: %v, %v", d, err)
	}
}

// A verdict counts from the next request on: a token rejected, or a
// permission denied, by an API server that answers is refused by the
// request after the review that said so, and not answered from before in
// a later outage. (The request that sent the review was answered from
// memory: see TestKnownAnswersDoNotWaitForTheReview.)
func TestOutageGraceYieldsToAVerdict(t *testing.T) {
	allow := atomic.Bool{}
	allow.Store(true)
	tr, clock := &fakeTokenReviews{}, newClock()
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return allow.Load() }}
	a := newAuth(t, tr, sar, clock, noCaches)
	u, err := authenticate(t, a, request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatal(d, err)
	}

	tr.reject.Store(true) // revoked
	allow.Store(false)    // RoleBinding removed
	clock.Advance(time.Second)
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatalf("the request sending the review: %v, want answered from memory", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatalf("the request sending the review: %v, %v; want answered from memory", d, err)
	}
	a.background.Wait()
	if _, err := authenticate(t, a, request(goodToken)); err != errRejected {
		t.Fatalf("a revoked token: %v, want rejected", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d == authorizer.DecisionAllow || err != nil {
		t.Fatalf("a removed permission: %v, %v; want denied", d, err)
	}

	stopAPIServer(tr, sar)
	clock.Advance(time.Second)
	if _, err := authenticate(t, a, request(goodToken)); !isUnavailable(err) {
		t.Errorf("a revoked token in an outage: %v, want Unavailable", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d == authorizer.DecisionAllow || !isUnavailable(err) {
		t.Errorf("a removed permission in an outage: %v, %v; want Unavailable", d, err)
	}
}

// A review the API server refused itself (the manager lacks RBAC) is not
// an outage: an internal error, not answered from before.
func TestOutageGraceNotForARefusedReview(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	a := newAuth(t, tr, &fakeSARs{}, clock, noCaches)
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatal(err)
	}
	tr.err = apierrors.NewForbidden(authnv1.Resource("tokenreviews"), "", fmt.Errorf("no RBAC"))
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Fatalf("the request sending the review: %v, want answered from memory", err)
	}
	a.background.Wait()
	if _, err := authenticate(t, a, request(goodToken)); err == nil || isUnavailable(err) {
		t.Errorf("a refused review: %v, want an internal error", err)
	}
}

func TestOutageGraceOff(t *testing.T) {
	tr, sar, clock := &fakeTokenReviews{}, &fakeSARs{allowSet: allowShop}, newClock()
	a := newAuth(t, tr, sar, clock, func(o *Options) { noCaches(o); o.OutageGrace = -1 })
	u, err := authenticate(t, a, request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatal(d, err)
	}
	stopAPIServer(tr, sar)
	if _, err := authenticate(t, a, request(goodToken)); !isUnavailable(err) {
		t.Errorf("authentication: %v, want Unavailable", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d == authorizer.DecisionAllow || !isUnavailable(err) {
		t.Errorf("authorization: %v, %v; want Unavailable", d, err)
	}
}

// jwtReviews accepts every token, or fails with err.
type jwtReviews struct{ err atomic.Pointer[error] }

func (f *jwtReviews) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	if err := f.err.Load(); err != nil {
		return nil, *err
	}
	out := tr.DeepCopy()
	out.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "system:serviceaccount:shop:producer"}}
	return out, nil
}

// jwt is an unsigned token with claims (the reviewer is a fake).
func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"k"}`)) + "." + enc(payload) + "." + enc([]byte("signature"))
}

// The grace never takes a token past its own expiry: the TokenReview
// status reports none, the token's exp claim does.
func TestOutageGraceEndsWithTheToken(t *testing.T) {
	clock := newClock()
	tr := &jwtReviews{}
	a := newAuth(t, &fakeTokenReviews{}, &fakeSARs{}, clock, func(o *Options) { noCaches(o); o.TokenReviews = tr })
	expiresSoon := jwt(t, map[string]any{"sub": "system:serviceaccount:shop:producer", "exp": clock.Now().Add(5 * time.Minute).Unix()})
	expiresLate := jwt(t, map[string]any{"sub": "system:serviceaccount:shop:producer", "exp": clock.Now().Add(time.Hour).Unix()})
	for _, token := range []string{expiresSoon, expiresLate} {
		if _, err := authenticate(t, a, request(token)); err != nil {
			t.Fatal(err)
		}
	}
	err := errRefused
	tr.err.Store(&err)
	clock.Advance(5 * time.Minute)
	for _, token := range []string{expiresSoon, expiresLate} {
		if _, err := authenticate(t, a, request(token)); err != nil {
			t.Errorf("at its expiry: %v, want accepted", err)
		}
	}
	clock.Advance(time.Second)
	if _, err := authenticate(t, a, request(expiresSoon)); !isUnavailable(err) {
		t.Errorf("an expired token: %v, want Unavailable", err)
	}
	if _, err := authenticate(t, a, request(expiresLate)); err != nil {
		t.Errorf("a token expiring after the grace, within it: %v, want accepted", err)
	}
}

func TestTokenExpiry(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		token string
		want  time.Time
		ok    bool
	}{
		"integer exp":    {jwt(t, map[string]any{"exp": at.Unix()}), at, true},
		"fractional exp": {jwt(t, map[string]any{"exp": float64(at.Unix()) + 0.5}), at.Add(500 * time.Millisecond), true},
		"no exp":         {jwt(t, map[string]any{"sub": "x"}), time.Time{}, false},
		"exp a string":   {jwt(t, map[string]any{"exp": "soon"}), time.Time{}, false},
		"exp absurd":     {jwt(t, map[string]any{"exp": 1e300}), time.Time{}, false},
		"not a JWT":      {goodToken, time.Time{}, false},
		"two parts":      {"a.b", time.Time{}, false},
		"not base64":     {"a.!!!.c", time.Time{}, false},
		"not JSON":       {"a." + base64.RawURLEncoding.EncodeToString([]byte("exp")) + ".c", time.Time{}, false},
	} {
		got, ok := tokenExpiry(c.token)
		if ok != c.ok || !got.Equal(c.want) {
			t.Errorf("%s: %v, %v; want %v, %v", name, got, ok, c.want, c.ok)
		}
	}
}

// An allow from before is answered from memory, and re-reviewed in the
// background once AuthzTTL after its review; a review that found no
// verdict is sent again AuthzTTL later, not with every request.
func TestOutageGraceAsksAgainAfterAuthzTTL(t *testing.T) {
	tr, sar, clock := &fakeTokenReviews{}, &fakeSARs{}, newClock()
	a := newAuth(t, tr, sar, clock, func(o *Options) { o.AuthzTTL = 10 * time.Second })
	attrs := publishIn(&user.DefaultInfo{Name: "alice"}, "shop")
	k, ok := a.decisionKey(attrs)
	if !ok {
		t.Fatal("no key")
	}
	a.noteAllowed(k, "") // as if allowed (the authorizer's cache reads the real clock)
	stopAPIServer(tr, sar)
	for range 3 {
		if d, _, err := a.Authorize(t.Context(), attrs); d != authorizer.DecisionAllow || err != nil {
			t.Fatalf("within AuthzTTL: %v, %v", d, err)
		}
	}
	a.background.Wait()
	if n := sar.count(); n != 0 {
		t.Errorf("SubjectAccessReviews within AuthzTTL = %d, want 0", n)
	}
	clock.Advance(time.Minute)
	for range 3 {
		if d, _, err := a.Authorize(t.Context(), attrs); d != authorizer.DecisionAllow || err != nil {
			t.Fatalf("in an outage: %v, %v", d, err)
		}
		a.background.Wait()
	}
	if n := sar.count(); n != 1 {
		t.Errorf("SubjectAccessReviews = %d, want 1 (then none for AuthzTTL)", n)
	}
	clock.Advance(10 * time.Second)
	if d, _, err := a.Authorize(t.Context(), attrs); d != authorizer.DecisionAllow || err != nil {
		t.Fatalf("in an outage: %v, %v", d, err)
	}
	a.background.Wait()
	if n := sar.count(); n != 2 {
		t.Errorf("SubjectAccessReviews = %d, want 2 (asked again after AuthzTTL)", n)
	}
}

// Through the API handler, during an outage: a known publisher is served,
// a token never seen and a permission never reviewed are 503 with
// Retry-After, as is everything once the grace is over; no token is
// logged.
func TestOutageThroughTheHandler(t *testing.T) {
	tr, sar, clock := &fakeTokenReviews{}, &fakeSARs{allowSet: allowShop}, newClock()
	a := newAuth(t, tr, sar, clock, noCaches)
	var logs strings.Builder
	h, err := httpapi.New(httpapi.Config{Publisher: nopStore{}, Reader: nopStore{}, Auth: a,
		Log: funcLogger(&logs)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(token, ns string) (int, string, string) {
		t.Helper()
		r := request(token)
		r.URL.Path = "/v1/namespaces/" + ns + "/events/evt_1"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var body httpapi.ErrorBody
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		return w.Code, string(body.Error.Code), w.Header().Get("Retry-After")
	}
	if code, c, _ := call(goodToken, "shop"); code != http.StatusNotFound {
		t.Fatalf("before the outage: %d %s", code, c)
	}
	stopAPIServer(tr, sar)
	clock.Advance(time.Minute)
	if code, c, _ := call(goodToken, "shop"); code != http.StatusNotFound {
		t.Errorf("a known publisher in an outage: %d %s, want served (404)", code, c)
	}
	const unseen = "unseen-token-7a6b5c4d3e2f1a0b9c8d"
	for what, c := range map[string][2]string{
		"a token never seen":         {unseen, "shop"},
		"a permission never allowed": {goodToken, "other"},
	} {
		if code, c, ra := call(c[0], c[1]); code != http.StatusServiceUnavailable || c != "Unavailable" || ra == "" {
			t.Errorf("%s in an outage: %d %s, Retry-After %q; want 503 Unavailable with Retry-After", what, code, c, ra)
		}
	}
	clock.Advance(DefaultOutageGrace)
	if code, c, ra := call(goodToken, "shop"); code != http.StatusServiceUnavailable || c != "Unavailable" || ra == "" {
		t.Errorf("a known publisher after the grace: %d %s, Retry-After %q; want 503 with Retry-After", code, c, ra)
	}
	for _, token := range []string{goodToken, unseen} {
		if strings.Contains(logs.String(), token) {
			t.Errorf("the log contains a token:\n%s", logs.String())
		}
	}
}

// funcLogger logs everything into w.
func funcLogger(w *strings.Builder) logr.Logger {
	var mu sync.Mutex
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
}

// A token accepted and a permission allowed before are answered while
// their re-review hangs, as on an API server that does not answer: the
// calls return before the reviewers are released. Once the reviews answer
// (a rejection, a denial), the next requests are refused.
func TestKnownAnswersDoNotWaitForTheReview(t *testing.T) {
	allow := atomic.Bool{}
	allow.Store(true)
	tr, clock := &fakeTokenReviews{}, newClock()
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return allow.Load() }}
	// The library's caches off (they read the real clock): every review
	// due reaches the fakes.
	a := newAuth(t, tr, sar, clock, noCaches)
	u, err := authenticate(t, a, request(goodToken))
	if err != nil {
		t.Fatal(err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d != authorizer.DecisionAllow || err != nil {
		t.Fatal(d, err)
	}

	// The API server stops answering; meanwhile the token is revoked and
	// the RoleBinding removed.
	release := make(chan struct{})
	tr.block = release
	sar.mu.Lock()
	sar.block = release
	sar.mu.Unlock()
	tr.reject.Store(true)
	allow.Store(false)
	reviews, sars := tr.calls.Load(), sar.count()
	clock.Advance(DefaultAuthnTTL)
	for range 3 { // the first sends the reviews, the others find them under way
		got, err := authenticate(t, a, request(goodToken))
		if err != nil || got.GetName() != u.GetName() {
			t.Fatalf("a known token while its review hangs: %v, %v; want answered at once", got, err)
		}
		if d, _, err := a.Authorize(t.Context(), publishIn(got, "shop")); d != authorizer.DecisionAllow || err != nil {
			t.Fatalf("a known permission while its review hangs: %v, %v; want answered at once", d, err)
		}
	}
	select {
	case <-release:
		t.Fatal("the reviewers were released before the answers")
	default:
	}

	close(release) // the API server answers: revoked, denied
	a.background.Wait()
	if n := tr.calls.Load() - reviews; n != 1 {
		t.Errorf("TokenReviews sent = %d, want 1 (one in flight per token)", n)
	}
	if n := sar.count() - sars; n != 1 {
		t.Errorf("SubjectAccessReviews sent = %d, want 1 (one in flight per permission)", n)
	}
	if _, err := authenticate(t, a, request(goodToken)); err != errRejected {
		t.Errorf("the token after its review rejected it: %v, want rejected", err)
	}
	if d, _, err := a.Authorize(t.Context(), publishIn(u, "shop")); d == authorizer.DecisionAllow || err != nil {
		t.Errorf("the permission after its review denied it: %v, %v; want denied", d, err)
	}
}

// Once a review found no verdict, tokens never seen are reviewed one at a
// time (a probe): the others are answered 503 at once rather than each
// waiting for the review's timeout; a verdict ends it.
func TestUnknownTokensDoNotPileUpInAnOutage(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	a := newAuth(t, tr, &fakeSARs{}, clock, noTokenCache)
	tr.err = errRefused
	if _, err := authenticate(t, a, request("first-unseen-token")); !isUnavailable(err) {
		t.Fatalf("the API server down: %v, want Unavailable", err)
	}
	tr.err = nil
	release := make(chan struct{})
	tr.block = release
	probe := make(chan error)
	go func() {
		_, err := authenticate(t, a, request("second-unseen-token"))
		probe <- err
	}()
	for tr.calls.Load() != 2 { // the probe reached the API server
		runtime.Gosched()
	}
	for i := range 3 {
		if _, err := authenticate(t, a, request(fmt.Sprintf("other-unseen-token-%d", i))); !isUnavailable(err) {
			t.Errorf("a token never seen while the probe hangs: %v, want Unavailable at once", err)
		}
	}
	if n := tr.calls.Load(); n != 2 {
		t.Errorf("TokenReviews = %d, want 2 (no review besides the probe)", n)
	}
	close(release)
	if err := <-probe; err != errRejected {
		t.Errorf("the probe: %v, want its verdict", err)
	}
	if _, err := authenticate(t, a, request(goodToken)); err != nil {
		t.Errorf("after a verdict: %v, want reviewed", err)
	}
}
