package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// RecoveryApply's orchestration, run once for both drivers inside the
// driver's transaction: a recorded item is replayed, otherwise the facts
// are planned (PlanRecovery) and the plan is turned into the rows to write
// (RecoveryWrite), a reissue request without a subscriber becoming a
// NoReissueHandler refusal. A driver implements only the reads and the
// write (RecoveryStatements) and the transaction (RecoveryTransactor).

// NamespaceEndpoint is a live endpoint of a namespace and its event-type
// patterns.
type NamespaceEndpoint struct {
	ID         string
	EventTypes []string
}

// RecoveryRead is what RecoveryApply reads first, in its transaction.
type RecoveryRead struct {
	// Recorded is the item recorded for (operation, delivery), or nil.
	Recorded *RecoveryItem
	// Found reports that the delivery exists; then Facts describe it.
	Found bool
	Facts RecoveryFacts
}

// RecoveryWrite is what RecoveryApply writes for one item, in the
// transaction that read its facts.
type RecoveryWrite struct {
	// Item is the item to record, for Original's endpoint, under ItemKey
	// (see Key).
	Item     RecoveryItem
	ItemKey  string
	Original Delivery
	// Event is the new event (a reissued copy or a reissue request), or nil.
	Event *Event
	// Deliveries are the new deliveries, scheduled at Now: Event's, or the
	// retry of Original (RetryOf set); a retry's and a reissued copy's are
	// re-sends (Resend), a reissue request's are not.
	Deliveries []Delivery
	// RequestEventID is the reissue request's event ID, kept with the item
	// so that the replacement completes it.
	RequestEventID string
	// Resolution is what Original, exhausted and unresolved, becomes; none
	// leaves it alone.
	Resolution Resolution
	// ReplayedEvent is the existing event a replay gives a new delivery
	// (""): one that reached no endpoint when published is no longer
	// undelivered, so retention ages it by its deliveries.
	ReplayedEvent string
	// Stats count the new deliveries and Original's resolution.
	Stats StatsDelta
	Now   time.Time
}

// RecoveryStatements are the statements of one RecoveryApply transaction.
type RecoveryStatements interface {
	// RecoveryRead reads the item recorded for (p.OperationKey,
	// p.DeliveryID) and the facts of the delivery, locked so that no
	// concurrent recovery or scrub changes them before RecoveryWrite.
	RecoveryRead(ctx context.Context, p *RecoveryApplyParams) (RecoveryRead, error)
	// LiveEndpoints returns the live endpoints of namespace.
	LiveEndpoints(ctx context.Context, namespace string) ([]NamespaceEndpoint, error)
	// RecoveryWrite writes w.
	RecoveryWrite(ctx context.Context, w *RecoveryWrite) error
}

// RecoveryTransactor runs fn in one transaction of the driver (again when
// the driver retries a conflict), op naming it in errors.
type RecoveryTransactor interface {
	RecoveryTx(ctx context.Context, op string, fn func(RecoveryStatements) error) error
}

// RecoveryApply implements Recovery.RecoveryApply over d.
func RecoveryApply(ctx context.Context, d RecoveryTransactor, p *RecoveryApplyParams) (RecoveryItem, error) {
	if err := ValidateRecoveryApply(p); err != nil {
		return RecoveryItem{}, err
	}
	var item RecoveryItem
	err := d.RecoveryTx(ctx, "recovery "+p.OperationKey+" of delivery "+p.DeliveryID, func(st RecoveryStatements) error {
		var err error
		item, err = applyRecovery(ctx, st, p)
		return err
	})
	if err != nil {
		return RecoveryItem{}, err
	}
	return item, nil
}

func applyRecovery(ctx context.Context, st RecoveryStatements, p *RecoveryApplyParams) (RecoveryItem, error) {
	rd, err := st.RecoveryRead(ctx, p)
	switch {
	case err != nil:
		return RecoveryItem{}, err
	case rd.Recorded != nil:
		it := *rd.Recorded
		it.Replayed = true
		return it, nil
	case !rd.Found:
		return RecoveryItem{}, fmt.Errorf("delivery %s: %w", p.DeliveryID, ErrNotFound)
	}
	f := &rd.Facts
	step, reason, err := PlanRecovery(p.Action, f, p.Now)
	if err != nil {
		return RecoveryItem{}, err
	}
	newEventID, newDeliveryID := p.NewIDs()
	w, err := planWrite(ctx, st, &itemPlan{
		Key: p.DeliveryID, Action: p.Action, Original: f.Delivery, Event: &f.Event, Operation: p.OperationKey,
		NewEventID: newEventID, NewDeliveryID: newDeliveryID, Now: p.Now,
	}, step, reason)
	if err != nil {
		return RecoveryItem{}, err
	}
	if err := st.RecoveryWrite(ctx, w); err != nil {
		return RecoveryItem{}, err
	}
	return w.Item, nil
}

// itemPlan is what planWrite needs of one item, a recovery's or a
// replay's.
type itemPlan struct {
	// Key is the item's key in the operation (RecoveryWrite.Key).
	Key       string
	Operation string
	Action    RecoveryAction
	// Original is the delivery the item resolves; for a replay without
	// one, only its EventID and EndpointID (the replay's endpoint) are set.
	Original                  Delivery
	Event                     *Event
	NewEventID, NewDeliveryID string
	Now                       time.Time
}

