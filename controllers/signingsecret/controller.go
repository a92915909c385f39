package signingsecret

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/conditions"
	"github.com/hookkeeper/hookkeeper/controllers/index"
	"github.com/hookkeeper/hookkeeper/controllers/ledgerread"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/signing"
)

// SigningSecretReconciler is the only writer of Secrets. For a
// WebhookEndpoint without spec.signingSecretRef it generates the owned
// `whsec_` Secret (and a new secret when its key is removed: a rotation);
// for every endpoint it remembers the secret a rotation replaced, for its
// grace period, before the WebhookEndpoint controller registers the new
// one (rotation.go plans it), and forgets it afterwards. It
// writes no status: an endpoint's Ready condition reads the Secrets it
// leaves (WebhookEndpointReconciler).
type SigningSecretReconciler struct {
	client.Client
	// APIReader reads Secrets from the API server: Secrets are watched by
	// metadata only, so the cache does not hold their data.
	APIReader client.Reader
	// Ledger reads the configuration the engine signs an endpoint's
	// deliveries with, to notice a rotation.
	Ledger ledgerread.Reader
	// Clock dates rotations; nil means the real clock.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=hookkeeper.dev,resources=webhookendpoints,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update

// Reconcile brings the endpoint's Secrets in line with what it is owed.
func (r *SigningSecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	res, err := r.reconcile(ctx, req)
	return conditions.RequeueOnConflict(ctx, res, err)
}

func (r *SigningSecretReconciler) reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep hookv1.WebhookEndpoint
	if err := r.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // its Secrets go with it (owner references)
	}
	src, err := Read(ctx, r.APIReader, &ep)
	if err != nil || src.Problem != nil {
		// A problem is the endpoint's to show (Ready=False); nothing here
		// can solve it.
		return ctrl.Result{}, err
	}
	var registered *ledger.Endpoint
	switch reg, err := r.Ledger.EndpointGet(ctx, ledger.EndpointID(ep.Namespace, ep.Name)); {
	case errors.Is(err, ledger.ErrNotFound):
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("reading the endpoint's configuration from the delivery engine: %w", err)
	default:
		registered = &reg
	}
	now := time.Now()
	if r.Clock != nil {
		now = r.Clock.Now()
	}
	plan, err := r.Write(ctx, &ep, &src, registered, now)
	if err != nil || plan.PreviousUntil.IsZero() {
		return ctrl.Result{}, err
	}
	// Forget the previous secret once its grace ends.
	return ctrl.Result{RequeueAfter: max(plan.PreviousUntil.Sub(now)+time.Second, time.Second)}, nil
}

// Write generates the secret the endpoint is owed and records what the
// rotation plan says to remember or forget, in one write per Secret. It
// returns the plan.
func (r *SigningSecretReconciler) Write(ctx context.Context, ep *hookv1.WebhookEndpoint, src *Source, registered *ledger.Endpoint, now time.Time) (RotationPlan, error) {
	s := src.secret
	if src.Owed {
		value, err := signing.GenerateSecret()
		if err != nil {
			return RotationPlan{}, err
		}
		if s == nil {
			s = r.newSecret(ep, GeneratedName(ep))
		}
		if s.Data == nil {
			s.Data = map[string][]byte{} // its last key was removed
		}
		s.Data[KeySigningSecret] = value
		if src.Current, err = canonicalSecret(value); err != nil {
			return RotationPlan{}, err
		}
	}
	var current []ledger.SigningSecret
	if registered != nil {
		current = registered.Secrets
	}
	plan := PlanRotation(RotationInput{
		Current: src.Current, Remembered: src.Remembered, Registered: CurrentOf(current),
		Grace: GracePeriod(ep), Now: now,
	})
	if !src.Owed && plan.Remember == nil && !plan.Forget {
		return plan, nil
	}
	if s == nil {
		if plan.Remember == nil {
			return plan, nil // nothing to forget where nothing is kept
		}
		s = r.newSecret(ep, previousSecretName(ep))
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	if plan.Remember != nil || plan.Forget {
		// Forgetting empties the keys rather than deleting the Secret, so
		// that the operator needs no permission to delete Secrets.
		encodePrevious(s.Data, plan.Remember)
	}
	if s.ResourceVersion == "" {
		if err := controllerutil.SetControllerReference(ep, s, r.Scheme()); err != nil {
			return plan, err
		}
		if err := r.Create(ctx, s); err != nil {
			return plan, fmt.Errorf("creating Secret %s: %w", s.Name, err)
		}
	} else if err := r.Update(ctx, s); err != nil {
		return plan, fmt.Errorf("writing Secret %s: %w", s.Name, err)
	}
	log.FromContext(ctx).Info("wrote the signing Secret", "secret", s.Name,
		"generated", src.Owed, "remembered", plan.Remember != nil, "forgot", plan.Forget)
	return plan, nil
}

// newSecret is an empty Secret of the endpoint's, labelled as the
// operator's.
func (r *SigningSecretReconciler) newSecret(ep *hookv1.WebhookEndpoint, name string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ep.Namespace,
			Name:      name,
			Labels:    map[string]string{labelManagedBy: managedBy, labelEndpoint: ep.Name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{},
	}
}

// SetupWithManager registers the controller. It reconciles an endpoint
// when its spec changes and when its generated or referenced Secrets
// change.
func (r *SigningSecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := index.Endpoints(mgr, index.SigningSecretRef); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("signingsecret").
		For(&hookv1.WebhookEndpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(index.EndpointsReferencing(r.Client, index.SigningSecretRef)), builder.OnlyMetadata).
		Complete(r)
}
