package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Limits holds an endpoint's rateLimit and maxInFlight for every engine on
// the ledger together, so that a receiver sees what its owner wrote
// whatever the replica count (ADR 0047).
//
//   - The rate is one GCRA schedule per endpoint in the ledger (its
//     theoretical arrival time): a send is taken in one short transaction,
//     so sends of all replicas are spaced by 1/perSecond, burst-1 of them
//     allowed ahead; any second sees at most perSecond+burst.
//   - The in-flight slots are leased: each engine holds a share of an
//     endpoint's maxInFlight for a while, renewed in one transaction for
//     all its endpoints, and starts no more attempts than it holds. The
//     shares never add up to more than maxInFlight, and an engine wanting
//     more than it holds makes the others shrink to a fair share as their
//     attempts end. A dead engine's shares expire with their lease.
type Limits interface {
	// EndpointRateTake takes one send from an endpoint's rate, or says
	// when the next may be taken.
	EndpointRateTake(ctx context.Context, p *RateTakeParams) (RateAnswer, error)
	// EndpointSlotsLease renews the holder's leases of in-flight slots,
	// one per endpoint of p.Asks, in one transaction, and returns how
	// many slots of each the holder may fill (in the order of p.Asks).
	EndpointSlotsLease(ctx context.Context, p *SlotsLeaseParams) ([]int, error)
	// WaitingList returns, in endpoint ID order, the endpoints with
	// deliveries due at now and not sent: one read of the due deliveries,
	// for the throttled backlog of the metrics.
	WaitingList(ctx context.Context, now time.Time) ([]Waiting, error)
}

// Waiting is what ledger.Limits' WaitingList reads of one endpoint: its
// deliveries due and not sent (scheduled, due at or before the read), and
// when the oldest of them was due. A delivery waits when a limit of its
// endpoint (rateLimit, maxInFlight, retry budget), a fair share, a pause or
// an open breaker holds it, or when the engines fall behind.
type Waiting struct {
	EndpointID string
	Deliveries int64
	OldestDue  time.Time
}

// RateTakeParams asks for up to N sends (at least 1) to EndpointID under
// Limit, at Now or within Horizon after it: an engine that claimed several
// deliveries of a rate-limited endpoint reserves their places on the
// schedule in one transaction and sends each at its time.
type RateTakeParams struct {
	EndpointID string
	Limit      RateLimit
	Now        time.Time
	N          int
	Horizon    time.Duration
}

// RateAnswer is EndpointRateTake's: the times of the sends taken (in
// order, none before Now), else the earliest time the next may be taken.
type RateAnswer struct {
	Taken  bool
	Sends  []time.Time
	NextAt time.Time
}

// SlotsLeaseParams renews Holder's slot leases until Until.
type SlotsLeaseParams struct {
	Holder string
	Asks   []SlotAsk
	Now    time.Time
	Until  time.Time
}

// SlotAsk is what a holder asks of one endpoint's slots: Max is the
// endpoint's maxInFlight, InFlight what the holder has in progress (its
// lease keeps covering them), Want how many it could fill now (0 gives
// its share back once its attempts end).
type SlotAsk struct {
	EndpointID string
	Max        int
	InFlight   int
	Want       int
}

// SlotLease is one holder's live lease of an endpoint's slots.
type SlotLease struct {
	Holder string
	Held   int
	Want   int
}

// RateBurst is the burst of l: 1 (sends evenly spaced) unless set.
func RateBurst(l RateLimit) int {
	return max(l.Burst, 1)
}

// RateMargin is how much wider than 1/perSecond sends are spaced: what
// the receiver counts in a second is the sends of a second widened by the
// jitter between sending and arriving (the sender's scheduling, the
// network, the receiver's), which 3% absorbs up to 30 ms of, so that the
// receiver never counts more than perSecond+burst in any second.
const RateMargin = 0.03

// RateInterval is the spacing of l's sends: 1/perSecond, RateMargin wider.
func RateInterval(l RateLimit) time.Duration {
	return time.Duration(float64(time.Second) * (1 + RateMargin) / float64(max(l.PerSecond, 1)))
}

// GCRATake decides one send at now on the schedule tat (the theoretical
// arrival time, Unix nanoseconds; 0 for none yet) of limit l: taken, the
// new schedule; refused, when the next send may be.
func GCRATake(tat int64, l RateLimit, now time.Time) (taken bool, newTAT int64, nextAt time.Time) {
	sends, newTAT, nextAt := GCRAReserve(tat, l, now, 1, 0)
	return len(sends) == 1, newTAT, nextAt
}

