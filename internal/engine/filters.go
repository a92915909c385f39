package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The publish core decides the filters of an event's endpoints before its
// commit (package publish, filters.go), from the endpoints this engine has
// registered: EndpointFilters implements publish.FilterSource. An endpoint
// registered by another replica that this one has not seen yet is found by
// the ledger, which refuses the insert until its filter is decided
// (ledger.UndecidedError). FilterOverrun implements publish.OverrunSink:
// the engine keeps, per endpoint, what its filter exceeded, for the
// endpoint's controller.

// FilterOverruns is what an endpoint's filter exceeded on this replica
// since its configuration last changed: how many evaluations were stopped
// (their events went undelivered to the endpoint), the last one's time and
// reason (eventfilter.ReasonTimeout, ReasonCost, or publish.ReasonBudget).
type FilterOverruns struct {
	Filter string
	// Version is the endpoint's configuration version they count against.
	Version    int64
	Count      int64
	Last       time.Time
	LastReason string
	// notified is when OnFilterOverrun was last called for it.
	notified time.Time
}

type overruns = FilterOverruns

// overrunNotifyInterval is the least time between two OnFilterOverrun
// calls for an endpoint past its first overruns: the controller reads the
// count when it reconciles, and its Event says how many.
const overrunNotifyInterval = time.Minute

// overrunsNotifiedAtOnce is how many overruns of a filter are told at
// once before the interval applies: the first, and enough for the
// controller to judge the filter over budget (controllers' threshold).
const overrunsNotifiedAtOnce = 3

// fileFilterLocked files endpoint id under its namespace when it has a
// filter, and forgets what it exceeded under an earlier configuration: a
// changed spec starts afresh. e.mu is held.
func (e *Engine) fileFilterLocked(id string, st *endpointState) {
	ns := st.cfg.Namespace
	if st.cfg.Filter == "" {
		e.unfileFilterLocked(id, ns)
		return
	}
	m := e.filtered[ns]
	if m == nil {
		m = map[string]*endpointState{}
		e.filtered[ns] = m
	}
	m[id] = st
	if o := e.overruns[id]; o != nil && o.Version != st.cfg.Version {
		delete(e.overruns, id)
	}
}

// unfileFilterLocked removes endpoint id of namespace ns from the filtered
// endpoints and its overruns. e.mu is held.
func (e *Engine) unfileFilterLocked(id, ns string) {
	delete(e.overruns, id)
	if m := e.filtered[ns]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(e.filtered, ns)
		}
	}
}

// EndpointFilters implements publish.FilterSource: the filters of the
// endpoints of namespace whose event-type patterns select typ, by
// endpoint ID, so that a budget spent part way stops at the same ones
// every time. Paused endpoints count: their deliveries wait, and so must
// be decided.
func (e *Engine) EndpointFilters(namespace, typ string) []ledger.FilterTarget {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ts []ledger.FilterTarget
	for id, st := range e.filtered[namespace] {
		if eventtype.MatchAny(st.cfg.EventTypes, typ) {
			ts = append(ts, ledger.FilterTarget{EndpointID: id, Filter: st.cfg.Filter})
		}
	}
	slices.SortFunc(ts, func(a, b ledger.FilterTarget) int { return cmp.Compare(a.EndpointID, b.EndpointID) })
	return ts
}

// FilterOverrun implements publish.OverrunSink: it counts the overrun
// against the endpoint's current filter and wakes its controller
// (Options.OnFilterOverrun) on the first ones, then at most once a
// minute. An overrun of a filter the endpoint no longer has is dropped.
func (e *Engine) FilterOverrun(t ledger.FilterTarget, reason string) {
	now := e.opts.Clock.Now()
	e.mu.Lock()
	st, ok := e.endpoints[t.EndpointID]
	if !ok || st.cfg.Filter != t.Filter {
		e.mu.Unlock()
		return
	}
	o := e.overruns[t.EndpointID]
	if o == nil {
		o = &overruns{Filter: t.Filter, Version: st.cfg.Version}
		e.overruns[t.EndpointID] = o
	}
	o.Count++
	o.Last, o.LastReason = now, reason
	notify := o.Count <= overrunsNotifiedAtOnce || now.Sub(o.notified) >= overrunNotifyInterval
	if notify {
		o.notified = now
	}
	e.mu.Unlock()
	if notify && e.opts.OnFilterOverrun != nil {
		e.opts.OnFilterOverrun(t.EndpointID)
	}
}

// EndpointFilterOverruns returns what the current filter of endpoint id
// exceeded on this replica; false when nothing (or the endpoint is not
// registered here).
func (e *Engine) EndpointFilterOverruns(id string) (FilterOverruns, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o := e.overruns[id]
	if o == nil {
		return FilterOverruns{}, false
	}
	return *o, true
}
