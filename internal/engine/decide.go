package engine

import (
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/truncate"
)

// outcome is what a finished attempt means for its delivery.
type outcome struct {
	next ledger.Next
	// failure describes a failed attempt for the ledger and the status
	// ("HTTP 503", "timeout after 10s", ...); empty on success.
	failure string
}

// decide turns one attempt's result into the delivery's next state. It is
// pure: the endpoint, the policy in force (pol: the event's PolicyFor the
// endpoint's, so a type's policy replaces the endpoint's backoff, horizon
// and retried classes), the delivery as it was before the attempt, the
// result, the attempt's start time and the jitter source are all inputs.
//
//   - 2xx completes the delivery, or (Callback mode) waits for an
//     acknowledgement until now + the acknowledgement timeout;
//   - 410 sends the delivery back to wait behind its endpoint's breaker,
//     which the caller opens (Gone); without a breaker it exhausts with
//     Gone. A failure the policy does not retry exhausts with NonRetryable;
//   - anything else is retried on the policy's backoff (a Retry-After on
//     429/503 lengthens the delay up to the policy's cap) until the horizon,
//     then exhausts with MaxAttempts or MaxAge.
func decide(ep *ledger.Endpoint, pol *ledger.Policy, d *ledger.Delivery, res *dispatch.Result, started time.Time, now time.Time, rnd func() float64) outcome {
	switch dispatch.Classify(*res, pol.RetryOn) {
	case dispatch.Success:
		if ep.AckMode == ledger.AckCallback {
			return outcome{next: ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: now.Add(ackTimeout(ep))}}
		}
		return outcome{next: ledger.Next{State: ledger.StateDelivered}}
	case dispatch.Gone:
		if pol.BreakerPolicyOrDefault().Disabled {
			return exhaust(ledger.ExhaustGone, res)
		}
		// 410 is about the URL: the breaker opens (Gone) and the delivery
		// waits behind it, first in line for a probe (docs/adr/0033).
		return outcome{next: ledger.Next{State: ledger.StateScheduled, DueAt: now}, failure: describe(res)}
	case dispatch.NonRetryable:
		return exhaust(ledger.ExhaustNonRetryable, res)
	}

	first := started
	if d.FirstAttemptAt != nil {
		first = *d.FirstAttemptAt
	}
	dec := pol.Backoff.Next(backoff.Input{
		Attempt:        d.Attempts + 1,
		FirstAttemptAt: first,
		Now:            now,
		RetryAfter:     res.RetryAfter,
		Rand:           rnd,
	})
	if !dec.Retry {
		return exhaust(ledger.ExhaustReason(dec.Reason), res)
	}
	return outcome{next: ledger.Next{State: ledger.StateScheduled, DueAt: dec.At}, failure: describe(res)}
}

func exhaust(reason ledger.ExhaustReason, res *dispatch.Result) outcome {
	return outcome{next: ledger.Next{State: ledger.StateExhausted, Reason: reason}, failure: describe(res)}
}

// defaultAckTimeout applies to Callback endpoints registered without one.
const defaultAckTimeout = 15 * time.Minute

func ackTimeout(ep *ledger.Endpoint) time.Duration {
	if ep.AckTimeout > 0 {
		return ep.AckTimeout
	}
	return defaultAckTimeout
}

// describe renders a failed attempt in a few words that are safe to store
// and show: the status code, or the error class and message (dispatch
// strips URLs and secrets from errors).
func describe(res *dispatch.Result) string {
	switch {
	case res.StatusCode != 0:
		return fmt.Sprintf("HTTP %d", res.StatusCode)
	case res.Err != nil:
		return truncate.String(res.Err.Error(), 240, "...")
	default:
		return "no response"
	}
}
