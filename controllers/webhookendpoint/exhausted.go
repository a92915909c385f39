package webhookendpoint

import (
	"context"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Finding an endpoint's newest unresolved exhausted deliveries for its
// status. The ledger lists them oldest first, so after an outage with a
// large backlog the newest are found by looking back over growing windows
// (and bisecting a window that holds more than a page) rather than by
// reading the whole backlog on every reconcile: a handful of bounded
// queries however large the backlog.

// exhaustedPage bounds one ExhaustedList call of the status gatherer.
const exhaustedPage = 500

// recentExhaustedMax bounds status.recentExhausted.
const recentExhaustedMax = 20

// exhaustedWindows are the look-back windows tried, smallest first.
var exhaustedWindows = []time.Duration{
	time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour, 24 * time.Hour,
	7 * 24 * time.Hour, 30 * 24 * time.Hour, 366 * 24 * time.Hour,
}

// exhaustedLister is the engine's ExhaustedList.
type exhaustedLister func(context.Context, *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error)

// unresolvedExhausted returns the oldest of an endpoint's unresolved
// exhausted deliveries and up to n of the newest, newest first; total is
// their number from EndpointStats.
func unresolvedExhausted(ctx context.Context, list exhaustedLister, id string, total int64, now time.Time, n int) (*ledger.ExhaustedDelivery, []ledger.ExhaustedDelivery, error) {
	if total <= 0 {
		return nil, nil, nil
	}
	if total < exhaustedPage {
		all, err := list(ctx, &ledger.ExhaustedListParams{EndpointID: id, Limit: exhaustedPage})
		if err != nil {
			return nil, nil, err
		}
		if len(all) == 0 {
			return nil, nil, nil
		}
		if len(all) < exhaustedPage {
			return &all[0], newestFirst(all, n), nil
		}
		// More than counted a moment ago: look for the newest below.
	}
	first, err := list(ctx, &ledger.ExhaustedListParams{EndpointID: id, Limit: 1})
	if err != nil || len(first) == 0 {
		return nil, nil, err
	}
	newest, err := newestExhausted(ctx, list, id, now, n)
	if err != nil {
		return nil, nil, err
	}
	return &first[0], newest, nil
}

// newestExhausted finds the n most recently exhausted deliveries, newest
// first, when there may be more than a page of them.
func newestExhausted(ctx context.Context, list exhaustedLister, id string, now time.Time, n int) ([]ledger.ExhaustedDelivery, error) {
	since := func(d time.Duration) ([]ledger.ExhaustedDelivery, error) {
		return list(ctx, &ledger.ExhaustedListParams{EndpointID: id, ExhaustedAfter: now.Add(-d), Limit: exhaustedPage})
	}
	// lo is the largest window known to hold fewer than n, hi the smallest
	// known to hold a full page.
	var (
		lo, hi           time.Duration
		loItems, hiItems []ledger.ExhaustedDelivery
	)
	for _, w := range exhaustedWindows {
		items, err := since(w)
		if err != nil {
			return nil, err
		}
		if len(items) >= exhaustedPage {
			hi, hiItems = w, items
			break
		}
		if len(items) >= n {
			return newestFirst(items, n), nil
		}
		lo, loItems = w, items
	}
	if hi == 0 {
		// Fewer than n within a year: older ones are past any retention.
		return newestFirst(loItems, n), nil
	}
	for range 32 {
		if hi-lo <= time.Microsecond {
			break
		}
		mid := lo + (hi-lo)/2
		items, err := since(mid)
		if err != nil {
			return nil, err
		}
		switch {
		case len(items) >= exhaustedPage:
			hi, hiItems = mid, items
		case len(items) >= n:
			return newestFirst(items, n), nil
		default:
			lo, loItems = mid, items
		}
	}
	// More than a page exhausted within a microsecond: the ones known to be
	// the newest, or failing those any of that microsecond, will do.
	if len(loItems) > 0 {
		return newestFirst(loItems, n), nil
	}
	return newestFirst(hiItems, n), nil
}

// newestFirst returns the last n of items (listed oldest first), newest
// first.
func newestFirst(items []ledger.ExhaustedDelivery, n int) []ledger.ExhaustedDelivery {
	if len(items) > n {
		items = items[len(items)-n:]
	}
	out := make([]ledger.ExhaustedDelivery, len(items))
	for i := range items {
		out[len(items)-1-i] = items[i]
	}
	return out
}
