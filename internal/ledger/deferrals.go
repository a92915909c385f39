package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RetryDeferrals keeps the retries a retry budget put off, per endpoint
// and Unix minute, in the shared ledger: every engine that defers a retry
// records it, so the endpoint's status (RetryBudgetLimited) shows the
// deferrals of every replica, not only those of the one whose controller
// is the leader.
type RetryDeferrals interface {
	// RetryDeferralRecord counts Count retries of an endpoint deferred by
	// its retry budget at Now, in the bucket of Now's minute (BudgetMinute),
	// which keeps the earliest and the latest deferral it saw. Concurrent
	// records, from any process, add up. Buckets older than BudgetRetention
	// are deleted as new minutes open.
	RetryDeferralRecord(ctx context.Context, params *RetryDeferralParams) error
	// RetryDeferralBuckets lists an endpoint's buckets of minutes at or
	// after SinceMinute, newest first. RetryDeferralStreak reads them.
	RetryDeferralBuckets(ctx context.Context, params *RetryDeferralBucketsParams) ([]DeferralBucket, error)
}

// RetryDeferralParams records deferred retries.
type RetryDeferralParams struct {
	EndpointID string
	// Count is how many retries were deferred at Now; at least 1.
	Count int64
	Now   time.Time
}

// Validate checks the params of a record: an endpoint and a count of at
// least 1.
func (p *RetryDeferralParams) Validate() error {
	switch {
	case p == nil:
		return errors.New("record deferred retries: nil params")
	case p.EndpointID == "":
		return errors.New("record deferred retries: endpointID: must not be empty")
	case p.Count < 1:
		return errors.New("record deferred retries: count: must be at least 1")
	}
	return nil
}

// RetryDeferralBucketsParams selects an endpoint's deferral buckets.
type RetryDeferralBucketsParams struct {
	EndpointID  string
	SinceMinute int64
}

// DeferralBucket is one endpoint's deferred retries of one Unix minute.
type DeferralBucket struct {
	Minute int64
	Count  int64
	// First and Last are the earliest and latest deferral recorded.
	First, Last time.Time
}

// DeferralWindow is how long after its last deferral an endpoint counts
// as held back by its retry budget: deferrals closer together than this
// form one streak, counted from its first deferral. It is longer than a
// bucket's minute, so the deferrals of one bucket are always one streak.
const DeferralWindow = 2 * time.Minute

// DeferralStreak is an endpoint's latest streak of deferred retries; Count
// 0 when there is none.
type DeferralStreak struct {
	Count       int64
	First, Last time.Time
}

// Active reports whether the streak still holds at now: its last deferral
// is at most DeferralWindow old.
func (s DeferralStreak) Active(now time.Time) bool {
	return s.Count > 0 && now.Sub(s.Last) <= DeferralWindow
}

// StreakOf joins buckets (newest first, as RetryDeferralBuckets lists
// them) into the latest streak: the newest bucket and every older one
// whose last deferral is within DeferralWindow of the streak's first.
func StreakOf(buckets []DeferralBucket) DeferralStreak {
	var s DeferralStreak
	for _, b := range buckets {
		if b.Count <= 0 {
			continue
		}
		if s.Count > 0 && s.First.Sub(b.Last) > DeferralWindow {
			break
		}
		if s.Count == 0 || b.Last.After(s.Last) {
			s.Last = b.Last
		}
		if s.Count == 0 || b.First.Before(s.First) {
			s.First = b.First
		}
		s.Count += b.Count
	}
	return s
}

// RetryDeferralStreak reads the endpoint's latest streak of deferred
// retries as of now, from the buckets a streak can reach (BudgetRetention).
func RetryDeferralStreak(ctx context.Context, d RetryDeferrals, endpointID string, now time.Time) (DeferralStreak, error) {
	buckets, err := d.RetryDeferralBuckets(ctx, &RetryDeferralBucketsParams{
		EndpointID: endpointID, SinceMinute: BudgetMinute(now.Add(-BudgetRetention)),
	})
	if err != nil {
		return DeferralStreak{}, err
	}
	return StreakOf(buckets), nil
}

// RetryDeferralRecord's transaction, run once for both drivers: add the
// deferred retries to their minute's bucket and, when that opened the
// bucket, delete the buckets older than BudgetRetention. A driver
// implements the two statements (DeferralStatements) and the transaction
// (DeferralTransactor).

// DeferralStatements are the statements of one RetryDeferralRecord
// transaction.
type DeferralStatements interface {
	// RetryDeferralAdd adds p.Count to the bucket of p.EndpointID and
	// minute (creating it), keeping the earliest and latest p.Now, and
	// returns the bucket's count after the add: p.Count when it is new.
	RetryDeferralAdd(ctx context.Context, p *RetryDeferralParams, minute int64) (deferred int64, err error)
	// RetryDeferralPrune deletes every endpoint's buckets before minute.
	RetryDeferralPrune(ctx context.Context, before int64) error
}

// DeferralTransactor runs fn in one transaction of the driver, op naming
// it in errors.
type DeferralTransactor interface {
	RetryDeferralTx(ctx context.Context, op string, fn func(DeferralStatements) error) error
}

// RetryDeferralRecord implements RetryDeferrals.RetryDeferralRecord over d.
func RetryDeferralRecord(ctx context.Context, d DeferralTransactor, p *RetryDeferralParams) error {
	if err := p.Validate(); err != nil {
		return err
	}
	minute := BudgetMinute(p.Now)
	return d.RetryDeferralTx(ctx, "record deferred retries of "+p.EndpointID, func(st DeferralStatements) error {
		deferred, err := st.RetryDeferralAdd(ctx, p, minute)
		if err != nil || deferred != p.Count {
			return err
		}
		if err := st.RetryDeferralPrune(ctx, minute-int64(BudgetRetention/time.Minute)); err != nil {
			return fmt.Errorf("delete old buckets: %w", err)
		}
		return nil
	})
}

// Rows is the part of a driver's result set that collecting rows needs:
// database/sql's *Rows and pgx's Rows both have it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// CollectDeferralBuckets reads RetryDeferralBuckets' rows, each (minute,
// deferred, first_at, last_at) with the times in Unix nanoseconds, for
// both drivers. The caller closes rows.
func CollectDeferralBuckets(rows Rows) ([]DeferralBucket, error) {
	var out []DeferralBucket
	for rows.Next() {
		var (
			b           DeferralBucket
			first, last int64
		)
		if err := rows.Scan(&b.Minute, &b.Count, &first, &last); err != nil {
			return nil, err
		}
		b.First, b.Last = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}
