package evidence

import (
	"strings"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// exhaustedThenDelivered is an hour of n horizon exhaustions on ep whose
// endpoint delivered again gap later.
func exhaustedThenDelivered(ep string, hoursAgo int, n int64, gap time.Duration) []ledger.OutcomeBucket {
	ex := bucket(ep, 1, hoursAgo, string(ledger.ExhaustMaxAttempts), 5, n)
	ok := bucket(ep, 1, hoursAgo, ledger.OutcomeDelivered, 1, 1)
	ok.FirstAt, ok.LastAt = ex.LastAt.Add(gap), ex.LastAt.Add(gap)
	ok.Hour = ok.FirstAt.Truncate(time.Hour)
	return []ledger.OutcomeBucket{ex, ok}
}

func join(parts ...[]ledger.OutcomeBucket) []ledger.OutcomeBucket {
	var out []ledger.OutcomeBucket
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestAdvise(t *testing.T) {
	const horizon = 6 * time.Hour
	healthy := []ledger.OutcomeBucket{
		bucket("ns/a", 1, 3, ledger.OutcomeDelivered, 1, 200),
		bucket("ns/a", 1, 3, ledger.OutcomeDelivered, 4, 2),
	}
	for _, tc := range []struct {
		name     string
		buckets  []ledger.OutcomeBucket
		previous Finding
		status   Verdict
		reason   Finding
		mentions []string
	}{
		{"no evidence", nil, InsufficientEvidence, Unknown, InsufficientEvidence, []string{"0 deliveries", "at least 100"}},
		{"too few to enter", []ledger.OutcomeBucket{bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 99)}, InsufficientEvidence,
			Unknown, InsufficientEvidence, []string{"99 deliveries"}},
		{"enough to stay (hysteresis)", []ledger.OutcomeBucket{bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 60)}, HorizonFits,
			Fits, HorizonFits, nil},
		{"below staying threshold", []ledger.OutcomeBucket{bucket("ns/a", 1, 0, ledger.OutcomeDelivered, 1, 49)}, HorizonFits,
			Unknown, InsufficientEvidence, []string{"at least 50"}},
		{"evidence older than 7 days does not count", []ledger.OutcomeBucket{bucket("ns/a", 1, 168, ledger.OutcomeDelivered, 1, 1000)}, InsufficientEvidence,
			Unknown, InsufficientEvidence, nil},
		{"policy changed mid-window: only the current generation counts",
			[]ledger.OutcomeBucket{bucket("ns/a", 0, 2, ledger.OutcomeDelivered, 1, 1000), bucket("ns/a", 1, 1, ledger.OutcomeDelivered, 1, 10)}, InsufficientEvidence,
			Unknown, InsufficientEvidence, []string{"10 deliveries"}},
		{"fits: retries up to the last recover", healthy, InsufficientEvidence, Fits, HorizonFits, []string{"202 deliveries"}},
		{"tail recovered nothing", append(append([]ledger.OutcomeBucket{}, healthy...),
			bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 8, 60)), InsufficientEvidence,
			DoesNotFit, TailRecoversNothing, []string{"attempts 5 and later recovered 0 of the 60", "attempt 4 was the last", "maxAttempts: 4"}},
		{"tail shared by endpoints of the policy", join(healthy, []ledger.OutcomeBucket{
			bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 8, 30), bucket("ns/b", 1, 2, string(ledger.ExhaustMaxAttempts), 8, 30)}), InsufficientEvidence,
			DoesNotFit, TailRecoversNothing, []string{"0 of the 60"}},
		{"small tail does not enter", join(healthy, []ledger.OutcomeBucket{bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 8, 49)}), InsufficientEvidence,
			Fits, HorizonFits, []string{"recovered 0 of 49, too few"}},
		{"small tail stays (hysteresis)", join(healthy, []ledger.OutcomeBucket{bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 8, 30)}),
			TailRecoversNothing, DoesNotFit, TailRecoversNothing, []string{"0 of the 30"}},
		{"no retry ever recovered", []ledger.OutcomeBucket{bucket("ns/a", 1, 2, ledger.OutcomeDelivered, 1, 100),
			bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 3, 50)}, InsufficientEvidence,
			DoesNotFit, TailRecoversNothing, []string{"attempts 2 and later", "no retry recovered any", "maxAttempts: 1"}},
		{"non-retryable exhaustions are not a tail", []ledger.OutcomeBucket{bucket("ns/a", 1, 2, ledger.OutcomeDelivered, 1, 100),
			bucket("ns/a", 1, 2, string(ledger.ExhaustNonRetryable), 1, 80)}, InsufficientEvidence, Fits, HorizonFits, nil},
		{"endpoint succeeded soon after giving up", join(healthy, exhaustedThenDelivered("ns/b", 20, 5, 40*time.Minute)), InsufficientEvidence,
			DoesNotFit, HorizonTooShort, []string{"5 deliveries exhausted", "within 40m", "horizon (6h)", "about 6h40m"}},
		{"success long after giving up is not 'soon'", join(healthy, exhaustedThenDelivered("ns/b", 20, 5, 4*time.Hour)), InsufficientEvidence,
			Fits, HorizonFits, nil},
		{"another endpoint's success does not count", join(healthy, exhaustedThenDelivered("ns/b", 20, 5, 40*time.Minute)[:1]), InsufficientEvidence,
			Fits, HorizonFits, nil},
		{"too few soon recoveries to enter", join(healthy, exhaustedThenDelivered("ns/b", 20, 4, 40*time.Minute)), InsufficientEvidence,
			Fits, HorizonFits, nil},
		{"few soon recoveries stay (hysteresis)", join(healthy, exhaustedThenDelivered("ns/b", 20, 2, 40*time.Minute)), HorizonTooShort,
			DoesNotFit, HorizonTooShort, []string{"2 deliveries exhausted"}},
		{"longest gap is named", join(healthy, exhaustedThenDelivered("ns/b", 20, 3, 10*time.Minute), exhaustedThenDelivered("ns/c", 40, 3, 2*time.Hour)), InsufficientEvidence,
			DoesNotFit, HorizonTooShort, []string{"6 deliveries", "within 2h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := Advise(AdviceInput{Buckets: tc.buckets, Generation: 1, Now: now, MaxAttempts: 8, Horizon: horizon, Previous: tc.previous})
			if a.Status != tc.status || a.Finding != tc.reason {
				t.Fatalf("advice = %s/%s (%s), want %s/%s", a.Status, a.Finding, a.Message, tc.status, tc.reason)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(a.Message, m) {
					t.Errorf("message %q does not mention %q", a.Message, m)
				}
			}
		})
	}
}

