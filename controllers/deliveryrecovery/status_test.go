package deliveryrecovery

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestAutoAction(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ed   ledger.ExhaustedDelivery
		want ledger.RecoveryAction
	}{
		{"a replayable event is retried", ledger.ExhaustedDelivery{ReplayFrom: now.Add(-time.Hour)}, ledger.RecoveryRetry},
		{"scrubbed secrets need a reissue", ledger.ExhaustedDelivery{SecretsScrubbed: true, ReplayFrom: now}, ledger.RecoveryReissue},
		{"a pruned payload needs a reissue", ledger.ExhaustedDelivery{PayloadPruned: true, ReplayFrom: now}, ledger.RecoveryReissue},
		{"past the replay window needs a reissue", ledger.ExhaustedDelivery{ReplayFrom: now.Add(-73 * time.Hour)}, ledger.RecoveryReissue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := AutoAction(&tt.ed, 72*time.Hour, now); got != tt.want {
				t.Errorf("autoAction = %s, want %s", got, tt.want)
			}
			if got := modeAction(hookv1.RecoveryModeDismiss, &tt.ed, 72*time.Hour, now); got != ledger.RecoveryDismiss {
				t.Errorf("Dismiss mode gave %s", got)
			}
		})
	}
}

func TestRecoveryStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	created := metav1.NewTime(now.Add(-time.Minute))
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Generation: 3, CreationTimestamp: created, UID: "uid-now"}}
	item := func(outcome ledger.RecoveryOutcome, reason string, newState ledger.DeliveryState) ledger.RecoveryItem {
		it := ledger.RecoveryItem{DeliveryID: "dlv_" + string(outcome) + string(newState), EventID: "evt_1", Outcome: outcome, Reason: reason, NewDeliveryState: newState}
		if newState != "" {
			it.NewDeliveryID = "dlv_new"
		}
		return it
	}
	started := &ledger.RecoveryOperation{Key: "drec:shop/r", SpecHash: "h", ObjectUID: "uid-now", StartedAt: now.Add(-30 * time.Second)}
	earlier := &ledger.RecoveryOperation{Key: "drec:shop/r", SpecHash: "h", ObjectUID: "uid-earlier", StartedAt: now.Add(-48 * time.Hour)}
	spent := &budgetFacts{Budget: ledger.RetryBudget{RatioPercent: 10, MinPerMinute: 100},
		Deferrals: ledger.DeferralStreak{Count: 900, First: now.Add(-9 * time.Minute), Last: now.Add(-time.Second)}}
	tests := []struct {
		name         string
		progress     recoveryProgress
		wantState    hookv1.RecoveryState
		wantReason   string // of Complete, or of Failed when failed
		wantRR       metav1.ConditionStatus
		wantCounts   hookv1.RecoveryCounts
		wantMessage  string
		wantEarliest bool // startTime is the earlier operation's
	}{
		{name: "an endpoint not there yet makes it wait",
			progress:  recoveryProgress{Block: &block{Reason: hookv1.ReasonWaitingForEndpoint, Message: "waiting for WebhookEndpoint \"orders\""}},
			wantState: hookv1.RecoveryWaiting, wantReason: hookv1.ReasonWaitingForEndpoint, wantRR: metav1.ConditionFalse, wantMessage: "waiting for"},
		{name: "a spec conflict fails it",
			progress:  recoveryProgress{Block: &block{Permanent: true, Reason: hookv1.ReasonSpecConflict, Message: "another spec"}, Operation: earlier},
			wantState: hookv1.RecoveryFailed, wantReason: hookv1.ReasonSpecConflict, wantRR: metav1.ConditionFalse, wantMessage: "another spec", wantEarliest: true},
		{name: "nothing matched completes at once", progress: recoveryProgress{Operation: started},
			wantState: hookv1.RecoveryComplete, wantReason: hookv1.ReasonNothingMatched, wantRR: metav1.ConditionFalse},
		{name: "a retry still in flight keeps it running",
			progress:  recoveryProgress{Operation: started, Items: []ledger.RecoveryItem{item(ledger.OutcomeRetried, "", ledger.StateScheduled)}},
			wantState: hookv1.RecoveryRunning, wantReason: hookv1.ReasonRunning, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Retried: 1}},
		{name: "delivered, failed again, dismissed and refused all settle",
			progress: recoveryProgress{Operation: started, Items: []ledger.RecoveryItem{
				item(ledger.OutcomeRetried, "", ledger.StateDelivered), item(ledger.OutcomeRetried, "", ledger.StateExhausted),
				item(ledger.OutcomeDismissed, "", ""), item(ledger.OutcomeRefused, ledger.RefusedReissueRequired, ""),
			}},
			wantState: hookv1.RecoveryComplete, wantReason: hookv1.ReasonAllItemsSettled, wantRR: metav1.ConditionTrue,
			wantCounts: hookv1.RecoveryCounts{Matched: 4, Retried: 2, Dismissed: 1, Refused: 1, Delivered: 1, FailedAgain: 1}},
		{name: "a reissue waits for the producer",
			progress:  recoveryProgress{Operation: started, Items: []ledger.RecoveryItem{item(ledger.OutcomeAwaitingReissue, "", "")}},
			wantState: hookv1.RecoveryRunning, wantReason: hookv1.ReasonRunning, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, AwaitingReissue: 1}},
		{name: "a delivered replacement completes a reissue",
			progress:  recoveryProgress{Operation: started, Items: []ledger.RecoveryItem{item(ledger.OutcomeReissued, "", ledger.StateDelivered)}},
			wantState: hookv1.RecoveryComplete, wantReason: hookv1.ReasonAllItemsSettled, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Reissued: 1, Delivered: 1}},
		{name: "re-sends held back by the retry budget say so",
			progress: recoveryProgress{Operation: started, Budget: spent, Items: []ledger.RecoveryItem{
				item(ledger.OutcomeRetried, "", ledger.StateDelivered), item(ledger.OutcomeRetried, "", ledger.StateScheduled),
				item(ledger.OutcomeReissued, "", ledger.StateScheduled),
			}},
			wantState: hookv1.RecoveryRunning, wantReason: hookv1.ReasonBudgetExhausted, wantRR: metav1.ConditionFalse,
			wantCounts:  hookv1.RecoveryCounts{Matched: 3, Retried: 2, Reissued: 1, Delivered: 1},
			wantMessage: "2 re-sends wait for the endpoint's retry budget"},
		{name: "a budget that deferred nothing lately holds nothing back",
			progress: recoveryProgress{Operation: started, Budget: &budgetFacts{Budget: spent.Budget,
				Deferrals: ledger.DeferralStreak{Count: 5, First: now.Add(-time.Hour), Last: now.Add(-ledger.DeferralWindow - time.Second)}},
				Items: []ledger.RecoveryItem{item(ledger.OutcomeRetried, "", ledger.StateScheduled)}},
			wantState: hookv1.RecoveryRunning, wantReason: hookv1.ReasonRunning, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Retried: 1}},
		{name: "a complete recovery is complete whatever the budget",
			progress:  recoveryProgress{Operation: started, Budget: spent, Items: []ledger.RecoveryItem{item(ledger.OutcomeRetried, "", ledger.StateDelivered)}},
			wantState: hookv1.RecoveryComplete, wantReason: hookv1.ReasonAllItemsSettled, wantRR: metav1.ConditionFalse,
			wantCounts: hookv1.RecoveryCounts{Matched: 1, Retried: 1, Delivered: 1}},
		{name: "applied again under its name, it reports the earlier outcome and says so",
			progress:  recoveryProgress{Operation: earlier, Items: []ledger.RecoveryItem{item(ledger.OutcomeRetried, "", ledger.StateDelivered)}},
			wantState: hookv1.RecoveryComplete, wantReason: hookv1.ReasonAllItemsSettled, wantRR: metav1.ConditionFalse,
			wantCounts:  hookv1.RecoveryCounts{Matched: 1, Retried: 1, Delivered: 1},
			wantMessage: "under an earlier DeliveryRecovery of this name and does not act again", wantEarliest: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := recoveryStatus(rec, &tt.progress, now)
			if st.State != tt.wantState {
				t.Fatalf("state = %s, want %s", st.State, tt.wantState)
			}
			checkRecoveryConditions(t, &st, rec.Generation)
			reasonOf := hookv1.ConditionComplete
			if tt.wantState == hookv1.RecoveryFailed {
				reasonOf = hookv1.ConditionFailed
			}
			c := meta.FindStatusCondition(st.Conditions, reasonOf)
			if c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantMessage) {
				t.Fatalf("%s = %+v, want reason %s and a message with %q", reasonOf, c, tt.wantReason, tt.wantMessage)
			}
			if rr := meta.FindStatusCondition(st.Conditions, hookv1.ConditionReissueRequired); rr == nil || rr.Status != tt.wantRR {
				t.Fatalf("ReissueRequired = %+v, want %s", rr, tt.wantRR)
			}
			if st.Counts != tt.wantCounts {
				t.Fatalf("counts = %+v, want %+v", st.Counts, tt.wantCounts)
			}
			if len(st.Items) != len(tt.progress.Items) {
				t.Fatalf("%d items listed, want %d", len(st.Items), len(tt.progress.Items))
			}
			if op := tt.progress.Operation; op != nil && (st.StartTime == nil || !st.StartTime.Time.Equal(op.StartedAt)) {
				t.Fatalf("startTime = %v, want the operation's first start %v", st.StartTime, op.StartedAt)
			}
			if tt.wantEarliest != (st.StartTime != nil && st.StartTime.Before(&created)) {
				t.Fatalf("startTime %v before creation %v: want %v", st.StartTime, created, tt.wantEarliest)
			}
		})
	}
}

