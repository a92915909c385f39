package publish

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// DefaultFilterBudget is Config.FilterBudget's default: a thousand times
// what a hundred filters like data.amount > 1000 take on one event.
const DefaultFilterBudget = 250 * time.Millisecond

// programs holds the filters of every core of the process, so that each
// expression is compiled once, whichever door publishes.
var programs = eventfilter.NewCache(eventfilter.DefaultCacheSize)

// fanOut is the insert's parameters with what its filter evaluations
// share: allocated as one, so that a publish pays for filters only when
// an endpoint has one (the ledger asks only for those).
type fanOut struct {
	ledger.EventInsertParams
	now     func() time.Time
	budget  time.Duration
	metrics *Metrics

	// Set at the first evaluation. The ledger calls matches from the
	// insert's goroutine, one call at a time: no lock.
	event    *eventfilter.Event
	deadline time.Time
}

// matches is the insert's ledger.FilterFunc. An expression that does not
// compile (the endpoint's controller reports it FilterInvalid), an
// evaluation that fails (a missing field), and every evaluation once the
// fan-out's budget is spent, are no match, counted by reason; the
// publish itself never fails for a filter.
func (f *fanOut) matches(_, expr string) bool {
	prg, err := programs.Program(expr)
	if err != nil {
		f.metrics.countFilterError(eventfilter.ReasonCompile)
		return false
	}
	if f.event == nil {
		f.event = eventfilter.NewEvent(f.Type, f.Namespace, f.Data)
		f.deadline = f.now().Add(f.budget)
	} else if f.now().After(f.deadline) {
		// Each evaluation is bounded by its estimate; the budget bounds
		// their sum, inside the insert's transaction.
		f.metrics.countFilterError(eventfilter.ReasonCanceled)
		return false
	}
	ok, err := prg.MatchEvent(context.Background(), f.event)
	if err != nil {
		f.metrics.countFilterError(eventfilter.Reason(err))
		return false
	}
	return ok
}
