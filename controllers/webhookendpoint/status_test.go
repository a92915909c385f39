package webhookendpoint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

var statusNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { t := statusNow.Add(d); return &t }

func exhausted(id string, ago time.Duration) ledger.ExhaustedDelivery {
	return ledger.ExhaustedDelivery{
		Delivery: ledger.Delivery{ID: id, EventID: "evt_" + id, Attempts: 3, ExhaustReason: ledger.ExhaustMaxAttempts,
			LastError: "HTTP 503", TerminalAt: at(-ago)},
		EventType:  "order.created",
		ReplayFrom: statusNow.Add(-ago - time.Minute),
	}
}

func TestReadyCondition(t *testing.T) {
	tests := []struct {
		name        string
		facts       endpointFacts
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage []string
	}{
		{
			name:       "registered on the default policy",
			facts:      endpointFacts{SecretName: "ep-signing", Registered: true},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonReconciled,
			wantMessage: []string{"registered with the delivery engine", `Secret "ep-signing"`, "the operator's default retry policy"},
		},
		{
			name:       "registered on a policy, during a rotation",
			facts:      endpointFacts{PolicyName: "fast", SecretName: "s", Registered: true, PreviousSecretUntil: statusNow.Add(time.Hour)},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonReconciled,
			wantMessage: []string{`RetryPolicy "fast"`, "previous one stays valid until 2026-11-29T13:00:00Z"},
		},
		{
			name: "a missing policy keeps the previous configuration",
			facts: endpointFacts{PolicyName: "gone", Registered: true,
				Problem: &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: `RetryPolicy "gone" not found`}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonRetryPolicyNotFound,
			wantMessage: []string{`RetryPolicy "gone" not found`, "keeps using the endpoint's previous configuration"},
		},
		{
			name:       "a missing secret before the first registration",
			facts:      endpointFacts{Problem: &conditions.Problem{Reason: hookv1.ReasonSigningSecretNotFound, Message: `Secret "s" not found`}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonSigningSecretNotFound,
			wantMessage: []string{`Secret "s" not found`, "not registered with the delivery engine and receives no events"},
		},
		{
			name:       "a forbidden destination before the first registration",
			facts:      endpointFacts{Problem: &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: "url resolves to 169.254.169.254, a cloud metadata address"}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonDestinationForbidden,
			wantMessage: []string{"url resolves to 169.254.169.254, a cloud metadata address", "not registered with the delivery engine and receives no events"},
		},
		{
			name: "a forbidden destination holds the registered endpoint paused",
			facts: endpointFacts{Registered: true, RegisteredPaused: true,
				Problem: &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: "url resolves to 10.0.0.1, a private address"}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonDestinationForbidden,
			wantMessage: []string{"url resolves to 10.0.0.1, a private address", "holds the endpoint paused", "none is sent until the url is allowed"},
		},
		{
			name: "a url that can never be dialled holds the registered endpoint paused",
			facts: endpointFacts{Registered: true, RegisteredPaused: true,
				Problem: &conditions.Problem{Reason: hookv1.ReasonURLInvalid, Message: "spec.url: url port must be a number from 1 to 65535 of at most 5 digits"}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonURLInvalid,
			wantMessage: []string{"spec.url: url port must be", "holds the endpoint paused", "none is sent until the spec is corrected"},
		},
		{
			name:       "a reserved static header before the first registration",
			facts:      endpointFacts{Problem: &conditions.Problem{Reason: hookv1.ReasonHeadersInvalid, Message: `spec.headers[0]: header "User-Agent": headers must not set`}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonHeadersInvalid,
			wantMessage: []string{`spec.headers[0]: header "User-Agent"`, "not registered with the delivery engine and receives no events"},
		},
		{
			name: "another problem while the engine holds a paused configuration",
			facts: endpointFacts{Registered: true, RegisteredPaused: true,
				Problem: &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotFound, Message: `RetryPolicy "gone" not found`}},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonRetryPolicyNotFound,
			wantMessage: []string{`RetryPolicy "gone" not found`, "keeps the endpoint's previous configuration, paused"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := readyCondition(&tt.facts, 4, statusNow)
			if c.Type != hookv1.ConditionReady || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 4 {
				t.Errorf("Ready = %s/%s gen %d, want %s/%s gen 4", c.Status, c.Reason, c.ObservedGeneration, tt.wantStatus, tt.wantReason)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

func TestHealthyCondition(t *testing.T) {
	unhealthy := func(reason string, lastFailure time.Duration) hookv1.WebhookEndpointStatus {
		return hookv1.WebhookEndpointStatus{
			Conditions:      []metav1.Condition{{Type: hookv1.ConditionHealthy, Status: metav1.ConditionFalse, Reason: reason}},
			LastFailureTime: conditions.MetaTime(at(lastFailure)),
		}
	}
	tests := []struct {
		name        string
		prev        hookv1.WebhookEndpointStatus
		stats       ledger.EndpointStats
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{
			name: "nothing attempted", wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonNoFailures,
		},
		{
			name:       "only successes",
			stats:      ledger.EndpointStats{LastSuccessAt: at(-time.Minute)},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonNoFailures,
		},
		{
			name:       "a success after the last failure",
			stats:      ledger.EndpointStats{LastSuccessAt: at(-time.Minute), LastFailureAt: at(-time.Hour), LastFailureReason: "HTTP 502"},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonLastAttemptSucceeded, wantMessage: "HTTP 502",
		},
		{
			name:       "a failure after the last success",
			stats:      ledger.EndpointStats{LastSuccessAt: at(-time.Hour), LastFailureAt: at(-time.Minute), LastFailureReason: "HTTP 503"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonLastAttemptFailed,
			wantMessage: "the last attempt failed at 2026-11-29T11:59:00Z (HTTP 503); the last success was at 2026-11-29T11:00:00Z",
		},
		{
			name:       "failures and never a success",
			stats:      ledger.EndpointStats{LastFailureAt: at(-time.Minute), LastFailureReason: "connection refused"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonLastAttemptFailed, wantMessage: "no attempt has succeeded yet",
		},
		{
			name:       "already unhealthy and failed again",
			prev:       unhealthy(hookv1.ReasonLastAttemptFailed, -5*time.Minute),
			stats:      ledger.EndpointStats{LastSuccessAt: at(-time.Hour), LastFailureAt: at(-time.Minute), LastFailureReason: "HTTP 503"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonConsecutiveFailures, wantMessage: "attempts keep failing",
		},
		{
			name:       "consecutive failures stay consecutive while nothing happens",
			prev:       unhealthy(hookv1.ReasonConsecutiveFailures, -time.Minute),
			stats:      ledger.EndpointStats{LastFailureAt: at(-time.Minute), LastFailureReason: "HTTP 503"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonConsecutiveFailures,
		},
		{
			name:       "unhealthy, a success, then a new failure: only the last attempt failed",
			prev:       unhealthy(hookv1.ReasonConsecutiveFailures, -10*time.Minute),
			stats:      ledger.EndpointStats{LastSuccessAt: at(-5 * time.Minute), LastFailureAt: at(-time.Minute), LastFailureReason: "HTTP 500"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonLastAttemptFailed,
		},
		{
			name:       "unhealthy and the same failure seen again",
			prev:       unhealthy(hookv1.ReasonLastAttemptFailed, -time.Minute),
			stats:      ledger.EndpointStats{LastFailureAt: at(-time.Minute + 300*time.Millisecond), LastFailureReason: "HTTP 500"},
			wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonLastAttemptFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := healthyCondition(&tt.prev, &tt.stats, 2, statusNow)
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Errorf("Healthy = %s/%s (%q), want %s/%s", c.Status, c.Reason, c.Message, tt.wantStatus, tt.wantReason)
			}
			if !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("message %q lacks %q", c.Message, tt.wantMessage)
			}
		})
	}
}

func TestExhaustedCondition(t *testing.T) {
	oldest := exhausted("dlv_old", 2*time.Hour)
	tests := []struct {
		name        string
		facts       deliveryFacts
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage []string
	}{
		{
			name: "none", wantStatus: metav1.ConditionFalse, wantReason: hookv1.ReasonNoneUnresolved,
			wantMessage: []string{"no exhausted delivery is unresolved"},
		},
		{
			name:       "one",
			facts:      deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: 1}, Oldest: &oldest},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonUnresolvedDeliveries,
			wantMessage: []string{"1 exhausted delivery is unresolved: it, dlv_old (event evt_dlv_old of type order.created), was exhausted at 2026-11-29T10:00:00Z after 3 attempts (MaxAttempts)"},
		},
		{
			name:       "many: the count, the oldest and what to do",
			facts:      deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: 1042}, Oldest: &oldest},
			wantStatus: metav1.ConditionTrue, wantReason: hookv1.ReasonUnresolvedDeliveries,
			wantMessage: []string{
				"1042 exhausted deliveries are unresolved: the oldest, dlv_old",
				"create a DeliveryRecovery with action Auto",
				`echo '{"apiVersion":"hookkeeper.dev/v1alpha1","kind":"DeliveryRecovery","metadata":{"generateName":"orders-recovery-","namespace":"shop"},"spec":{"endpointRef":{"name":"orders"},"action":"Auto"}}' | kubectl create -f -`,
				"Dismiss",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := exhaustedCondition("shop", "orders", &tt.facts, 1, statusNow)
			if c.Type != hookv1.ConditionDeliveriesExhausted || c.Status != tt.wantStatus || c.Reason != tt.wantReason {
				t.Errorf("DeliveriesExhausted = %s/%s, want %s/%s", c.Status, c.Reason, tt.wantStatus, tt.wantReason)
			}
			for _, m := range tt.wantMessage {
				if !strings.Contains(c.Message, m) {
					t.Errorf("message %q lacks %q", c.Message, m)
				}
			}
		})
	}
}

func TestRecentExhausted(t *testing.T) {
	window := 72 * time.Hour
	scrubbed := exhausted("dlv_scrubbed", time.Minute)
	scrubbed.SecretsScrubbed = true
	pruned := exhausted("dlv_pruned", 2*time.Minute)
	pruned.PayloadPruned = true
	old := exhausted("dlv_old", 3*time.Minute)
	old.ReplayFrom = statusNow.Add(-window - time.Second)
	long := exhausted("dlv_long", 4*time.Minute)
	long.Delivery.LastError = strings.Repeat("é", 200)

	recent := []ledger.ExhaustedDelivery{exhausted("dlv_new", 0), scrubbed, pruned, old, long}
	for i := range 30 {
		recent = append(recent, exhausted(fmt.Sprintf("dlv_%02d", i), time.Hour+time.Duration(i)*time.Minute))
	}
	got := recentExhausted(&deliveryFacts{Recent: recent, ReplayWindow: window}, statusNow)

	if len(got) != recentExhaustedMax {
		t.Fatalf("%d items, want %d", len(got), recentExhaustedMax)
	}
	want := map[string]hookv1.RecoveryAction{
		"dlv_new": hookv1.RecoveryRetry, "dlv_scrubbed": hookv1.RecoveryReissue, "dlv_pruned": hookv1.RecoveryReissue,
		"dlv_old": hookv1.RecoveryReissue, "dlv_long": hookv1.RecoveryRetry,
	}
	for i, id := range []string{"dlv_new", "dlv_scrubbed", "dlv_pruned", "dlv_old", "dlv_long"} {
		if got[i].DeliveryID != id || got[i].Recovery != want[id] {
			t.Errorf("item %d = %s/%s, want %s/%s", i, got[i].DeliveryID, got[i].Recovery, id, want[id])
		}
	}
	first := got[0]
	if first.EventID != "evt_dlv_new" || first.EventType != "order.created" || first.Attempts != 3 || first.Reason != "MaxAttempts" ||
		first.LastError != "HTTP 503" || !first.ExhaustedAt.Time.Equal(statusNow) {
		t.Errorf("first item = %+v", first)
	}
	if e := got[4].LastError; len(e) > 256 || !strings.HasSuffix(e, "...") || !strings.HasPrefix(e, "é") || strings.ContainsRune(e, '\uFFFD') {
		t.Errorf("a long error was not cut cleanly to 256 bytes: %d bytes", len(e))
	}
	if recentExhausted(&deliveryFacts{ReplayWindow: window}, statusNow) != nil {
		t.Error("no exhausted deliveries should leave the list empty")
	}
}

func TestExhaustionEvent(t *testing.T) {
	const interval = time.Minute
	tests := []struct {
		name         string
		memo         *exhaustionMemo
		wasExhausted bool
		prevCount    int64
		count        int64
		wantEmit     bool
		wantMemo     *exhaustionMemo
	}{
		{name: "nothing exhausted", wantMemo: nil},
		{name: "the first exhaustion", count: 1, wantEmit: true, wantMemo: &exhaustionMemo{At: statusNow, Count: 1}},
		{
			name: "growth within the interval is not announced", memo: &exhaustionMemo{At: statusNow.Add(-30 * time.Second), Count: 1},
			wasExhausted: true, prevCount: 1, count: 500, wantMemo: &exhaustionMemo{At: statusNow.Add(-30 * time.Second), Count: 1},
		},
		{
			name: "growth after the interval is announced", memo: &exhaustionMemo{At: statusNow.Add(-interval), Count: 1},
			wasExhausted: true, prevCount: 500, count: 1000, wantEmit: true, wantMemo: &exhaustionMemo{At: statusNow, Count: 1000},
		},
		{
			name: "no growth after the interval is not announced", memo: &exhaustionMemo{At: statusNow.Add(-time.Hour), Count: 7},
			wasExhausted: true, prevCount: 7, count: 7, wantMemo: &exhaustionMemo{At: statusNow.Add(-time.Hour), Count: 7},
		},
		{
			name: "a partial recovery lowers the mark", memo: &exhaustionMemo{At: statusNow.Add(-time.Hour), Count: 7},
			wasExhausted: true, prevCount: 7, count: 3, wantMemo: &exhaustionMemo{At: statusNow.Add(-time.Hour), Count: 3},
		},
		{name: "all resolved forgets", memo: &exhaustionMemo{At: statusNow, Count: 7}, wasExhausted: true, prevCount: 7},
		{
			name: "after a restart, what the status showed counts as announced", wasExhausted: true, prevCount: 40, count: 40,
			wantMemo: &exhaustionMemo{Count: 40},
		},
		{
			name: "after a restart, growth since is announced", wasExhausted: true, prevCount: 40, count: 41,
			wantEmit: true, wantMemo: &exhaustionMemo{At: statusNow, Count: 41},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			emit, memo := exhaustionEvent(tt.memo, tt.wasExhausted, tt.prevCount, tt.count, statusNow, interval)
			if emit != tt.wantEmit {
				t.Errorf("emit = %v, want %v", emit, tt.wantEmit)
			}
			if fmt.Sprint(memo) != fmt.Sprint(tt.wantMemo) {
				t.Errorf("memo = %+v, want %+v", memo, tt.wantMemo)
			}
		})
	}
}

// TestAThousandExhaustionsMakeFewEvents replays a thousand exhaustions
// arriving over ten minutes, with a reconcile after each (as the
// exhaustion channel triggers them): one Event for the transition, then at
// most one a minute.
func TestAThousandExhaustionsMakeFewEvents(t *testing.T) {
	var (
		memo   *exhaustionMemo
		status hookv1.WebhookEndpointStatus
		events int
	)
	for i := 1; i <= 1000; i++ {
		now := statusNow.Add(time.Duration(i) * 600 * time.Millisecond)
		was := meta.IsStatusConditionTrue(status.Conditions, hookv1.ConditionDeliveriesExhausted)
		emit, next := exhaustionEvent(memo, was, status.Deliveries.ExhaustedUnresolved, int64(i), now, time.Minute)
		memo = next
		if emit {
			events++
		}
		status.Deliveries.ExhaustedUnresolved = int64(i)
		meta.SetStatusCondition(&status.Conditions, exhaustedCondition("ns", "ep", &deliveryFacts{Stats: ledger.EndpointStats{ExhaustedUnresolved: int64(i)}}, 1, now))
	}
	if events < 1 || events > 11 {
		t.Errorf("%d Events for 1000 exhaustions over 10 minutes, want 1 and at most one a minute after", events)
	}
}

// TestWebhookEndpointStatusIsStable computes a status, sends it through
// JSON as the API server would, and computes it again later from the same
// facts: nothing may differ, or every periodic reconcile would write.
func TestWebhookEndpointStatusIsStable(t *testing.T) {
	oldest := exhausted("dlv_old", time.Hour+123*time.Millisecond)
	facts := &endpointFacts{
		PolicyName: "p", SecretName: "s", Registered: true, PreviousSecretUntil: statusNow.Add(time.Hour + 500*time.Millisecond),
		Deliveries: &deliveryFacts{
			Stats: ledger.EndpointStats{Pending: 2, Delivered: 10, ExhaustedUnresolved: 2,
				LastSuccessAt: at(-time.Hour - 700*time.Millisecond), LastFailureAt: at(-time.Minute - 300*time.Millisecond), LastFailureReason: "HTTP 503"},
			Oldest: &oldest, Recent: []ledger.ExhaustedDelivery{exhausted("dlv_new", 456*time.Millisecond), oldest},
			ReplayWindow: 72 * time.Hour,
		},
	}
	ep := &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: 3}}
	ep.Status = webhookEndpointStatus(ep, facts, statusNow)

	var stored hookv1.WebhookEndpoint
	b, err := json.Marshal(ep)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	again := webhookEndpointStatus(&stored, facts, statusNow.Add(30*time.Second))
	if !equality.Semantic.DeepEqual(stored.Status, again) {
		t.Errorf("an unchanged endpoint's status changed after a round trip:\nbefore %+v\nafter  %+v", stored.Status, again)
	}
	if stored.Status.ObservedGeneration != 3 || stored.Status.Deliveries.Pending != 2 || len(stored.Status.RecentExhausted) != 2 {
		t.Errorf("status = %+v", stored.Status)
	}
}

func TestWebhookEndpointStatusKeepsWhatItCannotSee(t *testing.T) {
	other := metav1.Condition{Type: "Audited", Status: metav1.ConditionTrue, Reason: "ByAnotherWriter", LastTransitionTime: metav1.NewTime(statusNow)}
	healthy := metav1.Condition{Type: hookv1.ConditionHealthy, Status: metav1.ConditionTrue, Reason: hookv1.ReasonNoFailures, LastTransitionTime: metav1.NewTime(statusNow)}
	ep := &hookv1.WebhookEndpoint{
		ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: 5},
		Status: hookv1.WebhookEndpointStatus{
			ObservedGeneration: 4, Conditions: []metav1.Condition{other, healthy},
			Deliveries: hookv1.DeliveryCounts{Delivered: 9},
		},
	}
	facts := &endpointFacts{Registered: true, Incomplete: true,
		Problem: &conditions.Problem{Reason: hookv1.ReasonInternalError, Message: "registering with the delivery engine failed; the operator's log has the details"}}
	got := webhookEndpointStatus(ep, facts, statusNow.Add(time.Minute))
	if got.ObservedGeneration != 4 {
		t.Errorf("an incomplete reconcile advanced observedGeneration to %d", got.ObservedGeneration)
	}
	if got.Deliveries.Delivered != 9 || meta.FindStatusCondition(got.Conditions, hookv1.ConditionHealthy) == nil ||
		meta.FindStatusCondition(got.Conditions, "Audited") == nil {
		t.Errorf("counters or conditions it could not observe were changed: %+v", got)
	}
	if ready := meta.FindStatusCondition(got.Conditions, hookv1.ConditionReady); ready == nil || ready.Reason != hookv1.ReasonInternalError {
		t.Errorf("Ready = %+v, want InternalError", ready)
	}
}

// TestStatusMessagesNameNoRepositoryFile: an admin reading a condition or
// an Event has the cluster, not this repository; no message may send them
// to one of its files.
func TestStatusMessagesNameNoRepositoryFile(t *testing.T) {
	repoPath := regexp.MustCompile(`\b(config|docs|hack|test|api|controllers|internal)/|\.(ya?ml|md|go)\b`)
	oldest := exhausted("dlv_old", time.Hour)
	var messages []string
	for _, f := range []endpointFacts{
		{PolicyName: "p", SecretName: "s", Registered: true, PreviousSecretUntil: statusNow.Add(time.Hour)},
		{Problem: &conditions.Problem{Reason: hookv1.ReasonSigningSecretInvalid, Message: "bad"}},
		{Problem: &conditions.Problem{Reason: hookv1.ReasonDestinationForbidden, Message: "forbidden"}, Registered: true},
		{Problem: &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: "not ready"}, Registered: true, RegisteredPaused: true},
		{Problem: &conditions.Problem{Reason: hookv1.ReasonRetryPolicyNotReady, Message: "not ready"}, Registered: true},
		{SecretName: "s", Registered: true, Deliveries: &deliveryFacts{
			Stats: ledger.EndpointStats{ExhaustedUnresolved: 7, LastFailureAt: at(0), LastFailureReason: "HTTP 503"}, Oldest: &oldest}},
		{SecretName: "s", Registered: true, Deliveries: &deliveryFacts{
			Stats: ledger.EndpointStats{ExhaustedUnresolved: 1, LastSuccessAt: at(0), LastFailureAt: at(-time.Minute)}, Oldest: &oldest}},
	} {
		ep := &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders", Generation: 1}}
		for _, c := range webhookEndpointStatus(ep, &f, statusNow).Conditions {
			messages = append(messages, c.Message)
		}
	}
	messages = append(messages, exhaustionNote(3, &oldest))
	for _, m := range messages {
		if p := repoPath.FindString(m); p != "" {
			t.Errorf("message names a file of the repository (%q): %s", p, m)
		}
	}
}

