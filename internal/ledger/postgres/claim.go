package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// claimSQL leases due deliveries. The inner SELECT walks deliveries_claimable
// in due order and locks rows with SKIP LOCKED, so concurrent claimers (in
// this process or another) each take rows the others do not hold, and a
// row another claimer leased and committed meanwhile is re-checked against
// the WHERE clause and dropped. An in-flight row qualifies once its lease
// expired; its due_at is in the past then, so one range scan finds both.
// Past an endpoint's free slots ($6, $7), then its namespace's ($9, $10,
// $11 for the others), its picked rows are left as they were (ranked and
// capped: ledger.CapSlots and CapNamespaces in SQL); their locks end with
// the transaction. $8 keeps only never-attempted deliveries.
const claimSQL = `
	WITH picked AS (
		SELECT d.id, d.endpoint_id, d.due_at, d.seq, d.state AS prev_state, ep.version
		FROM deliveries d JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE d.state IN ('scheduled', 'in_flight') AND d.due_at <= $1
			AND (d.state = 'scheduled' OR d.lease_until <= $1)
			AND NOT ep.paused AND NOT ep.breaker_open AND ep.deleted_at IS NULL AND d.endpoint_id <> ALL($2::text[])
			AND (NOT $8::boolean OR d.attempts = 0)
		ORDER BY d.due_at, d.seq
		LIMIT $3
		FOR UPDATE OF d SKIP LOCKED
	), ranked AS (
		SELECT p.id, p.endpoint_id, p.due_at, p.seq, p.prev_state, p.version, s.slots,
			row_number() OVER (PARTITION BY p.endpoint_id ORDER BY p.due_at, p.seq) AS n
		FROM picked p LEFT JOIN unnest($6::text[], $7::int[]) AS s(endpoint_id, slots) ON s.endpoint_id = p.endpoint_id
	), by_namespace AS (
		SELECT r.id, r.prev_state, r.version, coalesce(ns.slots, nullif($11::int, 0)) AS slots,
			row_number() OVER (PARTITION BY split_part(r.endpoint_id, '/', 1) ORDER BY r.due_at, r.seq) AS n
		FROM ranked r LEFT JOIN unnest($9::text[], $10::int[]) AS ns(namespace, slots) ON ns.namespace = split_part(r.endpoint_id, '/', 1)
		WHERE r.slots IS NULL OR r.n <= r.slots
	), capped AS (
		SELECT id, prev_state, version FROM by_namespace WHERE slots IS NULL OR n <= slots
	), claimed AS (
		UPDATE deliveries d SET state = 'in_flight', lease_owner = $4, lease_until = $5
		FROM capped picked WHERE d.id = picked.id
		RETURNING ` + deliveryColumns + `, d.seq, picked.prev_state, picked.version
	)
	SELECT ` + deliveryColumns + `, d.prev_state, d.version, ` + eventColumns + `
	FROM claimed d JOIN events e ON e.id = d.event_id LEFT JOIN event_secrets sec ON sec.event_id = e.id
	ORDER BY d.due_at, d.seq`

