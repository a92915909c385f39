package conditions

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
)

func TestRequeueOnConflict(t *testing.T) {
	gr := schema.GroupResource{Group: "hookkeeper.dev", Resource: "webhookendpoints"}
	conflict := apierrors.NewConflict(gr, "orders", errors.New("the object has been modified"))
	other := errors.New("ledger unavailable")
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "orders-signing",
		errors.New("unable to create new content in namespace shop because it is being terminated"))
	terminating.ErrStatus.Details.Causes = append(terminating.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Message: "namespace shop is being terminated", Field: "metadata.namespace"})
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "orders-signing", errors.New("RBAC says no"))
	for _, tt := range []struct {
		name    string
		res     ctrl.Result
		err     error
		wantRes ctrl.Result
		wantErr error
	}{
		{"success keeps its result", ctrl.Result{RequeueAfter: time.Minute}, nil, ctrl.Result{RequeueAfter: time.Minute}, nil},
		{"a conflict is a quiet, prompt retry", ctrl.Result{}, conflict, ctrl.Result{RequeueAfter: conflictRetry}, nil},
		{"a wrapped conflict too", ctrl.Result{}, fmt.Errorf("writing status of shop/orders: %w", conflict), ctrl.Result{RequeueAfter: conflictRetry}, nil},
		{"a write refused by a terminating namespace is a quiet no-op", ctrl.Result{RequeueAfter: time.Minute}, fmt.Errorf("creating Secret orders-signing: %w", terminating), ctrl.Result{}, nil},
		{"another Forbidden is returned", ctrl.Result{}, forbidden, ctrl.Result{}, forbidden},
		{"any other error is returned", ctrl.Result{}, other, ctrl.Result{}, other},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := RequeueOnConflict(context.Background(), tt.res, tt.err)
			if res != tt.wantRes || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("requeueOnConflict = %+v, %v; want %+v, %v", res, err, tt.wantRes, tt.wantErr)
			}
		})
	}
}
