package engine

import (
	"sync"
	"time"
)

// BudgetDeferralWindow is how long after its last deferral an endpoint
// counts as held back by its retry budget: deferrals closer together than
// this form one streak, counted from its first deferral.
const BudgetDeferralWindow = 2 * time.Minute

// deferralLog remembers, per endpoint, the current streak of retries this
// process put off because the retry budget was spent, so that the endpoint
// can say so (RetryBudgetLimited) instead of only a metric.
type deferralLog struct {
	mu sync.Mutex
	m  map[string]*deferralStreak
}

type deferralStreak struct {
	count       int64
	first, last time.Time
}

// note counts one deferral of endpoint at now.
func (l *deferralLog) note(endpoint string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*deferralStreak{}
	}
	s, ok := l.m[endpoint]
	if !ok || now.Sub(s.last) > BudgetDeferralWindow {
		s = &deferralStreak{first: now}
		l.m[endpoint] = s
	}
	s.count++
	s.last = now
}

// streak returns the endpoint's current streak; count 0 when none.
func (l *deferralLog) streak(endpoint string) (count int64, first, last time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.m[endpoint]; ok {
		return s.count, s.first, s.last
	}
	return 0, time.Time{}, time.Time{}
}

// RetryBudgetDeferrals reports the endpoint's latest streak of retries
// deferred by its retry budget on this engine: how many, the first and the
// last (count 0 when none). A streak ends BudgetDeferralWindow after its
// last deferral; the caller compares last with its clock.
func (e *Engine) RetryBudgetDeferrals(endpointID string) (count int64, first, last time.Time) {
	return e.deferrals.streak(endpointID)
}
