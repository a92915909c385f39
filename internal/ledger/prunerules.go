package ledger

import "time"

// The retention rule of Prune (see the Retention paragraph of
// settlementrules.go), stated once: the stages both drivers walk, in order,
// and the verdict on one event. The drivers find and re-check candidates
// in SQL, walking indexes in the order events aged, so that a batch costs
// what it prunes; PruneStage.Prunes is the specification of those
// statements, and the conformance suite's Transition group drives its
// table through each store's Prune.

// PruneStage is one kind of Prune candidate.
type PruneStage struct {
	// Evidence deletes the event (with its deliveries and attempts);
	// otherwise its payload is pruned.
	Evidence bool
	// Undelivered: events that reached no endpoint (they age from
	// CreatedAt under the default retention).
	Undelivered bool
	// PayloadPruned selects, among events with deliveries, those whose
	// payload is already pruned (a partition of the candidates for the
	// drivers' indexes; the verdict does not depend on it).
	PayloadPruned bool
}

// PruneStages are the stages of one Prune call, in order, all within one
// Limit: evidence first, so that an event past both retentions is deleted
// rather than pruned and then deleted.
var PruneStages = []PruneStage{
	{Evidence: true, PayloadPruned: true},
	{Evidence: true},
	{Evidence: true, Undelivered: true},
	{},
	{Undelivered: true},
}

// PolicyField is the Policy field (JSON name) of the stage's retention.
func (g PruneStage) PolicyField() string {
	if g.Evidence {
		return "evidenceRetention"
	}
	return "payloadRetention"
}

// Default is the stage's retention for a policy that sets none, and for
// events without deliveries.
func (g PruneStage) Default(p *PruneParams) time.Duration {
	if g.Evidence {
		return p.DefaultEvidenceRetention
	}
	return p.DefaultPayloadRetention
}

// Retention is the stage's retention under one endpoint's policy.
func (g PruneStage) Retention(pol Policy, p *PruneParams) time.Duration {
	r := pol.PayloadRetention
	if g.Evidence {
		r = pol.EvidenceRetention
	}
	if r > 0 {
		return r
	}
	return g.Default(p)
}

// PruneFacts is what decides an event's fate.
type PruneFacts struct {
	CreatedAt     time.Time
	PayloadPruned bool
	// Deliveries of the event with their endpoints' policies (a deleted
	// endpoint keeps its last one).
	Deliveries []PruneDelivery
}

// PruneDelivery is one delivery of an event as Prune sees it.
type PruneDelivery struct {
	State      DeliveryState
	Resolution Resolution
	TerminalAt *time.Time
	Policy     Policy
}

// Prunes reports whether stage g prunes (payload) or deletes (evidence)
// the event described by f at p.Now. An event with deliveries qualifies
// once none is pending and its latest TerminalAt is at least its retention
// (the longest among its deliveries' endpoints) ago, a retention of 0
// keeping it forever; evidence keeps an event with an unresolved
// exhaustion, and a payload stage skips a payload already pruned. An event
// without deliveries ages from CreatedAt under the default.
func (g PruneStage) Prunes(f *PruneFacts, p *PruneParams) bool {
	if !g.Evidence && f.PayloadPruned {
		return false
	}
	if g.Undelivered != (len(f.Deliveries) == 0) {
		return false
	}
	if g.Undelivered {
		r := g.Default(p)
		return r > 0 && !f.CreatedAt.After(p.Now.Add(-r))
	}
	var (
		retention time.Duration
		ended     time.Time
	)
	for _, d := range f.Deliveries {
		if !d.State.Terminal() || d.TerminalAt == nil {
			return false
		}
		if g.Evidence && d.Resolution == ResolutionUnresolved {
			return false
		}
		retention = max(retention, g.Retention(d.Policy, p))
		if d.TerminalAt.After(ended) {
			ended = *d.TerminalAt
		}
	}
	return retention > 0 && !ended.After(p.Now.Add(-retention))
}

// PruneOutcome is what a Prune call whose Limit covers the event does to
// it: deleted by an evidence stage, else its payload pruned by a payload
// stage, else nothing.
func PruneOutcome(f *PruneFacts, p *PruneParams) (deleted, payloadPruned bool) {
	undelivered := len(f.Deliveries) == 0
	if (PruneStage{Evidence: true, Undelivered: undelivered}).Prunes(f, p) {
		return true, false
	}
	return false, PruneStage{Undelivered: undelivered}.Prunes(f, p)
}
