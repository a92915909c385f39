package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Breakers keeps each endpoint's circuit breaker in the shared ledger, so
// that every engine on it sees one state: an open breaker holds the
// endpoint's deliveries for all of them (claims skip it like a paused
// endpoint), and one probe at a time is leased to one engine
// (docs/adr/0033). The engines decide when to open and what a probe's
// outcome means; the ledger makes each step one transaction that a
// concurrent engine cannot interleave with.
type Breakers interface {
	// BreakerGet returns an endpoint's breaker, or ErrNotFound when it was
	// never opened.
	BreakerGet(ctx context.Context, endpointID string) (Breaker, error)
	// BreakerList returns the breakers that are open or that closed at or
	// after ClosedSince (still ramping), ordered by endpoint ID.
	BreakerList(ctx context.Context, closedSince time.Time) ([]Breaker, error)
	// BreakerOpen opens an endpoint's breaker. On a closed (or never
	// opened) breaker it opens with the params (opened is true, Openings
	// grows by one); on an open one it changes nothing, except that Gone
	// replaces Failing (a statement about the URL outranks a streak) and
	// takes its probe schedule. An unknown or deleted endpoint gives
	// ErrNotFound.
	BreakerOpen(ctx context.Context, params *BreakerOpenParams) (b Breaker, opened bool, err error)
	// BreakerProbe leases the probe of an open breaker to Owner: when its
	// NextProbeAt is at or before Now and no other probe's lease runs, the
	// endpoint's earliest due delivery is leased to Owner until
	// Now+LeaseFor (like DeliveryClaim) and recorded as the probe. It
	// returns nothing when the breaker is closed, not due, already probing,
	// or the endpoint has no due delivery (then the next delivery that
	// comes due is the probe).
	BreakerProbe(ctx context.Context, params *BreakerProbeParams) ([]ClaimedDelivery, error)
	// BreakerProbeDone applies the outcome of the probe of DeliveryID by
	// Owner: success closes the breaker (ClosedAt = Now, the ramp starts),
	// failure keeps it open with the next probe at NextProbeAt. A call for
	// a delivery that is not the breaker's current probe changes nothing
	// and returns the breaker with changed false.
	BreakerProbeDone(ctx context.Context, params *BreakerProbeDoneParams) (b Breaker, changed bool, err error)
	// BreakerProbeNow makes an open breaker's next probe due at Now (an
	// admin's request: `kubectl hookkeeper probe`), also when its reason
	// is Gone. A closed breaker is returned unchanged.
	BreakerProbeNow(ctx context.Context, endpointID string, now time.Time) (Breaker, error)
	// BreakerClose closes an open breaker without a probe, with reason
	// (the endpoint's URL changed: a new receiver). A closed one is
	// returned unchanged.
	BreakerClose(ctx context.Context, endpointID string, reason BreakerCloseReason, now time.Time) (Breaker, error)
	// BreakerExpire leases to Owner, until Now+LeaseFor, up to Limit
	// scheduled deliveries of an endpoint whose breaker is open and that
	// started (first attempt, or creation when never attempted) before
	// StartedBefore: their horizon ran out while they waited. The caller
	// records them exhausted with AttemptRecordParams.Unsent.
	BreakerExpire(ctx context.Context, params *BreakerExpireParams) ([]ClaimedDelivery, error)
}

// BreakerReason says why a breaker opened.
type BreakerReason string

const (
	// BreakerFailing: attempts kept failing (docs/adr/0033: a streak of
	// failures over a minimum time).
	BreakerFailing BreakerReason = "Failing"
	// BreakerGone: the receiver answered 410 Gone, a statement about the
	// URL: no automatic probes (ProbeInterval 0) unless the policy sets a
	// slow one.
	BreakerGone BreakerReason = "Gone"
)

// BreakerCloseReason says why a breaker closed.
type BreakerCloseReason string

const (
	BreakerProbeSucceeded BreakerCloseReason = "ProbeSucceeded"
	BreakerURLChanged     BreakerCloseReason = "URLChanged"
)

