// Package index holds the field indexes the controllers share: the
// WebhookEndpoints by what they reference, registered once per cache.
package index

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// Field indexes on WebhookEndpoints, shared by the controllers that look
// endpoints up by what they reference.
const (
	// RetryPolicyRef indexes WebhookEndpoints by the RetryPolicy they
	// name.
	RetryPolicyRef = "spec.retryPolicyRef.name"
	// SigningSecretRef indexes WebhookEndpoints by the Secret named in
	// spec.signingSecretRef.
	SigningSecretRef = "spec.signingSecretRef.name"
	// CredentialSecret indexes WebhookEndpoints by every Secret their
	// headers, auth and tls read (webhookendpoint/credentials.go).
	CredentialSecret = "spec.credentials.secrets"
	// CAConfigMap indexes WebhookEndpoints by the ConfigMap holding
	// their CA bundle.
	CAConfigMap = "spec.tls.caBundle.configMapKeyRef.name"
)

// endpointIndexes are the extractors of the indexes above.
var endpointIndexes = map[string]client.IndexerFunc{
	RetryPolicyRef: func(o client.Object) []string {
		ep := o.(*hookv1.WebhookEndpoint)
		if ep.Spec.RetryPolicyRef == nil {
			return nil
		}
		return []string{ep.Spec.RetryPolicyRef.Name}
	},
	SigningSecretRef: func(o client.Object) []string {
		ep := o.(*hookv1.WebhookEndpoint)
		if ep.Spec.SigningSecretRef == nil {
			return nil
		}
		return []string{ep.Spec.SigningSecretRef.Name}
	},
	CredentialSecret: func(o client.Object) []string {
		return CredentialSecrets(&o.(*hookv1.WebhookEndpoint).Spec)
	},
	CAConfigMap: func(o client.Object) []string {
		if t := o.(*hookv1.WebhookEndpoint).Spec.TLS; t != nil && t.CABundle != nil && t.CABundle.ConfigMapKeyRef != nil {
			return []string{t.CABundle.ConfigMapKeyRef.Name}
		}
		return nil
	},
}

// CredentialSecrets are the names of the Secrets spec reads credentials
// from, each once.
func CredentialSecrets(spec *hookv1.WebhookEndpointSpec) []string {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, h := range spec.Headers {
		if h.ValueFrom != nil {
			add(h.ValueFrom.SecretKeyRef.Name)
		}
	}
	if a := spec.Auth; a != nil {
		switch {
		case a.Basic != nil:
			add(a.Basic.SecretRef.Name)
		case a.Bearer != nil:
			add(a.Bearer.TokenSecretRef.Name)
		case a.OAuth2 != nil:
			add(a.OAuth2.ClientIDRef.Name)
			add(a.OAuth2.ClientSecretRef.Name)
		}
	}
	if t := spec.TLS; t != nil {
		if t.ClientCertificateSecretRef != nil {
			add(t.ClientCertificateSecretRef.Name)
		}
		if t.CABundle != nil && t.CABundle.SecretKeyRef != nil {
			add(t.CABundle.SecretKeyRef.Name)
		}
	}
	return names
}

var (
	mu sync.Mutex
	// indexed remembers which indexer got which index: an informer refuses
	// an index registered twice, and several controllers need the same one.
	indexed = map[key]bool{}
)

type key struct {
	indexer any
	field   string
}

// Endpoints registers the named WebhookEndpoint indexes with the manager's
// cache, each once per cache however many controllers ask.
func Endpoints(mgr ctrl.Manager, fields ...string) error {
	for _, field := range fields {
		if err := Once(mgr, &hookv1.WebhookEndpoint{}, field, endpointIndexes[field]); err != nil {
			return err
		}
	}
	return nil
}

// Once registers the field index of obj's kind with the manager's cache,
// once per cache however many controllers ask.
func Once(mgr ctrl.Manager, obj client.Object, field string, extract client.IndexerFunc) error {
	indexer := mgr.GetFieldIndexer()
	// Remembering needs a comparable indexer (the manager's cache is a
	// pointer); any other is simply asked every time.
	remember := reflect.TypeOf(indexer).Comparable()
	mu.Lock()
	defer mu.Unlock()
	k := key{indexer: indexer, field: fmt.Sprintf("%T/%s", obj, field)}
	if remember && indexed[k] {
		return nil
	}
	if err := indexer.IndexField(context.Background(), obj, field, extract); err != nil {
		return fmt.Errorf("indexing %T by %s: %w", obj, field, err)
	}
	if remember {
		indexed[k] = true
	}
	return nil
}

// EndpointsReferencing maps an object to the endpoints of its namespace
// that name it, through the field indexes.
func EndpointsReferencing(c client.Reader, indexes ...string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, index := range indexes {
			var eps hookv1.WebhookEndpointList
			if err := c.List(ctx, &eps, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: o.GetName()}); err != nil {
				log.FromContext(ctx).Error(err, "listing the endpoints that reference an object", "index", index, "name", o.GetName())
				continue
			}
			for i := range eps.Items {
				req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&eps.Items[i])}
				if !slices.Contains(reqs, req) {
					reqs = append(reqs, req)
				}
			}
		}
		return reqs
	}
}