// lister lists the live endpoints of a namespace (a reissue request's
// subscribers).
type lister interface {
	LiveEndpoints(ctx context.Context, namespace string) ([]NamespaceEndpoint, error)
}

// planWrite turns step into the rows RecoveryApply or ReplayApply writes.
func planWrite(ctx context.Context, st lister, ip *itemPlan, step RecoveryStep, reason string) (*RecoveryWrite, error) {
	orig, ev := &ip.Original, ip.Event
	now := ip.Now.UTC()
	newEventID, newDeliveryID := ip.NewEventID, ip.NewDeliveryID
	w := &RecoveryWrite{
		Item: RecoveryItem{
			OperationKey: ip.Operation, DeliveryID: orig.ID, EventID: orig.EventID, Action: ip.Action,
			Reason: reason, CreatedAt: now,
		},
		ItemKey:  ip.Key,
		Original: *orig,
		Stats:    StatsDelta{},
		Now:      now,
	}
	scheduled := func(id, eventID, endpointID string) Delivery {
		w.Stats.Add(endpointID, StateScheduled, ResolutionNone, 1)
		return Delivery{ID: id, EventID: eventID, EndpointID: endpointID, State: StateScheduled, DueAt: now, CreatedAt: now}
	}
	// A retry, a replay and a reissued copy send an event again (to the
	// endpoint that missed it, or, replayed, to one that never had it):
	// re-sends, which the retry budget pays for. A reissue request is a
	// question to the producer's endpoints, sent once: not one.
	resend := func(d Delivery) Delivery {
		d.Resend = true
		return d
	}
	switch step {
	case StepRetry, StepReplay:
		d := resend(scheduled(newDeliveryID, orig.EventID, orig.EndpointID))
		d.RetryOf = orig.ID
		w.Deliveries = []Delivery{d}
		w.Item.NewDeliveryID, w.Item.NewDeliveryState = d.ID, StateScheduled
	case StepReissueCopy:
		w.Event = &Event{
			ID: newEventID, Namespace: ev.Namespace, Type: ev.Type, Data: ev.Data,
			ReissueOf: ev.ID, CreatedAt: now,
		}
		w.Event.copyContract(ev)
		// Its attempts continue the original's publish trace: the copy
		// resolves what that trace began (ADR 0051).
		w.Event.Trace = ev.Trace
		w.Deliveries = []Delivery{resend(scheduled(newDeliveryID, newEventID, orig.EndpointID))}
		w.Item.NewEventID, w.Item.NewDeliveryID, w.Item.NewDeliveryState = newEventID, newDeliveryID, StateScheduled
	case StepReissueRequest:
		live, err := st.LiveEndpoints(ctx, ev.Namespace)
		if err != nil {
			return nil, err
		}
		for _, ep := range live {
			if eventtype.MatchAny(ep.EventTypes, ReissueRequestedEventType) {
				w.Deliveries = append(w.Deliveries, scheduled(NewID("dlv", now), newEventID, ep.ID))
			}
		}
		if len(w.Deliveries) == 0 {
			step, w.Item.Reason = StepRefuse, RefusedNoReissueHandler
			break
		}
		data, err := json.Marshal(NewReissueRequestData(orig, ev, ip.Operation))
		if err != nil {
			return nil, fmt.Errorf("reissue request for %s: %w", ip.Key, err)
		}
		w.Event = &Event{ID: newEventID, Namespace: ev.Namespace, Type: ReissueRequestedEventType, Data: data, CreatedAt: now}
		w.RequestEventID, w.Item.NewEventID = newEventID, newEventID
	}
	w.Item.Outcome = step.Outcome()
	// A replay has no original unless the event's delivery to its
	// endpoint was exhausted and left unresolved.
	if w.Resolution = step.Resolution(); orig.ID == "" {
		w.Resolution = ResolutionNone
	}
	if w.Resolution != ResolutionNone {
		w.Stats.Move(orig.EndpointID, StateExhausted, ResolutionUnresolved, StateExhausted, w.Resolution)
	}
	return w, nil
}

// ReissueOriginals returns, once each, the events that the inserted
// events of results replace (ReissueOf): the originals whose recovery
// items awaiting a reissue EventInsertMany completes. Batches without
// ReissueOf return nil and allocate nothing.
func ReissueOriginals(results []EventInsertResult) []string {
	var originals []string
	for i := range results {
		if r := &results[i]; r.Err == nil && !r.Duplicate && r.Event.ReissueOf != "" && !slices.Contains(originals, r.Event.ReissueOf) {
			originals = append(originals, r.Event.ReissueOf)
		}
	}
	return originals
}

// Replacement is what completes a recovery item awaiting the reissue of
// original to endpoint: the first event of results that replaces it, and
// its delivery to endpoint ("" when it has none); nil when no event of
// results replaces original.
func Replacement(results []EventInsertResult, original, endpoint string) (event *Event, deliveryID string) {
	i := slices.IndexFunc(results, func(r EventInsertResult) bool {
		return r.Err == nil && !r.Duplicate && r.Event.ReissueOf == original
	})
	if i < 0 {
		return nil, ""
	}
	for _, d := range results[i].Deliveries {
		if d.EndpointID == endpoint {
			return &results[i].Event, d.ID
		}
	}
	return &results[i].Event, ""
}
