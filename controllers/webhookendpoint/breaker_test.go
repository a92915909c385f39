package webhookendpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

var breakerNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func bt(d time.Duration) *time.Time { t := breakerNow.Add(d); return &t }

func breakerEndpoint(owner string, paused bool) *hookv1.WebhookEndpoint {
	return &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "billing", Generation: 4},
		Spec:       hookv1.WebhookEndpointSpec{URL: "https://billing.example.com/hooks", Owner: owner, Paused: paused},
	}
}

// failing is a breaker opened 10 minutes ago by a streak of 10 failures,
// probed twice since.
func failing() ledger.Breaker {
	return ledger.Breaker{
		EndpointID: "shop/billing", Open: true, Reason: ledger.BreakerFailing, OpenedAt: breakerNow.Add(-10 * time.Minute), Openings: 2,
		Failures: 10, LastFailure: "HTTP 503", NextProbeAt: bt(2 * time.Minute), ProbeInterval: 4 * time.Minute,
		Probes: 2, LastProbeAt: bt(-time.Minute), LastProbeResult: "HTTP 502",
		ClosedAt: bt(-time.Hour), CloseReason: ledger.BreakerProbeSucceeded,
	}
}

// TestBreakerDefaultsAreTheEngines: the CRD's defaults of
// spec.circuitBreaker (what `kubectl get rtp -o yaml` shows) are the
// engine's (ledger.DefaultBreakerPolicy), and so is the built-in policy's.
func TestBreakerDefaultsAreTheEngines(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "hookkeeper.dev_retrypolicies.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	props := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["circuitBreaker"].Properties
	var cb hookv1.CircuitBreaker
	for name, prop := range props {
		if prop.Default == nil {
			continue
		}
		if err := yaml.Unmarshal([]byte(`{"`+name+`": `+string(prop.Default.Raw)+`}`), &cb); err != nil {
			t.Fatalf("default of %s: %v", name, err)
		}
	}
	if props["goneProbeInterval"].Default != nil {
		t.Errorf("goneProbeInterval has a default %s: absent means no automatic probe after a 410", props["goneProbeInterval"].Default.Raw)
	}
	got, err := retrypolicy.Breaker(&cb)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ledger.DefaultBreakerPolicy, *got); diff != "" {
		t.Errorf("the CRD's defaults (-engine +CRD):\n%s", diff)
	}
	builtIn, err := retrypolicy.Breaker(retrypolicy.DefaultRetryPolicySpec().CircuitBreaker)
	if err != nil || *builtIn != ledger.DefaultBreakerPolicy {
		t.Errorf("the built-in policy's breaker: %+v, %v", builtIn, err)
	}
	if absent, _ := retrypolicy.Breaker(nil); *absent != ledger.DefaultBreakerPolicy {
		t.Errorf("an absent circuitBreaker: %+v", absent)
	}
}

