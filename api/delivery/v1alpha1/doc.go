// Package v1alpha1 contains the delivery.hookkeeper.dev/v1alpha1 API: the
// ledger's history (Delivery, WebhookEvent) served read-only by the
// manager's aggregated API server (internal/deliveryapi). Nothing of it is
// stored in etcd: every answer is read from the ledger when asked, so these
// types have no CRDs (no +groupName marker, which would make controller-gen
// generate them; +kubebuilder:skip keeps controller-gen crd away).
//
// +kubebuilder:skip
// +kubebuilder:object:generate=true
// +k8s:openapi-gen=true
// +k8s:openapi-model-package=dev.hookkeeper.delivery.v1alpha1
package v1alpha1
