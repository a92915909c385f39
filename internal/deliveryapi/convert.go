package deliveryapi

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

func metaTime(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	mt := metav1.NewTime(*t)
	return &mt
}

// objectMeta names a ledger row. The UID is derived from the ID so that it
// is stable across requests and replicas.
func objectMeta(namespace, id string, created time.Time) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: id, Namespace: namespace, UID: types.UID(id),
		CreationTimestamp: metav1.NewTime(created),
	}
}

// endpointName strips the namespace from a ledger endpoint ID.
func endpointName(id string) string {
	_, name, ok := strings.Cut(id, "/")
	if !ok {
		return id
	}
	return name
}

// toDelivery converts a ledger view; attempts (newest MaxAttemptsShown,
// oldest first) only when given.
func toDelivery(v ledger.DeliveryView, attempts []ledger.Attempt) v1alpha1.Delivery {
	d := v1alpha1.Delivery{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Delivery"},
		ObjectMeta: objectMeta(v.Namespace, v.ID, v.CreatedAt),
		Spec: v1alpha1.DeliverySpec{
			Endpoint: endpointName(v.EndpointID), Owner: v.EndpointOwner, Event: v.EventID, EventType: v.EventType, RetryOf: v.RetryOf,
			TraceID: tracing.TraceID(v.EventTrace.Parent),
		},
		Status: v1alpha1.DeliveryStatus{
			State:          apiStates[v.State],
			AttemptCount:   int32(v.Attempts),
			FirstAttemptAt: metaTime(v.FirstAttemptAt),
			AckDeadline:    metaTime(v.AckDeadline),
			FinishedAt:     metaTime(v.TerminalAt),
			LastStatus:     int32(v.LastStatus),
			LastError:      v.LastError,
			Reason:         string(v.ExhaustReason),
			Resolution:     apiResolutions[v.Resolution],
			ResolvedBy:     v.ResolvedBy,
		},
	}
	if v.State == ledger.StateScheduled {
		d.Status.DueAt = metaTime(&v.DueAt)
	}
	if v.ReplacedByDelivery != "" || v.ReplacedByEvent != "" {
		d.Status.ReplacedBy = &v1alpha1.Replacement{Delivery: v.ReplacedByDelivery, Event: v.ReplacedByEvent}
	}
	if n := len(attempts) - v1alpha1.MaxAttemptsShown; n > 0 {
		d.Status.AttemptsOmitted = int32(n)
		attempts = attempts[n:]
	}
	for _, a := range attempts {
		d.Status.Attempts = append(d.Status.Attempts, v1alpha1.Attempt{
			Number: int32(a.Number), StartedAt: metav1.NewTime(a.StartedAt),
			Duration: metav1.Duration{Duration: a.Duration}, StatusCode: int32(a.StatusCode), Error: a.Error,
		})
	}
	return d
}

// toEvent converts a ledger event; its data only when showData. The
// event's Secrets are never read (EventBrowse does not return them).
func toEvent(e ledger.Event, showData bool) v1alpha1.WebhookEvent {
	ev := v1alpha1.WebhookEvent{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "WebhookEvent"},
		ObjectMeta: objectMeta(e.Namespace, e.ID, e.CreatedAt),
		Spec: v1alpha1.WebhookEventSpec{
			Type: e.Type, SecretNames: e.SecretNames, ReissueOf: e.ReissueOf, IdempotencyKey: e.IdempotencyKey,
			ValidUntil: metaTime(e.ValidUntil), TypeGeneration: e.TypeGeneration,
		},
		Status: v1alpha1.WebhookEventStatus{
			SecretsScrubbedAt: metaTime(e.SecretsScrubAt),
			DataPrunedAt:      metaTime(e.PayloadPrunedAt),
		},
	}
	if len(e.Data) > 0 {
		if showData {
			ev.Spec.Data = &runtime.RawExtension{Raw: e.Data}
		} else {
			ev.Status.DataHidden = true
		}
	}
	return ev
}
