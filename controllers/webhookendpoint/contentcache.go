package webhookendpoint

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reading the Secrets and ConfigMaps an endpoint names when they change,
// not each time the endpoint is reconciled (issue #45, item 3).
//
// The controller watches Secrets and ConfigMaps by metadata only
// (SetupWithManager), so that the operator does not hold every Secret of
// the cluster in memory; their data is read from the API server. The
// reconciles woken by the ledger's activity (activity.go) would
// read them again every few seconds, unchanged. The content cache keeps,
// for each Secret and ConfigMap a reconcile read, the object as read and
// its resourceVersion: a later reconcile looks the object up in the
// manager's metadata cache (no request), and uses the content it keeps
// when the resourceVersion there is the one it was read at. Otherwise (it
// changed, it is not kept, or the metadata cache does not have it) the
// object is read live through the API reader and kept. A change reaches
// the metadata cache by the same watch that wakes the endpoints naming the
// object, so a changed object is read once, by the reconcile it wakes.
//
// The cache holds only objects some reconcile read (those endpoints name),
// and at most ContentCacheSize of them, least recently used first out.
// Values are never logged nor put into an error or message: the cache
// hands out copies, as the API reader would.

// defaultContentCacheSize is how many Secrets and ConfigMaps the content
// cache keeps by default: the signing Secret and a credential Secret or
// two of a few thousand endpoints.
const defaultContentCacheSize = 16384

// lastAppliedAnnotation holds, for an object `kubectl apply` wrote, a copy
// of its whole manifest: for a Secret, its values again. The reconcile
// needs no annotation of a Secret, so the cache does not keep it.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// contentKey names a kept object.
type contentKey struct {
	kind string
	types.NamespacedName
}

// contentCache keeps Secrets and ConfigMaps as read, by kind, namespace
// and name.
type contentCache struct {
	once  sync.Once
	size  int
	cache *lru.Cache
}

func (c *contentCache) entries() *lru.Cache {
	c.once.Do(func() {
		size := c.size
		if size <= 0 {
			size = defaultContentCacheSize
		}
		c.cache = lru.New(size)
	})
	return c.cache
}

// kept is the object kept under key, nil when none.
func (c *contentCache) kept(key contentKey) client.Object {
	v, ok := c.entries().Get(key)
	if !ok {
		return nil
	}
	return v.(client.Object)
}

// keep stores a copy of obj under key, without what the reconcile never
// reads (managed fields, the last-applied manifest).
func (c *contentCache) keep(key contentKey, obj client.Object) {
	cp := obj.DeepCopyObject().(client.Object)
	cp.SetManagedFields(nil)
	if a := cp.GetAnnotations(); a[lastAppliedAnnotation] != "" {
		delete(a, lastAppliedAnnotation)
		cp.SetAnnotations(a)
	}
	c.entries().Add(key, cp)
}

func (c *contentCache) forget(key contentKey) { c.entries().Remove(key) }

// len is how many objects are kept.
func (c *contentCache) len() int { return c.entries().Len() }

// contentReader is the client.Reader the endpoint's reconcile reads its
// Secrets and ConfigMaps through: Gets of those two kinds are served from
// the content cache while the metadata cache says they did not change;
// anything else goes to the live reader.
type contentReader struct {
	// metadata reads the manager's metadata-only cache of Secrets and
	// ConfigMaps; live is the API reader.
	metadata client.Reader
	live     client.Reader
	cache    *contentCache
}

var _ client.Reader = (*contentReader)(nil)

// Get reads obj: from the content cache when it holds key's object at the
// resourceVersion the metadata cache has, else live (and keeps it).
func (r *contentReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	kind := cachedKind(obj)
	if kind == "" || r.metadata == nil {
		return r.live.Get(ctx, key, obj, opts...)
	}
	ck := contentKey{kind, key}
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	if err := r.metadata.Get(ctx, key, m); err == nil {
		if kept := r.cache.kept(ck); kept != nil && kept.GetResourceVersion() == m.ResourceVersion && copyInto(kept, obj) {
			return nil
		}
	}
	if err := r.live.Get(ctx, key, obj, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			r.cache.forget(ck)
		}
		return err
	}
	r.cache.keep(ck, obj)
	return nil
}

// List is not cached.
func (r *contentReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return r.live.List(ctx, list, opts...)
}

// cachedKind is the kind of obj the content cache keeps; empty for any
// other.
func cachedKind(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *corev1.ConfigMap:
		return "ConfigMap"
	}
	return ""
}

// copyInto deep-copies kept into obj, of the same type; false when they
// differ.
func copyInto(kept, obj client.Object) bool {
	switch o := obj.(type) {
	case *corev1.Secret:
		k, ok := kept.(*corev1.Secret)
		if ok {
			k.DeepCopyInto(o)
		}
		return ok
	case *corev1.ConfigMap:
		k, ok := kept.(*corev1.ConfigMap)
		if ok {
			k.DeepCopyInto(o)
		}
		return ok
	}
	return false
}