// checkRecoveryConditions asserts what holds in every state: the status
// describes the generation, and state, Complete, Failed and
// completionTime agree (the table in setRecoveryConditions).
func checkRecoveryConditions(t *testing.T, st *hookv1.DeliveryRecoveryStatus, generation int64) {
	t.Helper()
	if st.ObservedGeneration != generation {
		t.Errorf("observedGeneration = %d, want %d", st.ObservedGeneration, generation)
	}
	for _, c := range st.Conditions {
		if c.ObservedGeneration != generation {
			t.Errorf("%s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, generation)
		}
	}
	complete := meta.FindStatusCondition(st.Conditions, hookv1.ConditionComplete)
	failed := meta.FindStatusCondition(st.Conditions, hookv1.ConditionFailed)
	if complete == nil || failed == nil {
		t.Fatalf("Complete and Failed must both be set in state %s: %+v", st.State, st.Conditions)
	}
	wantComplete, wantFailed := metav1.ConditionFalse, metav1.ConditionFalse
	switch st.State {
	case hookv1.RecoveryComplete:
		wantComplete = metav1.ConditionTrue
	case hookv1.RecoveryFailed:
		wantFailed = metav1.ConditionTrue
		if complete.Reason != hookv1.ReasonFailed {
			t.Errorf("a failed recovery's Complete reason is %s, want %s", complete.Reason, hookv1.ReasonFailed)
		}
	case hookv1.RecoveryWaiting, hookv1.RecoveryRunning:
	default:
		t.Fatalf("unknown state %q", st.State)
	}
	if complete.Status != wantComplete || failed.Status != wantFailed {
		t.Errorf("state %s with Complete=%s (%s) and Failed=%s (%s)", st.State, complete.Status, complete.Reason, failed.Status, failed.Reason)
	}
	if failed.Status == metav1.ConditionFalse && failed.Reason != hookv1.ReasonNotFailed {
		t.Errorf("Failed=False with reason %s", failed.Reason)
	}
	terminal := st.State == hookv1.RecoveryComplete || st.State == hookv1.RecoveryFailed
	if terminal != (st.CompletionTime != nil) {
		t.Errorf("state %s with completionTime %v", st.State, st.CompletionTime)
	}
	for _, c := range st.Conditions {
		if c.Reason == "" || c.Message == "" {
			t.Errorf("%s has no reason or message: %+v", c.Type, c)
		}
	}
}

// TestRecoveryConditionsEveryState drives every state from every other:
// whatever a status held before (a stale Running beside a new failure),
// the conditions agree with the new state.
func TestRecoveryConditionsEveryState(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	states := []hookv1.RecoveryState{hookv1.RecoveryWaiting, hookv1.RecoveryRunning, hookv1.RecoveryComplete, hookv1.RecoveryFailed}
	reasons := map[hookv1.RecoveryState]string{hookv1.RecoveryWaiting: hookv1.ReasonWaitingForEndpoint, hookv1.RecoveryRunning: hookv1.ReasonRunning,
		hookv1.RecoveryComplete: hookv1.ReasonAllItemsSettled, hookv1.RecoveryFailed: hookv1.ReasonSpecConflict}
	for _, from := range states {
		for _, to := range states {
			if from == hookv1.RecoveryComplete || from == hookv1.RecoveryFailed {
				if to != from {
					continue // terminal: the controller no longer writes it
				}
			}
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				var st hookv1.DeliveryRecoveryStatus
				setRecoveryConditions(&st, 1, from, reasons[from], "before", now.Add(-time.Minute))
				st.ObservedGeneration = 2
				setRecoveryConditions(&st, 2, to, reasons[to], "after", now)
				if st.State != to {
					t.Fatalf("state = %s, want %s", st.State, to)
				}
				checkRecoveryConditions(t, &st, 2)
			})
		}
	}
}

