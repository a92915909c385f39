package controllers

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// Field indexes on WebhookEndpoints, shared by the controllers that look
// endpoints up by what they reference.
const (
	// retryPolicyRefIndex indexes WebhookEndpoints by the RetryPolicy they
	// name.
	retryPolicyRefIndex = "spec.retryPolicyRef.name"
	// signingSecretRefIndex indexes WebhookEndpoints by the Secret named in
	// spec.signingSecretRef.
	signingSecretRefIndex = "spec.signingSecretRef.name"
	// credentialSecretIndex indexes WebhookEndpoints by every Secret their
	// headers, auth and tls read (endpoint_credentials.go).
	credentialSecretIndex = "spec.credentials.secrets"
	// caConfigMapIndex indexes WebhookEndpoints by the ConfigMap holding
	// their CA bundle.
	caConfigMapIndex = "spec.tls.caBundle.configMapKeyRef.name"
)

// endpointIndexes are the extractors of the indexes above.
var endpointIndexes = map[string]client.IndexerFunc{
	retryPolicyRefIndex: func(o client.Object) []string {
		ep := o.(*hookv1.WebhookEndpoint)
		if ep.Spec.RetryPolicyRef == nil {
			return nil
		}
		return []string{ep.Spec.RetryPolicyRef.Name}
	},
	signingSecretRefIndex: func(o client.Object) []string {
		ep := o.(*hookv1.WebhookEndpoint)
		if ep.Spec.SigningSecretRef == nil {
			return nil
		}
		return []string{ep.Spec.SigningSecretRef.Name}
	},
	credentialSecretIndex: func(o client.Object) []string {
		return credentialSecrets(&o.(*hookv1.WebhookEndpoint).Spec)
	},
	caConfigMapIndex: func(o client.Object) []string {
		if t := o.(*hookv1.WebhookEndpoint).Spec.TLS; t != nil && t.CABundle != nil && t.CABundle.ConfigMapKeyRef != nil {
			return []string{t.CABundle.ConfigMapKeyRef.Name}
		}
		return nil
	},
}

// credentialSecrets are the names of the Secrets spec reads credentials
// from, each once.
func credentialSecrets(spec *hookv1.WebhookEndpointSpec) []string {
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
	indexMu sync.Mutex
	// indexed remembers which indexer got which index: an informer refuses
	// an index registered twice, and several controllers need the same one.
	indexed = map[indexKey]bool{}
)

type indexKey struct {
	indexer any
	field   string
}

// indexEndpoints registers the named WebhookEndpoint indexes with the
// manager's cache, each once per cache however many controllers ask.
func indexEndpoints(mgr ctrl.Manager, fields ...string) error {
	indexer := mgr.GetFieldIndexer()
	// Remembering needs a comparable indexer (the manager's cache is a
	// pointer); any other is simply asked every time.
	remember := reflect.TypeOf(indexer).Comparable()
	indexMu.Lock()
	defer indexMu.Unlock()
	for _, field := range fields {
		key := indexKey{indexer: indexer, field: field}
		if remember && indexed[key] {
			continue
		}
		if err := indexer.IndexField(context.Background(), &hookv1.WebhookEndpoint{}, field, endpointIndexes[field]); err != nil {
			return fmt.Errorf("indexing WebhookEndpoints by %s: %w", field, err)
		}
		if remember {
			indexed[key] = true
		}
	}
	return nil
}
