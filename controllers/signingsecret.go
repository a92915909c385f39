package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// signingSecrets is the lifecycle of the endpoints' signing secrets, and
// the only writer of Secrets: it generates the Secret of an endpoint without
// spec.signingSecretRef (and a new secret when its key is removed: a
// rotation), reads the referenced Secret, and remembers the secret a
// rotation replaced for its grace period (signingsecret_rotation.go plans
// it). Secrets are read through the API reader, not the cache: the
// controller watches Secrets' metadata only, so that the operator does not
// hold every Secret of the cluster in memory. No value read here is ever
// logged or put into a message.
type signingSecrets struct {
	// client creates and updates Secrets.
	client client.Client
	// reader reads Secrets from the API server.
	reader client.Reader
}

// Labels of the Secrets the controller creates.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelEndpoint  = "hookkeeper.dev/endpoint"
	managedBy      = "hookkeeper"
)

func generatedSecretName(ep *hookv1.WebhookEndpoint) string { return ep.Name + "-signing" }
func previousSecretName(ep *hookv1.WebhookEndpoint) string  { return ep.Name + "-signing-previous" }

// signingSource is an endpoint's signing secret as found in its Secret.
type signingSource struct {
	// SecretName is the Secret the endpoint signs with.
	SecretName string
	// Current is the canonical secret; nil when Problem is set.
	Current sensitive.Bytes
	// Remembered is the last rotation, if the controller remembered one.
	Remembered *previousSecret
	Problem    *problem
	// remember writes (or, given nil, erases) the remembered rotation.
	remember func(context.Context, *previousSecret) error
}

// ensure returns the endpoint's signing secret, generating the Secret (or a
// new secret in it) when spec.signingSecretRef is absent and the endpoint
// has none: the endpoint is owed one, whatever else is wrong with it.
func (r *signingSecrets) ensure(ctx context.Context, ep *hookv1.WebhookEndpoint) (signingSource, error) {
	if ep.Spec.SigningSecretRef == nil {
		return r.generatedSigningSecret(ctx, ep)
	}
	return r.referencedSigningSecret(ctx, ep)
}

// record writes what plan says to remember of a rotation (a new previous
// secret, or forgetting one whose grace ended) before the engine is told.
func (r *signingSecrets) record(ctx context.Context, src *signingSource, plan *rotationPlan) error {
	if plan.Remember == nil && !plan.Forget {
		return nil
	}
	return src.remember(ctx, plan.Remember)
}

func (r *signingSecrets) generatedSigningSecret(ctx context.Context, ep *hookv1.WebhookEndpoint) (signingSource, error) {
	src := signingSource{SecretName: generatedSecretName(ep)}
	var s corev1.Secret
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: ep.Namespace, Name: src.SecretName}, &s)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.createGeneratedSecret(ctx, ep, &s); err != nil {
			return src, err
		}
	case err != nil:
		return src, fmt.Errorf("reading Secret %s: %w", src.SecretName, err)
	case !metav1.IsControlledBy(&s, ep):
		src.Problem = &problem{hookv1.ReasonSigningSecretInvalid, fmt.Sprintf(
			"Secret %q exists and is not owned by this endpoint: delete it so that the operator generates the signing secret, or name it in spec.signingSecretRef",
			src.SecretName)}
		return src, nil
	case len(s.Data[keySigningSecret]) == 0:
		// Removing the key asks for a new secret: a rotation.
		value, err := signing.GenerateSecret()
		if err != nil {
			return src, err
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[keySigningSecret] = value
		if err := r.client.Update(ctx, &s); err != nil {
			return src, fmt.Errorf("writing a new signing secret into Secret %s: %w", src.SecretName, err)
		}
		log.FromContext(ctx).Info("generated a new signing secret", "secret", src.SecretName)
	}

	current, err := canonicalSecret(s.Data[keySigningSecret])
	if err != nil {
		src.Problem = &problem{hookv1.ReasonSigningSecretInvalid, fmt.Sprintf("Secret %q key %q: %v", src.SecretName, keySigningSecret, err)}
		return src, nil
	}
	src.Current = current
	src.Remembered = decodePrevious(s.Data)
	src.remember = func(ctx context.Context, p *previousSecret) error {
		encodePrevious(s.Data, p)
		if err := r.client.Update(ctx, &s); err != nil {
			return fmt.Errorf("remembering the previous signing secret in Secret %s: %w", src.SecretName, err)
		}
		return nil
	}
	return src, nil
}

