package kubeauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// admitUnknown with an injected clock: per-source buckets, the global one,
// and both charged or neither.
func TestAdmitUnknown(t *testing.T) {
	lim := limits{rate: 4, burst: 4, perSourceRate: 1, perSourceBurst: 2, maxSources: 16, maxUnknownSlots: 1, maxKnownSlots: 1}
	type step struct {
		advance   time.Duration
		source    string
		ok        bool
		retryWait time.Duration
	}
	for name, steps := range map[string][]step{
		"a source gets its burst, then its rate": {
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", false, time.Second},
			{500 * time.Millisecond, "a", false, 500 * time.Millisecond},
			{500 * time.Millisecond, "a", true, 0},
		},
		"sources do not share their buckets": {
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "a", false, time.Second},
			{0, "b", true, 0}, {0, "b", true, 0}, {0, "b", false, time.Second},
		},
		"the global bucket bounds all sources together": {
			{0, "a", true, 0}, {0, "b", true, 0}, {0, "c", true, 0}, {0, "d", true, 0},
			{0, "e", false, 250 * time.Millisecond},
			{250 * time.Millisecond, "e", true, 0},
		},
		"a refused source does not drain the global bucket": {
			{0, "a", true, 0}, {0, "a", true, 0},
			{0, "a", false, time.Second}, {0, "a", false, time.Second}, {0, "a", false, time.Second},
			{0, "b", true, 0}, {0, "c", true, 0},
		},
		"a source refused by the global bucket keeps its own token": {
			{0, "a", true, 0}, {0, "a", true, 0}, {0, "b", true, 0}, {0, "b", true, 0},
			{0, "c", false, 250 * time.Millisecond},
			{250 * time.Millisecond, "c", true, 0},
		},
		"buckets refill only up to their burst": {
			{0, "a", true, 0}, {time.Hour, "a", true, 0}, {0, "a", true, 0}, {0, "a", false, time.Second},
		},
	} {
		t.Run(name, func(t *testing.T) {
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			a := newAdmission(lim, func() time.Time { return now })
			for i, s := range steps {
				now = now.Add(s.advance)
				ok, wait := a.admitUnknown(s.source, now)
				if ok != s.ok || wait != s.retryWait {
					t.Errorf("step %d (%s): admitted %v, retry after %s; want %v, %s", i, s.source, ok, wait, s.ok, s.retryWait)
				}
			}
		})
	}
}

// The sources remembered are bounded: the least recently seen is
// forgotten (and starts again with a full bucket).
func TestAdmitUnknownRemembersBoundedSources(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := newAdmission(limits{rate: 1000, burst: 1000, perSourceRate: 1, perSourceBurst: 1, maxSources: 3, maxUnknownSlots: 1, maxKnownSlots: 1},
		func() time.Time { return now })
	for i := range 10 {
		a.admitUnknown(fmt.Sprintf("10.0.0.%d", i), now)
	}
	if n := len(a.sources.Keys()); n != 3 {
		t.Errorf("sources remembered = %d, want 3", n)
	}
}

func TestSourceOf(t *testing.T) {
	for remote, want := range map[string]string{
		"192.0.2.7:5678":                  "192.0.2.7",
		"[::ffff:192.0.2.7]:5678":         "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443":      "2001:db8:1:2::/64",
		"[fe80::1%eth0]:443":              "fe80::/64",
		"192.0.2.7":                       "192.0.2.7",
		"@":                               "unparsed:@",
		"[2001:db8:1:3:3:4:5:6]:443":      "2001:db8:1:3::/64",
		"[2001:db8:0:0:0:0:0:1]:1":        "2001:db8::/64",
		"127.0.0.2:40000":                 "127.0.0.2",
		"[::1]:8090":                      "::/64",
		"[2001:db8::ffff:192.0.2.7]:8090": "2001:db8::/64",
	} {
		if got := sourceOf(remote); got != want {
			t.Errorf("sourceOf(%q) = %q, want %q", remote, got, want)
		}
	}
}

// The unknown lane never waits; the known lane waits until its deadline,
// then answers Unavailable.
func TestEnterLanes(t *testing.T) {
	a := newAdmission(limits{rate: 1, burst: 1, perSourceRate: 1, perSourceBurst: 1, maxSources: 1, maxUnknownSlots: 1, maxKnownSlots: 1}, time.Now)
	releaseUnknown, err := a.enter(t.Context(), laneUnknown)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.enter(t.Context(), laneUnknown); !isUnavailable(err) {
		t.Errorf("a second unknown review: %v, want Unavailable at once", err)
	}
	// The lanes do not share slots.
	releaseKnown, err := a.enter(t.Context(), laneKnown)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error, 1)
	go func() {
		_, err := a.enter(ctx, laneKnown)
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("a second known review did not wait: %v", err)
	default:
	}
	cancel()
	if err := <-waited; !isUnavailable(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("a known review past its deadline: %v, want Unavailable wrapping the cause", err)
	}
	releaseUnknown()
	releaseKnown()
	for _, l := range []lane{laneUnknown, laneKnown} {
		release, err := a.enter(t.Context(), l)
		if err != nil {
			t.Errorf("lane %d after release: %v", l, err)
			continue
		}
		release()
	}
}

