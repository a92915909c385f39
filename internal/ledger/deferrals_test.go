package ledger

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// fakeDeferrals answers RetryDeferralAdd with deferred and records what
// was added and pruned.
type fakeDeferrals struct {
	deferred int64
	err      error
	minutes  []int64
	pruned   []int64
	ops      []string
}

func (f *fakeDeferrals) RetryDeferralTx(_ context.Context, op string, fn func(DeferralStatements) error) error {
	f.ops = append(f.ops, op)
	return fn(f)
}

func (f *fakeDeferrals) RetryDeferralAdd(_ context.Context, _ *RetryDeferralParams, minute int64) (int64, error) {
	f.minutes = append(f.minutes, minute)
	return f.deferred, f.err
}

func (f *fakeDeferrals) RetryDeferralPrune(_ context.Context, before int64) error {
	f.pruned = append(f.pruned, before)
	return nil
}

func TestRetryDeferralRecord(t *testing.T) {
	now := time.Unix(600*60+30, 0) // minute 600
	p := &RetryDeferralParams{EndpointID: "ns/ep", Count: 3, Now: now}
	for _, tc := range []struct {
		name     string
		deferred int64
		pruned   []int64
	}{
		{"a record that opens the minute's bucket deletes old buckets", 3, []int64{600 - int64(BudgetRetention/time.Minute)}},
		{"a later record of the minute", 5, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDeferrals{deferred: tc.deferred}
			if err := RetryDeferralRecord(context.Background(), f, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.minutes, []int64{600}) {
				t.Errorf("added to minutes %v, want [600]", f.minutes)
			}
			if !slices.Equal(f.pruned, tc.pruned) {
				t.Errorf("pruned before %v, want %v", f.pruned, tc.pruned)
			}
			if !slices.Equal(f.ops, []string{"record deferred retries of ns/ep"}) {
				t.Errorf("ops %q", f.ops)
			}
		})
	}
	boom := errors.New("boom")
	f := &fakeDeferrals{deferred: 3, err: boom}
	if err := RetryDeferralRecord(context.Background(), f, p); !errors.Is(err, boom) || len(f.pruned) != 0 {
		t.Errorf("a failed add: %v, pruned %v", err, f.pruned)
	}
	for _, bad := range []*RetryDeferralParams{nil, {Count: 1, Now: now}, {EndpointID: "ns/ep", Now: now}} {
		f := &fakeDeferrals{}
		if err := RetryDeferralRecord(context.Background(), f, bad); err == nil || len(f.ops) != 0 {
			t.Errorf("%+v: %v, transactions %v", bad, err, f.ops)
		}
	}
}
