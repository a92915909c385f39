package deliveryapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// Reader is what the server reads from the ledger.
type Reader interface {
	ledger.Browser
	AttemptList(ctx context.Context, deliveryID string) ([]ledger.Attempt, error)
}

// Resource names.
const (
	DeliveriesResource    = "deliveries"
	WebhookEventsResource = "webhookevents"
	// DataSubresource is the permission to read an event's data: get on
	// webhookevents/data in its namespace. Reading webhookevents alone shows
	// the event without its data, so a role that may see delivery outcomes
	// does not thereby read payloads.
	DataSubresource = "data"
	// Category lists both kinds under kubectl get hookkeeper.
	Category = "hookkeeper"
)

// requestError maps what went wrong to the API's status errors. Ledger
// errors are logged by the server's handler chain and answered as internal
// errors without their text (it may name database details).
func requestError(gr schema.GroupResource, name string, err error) error {
	var se *selectorError
	switch {
	case errors.As(err, &se):
		return apierrors.NewBadRequest(se.msg)
	case errors.Is(err, ledger.ErrNotFound):
		return apierrors.NewNotFound(gr, name)
	default:
		return apierrors.NewInternalError(fmt.Errorf("reading the ledger: %w", err))
	}
}

// readOnly is what both kinds share: namespaced, read-only (no watch: the
// ledger has no change feed with resourceVersions, so a watch could only be
// faked; the server answers MethodNotSupported).
type readOnly struct {
	tableConvertor
	singular string
	short    []string
}

func (readOnly) Destroy()                  {}
func (readOnly) NamespaceScoped() bool     { return true }
func (r readOnly) GetSingularName() string { return r.singular }
func (r readOnly) ShortNames() []string    { return r.short }
func (readOnly) Categories() []string      { return []string{Category} }

// deliveryStorage serves deliveries.
type deliveryStorage struct {
	readOnly
	ledger Reader
}

var (
	_ rest.Getter               = (*deliveryStorage)(nil)
	_ rest.Lister               = (*deliveryStorage)(nil)
	_ rest.Scoper               = (*deliveryStorage)(nil)
	_ rest.SingularNameProvider = (*deliveryStorage)(nil)
	_ rest.ShortNamesProvider   = (*deliveryStorage)(nil)
	_ rest.CategoriesProvider   = (*deliveryStorage)(nil)
	_ rest.TableConvertor       = (*deliveryStorage)(nil)
	_ rest.Storage              = (*deliveryStorage)(nil)
)

var deliveriesGR = v1alpha1.SchemeGroupVersion.WithResource(DeliveriesResource).GroupResource()

func newDeliveryStorage(r Reader, now func() time.Time) *deliveryStorage {
	return &deliveryStorage{
		readOnly: readOnly{tableConvertor: tableConvertor{now: now}, singular: "delivery", short: []string{"dlv"}},
		ledger:   r,
	}
}

func (*deliveryStorage) New() runtime.Object     { return &v1alpha1.Delivery{} }
func (*deliveryStorage) NewList() runtime.Object { return &v1alpha1.DeliveryList{} }

// Get returns one delivery with its newest attempts.
func (s *deliveryStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	vs, err := s.ledger.DeliveryBrowse(ctx, &ledger.DeliveryBrowseParams{ID: name, Namespace: ns, Limit: 1})
	if err != nil {
		return nil, requestError(deliveriesGR, name, err)
	}
	if len(vs) == 0 {
		return nil, apierrors.NewNotFound(deliveriesGR, name)
	}
	attempts, err := s.ledger.AttemptList(ctx, name)
	if err != nil {
		return nil, requestError(deliveriesGR, name, err)
	}
	d := toDelivery(vs[0], attempts)
	return &d, nil
}

// List returns one page of deliveries in ID order; attempts are only in a
// get, so that a page costs one query.
func (s *deliveryStorage) List(ctx context.Context, o *metainternalversion.ListOptions) (runtime.Object, error) {
	list := &v1alpha1.DeliveryList{Items: []v1alpha1.Delivery{}}
	if err := refuseLabels(o.LabelSelector, DeliveriesResource); err != nil {
		return nil, requestError(deliveriesGR, "", err)
	}
	p, err := deliveryParams(genericapirequest.NamespaceValue(ctx), o.FieldSelector)
	if errors.Is(err, errNoMatch) {
		return list, nil
	}
	if err != nil {
		return nil, requestError(deliveriesGR, "", err)
	}
	if p.AfterID, err = decodeContinue(o.Continue); err != nil {
		return nil, requestError(deliveriesGR, "", err)
	}
	size, ask := pageSize(o.Limit)
	p.Limit = ask
	vs, err := s.ledger.DeliveryBrowse(ctx, &p)
	if err != nil {
		return nil, requestError(deliveriesGR, "", err)
	}
	vs, list.Continue = page(vs, size, func(v ledger.DeliveryView) string { return v.ID })
	for _, v := range vs {
		list.Items = append(list.Items, toDelivery(v, nil))
	}
	return list, nil
}

