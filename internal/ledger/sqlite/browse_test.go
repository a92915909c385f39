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
// would make a page of a million-row ledger cost the whole ledger; and that
// a selection of failed deliveries or of a resolution walks the partial
// index of those (migration 0009), not every delivery in ID order, so that
// a page costs a page however rare its matches are.
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
		func(p *ledger.DeliveryBrowseParams) { p.ID = "dlv_2" },
		// With the state above: exhausted and cancelled, two states that
		// no index walk gives in ID order; alone: delivered, not indexed.
		func(p *ledger.DeliveryBrowseParams) { p.States = append(p.States, ledger.StateCancelled) },
		func(p *ledger.DeliveryBrowseParams) {
			if len(p.States) == 0 {
				p.States = []ledger.DeliveryState{ledger.StateDelivered}
			}
		},
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
		plan := queryPlan(t, s, q, args...)
		text := strings.Join(plan, "\n")
		if strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("filters %+v sort every match:\n%s", p, text)
		}
		// A single delivery (ID) or event's deliveries are few already.
		if p.ID == "" && p.EventID == "" && (p.SelectsFailed() || p.Resolution != "") &&
			!strings.Contains(text, "deliveries_failed") && !strings.Contains(text, "deliveries_resolution") {
			t.Errorf("filters %+v do not walk the index of failed or resolved deliveries:\n%s", p, text)
		}
	}
}