// TestThrottledBacklogInStatus: the deliveries due and not sent, and when
// the oldest was due, in status.deliveries; none while paused, which holds
// them on purpose.
func TestThrottledBacklogInStatus(t *testing.T) {
	oldest := statusNow.Add(-7*time.Minute - 300*time.Millisecond)
	cases := []struct {
		name       string
		paused     bool
		waiting    ledger.Waiting
		want       int64
		wantOldest *metav1.Time
	}{
		{"nothing waits", false, ledger.Waiting{}, 0, nil},
		{"a backlog", false, ledger.Waiting{EndpointID: "ns/ep", Deliveries: 42, OldestDue: oldest}, 42, conditions.MetaTime(&oldest)},
		{"paused", true, ledger.Waiting{EndpointID: "ns/ep", Deliveries: 42, OldestDue: oldest}, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ep := &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: 1}}
			ep.Spec.Paused = c.paused
			facts := &endpointFacts{Registered: true, Deliveries: &deliveryFacts{Waiting: c.waiting}}
			got := webhookEndpointStatus(ep, facts, statusNow).Deliveries
			if got.Throttled != c.want || !equality.Semantic.DeepEqual(got.OldestThrottledDueTime, c.wantOldest) {
				t.Fatalf("deliveries = %d since %v, want %d since %v", got.Throttled, got.OldestThrottledDueTime, c.want, c.wantOldest)
			}
		})
	}
}
