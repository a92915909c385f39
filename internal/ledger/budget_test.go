package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeBudget answers RetryBudgetTake with retries/ok and records prunes.
type fakeBudget struct {
	retries int64
	ok      bool
	err     error
	minutes []int64
	pruned  []int64
	ops     []string
}

func (f *fakeBudget) RetryBudgetTx(_ context.Context, op string, fn func(BudgetStatements) error) error {
	f.ops = append(f.ops, op)
	return fn(f)
}

func (f *fakeBudget) RetryBudgetTake(_ context.Context, _ *RetryBudgetParams, minute int64) (int64, bool, error) {
	f.minutes = append(f.minutes, minute)
	return f.retries, f.ok, f.err
}

func (f *fakeBudget) RetryBudgetPrune(_ context.Context, _ string, before int64) error {
	f.pruned = append(f.pruned, before)
	return nil
}

func TestRetryBudgetAcquire(t *testing.T) {
	now := time.Unix(600*60+30, 0) // minute 600
	p := &RetryBudgetParams{EndpointID: "ns/ep", Budget: RetryBudget{MinPerMinute: 1}, Now: now}
	for _, tc := range []struct {
		name    string
		retries int64
		ok      bool
		allowed bool
		pruned  []int64
	}{
		{"spent", 0, false, false, nil},
		{"a new bucket with a floor of 0", 0, true, false, nil},
		{"the first retry of the minute deletes old buckets", 1, true, true, []int64{600 - 60}},
		{"a later retry", 2, true, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBudget{retries: tc.retries, ok: tc.ok}
			allowed, err := RetryBudgetAcquire(context.Background(), f, p)
			if err != nil || allowed != tc.allowed {
				t.Fatalf("allowed %v, %v; want %v", allowed, err, tc.allowed)
			}
			if len(f.minutes) != 1 || f.minutes[0] != 600 {
				t.Errorf("took from minutes %v, want [600]", f.minutes)
			}
			if len(f.pruned) != len(tc.pruned) || len(f.pruned) == 1 && f.pruned[0] != tc.pruned[0] {
				t.Errorf("pruned before %v, want %v", f.pruned, tc.pruned)
			}
			if f.ops[0] != "acquire retry budget of ns/ep" {
				t.Errorf("op %q", f.ops[0])
			}
		})
	}
	boom := errors.New("boom")
	if allowed, err := RetryBudgetAcquire(context.Background(), &fakeBudget{retries: 1, ok: true, err: boom}, p); !errors.Is(err, boom) || allowed {
		t.Errorf("error: %v, %v", allowed, err)
	}
	if _, err := RetryBudgetAcquire(context.Background(), &fakeBudget{}, nil); err == nil {
		t.Error("nil params accepted")
	}
}
