package webhookendpoint

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/engine"
)

// TestFilterProblem: an endpoint's filter is compiled at reconcile; every
// kind of refusal is FilterInvalid with a message that names the field and,
// for an error at one place, its position.
func TestFilterProblem(t *testing.T) {
	tests := []struct {
		filter string
		want   string // a prefix of the message; "" for no problem
	}{
		{filter: ""},
		{filter: `data.amount > 1000 && data.currency == "EUR"`},
		{filter: `has(data.amount) && type.startsWith("order.") && publisherNamespace == "shop"`},
		{filter: `data.amout > 1000 && amout`, want: "spec.filter: 1:"},
		{filter: `data.amount >`, want: "spec.filter: 1:"},
		{filter: `data.amount`, want: "spec.filter: the expression must evaluate to a bool"},
		{filter: `data.a.all(x, data.b.all(y, data.c.all(z, x == y && y == z)))`, want: "spec.filter: estimated cost"},
		{filter: strings.Repeat("true && ", 600) + "true", want: "spec.filter: the expression has"},
	}
	for _, tt := range tests {
		p := filterProblem(&hookv1.WebhookEndpointSpec{Filter: tt.filter})
		switch {
		case tt.want == "" && p != nil:
			t.Errorf("filter %.40q: problem %q, want none", tt.filter, p.Message)
		case tt.want != "" && p == nil:
			t.Errorf("filter %.40q: no problem, want %q", tt.filter, tt.want)
		case tt.want != "" && (p.Reason != hookv1.ReasonFilterInvalid || !strings.HasPrefix(p.Message, tt.want)):
			t.Errorf("filter %.40q: %s %q, want FilterInvalid %q…", tt.filter, p.Reason, p.Message, tt.want)
		}
	}
}

// TestFilterOverBudget: a filter is over budget once it exceeded its
// budget filterOverrunThreshold times since the spec changed, and stays so
// at the same generation when the engine's count is gone (a restart); a
// new generation starts afresh.
func TestFilterOverBudget(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	overruns := func(n int64) *engine.FilterOverruns {
		return &engine.FilterOverruns{Filter: "f", Count: n, Last: at, LastReason: "timeout"}
	}
	said := &metav1.Condition{Type: hookv1.ConditionReady, Status: metav1.ConditionFalse, Reason: hookv1.ReasonFilterOverBudget,
		ObservedGeneration: 4, Message: "spec.filter exceeded its evaluation budget 9 times" + readyOverBudgetSuffix}
	ready := &metav1.Condition{Type: hookv1.ConditionReady, Status: metav1.ConditionTrue, Reason: hookv1.ReasonReconciled, ObservedGeneration: 4}
	tests := []struct {
		name     string
		ready    *metav1.Condition
		gen      int64
		overruns *engine.FilterOverruns
		want     string // the message's start; "" for none
	}{
		{name: "none", ready: ready, gen: 4},
		{name: "below the threshold", ready: ready, gen: 4, overruns: overruns(filterOverrunThreshold - 1)},
		{name: "at the threshold", ready: ready, gen: 4, overruns: overruns(filterOverrunThreshold),
			want: "spec.filter exceeded its evaluation budget 3 times since the spec last changed, the last at 2026-03-01T12:00:00Z (timeout)"},
		{name: "said at this generation, count lost", ready: said, gen: 4, want: "spec.filter exceeded its evaluation budget 9 times"},
		{name: "said at an older generation", ready: said, gen: 5},
		{name: "said, fewer overruns since", ready: said, gen: 5, overruns: overruns(1)},
		{name: "no condition yet", gen: 1, overruns: overruns(filterOverrunThreshold + 1), want: "spec.filter exceeded its evaluation budget 4 times"},
	}
	for _, tt := range tests {
		p := filterOverBudget(tt.ready, tt.gen, tt.overruns)
		switch {
		case tt.want == "" && p != nil:
			t.Errorf("%s: %q, want none", tt.name, p.Message)
		case tt.want != "" && p == nil:
			t.Errorf("%s: none, want %q", tt.name, tt.want)
		case tt.want != "" && (p.Reason != hookv1.ReasonFilterOverBudget || !strings.HasPrefix(p.Message, tt.want) || strings.HasSuffix(p.Message, readyOverBudgetSuffix)):
			t.Errorf("%s: %s %q, want FilterOverBudget %q… without Ready's suffix", tt.name, p.Reason, p.Message, tt.want)
		}
	}
}

// TestOverrunEvent: a FilterOverBudget Event at the first overrun, then at
// most one per interval while the count grows; none without overruns.
func TestOverrunEvent(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := func(n int64) *engine.FilterOverruns { return &engine.FilterOverruns{Count: n} }
	var memo *overrunMemo
	steps := []struct {
		at   time.Duration
		o    *engine.FilterOverruns
		emit bool
	}{
		{0, nil, false},
		{0, o(1), true},
		{time.Second, o(5), false},
		{time.Minute, o(5), true},
		{time.Minute + time.Second, o(7), false},
		{2 * time.Minute, o(7), true},
		{3 * time.Minute, o(7), false}, // none since the last Event
		{3 * time.Minute, o(2), true},  // a new count: the spec changed
		{3 * time.Minute, nil, false},
		{3 * time.Minute, o(1), true},
	}
	for i, s := range steps {
		var emit bool
		emit, memo = overrunEvent(memo, s.o, t0.Add(s.at), time.Minute)
		if emit != s.emit {
			t.Errorf("step %d (%v, %v overruns): emit %v, want %v", i, s.at, s.o, emit, s.emit)
		}
	}
}
