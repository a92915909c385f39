package eventtype

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/index"
	"github.com/hookkeeper/hookkeeper/controllers/retrypolicy"
	"github.com/hookkeeper/hookkeeper/internal/catalog"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// The event types' contracts (publish.Contracts) through an outage of the
// Kubernetes API server (issue #44). The publish path reads memory only,
// never the API server: a book of the WebhookEventTypes, the RetryPolicies
// and which namespaces are strict, created once per process and kept
// current by the informers of whichever manager runs (Attach), on every
// replica, leader or not. The book is persisted in the ledger
// (ledger.Snapshots), so that a process started while the API server does
// not answer holds publishes to the last contracts it knew.
//
// The documented choice (docs/event-types.md, "When the API server does
// not answer"): once known, the last known state is used, however stale;
// a book that has never been filled (nothing in the ledger and no cache
// synced yet) refuses publishes with publish.ErrContractsUnknown, which
// both doors answer 503 with Retry-After.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookeventtypes,verbs=list;watch
// +kubebuilder:rbac:groups=hookkeeper.dev,resources=retrypolicies,verbs=list;watch

// eventTypeIndex indexes WebhookEventTypes by spec.type.
const eventTypeIndex = "spec.type"

// The kinds of the book's snapshots in the ledger; bookSynced marks a book
// that a cache filled once, so that an empty one loaded later is known to
// be empty rather than unknown.
const (
	snapEventType   = "WebhookEventType"
	snapRetryPolicy = "RetryPolicy"
	snapNamespace   = "Namespace"
	snapBook        = "hookkeeper.dev/ContractBook"
	bookSyncedName  = "synced"
)

// DefaultNamespaceRefresh is how often a book confined to watched
// namespaces reads their strict label again.
const DefaultNamespaceRefresh = 10 * time.Second

// ContractsOptions configure NewEventTypeContracts.
type ContractsOptions struct {
	// Snapshots persists the book (the ledger): loaded by
	// NewEventTypeContracts, written as the caches change. nil: the book
	// lives in memory only.
	Snapshots ledger.Snapshots
	// WatchNamespaces are the namespaces of --watch-namespaces, whose
	// managers' caches hold the event types and policies of those
	// namespaces only; their strict label is then read with a get of each
	// (NamespaceRefresh), which a namespace-scoped install grants, rather
	// than a cluster-wide watch of Namespaces. Empty: every namespace,
	// Namespaces watched through the manager's cache.
	WatchNamespaces []string
	// NamespaceRefresh is how often WatchNamespaces are read again
	// (default DefaultNamespaceRefresh).
	NamespaceRefresh time.Duration
	// FlushInterval is how often changes are retried into the ledger
	// after a failed write (default 5s); a change is written at once.
	FlushInterval time.Duration
	// Log, when set, tells what the book could not read or write.
	Log logr.Logger
}

// EventTypeContracts is the book of contracts (publish.Contracts): build
// it once with NewEventTypeContracts and Attach it to every manager. It is
// safe for concurrent use.
type EventTypeContracts struct {
	o ContractsOptions

	mu sync.RWMutex
	// known: loaded from a book a cache had filled, or filled by a cache.
	known      bool
	eventTypes map[string]map[string]*hookv1.WebhookEventType // namespace, name
	policies   map[types.NamespacedName]*hookv1.RetryPolicy
	strict     map[string]bool // the strict namespaces
	// epoch counts Attach's runs; seen is the epoch in which a cache last
	// told of each entry, so that a synced cache drops the others.
	epoch uint64
	seen  map[snapKey]uint64
	// want is what the ledger should hold for each changed key (nil:
	// nothing), held is what it holds as far as this process knows.
	want  map[snapKey][]byte
	held  map[snapKey][]byte
	wake  chan struct{}
	flush sync.Mutex

	compiledMu sync.Mutex
	compiled   map[types.UID]compiledSchema
}

// snapKey names one snapshot.
type snapKey struct{ kind, namespace, name string }

type compiledSchema struct {
	generation int64
	schema     *catalog.Schema
	err        error
}

// eventTypeDoc is what the ledger keeps of a WebhookEventType: what its
// contract needs.
type eventTypeDoc struct {
	UID               types.UID                   `json:"uid"`
	Generation        int64                       `json:"generation"`
	CreationTimestamp metav1.Time                 `json:"creationTimestamp"`
	Spec              hookv1.WebhookEventTypeSpec `json:"spec"`
	Undecodable       []string                    `json:"undecodable,omitempty"`
}