func TestRecoveryBlocked(t *testing.T) {
	deleting := metav1.Now()
	notReady := &hookv1.WebhookEndpoint{Status: hookv1.WebhookEndpointStatus{Conditions: []metav1.Condition{{
		Type: hookv1.ConditionReady, Status: metav1.ConditionFalse, Reason: "RetryPolicyNotReady", Message: `RetryPolicy "fast" is not Ready`}}}}
	op := &ledger.RecoveryOperation{Key: "drec:shop/r", SpecHash: "h1", StartedAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	tests := []struct {
		name          string
		facts         startFacts
		wantBlocked   bool
		wantPermanent bool
		wantReason    string
		wantMessage   string
	}{
		{name: "the endpoint does not exist yet: wait",
			facts:       startFacts{EndpointName: "orders", SpecHash: "h1"},
			wantBlocked: true, wantReason: hookv1.ReasonWaitingForEndpoint, wantMessage: `"orders": it does not exist`},
		{name: "the engine has it but the object is gone: wait for the object",
			facts:       startFacts{EndpointName: "orders", Registered: true, SpecHash: "h1"},
			wantBlocked: true, wantReason: hookv1.ReasonWaitingForEndpoint, wantMessage: "does not exist"},
		{name: "the endpoint is being deleted: wait",
			facts:       startFacts{EndpointName: "orders", Endpoint: &hookv1.WebhookEndpoint{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &deleting}}, Registered: true, SpecHash: "h1"},
			wantBlocked: true, wantReason: hookv1.ReasonWaitingForEndpoint, wantMessage: "being deleted"},
		{name: "the endpoint exists, not reconciled yet: wait",
			facts:       startFacts{EndpointName: "orders", Endpoint: &hookv1.WebhookEndpoint{}, SpecHash: "h1"},
			wantBlocked: true, wantReason: hookv1.ReasonWaitingForEndpoint, wantMessage: "not been reconciled yet"},
		{name: "the endpoint is not Ready and not registered: wait, saying why",
			facts:       startFacts{EndpointName: "orders", Endpoint: notReady, SpecHash: "h1"},
			wantBlocked: true, wantReason: hookv1.ReasonWaitingForEndpoint, wantMessage: `not Ready (RetryPolicyNotReady: RetryPolicy "fast" is not Ready)`},
		{name: "a registered endpoint that is not Ready does not block (Dismiss works, retries wait in the engine)",
			facts: startFacts{EndpointName: "orders", Endpoint: notReady, Registered: true, SpecHash: "h1"}},
		{name: "registered, not started yet: run",
			facts: startFacts{EndpointName: "orders", Endpoint: &hookv1.WebhookEndpoint{}, Registered: true, SpecHash: "h1"}},
		{name: "started with this spec (the same object, or the same manifest applied again): run",
			facts: startFacts{EndpointName: "orders", Endpoint: &hookv1.WebhookEndpoint{}, Registered: true, SpecHash: "h1", Operation: op}},
		{name: "this name already ran with another spec: fail for good",
			facts:       startFacts{EndpointName: "orders", Endpoint: &hookv1.WebhookEndpoint{}, Registered: true, SpecHash: "h2", Operation: op},
			wantBlocked: true, wantPermanent: true, wantReason: hookv1.ReasonSpecConflict, wantMessage: "started 2026-11-01T00:00:00Z) with another spec"},
		{name: "another spec wins over a missing endpoint: what cannot change fails at once",
			facts:       startFacts{EndpointName: "orders", SpecHash: "h2", Operation: op},
			wantBlocked: true, wantPermanent: true, wantReason: hookv1.ReasonSpecConflict, wantMessage: "with another spec"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := recoveryBlocked(&tt.facts)
			if (b != nil) != tt.wantBlocked {
				t.Fatalf("blocked = %+v, want blocked %v", b, tt.wantBlocked)
			}
			if b == nil {
				return
			}
			if b.Permanent != tt.wantPermanent || b.Reason != tt.wantReason || !strings.Contains(b.Message, tt.wantMessage) {
				t.Fatalf("block = %+v, want permanent %v, reason %s, message with %q", b, tt.wantPermanent, tt.wantReason, tt.wantMessage)
			}
		})
	}
}

