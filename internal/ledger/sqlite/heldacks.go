package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// AckHold implements ledger.HeldAcks.
func (s *Store) AckHold(ctx context.Context, p *ledger.AckRecordParams) (ledger.Delivery, error) {
	return ledger.AckHold(ctx, driver{s}, p)
}

// AckHoldInsert implements ledger.AckStatements. The single writer orders
// it with the attempt's record: either the record committed first (the
// delivery is awaiting_ack and the caller applies the acknowledgement) or
// the record finds the held acknowledgement.
func (dr driver) AckHoldInsert(ctx context.Context, op string, p *ledger.AckRecordParams) (ledger.Delivery, bool, error) {
	var held bool
	err := dr.write(ctx, op, func(t *wtx) error {
		var state, mode string
		err := t.tx.QueryRowContext(t.ctx, `SELECT d.state, e.ack_mode FROM deliveries d
			JOIN endpoints e ON e.id = d.endpoint_id WHERE d.id = ?1`, p.DeliveryID).Scan(&state, &mode)
		if err != nil {
			return translate(op, err) // ErrNotFound when it does not exist
		}
		if state != string(ledger.StateInFlight) || mode != string(ledger.AckCallback) {
			return nil
		}
		_, err = t.tx.ExecContext(t.ctx, `INSERT INTO held_acks (delivery_id, outcome, reason, received_at)
			VALUES (?1, ?2, ?3, ?4) ON CONFLICT (delivery_id) DO UPDATE
			SET outcome = excluded.outcome, reason = excluded.reason, received_at = excluded.received_at`,
			p.DeliveryID, string(p.Outcome), ledger.TruncateAckReason(p.Reason), nanos(p.Now))
		held = err == nil
		return translate(op, err)
	})
	if err != nil {
		return ledger.Delivery{}, false, err
	}
	d, err := dr.DeliveryGet(ctx, p.DeliveryID)
	if err != nil {
		return ledger.Delivery{}, false, fmt.Errorf("%s: %w", op, err)
	}
	return d, held, nil
}

// AckHeldTake implements ledger.HeldAcks. It looks on a read connection
// first, so that the common case (nothing held) costs no write
// transaction.
func (s *Store) AckHeldTake(ctx context.Context, ids []string) ([]ledger.AckRecordParams, error) {
	const op = "take held acknowledgements"
	if len(ids) == 0 {
		return nil, nil
	}
	in := "?" + strings.Repeat(", ?", len(ids)-1)
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM held_acks WHERE delivery_id IN (`+in+`)`, args...).Scan(&n)
	if err != nil || n == 0 {
		return nil, translate(op, err)
	}
	var held []ledger.AckRecordParams
	err = s.write(ctx, op, func(t *wtx) error {
		held = held[:0]
		rows, err := t.tx.QueryContext(t.ctx, `DELETE FROM held_acks WHERE delivery_id IN (`+in+`)
			RETURNING delivery_id, outcome, reason, received_at`, args...)
		if err != nil {
			return translate(op, err)
		}
		defer rows.Close()
		for rows.Next() {
			var (
				p          ledger.AckRecordParams
				outcome    string
				receivedAt int64
			)
			if err := rows.Scan(&p.DeliveryID, &outcome, &p.Reason, &receivedAt); err != nil {
				return translate(op, err)
			}
			p.Outcome, p.Now = ledger.AckOutcome(outcome), fromNanos(receivedAt)
			held = append(held, p)
		}
		return translate(op, rows.Err())
	})
	if err != nil {
		return nil, err
	}
	return held, nil
}

var _ ledger.HeldAcks = (*Store)(nil)

var _ ledger.AckStatements = driver{}
