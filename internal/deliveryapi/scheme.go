// Package deliveryapi serves the ledger's history as the Kubernetes API
// delivery.hookkeeper.dev/v1alpha1 (deliveries, webhookevents), aggregated
// into the cluster's API server the way metrics-server serves node
// metrics: built on k8s.io/apiserver's generic server with delegated
// authentication and authorization, read from the ledger when asked,
// nothing stored in etcd. See docs/delivery-api.md.
package deliveryapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/hookkeeper/hookkeeper/api/delivery/v1alpha1"
)

var (
	// Scheme holds the served types.
	Scheme = runtime.NewScheme()
	// Codecs serializes them.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	utilruntime.Must(v1alpha1.AddToScheme(Scheme))
	utilruntime.Must(Scheme.SetVersionPriority(v1alpha1.SchemeGroupVersion))
	// The generic server answers with these whatever the group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	for _, k := range []struct {
		kind   string
		fields []string
	}{{"Delivery", deliveryFields}, {"WebhookEvent", eventFields}} {
		fn := fieldLabelConversion(k.kind, k.fields)
		for _, v := range []string{v1alpha1.SchemeGroupVersion.Version, runtime.APIVersionInternal} {
			gvk := schema.GroupVersionKind{Group: v1alpha1.GroupName, Version: v, Kind: k.kind}
			utilruntime.Must(Scheme.AddFieldLabelConversionFunc(gvk, fn))
		}
	}
}
