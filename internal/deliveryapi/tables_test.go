package deliveryapi

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
)

// Every row has one cell per column, for each kind, one object or a list.
func TestTablesShape(t *testing.T) {
	now := time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)
	c := tableConvertor{now: func() time.Time { return now }}
	created := metav1.NewTime(now.Add(-time.Hour))
	d := v1alpha1.Delivery{ObjectMeta: metav1.ObjectMeta{Name: "dlv_1", CreationTimestamp: created},
		Spec:   v1alpha1.DeliverySpec{Event: "evt_1", Owner: "team-payments"},
		Status: v1alpha1.DeliveryStatus{AttemptCount: 1, ReplacedBy: &v1alpha1.Replacement{Event: "evt_2", Delivery: "dlv_2"}}}
	e := v1alpha1.WebhookEvent{ObjectMeta: metav1.ObjectMeta{Name: "evt_1", CreationTimestamp: created},
		Spec: v1alpha1.WebhookEventSpec{SecretNames: []string{"a"}}, Status: v1alpha1.WebhookEventStatus{DataHidden: true}}
	for _, obj := range []runtime.Object{&d, &v1alpha1.DeliveryList{Items: []v1alpha1.Delivery{d, d}},
		&e, &v1alpha1.WebhookEventList{Items: []v1alpha1.WebhookEvent{e}, ListMeta: metav1.ListMeta{Continue: "tok"}}} {
		tab, err := c.ConvertToTable(context.Background(), obj, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range tab.Rows {
			if len(r.Cells) != len(tab.ColumnDefinitions) {
				t.Fatalf("%T: %d cells for %d columns", obj, len(r.Cells), len(tab.ColumnDefinitions))
			}
		}
		if l, ok := obj.(*v1alpha1.WebhookEventList); ok && tab.Continue != l.Continue {
			t.Fatalf("the table drops the continue token")
		}
	}
	row := c.deliveryRow(&d)
	// A reissue names the new event; the age and "none" for no response.
	if row.Cells[8] != "event/evt_2" || row.Cells[9] != "60m" || row.Cells[5] != "none" || row.Cells[13] != "team-payments" {
		t.Fatalf("row: %v", row.Cells)
	}
	if got := c.eventRow(&e).Cells; got[3] != "1" || got[4] != "hidden" {
		t.Fatalf("event row: %v", got)
	}
}