// Breaker is an endpoint's circuit breaker.
type Breaker struct {
	EndpointID string
	Open       bool
	// Reason is why it opened last; kept once it closed.
	Reason BreakerReason
	// OpenedAt is when it opened last; Openings how often it opened.
	OpenedAt time.Time
	Openings int64
	// Failures and LastFailure describe the streak that opened it.
	Failures    int
	LastFailure string
	// NextProbeAt is when the next probe is due; nil: no automatic probe.
	NextProbeAt *time.Time
	// ProbeInterval is the wait after the next failed probe (it grows to
	// the policy's cap); 0 means no automatic probe after a failure.
	ProbeInterval time.Duration
	// Probes counts the probes since it opened; ProbeDelivery and
	// ProbeOwner name the one in flight until ProbeUntil.
	Probes        int
	ProbeDelivery string
	ProbeOwner    string
	ProbeUntil    *time.Time
	// LastProbeAt and LastProbeResult describe the last probe's outcome
	// ("HTTP 503", "" on success).
	LastProbeAt     *time.Time
	LastProbeResult string
	// ClosedAt and CloseReason: when and why it closed last.
	ClosedAt    *time.Time
	CloseReason BreakerCloseReason
	UpdatedAt   time.Time
}

// Probing reports whether a probe's lease runs at now.
func (b *Breaker) Probing(now time.Time) bool {
	return b.ProbeDelivery != "" && b.ProbeUntil != nil && b.ProbeUntil.After(now)
}

// ProbeDue reports whether an open breaker may lease a probe at now.
func (b *Breaker) ProbeDue(now time.Time) bool {
	return b.Open && b.NextProbeAt != nil && !b.NextProbeAt.After(now) && !b.Probing(now)
}

// BreakerOpenParams opens a breaker.
type BreakerOpenParams struct {
	EndpointID  string
	Reason      BreakerReason
	Failures    int
	LastFailure string
	// NextProbeAt is the first probe; nil for none (Gone).
	NextProbeAt   *time.Time
	ProbeInterval time.Duration
	Now           time.Time
}

// Validate checks the params.
func (p *BreakerOpenParams) Validate() error {
	switch {
	case p == nil:
		return errors.New("open breaker: nil params")
	case p.EndpointID == "":
		return errors.New("open breaker: endpointID: must not be empty")
	case p.Reason != BreakerFailing && p.Reason != BreakerGone:
		return fmt.Errorf("open breaker: reason: %q is neither %s nor %s", p.Reason, BreakerFailing, BreakerGone)
	case p.ProbeInterval < 0:
		return errors.New("open breaker: probeInterval: must not be negative")
	}
	return nil
}

// BreakerProbeParams leases a probe.
type BreakerProbeParams struct {
	EndpointID string
	Owner      string
	Now        time.Time
	LeaseFor   time.Duration
}

// BreakerProbeDoneParams records a probe's outcome.
type BreakerProbeDoneParams struct {
	EndpointID string
	DeliveryID string
	Owner      string
	Success    bool
	// Result describes a failed probe ("HTTP 503"); empty on success.
	Result string
	// NextProbeAt and ProbeInterval apply after a failure: the next probe
	// (nil: none) and the wait after it.
	NextProbeAt   *time.Time
	ProbeInterval time.Duration
	Now           time.Time
}

// BreakerExpireParams leases the deliveries an open breaker held past
// their horizon.
type BreakerExpireParams struct {
	EndpointID    string
	Owner         string
	StartedBefore time.Time
	Limit         int
	Now           time.Time
	LeaseFor      time.Duration
}

// BreakerStatements are the statements of one breaker transaction; a
// driver implements them over one transaction (BreakerTransactor).
type BreakerStatements interface {
	// BreakerRead reads an endpoint's breaker for update (PostgreSQL locks
	// its row, creating it if needed, so concurrent transactions on one
	// breaker run one after the other); ok is false when it was never
	// opened. It gives ErrNotFound for an unknown or deleted endpoint.
	BreakerRead(ctx context.Context, endpointID string) (b Breaker, ok bool, err error)
	// BreakerWrite stores b and marks the endpoint's deliveries held
	// (b.Open) or not, in the claims' eyes.
	BreakerWrite(ctx context.Context, b *Breaker) error
	// LeaseOf leases to owner until until up to limit deliveries of
	// endpointID, earliest due first: with startedBefore nil, the due
	// scheduled ones and expired leases (a probe); else the scheduled ones,
	// due or not, that started before it (BreakerExpire).
	LeaseOf(ctx context.Context, endpointID, owner string, now, until time.Time, startedBefore *time.Time, limit int) ([]ClaimedDelivery, error)
}

