package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// AckHold implements ledger.HeldAcks.
func (s *Store) AckHold(ctx context.Context, p *ledger.AckRecordParams) (ledger.Delivery, error) {
	return ledger.AckHold(ctx, driver{s}, p)
}

// AckHoldInsert implements ledger.AckStatements. It locks the delivery
// row, as AttemptRecordMany does, so that it is ordered with the
// attempt's record on every replica: either the record committed first
// (the delivery is awaiting_ack and the caller applies the
// acknowledgement) or the record's caller finds the held acknowledgement
// once it committed.
func (dr driver) AckHoldInsert(ctx context.Context, op string, p *ledger.AckRecordParams) (ledger.Delivery, bool, error) {
	var (
		d    ledger.Delivery
		held bool
	)
	err := dr.tx(ctx, op, func(tx *txn) error {
		held = false
		rows, err := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries d WHERE d.id = $1 FOR UPDATE`, p.DeliveryID)
		if err != nil {
			return err
		}
		if d, err = pgx.CollectExactlyOneRow(rows, scanDelivery); err != nil {
			return err // ErrNoRows: ErrNotFound
		}
		if d.State != ledger.StateInFlight {
			return nil
		}
		tag, err := tx.Exec(ctx, `INSERT INTO held_acks (delivery_id, outcome, reason, received_at)
			SELECT $1, $2, $3, $4 FROM endpoints e WHERE e.id = $5 AND e.ack_mode = $6
			ON CONFLICT (delivery_id) DO UPDATE
			SET outcome = excluded.outcome, reason = excluded.reason, received_at = excluded.received_at`,
			p.DeliveryID, string(p.Outcome), ledger.TruncateAckReason(p.Reason), nanos(p.Now), d.EndpointID, string(ledger.AckCallback))
		held = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return ledger.Delivery{}, false, err
	}
	return d, held, nil
}

// AckHeldTake implements ledger.HeldAcks: one statement, so that two
// replicas taking the same acknowledgement see it once.
func (s *Store) AckHeldTake(ctx context.Context, ids []string) ([]ledger.AckRecordParams, error) {
	const op = "take held acknowledgements"
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `DELETE FROM held_acks WHERE delivery_id = ANY($1)
		RETURNING delivery_id, outcome, reason, received_at`, ids)
	if err != nil {
		return nil, translate(op, err)
	}
	held, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ledger.AckRecordParams, error) {
		var (
			p          ledger.AckRecordParams
			outcome    string
			receivedAt int64
		)
		err := row.Scan(&p.DeliveryID, &outcome, &p.Reason, &receivedAt)
		p.Outcome, p.Now = ledger.AckOutcome(outcome), fromNanos(receivedAt)
		return p, err
	})
	return held, translate(op, err)
}

var _ ledger.HeldAcks = (*Store)(nil)

var _ ledger.AckStatements = driver{}
