package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
)

// rotateSecretCommand has no -o: the only object it changes is a Secret,
// and the plugin never prints a signing secret.
func (p *plugin) rotateSecretCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rotate-secret ENDPOINT",
		Short: "Start a signing-secret rotation",
		Long: `Start a rotation of ENDPOINT's signing secret: a generated Secret loses its key
and the operator writes a new one; a referenced Secret gets a new whsec_
value. The previous secret stays valid for the endpoint's grace period. The
new value is never printed.`,
		Args: exactlyOne("ENDPOINT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := p.open(nil)
			if err != nil {
				return err
			}
			return rotateSecret(cmd.Context(), s.c, s.ns, args[0], p.streams.Out)
		},
	}
}

// rotateSecret starts a rotation the way docs/operations/rotating-signing-secrets.md describes: a
// generated Secret loses its key (the operator writes a new one); a
// referenced Secret gets a new whsec_ value. The previous secret stays
// valid for the endpoint's grace period. The new value is never printed.
func rotateSecret(ctx context.Context, c client.Client, ns, endpoint string, out io.Writer) error {
	var ep hookv1.WebhookEndpoint
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: endpoint}, &ep); err != nil {
		return fmt.Errorf("reading webhookendpoint/%s: %w", endpoint, err)
	}
	var secret corev1.Secret
	if ref := ep.Spec.SigningSecretRef; ref != nil {
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, &secret); err != nil {
			return fmt.Errorf("reading the referenced Secret %s: %w", ref.Name, err)
		}
		key := ref.Key
		if key == "" {
			key = "signingSecret"
		}
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			return err
		}
		patch := client.MergeFrom(secret.DeepCopy())
		if secret.Data == nil {
			secret.Data = map[string][]byte{}
		}
		secret.Data[key] = []byte("whsec_" + base64.StdEncoding.EncodeToString(raw))
		if err := c.Patch(ctx, &secret, patch); err != nil {
			return fmt.Errorf("writing a new value into Secret %s key %s: %w", ref.Name, key, err)
		}
		fmt.Fprintf(out, "wrote a new signing secret into Secret %s (key %s); the previous one stays valid for the grace period\n", ref.Name, key)
		return nil
	}
	name := ep.Status.SigningSecretName
	if name == "" {
		return fmt.Errorf("webhookendpoint/%s has no generated signing Secret yet (status.signingSecretName is empty)", endpoint)
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &secret); err != nil {
		return fmt.Errorf("reading the generated Secret %s: %w", name, err)
	}
	patch := client.MergeFrom(secret.DeepCopy())
	delete(secret.Data, "signingSecret")
	if err := c.Patch(ctx, &secret, patch); err != nil {
		return fmt.Errorf("removing the key of Secret %s: %w", name, err)
	}
	fmt.Fprintf(out, "removed the signing secret from Secret %s: the operator writes a new one; the previous one stays valid for the grace period\n", name)
	return nil
}