// TestRecoverySpecHash: the hash changes with every field of the spec that
// says what to do, and with none of the rest (ttlSecondsAfterFinished, the
// order of set-valued lists). Mutations are on the JSON, the API's own
// shape; a spec field this test does not name fails it.
func TestRecoverySpecHash(t *testing.T) {
	base := `{"endpointRef":{"name":"orders"},"action":"Retry","limit":100,"ttlSecondsAfterFinished":60,
		"selector":{"deliveryIDs":["dlv_1","dlv_2"],"eventIDs":["evt_1","evt_2"],"eventTypes":["order.created","order.paid"],
		"exhaustedAfter":"2026-11-01T00:00:00Z","exhaustedBefore":"2026-11-02T00:00:00Z"}}`
	hashOf := func(t *testing.T, mutate func(spec, sel map[string]any)) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal([]byte(base), &m); err != nil {
			t.Fatal(err)
		}
		mutate(m, m["selector"].(map[string]any))
		b, _ := json.Marshal(m)
		var spec hookv1.DeliveryRecoverySpec
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		h, err := recoverySpecHash(&spec)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	want := hashOf(t, func(_, _ map[string]any) {})
	same := map[string]func(spec, sel map[string]any){
		"ttlSecondsAfterFinished": func(spec, _ map[string]any) { spec["ttlSecondsAfterFinished"] = 0 },
		"no ttl":                  func(spec, _ map[string]any) { delete(spec, "ttlSecondsAfterFinished") },
		"selector.deliveryIDs":    func(_, sel map[string]any) { sel["deliveryIDs"] = []any{"dlv_2", "dlv_1"} },
		"selector.eventIDs":       func(_, sel map[string]any) { sel["eventIDs"] = []any{"evt_2", "evt_1"} },
		"selector.eventTypes":     func(_, sel map[string]any) { sel["eventTypes"] = []any{"order.paid", "order.created"} },
	}
	differ := map[string]func(spec, sel map[string]any){
		"endpointRef":              func(spec, _ map[string]any) { spec["endpointRef"] = map[string]any{"name": "billing"} },
		"action":                   func(spec, _ map[string]any) { spec["action"] = "Dismiss" },
		"limit":                    func(spec, _ map[string]any) { spec["limit"] = 5 },
		"selector":                 func(spec, _ map[string]any) { delete(spec, "selector") },
		"selector.deliveryIDs":     func(_, sel map[string]any) { sel["deliveryIDs"] = []any{"dlv_1"} },
		"selector.eventIDs":        func(_, sel map[string]any) { sel["eventIDs"] = []any{"evt_3"} },
		"selector.eventTypes":      func(_, sel map[string]any) { sel["eventTypes"] = []any{"order.*"} },
		"selector.exhaustedAfter":  func(_, sel map[string]any) { sel["exhaustedAfter"] = "2026-10-01T00:00:00Z" },
		"selector.exhaustedBefore": func(_, sel map[string]any) { delete(sel, "exhaustedBefore") },
		// A replay's fields: TestReplaySpecHash.
		"replay": func(spec, _ map[string]any) {
			spec["replay"] = map[string]any{"since": "2026-11-01T00:00:00Z", "eventTypes": []any{"order.*"}}
		},
	}
	for name, mutate := range same {
		if got := hashOf(t, mutate); got != want {
			t.Errorf("changing %s changed the identity of the operation", name)
		}
	}
	for name, mutate := range differ {
		if got := hashOf(t, mutate); got == want {
			t.Errorf("changing %s kept the identity of the operation", name)
		}
	}
	// Every field of the spec and the selector is named above.
	for _, typ := range []reflect.Type{reflect.TypeFor[hookv1.DeliveryRecoverySpec](), reflect.TypeFor[hookv1.DeliverySelector]()} {
		prefix := ""
		if typ.Name() == "DeliverySelector" {
			prefix = "selector."
		}
		for f := range typ.Fields() {
			name := prefix + strings.Split(f.Tag.Get("json"), ",")[0]
			if _, ok := differ[name]; !ok && same[name] == nil {
				t.Errorf("spec field %s is not covered: decide whether it is part of the operation's identity", name)
			}
		}
	}
}