// retryPolicyDoc is what the ledger keeps of a RetryPolicy: what a
// contract's policy needs (its spec, and whether it is Ready).
type retryPolicyDoc struct {
	Generation  int64                    `json:"generation"`
	Spec        hookv1.RetryPolicySpec   `json:"spec"`
	Status      hookv1.RetryPolicyStatus `json:"status"`
	Undecodable []string                 `json:"undecodable,omitempty"`
}

// strictDoc is a strict namespace's snapshot (only strict ones are kept).
var strictDoc = []byte(`{"strict":true}`)

// NewEventTypeContracts returns the book, loaded from o.Snapshots: it
// needs no API server. An error is the ledger's.
func NewEventTypeContracts(ctx context.Context, o ContractsOptions) (*EventTypeContracts, error) {
	if o.NamespaceRefresh <= 0 {
		o.NamespaceRefresh = DefaultNamespaceRefresh
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = 5 * time.Second
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	c := &EventTypeContracts{
		o:          o,
		eventTypes: map[string]map[string]*hookv1.WebhookEventType{},
		policies:   map[types.NamespacedName]*hookv1.RetryPolicy{},
		strict:     map[string]bool{},
		seen:       map[snapKey]uint64{},
		want:       map[snapKey][]byte{},
		held:       map[snapKey][]byte{},
		wake:       make(chan struct{}, 1),
	}
	if o.Snapshots == nil {
		return c, nil
	}
	if err := c.load(ctx); err != nil {
		return nil, fmt.Errorf("loading the event types' contracts from the ledger: %w", err)
	}
	return c, nil
}

// load reads the book from the ledger.
func (c *EventTypeContracts) load(ctx context.Context) error {
	byKind := map[string][]ledger.Snapshot{}
	for _, kind := range []string{snapBook, snapEventType, snapRetryPolicy, snapNamespace} {
		snaps, err := c.o.Snapshots.SnapshotList(ctx, kind)
		if err != nil {
			return err
		}
		byKind[kind] = snaps
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range byKind[snapBook] {
		c.held[snapKey{s.Kind, s.Namespace, s.Name}] = s.Doc
		if s.Name == bookSyncedName {
			c.known = true
		}
	}
	for _, s := range byKind[snapEventType] {
		var d eventTypeDoc
		if err := json.Unmarshal(s.Doc, &d); err != nil {
			c.o.Log.Error(err, "skipping a WebhookEventType the ledger holds", "namespace", s.Namespace, "name", s.Name)
			continue
		}
		et := &hookv1.WebhookEventType{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: d.UID,
			Generation: d.Generation, CreationTimestamp: d.CreationTimestamp}, Spec: d.Spec, Undecodable: d.Undecodable}
		c.setEventType(et)
		c.held[snapKey{s.Kind, s.Namespace, s.Name}] = s.Doc
	}
	for _, s := range byKind[snapRetryPolicy] {
		var d retryPolicyDoc
		if err := json.Unmarshal(s.Doc, &d); err != nil {
			c.o.Log.Error(err, "skipping a RetryPolicy the ledger holds", "namespace", s.Namespace, "name", s.Name)
			continue
		}
		c.policies[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, Generation: d.Generation},
			Spec:       d.Spec, Status: d.Status, Undecodable: d.Undecodable}
		c.held[snapKey{s.Kind, s.Namespace, s.Name}] = s.Doc
	}
	for _, s := range byKind[snapNamespace] {
		c.strict[s.Name] = true
		c.held[snapKey{s.Kind, s.Namespace, s.Name}] = s.Doc
	}
	return nil
}

// Attach keeps the book current from mgr's cache while mgr runs, on every
// replica: a runnable that needs no leadership registers the book's
// handlers on the informers of WebhookEventTypes, RetryPolicies and
// Namespaces' metadata once the manager starts (setting up needs no API
// server), retrying while the API server does not answer, and drops what
// each cache no longer has once it synced. Call it on each new manager;
// the book keeps answering, from what it last knew, between managers.
func (c *EventTypeContracts) Attach(mgr ctrl.Manager) error {
	return mgr.Add(&contractsRunnable{c: c, cache: mgr.GetCache(), api: mgr.GetAPIReader()})
}

// contractsRunnable is one manager's run of the book.
type contractsRunnable struct {
	c     *EventTypeContracts
	cache cache.Cache
	api   client.Reader
}

// NeedLeaderElection: every replica holds publishes to the contracts.
func (*contractsRunnable) NeedLeaderElection() bool { return false }