// TestBreakerPolicyErrors: values admission refuses are errors naming the
// field, all of them at once.
func TestBreakerPolicyErrors(t *testing.T) {
	d := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	_, err := retrypolicy.Breaker(&hookv1.CircuitBreaker{Failures: ptr.To[int32](0), MinDuration: d(-time.Second), ProbeInterval: d(0), Ramp: d(-time.Second)})
	msg := conditions.Message(err)
	for _, want := range []string{
		"spec.circuitBreaker.failures: must be at least 1",
		"spec.circuitBreaker.minDuration: must not be negative",
		"spec.circuitBreaker.probeInterval: must be greater than zero",
		"spec.circuitBreaker.ramp: must not be negative",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}

// TestDecideProbe: a probe request is acted on once per value of the
// annotation: a value the status recorded (a re-applied manifest) asks for
// nothing; a value that is not RFC 3339 is acted on (recorded, announced)
// but asks for no probe; a value longer than the status holds is compared
// as the status holds it.
func TestDecideProbe(t *testing.T) {
	long := "2026-12-01T12:00:00.123456789Z" + strings.Repeat("x", 80)
	tests := []struct {
		name       string
		annotation string
		recorded   *hookv1.CircuitBreakerStatus
		want       *probeRequest
	}{
		{name: "no annotation"},
		{name: "a first request", annotation: "2026-12-01T12:00:00Z", want: &probeRequest{"2026-12-01T12:00:00Z", true}},
		{name: "a first request before the status shows a breaker", annotation: "2026-12-01T12:00:00.5+01:00",
			want: &probeRequest{"2026-12-01T12:00:00.5+01:00", true}},
		{name: "the request the status recorded: nothing", annotation: "2026-12-01T12:00:00Z",
			recorded: &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, ProbeRequest: "2026-12-01T12:00:00Z"}},
		{name: "a new request", annotation: "2026-12-01T12:05:00Z",
			recorded: &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, ProbeRequest: "2026-12-01T12:00:00Z"},
			want:     &probeRequest{"2026-12-01T12:05:00Z", true}},
		{name: "not a time: acted on, no probe", annotation: "now", want: &probeRequest{"now", false}},
		{name: "too long: bounded, and not a time", annotation: long, want: &probeRequest{long[:64], false}},
		{name: "too long, recorded as bounded: nothing", annotation: long,
			recorded: &hookv1.CircuitBreakerStatus{ProbeRequest: long[:64]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := breakerEndpoint("", false)
			if tt.annotation != "" {
				ep.Annotations = map[string]string{hookv1.AnnotationProbeRequestedAt: tt.annotation}
			}
			ep.Status.Breaker = tt.recorded
			if diff := cmp.Diff(tt.want, decideProbe(ep)); diff != "" {
				t.Errorf("decideProbe (-want +got):\n%s", diff)
			}
		})
	}

	// decideEndpoint acts on a request unless gathering failed.
	ep := breakerEndpoint("", false)
	ep.Annotations = map[string]string{hookv1.AnnotationProbeRequestedAt: "2026-12-01T12:00:00Z"}
	if d := decideEndpoint(&endpointObservation{Endpoint: ep, Now: breakerNow, Err: errors.New("ledger down")}); d.Probe != nil {
		t.Errorf("a reconcile whose gathering failed acts on %+v", d.Probe)
	}
	obs := &endpointObservation{Endpoint: ep, Now: breakerNow, Policy: retrypolicy.DefaultPolicy(), PolicyProblem: &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: "x"}}
	if d := decideEndpoint(obs); d.Probe == nil || !d.Probe.Valid {
		t.Errorf("a request on an endpoint that is not Ready (the engine keeps its configuration): %+v", d.Probe)
	}
}

