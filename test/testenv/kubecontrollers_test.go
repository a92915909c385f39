package testenv_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hookkeeper/hookkeeper/test/fixtures"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// TestKubeControllers runs kube-controllers against the real control plane
// and shows each of its controllers at work, on core objects and on
// hookkeeper's custom resources: none of this happens on a bare
// etcd + kube-apiserver.
func TestKubeControllers(t *testing.T) {
	env, err := testenv.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	dir := t.TempDir()
	kubeconfig, err := testenv.Kubeconfig(env, dir)
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := testenv.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, stdin string, args ...string) {
		t.Helper()
		if out, err := testenv.RunKubectl(kubectl, kubeconfig, stdin, args...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	controllers, err := testenv.StartKubeControllers(kubeconfig, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := controllers.Stop(); err != nil {
			t.Error(err)
		}
	})
	cs := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	retryPolicies := schema.GroupVersionResource{Group: "hookkeeper.dev", Version: "v1alpha1", Resource: "retrypolicies"}

	t.Run("NamespaceDeletionCompletes", func(t *testing.T) {
		g := NewWithT(t)
		run(t, fixtures.Namespace("doomed")+"---\n"+fixtures.RetryPolicy("doomed", "fast", "1s", 3), "apply", "-f", "-")
		run(t, "", "create", "configmap", "settings", "-n", "doomed", "--from-literal=a=b")
		run(t, "", "delete", "namespace", "doomed", "--wait=false")
		g.Eventually(func() error {
			_, err := cs.CoreV1().Namespaces().Get(t.Context(), "doomed", metav1.GetOptions{})
			return err
		}).WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound), "namespace deletion does not complete:\n%s", testenv.Tail(controllers.Log, 40))
		list, err := dyn.Resource(retryPolicies).Namespace("doomed").List(t.Context(), metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Items).To(BeEmpty())
	})

	t.Run("GarbageCollection", func(t *testing.T) {
		g := NewWithT(t)
		run(t, fixtures.Namespace("gc")+"---\n"+fixtures.RetryPolicy("gc", "owner", "1s", 3), "apply", "-f", "-")
		run(t, "", "create", "configmap", "owner", "-n", "gc")
		// One dependent of a core object and one of a custom resource: the
		// collector watches what discovery lists, CRDs included.
		for _, owner := range []struct{ apiVersion, kind, resource string }{
			{"v1", "ConfigMap", "configmap"}, {"hookkeeper.dev/v1alpha1", "RetryPolicy", "retrypolicy"},
		} {
			out, err := testenv.RunKubectl(kubectl, kubeconfig, "", "get", owner.resource, "owner", "-n", "gc", "-o", "jsonpath={.metadata.uid}")
			g.Expect(err).NotTo(HaveOccurred())
			_, err = cs.CoreV1().Secrets("gc").Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: "owned-by-" + owner.resource, Namespace: "gc",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: owner.apiVersion, Kind: owner.kind, Name: "owner", UID: types.UID(out)}},
			}}, metav1.CreateOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			run(t, "", "delete", owner.resource, "owner", "-n", "gc")
			g.Eventually(func() error {
				_, err := cs.CoreV1().Secrets("gc").Get(t.Context(), "owned-by-"+owner.resource, metav1.GetOptions{})
				return err
			}).WithTimeout(time.Minute).Should(Satisfy(apierrors.IsNotFound), "the dependent of a deleted %s stays:\n%s", owner.kind, testenv.Tail(controllers.Log, 40))
		}
	})

	t.Run("ClusterRoleAggregation", func(t *testing.T) {
		g := NewWithT(t)
		probe := rbacv1.PolicyRule{APIGroups: []string{"probe.example.dev"}, Resources: []string{"probes"}, Verbs: []string{"list"}}
		_, err := cs.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "probe-viewer", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
			Rules:      []rbacv1.PolicyRule{probe},
		}, metav1.CreateOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		// view aggregates into edit, and edit into admin.
		for _, role := range []string{"view", "edit", "admin"} {
			g.Eventually(func() []rbacv1.PolicyRule {
				r, err := cs.RbacV1().ClusterRoles().Get(t.Context(), role, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				return r.Rules
			}).WithTimeout(time.Minute).Should(ContainElement(probe), "%s does not aggregate probe-viewer", role)
		}
	})
}