// DeliveryClaim implements ledger.Store. Two round trips: BEGIN with the
// claim, then the counter changes (they depend on the rows claimed) with
// COMMIT.
func (s *Store) DeliveryClaim(ctx context.Context, params *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	const op = "claim deliveries"
	if params == nil || params.Owner == "" {
		return nil, fmt.Errorf("%s: an Owner is required", op)
	}
	if params.Limit <= 0 {
		return nil, nil
	}
	exclude := params.ExcludeEndpoints
	if exclude == nil {
		exclude = []string{} // <> ALL(NULL) would exclude everything
	}
	slotIDs, slotCounts := make([]string, 0, len(params.EndpointSlots)), make([]int32, 0, len(params.EndpointSlots))
	for id, n := range params.EndpointSlots {
		slotIDs, slotCounts = append(slotIDs, id), append(slotCounts, int32(n))
	}
	nsIDs, nsCounts := make([]string, 0, len(params.NamespaceSlots)), make([]int32, 0, len(params.NamespaceSlots))
	for ns, n := range params.NamespaceSlots {
		nsIDs, nsCounts = append(nsIDs, ns), append(nsCounts, int32(n))
	}
	now := nanos(params.Now)
	until := nanos(params.Now.Add(params.LeaseFor))
	var claimed []ledger.ClaimedDelivery
	err := s.tx(ctx, op, func(tx *txn) error {
		claimed = claimed[:0]
		rows, err := tx.Query(ctx, claimSQL, now, exclude, params.Limit, params.Owner, until, slotIDs, slotCounts,
			params.FirstAttemptsOnly, nsIDs, nsCounts, int32(max(params.DefaultNamespaceSlots, 0)))
		if err != nil {
			return err
		}
		claimed, err = scanClaimed(tx, rows, claimed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}

// scanClaimed reads the rows of a claim (claimSQL's columns) into
// claimed and queues their counter changes with tx's COMMIT.
func scanClaimed(tx *txn, rows pgx.Rows, claimed []ledger.ClaimedDelivery) ([]ledger.ClaimedDelivery, error) {
	delta := ledger.StatsDelta{}
	var (
		d         deliveryRow
		e         eventRow
		prevState string
		version   int64
	)
	dests := append(append(d.dests(), &prevState, &version), e.dests()...)
	if _, err := pgx.ForEachRow(rows, dests, func() error {
		ev, err := e.value()
		if err != nil {
			return err
		}
		c := ledger.ClaimedDelivery{Delivery: d.value(), Event: ev, EndpointVersion: version}
		claimed = append(claimed, c)
		// An expired lease changes owner, not state.
		delta.Move(c.Delivery.EndpointID, ledger.DeliveryState(prevState), ledger.ResolutionNone, ledger.StateInFlight, ledger.ResolutionNone)
		return nil
	}); err != nil {
		return nil, err
	}
	tx.queueStats(delta) // with COMMIT
	return claimed, nil
}

// DeliveryRelease implements ledger.Store.
func (s *Store) DeliveryRelease(ctx context.Context, params *ledger.DeliveryReleaseParams) error {
	if params == nil {
		return errors.New("release delivery: nil params")
	}
	op := "release delivery " + params.DeliveryID
	return s.tx(ctx, op, func(tx *txn) error {
		var endpointID string
		err := tx.QueryRow(ctx, `
			UPDATE deliveries SET state = 'scheduled', due_at = $3, lease_owner = '', lease_until = NULL
			WHERE id = $1 AND state = 'in_flight' AND lease_owner = $2
			RETURNING endpoint_id`, params.DeliveryID, params.Owner, nanos(params.DueAt)).Scan(&endpointID)
		if errors.Is(err, pgx.ErrNoRows) {
			return leaseLostOrMissing(ctx, tx, params.DeliveryID, params.Owner)
		}
		if err != nil {
			return err
		}
		delta := ledger.StatsDelta{}
		delta.Move(endpointID, ledger.StateInFlight, ledger.ResolutionNone, ledger.StateScheduled, ledger.ResolutionNone)
		tx.queueStats(delta) // with COMMIT
		return nil
	})
}

// LeasesReclaim implements ledger.Store.
func (s *Store) LeasesReclaim(ctx context.Context, params *ledger.LeasesReclaimParams) (int, error) {
	if params == nil || params.Instance == "" {
		return 0, errors.New("reclaim leases: an instance is required")
	}
	n := 0
	err := s.tx(ctx, "reclaim the leases of instance "+params.Instance, func(tx *txn) error {
		n = 0
		// starts_with, not LIKE: an instance may contain % or _.
		rows, err := tx.Query(ctx, `
			UPDATE deliveries SET state = 'scheduled', lease_owner = '', lease_until = NULL
			WHERE state = 'in_flight' AND starts_with(lease_owner, $1) AND lease_owner <> $2
			RETURNING endpoint_id`, ledger.OwnerOf(params.Instance, ""), params.Keep)
		if err != nil {
			return err
		}
		delta := ledger.StatsDelta{}
		for rows.Next() {
			var endpointID string
			if err := rows.Scan(&endpointID); err != nil {
				rows.Close()
				return err
			}
			delta.Move(endpointID, ledger.StateInFlight, ledger.ResolutionNone, ledger.StateScheduled, ledger.ResolutionNone)
			n++
		}
		if err := rows.Err(); err != nil {
			return err
		}
		tx.queueStats(delta) // with COMMIT
		return nil
	})
	return n, err
}

// leaseLostOrMissing says why a lease holder's update matched no row.
func leaseLostOrMissing(ctx context.Context, tx pgx.Tx, id, owner string) error {
	var state, holder string
	err := tx.QueryRow(ctx, `SELECT state, lease_owner FROM deliveries WHERE id = $1`, id).Scan(&state, &holder)
	if err != nil {
		return err // ErrNoRows becomes ledger.ErrNotFound
	}
	return fmt.Errorf("%w (state %s, owner %q, not %q)", ledger.ErrLeaseLost, state, holder, owner)
}

// NextDueAt implements ledger.Store.
func (s *Store) NextDueAt(ctx context.Context, excludeEndpoints []string) (time.Time, bool, error) {
	if excludeEndpoints == nil {
		excludeEndpoints = []string{} // <> ALL(NULL) would exclude everything
	}
	var due int64
	err := s.pool.QueryRow(ctx, `
		SELECT d.due_at FROM deliveries d JOIN endpoints ep ON ep.id = d.endpoint_id
		WHERE d.state = 'scheduled' AND NOT ep.paused AND NOT ep.breaker_open AND ep.deleted_at IS NULL AND d.endpoint_id <> ALL($1::text[])
		ORDER BY d.due_at LIMIT 1`, excludeEndpoints).Scan(&due)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, translate("next due delivery", err)
	}
	return fromNanos(due), true, nil
}

// claimExpiredSQL leases the deliveries whose event expired, of any live
// endpoint, paused or held included: deliveries_expiring in bound order,
// rows other claimers hold skipped (they find them expired themselves).
const claimExpiredSQL = `
	WITH picked AS (
		SELECT d.id, d.state AS prev_state
		FROM deliveries d
		WHERE d.valid_until <= $1 AND d.state IN ('scheduled', 'in_flight')
			AND (d.state = 'scheduled' OR d.lease_until <= $1)
		ORDER BY d.valid_until
		LIMIT $2
		FOR UPDATE OF d SKIP LOCKED
	), claimed AS (
		UPDATE deliveries d SET state = 'in_flight', lease_owner = $3, lease_until = $4
		FROM picked WHERE d.id = picked.id
		RETURNING ` + deliveryColumns + `, picked.prev_state
	)
	SELECT ` + deliveryColumns + `, d.prev_state, ep.version, ` + eventColumns + `
	FROM claimed d JOIN endpoints ep ON ep.id = d.endpoint_id
		JOIN events e ON e.id = d.event_id LEFT JOIN event_secrets sec ON sec.event_id = e.id`

// DeliveryClaimExpired implements ledger.Store: two round trips, as a
// claim.
func (s *Store) DeliveryClaimExpired(ctx context.Context, params *ledger.DeliveryClaimExpiredParams) ([]ledger.ClaimedDelivery, error) {
	if err := params.Validate(); err != nil {
		return nil, err
	}
	var claimed []ledger.ClaimedDelivery
	err := s.tx(ctx, "claim expired deliveries", func(tx *txn) error {
		claimed = claimed[:0]
		rows, err := tx.Query(ctx, claimExpiredSQL, nanos(params.Now), params.Limit, params.Owner,
			nanos(params.Now.Add(params.LeaseFor)))
		if err != nil {
			return err
		}
		claimed, err = scanClaimed(tx, rows, claimed)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claimed, nil
}