// TestBreakerStatus: status.breaker is the ledger's breaker at the API's
// precision, its next probe only while open, and the probe request acted
// on now or the one recorded before.
func TestBreakerStatus(t *testing.T) {
	mt := func(t *time.Time) *metav1.Time { return conditions.MetaTime(t) }
	open := failing()
	closed := failing()
	closed.Open, closed.NextProbeAt, closed.ClosedAt, closed.LastProbeResult = false, nil, bt(-30*time.Second), ""
	withNanos := failing()
	withNanos.OpenedAt = breakerNow.Add(-10*time.Minute + 123*time.Millisecond)
	prev := &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, ProbeRequest: "2026-12-01T11:00:00Z"}

	tests := []struct {
		name  string
		facts breakerFacts
		prev  *hookv1.CircuitBreakerStatus
		want  *hookv1.CircuitBreakerStatus
	}{
		{name: "never opened", facts: breakerFacts{Breaker: ledger.Breaker{EndpointID: "shop/billing"}},
			want: &hookv1.CircuitBreakerStatus{State: hookv1.CircuitClosed}},
		{name: "open, keeping the recorded request", facts: breakerFacts{Breaker: open}, prev: prev,
			want: &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, Reason: "Failing", OpenedAt: mt(bt(-10 * time.Minute)), Openings: 2,
				Failures: 10, LastFailure: "HTTP 503", NextProbeAt: mt(bt(2 * time.Minute)), Probes: 2, LastProbeAt: mt(bt(-time.Minute)),
				LastProbeResult: "HTTP 502", ClosedAt: mt(bt(-time.Hour)), CloseReason: "ProbeSucceeded", ProbeRequest: "2026-12-01T11:00:00Z"}},
		{name: "closed by a probe: no next probe; the request acted on now", facts: breakerFacts{Breaker: closed, Probe: &probeRequest{"2026-12-01T12:00:00Z", true}}, prev: prev,
			want: &hookv1.CircuitBreakerStatus{State: hookv1.CircuitClosed, Reason: "Failing", OpenedAt: mt(bt(-10 * time.Minute)), Openings: 2,
				Failures: 10, LastFailure: "HTTP 503", Probes: 2, LastProbeAt: mt(bt(-time.Minute)),
				ClosedAt: mt(bt(-30 * time.Second)), CloseReason: "ProbeSucceeded", ProbeRequest: "2026-12-01T12:00:00Z"}},
		{name: "times at the API's precision", facts: breakerFacts{Breaker: withNanos}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := breakerStatus(tt.prev, &tt.facts)
			if tt.want == nil {
				if !got.OpenedAt.Time.Equal(breakerNow.Add(-10 * time.Minute)) {
					t.Errorf("openedAt %s", got.OpenedAt)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("breakerStatus (-want +got):\n%s", diff)
			}
		})
	}

	long := failing()
	long.LastFailure = strings.Repeat("é", 300)
	if got := breakerStatus(nil, &breakerFacts{Breaker: long}); len(got.LastFailure) > 256 {
		t.Errorf("lastFailure of %d bytes, the CRD allows 256", len(got.LastFailure))
	}
}

