package deliveryapi

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The field selectors each kind supports. Each one is a filter the ledger
// applies in its query, so that a selected list costs a page, not a scan in
// the server.
var (
	deliveryFields = []string{"metadata.name", "metadata.namespace", "spec.endpoint", "spec.event",
		"spec.eventType", "status.state", "status.resolution"}
	eventFields = []string{"metadata.name", "metadata.namespace", "spec.type"}
)

// fieldLabelConversion accepts the supported fields of kind and refuses the
// others with a message that lists them (the server answers BadRequest).
func fieldLabelConversion(kind string, supported []string) runtime.FieldLabelConversionFunc {
	return func(label, value string) (string, string, error) {
		if slices.Contains(supported, label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field selector %q is not supported for %s: use %s",
			label, kind, strings.Join(supported, ", "))
	}
}

// errNoMatch means the selector contradicts the request (another namespace):
// the answer is an empty list, not an error.
var errNoMatch = fmt.Errorf("selector matches nothing")

// selectorError is a bad selector: the server answers BadRequest.
type selectorError struct{ msg string }

func (e *selectorError) Error() string { return e.msg }

func badSelector(format string, args ...any) error {
	return &selectorError{msg: fmt.Sprintf(format, args...)}
}

// refuseLabels refuses a label selector: the ledger's deliveries and events
// carry no labels, so any label selector would silently match nothing.
func refuseLabels(sel labels.Selector, resource string) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	return badSelector("label selectors are not supported on %s: they carry no labels; use field selectors (%s)",
		resource, strings.Join(map[string][]string{"deliveries": deliveryFields, "webhookevents": eventFields}[resource], ", "))
}

// equalities returns the selector's field=value pairs, refusing other
// operators and a field given twice.
func equalities(sel fields.Selector) (map[string]string, error) {
	out := map[string]string{}
	if sel == nil {
		return out, nil
	}
	for _, r := range sel.Requirements() {
		if r.Operator != selection.Equals && r.Operator != selection.DoubleEquals {
			return nil, badSelector("field selector %s%s%s: only = and == are supported", r.Field, r.Operator, r.Value)
		}
		if prev, ok := out[r.Field]; ok && prev != r.Value {
			return nil, badSelector("field selector %s is given twice with different values", r.Field)
		}
		out[r.Field] = r.Value
	}
	return out, nil
}

// scopeNamespace reconciles the request's namespace with a
// metadata.namespace selector.
func scopeNamespace(reqNamespace string, eq map[string]string) (string, error) {
	ns, ok := eq["metadata.namespace"]
	if !ok {
		return reqNamespace, nil
	}
	if reqNamespace != "" && ns != reqNamespace {
		return "", errNoMatch
	}
	return ns, nil
}

// States and resolutions as the API names them, and the ledger's values.
var (
	apiStates = map[ledger.DeliveryState]string{
		ledger.StateScheduled: "Scheduled", ledger.StateInFlight: "InFlight", ledger.StateAwaitingAck: "AwaitingAck",
		ledger.StateDelivered: "Delivered", ledger.StateExhausted: "Exhausted", ledger.StateCancelled: "Cancelled",
	}
	apiResolutions = map[ledger.Resolution]string{
		ledger.ResolutionUnresolved: "Unresolved", ledger.ResolutionRetried: "Retried",
		ledger.ResolutionReissued: "Reissued", ledger.ResolutionDismissed: "Dismissed",
	}
)

// fromAPI finds the ledger value whose API name is name.
func fromAPI[K ~string](m map[K]string, field, name string) (K, error) {
	var names []string
	for k, v := range m {
		if v == name {
			return k, nil
		}
		names = append(names, v)
	}
	slices.Sort(names)
	return "", badSelector("field selector %s=%s: unknown value; use one of %s", field, name, strings.Join(names, ", "))
}

// deliveryParams turns a request's namespace and field selector into the
// ledger's filter.
func deliveryParams(namespace string, sel fields.Selector) (ledger.DeliveryBrowseParams, error) {
	var p ledger.DeliveryBrowseParams
	eq, err := equalities(sel)
	if err != nil {
		return p, err
	}
	if p.Namespace, err = scopeNamespace(namespace, eq); err != nil {
		return p, err
	}
	for field, v := range eq {
		switch field {
		case "metadata.name":
			p.ID = v
		case "spec.endpoint":
			if p.Namespace == "" {
				return p, badSelector("field selector spec.endpoint needs a namespace (-n, or metadata.namespace=): endpoint names are per namespace")
			}
			p.EndpointID = ledger.EndpointID(p.Namespace, v)
		case "spec.event":
			p.EventID = v
		case "spec.eventType":
			p.EventType = v
		case "status.state":
			st, err := fromAPI(apiStates, field, v)
			if err != nil {
				return p, err
			}
			p.States = []ledger.DeliveryState{st}
		case "status.resolution":
			res, err := fromAPI(apiResolutions, field, v)
			if err != nil {
				return p, err
			}
			p.Resolution = res
		case "metadata.namespace":
		default:
			return p, badSelector("field selector %q is not supported for Delivery: use %s", field, strings.Join(deliveryFields, ", "))
		}
	}
	return p, nil
}

// eventParams is deliveryParams for webhookevents.
func eventParams(namespace string, sel fields.Selector) (ledger.EventBrowseParams, error) {
	var p ledger.EventBrowseParams
	eq, err := equalities(sel)
	if err != nil {
		return p, err
	}
	if p.Namespace, err = scopeNamespace(namespace, eq); err != nil {
		return p, err
	}
	for field, v := range eq {
		switch field {
		case "metadata.name":
			p.ID = v
		case "spec.type":
			p.Type = v
		case "metadata.namespace":
		default:
			return p, badSelector("field selector %q is not supported for WebhookEvent: use %s", field, strings.Join(eventFields, ", "))
		}
	}
	return p, nil
}
