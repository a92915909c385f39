package publish

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventfilter"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Filters are decided on the publishing request's own path, before it
// joins a commit: the commit receives the decided fan-out
// (EventInsertParams.Decided), so that a slow filter delays only the
// publishes it applies to, never the others of a commit. Each evaluation
// is bounded by eventfilter (its estimate, its run-time cost, its time);
// the evaluations of one event share Config.FilterBudget; the publishes of
// one namespace share Config.FilterSlots evaluators, so that one
// namespace's filters take at most that many cores from the others.

// Defaults of the filter budgets.
const (
	// DefaultFilterBudget is Config.FilterBudget's default: a thousand
	// times what a hundred filters like data.amount > 1000 take on one
	// event.
	DefaultFilterBudget = 250 * time.Millisecond
	// DefaultFilterEvalTimeout is Config.FilterEvalTimeout's default.
	DefaultFilterEvalTimeout = eventfilter.DefaultEvalTimeout
	// DefaultFilterSlots is Config.FilterSlots' default.
	DefaultFilterSlots = 1
	// maxDecideRounds bounds the commits of one publish whose filters
	// the ledger found undecided (an endpoint registered meanwhile).
	maxDecideRounds = 4
)

// ReasonBudget is a filter left undecided because its event's budget was
// spent (by other filters, or waiting for its namespace's evaluator): no
// match, like an evaluation that fails.
const ReasonBudget = "budget"

// FilterSource tells the core which filters a publish must decide before
// its commit: the engine, from the endpoints it has registered. A core
// whose Committer is not one learns them from the ledger's first refusal
// (ledger.UndecidedError), at the cost of a second commit.
type FilterSource interface {
	// EndpointFilters returns the filters of the endpoints of namespace
	// whose event-type patterns select typ.
	EndpointFilters(namespace, typ string) []ledger.FilterTarget
}

// OverrunSink hears of each filter that exceeded its budget (reason
// eventfilter.ReasonTimeout or ReasonCost, or ReasonBudget), so that the
// endpoint's owner is told: the engine keeps them for the endpoint's
// controller.
type OverrunSink interface {
	FilterOverrun(target ledger.FilterTarget, reason string)
}

// programs holds the filters of every core of the process, so that each
// expression is compiled once, whichever door publishes.
var programs = eventfilter.NewCache(eventfilter.DefaultCacheSize)

// fanOut is one publish's filter evaluations: the event they share and
// the budget they spend.
type fanOut struct {
	c        *Core
	ns       string
	event    *eventfilter.Event
	deadline time.Time
}

func (c *Core) newFanOut(ns, typ string, data []byte) *fanOut {
	return &fanOut{c: c, ns: ns, event: eventfilter.NewEvent(typ, ns, data),
		deadline: c.cfg.Now().Add(c.cfg.FilterBudget)}
}

// decide evaluates targets into d. An expression that does not compile
// (the endpoint's controller reports it FilterInvalid), an evaluation that
// fails (a missing field) or exceeds its bounds, and every evaluation once
// the event's budget is spent, are no match, counted by reason; the
// publish itself never fails for a filter.
func (f *fanOut) decide(ctx context.Context, targets []ledger.FilterTarget, d ledger.FilterDecisions) {
	if len(targets) == 0 {
		return
	}
	release, ok := f.c.slots.acquire(ctx, f.ns, f.deadline.Sub(f.c.cfg.Now()))
	if !ok {
		for _, t := range targets {
			d[t] = false
			f.overrun(t, ReasonBudget)
		}
		return
	}
	defer release()
	for _, t := range targets {
		d[t] = f.match(ctx, t)
	}
}

func (f *fanOut) match(ctx context.Context, t ledger.FilterTarget) bool {
	prg, err := programs.Program(t.Filter)
	if err != nil {
		f.c.cfg.Metrics.countFilterError(eventfilter.ReasonCompile)
		return false
	}
	left := f.deadline.Sub(f.c.cfg.Now())
	if left <= 0 {
		f.overrun(t, ReasonBudget)
		return false
	}
	ok, err := prg.Eval(ctx, f.event, eventfilter.Budget{Timeout: min(left, f.c.cfg.FilterEvalTimeout), Now: f.c.cfg.Now})
	if err != nil {
		switch reason := eventfilter.Reason(err); reason {
		case eventfilter.ReasonTimeout, eventfilter.ReasonCost:
			if errors.Is(err, eventfilter.ErrDataTooLarge) {
				// The event's size, not the filter's cost.
				f.c.cfg.Metrics.countFilterError(reason)
				return false
			}
			f.overrun(t, reason)
		default:
			f.c.cfg.Metrics.countFilterError(reason)
		}
		return false
	}
	return ok
}

// overrun counts a filter that exceeded a budget and tells the sink.
func (f *fanOut) overrun(t ledger.FilterTarget, reason string) {
	f.c.cfg.Metrics.countFilterError(reason)
	if f.c.cfg.Overruns != nil {
		f.c.cfg.Overruns.FilterOverrun(t, reason)
	}
}

// nsSlots limits the filter evaluations of each namespace that run at
// once. A namespace's entry lives while someone holds or awaits a slot.
type nsSlots struct {
	per int

	mu sync.Mutex
	m  map[string]*nsSlot
}

type nsSlot struct {
	ch    chan struct{}
	users int
}

func newNSSlots(per int) *nsSlots {
	return &nsSlots{per: max(per, 1), m: make(map[string]*nsSlot)}
}

// acquire takes one of ns's slots, waiting for at most patience; false
// when none came free in time (or ctx ended).
func (s *nsSlots) acquire(ctx context.Context, ns string, patience time.Duration) (release func(), ok bool) {
	s.mu.Lock()
	sl := s.m[ns]
	if sl == nil {
		sl = &nsSlot{ch: make(chan struct{}, s.per)}
		s.m[ns] = sl
	}
	sl.users++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		if sl.users--; sl.users == 0 {
			delete(s.m, ns)
		}
		s.mu.Unlock()
	}
	select {
	case sl.ch <- struct{}{}:
		return func() { <-sl.ch; done() }, true
	default:
	}
	wait, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	select {
	case sl.ch <- struct{}{}:
		return func() { <-sl.ch; done() }, true
	case <-wait.Done():
		done()
		return nil, false
	}
}