// GCRAReserve reserves up to n sends on the schedule tat of limit l, each
// at the earliest time it conforms (now, or later by up to horizon): the
// sends' times in order, the new schedule, and, when none was reserved,
// when the next may be. Sends at their times conform to the rate exactly
// as sends taken one by one at those times would.
func GCRAReserve(tat int64, l RateLimit, now time.Time, n int, horizon time.Duration) (sends []time.Time, newTAT int64, nextAt time.Time) {
	interval := int64(RateInterval(l))
	tolerance := int64(RateBurst(l)-1) * interval
	at := now.UnixNano()
	for range max(n, 1) {
		send := max(at, tat-tolerance) // the earliest conforming time
		if send-at > int64(horizon) {
			break
		}
		sends = append(sends, time.Unix(0, send))
		tat = max(tat, send) + interval
	}
	if len(sends) == 0 {
		nextAt = time.Unix(0, tat-tolerance-int64(horizon))
	}
	return sends, tat, nextAt
}

// GrantSlots is how many of an endpoint's max slots a holder is granted
// when it has inFlight in progress and wants want, beside the other
// holders' live leases: what is free, and, while another holder wants more
// than it holds, no more than a fair share (max over the holders that want
// any, at least one). held is what the holder's lease records: never less
// than its attempts in progress, so that the others never count those
// slots free.
func GrantSlots(maxSlots, inFlight, want int, others []SlotLease) (granted, held int) {
	free := maxSlots
	contended, wanting := false, 1
	for _, o := range others {
		free -= o.Held
		if o.Want > 0 {
			wanting++
		}
		if o.Want > o.Held {
			contended = true
		}
	}
	granted = min(want, free)
	if contended {
		granted = min(granted, max(maxSlots/wanting, 1))
	}
	granted = max(granted, 0)
	return granted, max(granted, inFlight)
}

// LimitStatements are the statements of the Limits transactions.
type LimitStatements interface {
	// RateSchedule reads (creating it at 0) an endpoint's schedule, locked
	// until the transaction ends.
	RateSchedule(ctx context.Context, endpointID string) (tat int64, err error)
	// RateScheduleSet writes it.
	RateScheduleSet(ctx context.Context, endpointID string, tat int64) error
	// SlotLeases locks an endpoint's leases until the transaction ends,
	// deletes those expired at now and returns the live ones.
	SlotLeases(ctx context.Context, endpointID string, now time.Time) ([]SlotLease, error)
	// SlotLeaseSet writes a holder's lease of an endpoint's slots.
	SlotLeaseSet(ctx context.Context, endpointID string, l SlotLease, until time.Time) error
}

// LimitTransactor runs fn in one transaction of the driver (again when the
// driver retries a conflict), op naming it in errors.
type LimitTransactor interface {
	LimitTx(ctx context.Context, op string, fn func(LimitStatements) error) error
}

// EndpointRateTake implements Limits.EndpointRateTake over d.
func EndpointRateTake(ctx context.Context, d LimitTransactor, p *RateTakeParams) (RateAnswer, error) {
	if p == nil || p.Limit.PerSecond <= 0 {
		return RateAnswer{}, errors.New("take a send: no rate limit")
	}
	var answer RateAnswer
	err := d.LimitTx(ctx, "take a send of "+p.EndpointID, func(st LimitStatements) error {
		tat, err := st.RateSchedule(ctx, p.EndpointID)
		if err != nil {
			return err
		}
		sends, next, at := GCRAReserve(tat, p.Limit, p.Now, p.N, p.Horizon)
		answer = RateAnswer{Taken: len(sends) > 0, Sends: sends, NextAt: at}
		if !answer.Taken {
			return nil
		}
		return st.RateScheduleSet(ctx, p.EndpointID, next)
	})
	if err != nil {
		return RateAnswer{}, err
	}
	return answer, nil
}

// EndpointSlotsLease implements Limits.EndpointSlotsLease over d. The
// endpoints are locked in ID order, so that two holders never deadlock.
func EndpointSlotsLease(ctx context.Context, d LimitTransactor, p *SlotsLeaseParams) ([]int, error) {
	if p == nil || p.Holder == "" {
		return nil, errors.New("lease slots: no holder")
	}
	order := make([]int, len(p.Asks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(p.Asks[a].EndpointID, p.Asks[b].EndpointID) })
	granted := make([]int, len(p.Asks))
	err := d.LimitTx(ctx, "lease slots of "+p.Holder, func(st LimitStatements) error {
		for _, i := range order {
			a := p.Asks[i]
			leases, err := st.SlotLeases(ctx, a.EndpointID, p.Now)
			if err != nil {
				return fmt.Errorf("read the leases of %s: %w", a.EndpointID, err)
			}
			others := slices.DeleteFunc(leases, func(l SlotLease) bool { return l.Holder == p.Holder })
			g, held := GrantSlots(a.Max, a.InFlight, a.Want, others)
			granted[i] = g
			if err := st.SlotLeaseSet(ctx, a.EndpointID, SlotLease{Holder: p.Holder, Held: held, Want: a.Want}, p.Until); err != nil {
				return fmt.Errorf("write the lease of %s: %w", a.EndpointID, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return granted, nil
}