// TestAdviseDoesNotFlap feeds the advice its own previous reason while the
// evidence hovers around each entering threshold: the reason holds.
func TestAdviseDoesNotFlap(t *testing.T) {
	base := []ledger.OutcomeBucket{bucket("ns/a", 1, 3, ledger.OutcomeDelivered, 1, 200)}
	prev := InsufficientEvidence
	for i, tail := range []int64{50, 49, 50, 48, 51, 40} {
		b := join(base, []ledger.OutcomeBucket{bucket("ns/a", 1, 2, string(ledger.ExhaustMaxAttempts), 8, tail)})
		a := Advise(AdviceInput{Buckets: b, Generation: 1, Now: now, Horizon: time.Hour, Previous: prev})
		if a.Finding != TailRecoversNothing {
			t.Fatalf("step %d (tail %d): reason %s after %s", i, tail, a.Finding, prev)
		}
		prev = a.Finding
	}
}

func TestAdviseWithoutHorizonSkipsTooShort(t *testing.T) {
	b := join([]ledger.OutcomeBucket{bucket("ns/a", 1, 3, ledger.OutcomeDelivered, 1, 200)}, exhaustedThenDelivered("ns/b", 20, 9, time.Minute))
	if a := Advise(AdviceInput{Buckets: b, Generation: 1, Now: now}); a.Finding == HorizonTooShort {
		t.Errorf("an unknown horizon gave %s", a.Finding)
	}
}