// TestRefusalsMapEveryLedgerReason: every refusal the engine can return
// reads in the status as one of the API's documented Refused* reasons, with
// a message; an item that was not refused has none.
func TestRefusalsMapEveryLedgerReason(t *testing.T) {
	tests := []struct{ ledgerReason, want string }{
		{ledger.RefusedReissueRequired, hookv1.RefusedReissueRequired},
		{ledger.RefusedReplayWindowExceeded, hookv1.RefusedReplayWindowExceeded},
		{ledger.RefusedPayloadExpired, hookv1.RefusedPayloadExpired},
		{ledger.RefusedNoReissueHandler, hookv1.RefusedNoReissueHandler},
		{ledger.RefusedAlreadyResolved, hookv1.RefusedAlreadyResolved},
		{ledger.SkippedAlreadyPending, hookv1.SkippedAlreadyPending},
		{ledger.RefusedNotReplayable, hookv1.RefusedNotReplayable},
		{ledger.RefusedExpired, hookv1.RefusedExpired},
		{"", ""},
	}
	for _, tt := range tests {
		got := refusalOf(tt.ledgerReason)
		if got.Reason != tt.want {
			t.Errorf("refusalOf(%q).Reason = %q, want %q", tt.ledgerReason, got.Reason, tt.want)
		}
		if (got.Message == "") != (tt.want == "") {
			t.Errorf("refusalOf(%q).Message = %q", tt.ledgerReason, got.Message)
		}
	}
	if len(refusals) != len(tests)-1 {
		t.Errorf("refusals maps %d ledger reasons, the table %d", len(refusals), len(tests)-1)
	}
}