// TestCircuitCondition: True while open, with why, the streak, the
// probes, the next probe and how to ask for one, the owner, and that
// spec.paused overrides it; False with why attempts flow.
func TestCircuitCondition(t *testing.T) {
	gone := failing()
	gone.Reason, gone.LastFailure, gone.NextProbeAt, gone.ProbeInterval, gone.Probes, gone.LastProbeAt = ledger.BreakerGone, "HTTP 410", nil, 0, 0, nil
	goneSlow := gone
	goneSlow.NextProbeAt = bt(time.Hour)
	fresh := failing()
	fresh.Probes, fresh.LastProbeAt, fresh.LastProbeResult = 0, nil, ""
	probedNow := failing()
	probedNow.NextProbeAt = bt(0)
	closedByProbe := failing()
	closedByProbe.Open, closedByProbe.NextProbeAt, closedByProbe.ClosedAt = false, nil, bt(-30*time.Second)
	closedByURL := closedByProbe
	closedByURL.CloseReason = ledger.BreakerURLChanged
	disabled := ledger.DefaultBreakerPolicy
	disabled.Disabled = true

	tests := []struct {
		name        string
		ep          *hookv1.WebhookEndpoint
		facts       breakerFacts
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage []string
		notMessage  []string
	}{
		{
			name: "never opened", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: ledger.Breaker{}, Policy: &ledger.DefaultBreakerPolicy},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonCircuitClosed,
			wantMessage: []string{"the circuit breaker has never opened"},
		},
		{
			name: "never opened, disabled by the policy", ep: breakerEndpoint("", false), facts: breakerFacts{Policy: &disabled},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonCircuitBreakerDisabled,
			wantMessage: []string{"spec.circuitBreaker.disabled", "a 410 Gone exhausts only the delivery that got it"},
		},
		{
			name: "open on failures, probed twice, with an owner", ep: breakerEndpoint("team-payments", false), facts: breakerFacts{Breaker: failing()},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitFailing,
			wantMessage: []string{
				"the circuit breaker opened at 2026-12-01T11:50:00Z after 10 failed attempts in a row, the last: HTTP 503",
				"no attempt is made to the endpoint but one probe at a time, and its deliveries wait",
				"2 probes so far, the last failed at 2026-12-01T11:59:00Z (HTTP 502)",
				"the next probe is due at 2026-12-01T12:02:00Z (`kubectl hookkeeper probe billing -n shop` asks for one now)",
				". Owner: team-payments",
			},
			notMessage: []string{"paused"},
		},
		{
			name: "open, not probed yet", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: fresh},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitFailing,
			wantMessage: []string{"after 10 failed attempts in a row", "the next probe is due at 2026-12-01T12:02:00Z"},
			notMessage:  []string{"probes so far", "Owner"},
		},
		{
			name: "open on one failure, probed once", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: func() ledger.Breaker {
				b := failing()
				b.Failures, b.Probes = 1, 1
				return b
			}()},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitFailing,
			wantMessage: []string{"after 1 failed attempt, the last: HTTP 503", "1 probe so far, which failed at 2026-12-01T11:59:00Z (HTTP 502)"},
		},
		{
			name: "a probe requested: due now", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: probedNow},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitFailing,
			wantMessage: []string{"the next probe is due at 2026-12-01T12:00:00Z"},
		},
		{
			name: "open and paused: paused overrides it, the condition still shows it", ep: breakerEndpoint("", true), facts: breakerFacts{Breaker: failing()},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitFailing,
			wantMessage: []string{"after 10 failed attempts", "spec.paused overrides the breaker: nothing is sent, probes included, until the endpoint is unpaused"},
		},
		{
			name: "gone, no automatic probe", ep: breakerEndpoint("team-payments", false), facts: breakerFacts{Breaker: gone},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitGone,
			wantMessage: []string{
				"the circuit breaker opened at 2026-12-01T11:50:00Z: the receiver answered 410 Gone, which says the URL is gone",
				"its deliveries wait, none is exhausted for it",
				"no automatic probe (the policy sets no circuitBreaker.goneProbeInterval): fix spec.url, which closes the breaker, or ask for a probe with `kubectl hookkeeper probe billing -n shop`",
				". Owner: team-payments",
			},
			notMessage: []string{"(HTTP 410)", "failed attempts"},
		},
		{
			name: "gone, probed slowly", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: goneSlow},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonCircuitGone,
			wantMessage: []string{"410 Gone", "the next probe is due at 2026-12-01T13:00:00Z"},
		},
		{
			name: "closed by a probe", ep: breakerEndpoint("team-payments", false), facts: breakerFacts{Breaker: closedByProbe, Policy: &ledger.DefaultBreakerPolicy},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonProbeSucceeded,
			wantMessage: []string{"closed at 2026-12-01T11:59:30Z when a probe succeeded", "it had opened at 2026-12-01T11:50:00Z after 10 failed attempts in a row (HTTP 503)"},
			notMessage:  []string{"Owner"},
		},
		{
			name: "closed by a new URL", ep: breakerEndpoint("", false), facts: breakerFacts{Breaker: closedByURL},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonURLChanged,
			wantMessage: []string{"closed at 2026-12-01T11:59:30Z because spec.url changed"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := circuitCondition(tt.ep, &tt.facts, breakerNow)
			if c.Type != hookv1.ConditionCircuitOpen || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 4 {
				t.Errorf("got %s=%s (%s) at generation %d, want %s (%s)", c.Type, c.Status, c.Reason, c.ObservedGeneration, tt.wantStatus, tt.wantReason)
			}
			for _, w := range tt.wantMessage {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q\ndoes not contain %q", c.Message, w)
				}
			}
			for _, w := range tt.notMessage {
				if strings.Contains(c.Message, w) {
					t.Errorf("message %q\ncontains %q", c.Message, w)
				}
			}
			if len(c.Message) > conditions.MaxMessage {
				t.Errorf("message of %d bytes", len(c.Message))
			}
		})
	}
}

