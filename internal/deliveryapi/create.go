package deliveryapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
	"github.com/hookkeeper/hookkeeper/internal/tracing"
)

// Publisher is the publish core (publish.Core): a create of a webhookevent
// is a publish, validated, hashed and committed by the same code as POST
// /v1/namespaces/{ns}/events.
type Publisher interface {
	Publish(ctx context.Context, r *publish.Request) (ledger.EventInsertResult, error)
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
// fields this API cannot carry, then the publish core's validation,
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
	ctx, span := tracing.Tracer().Start(ctx, tracing.PublishSpan, trace.WithAttributes(tracing.AttrNamespace.String(ns)))
	defer span.End()
	res, err := s.publisher.Publish(ctx, publishRequest(ns, &ev.Spec))
	if err != nil {
		span.SetStatus(codes.Error, "refused")
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

// publishRequest is the publish core's request for spec in namespace ns.
func publishRequest(ns string, spec *v1alpha1.WebhookEventSpec) *publish.Request {
	r := &publish.Request{Namespace: ns, IdempotencyKey: spec.IdempotencyKey, Type: spec.Type,
		ReissueOf: spec.ReissueOf, Endpoint: spec.Endpoint}
	if spec.Data != nil {
		r.Data = spec.Data.Raw
	}
	if spec.ValidUntil != nil {
		t := spec.ValidUntil.UTC()
		r.ValidUntil = &t
	}
	return r
}

// publishError answers a refused publish in Kubernetes terms: a bad field
// is 422 Invalid naming it under spec, a reused key 409 Conflict, a too
// large one 413, a namespace over its WebhookQuota 429 with a retry-after
// and a cause of type QuotaExceeded naming the hard limit, an unavailable
// ledger 503 with a retry-after.
func publishError(err error) error {
	if fe, ok := errors.AsType[*publish.FieldError](err); ok {
		return apierrors.NewInvalid(webhookEventGK, "", field.ErrorList{
			field.Invalid(specField(fe.Field), field.OmitValueType{}, fe.Message+" ("+string(fe.Rule)+")"),
		})
	}
	if ce, ok := errors.AsType[*publish.ContractError](err); ok {
		// A schema's refusal already starts with its type ("Invalid
		// value: …"): the field error takes it rather than repeat it.
		fe := field.Invalid(specField(ce.Field), field.OmitValueType{}, ce.Message+" ("+string(ce.Rule)+")")
		if ce.Rule == publish.RuleSchema {
			fe = schemaFieldError(specField(ce.Field), ce.Message+" ("+string(ce.Rule)+")")
		}
		return apierrors.NewInvalid(webhookEventGK, "", field.ErrorList{fe})
	}
	if fe, ok := errors.AsType[*publish.FanOutError](err); ok {
		return apierrors.NewInvalid(webhookEventGK, "", field.ErrorList{
			field.Invalid(specField("type"), field.OmitValueType{}, fe.Error()+" (FanOutLimitExceeded)"),
		})
	}
	if ue, ok := errors.AsType[*publish.UnknownEndpointError](err); ok {
		return apierrors.NewInvalid(webhookEventGK, "", field.ErrorList{
			field.Invalid(specField("endpoint"), field.OmitValueType{}, ue.Error()+" (UnknownEndpoint)"),
		})
	}
	if errors.Is(err, publish.ErrIdempotencyConflict) {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
			Message: "spec.idempotencyKey was already used in this namespace with a different event; use a new key for a new event",
			Details: &metav1.StatusDetails{Group: webhookEventGK.Group, Kind: "webhookevents",
				Causes: []metav1.StatusCause{{Type: metav1.CauseTypeFieldValueDuplicate, Field: "spec.idempotencyKey", Message: err.Error()}}},
		}}
	}
	if tl, ok := errors.AsType[*publish.TooLargeError](err); ok {
		return apierrors.NewRequestEntityTooLargeError(tl.Error())
	}
	if qe, ok := errors.AsType[*publish.QuotaExceededError](err); ok {
		// The API server answers RetryAfterSeconds as Retry-After, and
		// kubectl prints the message, which says when to retry. client-go
		// (kubectl, controllers) sleeps a 429's Retry-After and sends again,
		// up to ten times: a short wait (the rate's next turn) is worth
		// that, a long one (the day's end, pruning) would hang kubectl for
		// hours, so it is in the message only.
		wait := publish.RetryAfterSeconds(qe.RetryAfter)
		if wait > maxClientRetryAfter {
			wait = 0
		}
		se := apierrors.NewTooManyRequests(qe.Error()+" ("+string(QuotaExceeded)+")", int(wait))
		se.ErrStatus.Details.Group, se.ErrStatus.Details.Kind = webhookEventGK.Group, "webhookevents"
		se.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: QuotaExceeded, Field: "spec.hard." + string(qe.Limit),
			Message: "the namespace's WebhookQuota"}}
		return se
	}
	if ue, ok := errors.AsType[*publish.UnavailableError](err); ok {
		utilruntime.HandleError(fmt.Errorf("delivery API: publishing: %w", err))
		se := apierrors.NewServiceUnavailable(ue.Message)
		se.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: retryAfterSeconds(ue.RetryAfter)}
		return se
	}
	utilruntime.HandleError(fmt.Errorf("delivery API: publishing: %w", err))
	return apierrors.NewInternalError(errors.New("publishing failed; the error has been logged"))
}

// maxClientRetryAfter is the longest Retry-After (seconds) the aggregated
// door gives a quota refusal: clients built on client-go wait it out and
// retry by themselves.
const maxClientRetryAfter = 10

// QuotaExceeded is the type of the cause of a create refused by the
// namespace's WebhookQuota; its field names the hard limit
// (spec.hard.<limit> of the WebhookQuota).
const QuotaExceeded metav1.CauseType = "QuotaExceeded"

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int32 {
	return int32(max(1, (d+time.Second-1)/time.Second))
}

// specField is where a field of a publish request lives in a WebhookEvent.
func specField(f string) *field.Path {
	switch f {
	case "":
		return field.NewPath("spec")
	case publish.FieldNamespace:
		return field.NewPath("metadata", "namespace")
	case publish.FieldIdempotencyKey:
		return field.NewPath("spec", "idempotencyKey")
	}
	return field.NewPath("spec").Child(f)
}

// refusalTypes are the types of field error a schema's refusal (package
// catalog) words its message with.
var refusalTypes = []field.ErrorType{field.ErrorTypeInvalid, field.ErrorTypeRequired,
	field.ErrorTypeNotSupported, field.ErrorTypeTooLong, field.ErrorTypeTooMany}

// schemaFieldError is message, a refusal's message as Validate words it (or one
// that starts with it), as a Kubernetes field error at path: of the type
// the message starts with, so that it reads once ("spec.data.v: Invalid
// value: should match '^a'"), never "Invalid value: Invalid value: …".
// Another message is an Invalid value.
func schemaFieldError(path *field.Path, message string) *field.Error {
	for _, t := range refusalTypes {
		tail, ok := strings.CutPrefix(message, t.String())
		if !ok {
			continue
		}
		// "Invalid value: should match '^a' …", "Required value (…)".
		if detail, ok := strings.CutPrefix(tail, ": "); ok {
			tail = detail
		} else if tail != "" && tail[0] != ' ' {
			continue
		}
		return &field.Error{Type: t, Field: path.String(), BadValue: field.OmitValueType{}, Detail: strings.TrimPrefix(tail, " ")}
	}
	return field.Invalid(path, field.OmitValueType{}, message)
}
