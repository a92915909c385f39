package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RetryBudgetAcquire's transaction, run once for both drivers: take one
// retry if the minute's allowance is not spent and, with the first retry
// of a minute, delete the buckets that no longer decide anything. A
// driver implements the two statements (BudgetStatements) and the
// transaction (BudgetTransactor).

// BudgetStatements are the statements of one RetryBudgetAcquire
// transaction.
type BudgetStatements interface {
	// RetryBudgetTake takes one retry from the bucket of p.EndpointID and
	// minute while its retries are fewer than p.Budget.Allowance of its
	// first attempts, the check and the spend one statement, atomic across
	// processes. It returns the bucket's retries after the spend; ok is
	// false, and nothing changed, when the allowance is spent. A bucket it
	// creates starts with one retry, or none when MinPerMinute is 0.
	RetryBudgetTake(ctx context.Context, p *RetryBudgetParams, minute int64) (retries int64, ok bool, err error)
	// RetryBudgetPrune deletes the buckets of endpointID before minute.
	RetryBudgetPrune(ctx context.Context, endpointID string, before int64) error
}

// BudgetTransactor runs fn in one transaction of the driver (again when
// the driver retries a conflict), op naming it in errors.
type BudgetTransactor interface {
	RetryBudgetTx(ctx context.Context, op string, fn func(BudgetStatements) error) error
}

// RetryBudgetAcquire implements Recovery.RetryBudgetAcquire over d.
func RetryBudgetAcquire(ctx context.Context, d BudgetTransactor, p *RetryBudgetParams) (bool, error) {
	if p == nil {
		return false, errors.New("acquire retry budget: nil params")
	}
	minute := BudgetMinute(p.Now)
	var allowed bool
	err := d.RetryBudgetTx(ctx, "acquire retry budget of "+p.EndpointID, func(st BudgetStatements) error {
		retries, ok, err := st.RetryBudgetTake(ctx, p, minute)
		allowed = ok && retries > 0
		if err != nil || retries != 1 {
			return err
		}
		if err := st.RetryBudgetPrune(ctx, p.EndpointID, minute-int64(BudgetRetention/time.Minute)); err != nil {
			return fmt.Errorf("delete old buckets: %w", err)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return allowed, nil
}
