package deliveryapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/httpapi"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Publisher is the publish path of the HTTP API (httpapi.Ingest): a create
// of a webhookevent is a publish, validated, hashed and committed by the
// same code as POST /v1/namespaces/{ns}/events.
type Publisher interface {
	Publish(ctx context.Context, ns, key string, body []byte) (ledger.EventInsertResult, error)
}

// The HTTP API's permission to publish, as internal/kubeauth asks it: create
// on events in group hookkeeper.dev in the namespace. A create of a
// webhookevent needs it besides create on webhookevents (docs/adr/0013).
const (
	PublishGroup    = "hookkeeper.dev"
	PublishResource = "events"
)

// ReplayedAnnotation marks the answer to a create whose idempotency key
// was used before with the same event: the answer is that original event.
const ReplayedAnnotation = "delivery.hookkeeper.dev/idempotent-replayed"

var webhookEventGK = v1alpha1.SchemeGroupVersion.WithKind("WebhookEvent").GroupKind()

// creatableEvents is eventStorage that also creates (publishes) events.
type creatableEvents struct {
	*eventStorage
	publisher Publisher
}

var _ rest.Creater = (*creatableEvents)(nil) //nolint:misspell // k8s.io/apiserver spells it so

// Create publishes the event: first the HTTP API's permission, then the
// fields this API cannot carry, then the HTTP API's own validation,
// idempotency and commit. The answer is the event as a get shows it (data
// only with the data permission, secrets never).
func (s *creatableEvents) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, o *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*v1alpha1.WebhookEvent)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a WebhookEvent: %T", obj))
	}
	ns := genericapirequest.NamespaceValue(ctx)
	if o != nil && len(o.DryRun) > 0 {
		return nil, apierrors.NewBadRequest("dry-run is not supported for webhookevents: a publish cannot be tried without being recorded")
	}
	if err := s.mayPublish(ctx, ns); err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj); err != nil {
			return nil, err
		}
	}
	if errs := createOnlyFields(ev); len(errs) > 0 {
		return nil, apierrors.NewInvalid(webhookEventGK, ev.Name, errs)
	}
	body, err := publishBody(&ev.Spec)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	res, err := s.publisher.Publish(ctx, ns, ev.Spec.IdempotencyKey, body)
	if err != nil {
		return nil, publishError(err)
	}
	show, err := s.mayReadData(ctx, ns)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	out := toEvent(res.Event, show)
	out.Spec.Endpoint = ev.Spec.Endpoint
	if res.Duplicate {
		out.Annotations = map[string]string{ReplayedAnnotation: "true"}
	}
	return &out, nil
}

// mayPublish asks the delegated authorizer the HTTP API's question.
func (s *creatableEvents) mayPublish(ctx context.Context, ns string) error {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return apierrors.NewUnauthorized("no user")
	}
	d, reason, err := s.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: "create", Namespace: ns, APIGroup: PublishGroup,
		Resource: PublishResource, ResourceRequest: true,
	})
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("authorizing a publish in %s: %w", ns, err))
	}
	if d != authorizer.DecisionAllow {
		msg := fmt.Sprintf("user %q may not create %s.%s in namespace %q, which publishing needs through this API as through the HTTP API (ClusterRole event-publisher)",
			u.GetName(), PublishResource, PublishGroup, ns)
		if reason != "" {
			msg += ": " + reason
		}
		return apierrors.NewForbidden(eventsGR, "", errors.New(msg))
	}
	return nil
}

// createOnlyFields refuses what a create may set but the ledger cannot
// keep or this API must not carry.
func createOnlyFields(ev *v1alpha1.WebhookEvent) field.ErrorList {
	var errs field.ErrorList
	md := field.NewPath("metadata")
	if ev.Name != "" {
		errs = append(errs, field.Forbidden(md.Child("name"),
			"the name is the event ID (evt_...) that the server assigns: leave it out (generateName is ignored), and set spec.idempotencyKey to make a retry safe"))
	}
	if len(ev.Labels) > 0 {
		errs = append(errs, field.Forbidden(md.Child("labels"), "events carry no labels"))
	}
	if len(ev.Annotations) > 0 {
		errs = append(errs, field.Forbidden(md.Child("annotations"), "events carry no annotations"))
	}
	if len(ev.Spec.SecretNames) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "secretNames"),
			"one-time secrets cannot be published through the Kubernetes API (its audit log may record request bodies): publish an event with secrets through the HTTP API"))
	}
	return errs
}

// publishBody is the HTTP API's publish body for spec, so that both APIs
// validate and hash the same document.
func publishBody(spec *v1alpha1.WebhookEventSpec) ([]byte, error) {
	doc := map[string]any{"type": spec.Type}
	if spec.Data != nil && len(spec.Data.Raw) > 0 {
		doc["data"] = json.RawMessage(spec.Data.Raw)
	}
	if spec.ReissueOf != "" {
		doc["reissueOf"] = spec.ReissueOf
	}
	if spec.Endpoint != "" {
		doc["endpoint"] = spec.Endpoint
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the publish body: %w", err)
	}
	return b, nil
}

// publishError answers a refused publish in Kubernetes terms: a bad field
// is 422 Invalid naming it under spec, a reused key 409 Conflict.
func publishError(err error) error {
	status, code, fld, msg, retryAfter := httpapi.Refusal(err)
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return apierrors.NewInvalid(webhookEventGK, "", field.ErrorList{
			field.Invalid(specField(fld), field.OmitValueType{}, msg+" ("+string(code)+")"),
		})
	case http.StatusConflict:
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
			Message: "spec.idempotencyKey was already used in this namespace with a different event; use a new key for a new event",
			Details: &metav1.StatusDetails{Group: webhookEventGK.Group, Kind: "webhookevents",
				Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueDuplicate, Field: "spec.idempotencyKey", Message: msg}}},
		}}
	case http.StatusRequestEntityTooLarge:
		return apierrors.NewRequestEntityTooLargeError(msg)
	case http.StatusServiceUnavailable:
		se := apierrors.NewServiceUnavailable(msg)
		if s, err := strconv.Atoi(retryAfter); err == nil {
			se.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: int32(s)}
		}
		return se
	}
	utilruntime.HandleError(fmt.Errorf("delivery API: publishing: %w", err))
	return apierrors.NewInternalError(errors.New(msg))
}

// specField is where a publish body field lives in a WebhookEvent.
func specField(f string) *field.Path {
	switch f {
	case "":
		return field.NewPath("spec")
	case "namespace":
		return field.NewPath("metadata", "namespace")
	case httpapi.IdempotencyKeyHeader:
		return field.NewPath("spec", "idempotencyKey")
	}
	return field.NewPath("spec").Child(f)
}
