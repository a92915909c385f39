package backoff_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

// The RetryPolicy controller turns a spec into status like this.
func ExamplePolicy_Plan() {
	factor, err := backoff.ParseFactor("2")
	if err != nil {
		panic(err)
	}
	p := backoff.Policy{
		Strategy:       backoff.Exponential,
		InitialDelay:   30 * time.Second,
		FactorMilli:    factor,
		MaxDelay:       time.Hour,
		JitterPercent:  10,
		MaxAttempts:    12,
		MaxAge:         24 * time.Hour,
		AttemptTimeout: 30 * time.Second,
	}
	if err := p.Validate(); err != nil {
		panic(err)
	}
	plan := p.Plan(0)
	offsets := make([]string, len(plan.Offsets))
	for i, o := range plan.Offsets {
		offsets[i] = backoff.FormatDuration(o)
	}
	fmt.Println(strings.Join(offsets, " "))
	fmt.Println("attempts:", plan.Attempts, "truncated:", plan.Truncated)
	fmt.Println("horizon:", backoff.FormatDuration(plan.Horizon), "worst case:", backoff.FormatDuration(plan.WorstCase))
	// Output:
	// 0s 30s 1m30s 3m30s 7m30s 15m30s 31m30s 1h3m 2h3m 3h3m 4h3m 5h3m
	// attempts: 12 truncated: false
	// horizon: 5h3m worst case: 5h15m
}
