package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// deliveryColumns lists a delivery in the order deliveryRow scans it; use
// it with the table alias d.
const deliveryColumns = `d.id, d.event_id, d.endpoint_id, d.state, d.attempts, d.due_at,
	d.first_attempt_at, d.lease_owner, d.lease_until, d.ack_deadline, d.last_status,
	d.last_error, d.exhaust_reason, d.resolution, d.terminal_at, d.created_at, d.retry_of, d.resolved_by, d.resend`

// deliveryRow receives deliveryColumns.
type deliveryRow struct {
	d                                                 ledger.Delivery
	state, reason, resolution                         string
	dueAt, createdAt                                  int64
	firstAttemptAt, leaseUntil, ackDeadline, terminal *int64
}

func (r *deliveryRow) dests() []any {
	return []any{&r.d.ID, &r.d.EventID, &r.d.EndpointID, &r.state, &r.d.Attempts, &r.dueAt,
		&r.firstAttemptAt, &r.d.LeaseOwner, &r.leaseUntil, &r.ackDeadline, &r.d.LastStatus,
		&r.d.LastError, &r.reason, &r.resolution, &r.terminal, &r.createdAt, &r.d.RetryOf, &r.d.ResolvedBy, &r.d.Resend}
}

func (r *deliveryRow) value() ledger.Delivery {
	d := r.d
	d.State = ledger.DeliveryState(r.state)
	d.ExhaustReason = ledger.ExhaustReason(r.reason)
	d.Resolution = ledger.Resolution(r.resolution)
	d.DueAt, d.CreatedAt = fromNanos(r.dueAt), fromNanos(r.createdAt)
	d.FirstAttemptAt = fromNullNanos(r.firstAttemptAt)
	d.LeaseUntil = fromNullNanos(r.leaseUntil)
	d.AckDeadline = fromNullNanos(r.ackDeadline)
	d.TerminalAt = fromNullNanos(r.terminal)
	return d
}

func scanDelivery(row pgx.CollectableRow) (ledger.Delivery, error) {
	var r deliveryRow
	if err := row.Scan(r.dests()...); err != nil {
		return ledger.Delivery{}, err
	}
	return r.value(), nil
}

// DeliveryGet implements ledger.Store.
func (s *Store) DeliveryGet(ctx context.Context, id string) (ledger.Delivery, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries d WHERE d.id = $1`, id)
	if err != nil {
		return ledger.Delivery{}, translate("get delivery "+id, err)
	}
	d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
	return d, translate("get delivery "+id, err)
}

// AttemptList implements ledger.Store. An unknown delivery is ErrNotFound;
// the outer join tells it from one without attempts in the same query.
func (s *Store) AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error) {
	op := "list attempts of " + deliveryID
	rows, err := s.pool.Query(ctx, `
		SELECT d.id, a.number, a.started_at, a.duration, a.status_code, a.error, a.response_excerpt
		FROM deliveries d LEFT JOIN attempts a ON a.delivery_id = d.id
		WHERE d.id = $1 ORDER BY a.number`, deliveryID)
	if err != nil {
		return nil, translate(op, err)
	}
	var (
		found               bool
		as                  []ledger.Attempt
		a                   ledger.Attempt
		number, status      *int
		startedAt, duration *int64
		errText             *string
	)
	_, err = pgx.ForEachRow(rows, []any{&a.DeliveryID, &number, &startedAt, &duration, &status, &errText, &a.ResponseExcerpt}, func() error {
		found = true
		if number == nil { // the delivery has no attempt
			return nil
		}
		a.Number, a.StatusCode, a.Error = *number, *status, *errText
		a.StartedAt, a.Duration = fromNanos(*startedAt), time.Duration(*duration)
		as = append(as, a)
		return nil
	})
	if err == nil && !found {
		err = pgx.ErrNoRows
	}
	if err != nil {
		return nil, translate(op, err)
	}
	return as, nil
}
