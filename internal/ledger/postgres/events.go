package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// EventInsertMany implements ledger.Store. One transaction, a fixed number
// of round trips: BEGIN, lock the namespaces' endpoints and read the events
// that already hold the batch's idempotency keys (one pipeline), decide
// every item in Go, insert everything in one statement, update the
// counters, COMMIT. That is two round trips, with idempotency keys or
// without: the insert rides with the counters and COMMIT (a key taken
// meanwhile runs the transaction again, eventBatch.queue).
func (s *Store) EventInsertMany(ctx context.Context, params []*ledger.EventInsertParams) ([]ledger.EventInsertResult, error) {
	op := fmt.Sprintf("insert %d events", len(params))
	if err := checkInserts(op, params); err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, nil
	}
	var results []ledger.EventInsertResult
	err := s.tx(ctx, op, func(tx *txn) error {
		tx.genericPlans()
		var err error
		delta := ledger.StatsDelta{}
		if results, err = ingest(ctx, tx, params, delta); err != nil {
			return err
		}
		tx.queueStats(delta)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// WriteMany implements ledger.Store: the records, then the inserts, in one
// transaction, their counter changes in one update at the end. Two round
// trips, as each kind alone: BEGIN with the records' locks and the
// inserts' reads (one pipeline, records' locks first, in the global
// order), then every write with the counters and COMMIT. The inserts'
// reads see nothing of the records' writes, which touch neither
// endpoints nor idempotency keys (dead letters have none).
func (s *Store) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	op := fmt.Sprintf("record %d attempts and insert %d events", len(w.Attempts), len(w.Events))
	for i, p := range w.Attempts {
		if p == nil {
			return ledger.WriteResult{}, fmt.Errorf("%s: attempt %d is nil", op, i)
		}
	}
	if err := checkInserts(op, w.Events); err != nil {
		return ledger.WriteResult{}, err
	}
	var res ledger.WriteResult
	if len(w.Attempts) == 0 && len(w.Events) == 0 {
		return res, nil
	}
	err := s.tx(ctx, op, func(tx *txn) error {
		tx.genericPlans()
		b := &pgx.Batch{}
		locks := queueRecordLocks(b, w.Attempts)
		pre := queuePreload(b, w.Events)
		if err := sendReads(ctx, tx, b, "lock deliveries and read endpoints and idempotency keys"); err != nil {
			return err
		}
		delta := ledger.StatsDelta{}
		var err error
		if res.Attempts, err = recordLocked(tx, w.Attempts, locks, delta); err != nil {
			return err
		}
		if res.Events, err = ingestLoaded(ctx, tx, w.Events, pre, delta); err != nil {
			return err
		}
		tx.queueStats(delta)
		return nil
	})
	if err != nil {
		return ledger.WriteResult{}, err
	}
	return res, nil
}

// checkInserts refuses a batch with an incomplete item.
func checkInserts(op string, params []*ledger.EventInsertParams) error {
	for i, p := range params {
		if p == nil || p.ID == "" || p.Namespace == "" || p.Type == "" {
			return fmt.Errorf("%s: item %d: ID, Namespace and Type are required", op, i)
		}
		if err := p.ValidateContract(); err != nil {
			return fmt.Errorf("%s: item %d: %w", op, i, err)
		}
	}
	return nil
}

// idemKey identifies an idempotency key within its namespace.
type idemKey struct{ namespace, key string }

func keyOf(p *ledger.EventInsertParams) (idemKey, bool) {
	return idemKey{p.Namespace, p.IdempotencyKey}, p.IdempotencyKey != ""
}

// original is the event that holds an idempotency key: stored before the
// batch (stored), or the batch item at index item.
type original struct {
	stored *ledger.EventInsertResult
	item   int
}

// ingest applies a batch of inserts in tx, adding their counter changes to
// delta: it reads in one round trip (queuePreload) and queues its writes
// (ingestLoaded).
func ingest(ctx context.Context, tx *txn, params []*ledger.EventInsertParams, delta ledger.StatsDelta) ([]ledger.EventInsertResult, error) {
	b := &pgx.Batch{}
	pre := queuePreload(b, params)
	if err := sendReads(ctx, tx, b, "read endpoints and idempotency keys"); err != nil {
		return nil, err
	}
	return ingestLoaded(ctx, tx, params, pre, delta)
}

// ingestLoaded decides a batch of inserts on what queuePreload read and
// queues the insert for tx's next pipeline (with the counters and COMMIT,
// or a reissue's reads): preload found every key it decides on free, and
// a key taken meanwhile fails the transaction, which runs again
// (eventBatch.queue).
func ingestLoaded(ctx context.Context, tx *txn, params []*ledger.EventInsertParams, pre *preloaded, delta ledger.StatsDelta) ([]ledger.EventInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	results := make([]ledger.EventInsertResult, len(params))
	originals := make(map[idemKey]original, len(pre.stored))
	for k, r := range pre.stored {
		originals[k] = original{stored: r, item: -1}
	}
	decide(params, results, originals, pre.endpoints, pre.quotas)

	batch := &eventBatch{}
	for i := range params {
		if r := &results[i]; r.Err == nil && !r.Duplicate {
			if err := batch.add(r.Event, r.Deliveries); err != nil {
				return nil, err
			}
			batch.quotaBytes[len(batch.quotaBytes)-1] = params[i].QuotaBytes()
		}
	}
	batch.queue(tx)
	queueQuotaSaves(tx, pre.quotas)

	for i := range results {
		if r := &results[i]; r.Err == nil && !r.Duplicate {
			for _, d := range r.Deliveries {
				delta.Add(d.EndpointID, d.State, ledger.ResolutionNone, 1)
			}
		}
	}
	if err := completeReissues(ctx, tx, results, delta); err != nil {
		return nil, err
	}
	queueUndelivered(tx, results)
	return results, nil
}

// decide fills results in item order as if the items were inserted one by
// one: an item whose key is held by an original becomes a duplicate of it
// (same body hash) or a conflict; any other item becomes a new event with
// one scheduled delivery per matching endpoint, or is refused for matching
// too many or by its namespace's quota (which counts it when it is not).
func decide(params []*ledger.EventInsertParams, results []ledger.EventInsertResult, originals map[idemKey]original, endpoints map[string][]fanoutEndpoint, quotas *ledger.QuotaBatch) {
	for i, p := range params {
		k, hasKey := keyOf(p)
		if o, ok := originals[k]; hasKey && ok {
			orig := o.stored
			if orig == nil {
				orig = &results[o.item]
			}
			if !bytes.Equal(orig.Event.BodyHash, p.BodyHash) {
				results[i] = ledger.EventInsertResult{Err: fmt.Errorf("event %s: key %q in namespace %s: %w",
					p.ID, p.IdempotencyKey, p.Namespace, ledger.ErrIdempotencyConflict)}
				continue
			}
			results[i] = ledger.EventInsertResult{Event: orig.Event, Deliveries: slices.Clone(orig.Deliveries), Duplicate: true}
			continue
		}
		results[i] = newEvent(p, endpoints[p.Namespace])
		if results[i].Err == nil {
			if err := quotas.Admit(p); err != nil {
				results[i] = ledger.EventInsertResult{Err: err}
			}
		}
		if results[i].Err != nil {
			continue // refused: the key stays free
		}
		if hasKey {
			originals[k] = original{item: i}
		}
	}
}

// newEvent builds the event of p and its deliveries, or the refusal of an
// event that matches more than p.MaxFanOut endpoints.
func newEvent(p *ledger.EventInsertParams, endpoints []fanoutEndpoint) ledger.EventInsertResult {
	now := fromNanos(nanos(p.Now))
	e := p.NewEvent()
	e.CreatedAt = now
	var ds []ledger.Delivery
	var leased []ledger.ClaimedDelivery
	var undecided []ledger.FilterTarget
	for _, ep := range endpoints {
		if p.Receives(ep.id, ep.eventTypes, ep.filter, &undecided) {
			d := p.NewDelivery(ledger.NewID("dlv", now), e.ID, ep.id, ep.paused)
			ds = append(ds, d)
			if d.State == ledger.StateInFlight {
				leased = append(leased, ledger.ClaimedDelivery{Delivery: d, Event: e, EndpointVersion: ep.version})
			}
		}
	}
	if err := ledger.CheckFanOut(p, len(ds), undecided); err != nil {
		return ledger.EventInsertResult{Err: err}
	}
	if len(ds) == 0 {
		e.DropUndeliveredSecrets()
	}
	return ledger.EventInsertResult{Event: e, Deliveries: ds, Leased: leased}
}

// scheduledDelivery is a new delivery of event to endpoint, due at now.
func scheduledDelivery(eventID, endpointID string, now time.Time) ledger.Delivery {
	return ledger.Delivery{
		ID:         ledger.NewID("dlv", now),
		EventID:    eventID,
		EndpointID: endpointID,
		State:      ledger.StateScheduled,
		DueAt:      now,
		CreatedAt:  now,
	}
}
