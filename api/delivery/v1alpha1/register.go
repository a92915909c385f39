package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the delivery history; the CRDs keep
// hookkeeper.dev.
const GroupName = "delivery.hookkeeper.dev"

// SchemeGroupVersion is the served group and version.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// AddToScheme registers the types under SchemeGroupVersion and, since the
// API has one version and no storage, also as the group's internal
// version: the server then needs no conversions.
func AddToScheme(scheme *runtime.Scheme) error {
	internal := schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}
	for _, gv := range []schema.GroupVersion{SchemeGroupVersion, internal} {
		scheme.AddKnownTypes(gv, &Delivery{}, &DeliveryList{}, &WebhookEvent{}, &WebhookEventList{})
	}
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
