package signingsecret

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// Reading an endpoint's signing secret from its Secrets, for both
// controllers that need it: the WebhookEndpoint controller, which only
// reads, and the signing-secret controller (controller.go),
// the only writer of Secrets. Secrets are read through the API reader, not
// the cache: the controllers watch Secrets' metadata only, so that the
// operator does not hold every Secret of the cluster in memory. No value
// read here is ever logged or put into a message.

// Labels of the Secrets the operator creates.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	labelEndpoint  = "hookkeeper.dev/endpoint"
	managedBy      = "hookkeeper"
)

func GeneratedName(ep *hookv1.WebhookEndpoint) string      { return ep.Name + "-signing" }
func previousSecretName(ep *hookv1.WebhookEndpoint) string { return ep.Name + "-signing-previous" }

// Source is an endpoint's signing secret as found in its Secrets.
type Source struct {
	// SecretName is the Secret the endpoint signs with.
	SecretName string
	// Current is the canonical secret; nil when Problem or Owed is set.
	Current sensitive.Bytes
	// Remembered is the last rotation, if one is remembered.
	Remembered *Previous
	Problem    *conditions.Problem
	// Owed is set when the endpoint has no spec.signingSecretRef and its
	// generated Secret, or the secret in it, does not exist yet: the
	// signing-secret controller generates it.
	Owed bool

	// secret is the Secret the operator writes the rotation into (the
	// generated one, or <endpoint>-signing-previous for a user's Secret);
	// nil when it does not exist.
	secret *corev1.Secret
}

// Read reads the endpoint's signing secret: from the Secret
// the operator generates when spec.signingSecretRef is absent, else from
// the referenced one, with the remembered rotation.
func Read(ctx context.Context, reader client.Reader, ep *hookv1.WebhookEndpoint) (Source, error) {
	if ep.Spec.SigningSecretRef == nil {
		return readGeneratedSecret(ctx, reader, ep)
	}
	return readReferencedSecret(ctx, reader, ep)
}

// getSecret reads a Secret of the endpoint's namespace; nil when it does
// not exist.
func getSecret(ctx context.Context, reader client.Reader, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	err := reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading Secret %s: %w", name, err)
	}
	return &s, nil
}

func readGeneratedSecret(ctx context.Context, reader client.Reader, ep *hookv1.WebhookEndpoint) (Source, error) {
	src := Source{SecretName: GeneratedName(ep)}
	s, err := getSecret(ctx, reader, ep.Namespace, src.SecretName)
	switch {
	case err != nil:
		return src, err
	case s == nil:
		src.Owed = true
		return src, nil
	case !metav1.IsControlledBy(s, ep):
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretInvalid, Message: fmt.Sprintf(
			"Secret %q exists and is not owned by this endpoint: delete it so that the operator generates the signing secret, or name it in spec.signingSecretRef",
			src.SecretName)}
		return src, nil
	}
	src.secret = s
	src.Remembered = DecodePrevious(s.Data)
	if len(s.Data[KeySigningSecret]) == 0 {
		// Removing the key asks for a new secret: a rotation.
		src.Owed = true
		return src, nil
	}
	current, err := canonicalSecret(s.Data[KeySigningSecret])
	if err != nil {
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretInvalid, Message: fmt.Sprintf("Secret %q key %q: %v", src.SecretName, KeySigningSecret, err)}
		return src, nil
	}
	src.Current = current
	return src, nil
}

func readReferencedSecret(ctx context.Context, reader client.Reader, ep *hookv1.WebhookEndpoint) (Source, error) {
	ref := ep.Spec.SigningSecretRef
	key := ref.Key
	if key == "" {
		key = KeySigningSecret
	}
	src := Source{SecretName: ref.Name}
	s, err := getSecret(ctx, reader, ep.Namespace, ref.Name)
	if err != nil {
		return src, err
	}
	if s == nil {
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretNotFound, Message: fmt.Sprintf("Secret %q not found", ref.Name)}
		return src, nil
	}
	value, ok := s.Data[key]
	if !ok {
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretNotFound, Message: fmt.Sprintf("Secret %q has no key %q", ref.Name, key)}
		return src, nil
	}
	current, err := canonicalSecret(value)
	if err != nil {
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretInvalid, Message: fmt.Sprintf("Secret %q key %q: %v", ref.Name, key, err)}
		return src, nil
	}

	// The previous secret of a rotation lives in a Secret of the
	// operator's: the user's Secret is theirs to write.
	prevName := previousSecretName(ep)
	prev, err := getSecret(ctx, reader, ep.Namespace, prevName)
	switch {
	case err != nil:
		return src, err
	case prev == nil:
	case !metav1.IsControlledBy(prev, ep):
		src.Problem = &conditions.Problem{Reason: hookv1.ReasonSigningSecretInvalid, Message: fmt.Sprintf(
			"Secret %q exists and is not owned by this endpoint: delete it, the operator keeps the previous signing secret of a rotation there",
			prevName)}
		return src, nil
	default:
		src.secret = prev
		src.Remembered = DecodePrevious(prev.Data)
	}
	src.Current = current
	return src, nil
}