// Start follows the cache until ctx ends; it never fails the manager.
func (r *contractsRunnable) Start(ctx context.Context) error {
	c := r.c
	c.mu.Lock()
	c.epoch++
	epoch := c.epoch
	c.mu.Unlock()
	c.o.Log.Info("following the API server's event types, retry policies and namespaces", "attachment", epoch)
	var wg sync.WaitGroup
	defer wg.Wait()
	synced := make(chan string, 3)
	follow := func(kind string, obj client.Object, on func(obj any, deleted bool)) {
		wg.Go(func() { c.follow(ctx, r.cache, kind, obj, epoch, on, func() { synced <- kind }) })
	}
	follow(snapEventType, &hookv1.WebhookEventType{}, c.onEventType)
	follow(snapRetryPolicy, &hookv1.RetryPolicy{}, c.onRetryPolicy)
	if len(c.o.WatchNamespaces) == 0 {
		ns := &metav1.PartialObjectMetadata{}
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		follow(snapNamespace, ns, c.onNamespace)
	} else {
		wg.Go(func() { c.pollNamespaces(ctx, r.api, epoch, func() { synced <- snapNamespace }) })
	}
	wg.Go(func() { c.persist(ctx) })
	for range 3 {
		select {
		case <-ctx.Done():
			return nil
		case <-synced:
		}
	}
	c.mu.Lock()
	c.known = true
	c.want[snapKey{snapBook, "", bookSyncedName}] = []byte(`{"synced":true}`)
	c.mu.Unlock()
	c.poke()
	c.o.Log.Info("the event types' contracts are in sync with the API server")
	<-ctx.Done()
	return nil
}

// follow registers on on the informer of obj until ctx ends and, once it
// synced, drops the entries of kind it did not tell of in this epoch and
// calls synced.
func (c *EventTypeContracts) follow(ctx context.Context, ch cache.Cache, kind string, obj client.Object, epoch uint64,
	on func(obj any, deleted bool), synced func()) {
	var inf cache.Informer
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		var err error
		// Not blocking: the book answers from what it knew meanwhile.
		if inf, err = ch.GetInformer(ctx, obj, cache.BlockUntilSynced(false)); err == nil {
			break
		}
		c.o.Log.Error(err, "cannot watch yet; publishes are held to the last known contracts", "kind", kind)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { on(obj, false) },
		UpdateFunc: func(_, obj any) { on(obj, false) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			on(obj, true)
		},
	})
	if err != nil {
		c.o.Log.Error(err, "cannot follow the informer", "kind", kind)
		return
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return
	}
	c.dropUnseen(kind, epoch)
	synced()
	<-ctx.Done()
}

