package webhookendpoint

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/dispatch"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/wire"
)

// credentialSource is an endpoint's credentials as its Secrets and
// ConfigMaps hold them now: the Set the engine sends with, or the Problem
// that keeps its deliveries waiting. Messages name objects, keys and
// fields, never a value.
type credentialSource struct {
	Set     *credential.Set
	Problem *conditions.Problem
}

// Keys of the Secrets that spec.auth.basic and spec.tls name: those of the
// kubernetes.io/basic-auth and kubernetes.io/tls Secret types.
const (
	keyBasicUsername = corev1.BasicAuthUsernameKey
	keyBasicPassword = corev1.BasicAuthPasswordKey
	keyTLSCert       = corev1.TLSCertKey
	keyTLSKey        = corev1.TLSPrivateKeyKey
)

// readCredentials reads every value spec.headers[].valueFrom, spec.auth and
// spec.tls name, each object once, from the API server (not the cache,
// which holds Secrets' metadata only). A missing object or key, or a
// value that cannot be sent, is the source's Problem; only an error of the
// API server is returned.
func readCredentials(ctx context.Context, reader client.Reader, ep *hookv1.WebhookEndpoint) (credentialSource, error) {
	spec := &ep.Spec
	if !referencesCredentials(spec) {
		return credentialSource{}, nil
	}
	r := &credentialReader{ctx: ctx, reader: reader, namespace: ep.Namespace}
	set := &credential.Set{}
	for i, h := range spec.Headers {
		if h.ValueFrom == nil {
			continue
		}
		field := fmt.Sprintf("spec.headers[%d].valueFrom.secretKeyRef", i)
		v := r.secretKey(field, h.ValueFrom.SecretKeyRef.Name, h.ValueFrom.SecretKeyRef.Key)
		if v != nil && wire.CheckHeader(h.Name, string(v)) != nil {
			r.refuse(field, "Secret", h.ValueFrom.SecretKeyRef.Name, h.ValueFrom.SecretKeyRef.Key, wire.ErrHeaderValue.Error())
		}
		set.Headers = append(set.Headers, credential.Header{Name: h.Name, Value: v})
	}
	if a := spec.Auth; a != nil {
		readAuth(r, a, set)
	}
	if t := spec.TLS; t != nil {
		readTLS(r, t, set)
	}
	if r.err != nil {
		return credentialSource{}, r.err
	}
	if r.problem != nil {
		return credentialSource{Problem: r.problem}, nil
	}
	// The rules the engine applies at registration, so that a set it would
	// refuse is a condition here rather than a failed registration.
	var static []wire.Header
	for _, h := range spec.Headers {
		if h.ValueFrom == nil {
			static = append(static, wire.Header{Name: h.Name, Value: h.Value})
		}
	}
	if err := dispatch.CheckCredentials(spec.URL, static, set); err != nil {
		return credentialSource{Problem: &conditions.Problem{Reason: hookv1.ReasonCredentialsUnavailable, Message: "the credentials cannot be sent: " + err.Error()}}, nil
	}
	return credentialSource{Set: set}, nil
}

// referencesCredentials reports whether spec names any credential.
func referencesCredentials(spec *hookv1.WebhookEndpointSpec) bool {
	if spec.Auth != nil || spec.TLS != nil {
		return true
	}
	for _, h := range spec.Headers {
		if h.ValueFrom != nil {
			return true
		}
	}
	return false
}

func readAuth(r *credentialReader, a *hookv1.Auth, set *credential.Set) {
	switch {
	case a.Basic != nil:
		const field = "spec.auth.basic.secretRef"
		name := a.Basic.SecretRef.Name
		user := r.secretKey(field, name, keyBasicUsername)
		pass := r.secretKey(field, name, keyBasicPassword)
		switch {
		case user != nil && bytes.ContainsRune(user, ':'):
			r.refuse(field, "Secret", name, keyBasicUsername, "a basic-auth username must not contain ':' (RFC 7617)")
		case user != nil && wire.CheckHeader("x", string(user)) != nil:
			r.refuse(field, "Secret", name, keyBasicUsername, wire.ErrHeaderValue.Error())
		}
		set.Basic = &credential.Basic{Username: user, Password: pass}
	case a.Bearer != nil:
		const field = "spec.auth.bearer.tokenSecretRef"
		ref := a.Bearer.TokenSecretRef
		token := r.secretKey(field, ref.Name, ref.Key)
		if token != nil && wire.CheckHeader("x", string(token)) != nil {
			r.refuse(field, "Secret", ref.Name, ref.Key, wire.ErrHeaderValue.Error())
		}
		set.Bearer = token
	case a.OAuth2 != nil:
		o := a.OAuth2
		set.OAuth2 = &credential.OAuth2{
			TokenURL:     o.TokenURL,
			ClientID:     r.secretKey("spec.auth.oauth2.clientIDRef", o.ClientIDRef.Name, o.ClientIDRef.Key),
			ClientSecret: r.secretKey("spec.auth.oauth2.clientSecretRef", o.ClientSecretRef.Name, o.ClientSecretRef.Key),
			Scopes:       o.Scopes,
			Audience:     o.Audience,
			Params:       o.EndpointParams,
		}
	}
}

