package servingcert

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"
)

// +kubebuilder:rbac:groups=apiregistration.k8s.io,resources=apiservices,verbs=get;patch,resourceNames=v1alpha1.delivery.hookkeeper.dev

// APIServiceResource is the resource of APIService objects.
var APIServiceResource = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// BundleSource is what CABundleSyncer reads: a Provisioner.
type BundleSource interface {
	CurrentCABundleContent() []byte
	AddListener(dynamiccertificates.Listener)
}

// CABundleSyncer keeps an APIService's spec.caBundle equal to the bundle of
// a BundleSource, so that the API server trusts the aggregated server's
// certificate across rotations. Every replica runs one: the patch is
// idempotent, and a replica that lags writes a bundle that still trusts the
// certificate being served (a CA signs only after it has been in the bundle
// for the policy's Overlap), then catches up.
type CABundleSyncer struct {
	Client dynamic.Interface
	// Name of the APIService, such as v1alpha1.delivery.hookkeeper.dev.
	Name   string
	Source BundleSource
	// Resync is how often the APIService is checked even without a change
	// (someone may have overwritten it); 0 means a minute.
	Resync time.Duration
	Clock  clock.WithTicker
	Log    logr.Logger

	kick chan struct{}
}

// Enqueue asks for a sync (dynamiccertificates.Listener).
func (s *CABundleSyncer) Enqueue() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Start syncs until ctx ends.
func (s *CABundleSyncer) Start(ctx context.Context) error {
	if s.Client == nil || s.Name == "" || s.Source == nil {
		return errors.New("servingcert: CABundleSyncer needs Client, Name and Source")
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Resync <= 0 {
		s.Resync = time.Minute
	}
	s.kick = make(chan struct{}, 1)
	s.Source.AddListener(s)
	ticker := s.Clock.NewTicker(s.Resync)
	defer ticker.Stop()
	reported := ""
	for {
		err := s.sync(ctx)
		switch {
		case err != nil && err.Error() != reported:
			s.Log.Error(err, "keeping the APIService's caBundle current; retrying", "apiService", s.Name)
			reported = err.Error()
		case err == nil:
			reported = ""
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.kick:
		case <-ticker.C():
		}
	}
}

// sync patches the APIService's caBundle if it differs from the source's.
func (s *CABundleSyncer) sync(ctx context.Context) error {
	bundle := s.Source.CurrentCABundleContent()
	if len(bundle) == 0 {
		return nil // nothing served yet: the provisioner will tell us
	}
	apiServices := s.Client.Resource(APIServiceResource)
	obj, err := apiServices.Get(ctx, s.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the APIService %s does not exist (yet)", s.Name)
	}
	if err != nil {
		return fmt.Errorf("reading the APIService %s: %w", s.Name, err)
	}
	current, _, _ := unstructured.NestedString(obj.Object, "spec", "caBundle")
	if have, err := base64.StdEncoding.DecodeString(current); err == nil && bytes.Equal(have, bundle) {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"caBundle": bundle}}) // []byte: base64 in JSON
	if err != nil {
		return err
	}
	if _, err := apiServices.Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: managedBy}); err != nil {
		return fmt.Errorf("patching the caBundle of the APIService %s: %w", s.Name, err)
	}
	s.Log.Info("updated the APIService's caBundle", "apiService", s.Name)
	return nil
}
