package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// fakePager serves rows, already in (TerminalAt, ID) order, as the
// drivers' pages do, and records the pages asked for.
type fakePager struct {
	rows  []ExhaustedDelivery
	asked []ExhaustedPageParams
	fail  error
}

func (f *fakePager) ExhaustedPage(_ context.Context, p *ExhaustedPageParams) ([]ExhaustedDelivery, error) {
	f.asked = append(f.asked, *p)
	if f.fail != nil {
		return nil, f.fail
	}
	start := 0
	if p.After != nil {
		start = slices.IndexFunc(f.rows, func(r ExhaustedDelivery) bool { return r.Delivery.ID == p.After.DeliveryID }) + 1
		if !f.rows[start-1].Delivery.TerminalAt.Equal(p.After.TerminalAt) {
			return nil, fmt.Errorf("key %+v does not match the row", p.After)
		}
	}
	end := min(len(f.rows), start+p.Limit)
	return slices.Clone(f.rows[start:end]), nil
}

// exhaustedRows returns n rows of the given types, in turn.
func exhaustedRows(n int, types ...string) []ExhaustedDelivery {
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	out := make([]ExhaustedDelivery, n)
	for i := range out {
		at := base.Add(time.Duration(i) * time.Second)
		out[i] = ExhaustedDelivery{Delivery: Delivery{ID: fmt.Sprintf("dlv_%04d", i), TerminalAt: &at}, EventType: types[i%len(types)]}
	}
	return out
}

func ids(ds []ExhaustedDelivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Delivery.ID
	}
	return out
}

func TestExhaustedListPaging(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		rows      []ExhaustedDelivery
		params    ExhaustedListParams
		wantIDs   []string
		wantPages []int // the Limit of each page asked for
	}{
		{
			name:   "no patterns: one page of the limit",
			rows:   exhaustedRows(10, "a"),
			params: ExhaustedListParams{Limit: 3}, wantIDs: []string{"dlv_0000", "dlv_0001", "dlv_0002"},
			wantPages: []int{3},
		},
		{
			name:   "a short page ends the walk",
			rows:   exhaustedRows(2, "a"),
			params: ExhaustedListParams{Limit: 3}, wantIDs: []string{"dlv_0000", "dlv_0001"},
			wantPages: []int{3},
		},
		{
			name:   "pages are read until the limit fills",
			rows:   exhaustedRows(600, "other", "other", "other", "wanted.x"),
			params: ExhaustedListParams{Limit: 100, EventTypes: []string{"wanted.*"}},
			// 150 matches in 600 rows: the limit fills in the second page
			// (rows 256..511), the third is never read.
			wantIDs:   ids(everyFourth(exhaustedRows(600, "x"), 3)[:100]),
			wantPages: []int{ExhaustedTypedPage, ExhaustedTypedPage},
		},
		{
			name:      "patterns that match nothing walk to the end",
			rows:      exhaustedRows(600, "other"),
			params:    ExhaustedListParams{Limit: 10, EventTypes: []string{"wanted"}},
			wantIDs:   []string{},
			wantPages: []int{ExhaustedTypedPage, ExhaustedTypedPage, ExhaustedTypedPage},
		},
		{
			name:      "an exact multiple of the page reads one empty page",
			rows:      exhaustedRows(2*ExhaustedTypedPage, "other"),
			params:    ExhaustedListParams{Limit: 10, EventTypes: []string{"wanted"}},
			wantIDs:   []string{},
			wantPages: []int{ExhaustedTypedPage, ExhaustedTypedPage, ExhaustedTypedPage},
		},
		{
			name:      "a limit above the typed page is the page",
			rows:      exhaustedRows(400, "a"),
			params:    ExhaustedListParams{Limit: 300, EventTypes: []string{"a"}},
			wantIDs:   ids(exhaustedRows(300, "a")),
			wantPages: []int{300},
		},
		{
			name:      "the default limit",
			rows:      exhaustedRows(150, "a"),
			params:    ExhaustedListParams{},
			wantIDs:   ids(exhaustedRows(DefaultExhaustedLimit, "a")),
			wantPages: []int{DefaultExhaustedLimit},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := &fakePager{rows: tc.rows}
			got, err := ExhaustedList(ctx, pg, &tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if g := ids(got); !slices.Equal(g, tc.wantIDs) {
				t.Errorf("got %d deliveries %v, want %d %v", len(g), head(g), len(tc.wantIDs), head(tc.wantIDs))
			}
			var pages []int
			for i, a := range pg.asked {
				pages = append(pages, a.Limit)
				if (i == 0) != (a.After == nil) {
					t.Errorf("page %d after %+v", i, a.After)
				}
			}
			if !slices.Equal(pages, tc.wantPages) {
				t.Errorf("pages %v, want %v", pages, tc.wantPages)
			}
		})
	}
}

func everyFourth(rows []ExhaustedDelivery, offset int) []ExhaustedDelivery {
	var out []ExhaustedDelivery
	for i := offset; i < len(rows); i += 4 {
		out = append(out, rows[i])
	}
	return out
}

func head(s []string) []string { return s[:min(len(s), 3)] }

func TestExhaustedListPassesTheFilters(t *testing.T) {
	after := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := &ExhaustedListParams{
		EndpointID: "ns/ep", DeliveryIDs: []string{"dlv_1"}, EventIDs: []string{"evt_1"},
		ExhaustedAfter: after, Limit: 5,
	}
	pg := &fakePager{}
	if _, err := ExhaustedList(context.Background(), pg, p); err != nil {
		t.Fatal(err)
	}
	q := pg.asked[0]
	if q.EndpointID != "ns/ep" || !slices.Equal(q.DeliveryIDs, p.DeliveryIDs) || !slices.Equal(q.EventIDs, p.EventIDs) ||
		!q.ExhaustedAfter.Equal(after) || !q.ExhaustedBefore.IsZero() {
		t.Errorf("page params %+v do not carry the list's filters %+v", q, p)
	}
	from, to, afterAt, afterID := q.UnixNanoBounds()
	if from != after.UnixNano() || to != math.MaxInt64 || afterAt != math.MinInt64 || afterID != "" {
		t.Errorf("bounds %d %d %d %q", from, to, afterAt, afterID)
	}
	q.After = &ExhaustedKey{TerminalAt: after.Add(time.Second), DeliveryID: "dlv_9"}
	q.ExhaustedAfter = time.Time{}
	if from, _, afterAt, afterID = q.UnixNanoBounds(); from != math.MinInt64 || afterAt != after.Add(time.Second).UnixNano() || afterID != "dlv_9" {
		t.Errorf("bounds after a key: %d %d %q", from, afterAt, afterID)
	}
}

func TestExhaustedListErrors(t *testing.T) {
	boom := errors.New("boom")
	_, err := ExhaustedList(context.Background(), &fakePager{fail: boom}, &ExhaustedListParams{EndpointID: "ns/ep"})
	if !errors.Is(err, boom) || err.Error() != "list exhausted deliveries of ns/ep: boom" {
		t.Errorf("err %v, want boom with the endpoint", err)
	}
	if _, err := ExhaustedList(context.Background(), &fakePager{}, nil); err == nil {
		t.Error("nil params accepted")
	}
}