// TestBreakerChange: openings are news once, counted against what the
// status showed; a status that never showed a breaker announces only a
// breaker that is open now.
func TestBreakerChange(t *testing.T) {
	st := func(state hookv1.CircuitState, openings int64) *hookv1.CircuitBreakerStatus {
		return &hookv1.CircuitBreakerStatus{State: state, Openings: openings}
	}
	open, closed := hookv1.CircuitOpen, hookv1.CircuitClosed
	tests := []struct {
		name          string
		before, after *hookv1.CircuitBreakerStatus
		want          breakerNews
	}{
		{name: "not read", before: st(open, 1)},
		{name: "first status, never opened", after: st(closed, 0)},
		{name: "first status, open", after: st(open, 3), want: breakerNews{Opened: 1}},
		{name: "first status, closed after openings no status showed", after: st(closed, 3)},
		{name: "opened", before: st(closed, 0), after: st(open, 1), want: breakerNews{Opened: 1}},
		{name: "still open: nothing new", before: st(open, 1), after: st(open, 1)},
		{name: "closed", before: st(open, 1), after: st(closed, 1), want: breakerNews{Closed: true}},
		{name: "still closed", before: st(closed, 1), after: st(closed, 1)},
		{name: "opened again", before: st(closed, 1), after: st(open, 2), want: breakerNews{Opened: 1}},
		{name: "opened and closed between two reconciles", before: st(closed, 1), after: st(closed, 2), want: breakerNews{Opened: 1, Closed: true}},
		{name: "closed and opened again between two reconciles", before: st(open, 1), after: st(open, 2), want: breakerNews{Opened: 1}},
		{name: "opened twice", before: st(closed, 1), after: st(open, 3), want: breakerNews{Opened: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := breakerChange(tt.before, tt.after); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestBreakerEvents: one Warning CircuitOpened per opening with the
// condition's message (owner included), a Normal CircuitClosed, and what a
// probe request did.
func TestBreakerEvents(t *testing.T) {
	ep := breakerEndpoint("team-payments", false)
	openCond := circuitCondition(ep, &breakerFacts{Breaker: failing()}, breakerNow)
	openSt := breakerStatus(nil, &breakerFacts{Breaker: failing()})
	closedB := failing()
	closedB.Open, closedB.NextProbeAt, closedB.ClosedAt = false, nil, bt(0)
	closedCond := circuitCondition(ep, &breakerFacts{Breaker: closedB}, breakerNow)
	closedSt := breakerStatus(nil, &breakerFacts{Breaker: closedB})
	paused := breakerEndpoint("", true)

	type ev struct{ Type, Reason, Note string }
	tests := []struct {
		name  string
		ep    *hookv1.WebhookEndpoint
		news  breakerNews
		after *hookv1.CircuitBreakerStatus
		cond  *metav1.Condition
		probe *probeRequest
		want  []ev
	}{
		{name: "nothing new", ep: ep, after: openSt, cond: &openCond},
		{name: "opened", ep: ep, news: breakerNews{Opened: 1}, after: openSt, cond: &openCond,
			want: []ev{{corev1.EventTypeWarning, hookv1.ReasonCircuitOpened, openCond.Message}}},
		{name: "opened twice", ep: ep, news: breakerNews{Opened: 2}, after: openSt, cond: &openCond,
			want: []ev{{corev1.EventTypeWarning, hookv1.ReasonCircuitOpened, "the circuit breaker opened 2 times since the status last showed it; " + openCond.Message}}},
		{name: "closed", ep: ep, news: breakerNews{Closed: true}, after: closedSt, cond: &closedCond,
			want: []ev{{corev1.EventTypeNormal, hookv1.ReasonCircuitClosedEvent, closedCond.Message}}},
		{name: "opened and closed between reconciles", ep: ep, news: breakerNews{Opened: 1, Closed: true}, after: closedSt, cond: &closedCond,
			want: []ev{
				{corev1.EventTypeWarning, hookv1.ReasonCircuitOpened, "the circuit breaker opened at 2026-12-01T11:50:00Z (Failing) and has closed again since. Owner: team-payments"},
				{corev1.EventTypeNormal, hookv1.ReasonCircuitClosedEvent, closedCond.Message},
			}},
		{name: "a probe requested of an open breaker", ep: ep, after: openSt, cond: &openCond, probe: &probeRequest{"2026-12-01T12:00:00Z", true},
			want: []ev{{corev1.EventTypeNormal, hookv1.ReasonProbeRequested, "a probe was requested (2026-12-01T12:00:00Z): the next probe is due now; one delivery is sent to the endpoint as the probe"}}},
		{name: "a probe requested of a paused endpoint", ep: paused, after: openSt, cond: &openCond, probe: &probeRequest{"2026-12-01T12:00:00Z", true},
			want: []ev{{corev1.EventTypeNormal, hookv1.ReasonProbeRequested, "a probe was requested (2026-12-01T12:00:00Z): the next probe is due now, but spec.paused holds it until the endpoint is unpaused"}}},
		{name: "a probe requested of a closed breaker", ep: ep, after: closedSt, cond: &closedCond, probe: &probeRequest{"2026-12-01T12:00:00Z", true},
			want: []ev{{corev1.EventTypeNormal, hookv1.ReasonProbeRequested, "a probe was requested (2026-12-01T12:00:00Z), but the circuit breaker is closed: attempts are made on the retry policy, there is nothing to probe"}}},
		{name: "a request that is not a time", ep: ep, after: openSt, cond: &openCond, probe: &probeRequest{"now", false},
			want: []ev{{corev1.EventTypeWarning, hookv1.ReasonProbeRequestInvalid, "annotation hookkeeper.dev/probe-requested-at is not an RFC 3339 time (such as 2026-12-01T12:00:00Z); nothing is probed. `kubectl hookkeeper probe` writes it"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ev
			for _, e := range breakerEvents(tt.ep, tt.news, tt.after, tt.cond, tt.probe) {
				got = append(got, ev{e.Type, e.Reason, e.Note})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("breakerEvents (-want +got):\n%s", diff)
			}
		})
	}
	if !strings.Contains(openCond.Message, "Owner: team-payments") {
		t.Errorf("the CircuitOpened note does not name the owner: %q", openCond.Message)
	}
}

// TestBreakerMetrics: the gauge is 1 while open with the reason, 0 while
// closed, one series per endpoint whatever its reason or owner was, gone
// with the endpoint; the counter counts the openings it is told of, by
// owner (bounded) and reason, and both reasons exist before any opening.
func TestBreakerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewBreakerMetrics(reg)
	ep := breakerEndpoint("team-payments", false)
	set := func(state hookv1.CircuitState, reason string) {
		ep.Status.Breaker = &hookv1.CircuitBreakerStatus{State: state, Reason: reason}
	}
	check := func(what, want string, names ...string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	const gaugeHead = "# HELP hookkeeper_endpoint_circuit_open 1 while the endpoint's circuit breaker is open (reason Failing or Gone), 0 while it is closed (no reason); per endpoint (\"<namespace>/<name>\") with its owner (spec.owner).\n# TYPE hookkeeper_endpoint_circuit_open gauge\n"
	const counterHead = "# HELP hookkeeper_endpoint_circuit_openings_total Openings of endpoints' circuit breakers, by reason (Failing, Gone) and the endpoint's owner (spec.owner; at most 64 owners per process, later ones as _other), counted once when the controller shows them.\n# TYPE hookkeeper_endpoint_circuit_openings_total counter\n"

	check("before any endpoint", counterHead+
		"hookkeeper_endpoint_circuit_openings_total{owner=\"\",reason=\"Failing\"} 0\n"+
		"hookkeeper_endpoint_circuit_openings_total{owner=\"\",reason=\"Gone\"} 0\n", "hookkeeper_endpoint_circuit_openings_total", "hookkeeper_endpoint_circuit_open")

	set(hookv1.CircuitClosed, "")
	m.observe(ep, 0)
	check("closed", gaugeHead+"hookkeeper_endpoint_circuit_open{endpoint=\"shop/billing\",namespace=\"shop\",owner=\"team-payments\",reason=\"\"} 0\n", "hookkeeper_endpoint_circuit_open")

	set(hookv1.CircuitOpen, "Failing")
	m.observe(ep, 1)
	m.observe(ep, 0) // the same status again: not a new opening
	check("open", gaugeHead+"hookkeeper_endpoint_circuit_open{endpoint=\"shop/billing\",namespace=\"shop\",owner=\"team-payments\",reason=\"Failing\"} 1\n", "hookkeeper_endpoint_circuit_open")

	set(hookv1.CircuitOpen, "Gone")
	ep.Spec.Owner = "team-billing"
	m.observe(ep, 0)
	check("a 410 while open, and a new owner: the endpoint's one series changes", gaugeHead+
		"hookkeeper_endpoint_circuit_open{endpoint=\"shop/billing\",namespace=\"shop\",owner=\"team-billing\",reason=\"Gone\"} 1\n", "hookkeeper_endpoint_circuit_open")

	other := breakerEndpoint("", false)
	other.Name = "audit"
	other.Status.Breaker = &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, Reason: "Failing"}
	m.observe(other, 2)
	m.forget("shop", "billing")
	m.forget("shop", "never-seen")
	check("billing deleted", gaugeHead+"hookkeeper_endpoint_circuit_open{endpoint=\"shop/audit\",namespace=\"shop\",owner=\"\",reason=\"Failing\"} 1\n", "hookkeeper_endpoint_circuit_open")
	check("openings", counterHead+
		"hookkeeper_endpoint_circuit_openings_total{owner=\"\",reason=\"Failing\"} 2\n"+
		"hookkeeper_endpoint_circuit_openings_total{owner=\"\",reason=\"Gone\"} 0\n"+
		"hookkeeper_endpoint_circuit_openings_total{owner=\"team-payments\",reason=\"Failing\"} 1\n", "hookkeeper_endpoint_circuit_openings_total")

	// Owners beyond the bound count as _other.
	for i := range 70 {
		e := breakerEndpoint("owner-"+strings.Repeat("a", i%63+1)+"-x", false)
		e.Name = "ep" + strings.Repeat("b", i+1)
		e.Status.Breaker = &hookv1.CircuitBreakerStatus{State: hookv1.CircuitOpen, Reason: "Failing"}
		m.observe(e, 1)
	}
	if n := testutil.CollectAndCount(m.openings); n > 64+3 {
		t.Errorf("%d owner series, want at most 64 owners plus _other and the unowned", n)
	}

	var none *BreakerMetrics // a reconciler without metrics
	none.observe(ep, 1)
	none.forget("shop", "billing")
}

// TestBreakerEventsNeverBlock: breaker notices wake the endpoint's
// reconcile without ever blocking the engine.
func TestBreakerEventsNeverBlock(t *testing.T) {
	x := NewBreakerEvents(1)
	x.Notify(ledger.Breaker{EndpointID: "shop/billing", Open: true})
	x.Notify(ledger.Breaker{EndpointID: "shop/billing"}) // full: dropped, not blocked
	x.Notify(ledger.Breaker{EndpointID: "no-namespace"})
	if x.Dropped() != 1 {
		t.Errorf("dropped %d, want 1", x.Dropped())
	}
	if ev := <-x.Events(); ev.Object.GetNamespace() != "shop" || ev.Object.GetName() != "billing" {
		t.Errorf("event for %s/%s", ev.Object.GetNamespace(), ev.Object.GetName())
	}
}
