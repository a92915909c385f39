package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// AttemptRecordMany implements ledger.Store.
func (s *Store) AttemptRecordMany(ctx context.Context, params []*ledger.AttemptRecordParams) ([]ledger.AttemptRecordResult, error) {
	if len(params) == 0 {
		return nil, nil
	}
	var results []ledger.AttemptRecordResult
	err := s.write(ctx, "record attempts", func(t *wtx) error {
		ds := ledger.StatsDelta{}
		var err error
		if results, err = s.recordAttempts(t, params, ds); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// recordAttempts applies a batch of attempt records in t, adding their
// counter changes to ds.
func (s *Store) recordAttempts(t *wtx, params []*ledger.AttemptRecordParams, ds ledger.StatsDelta) ([]ledger.AttemptRecordResult, error) {
	results := make([]ledger.AttemptRecordResult, len(params))
	if len(params) == 0 {
		return results, nil
	}
	fa := ledger.FirstAttempts{}
	st := ledger.SettledEvents{}
	oc := ledger.OutcomeDeltas{}
	for i, p := range params {
		res, secrets, err := s.recordAttempt(t, p, ds)
		if err != nil {
			return nil, err
		}
		results[i] = res
		fa.Note(p, res)
		if secrets {
			st.Note(res.Delivery, p.Now)
		}
		oc.Note(res.Delivery, p.Now)
	}
	if err := s.settle(t, st); err != nil {
		return nil, err
	}
	if err := s.applyOutcomes(t, oc); err != nil {
		return nil, err
	}
	if err := applyFirstAttempts(t, s.rc.budgetFirst, fa); err != nil {
		return nil, err
	}
	return results, nil
}

// recordAttempt applies one item, and reports whether the delivery's event
// held secrets when it was read: secrets are stored with the event and
// only ever dropped, so an event without them has none for the settlement
// to scrub, which then costs no statement (as on PostgreSQL, ADR 0029). A
// returned error aborts the batch; a lost lease, an unknown delivery or an
// invalid transition is the item's result and changes nothing.
func (s *Store) recordAttempt(t *wtx, p *ledger.AttemptRecordParams, ds ledger.StatsDelta) (_ ledger.AttemptRecordResult, secrets bool, _ error) {
	op := "record attempt of delivery " + p.DeliveryID
	tr, err := p.Transition()
	if err != nil {
		return ledger.AttemptRecordResult{Err: fmt.Errorf("%s: %w", op, err)}, false, nil
	}
	d, secrets, moved, err := s.moveLeasedCopy(t, p, tr)
	if err != nil {
		return ledger.AttemptRecordResult{}, false, translate(op, err)
	}
	if !moved {
		// The row is read, moved by tr.Apply and written back by its
		// rowid (conformance: AttemptTransition): no RETURNING, which
		// costs SQLite an ephemeral table per statement.
		var rowid int64
		var before ledger.Delivery
		dest, finish := deliveryDest(&before)
		err = t.stmt(s.ws.attemptLeased).QueryRowContext(t.ctx, p.DeliveryID, p.Owner).Scan(append(append([]any{&rowid}, dest...), &secrets)...)
		if errors.Is(err, sql.ErrNoRows) {
			return ledger.AttemptRecordResult{Err: s.leaseLost(t, op, p.DeliveryID, p.Owner)}, false, nil
		}
		if err != nil {
			return ledger.AttemptRecordResult{}, false, translate(op, err)
		}
		finish()
		d = before
		tr.Apply(&d)
		if _, err := s.writeAttemptTransition(t, rowid, before, &d, false); err != nil {
			return ledger.AttemptRecordResult{}, false, translate(op, err)
		}
	}
	a := p.Attempt
	if !p.Unsent {
		if _, err := t.stmt(s.ws.attemptInsert).ExecContext(t.ctx, d.ID, int64(d.Attempts), p.Owner, nanos(a.StartedAt),
			int64(a.Duration), int64(a.StatusCode), a.Error, nullBytes(a.ResponseExcerpt), nanos(p.Now)); err != nil {
			return ledger.AttemptRecordResult{}, false, translate(op, err)
		}
	}
	tr.Stats(ds, d.EndpointID, p.Now)

	res := ledger.AttemptRecordResult{Delivery: d}
	if tr.State == ledger.StateExhausted {
		if res.DeadLetter, err = s.deadLetter(t, d, p.Now, ds); err != nil {
			return ledger.AttemptRecordResult{}, false, err
		}
	}
	return res, secrets, nil
}

// moveLeasedCopy records tr from the copy of the row that p's lease handed
// out (p.Leased), without reading the row: the update changes it only if
// it still is that copy. It reports whether it did (moved), the delivery
// as moved, and whether the copy's event held secrets. A record without a
// copy, or whose copy is not of this lease, moves nothing.
func (s *Store) moveLeasedCopy(t *wtx, p *ledger.AttemptRecordParams, tr ledger.AttemptTransition) (d ledger.Delivery, secrets, moved bool, _ error) {
	c := p.Leased
	if c == nil || c.Delivery.ID != p.DeliveryID || c.Delivery.State != ledger.StateInFlight || c.Delivery.LeaseOwner != p.Owner {
		return d, false, false, nil
	}
	before := c.Delivery
	stored(&before)
	d = before
	tr.Apply(&d)
	n, err := s.writeAttemptTransition(t, before.ID, before, &d, true)
	if err != nil || n == 0 {
		return ledger.Delivery{}, false, false, err
	}
	return d, len(c.Event.Secrets) > 0, true, nil
}

// writeAttemptTransition writes d, the row moved from before by an
// AttemptTransition, with the attemptUpdate variant that leaves out the
// columns with indexes of their own (resolution, terminal_at) that the
// transition did not change. row is the rowid the record read, or, from
// the lease's copy (fromCopy), the delivery's ID, and the row must then
// still be before. It returns the number of rows written. d's times
// become what reading the row back returns.
func (s *Store) writeAttemptTransition(t *wtx, row any, before ledger.Delivery, d *ledger.Delivery, fromCopy bool) (int64, error) {
	stored(d)
	resolution := d.ExhaustReason != before.ExhaustReason || d.Resolution != before.Resolution
	terminal := !sameNanos(d.TerminalAt, before.TerminalAt)
	args := []any{row, string(d.State), int64(d.Attempts), nullNanosPtr(d.FirstAttemptAt), nanos(d.DueAt),
		nullNanosPtr(d.AckDeadline), int64(d.LastStatus), d.LastError, d.LeaseOwner, nullNanosPtr(d.LeaseUntil),
		string(d.ExhaustReason), string(d.Resolution), nullNanosPtr(d.TerminalAt)}
	switch {
	case fromCopy: // ?30
		b := &before
		args = append(args, b.EventID, b.EndpointID, nanos(b.DueAt), b.LeaseOwner, nullNanosPtr(b.LeaseUntil),
			int64(b.Attempts), nullNanosPtr(b.FirstAttemptAt), nullNanosPtr(b.AckDeadline), int64(b.LastStatus),
			b.LastError, string(b.ExhaustReason), string(b.Resolution), nullNanosPtr(b.TerminalAt), nanos(b.CreatedAt),
			b.RetryOf, b.ResolvedBy, b.Resend)
	case terminal: // ?13
	case resolution:
		args = args[:12]
	default:
		args = args[:10]
	}
	r, err := t.stmt(s.ws.attemptUpdate[variantKey(resolution, terminal, fromCopy)]).ExecContext(t.ctx, args...)
	if err != nil {
		return 0, err
	}
	return r.RowsAffected()
}

// deadLetter inserts the hookkeeper.delivery.exhausted event for the
// exhausted delivery d and its one delivery to the dead-letter endpoint
// named by d's endpoint, if that endpoint exists in the same namespace.
func (s *Store) deadLetter(t *wtx, d ledger.Delivery, now time.Time, ds ledger.StatsDelta) (*ledger.Delivery, error) {
	op := "dead-letter delivery " + d.ID
	var namespace, target, owner, eventType string
	err := t.stmt(s.ws.endpointForDeadLetter).QueryRowContext(t.ctx, d.EndpointID, d.EventID).Scan(&namespace, &target, &owner, &eventType)
	if err != nil {
		return nil, translate(op, err)
	}
	if target == "" || !ledger.DeadLetters(eventType) {
		return nil, nil
	}
	var targetNamespace string
	err = t.stmt(s.ws.deadLetterTarget).QueryRowContext(t.ctx, target).Scan(&targetNamespace)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && targetNamespace != namespace) {
		return nil, nil
	}
	if err != nil {
		return nil, translate(op, err)
	}
	data, err := json.Marshal(ledger.NewDeadLetterData(d, eventType, owner, now))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	ev := ledger.Event{
		ID: ledger.NewID("evt", now), Namespace: namespace, Type: ledger.DeadLetterEventType,
		Data: data, CreatedAt: now.UTC(),
	}
	if err := s.storeEvent(t, ev); err != nil {
		return nil, err
	}
	dl, err := s.storeDelivery(t, ev.ID, target, now)
	if err != nil {
		return nil, err
	}
	ds.Add(target, ledger.StateScheduled, ledger.ResolutionNone, 1)
	return &dl, nil
}