// TestUndecodableRecoveryStatus: a recovery whose spec did not decode fails
// with InvalidSpec naming the field, without starting, and the status
// describes its generation.
func TestUndecodableRecoveryStatus(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	rec := &hookv1.DeliveryRecovery{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	rec.Undecodable = []string{`spec.selector.exhaustedAfter: parsing time "\"2024-01-01t00:00:00z\"" as "\"2006-01-02T15:04:05Z07:00\""`}
	st := undecodableRecoveryStatus(rec, now)
	checkRecoveryConditions(t, &st, 3)
	if st.State != hookv1.RecoveryFailed || st.StartTime != nil {
		t.Fatalf("state %s, startTime %v: want Failed and never started", st.State, st.StartTime)
	}
	failed := meta.FindStatusCondition(st.Conditions, hookv1.ConditionFailed)
	if failed.Reason != hookv1.ReasonInvalidSpec || !strings.Contains(failed.Message, "spec.selector.exhaustedAfter") ||
		strings.Contains(failed.Message, "2024-01-01t") {
		t.Errorf("Failed = %s: %q; want InvalidSpec naming the field, not its value", failed.Reason, failed.Message)
	}
	rec.Status = st
	if again := undecodableRecoveryStatus(rec, now.Add(time.Hour)); !reflect.DeepEqual(again, st) {
		t.Errorf("a later reconcile changes the status: %+v", again)
	}
}

// TestBudgetWait: which items wait, and when the retry budget is why.
func TestBudgetWait(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	active := ledger.DeferralStreak{Count: 42, First: now.Add(-5 * time.Minute), Last: now.Add(-30 * time.Second)}
	items := []ledger.RecoveryItem{
		{Outcome: ledger.OutcomeRetried, NewDeliveryID: "dlv_1", NewDeliveryState: ledger.StateScheduled},
		{Outcome: ledger.OutcomeReissued, NewDeliveryID: "dlv_2", NewDeliveryState: ledger.StateScheduled},
		{Outcome: ledger.OutcomeRetried, NewDeliveryID: "dlv_3", NewDeliveryState: ledger.StateInFlight},  // being sent
		{Outcome: ledger.OutcomeRetried, NewDeliveryID: "dlv_4", NewDeliveryState: ledger.StateDelivered}, // settled
		{Outcome: ledger.OutcomeAwaitingReissue, NewEventID: "evt_5"},                                     // waits for the producer
		{Outcome: ledger.OutcomeDismissed},
	}
	if got := waitingResends(items); got != 2 {
		t.Fatalf("waitingResends = %d, want 2", got)
	}
	tests := []struct {
		name    string
		facts   *budgetFacts
		waiting int
		want    []string // in the message; nil: not the budget
	}{
		{"no budget read", nil, 2, nil},
		{"nothing waits", &budgetFacts{Budget: ledger.RetryBudget{MinPerMinute: 10}, Deferrals: active}, 0, nil},
		{"no deferral lately", &budgetFacts{Budget: ledger.RetryBudget{MinPerMinute: 10}}, 2, nil},
		{"deferring", &budgetFacts{Budget: ledger.RetryBudget{RatioPercent: 20, MinPerMinute: 10}, Deferrals: active}, 2,
			[]string{"2 re-sends wait", "10 retries per minute plus 20% of the minute's first attempts", "deferred 42 retries and re-sends since 2026-11-29T11:55:00Z", "none is dropped"}},
		{"without a floor", &budgetFacts{Budget: ledger.RetryBudget{RatioPercent: 20}, Deferrals: active}, 1,
			[]string{"1 re-sends wait", "with minRetriesPerMinute 0 nothing is re-sent in a minute without first attempts"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, ok := budgetWait(tt.facts, tt.waiting, now)
			if ok != (tt.want != nil) {
				t.Fatalf("budgetWait = %q, %t; want the budget named: %t", msg, ok, tt.want != nil)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
		})
	}
}

func TestKstatusRecoveryConditions(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, c := range []struct {
		state                   hookv1.RecoveryState
		reconciling, stalled    bool
		wantReason, wantMessage string
	}{
		{hookv1.RecoveryWaiting, true, false, hookv1.ReasonWaitingForEndpoint, "waiting"},
		{hookv1.RecoveryRunning, true, false, hookv1.ReasonRunning, "running"},
		{hookv1.RecoveryComplete, false, false, hookv1.ReasonAllItemsSettled, "settled"},
		{hookv1.RecoveryFailed, false, true, hookv1.ReasonSpecConflict, "conflict"},
	} {
		st := &hookv1.DeliveryRecoveryStatus{}
		// Failed first: a Stalled or Reconciling left behind must go.
		setRecoveryConditions(st, 2, hookv1.RecoveryFailed, hookv1.ReasonSpecConflict, "before", now)
		setRecoveryConditions(st, 2, hookv1.RecoveryRunning, hookv1.ReasonRunning, "before", now)
		setRecoveryConditions(st, 2, c.state, c.wantReason, c.wantMessage, now)
		r := meta.FindStatusCondition(st.Conditions, hookv1.ConditionReconciling)
		s := meta.FindStatusCondition(st.Conditions, hookv1.ConditionStalled)
		if (r != nil) != c.reconciling || (s != nil) != c.stalled {
			t.Errorf("%s: Reconciling %+v, Stalled %+v; want Reconciling %v, Stalled %v", c.state, r, s, c.reconciling, c.stalled)
			continue
		}
		for _, got := range []*metav1.Condition{r, s} {
			if got != nil && (got.Status != metav1.ConditionTrue || got.Reason != c.wantReason || got.Message != c.wantMessage) {
				t.Errorf("%s: %+v, want True %s %q", c.state, got, c.wantReason, c.wantMessage)
			}
		}
	}
}