// eventStorage serves webhookevents.
type eventStorage struct {
	readOnly
	ledger Reader
	authz  authorizer.Authorizer
}

var (
	_ rest.Getter               = (*eventStorage)(nil)
	_ rest.Lister               = (*eventStorage)(nil)
	_ rest.Scoper               = (*eventStorage)(nil)
	_ rest.SingularNameProvider = (*eventStorage)(nil)
	_ rest.ShortNamesProvider   = (*eventStorage)(nil)
	_ rest.CategoriesProvider   = (*eventStorage)(nil)
	_ rest.TableConvertor       = (*eventStorage)(nil)
)

var eventsGR = v1alpha1.SchemeGroupVersion.WithResource(WebhookEventsResource).GroupResource()

func newEventStorage(r Reader, authz authorizer.Authorizer, now func() time.Time) *eventStorage {
	return &eventStorage{
		readOnly: readOnly{tableConvertor: tableConvertor{now: now}, singular: "webhookevent", short: []string{"whe"}},
		ledger:   r,
		authz:    authz,
	}
}

func (*eventStorage) New() runtime.Object     { return &v1alpha1.WebhookEvent{} }
func (*eventStorage) NewList() runtime.Object { return &v1alpha1.WebhookEventList{} }

// mayReadData asks the server's authorizer (delegated to the cluster's
// API server) whether the caller may get webhookevents/data in namespace.
func (s *eventStorage) mayReadData(ctx context.Context, namespace string) (bool, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return false, nil
	}
	d, _, err := s.authz.Authorize(ctx, authorizer.AttributesRecord{
		User: u, Verb: "get", Namespace: namespace, APIGroup: v1alpha1.GroupName,
		APIVersion: v1alpha1.SchemeGroupVersion.Version, Resource: WebhookEventsResource,
		Subresource: DataSubresource, ResourceRequest: true,
	})
	if err != nil {
		return false, fmt.Errorf("authorizing event data in %s: %w", namespace, err)
	}
	return d == authorizer.DecisionAllow, nil
}

// Get returns one event, with its data when the caller may read it.
func (s *eventStorage) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	es, err := s.ledger.EventBrowse(ctx, &ledger.EventBrowseParams{ID: name, Namespace: ns, Limit: 1})
	if err != nil {
		return nil, requestError(eventsGR, name, err)
	}
	if len(es) == 0 {
		return nil, apierrors.NewNotFound(eventsGR, name)
	}
	show, err := s.mayReadData(ctx, es[0].Namespace)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	e := toEvent(es[0], show)
	return &e, nil
}

// List returns one page of events in ID order, each with its data when the
// caller may read data in its namespace (asked once per namespace).
func (s *eventStorage) List(ctx context.Context, o *metainternalversion.ListOptions) (runtime.Object, error) {
	list := &v1alpha1.WebhookEventList{Items: []v1alpha1.WebhookEvent{}}
	if err := refuseLabels(o.LabelSelector, WebhookEventsResource); err != nil {
		return nil, requestError(eventsGR, "", err)
	}
	p, err := eventParams(genericapirequest.NamespaceValue(ctx), o.FieldSelector)
	if errors.Is(err, errNoMatch) {
		return list, nil
	}
	if err != nil {
		return nil, requestError(eventsGR, "", err)
	}
	if p.AfterID, err = decodeContinue(o.Continue); err != nil {
		return nil, requestError(eventsGR, "", err)
	}
	size, ask := pageSize(o.Limit)
	p.Limit = ask
	es, err := s.ledger.EventBrowse(ctx, &p)
	if err != nil {
		return nil, requestError(eventsGR, "", err)
	}
	es, list.Continue = page(es, size, func(e ledger.Event) string { return e.ID })
	allowed := map[string]bool{}
	for _, e := range es {
		show, ok := allowed[e.Namespace]
		if !ok {
			if show, err = s.mayReadData(ctx, e.Namespace); err != nil {
				return nil, apierrors.NewInternalError(err)
			}
			allowed[e.Namespace] = show
		}
		list.Items = append(list.Items, toEvent(e, show))
	}
	return list, nil
}
