package webhookendpoint

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// fakeExhausted is an ExhaustedList over a fixed backlog, oldest first, that
// counts its calls and checks the limits it is given.
type fakeExhausted struct {
	t     *testing.T
	items []ledger.ExhaustedDelivery
	calls int
}

func (f *fakeExhausted) list(_ context.Context, p *ledger.ExhaustedListParams) ([]ledger.ExhaustedDelivery, error) {
	f.calls++
	if p.Limit <= 0 || p.Limit > exhaustedPage {
		f.t.Errorf("ExhaustedList called with limit %d", p.Limit)
	}
	var out []ledger.ExhaustedDelivery
	for _, x := range f.items {
		if !p.ExhaustedAfter.IsZero() && x.Delivery.TerminalAt.Before(p.ExhaustedAfter) {
			continue
		}
		if len(out) == p.Limit {
			break
		}
		out = append(out, x)
	}
	return out, nil
}

// backlog returns n exhausted deliveries, the i-th (oldest first)
// exhausted at offset(i) before now, sorted oldest first.
func backlog(n int, offset func(i int) time.Duration) []ledger.ExhaustedDelivery {
	items := make([]ledger.ExhaustedDelivery, n)
	for i := range items {
		items[i] = exhausted(fmt.Sprintf("dlv_%06d", i), offset(i))
	}
	slices.SortStableFunc(items, func(a, b ledger.ExhaustedDelivery) int { return a.Delivery.TerminalAt.Compare(*b.Delivery.TerminalAt) })
	return items
}

func TestUnresolvedExhausted(t *testing.T) {
	tests := []struct {
		name      string
		items     []ledger.ExhaustedDelivery
		maxCalls  int
		wantFewer bool // the newest are packed too densely to single out: fewer than 20 is fine
	}{
		{name: "none", maxCalls: 0},
		{name: "a few", items: backlog(5, func(i int) time.Duration { return time.Duration(5-i) * time.Hour }), maxCalls: 1},
		{name: "just under a page", items: backlog(exhaustedPage-1, func(i int) time.Duration { return time.Duration(exhaustedPage-i) * time.Minute }), maxCalls: 1},
		{
			name:     "a large backlog spread over a month",
			items:    backlog(20000, func(i int) time.Duration { return time.Duration(20000-i) * 2 * time.Minute }),
			maxCalls: 12,
		},
		{
			name: "a large old backlog and a few recent ones",
			items: backlog(5000, func(i int) time.Duration {
				if i >= 4990 {
					return time.Duration(5000-i) * time.Second
				}
				return 48*time.Hour + time.Duration(i)*time.Second
			}),
			maxCalls: 40,
		},
		{
			name:     "an outage: thousands within the last minutes",
			items:    backlog(8000, func(i int) time.Duration { return time.Duration(8000-i) * 20 * time.Millisecond }),
			maxCalls: 40,
		},
		{
			name:      "more than a page within one second",
			items:     backlog(3000, func(i int) time.Duration { return time.Duration(3000-i) * 100 * time.Microsecond }),
			maxCalls:  40,
			wantFewer: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeExhausted{t: t, items: tt.items}
			oldest, newest, err := unresolvedExhausted(context.Background(), f.list, "ns/ep", int64(len(tt.items)), statusNow, recentExhaustedMax)
			if err != nil {
				t.Fatal(err)
			}
			if f.calls > tt.maxCalls {
				t.Errorf("%d ExhaustedList calls, want at most %d", f.calls, tt.maxCalls)
			}
			if len(tt.items) == 0 {
				if oldest != nil || newest != nil {
					t.Errorf("found %v and %d for an empty backlog", oldest, len(newest))
				}
				return
			}
			if oldest == nil || oldest.Delivery.ID != tt.items[0].Delivery.ID {
				t.Errorf("oldest = %v, want %s", oldest, tt.items[0].Delivery.ID)
			}
			want := min(len(tt.items), recentExhaustedMax)
			if tt.wantFewer {
				if len(newest) == 0 || len(newest) > want {
					t.Fatalf("%d newest, want between 1 and %d", len(newest), want)
				}
				want = len(newest)
			} else if len(newest) != want {
				t.Fatalf("%d newest, want %d", len(newest), want)
			}
			for i := range want {
				if w := tt.items[len(tt.items)-1-i].Delivery.ID; newest[i].Delivery.ID != w {
					t.Fatalf("newest[%d] = %s, want %s", i, newest[i].Delivery.ID, w)
				}
			}
		})
	}
}
