package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RetryBudgetAcquire's transaction, run once for both drivers: take one
// retry if the minute's allowance is not spent and its pace allows it
// (NextRetryAt) and, with the first retry of a minute, delete the buckets
// that no longer decide anything; refused, read the bucket to say when the
// next retry may be taken. A driver implements the statements
// (BudgetStatements) and the transaction (BudgetTransactor).

// BudgetStatements are the statements of one RetryBudgetAcquire
// transaction.
type BudgetStatements interface {
	// RetryBudgetTake takes one retry from the bucket of p.EndpointID and
	// minute while its retries are fewer than p.Budget.Allowance of its
	// first attempts and elapsedMillis into the minute is at least
	// retries × 60,000 / allowance (the pace), the check and the spend one
	// statement, atomic across processes. It returns the bucket's retries
	// after the spend; ok is false, and nothing changed, when the
	// allowance is spent or the pace not reached. A bucket it creates
	// starts with one retry, or none when MinPerMinute is 0.
	RetryBudgetTake(ctx context.Context, p *RetryBudgetParams, minute, elapsedMillis int64) (retries int64, ok bool, err error)
	// RetryBudgetRead reads the bucket of endpointID and minute (zeros
	// when there is none).
	RetryBudgetRead(ctx context.Context, endpointID string, minute int64) (firstAttempts, retries int64, err error)
	// RetryBudgetPrune deletes the buckets of endpointID before minute.
	RetryBudgetPrune(ctx context.Context, endpointID string, before int64) error
}

// BudgetTransactor runs fn in one transaction of the driver (again when
// the driver retries a conflict), op naming it in errors.
type BudgetTransactor interface {
	RetryBudgetTx(ctx context.Context, op string, fn func(BudgetStatements) error) error
}

// RetryBudgetAcquire implements Recovery.RetryBudgetAcquire over d.
func RetryBudgetAcquire(ctx context.Context, d BudgetTransactor, p *RetryBudgetParams) (RetryBudgetAnswer, error) {
	if p == nil {
		return RetryBudgetAnswer{}, errors.New("acquire retry budget: nil params")
	}
	minute := BudgetMinute(p.Now)
	start := time.Unix(minute*60, 0)
	var answer RetryBudgetAnswer
	err := d.RetryBudgetTx(ctx, "acquire retry budget of "+p.EndpointID, func(st BudgetStatements) error {
		retries, ok, err := st.RetryBudgetTake(ctx, p, minute, p.Now.Sub(start).Milliseconds())
		answer = RetryBudgetAnswer{Taken: ok && retries > 0}
		if err != nil {
			return err
		}
		if !answer.Taken {
			firsts, retries, err := st.RetryBudgetRead(ctx, p.EndpointID, minute)
			if err != nil {
				return fmt.Errorf("read the bucket: %w", err)
			}
			answer.NextAt = NextRetryAt(start, retries, p.Budget.Allowance(firsts))
			return nil
		}
		if retries != 1 {
			return nil
		}
		if err := st.RetryBudgetPrune(ctx, p.EndpointID, minute-int64(BudgetRetention/time.Minute)); err != nil {
			return fmt.Errorf("delete old buckets: %w", err)
		}
		return nil
	})
	if err != nil {
		return RetryBudgetAnswer{}, err
	}
	return answer, nil
}

// RetryBudgetAnswer is RetryBudgetAcquire's: whether a retry was taken,
// else the earliest time the next one may be.
type RetryBudgetAnswer struct {
	Taken  bool
	NextAt time.Time
}

// NextRetryAt is when the retry after the first retries of the minute
// starting at start may be taken under an allowance of allowance a minute:
// retries are paced evenly over the minute (the k-th, from 0, no sooner
// than k/allowance of it), so that any 60 seconds see at most one more
// than the allowance, never twice it across a minute's end; with the
// allowance spent (or none), the next minute.
func NextRetryAt(start time.Time, retries, allowance int64) time.Time {
	if retries >= allowance {
		return start.Add(time.Minute)
	}
	ms := (retries*time.Minute.Milliseconds() + allowance - 1) / allowance // rounded up
	return start.Add(time.Duration(ms) * time.Millisecond)
}
