package controllers

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// eventTypeIndex indexes WebhookEventTypes by spec.type.
const eventTypeIndex = "spec.type"

// EventTypeContracts gives the publish core the contracts of event types
// (publish.Contracts), read from the manager's cache, which every replica
// runs whether or not it leads: a publish on any replica is held to the
// same WebhookEventTypes. Schemas are compiled once per generation.
type EventTypeContracts struct {
	// Reader is the manager's cache (mgr.GetCache()).
	Reader client.Reader
	// NamespaceReader reads Namespaces (mgr.GetAPIReader()): with a get,
	// which a namespace-scoped install grants too, remembered for
	// strictTTL, rather than a cluster-wide watch.
	NamespaceReader client.Reader
	// Now is the clock of that memory; time.Now when nil.
	Now func() time.Time

	mu       sync.Mutex
	compiled map[types.UID]compiledSchema
	strictOf map[string]strictness
}

// strictness is what was read of a namespace's label, and when.
type strictness struct {
	strict bool
	read   time.Time
}

// strictTTL is how long a namespace's strictness is remembered: a change
// of its label applies to publishes within this time.
const strictTTL = 10 * time.Second

type compiledSchema struct {
	generation int64
	schema     *catalog.Schema
	err        error
}

// SetupEventTypeContracts indexes the cache for c (every replica, leader or
// not) and returns c.
func SetupEventTypeContracts(mgr ctrl.Manager) (*EventTypeContracts, error) {
	if err := indexEventTypes(mgr); err != nil {
		return nil, err
	}
	return &EventTypeContracts{Reader: mgr.GetCache(), NamespaceReader: mgr.GetAPIReader()}, nil
}

func indexEventTypes(mgr ctrl.Manager) error {
	indexMu.Lock()
	defer indexMu.Unlock()
	key := indexKey{indexer: mgr.GetFieldIndexer(), field: eventTypeIndex}
	if indexed[key] {
		return nil
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &hookv1.WebhookEventType{}, eventTypeIndex,
		func(o client.Object) []string { return []string{o.(*hookv1.WebhookEventType).Spec.Type} })
	if err != nil {
		return fmt.Errorf("indexing WebhookEventTypes by %s: %w", eventTypeIndex, err)
	}
	indexed[key] = true
	return nil
}

// Contract implements publish.Contracts.
func (c *EventTypeContracts) Contract(namespace, typ string) (*publish.Contract, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	strict, err := c.strict(ctx, namespace)
	if err != nil {
		return nil, false, err
	}
	et, err := holderOf(ctx, c.Reader, namespace, typ)
	if err != nil || et == nil {
		return nil, strict, err
	}
	contract := &publish.Contract{
		Name: et.Name, Generation: et.Generation, RequiredSecrets: et.Spec.RequiredSecrets,
		Replay: ledger.ReplayClass(et.Spec.Replay),
	}
	if err := et.DecodeError(); err != nil {
		contract.NotReady = hookv1.ReasonInvalidSpec + ": " + err.Error()
		return contract, strict, nil
	}
	if contract.Replay == ledger.ReplayRetryable {
		contract.Replay = "" // the ledger's default
	}
	if et.Spec.ValidFor != nil {
		contract.ValidFor = et.Spec.ValidFor.Duration
	}
	if et.Spec.Schema != nil {
		s, err := c.schema(et)
		if err != nil {
			contract.NotReady = hookv1.ReasonSchemaInvalid + ": " + err.Error()
			return contract, strict, nil
		}
		contract.Validate = func(data []byte) (string, string) {
			if v := s.Validate(data); v != nil {
				return v.Field, v.Message
			}
			return "", ""
		}
	}
	if ref := et.Spec.RetryPolicyRef; ref != nil {
		p, pr, err := namedPolicy(ctx, c.Reader, namespace, ref.Name)
		if err != nil {
			return nil, strict, fmt.Errorf("reading RetryPolicy %s: %w", ref.Name, err)
		}
		if pr != nil {
			contract.NotReady = pr.Reason + ": " + pr.Message
			return contract, strict, nil
		}
		contract.Policy = &p
	}
	return contract, strict, nil
}

// strict reports whether namespace carries the strict label, as read
// within strictTTL.
func (c *EventTypeContracts) strict(ctx context.Context, namespace string) (bool, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	known, ok := c.strictOf[namespace]
	c.mu.Unlock()
	if ok && now().Sub(known.read) < strictTTL {
		return known.strict, nil
	}
	reader := c.NamespaceReader
	if reader == nil {
		reader = c.Reader
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	strict := false
	switch err := reader.Get(ctx, types.NamespacedName{Name: namespace}, ns); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading namespace %s: %w", namespace, err)
	default:
		strict = ns.Labels[hookv1.StrictEventTypesLabel] == "true"
	}
	c.mu.Lock()
	if c.strictOf == nil {
		c.strictOf = map[string]strictness{}
	}
	c.strictOf[namespace] = strictness{strict: strict, read: now()}
	c.mu.Unlock()
	return strict, nil
}

// schema compiles et's schema, once per generation.
func (c *EventTypeContracts) schema(et *hookv1.WebhookEventType) (*catalog.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.compiled[et.UID]; ok && cs.generation == et.Generation {
		return cs.schema, cs.err
	}
	s, err := catalog.Compile(et.Spec.Schema.Raw)
	if c.compiled == nil {
		c.compiled = map[types.UID]compiledSchema{}
	}
	c.compiled[et.UID] = compiledSchema{generation: et.Generation, schema: s, err: err}
	return s, err
}

// holderOf is the WebhookEventType of namespace that holds typ: the
// oldest of those naming it (then by name); nil when none does.
func holderOf(ctx context.Context, r client.Reader, namespace, typ string) (*hookv1.WebhookEventType, error) {
	var list hookv1.WebhookEventTypeList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{eventTypeIndex: typ}); err != nil {
		return nil, fmt.Errorf("listing the WebhookEventTypes of %s: %w", namespace, err)
	}
	live := list.Items[:0]
	for _, et := range list.Items {
		if et.DeletionTimestamp.IsZero() {
			live = append(live, et)
		}
	}
	if len(live) == 0 {
		return nil, nil
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i].CreationTimestamp, live[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return live[i].Name < live[j].Name
	})
	return &live[0], nil
}
