package sqlite

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// TestDeliveryBrowsePlans checks, for every combination of filters, that
// SQLite answers a page by walking deliveries in ID order and stopping,
// never by collecting and sorting every match (USE TEMP B-TREE), which
// would make a page of a million-row ledger cost the whole ledger.
func TestDeliveryBrowsePlans(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	set := []func(p *ledger.DeliveryBrowseParams){
		func(p *ledger.DeliveryBrowseParams) { p.Namespace = "shop" },
		func(p *ledger.DeliveryBrowseParams) { p.EndpointID = "shop/billing" },
		func(p *ledger.DeliveryBrowseParams) { p.EventID = "evt_1" },
		func(p *ledger.DeliveryBrowseParams) { p.EventType = "order.paid" },
		func(p *ledger.DeliveryBrowseParams) { p.States = []ledger.DeliveryState{ledger.StateExhausted} },
		func(p *ledger.DeliveryBrowseParams) { p.Resolution = ledger.ResolutionUnresolved },
		func(p *ledger.DeliveryBrowseParams) { p.AfterID = "dlv_1" },
	}
	for mask := range 1 << len(set) {
		p := &ledger.DeliveryBrowseParams{Limit: 101}
		for i, f := range set {
			if mask&(1<<i) != 0 {
				f(p)
			}
		}
		q, args, err := deliveryBrowseSQL(p)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if text := strings.Join(plan, "\n"); strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("filters %+v sort every match:\n%s", p, text)
		}
	}
}