func isUnavailable(err error) bool {
	ue, ok := errors.AsType[*UnavailableError](err)
	return ok && ue.RetryAfter > 0 && ue.Reason != ""
}

// Which API server errors are "try again" (503) and which are the
// manager's own misconfiguration (500).
func TestReviewFailure(t *testing.T) {
	gr := schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}
	for _, c := range []struct {
		err         error
		unavailable bool
		retryAfter  time.Duration
	}{
		{apierrors.NewTooManyRequests("throttled", 7), true, 7 * time.Second},
		{apierrors.NewServiceUnavailable("unavailable"), true, time.Second},
		{apierrors.NewServerTimeout(gr, "create", 3), true, 3 * time.Second},
		{apierrors.NewTimeoutError("timeout", 0), true, time.Second},
		{apierrors.NewInternalError(errors.New("etcd")), true, time.Second},
		{&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, true, time.Second},
		{context.DeadlineExceeded, true, time.Second},
		{apierrors.NewForbidden(gr, "", errors.New("no RBAC")), false, 0},
		{apierrors.NewUnauthorized("bad credentials"), false, 0},
		{apierrors.NewBadRequest("bad"), false, 0},
		{apierrors.NewNotFound(gr, ""), false, 0},
		{apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "TokenReview"}, "", nil), false, 0},
		{apierrors.NewMethodNotSupported(gr, "create"), false, 0},
	} {
		err := reviewFailure("TokenReview", c.err)
		ue, ok := errors.AsType[*UnavailableError](err)
		if ok != c.unavailable || (ok && ue.RetryAfter != c.retryAfter) {
			t.Errorf("%v: %#v, want unavailable %v after %s", c.err, err, c.unavailable, c.retryAfter)
		}
		if !ok && !errors.Is(err, errReviewRefused) {
			t.Errorf("%v: not marked as refused: %v", c.err, err)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: the cause is lost: %v", c.err, err)
		}
	}
}

// A flood of never-seen tokens, from one source and then from many, with
// the default limits and an injected clock: the flood is refused at once
// with Retry-After beyond the limits, a token that authenticated before is
// reviewed again and accepted, and during the one-source flood a new token
// from another source is accepted too.
func TestFloodOfUnknownTokens(t *testing.T) {
	tr, clock := &fakeTokenReviews{}, newClock()
	sar := &fakeSARs{allowSet: func(authzv1.SubjectAccessReviewSpec) bool { return true }}
	a := newAuth(t, tr, sar, clock, noTokenCache)
	from := func(token, addr string) error {
		r := request(token)
		r.RemoteAddr = addr
		_, err := authenticate(t, a, r)
		return err
	}
	flood := func(sources int) (rejected, shed int) {
		t.Helper()
		for i := range 1000 {
			err := from(fmt.Sprintf("junk-%d-%d", sources, i), fmt.Sprintf("198.51.100.%d:4000", i%sources))
			switch {
			case err == errRejected:
				rejected++
			case isUnavailable(err):
				shed++
			default:
				t.Fatalf("junk token: %v", err)
			}
		}
		return rejected, shed
	}

	rejected, shed := flood(1)
	if rejected != DefaultUnknownReviewPerSourceBurst || shed != 1000-rejected {
		t.Errorf("one source: %d reviewed and rejected, %d shed; want the per-source burst %d reviewed", rejected, shed, DefaultUnknownReviewPerSourceBurst)
	}
	if err := from(goodToken, "192.0.2.1:5000"); err != nil {
		t.Errorf("a new valid token from another source during the flood: %v", err)
	}

	clock.Advance(time.Minute) // the global bucket is full again
	rejected, shed = flood(100)
	if rejected != DefaultUnknownReviewBurst || shed != 1000-rejected {
		t.Errorf("100 sources: %d reviewed and rejected, %d shed; want the global burst %d", rejected, shed, DefaultUnknownReviewBurst)
	}
	before := tr.calls.Load()
	if err := from(goodToken, "198.51.100.1:4000"); err != nil {
		t.Errorf("a known token, even from a flooding source, once the global limit is spent: %v", err)
	}
	a.background.Wait() // it was answered from memory, and reviewed in the background
	if n := tr.calls.Load() - before; n != 1 {
		t.Errorf("TokenReviews of the known token = %d, want 1 (the token cache is off)", n)
	}
	if err := from("another-new-token", "192.0.2.2:5000"); !isUnavailable(err) {
		t.Errorf("a new token once the global limit is spent: %v, want Unavailable with Retry-After", err)
	}
}
