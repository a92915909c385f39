package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// subscriber is a live endpoint of a namespace and its type patterns.
type subscriber struct {
	id       string
	patterns []string
	filter   string
	paused   bool
	version  int64
}

// EventInsertMany implements ledger.Store. The endpoints of each namespace
// are loaded once per batch; an idempotency key costs one index lookup.
func (s *Store) EventInsertMany(ctx context.Context, params []*ledger.EventInsertParams) ([]ledger.EventInsertResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	var results []ledger.EventInsertResult
	err := s.write(ctx, "insert events", func(t *wtx) error {
		ds := ledger.StatsDelta{}
		var err error
		if results, err = s.insertEvents(t, params, ds); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// insertEvents applies a batch of inserts in t, adding their counter
// changes to ds.
func (s *Store) insertEvents(t *wtx, params []*ledger.EventInsertParams, ds ledger.StatsDelta) ([]ledger.EventInsertResult, error) {
	results := make([]ledger.EventInsertResult, len(params))
	subs := map[string][]subscriber{}
	quotas, err := s.quotaBatch(t, params)
	if err != nil {
		return nil, err
	}
	for i, p := range params {
		res, err := s.insertEvent(t, p, subs, quotas, ds)
		if err != nil {
			return nil, err
		}
		results[i] = res
	}
	if err := s.completeReissues(t, results, ds); err != nil {
		return nil, err
	}
	if err := s.saveQuotas(t, quotas); err != nil {
		return nil, err
	}
	return results, nil
}

// WriteMany implements ledger.Store: the records, then the inserts, in one
// write transaction, one counter update per endpoint.
func (s *Store) WriteMany(ctx context.Context, w *ledger.WriteBatch) (ledger.WriteResult, error) {
	var res ledger.WriteResult
	if len(w.Attempts) == 0 && len(w.Events) == 0 {
		return res, nil
	}
	err := s.write(ctx, "write attempts and events", func(t *wtx) error {
		ds := ledger.StatsDelta{}
		var err error
		if res.Attempts, err = s.recordAttempts(t, w.Attempts, ds); err != nil {
			return err
		}
		if res.Events, err = s.insertEvents(t, w.Events, ds); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return ledger.WriteResult{}, err
	}
	return res, nil
}

// insertEvent applies one item of a batch. A returned error aborts the
// batch; an idempotency conflict is the item's result.
func (s *Store) insertEvent(t *wtx, p *ledger.EventInsertParams, subs map[string][]subscriber, quotas *ledger.QuotaBatch, ds ledger.StatsDelta) (ledger.EventInsertResult, error) {
	if err := p.ValidateContract(); err != nil {
		return ledger.EventInsertResult{}, err
	}
	ev := p.NewEvent()
	eps, ok := subs[p.Namespace]
	if !ok {
		var err error
		if eps, err = s.subscribers(t, p.Namespace); err != nil {
			return ledger.EventInsertResult{}, err
		}
		subs[p.Namespace] = eps
	}
	var targets []subscriber
	var undecided []ledger.FilterTarget
	for _, ep := range eps {
		if p.Receives(ep.id, ep.patterns, ep.filter, &undecided) {
			targets = append(targets, ep)
		}
	}
	if err := ledger.CheckFanOut(p, len(targets), undecided); err != nil {
		// A key used before still answers its original: that event was
		// accepted when fewer endpoints matched.
		if p.IdempotencyKey != "" {
			if res, rerr := s.replayed(t, p); !errors.Is(rerr, ledger.ErrNotFound) {
				return res, rerr
			}
		}
		return ledger.EventInsertResult{Err: err}, nil
	}
	if quotas.Limited(p.Namespace) {
		// A key used before answers its original, neither checked nor
		// counted again; only a new event is held to the quota.
		if p.IdempotencyKey != "" {
			if res, rerr := s.replayed(t, p); !errors.Is(rerr, ledger.ErrNotFound) {
				return res, rerr
			}
		}
		if err := quotas.Admit(p); err != nil {
			return ledger.EventInsertResult{Err: err}, nil
		}
	}
	// Insert first: a key seen before makes the insert a no-op (ON
	// CONFLICT DO NOTHING), and only then is the original read. New keys,
	// the common case, cost one statement instead of two.
	inserted, err := s.storeEventIfNew(t, ev, p.QuotaBytes())
	if err != nil {
		return ledger.EventInsertResult{}, err
	}
	if !inserted {
		return s.replayed(t, p)
	}
	res := ledger.EventInsertResult{Event: ev}
	for _, ep := range targets {
		d := p.NewDelivery(ledger.NewID("dlv", p.Now), ev.ID, ep.id, ep.paused)
		if err := s.insertDelivery(t, d, ev.ValidUntil); err != nil {
			return ledger.EventInsertResult{}, err
		}
		ds.Add(ep.id, d.State, ledger.ResolutionNone, 1)
		res.Deliveries = append(res.Deliveries, d)
		if d.State == ledger.StateInFlight {
			res.Leased = append(res.Leased, ledger.ClaimedDelivery{Delivery: d, Event: ev, EndpointVersion: ep.version})
		}
	}
	if len(res.Deliveries) == 0 {
		if err := s.markUndelivered(t, &res.Event, p.Now); err != nil {
			return ledger.EventInsertResult{}, err
		}
	}
	return res, nil
}

// replayed answers an item whose idempotency key was used before: the
// original event and deliveries when the body matches, a conflict when it
// does not.
func (s *Store) replayed(t *wtx, p *ledger.EventInsertParams) (ledger.EventInsertResult, error) {
	op := "insert event " + p.ID
	orig, err := scanEvent(t.stmt(s.ws.eventByKey).QueryRowContext(t.ctx, p.Namespace, p.IdempotencyKey))
	if err := translate(op+": idempotency key", err); err != nil {
		return ledger.EventInsertResult{}, err
	}
	if !bytes.Equal(orig.BodyHash, p.BodyHash) {
		return ledger.EventInsertResult{Err: fmt.Errorf("event %s: idempotency key %q of event %s: %w",
			p.ID, p.IdempotencyKey, orig.ID, ledger.ErrIdempotencyConflict)}, nil
	}
	rows, err := t.stmt(s.ws.deliveriesByEvent).QueryContext(t.ctx, orig.ID)
	if err != nil {
		return ledger.EventInsertResult{}, translate(op+": original deliveries", err)
	}
	dels, err := collectDeliveries(rows)
	if err != nil {
		return ledger.EventInsertResult{}, translate(op+": original deliveries", err)
	}
	return ledger.EventInsertResult{Event: orig, Deliveries: dels, Duplicate: true}, nil
}

// storeEvent inserts an event row; secrets are written revealed.
func (s *Store) storeEvent(t *wtx, ev ledger.Event) error {
	inserted, err := s.storeEventIfNew(t, ev, 0)
	if err == nil && !inserted {
		err = fmt.Errorf("insert event %s: idempotency key %q already used", ev.ID, ev.IdempotencyKey)
	}
	return err
}

// storeEventIfNew inserts an event row unless its idempotency key was used
// in its namespace before, and reports whether it did. quotaBytes is what
// the event counts against its namespace's payload bytes (0: not a
// publish).
func (s *Store) storeEventIfNew(t *wtx, ev ledger.Event, quotaBytes int64) (bool, error) {
	names, err := jsonText(ev.SecretNames)
	if err != nil {
		return false, fmt.Errorf("insert event %s: secret names: %w", ev.ID, err)
	}
	if ev.SecretNames == nil {
		names = "[]"
	}
	override, err := nullPolicy(ev.PolicyOverride)
	if err != nil {
		return false, fmt.Errorf("insert event %s: policy override: %w", ev.ID, err)
	}
	res, err := t.stmt(s.ws.eventInsert).ExecContext(t.ctx, ev.ID, ev.Namespace, ev.Type, []byte(ev.Data),
		nullBytes(ev.Secrets.Reveal()), names, ev.ReissueOf, ev.IdempotencyKey, nullBytes(ev.BodyHash), nanos(ev.CreatedAt),
		ev.TypeGeneration, string(ev.ReplayClass), nullNanosPtr(ev.ValidUntil), override, quotaBytes, ev.Trace.Parent, ev.Trace.State)
	if err != nil {
		return false, translate("insert event "+ev.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, translate("insert event "+ev.ID, err)
	}
	return n == 1, nil
}

// storeDelivery inserts a delivery scheduled at now and returns it.
func (s *Store) storeDelivery(t *wtx, eventID, endpointID string, now time.Time) (ledger.Delivery, error) {
	p := ledger.EventInsertParams{Now: now}
	d := p.NewDelivery(ledger.NewID("dlv", now), eventID, endpointID, false)
	return d, s.insertDelivery(t, d, nil)
}

// insertDelivery inserts a new delivery (scheduled, or leased by its
// publisher) of an event valid until validUntil (nil: no bound).
func (s *Store) insertDelivery(t *wtx, d ledger.Delivery, validUntil *time.Time) error {
	_, err := t.stmt(s.ws.deliveryInsert).ExecContext(t.ctx, d.ID, d.EventID, d.EndpointID, string(d.State),
		nanos(d.DueAt), d.LeaseOwner, nullNanosPtr(d.LeaseUntil), d.Resend, nullNanosPtr(validUntil))
	return translate("insert delivery of event "+d.EventID+" to "+d.EndpointID, err)
}

// subscribers loads the live endpoints of a namespace.
func (s *Store) subscribers(t *wtx, namespace string) ([]subscriber, error) {
	op := "endpoints of namespace " + namespace
	rows, err := t.stmt(s.ws.namespaceEndpoints).QueryContext(t.ctx, namespace)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []subscriber
	for rows.Next() {
		var (
			sub   subscriber
			types string
		)
		if err := rows.Scan(&sub.id, &types, &sub.filter, &sub.paused, &sub.version); err != nil {
			return nil, translate(op, err)
		}
		if err := json.Unmarshal([]byte(types), &sub.patterns); err != nil {
			return nil, fmt.Errorf("%s: event types of %s: %w", op, sub.id, err)
		}
		out = append(out, sub)
	}
	return out, translate(op, rows.Err())
}

// EventGet implements ledger.Store.
func (s *Store) EventGet(ctx context.Context, id string) (ledger.Event, error) {
	ev, err := scanEvent(s.rs.eventGet.QueryRowContext(ctx, id))
	if err != nil {
		return ledger.Event{}, translate("get event "+id, err)
	}
	return ev, nil
}