// BreakerTransactor runs fn in one transaction of the driver (again when
// the driver retries a conflict), op naming it in errors.
type BreakerTransactor interface {
	BreakerTx(ctx context.Context, op string, fn func(BreakerStatements) error) error
}

// The Breakers methods, run once for both drivers over BreakerTransactor.

// BreakerOpen implements Breakers.BreakerOpen over d.
func BreakerOpen(ctx context.Context, d BreakerTransactor, p *BreakerOpenParams) (Breaker, bool, error) {
	if err := p.Validate(); err != nil {
		return Breaker{}, false, err
	}
	var out Breaker
	var opened bool
	err := d.BreakerTx(ctx, "open the breaker of "+p.EndpointID, func(st BreakerStatements) error {
		b, _, err := st.BreakerRead(ctx, p.EndpointID)
		if err != nil {
			return err
		}
		b.EndpointID = p.EndpointID
		opened = !b.Open
		switch {
		case opened:
			b.Open, b.Openings, b.OpenedAt, b.Probes = true, b.Openings+1, p.Now, 0
			b.LastProbeAt, b.LastProbeResult = nil, ""
		case b.Reason == BreakerFailing && p.Reason == BreakerGone:
		default:
			out = b
			return nil
		}
		b.Reason, b.Failures, b.LastFailure = p.Reason, p.Failures, p.LastFailure
		b.NextProbeAt, b.ProbeInterval = timePtr(p.NextProbeAt), p.ProbeInterval
		b.ProbeDelivery, b.ProbeOwner, b.ProbeUntil = "", "", nil
		b.UpdatedAt = p.Now
		out = b
		return st.BreakerWrite(ctx, &b)
	})
	if err != nil {
		return Breaker{}, false, err
	}
	return out, opened, nil
}

