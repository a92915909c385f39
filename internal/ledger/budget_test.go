package ledger

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeBudget answers RetryBudgetTake with retries/ok, RetryBudgetRead
// with firsts and retries, and records prunes.
type fakeBudget struct {
	retries int64
	ok      bool
	err     error
	firsts  int64
	minutes []int64
	elapsed []int64
	pruned  []int64
	ops     []string
}

func (f *fakeBudget) RetryBudgetTx(_ context.Context, op string, fn func(BudgetStatements) error) error {
	f.ops = append(f.ops, op)
	return fn(f)
}

func (f *fakeBudget) RetryBudgetTake(_ context.Context, _ *RetryBudgetParams, minute, elapsed int64) (int64, bool, error) {
	f.minutes, f.elapsed = append(f.minutes, minute), append(f.elapsed, elapsed)
	return f.retries, f.ok, f.err
}

func (f *fakeBudget) RetryBudgetRead(context.Context, string, int64) (int64, int64, error) {
	return f.firsts, f.retries, nil
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
		next    time.Time
	}{
		{"spent", 1, false, false, nil, time.Unix(601*60, 0)},
		{"a new bucket with a floor of 0", 0, true, false, nil, time.Unix(600*60, 0)},
		{"the first retry of the minute deletes old buckets", 1, true, true, []int64{600 - 60}, time.Time{}},
		{"a later retry", 2, true, true, nil, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBudget{retries: tc.retries, ok: tc.ok}
			answer, err := RetryBudgetAcquire(context.Background(), f, p)
			if err != nil || answer.Taken != tc.allowed || !answer.NextAt.Equal(tc.next) {
				t.Fatalf("answer %+v, %v; want taken %v, next at %v", answer, err, tc.allowed, tc.next)
			}
			if len(f.minutes) != 1 || f.minutes[0] != 600 || f.elapsed[0] != 30_000 {
				t.Errorf("took from minutes %v at %v ms, want [600] at 30,000 ms", f.minutes, f.elapsed)
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
	if answer, err := RetryBudgetAcquire(context.Background(), &fakeBudget{retries: 1, ok: true, err: boom}, p); !errors.Is(err, boom) || answer.Taken {
		t.Errorf("error: %v, %v", answer, err)
	}
	if _, err := RetryBudgetAcquire(context.Background(), &fakeBudget{}, nil); err == nil {
		t.Error("nil params accepted")
	}
}

func TestNextRetryAt(t *testing.T) {
	start := time.Unix(600*60, 0)
	for _, tc := range []struct {
		retries, allowance int64
		want               time.Duration
	}{
		{0, 10, 0},
		{1, 10, 6 * time.Second},
		{9, 10, 54 * time.Second},
		{10, 10, time.Minute}, // spent
		{1, 3, 20 * time.Second},
		{1, 7, 8572 * time.Millisecond}, // 8,571.4 ms, rounded up
		{0, 0, time.Minute},             // nothing allowed
		{5, 2, time.Minute},             // the allowance fell below what was taken
	} {
		if got := NextRetryAt(start, tc.retries, tc.allowance).Sub(start); got != tc.want {
			t.Errorf("NextRetryAt(%d retries of %d) = +%v, want +%v", tc.retries, tc.allowance, got, tc.want)
		}
	}
}
