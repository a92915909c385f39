// Package v1alpha1 contains the hookkeeper.dev/v1alpha1 API: RetryPolicy
// (how hard to try and how long evidence lives), WebhookEndpoint (where
// events go) and DeliveryRecovery (a one-shot operation that resolves
// exhausted deliveries).
//
// +kubebuilder:object:generate=true
// +groupName=hookkeeper.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "hookkeeper.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the Go types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
