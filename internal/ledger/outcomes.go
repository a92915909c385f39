package ledger

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Outcome evidence: what each attempt achieved. Every transaction that
// settles a delivery (delivered, exhausted, or cancelled because its event
// expired; a cancellation by an endpoint's deletion is not an outcome)
// adds it to one hourly bucket row of its endpoint, keyed
// by the hour it settled, its outcome and the attempt it settled on, under
// the policy the endpoint had then (Policy.Name and Policy.Generation, read
// by the driver from the endpoint's row in the same transaction). The cost
// is one upsert per distinct row a transaction touches, whatever the size
// of the ledger. Rows older than OutcomeRetention are removed by
// OutcomePrune; the status shows at most 7 days.

// Evidence reads and prunes the outcome buckets.
type Evidence interface {
	// OutcomeList returns the buckets matching params, ordered by endpoint,
	// hour, outcome and attempt.
	OutcomeList(ctx context.Context, params *OutcomeListParams) ([]OutcomeBucket, error)
	// OutcomePrune deletes the buckets of hours that started before Before,
	// at most limit rows (SweepLimit), and returns how many.
	OutcomePrune(ctx context.Context, before time.Time, limit int) (int, error)
}

// OutcomeBucketWidth is the width of one outcome bucket.
const OutcomeBucketWidth = time.Hour

// OutcomeRetention is how long buckets are kept: the 7 days the status
// shows, and a day of slack so a window never finds its oldest hour pruned.
const OutcomeRetention = 8 * 24 * time.Hour

// OutcomeDelivered is the Outcome of a delivered delivery; an exhausted one
// has its ExhaustReason as Outcome.
const OutcomeDelivered = "Delivered"

// TimeToDeliveryBounds are the upper bounds (inclusive) of the fixed
// time-to-delivery histogram, from the delivery's creation to its success;
// the last bucket, TimeToDeliveryBuckets-1, counts everything longer.
var TimeToDeliveryBounds = [...]time.Duration{
	time.Second, 5 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute,
	30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// TimeToDeliveryBuckets is the number of histogram buckets (bounds + 1).
const TimeToDeliveryBuckets = len(TimeToDeliveryBounds) + 1

// TimeToDeliveryBucket returns the histogram bucket of d.
func TimeToDeliveryBucket(d time.Duration) int {
	for i, b := range TimeToDeliveryBounds {
		if d <= b {
			return i
		}
	}
	return TimeToDeliveryBuckets - 1
}

// OutcomeKey identifies one bucket row of a transaction. The policy is not
// part of it: within one transaction an endpoint has one policy, which the
// driver reads from the endpoint's row.
type OutcomeKey struct {
	EndpointID string
	// Hour is the start (UTC) of the hour the deliveries settled in.
	Hour time.Time
	// Outcome is OutcomeDelivered or an ExhaustReason.
	Outcome string
	// Attempt is the number of attempts the deliveries had when they
	// settled (for a callback acknowledgement, the attempt acknowledged).
	Attempt int
}

// OutcomeCount is what a bucket row counts.
type OutcomeCount struct {
	Count int64
	// TimeToDelivery counts delivered deliveries per TimeToDeliveryBounds
	// bucket; all zero for exhaustions.
	TimeToDelivery [TimeToDeliveryBuckets]int64
	// FirstAt and LastAt are the earliest and latest settlement counted.
	FirstAt, LastAt time.Time
}

// add folds o into c.
func (c *OutcomeCount) add(o OutcomeCount) {
	if c.Count == 0 || o.FirstAt.Before(c.FirstAt) {
		c.FirstAt = o.FirstAt
	}
	if c.Count == 0 || o.LastAt.After(c.LastAt) {
		c.LastAt = o.LastAt
	}
	c.Count += o.Count
	for i, n := range o.TimeToDelivery {
		c.TimeToDelivery[i] += n
	}
}

// OutcomeBucket is one stored row.
type OutcomeBucket struct {
	OutcomeKey
	Namespace string
	// PolicyName is the RetryPolicy the endpoint used ("" for the
	// operator's default policy), PolicyGeneration its generation.
	PolicyName       string
	PolicyGeneration int64
	OutcomeCount
}

// SettledOutcome is the bucket row a transition adds d (as it is after the
// transition, settled at now) to, and what it adds; ok is false when d is
// not delivered, exhausted or cancelled Expired.
func SettledOutcome(d Delivery, now time.Time) (key OutcomeKey, count OutcomeCount, ok bool) {
	now = now.UTC()
	key = OutcomeKey{EndpointID: d.EndpointID, Hour: now.Truncate(OutcomeBucketWidth), Attempt: d.Attempts}
	count = OutcomeCount{Count: 1, FirstAt: now, LastAt: now}
	switch d.State {
	case StateDelivered:
		key.Outcome = OutcomeDelivered
		count.TimeToDelivery[TimeToDeliveryBucket(now.Sub(d.CreatedAt))] = 1
	case StateExhausted:
		key.Outcome = string(d.ExhaustReason)
	case StateCancelled:
		// An expiry is the type's contract at work: evidence; a deletion
		// is not an outcome of anything sent.
		if d.ExhaustReason != CancelExpired {
			return OutcomeKey{}, OutcomeCount{}, false
		}
		key.Outcome = OutcomeExpired
	default:
		return OutcomeKey{}, OutcomeCount{}, false
	}
	return key, count, true
}

// OutcomeDeltas accumulates a transaction's outcome rows, so that each row
// is written once per transaction however large the batch.
type OutcomeDeltas map[OutcomeKey]*OutcomeCount

// Note adds d, as it is after a transition at now, if it settled.
func (o OutcomeDeltas) Note(d Delivery, now time.Time) {
	key, count, ok := SettledOutcome(d, now)
	if !ok {
		return
	}
	c, found := o[key]
	if !found {
		c = &OutcomeCount{}
		o[key] = c
	}
	c.add(count)
}

// With notes d at now and returns o, for transactions that settle one
// delivery.
func (o OutcomeDeltas) With(d Delivery, now time.Time) OutcomeDeltas {
	o.Note(d, now)
	return o
}

// Keys returns the rows in one global order (endpoint, hour, outcome,
// attempt), the order in which drivers write them so that concurrent
// transactions lock rows in the same order.
func (o OutcomeDeltas) Keys() []OutcomeKey {
	keys := make([]OutcomeKey, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareOutcomeKeys)
	return keys
}

func compareOutcomeKeys(a, b OutcomeKey) int {
	if c := strings.Compare(a.EndpointID, b.EndpointID); c != 0 {
		return c
	}
	if c := a.Hour.Compare(b.Hour); c != 0 {
		return c
	}
	if c := strings.Compare(a.Outcome, b.Outcome); c != 0 {
		return c
	}
	return a.Attempt - b.Attempt
}

// OutcomeListParams selects buckets; empty fields do not filter.
type OutcomeListParams struct {
	Namespace  string
	EndpointID string
	// PolicyName selects the buckets of one RetryPolicy (with Namespace).
	PolicyName string
	// Since selects hours that started at or after it.
	Since time.Time
}
