package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// DeliveryClaim implements ledger.Store. Claims run on the single writer,
// so two claimers can never select the same delivery: the selection, the
// lease and the stats change are one transaction.
func (s *Store) DeliveryClaim(ctx context.Context, p *ledger.DeliveryClaimParams) ([]ledger.ClaimedDelivery, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []ledger.ClaimedDelivery
	err := s.write(ctx, "claim deliveries", func(t *wtx) error {
		cands, err := t.candidateQueries(&s.ws).claimCandidates(t.ctx, p)
		if err != nil || len(cands) == 0 {
			return err
		}
		ids := make([]string, len(cands))
		ds := ledger.StatsDelta{}
		for i, c := range cands {
			ids[i] = c.id
			if c.state == ledger.StateScheduled { // an expired lease changes no counter
				ds.Move(c.endpoint, ledger.StateScheduled, ledger.ResolutionNone, ledger.StateInFlight, ledger.ResolutionNone)
			}
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		if _, err := t.stmt(s.ws.claimLease).ExecContext(t.ctx, p.Owner, nanos(p.Now.Add(p.LeaseFor)), string(idsJSON)); err != nil {
			return translate("claim deliveries: lease", err)
		}
		if out, err = s.claimedRows(t, string(idsJSON), len(ids)); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// candidate is a delivery a claim may lease.
type candidate struct {
	id, endpoint string
	state        ledger.DeliveryState
	due          int64
	attempts     int
}

// querier is a prepared statement, bound to the write transaction or not.
type querier interface {
	QueryContext(ctx context.Context, args ...any) (*sql.Rows, error)
}

// candidateQueries are the statements that find claimable deliveries; the
// claim runs them in its write transaction, NextDueAt on the read pool.
type candidateQueries struct {
	paused, due, expired, backlogged, dueOf querier
	// firstOnly keeps only never-attempted deliveries.
	firstOnly bool
}

func (t *wtx) candidateQueries(ws *writeStmts) candidateQueries {
	return candidateQueries{
		paused: t.stmt(ws.pausedEndpoints), due: t.stmt(ws.claimDue), expired: t.stmt(ws.claimExpired),
		backlogged: t.stmt(ws.claimBacklogged), dueOf: t.stmt(ws.claimDueOf),
	}
}

// claimCandidates selects up to limit claimable deliveries, earliest due
// first: scheduled ones due by now and expired leases, of endpoints that
// are neither paused nor excluded (deleted endpoints have none), at most
// the slots p gives its endpoint and its namespace (only never-attempted
// ones with p.FirstAttemptsOnly).
func (q candidateQueries) claimCandidates(ctx context.Context, p *ledger.DeliveryClaimParams) ([]candidate, error) {
	now, limit := nanos(p.Now), p.Limit
	blocked, err := q.blockedEndpoints(ctx, p.ExcludeEndpoints)
	if err != nil {
		return nil, err
	}
	q.firstOnly = p.FirstAttemptsOnly
	window := 2*limit + 32
	expired, full, err := q.read(ctx, q.expired, blocked, limit, now, window)
	if err == nil && full {
		// Expired leases are bounded by what was in flight: read them all.
		expired, _, err = q.read(ctx, q.expired, blocked, limit, now, -1)
	}
	if err != nil {
		return nil, err
	}
	due, err := q.scheduled(ctx, blocked, now, limit)
	if err != nil {
		return nil, err
	}
	all := append(expired, due...)
	slices.SortFunc(all, func(a, b candidate) int {
		if c := cmp.Compare(a.due, b.due); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	endpoint := func(c candidate) string { return c.endpoint }
	all = ledger.CapSlots(all, endpoint, p.EndpointSlots)
	all = ledger.CapNamespaces(all, endpoint, p.NamespaceSlots, p.DefaultNamespaceSlots)
	return all[:min(limit, len(all))], nil
}

// scheduled returns up to limit scheduled deliveries due by now of
// unblocked endpoints, earliest first.
//
// The common case reads a window of the due index a little larger than
// limit and drops blocked endpoints' rows. When those fill the window (an
// excluded endpoint at its in-flight limit with a long queue, a paused one
// with a backlog), it reads each unblocked endpoint's earliest instead, so
// the cost stays bounded by the work claimed, not by the blocked backlog.
func (q candidateQueries) scheduled(ctx context.Context, blocked map[string]bool, now int64, limit int) ([]candidate, error) {
	due, full, err := q.read(ctx, q.due, blocked, limit, now, 2*limit+32)
	if err != nil || !full {
		return due, err
	}
	rows, err := q.backlogged.QueryContext(ctx)
	if err != nil {
		return nil, translate("due deliveries: backlogged endpoints", err)
	}
	var endpoints []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return nil, translate("due deliveries: backlogged endpoints", err)
		}
		if !blocked[id] {
			endpoints = append(endpoints, id)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, translate("due deliveries: backlogged endpoints", err)
	}
	due = due[:0]
	for _, ep := range endpoints {
		got, _, err := q.read(ctx, q.dueOf, nil, limit, ep, now, limit)
		if err != nil {
			return nil, err
		}
		due = append(due, got...)
	}
	return due, nil
}

// blockedEndpoints returns the excluded and the paused endpoints.
func (q candidateQueries) blockedEndpoints(ctx context.Context, exclude []string) (map[string]bool, error) {
	blocked := make(map[string]bool, len(exclude))
	for _, id := range exclude {
		blocked[id] = true
	}
	rows, err := q.paused.QueryContext(ctx)
	if err != nil {
		return nil, translate("due deliveries: paused endpoints", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, translate("due deliveries: paused endpoints", err)
		}
		blocked[id] = true
	}
	return blocked, translate("due deliveries: paused endpoints", rows.Err())
}

// read runs a candidate query whose last argument is the window it reads,
// and keeps the unblocked rows, at most limit. full reports that the whole
// window was read without finding limit of them, so later rows may still
// qualify.
func (q candidateQueries) read(ctx context.Context, st querier, blocked map[string]bool, limit int, args ...any) (kept []candidate, full bool, err error) {
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, translate("due deliveries", err)
	}
	defer rows.Close()
	read := 0
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.endpoint, &c.state, &c.due, &c.attempts); err != nil {
			return nil, false, translate("due deliveries", err)
		}
		read++
		if !blocked[c.endpoint] && (!q.firstOnly || c.attempts == 0) && len(kept) < limit {
			kept = append(kept, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, translate("due deliveries", err)
	}
	window := args[len(args)-1].(int)
	return kept, window >= 0 && read == window && len(kept) < limit, nil
}

// claimedRows reads the leased deliveries with their events and endpoint
// versions, in claim order.
func (s *Store) claimedRows(t *wtx, idsJSON string, n int) ([]ledger.ClaimedDelivery, error) {
	rows, err := t.stmt(s.ws.claimedRows).QueryContext(t.ctx, idsJSON)
	if err != nil {
		return nil, translate("claim deliveries: read", err)
	}
	defer rows.Close()
	out := make([]ledger.ClaimedDelivery, 0, n)
	for rows.Next() {
		var c ledger.ClaimedDelivery
		dDest, dFinish := deliveryDest(&c.Delivery)
		eDest, eFinish := eventDest(&c.Event)
		dest := append(append(dDest, &c.EndpointVersion), eDest...)
		if err := rows.Scan(dest...); err != nil {
			return nil, translate("claim deliveries: read", err)
		}
		dFinish()
		if err := eFinish(); err != nil {
			return nil, fmt.Errorf("claim deliveries: %w", err)
		}
		out = append(out, c)
	}
	return out, translate("claim deliveries: read", rows.Err())
}

// DeliveryRelease implements ledger.Store.
func (s *Store) DeliveryRelease(ctx context.Context, p *ledger.DeliveryReleaseParams) error {
	op := "release delivery " + p.DeliveryID
	return s.write(ctx, op, func(t *wtx) error {
		var endpoint string
		err := t.stmt(s.ws.release).QueryRowContext(t.ctx, p.DeliveryID, p.Owner, nanos(p.DueAt)).Scan(&endpoint)
		if errors.Is(err, sql.ErrNoRows) {
			return s.leaseLost(t, op, p.DeliveryID, p.Owner)
		}
		if err != nil {
			return translate(op, err)
		}
		ds := ledger.StatsDelta{}
		ds.Move(endpoint, ledger.StateInFlight, ledger.ResolutionNone, ledger.StateScheduled, ledger.ResolutionNone)
		return applyStats(t, s.ws.statsApply, ds)
	})
}

// LeasesReclaim implements ledger.Store.
func (s *Store) LeasesReclaim(ctx context.Context, p *ledger.LeasesReclaimParams) (int, error) {
	if p == nil || p.Instance == "" {
		return 0, errors.New("reclaim leases: an instance is required")
	}
	prefix := ledger.OwnerOf(p.Instance, "")
	return s.reclaim(ctx, "reclaim the leases of instance "+p.Instance, func(owner string) bool {
		return strings.HasPrefix(owner, prefix) && owner != p.Keep
	})
}

// reclaimAll returns every in-flight delivery to scheduled: at Open, where
// the file lock proves that every lease belongs to a process that is gone.
func (s *Store) reclaimAll(ctx context.Context) (int, error) {
	return s.reclaim(ctx, "reclaim the leases of earlier processes", func(string) bool { return true })
}

// reclaim returns the in-flight deliveries whose owner matches to
// scheduled, due as they were. In-flight deliveries are few (bounded by
// the workers of the processes that held them), so they are read whole.
func (s *Store) reclaim(ctx context.Context, op string, match func(owner string) bool) (int, error) {
	n := 0
	err := s.write(ctx, op, func(t *wtx) error {
		n = 0
		rows, err := t.tx.QueryContext(t.ctx, `SELECT id, endpoint_id, lease_owner FROM deliveries WHERE state = 'in_flight'`)
		if err != nil {
			return translate(op, err)
		}
		var ids []string
		ds := ledger.StatsDelta{}
		for rows.Next() {
			var id, endpoint, owner string
			if err := rows.Scan(&id, &endpoint, &owner); err != nil {
				_ = rows.Close()
				return translate(op, err)
			}
			if match(owner) {
				ids = append(ids, id)
				ds.Move(endpoint, ledger.StateInFlight, ledger.ResolutionNone, ledger.StateScheduled, ledger.ResolutionNone)
			}
		}
		if err := rows.Close(); err != nil {
			return translate(op, err)
		}
		if len(ids) == 0 {
			return nil
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if _, err := t.tx.ExecContext(t.ctx, `UPDATE deliveries SET state = 'scheduled', lease_owner = '', lease_until = NULL
			WHERE state = 'in_flight' AND id IN (SELECT value FROM json_each(?1))`, string(idsJSON)); err != nil {
			return translate(op, err)
		}
		n = len(ids)
		return applyStats(t, s.ws.statsApply, ds)
	})
	return n, err
}

// leaseLost explains why a lease-guarded update matched no row: the
// delivery does not exist, or owner does not hold its lease.
func (s *Store) leaseLost(t *wtx, op, id, owner string) error {
	var one int
	err := t.stmt(s.ws.deliveryExists).QueryRowContext(t.ctx, id).Scan(&one)
	if err != nil {
		return translate(op, err) // ErrNotFound when it does not exist
	}
	return fmt.Errorf("%s by %q: %w", op, owner, ledger.ErrLeaseLost)
}

// NextDueAt implements ledger.Store. It reads from the read pool, with
// the claim's queries, so that a paused backlog costs it no more than it
// costs a claim.
func (s *Store) NextDueAt(ctx context.Context, excludeEndpoints []string) (time.Time, bool, error) {
	q := candidateQueries{paused: s.rs.pausedEndpoints, due: s.rs.claimDue, backlogged: s.rs.claimBacklogged, dueOf: s.rs.claimDueOf}
	blocked, err := q.blockedEndpoints(ctx, excludeEndpoints)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due delivery: %w", err)
	}
	due, err := q.scheduled(ctx, blocked, math.MaxInt64, 1)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next due delivery: %w", err)
	}
	if len(due) == 0 {
		return time.Time{}, false, nil
	}
	return fromNanos(slices.MinFunc(due, func(a, b candidate) int { return cmp.Compare(a.due, b.due) }).due), true, nil
}

// DeliveryClaimExpired implements ledger.Store: the candidates from
// deliveries_expiring, leased like a claim's.
func (s *Store) DeliveryClaimExpired(ctx context.Context, p *ledger.DeliveryClaimExpiredParams) ([]ledger.ClaimedDelivery, error) {
	const op = "claim expired deliveries"
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var out []ledger.ClaimedDelivery
	err := s.write(ctx, op, func(t *wtx) error {
		rows, err := t.stmt(s.ws.claimExpiring).QueryContext(t.ctx, nanos(p.Now), p.Limit)
		if err != nil {
			return translate(op, err)
		}
		var ids []string
		ds := ledger.StatsDelta{}
		for rows.Next() {
			var c candidate
			if err := rows.Scan(&c.id, &c.endpoint, &c.state, &c.due); err != nil {
				_ = rows.Close()
				return translate(op, err)
			}
			ids = append(ids, c.id)
			if c.state == ledger.StateScheduled { // an expired lease changes no counter
				ds.Move(c.endpoint, ledger.StateScheduled, ledger.ResolutionNone, ledger.StateInFlight, ledger.ResolutionNone)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return translate(op, err)
		}
		if len(ids) == 0 {
			return nil
		}
		idsJSON, err := json.Marshal(ids)
		if err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		if _, err := t.stmt(s.ws.claimLease).ExecContext(t.ctx, p.Owner, nanos(p.Now.Add(p.LeaseFor)), string(idsJSON)); err != nil {
			return translate(op+": lease", err)
		}
		if out, err = s.claimedRows(t, string(idsJSON), len(ids)); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
