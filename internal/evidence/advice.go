package evidence

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Verdict is whether the horizon fits the traffic. The controllers turn
// it into the HorizonFit condition's status; this package knows nothing of
// Kubernetes conditions.
type Verdict int

const (
	Unknown Verdict = iota
	Fits
	DoesNotFit
)

func (v Verdict) String() string { return [...]string{"Unknown", "Fits", "DoesNotFit"}[v] }

// Finding is which rule the advice rests on. The controllers map each to a
// reason of the HorizonFit condition (api/v1alpha1, the one source of
// condition reasons).
type Finding int

const (
	// InsufficientEvidence: too few deliveries settled to say. It is also
	// the Previous of a condition not set yet.
	InsufficientEvidence Finding = iota
	// HorizonFits: enough evidence, and neither rule below applies.
	HorizonFits
	// TailRecoversNothing: the last attempts of the schedule recovered none
	// of the deliveries that reached them.
	TailRecoversNothing
	// HorizonTooShort: exhausted deliveries whose endpoint succeeded again
	// soon after the policy gave up.
	HorizonTooShort
)

func (f Finding) String() string {
	return [...]string{"InsufficientEvidence", "HorizonFits", "TailRecoversNothing", "HorizonTooShort"}[f]
}

// Thresholds. Each rule has an entering and a lower staying threshold
// (hysteresis): a condition that holds keeps holding until its evidence
// falls clearly below what made it hold, so that counts hovering around one
// threshold do not make the condition flap on every resync. Evidence is 7
// days of one policy generation, so it also changes slowly by construction.
const (
	// MinSettled deliveries settled in 7 days before any advice;
	// StaySettled keeps advice once given.
	MinSettled  = 100
	StaySettled = 50
	// MinTailReached deliveries must have reached the unproductive tail
	// for TailRecoversNothing; StayTailReached keeps it.
	MinTailReached  = 50
	StayTailReached = 25
	// MinSoonRecovered horizon exhaustions followed by a success within
	// SoonFraction of the horizon for HorizonTooShort; StaySoonRecovered
	// keeps it.
	MinSoonRecovered  = 5
	StaySoonRecovered = 2
	// SoonPercent: "soon" is within this percent of the horizon.
	SoonPercent = 50
)

// horizonReasons are the exhaustions that a longer horizon could have
// avoided; NonRetryable, Gone and AckRejected are the receiver's answer.
var horizonReasons = []string{string(ledger.ExhaustMaxAttempts), string(ledger.ExhaustMaxAge), string(ledger.ExhaustAckTimeout)}

// AdviceInput is what the advice is drawn from.
type AdviceInput struct {
	// Buckets of the policy, any generation and age; only those of
	// Generation in the 7-day window count, so a policy changed mid-window
	// is judged on what its current version did.
	Buckets    []ledger.OutcomeBucket
	Generation int64
	Now        time.Time
	// MaxAttempts of the policy (0: none); Horizon its worst-case horizon
	// (0: unknown, which disables HorizonTooShort).
	MaxAttempts int
	Horizon     time.Duration
	// Previous is the finding of the condition as it stands, for the
	// hysteresis (InsufficientEvidence when none).
	Previous Finding
}

// Advice is the HorizonFit condition to set.
type Advice struct {
	Status  Verdict
	Finding Finding
	Message string
}

