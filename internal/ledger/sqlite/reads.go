package sqlite

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// DeliveryGet implements ledger.Store.
func (s *Store) DeliveryGet(ctx context.Context, id string) (ledger.Delivery, error) {
	d, err := scanDelivery(s.rs.deliveryGet.QueryRowContext(ctx, id))
	if err != nil {
		return ledger.Delivery{}, translate("get delivery "+id, err)
	}
	return d, nil
}

// AttemptList implements ledger.Store.
func (s *Store) AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error) {
	op := "list attempts of delivery " + deliveryID
	rows, err := s.rs.attemptList.QueryContext(ctx, deliveryID)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	var out []ledger.Attempt
	for rows.Next() {
		var (
			a                 ledger.Attempt
			number, status    int64
			started, duration int64
		)
		if err := rows.Scan(&a.DeliveryID, &number, &started, &duration, &status, &a.Error, &a.ResponseExcerpt); err != nil {
			return nil, translate(op, err)
		}
		a.Number, a.StatusCode = int(number), int(status)
		a.StartedAt, a.Duration = fromNanos(started), time.Duration(duration)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(op, err)
	}
	if len(out) == 0 {
		// No attempts yet, or no such delivery.
		var one int
		if err := s.rs.deliveryExists.QueryRowContext(ctx, deliveryID).Scan(&one); err != nil {
			return nil, translate(op, err)
		}
	}
	return out, nil
}
