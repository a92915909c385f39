package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/eventtype"
)

// ExhaustedList's walk, run once for both drivers. Event-type patterns are
// matched here (eventtype.MatchAny, as fan-out does), not in SQL, so the
// walk reads pages of an endpoint's unresolved exhausted deliveries, in
// the order of the deliveries_exhausted index, until the limit is filled
// or they run out. A driver implements only the page (ExhaustedPager).

// ExhaustedTypedPage is the smallest page read when event-type patterns
// filter the list, so that a selective pattern costs few round trips.
const ExhaustedTypedPage = 256

// ExhaustedPageParams selects one page of an endpoint's unresolved
// exhausted deliveries, ordered by (TerminalAt, ID).
type ExhaustedPageParams struct {
	EndpointID string
	// DeliveryIDs and EventIDs filter when not empty.
	DeliveryIDs []string
	EventIDs    []string
	// ExhaustedAfter (inclusive) and ExhaustedBefore (exclusive) bound
	// TerminalAt; zero does not bound.
	ExhaustedAfter  time.Time
	ExhaustedBefore time.Time
	// After is the last delivery of the previous page; nil for the first.
	After *ExhaustedKey
	Limit int
}

// ExhaustedKey is a position in the walk: after (TerminalAt, DeliveryID).
type ExhaustedKey struct {
	TerminalAt time.Time
	DeliveryID string
}

// UnixNanoBounds returns the page's bounds as the drivers store instants,
// in Unix nanoseconds: TerminalAt in [from, to), after (afterAt, afterID).
func (p *ExhaustedPageParams) UnixNanoBounds() (from, to, afterAt int64, afterID string) {
	from, to, afterAt = math.MinInt64, math.MaxInt64, math.MinInt64
	if !p.ExhaustedAfter.IsZero() {
		from = p.ExhaustedAfter.UnixNano()
	}
	if !p.ExhaustedBefore.IsZero() {
		to = p.ExhaustedBefore.UnixNano()
	}
	if p.After != nil {
		afterAt, afterID = p.After.TerminalAt.UnixNano(), p.After.DeliveryID
	}
	return from, to, afterAt, afterID
}

// ExhaustedPager reads one page of ExhaustedList.
type ExhaustedPager interface {
	// ExhaustedPage returns up to p.Limit unresolved exhausted deliveries
	// of p.EndpointID matching p, in (TerminalAt, ID) order.
	ExhaustedPage(ctx context.Context, p *ExhaustedPageParams) ([]ExhaustedDelivery, error)
}

// ExhaustedList implements Recovery.ExhaustedList over pg: it reads pages
// until p's limit of deliveries whose event type matches p.EventTypes is
// filled, or a short page shows the walk reached the end.
func ExhaustedList(ctx context.Context, pg ExhaustedPager, p *ExhaustedListParams) ([]ExhaustedDelivery, error) {
	if p == nil {
		return nil, errors.New("list exhausted deliveries: nil params")
	}
	limit := ExhaustedLimit(p.Limit)
	q := ExhaustedPageParams{
		EndpointID: p.EndpointID, DeliveryIDs: p.DeliveryIDs, EventIDs: p.EventIDs,
		ExhaustedAfter: p.ExhaustedAfter, ExhaustedBefore: p.ExhaustedBefore, Limit: limit,
	}
	if len(p.EventTypes) > 0 {
		q.Limit = max(limit, ExhaustedTypedPage)
	}
	var out []ExhaustedDelivery
	for {
		page, err := pg.ExhaustedPage(ctx, &q)
		if err != nil {
			return nil, fmt.Errorf("list exhausted deliveries of %s: %w", p.EndpointID, err)
		}
		for i := range page {
			if len(out) == limit {
				break
			}
			if len(p.EventTypes) == 0 || eventtype.MatchAny(p.EventTypes, page[i].EventType) {
				out = append(out, page[i])
			}
		}
		if len(out) == limit || len(page) < q.Limit {
			return out, nil
		}
		last := page[len(page)-1].Delivery
		if last.TerminalAt == nil {
			return nil, fmt.Errorf("list exhausted deliveries of %s: delivery %s has no TerminalAt", p.EndpointID, last.ID)
		}
		q.After = &ExhaustedKey{TerminalAt: *last.TerminalAt, DeliveryID: last.ID}
	}
}