// Advise judges the policy's horizon from its evidence.
func Advise(in AdviceInput) Advice {
	current := Window(in.Now, Week)
	keep := func(b *ledger.OutcomeBucket) bool { return b.PolicyGeneration == in.Generation && current(b) }
	s := Summarize(in.Buckets, keep)

	minSettled := int64(MinSettled)
	if in.Previous != InsufficientEvidence {
		minSettled = StaySettled
	}
	if s.Settled < minSettled {
		return Advice{Status: Unknown, Finding: InsufficientEvidence, Message: fmt.Sprintf(
			"%d deliveries settled under this generation of the policy in the last 7 days; advice needs at least %d",
			s.Settled, minSettled)}
	}

	if in.Horizon > 0 {
		n, gap := soonRecovered(in.Buckets, keep, in.Horizon)
		need := int64(MinSoonRecovered)
		if in.Previous == HorizonTooShort {
			need = StaySoonRecovered
		}
		if n >= need {
			return Advice{Status: DoesNotFit, Finding: HorizonTooShort, Message: fmt.Sprintf(
				"%d deliveries exhausted (%s) in the last 7 days on endpoints that succeeded again within %s of giving up; "+
					"the horizon (%s) is shorter than the outages it meets: a horizon of about %s (maxAttempts or maxAge) would have recovered them",
				n, strings.Join(horizonReasons, ", "), ShortDuration(gap), ShortDuration(in.Horizon), ShortDuration(in.Horizon+gap))}
		}
	}

	k := max(s.LastRecoveringAttempt()+1, 2)
	reached := s.Reached(k)
	need := int64(MinTailReached)
	if in.Previous == TailRecoversNothing {
		need = StayTailReached
	}
	if reached >= need {
		return Advice{Status: DoesNotFit, Finding: TailRecoversNothing, Message: fmt.Sprintf(
			"attempts %d and later recovered 0 of the %d deliveries that reached them in the last 7 days%s; "+
				"the horizon is longer than this traffic needs: maxAttempts: %d would give up after attempt %d with the same deliveries recovered",
			k, reached, lastRecovering(s), k-1, k-1)}
	}
	return Advice{Status: Fits, Finding: HorizonFits, Message: fmt.Sprintf(
		"%d deliveries settled in the last 7 days: %s, and no exhausted delivery's endpoint succeeded again within %d%% of the horizon",
		s.Settled, tailSummary(s, k), SoonPercent)}
}

func lastRecovering(s Summary) string {
	if l := s.LastRecoveringAttempt(); l > 0 {
		return fmt.Sprintf(" (attempt %d was the last to recover any)", l)
	}
	return " (no retry recovered any)"
}

func tailSummary(s Summary, k int) string {
	if r := s.Reached(k); r > 0 {
		return fmt.Sprintf("attempts %d and later recovered 0 of %d, too few to judge the tail", k, r)
	}
	return fmt.Sprintf("the last attempt that recovered any was %d", k-1)
}

// soonRecovered counts the horizon exhaustions (in kept buckets) after
// which their endpoint delivered again within SoonPercent of horizon, and
// returns the longest such gap. Buckets are hourly, so the gap is measured
// from the last exhaustion of the bucket to the earliest known delivery
// after it (a delivered bucket's first settlement if later, else its last):
// an upper bound of the true gap, never an underestimate.
func soonRecovered(buckets []ledger.OutcomeBucket, keep func(*ledger.OutcomeBucket) bool, horizon time.Duration) (n int64, gap time.Duration) {
	delivered := map[string][]*ledger.OutcomeBucket{}
	for i := range buckets {
		b := &buckets[i]
		if b.Outcome == ledger.OutcomeDelivered && b.Count > 0 {
			delivered[b.EndpointID] = append(delivered[b.EndpointID], b)
		}
	}
	soon := horizon * SoonPercent / 100
	for i := range buckets {
		b := &buckets[i]
		if !keep(b) || !slices.Contains(horizonReasons, b.Outcome) {
			continue
		}
		next, ok := nextSuccess(delivered[b.EndpointID], b.LastAt)
		if !ok {
			continue
		}
		if g := next.Sub(b.LastAt); g <= soon {
			n += b.Count
			gap = max(gap, g)
		}
	}
	return n, gap
}

// nextSuccess is the earliest delivery known to follow t.
func nextSuccess(delivered []*ledger.OutcomeBucket, t time.Time) (time.Time, bool) {
	var best time.Time
	for _, d := range delivered {
		var at time.Time
		switch {
		case d.FirstAt.After(t):
			at = d.FirstAt
		case d.LastAt.After(t):
			at = d.LastAt
		default:
			continue
		}
		if best.IsZero() || at.Before(best) {
			best = at
		}
	}
	return best, !best.IsZero()
}