func readTLS(r *credentialReader, t *hookv1.EndpointTLS, set *credential.Set) {
	out := &credential.TLS{SystemRoots: t.IncludeSystemRoots}
	if ref := t.ClientCertificateSecretRef; ref != nil {
		const field = "spec.tls.clientCertificateSecretRef"
		out.CertPEM = r.secretKey(field, ref.Name, keyTLSCert)
		out.KeyPEM = r.secretKey(field, ref.Name, keyTLSKey)
		if out.CertPEM != nil && out.KeyPEM != nil {
			if _, err := (&credential.TLS{CertPEM: out.CertPEM, KeyPEM: out.KeyPEM}).Config(); err != nil {
				r.refuse(field, "Secret", ref.Name, keyTLSCert+" and "+keyTLSKey, credential.ErrKeyPair.Error())
			}
		}
	}
	if b := t.CABundle; b != nil {
		var kind, name, key, field string
		switch {
		case b.ConfigMapKeyRef != nil:
			kind, name, key, field = "ConfigMap", b.ConfigMapKeyRef.Name, b.ConfigMapKeyRef.Key, "spec.tls.caBundle.configMapKeyRef"
			out.CAPEM = r.configMapKey(field, name, key)
		case b.SecretKeyRef != nil:
			kind, name, key, field = "Secret", b.SecretKeyRef.Name, b.SecretKeyRef.Key, "spec.tls.caBundle.secretKeyRef"
			out.CAPEM = r.secretKey(field, name, key)
		}
		if out.CAPEM != nil {
			if _, err := (&credential.TLS{CAPEM: out.CAPEM}).Config(); err != nil {
				r.refuse(field, kind, name, key, credential.ErrCABundle.Error())
			}
		}
	}
	set.TLS = out
}

// credentialReader reads the keys of one reconcile, each object once. It
// keeps the first problem and the first API error.
type credentialReader struct {
	ctx       context.Context
	reader    client.Reader
	namespace string

	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
	problem    *conditions.Problem
	err        error
}

// secretKey is the value of key in Secret name, nil when it cannot be read
// (then a Problem or an error is recorded).
func (r *credentialReader) secretKey(field, name, key string) sensitive.Bytes {
	s, ok := r.secrets[name]
	if !ok {
		s = &corev1.Secret{}
		if !r.get(field, "Secret", name, s) {
			s = nil
		}
		if r.secrets == nil {
			r.secrets = map[string]*corev1.Secret{}
		}
		r.secrets[name] = s
	}
	if s == nil {
		return nil
	}
	v, ok := s.Data[key]
	if !ok || len(v) == 0 {
		r.refuse(field, "Secret", name, key, "the key is missing or empty")
		return nil
	}
	return sensitive.Bytes(v)
}

// configMapKey is the value of key in ConfigMap name (data or binaryData).
func (r *credentialReader) configMapKey(field, name, key string) []byte {
	cm, ok := r.configMaps[name]
	if !ok {
		cm = &corev1.ConfigMap{}
		if !r.get(field, "ConfigMap", name, cm) {
			cm = nil
		}
		if r.configMaps == nil {
			r.configMaps = map[string]*corev1.ConfigMap{}
		}
		r.configMaps[name] = cm
	}
	if cm == nil {
		return nil
	}
	if v, ok := cm.Data[key]; ok && v != "" {
		return []byte(v)
	}
	if v, ok := cm.BinaryData[key]; ok && len(v) > 0 {
		return v
	}
	r.refuse(field, "ConfigMap", name, key, "the key is missing or empty")
	return nil
}

func (r *credentialReader) get(field, kind, name string, obj client.Object) bool {
	err := r.reader.Get(r.ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, obj)
	switch {
	case err == nil:
		return true
	case apierrors.IsNotFound(err):
		if r.problem == nil {
			r.problem = &conditions.Problem{Reason: hookv1.ReasonCredentialsUnavailable, Message: fmt.Sprintf("%s: %s %q not found", field, kind, name)}
		}
	case r.err == nil:
		r.err = fmt.Errorf("reading %s %s for %s: %w", kind, name, field, err)
	}
	return false
}

func (r *credentialReader) refuse(field, kind, name, key, rule string) {
	if r.problem == nil {
		r.problem = &conditions.Problem{Reason: hookv1.ReasonCredentialsUnavailable, Message: fmt.Sprintf("%s: key %q of %s %q: %s", field, key, kind, name, rule)}
	}
}
