package webhookendpoint

import (
	"time"

	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// When an endpoint's status is refreshed. What its deliveries change comes
// from the activity poller (activity.go) and the engine's
// notices; what changes with time alone, no counter moving, is found here,
// so that the reconcile asks to come back exactly then (timeDrivenRefresh):
//
//   - a rotation's previous signing secret expires (the engine must drop
//     it, and Ready's message names it);
//   - a streak of retries deferred by the retry budget ends
//     (RetryBudgetLimited turns False DeferralWindow after the last);
//   - an hour bucket of outcome evidence leaves the last 24 hours or the
//     last 7 days (status.evidence);
//   - an exhausted delivery of status.recentExhausted can no longer be
//     retried (its event's validUntil, or the replay window from its
//     first attempt; its recovery becomes Reissue);
//   - a growing count of exhausted deliveries whose DeliveriesExhausted
//     Event the interval held back is due to be announced.
//
// An endpoint waiting for its signing Secret looks again after
// waitingRetry. Everything else is caught by the safety resync (between
// one and two ResyncPeriods): what the ledger changes without moving a
// counter or a time we know (the sweep that scrubs an event's secrets or
// prunes its payload, which turns a recovery to Reissue), and a host whose
// DNS answer changes to a forbidden address (which the engine's sender
// refuses at dial time regardless).

// defaultResyncPeriod is the safety resync: every endpoint is reconciled
// again between one and two periods after its last reconcile.
const defaultResyncPeriod = time.Hour

// timeDrivenRefresh is the earliest instant after obs.Now at which the
// status computed from obs and f would change with nothing but time;
// zero when none. memo is the exhaustion memo the reconcile keeps, and
// interval the least time between two DeliveriesExhausted Events.
func timeDrivenRefresh(obs *endpointObservation, f *endpointFacts, memo *exhaustionMemo, interval time.Duration) time.Time {
	now := obs.Now
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !f.PreviousSecretUntil.IsZero() {
		next = f.PreviousSecretUntil // even when past: the engine has yet to drop it
	}
	if d := obs.Deferrals; d != nil && d.Active(now) {
		consider(d.Last.Add(ledger.DeferralWindow))
	}
	if obs.EvidenceRead {
		for i := range obs.Evidence {
			for _, t := range retrypolicy.BucketLeaves(obs.Evidence[i].Hour) {
				consider(t)
			}
		}
	}
	if d := f.Deliveries; d != nil {
		for i := range d.Recent {
			if at, ok := retryEnds(&d.Recent[i], d.ReplayWindow, now); ok {
				consider(at)
			}
		}
		if memo != nil && d.Stats.ExhaustedUnresolved > memo.Count {
			consider(memo.At.Add(interval))
		}
	}
	return next
}

// retryEnds is when an exhausted delivery that a recovery would retry at
// now becomes one it can only reissue, by time alone (the rule of
// ledger.ExhaustedDelivery.AutoAction); ok is false when it is not retried
// now or no time ends it.
func retryEnds(x *ledger.ExhaustedDelivery, replayWindow time.Duration, now time.Time) (time.Time, bool) {
	if x.AutoAction(replayWindow, now) != ledger.RecoveryRetry {
		return time.Time{}, false
	}
	var end time.Time
	if x.ValidUntil != nil {
		end = *x.ValidUntil
	}
	window := replayWindow
	if x.OverrideReplayWindow > 0 {
		window = x.OverrideReplayWindow
	}
	if window > 0 {
		// AutoAction reissues once now is after ReplayFrom+window.
		if w := x.ReplayFrom.Add(window).Add(time.Nanosecond); end.IsZero() || w.Before(end) {
			end = w
		}
	}
	return end, !end.IsZero()
}

// refreshAfter is the reconcile's RequeueAfter: the safety resync (the
// jittered period the caller drew), sooner while the endpoint waits for
// its signing Secret, or a second after the status changes with time
// (at, from timeDrivenRefresh; zero when never).
func refreshAfter(safety time.Duration, waiting bool, at, now time.Time) time.Duration {
	after := safety
	if waiting {
		after = min(after, waitingRetry)
	}
	if !at.IsZero() {
		after = min(after, max(at.Sub(now), 0)+time.Second)
	}
	return after
}