// createGeneratedSecret creates the endpoint's Secret with a new secret,
// owned by the endpoint so that it is garbage-collected with it.
func (r *signingSecrets) createGeneratedSecret(ctx context.Context, ep *hookv1.WebhookEndpoint, s *corev1.Secret) error {
	value, err := signing.GenerateSecret()
	if err != nil {
		return err
	}
	*s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ep.Namespace,
			Name:      generatedSecretName(ep),
			Labels:    map[string]string{labelManagedBy: managedBy, labelEndpoint: ep.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{keySigningSecret: value},
	}
	if err := controllerutil.SetControllerReference(ep, s, r.client.Scheme()); err != nil {
		return err
	}
	if err := r.client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating Secret %s: %w", s.Name, err)
	}
	log.FromContext(ctx).Info("generated the signing secret", "secret", s.Name)
	return nil
}

func (r *signingSecrets) referencedSigningSecret(ctx context.Context, ep *hookv1.WebhookEndpoint) (signingSource, error) {
	ref := ep.Spec.SigningSecretRef
	key := ref.Key
	if key == "" {
		key = keySigningSecret
	}
	src := signingSource{SecretName: ref.Name}
	var s corev1.Secret
	err := r.reader.Get(ctx, types.NamespacedName{Namespace: ep.Namespace, Name: ref.Name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		src.Problem = &problem{hookv1.ReasonSigningSecretNotFound, fmt.Sprintf("Secret %q not found", ref.Name)}
		return src, nil
	case err != nil:
		return src, fmt.Errorf("reading Secret %s: %w", ref.Name, err)
	}
	value, ok := s.Data[key]
	if !ok {
		src.Problem = &problem{hookv1.ReasonSigningSecretNotFound, fmt.Sprintf("Secret %q has no key %q", ref.Name, key)}
		return src, nil
	}
	current, err := canonicalSecret(value)
	if err != nil {
		src.Problem = &problem{hookv1.ReasonSigningSecretInvalid, fmt.Sprintf("Secret %q key %q: %v", ref.Name, key, err)}
		return src, nil
	}
	src.Current = current

	// The previous secret of a rotation lives in a Secret of our own: the
	// user's Secret is theirs to write.
	prevName := previousSecretName(ep)
	var prev corev1.Secret
	err = r.reader.Get(ctx, types.NamespacedName{Namespace: ep.Namespace, Name: prevName}, &prev)
	switch {
	case apierrors.IsNotFound(err):
		src.remember = func(ctx context.Context, p *previousSecret) error {
			if p == nil {
				return nil
			}
			return r.createPreviousSecret(ctx, ep, p)
		}
		return src, nil
	case err != nil:
		return src, fmt.Errorf("reading Secret %s: %w", prevName, err)
	case !metav1.IsControlledBy(&prev, ep):
		src.Current = nil
		src.Problem = &problem{hookv1.ReasonSigningSecretInvalid, fmt.Sprintf(
			"Secret %q exists and is not owned by this endpoint: delete it, the operator keeps the previous signing secret of a rotation there",
			prevName)}
		return src, nil
	}
	src.Remembered = decodePrevious(prev.Data)
	src.remember = func(ctx context.Context, p *previousSecret) error {
		// Forgetting empties the Secret rather than deleting it, so that
		// the operator needs no permission to delete Secrets.
		if prev.Data == nil {
			prev.Data = map[string][]byte{}
		}
		encodePrevious(prev.Data, p)
		if err := r.client.Update(ctx, &prev); err != nil {
			return fmt.Errorf("remembering the previous signing secret in Secret %s: %w", prevName, err)
		}
		return nil
	}
	return src, nil
}

func (r *signingSecrets) createPreviousSecret(ctx context.Context, ep *hookv1.WebhookEndpoint, p *previousSecret) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ep.Namespace,
			Name:      previousSecretName(ep),
			Labels:    map[string]string{labelManagedBy: managedBy, labelEndpoint: ep.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{},
	}
	encodePrevious(s.Data, p)
	if err := controllerutil.SetControllerReference(ep, s, r.client.Scheme()); err != nil {
		return err
	}
	if err := r.client.Create(ctx, s); err != nil {
		return fmt.Errorf("creating Secret %s: %w", s.Name, err)
	}
	return nil
}
