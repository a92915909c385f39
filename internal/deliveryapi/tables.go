package deliveryapi

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
)

// Columns of kubectl get. Priority 1 columns appear with -o wide.
var (
	deliveryColumns = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "The delivery ID."},
		{Name: "Event Type", Type: "string", Description: "The event's type."},
		{Name: "Endpoint", Type: "string", Description: "The WebhookEndpoint it is bound for."},
		{Name: "State", Type: "string", Description: "Scheduled, InFlight, AwaitingAck, Delivered, Exhausted or Cancelled."},
		{Name: "Attempts", Type: "integer", Description: "Attempts made."},
		{Name: "Last Status", Type: "string", Description: "HTTP status of the last attempt (none: no response)."},
		{Name: "Reason", Type: "string", Description: "Why an exhausted delivery was given up on."},
		{Name: "Resolution", Type: "string", Description: "What became of an exhausted delivery."},
		{Name: "Replaced By", Type: "string", Description: "The retry or the reissue that replaced it."},
		{Name: "Age", Type: "string", Description: "Time since the delivery was created."},
		{Name: "Event", Type: "string", Priority: 1, Description: "The event (WebhookEvent name)."},
		{Name: "Next Attempt", Type: "string", Priority: 1, Description: "When the next attempt is due."},
		{Name: "Retry Of", Type: "string", Priority: 1, Description: "The exhausted delivery this one retries."},
		{Name: "Owner", Type: "string", Priority: 1, Description: "The endpoint's spec.owner: whom to ask about it."},
		{Name: "Last Error", Type: "string", Priority: 1, Description: "Why the last attempt failed."},
		{Name: "Trace", Type: "string", Priority: 1, Description: "The trace ID of its event's publish and of its attempts."},
	}
	eventColumns = []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "The event ID."},
		{Name: "Type", Type: "string", Description: "The event type."},
		{Name: "Reissue Of", Type: "string", Description: "The event this one reissues."},
		{Name: "Secrets", Type: "string", Description: "How many one-time secrets it carries, and whether they are gone; never their values."},
		{Name: "Data", Type: "string", Description: "shown, hidden (no permission), pruned (retention) or none."},
		{Name: "Age", Type: "string", Description: "Time since the event was published."},
		{Name: "Idempotency Key", Type: "string", Priority: 1, Description: "The key it was published with."},
	}
)

// tableConvertor renders the kinds as server-side tables.
type tableConvertor struct{ now func() time.Time }

func (c tableConvertor) age(t metav1.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(c.now().Sub(t.Time))
}

func relative(now time.Time, t *metav1.Time) string {
	if t == nil {
		return ""
	}
	if d := t.Sub(now); d > 0 {
		return "in " + duration.HumanDuration(d)
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}

func (c tableConvertor) deliveryRow(d *v1alpha1.Delivery) metav1.TableRow {
	last := ""
	if d.Status.AttemptCount > 0 {
		last = "none"
		if d.Status.LastStatus != 0 {
			last = strconv.Itoa(int(d.Status.LastStatus))
		}
	}
	replaced := ""
	if r := d.Status.ReplacedBy; r != nil {
		switch {
		case r.Event != "" && r.Event != d.Spec.Event:
			replaced = "event/" + r.Event
		case r.Delivery != "":
			replaced = "delivery/" + r.Delivery
		}
	}
	return metav1.TableRow{
		Cells: []any{d.Name, d.Spec.EventType, d.Spec.Endpoint, d.Status.State, int64(d.Status.AttemptCount),
			last, d.Status.Reason, d.Status.Resolution, replaced, c.age(d.CreationTimestamp),
			d.Spec.Event, relative(c.now(), d.Status.DueAt), d.Spec.RetryOf, d.Spec.Owner, d.Status.LastError, d.Spec.TraceID},
		Object: runtime.RawExtension{Object: d},
	}
}

func (c tableConvertor) eventRow(e *v1alpha1.WebhookEvent) metav1.TableRow {
	secrets := ""
	if n := len(e.Spec.SecretNames); n > 0 {
		secrets = strconv.Itoa(n)
		if e.Status.SecretsScrubbedAt != nil {
			secrets += " (scrubbed)"
		}
	}
	data := "none"
	switch {
	case e.Spec.Data != nil:
		data = "shown"
	case e.Status.DataHidden:
		data = "hidden"
	case e.Status.DataPrunedAt != nil:
		data = "pruned"
	}
	return metav1.TableRow{
		Cells:  []any{e.Name, e.Spec.Type, e.Spec.ReissueOf, secrets, data, c.age(e.CreationTimestamp), e.Spec.IdempotencyKey},
		Object: runtime.RawExtension{Object: e},
	}
}

// ConvertToTable implements rest.TableConvertor for both kinds, one object
// or a list.
func (c tableConvertor) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{}
	switch o := obj.(type) {
	case *v1alpha1.Delivery:
		t.ColumnDefinitions, t.Rows = deliveryColumns, []metav1.TableRow{c.deliveryRow(o)}
	case *v1alpha1.DeliveryList:
		t.ColumnDefinitions = deliveryColumns
		for i := range o.Items {
			t.Rows = append(t.Rows, c.deliveryRow(&o.Items[i]))
		}
	case *v1alpha1.WebhookEvent:
		t.ColumnDefinitions, t.Rows = eventColumns, []metav1.TableRow{c.eventRow(o)}
	case *v1alpha1.WebhookEventList:
		t.ColumnDefinitions = eventColumns
		for i := range o.Items {
			t.Rows = append(t.Rows, c.eventRow(&o.Items[i]))
		}
	default:
		return nil, fmt.Errorf("no table for %T", obj)
	}
	if l, err := meta.ListAccessor(obj); err == nil {
		t.ResourceVersion, t.Continue = l.GetResourceVersion(), l.GetContinue()
	}
	return t, nil
}