// pollNamespaces reads the strict label of each watched namespace every
// NamespaceRefresh until ctx ends; it calls synced once every namespace
// was read.
func (c *EventTypeContracts) pollNamespaces(ctx context.Context, api client.Reader, epoch uint64, synced func()) {
	done := false
	t := time.NewTicker(c.o.NamespaceRefresh)
	defer t.Stop()
	for {
		all := true
		for _, name := range c.o.WatchNamespaces {
			ns := &metav1.PartialObjectMetadata{}
			ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := api.Get(rctx, types.NamespacedName{Name: name}, ns)
			cancel()
			switch {
			case apierrors.IsNotFound(err):
				c.setStrict(name, false, epoch)
			case err != nil:
				all = false
				if ctx.Err() == nil {
					c.o.Log.Error(err, "cannot read a namespace; its last known strictness holds", "namespace", name)
				}
			default:
				c.setStrict(name, ns.Labels[hookv1.StrictEventTypesLabel] == "true", epoch)
			}
		}
		if all && !done {
			done = true
			c.dropUnseen(snapNamespace, epoch)
			synced()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// onEventType records a WebhookEventType the cache told of.
func (c *EventTypeContracts) onEventType(obj any, deleted bool) {
	et, ok := obj.(*hookv1.WebhookEventType)
	if !ok {
		return
	}
	key := snapKey{snapEventType, et.Namespace, et.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if deleted || !et.DeletionTimestamp.IsZero() {
		c.forget(key)
		return
	}
	kept := &hookv1.WebhookEventType{ObjectMeta: metav1.ObjectMeta{Namespace: et.Namespace, Name: et.Name, UID: et.UID,
		Generation: et.Generation, CreationTimestamp: et.CreationTimestamp}}
	et.Spec.DeepCopyInto(&kept.Spec)
	kept.Undecodable = append([]string(nil), et.Undecodable...)
	c.setEventType(kept)
	c.seen[key] = c.epoch
	c.mark(key, eventTypeDoc{UID: kept.UID, Generation: kept.Generation, CreationTimestamp: kept.CreationTimestamp,
		Spec: kept.Spec, Undecodable: kept.Undecodable})
}

// onRetryPolicy records a RetryPolicy the cache told of.
func (c *EventTypeContracts) onRetryPolicy(obj any, deleted bool) {
	rp, ok := obj.(*hookv1.RetryPolicy)
	if !ok {
		return
	}
	key := snapKey{snapRetryPolicy, rp.Namespace, rp.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	if deleted {
		c.forget(key)
		return
	}
	kept := &hookv1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: rp.Namespace, Name: rp.Name, Generation: rp.Generation}}
	rp.Spec.DeepCopyInto(&kept.Spec)
	rp.Status.DeepCopyInto(&kept.Status)
	kept.Undecodable = append([]string(nil), rp.Undecodable...)
	c.policies[types.NamespacedName{Namespace: rp.Namespace, Name: rp.Name}] = kept
	c.seen[key] = c.epoch
	c.mark(key, retryPolicyDoc{Generation: kept.Generation, Spec: kept.Spec, Status: kept.Status, Undecodable: kept.Undecodable})
}

// onNamespace records a Namespace's strictness the cache told of.
func (c *EventTypeContracts) onNamespace(obj any, deleted bool) {
	m, ok := obj.(client.Object)
	if !ok {
		return
	}
	c.mu.Lock()
	epoch := c.epoch
	c.mu.Unlock()
	c.setStrict(m.GetName(), !deleted && m.GetLabels()[hookv1.StrictEventTypesLabel] == "true", epoch)
}

// setStrict records whether namespace is strict.
func (c *EventTypeContracts) setStrict(namespace string, strict bool, epoch uint64) {
	key := snapKey{snapNamespace, "", namespace}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strict {
		c.forget(key)
		return
	}
	c.strict[namespace] = true
	c.seen[key] = epoch
	c.want[key] = strictDoc
	c.poke()
}

// setEventType puts et in the book; c.mu is held.
func (c *EventTypeContracts) setEventType(et *hookv1.WebhookEventType) {
	byName := c.eventTypes[et.Namespace]
	if byName == nil {
		byName = map[string]*hookv1.WebhookEventType{}
		c.eventTypes[et.Namespace] = byName
	}
	byName[et.Name] = et
}

// forget removes key's entry from the book and the ledger; c.mu is held.
func (c *EventTypeContracts) forget(key snapKey) {
	switch key.kind {
	case snapEventType:
		if byName := c.eventTypes[key.namespace]; byName != nil {
			delete(byName, key.name)
			if len(byName) == 0 {
				delete(c.eventTypes, key.namespace)
			}
		}
	case snapRetryPolicy:
		delete(c.policies, types.NamespacedName{Namespace: key.namespace, Name: key.name})
	case snapNamespace:
		delete(c.strict, key.name)
	}
	delete(c.seen, key)
	c.want[key] = nil
	c.poke()
}

// dropUnseen forgets the entries of kind that the cache of epoch did not
// tell of: objects deleted while no cache of this book ran.
func (c *EventTypeContracts) dropUnseen(kind string, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var stale []snapKey
	switch kind {
	case snapEventType:
		for ns, byName := range c.eventTypes {
			for name := range byName {
				stale = append(stale, snapKey{kind, ns, name})
			}
		}
	case snapRetryPolicy:
		for k := range c.policies {
			stale = append(stale, snapKey{kind, k.Namespace, k.Name})
		}
	case snapNamespace:
		for name := range c.strict {
			stale = append(stale, snapKey{kind, "", name})
		}
	}
	for _, k := range stale {
		if c.seen[k] != epoch {
			c.forget(k)
		}
	}
}

// mark records the document the ledger should hold for key; c.mu is held.
func (c *EventTypeContracts) mark(key snapKey, doc any) {
	b, err := json.Marshal(doc)
	if err != nil {
		c.o.Log.Error(err, "cannot encode a snapshot", "kind", key.kind, "namespace", key.namespace, "name", key.name)
		return
	}
	c.want[key] = b
	c.poke()
}

// poke wakes the writer.
func (c *EventTypeContracts) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// persist writes the book's changes into the ledger until ctx ends.
func (c *EventTypeContracts) persist(ctx context.Context) {
	if c.o.Snapshots == nil {
		return
	}
	t := time.NewTicker(c.o.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// The last changes, if the ledger takes them quickly.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			_ = c.Flush(fctx)
			cancel()
			return
		case <-c.wake:
		case <-t.C:
		}
		if err := c.Flush(ctx); err != nil && ctx.Err() == nil {
			c.o.Log.Error(err, "cannot write the event types' contracts into the ledger; retrying")
		}
	}
}

// Flush writes into the ledger what changed in the book since the last
// write; a change that fails stays to be written next time.
func (c *EventTypeContracts) Flush(ctx context.Context) error {
	if c.o.Snapshots == nil {
		return nil
	}
	c.flush.Lock()
	defer c.flush.Unlock()
	c.mu.Lock()
	pending := c.want
	c.want = map[snapKey][]byte{}
	c.mu.Unlock()
	keys := make([]snapKey, 0, len(pending))
	for k := range pending {
		keys = append(keys, k)
	}
	var errs []error
	for _, k := range keys {
		doc := pending[k]
		c.mu.RLock()
		held, isHeld := c.held[k]
		c.mu.RUnlock()
		var err error
		switch {
		case doc == nil && !isHeld, doc != nil && isHeld && bytes.Equal(doc, held):
			continue
		case doc == nil:
			err = c.o.Snapshots.SnapshotDelete(ctx, k.kind, k.namespace, k.name)
		default:
			_, err = c.o.Snapshots.SnapshotPut(ctx, &ledger.Snapshot{Kind: k.kind, Namespace: k.namespace, Name: k.name,
				Doc: doc, UpdatedAt: time.Now()})
		}
		c.mu.Lock()
		switch {
		case err != nil:
			errs = append(errs, err)
			if _, newer := c.want[k]; !newer {
				c.want[k] = doc
			}
		case doc == nil:
			delete(c.held, k)
		default:
			c.held[k] = doc
		}
		c.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Contract implements publish.Contracts from memory alone.
func (c *EventTypeContracts) Contract(namespace, typ string) (*publish.Contract, bool, error) {
	c.mu.RLock()
	if !c.known {
		c.mu.RUnlock()
		return nil, false, fmt.Errorf("no WebhookEventType has been read since this process started and the ledger holds none: %w",
			publish.ErrContractsUnknown)
	}
	strict := c.strict[namespace]
	et := holderIn(c.eventTypes[namespace], typ)
	var policy *hookv1.RetryPolicy
	if et != nil && et.Spec.RetryPolicyRef != nil {
		policy = c.policies[types.NamespacedName{Namespace: namespace, Name: et.Spec.RetryPolicyRef.Name}]
	}
	c.mu.RUnlock()
	if et == nil {
		return nil, strict, nil
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
		p, pr, err := retrypolicy.Named(context.Background(), onePolicy{policy}, namespace, ref.Name)
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

// onePolicy reads one RetryPolicy of the book (nil: not found) as
// retrypolicy.Named reads the cache.
type onePolicy struct{ rp *hookv1.RetryPolicy }

func (o onePolicy) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	out, ok := obj.(*hookv1.RetryPolicy)
	switch {
	case !ok:
		return fmt.Errorf("the book holds RetryPolicies, not %T", obj)
	case o.rp == nil:
		return apierrors.NewNotFound(hookv1.GroupVersion.WithResource("retrypolicies").GroupResource(), key.Name)
	}
	o.rp.DeepCopyInto(out)
	return nil
}

func (onePolicy) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the book lists no RetryPolicies")
}

// schema compiles et's schema, once per generation.
func (c *EventTypeContracts) schema(et *hookv1.WebhookEventType) (*catalog.Schema, error) {
	c.compiledMu.Lock()
	defer c.compiledMu.Unlock()
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

// holderIn is the WebhookEventType of byName that holds typ, by the rule
// of holderOf; nil when none does.
func holderIn(byName map[string]*hookv1.WebhookEventType, typ string) *hookv1.WebhookEventType {
	var holder *hookv1.WebhookEventType
	for _, et := range byName {
		if et.Spec.Type != typ {
			continue
		}
		if holder == nil || olderThan(et, holder) {
			holder = et
		}
	}
	return holder
}

// olderThan orders event types by creation, then name.
func olderThan(a, b *hookv1.WebhookEventType) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

func indexEventTypes(mgr ctrl.Manager) error {
	return index.Once(mgr, &hookv1.WebhookEventType{}, eventTypeIndex,
		func(o client.Object) []string { return []string{o.(*hookv1.WebhookEventType).Spec.Type} })
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
	sort.Slice(live, func(i, j int) bool { return olderThan(&live[i], &live[j]) })
	return &live[0], nil
}