// BreakerProbe implements Breakers.BreakerProbe over d.
func BreakerProbe(ctx context.Context, d BreakerTransactor, p *BreakerProbeParams) ([]ClaimedDelivery, error) {
	if p == nil || p.EndpointID == "" || p.Owner == "" {
		return nil, errors.New("lease a probe: an endpoint and an owner are required")
	}
	var out []ClaimedDelivery
	err := d.BreakerTx(ctx, "lease a probe of "+p.EndpointID, func(st BreakerStatements) error {
		out = nil
		b, ok, err := st.BreakerRead(ctx, p.EndpointID)
		if err != nil || !ok || !b.ProbeDue(p.Now) {
			return err
		}
		until := p.Now.Add(p.LeaseFor)
		if out, err = st.LeaseOf(ctx, p.EndpointID, p.Owner, p.Now, until, nil, 1); err != nil || len(out) == 0 {
			return err
		}
		b.Probes++
		b.ProbeDelivery, b.ProbeOwner, b.ProbeUntil = out[0].Delivery.ID, p.Owner, &until
		b.UpdatedAt = p.Now
		return st.BreakerWrite(ctx, &b)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// BreakerProbeDone implements Breakers.BreakerProbeDone over d.
func BreakerProbeDone(ctx context.Context, d BreakerTransactor, p *BreakerProbeDoneParams) (Breaker, bool, error) {
	if p == nil || p.EndpointID == "" || p.DeliveryID == "" {
		return Breaker{}, false, errors.New("record a probe: an endpoint and a delivery are required")
	}
	var out Breaker
	var changed bool
	err := d.BreakerTx(ctx, "record the probe of "+p.EndpointID, func(st BreakerStatements) error {
		b, ok, err := st.BreakerRead(ctx, p.EndpointID)
		out, changed = b, false
		if err != nil || !ok || !b.Open || b.ProbeDelivery != p.DeliveryID || b.ProbeOwner != p.Owner {
			return err
		}
		now := p.Now
		b.LastProbeAt, b.LastProbeResult = &now, p.Result
		b.ProbeDelivery, b.ProbeOwner, b.ProbeUntil = "", "", nil
		if p.Success {
			b.Open, b.ClosedAt, b.CloseReason, b.LastProbeResult = false, &now, BreakerProbeSucceeded, ""
			b.NextProbeAt = nil
		} else {
			b.NextProbeAt, b.ProbeInterval = timePtr(p.NextProbeAt), p.ProbeInterval
		}
		b.UpdatedAt = now
		out, changed = b, true
		return st.BreakerWrite(ctx, &b)
	})
	if err != nil {
		return Breaker{}, false, err
	}
	return out, changed, nil
}

// BreakerProbeNow implements Breakers.BreakerProbeNow over d.
func BreakerProbeNow(ctx context.Context, d BreakerTransactor, endpointID string, now time.Time) (Breaker, error) {
	var out Breaker
	err := d.BreakerTx(ctx, "ask for a probe of "+endpointID, func(st BreakerStatements) error {
		b, ok, err := st.BreakerRead(ctx, endpointID)
		out = b
		if err != nil || !ok || !b.Open {
			return err
		}
		b.NextProbeAt, b.UpdatedAt = &now, now
		out = b
		return st.BreakerWrite(ctx, &b)
	})
	if err != nil {
		return Breaker{}, err
	}
	return out, nil
}

// BreakerClose implements Breakers.BreakerClose over d.
func BreakerClose(ctx context.Context, d BreakerTransactor, endpointID string, reason BreakerCloseReason, now time.Time) (Breaker, error) {
	var out Breaker
	err := d.BreakerTx(ctx, "close the breaker of "+endpointID, func(st BreakerStatements) error {
		b, ok, err := st.BreakerRead(ctx, endpointID)
		out = b
		if err != nil || !ok || !b.Open {
			return err
		}
		b.Open, b.ClosedAt, b.CloseReason = false, &now, reason
		b.NextProbeAt, b.ProbeDelivery, b.ProbeOwner, b.ProbeUntil = nil, "", "", nil
		b.UpdatedAt = now
		out = b
		return st.BreakerWrite(ctx, &b)
	})
	if err != nil {
		return Breaker{}, err
	}
	return out, nil
}

// BreakerExpire implements Breakers.BreakerExpire over d.
func BreakerExpire(ctx context.Context, d BreakerTransactor, p *BreakerExpireParams) ([]ClaimedDelivery, error) {
	if p == nil || p.EndpointID == "" || p.Owner == "" {
		return nil, errors.New("expire held deliveries: an endpoint and an owner are required")
	}
	if p.Limit <= 0 {
		return nil, nil
	}
	var out []ClaimedDelivery
	err := d.BreakerTx(ctx, "expire the held deliveries of "+p.EndpointID, func(st BreakerStatements) error {
		out = nil
		b, ok, err := st.BreakerRead(ctx, p.EndpointID)
		if err != nil || !ok || !b.Open {
			return err
		}
		before := p.StartedBefore
		out, err = st.LeaseOf(ctx, p.EndpointID, p.Owner, p.Now, p.Now.Add(p.LeaseFor), &before, p.Limit)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func timePtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := *t
	return &v
}

// MarshalBreaker and UnmarshalBreaker are the breaker's stored form, one
// JSON document per endpoint in both drivers: nothing but the engines
// reads its parts, and the claims read only the endpoint's held flag.
func MarshalBreaker(b *Breaker) ([]byte, error) {
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("encode the breaker of %s: %w", b.EndpointID, err)
	}
	return out, nil
}

// UnmarshalBreaker decodes what MarshalBreaker stored.
func UnmarshalBreaker(data []byte) (Breaker, error) {
	var b Breaker
	if err := json.Unmarshal(data, &b); err != nil {
		return Breaker{}, fmt.Errorf("decode a breaker: %w", err)
	}
	return b, nil
}
