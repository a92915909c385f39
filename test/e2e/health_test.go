package e2e

import (
	"fmt"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// What GitOps tools read from the status the manager writes: kstatus
// (Flux, kubectl wait, cli-utils) and Argo CD's Lua health checks shipped in
// config/argocd, run with an embedded Lua interpreter against the same
// objects, fetched with the real kubectl.
var _ = Describe("Health for GitOps tools", func() {
	It("computes Current/Healthy, InProgress/Progressing and Failed/Degraded with the condition's message for every kind", func() {
		ns := useNamespace("e2e-health")
		rcv := newReceiver("healthy", false, answer(204))
		down := newReceiver("down", false, answer(503))
		apply(policyYAML(ns, "fast", "100ms", 2) + "---\n" +
			// Attempts-only horizon past the replay window: Ready=False ReplayWindowTooShort.
			fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata:
  name: too-short
  namespace: %s
spec:
  backoff: {strategy: Fixed, initialDelay: 1h, jitterPercent: 0}
  horizon: {maxAttempts: 5}
  attemptTimeout: 5s
  replayWindow: 1h
`, ns) + "---\n" +
			// A breaker that opens on the first failure and probes once an hour.
			fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: RetryPolicy
metadata:
  name: breaker
  namespace: %s
spec:
  backoff: {strategy: Fixed, initialDelay: 100ms, jitterPercent: 0}
  horizon: {maxAttempts: 100}
  attemptTimeout: 5s
  replayWindow: 1h
  circuitBreaker: {failures: 1, minDuration: 0s, probeInterval: 1h, maxProbeInterval: 1h}
`, ns) + "---\n" +
			endpointYAML(ns, "healthy", rcv.URL("/hooks"), "[health.ok]", "fast", "") + "---\n" +
			endpointYAML(ns, "open-breaker", down.URL("/hooks"), "[health.down]", "breaker", "") + "---\n" +
			endpointYAML(ns, "missing-policy", rcv.URL("/hooks"), "[health.none]", "no-such-policy", "") + "---\n" +
			endpointYAML(ns, "forbidden", "http://169.254.169.254/latest/meta-data/", "[health.none]", "fast", ""))
		recovery := func(name, endpoint, action string) string {
			return fmt.Sprintf("apiVersion: hookkeeper.dev/v1alpha1\nkind: DeliveryRecovery\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  endpointRef: {name: %s}\n  action: %s\n", name, ns, endpoint, action)
		}
		kubectlWait("webhookendpoint/healthy", "--for=condition=Ready", 30*time.Second)
		api.publish(ns, "health-1", `{"type":"health.ok","data":{}}`)
		Eventually(func() string {
			return jsonpath("webhookendpoint/healthy", `{.status.conditions[?(@.type=="Healthy")].status}`)
		}).Should(Equal("True"))
		apply(recovery("done", "healthy", "Dismiss") + "---\n" + recovery("waiting", "not-yet", "Auto") + "---\n" + recovery("conflict", "healthy", "Dismiss"))
		kubectlWait("deliveryrecovery/done", "--for=condition=Complete", 30*time.Second)
		// A recovery is identified by its name (ADR 0007): the same name with
		// another spec fails with SpecConflict.
		kubectlWait("deliveryrecovery/conflict", "--for=condition=Complete", 30*time.Second)
		kubectl("delete", "deliveryrecovery", "conflict", "-n", ns, "--wait")
		apply(recovery("conflict", "healthy", "Retry"))
		kubectlWait("deliveryrecovery/conflict", "--for=condition=Failed", 30*time.Second)
		Eventually(func() string { return jsonpath("deliveryrecovery/waiting", "{.status.state}") }).Should(Equal("Waiting"))
		api.publish(ns, "health-down", `{"type":"health.down","data":{}}`)
		kubectlWait("webhookendpoint/open-breaker", "--for=condition=CircuitOpen", 30*time.Second)
		Eventually(func() string {
			return jsonpath("webhookendpoint/forbidden", `{.status.conditions[?(@.type=="Ready")].reason}`)
		}).Should(Equal("DestinationForbidden"))
		Eventually(func() string {
			return jsonpath("webhookendpoint/missing-policy", `{.status.conditions[?(@.type=="Ready")].reason}`)
		}).Should(Equal("RetryPolicyNotFound"))
		Eventually(func() string {
			return jsonpath("retrypolicy/too-short", `{.status.conditions[?(@.type=="Ready")].reason}`)
		}).Should(Equal("ReplayWindowTooShort"))

		scripts := argoHealthScripts()
		cases := []struct {
			object    string
			kstatus   status.Status
			argo      string
			condition string // whose message Argo CD, and kstatus unless Current, must carry ("" for none)
		}{
			{"retrypolicy/fast", status.CurrentStatus, "Healthy", ""},
			{"retrypolicy/too-short", status.FailedStatus, "Degraded", "Ready"},
			{"webhookendpoint/healthy", status.CurrentStatus, "Healthy", ""},
			{"webhookendpoint/missing-policy", status.FailedStatus, "Degraded", "Ready"},
			{"webhookendpoint/forbidden", status.FailedStatus, "Degraded", "Ready"},
			// The spec is applied (kstatus Current); the receiver is down.
			{"webhookendpoint/open-breaker", status.CurrentStatus, "Degraded", "CircuitOpen"},
			{"deliveryrecovery/done", status.CurrentStatus, "Healthy", ""},
			{"deliveryrecovery/waiting", status.InProgressStatus, "Progressing", "Complete"},
			{"deliveryrecovery/conflict", status.FailedStatus, "Degraded", "Failed"},
		}
		kinds := map[string]bool{}
		for _, c := range cases {
			By(c.object)
			u := getObject(c.object)
			kinds[u.GetKind()] = true
			res, err := status.Compute(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(c.kstatus), "kstatus of %s: %s (%s)", c.object, res.Status, res.Message)
			hs, msg := argoHealth(scripts, u)
			Expect(hs).To(Equal(c.argo), "Argo CD health of %s: %s (%s)", c.object, hs, msg)
			if c.condition != "" {
				want := conditionMessage(u, c.condition)
				Expect(want).NotTo(BeEmpty())
				if c.kstatus != status.CurrentStatus {
					Expect(res.Message).To(Equal(want), "kstatus message of %s", c.object)
				}
				Expect(msg).To(Equal(want), "Argo CD message of %s", c.object)
			}

			By(c.object + " with its spec not yet observed")
			behind := u.DeepCopy()
			behind.SetGeneration(u.GetGeneration() + 1)
			res, err = status.Compute(behind)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(status.InProgressStatus), "kstatus of %s, observedGeneration behind", c.object)
			hs, _ = argoHealth(scripts, behind)
			Expect(hs).To(Equal("Progressing"), "Argo CD health of %s, observedGeneration behind", c.object)
		}
		Expect(kinds).To(HaveLen(3))
		Expect(scripts).To(HaveLen(3))
	})
})

func getObject(object string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	// As clients decode it: integers as int64 (kstatus reads generations so).
	Expect(u.UnmarshalJSON([]byte(kubectl("get", "-n", specNamespace, object, "-o", "json")))).To(Succeed())
	return u
}

func conditionMessage(u *unstructured.Unstructured, typ string) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == typ {
			return fmt.Sprint(m["message"])
		}
	}
	return ""
}

// argoHealthScripts reads the Lua scripts by kind from the argocd-cm that
// config/argocd renders: what an Argo CD admin installs.
func argoHealthScripts() map[string]string {
	GinkgoHelper()
	out, err := runKubectl("", "kustomize", filepath.Join(testenv.RepoRoot(), "config", "argocd"))
	Expect(err).NotTo(HaveOccurred(), out)
	var cm corev1.ConfigMap
	Expect(yaml.Unmarshal([]byte(out), &cm)).To(Succeed())
	Expect(cm.Name).To(Equal("argocd-cm"))
	scripts := map[string]string{}
	for k, v := range cm.Data {
		var kind string
		if _, err := fmt.Sscanf(k, "resource.customizations.health.hookkeeper.dev_%s", &kind); err == nil {
			scripts[kind] = v
		}
	}
	return scripts
}

// argoHealth runs u's kind's script as Argo CD does: the object as the
// global obj, the result a table with status and message.
func argoHealth(scripts map[string]string, u *unstructured.Unstructured) (string, string) {
	GinkgoHelper()
	script, ok := scripts[u.GetKind()]
	Expect(ok).To(BeTrue(), "no health check for %s", u.GetKind())
	L := lua.NewState(lua.Options{SkipOpenLibs: false})
	defer L.Close()
	L.SetGlobal("obj", toLua(L, u.Object))
	Expect(L.DoString(script)).To(Succeed())
	ret, ok := L.Get(-1).(*lua.LTable)
	Expect(ok).To(BeTrue(), "the %s script returned %v, not a table", u.GetKind(), L.Get(-1))
	return ret.RawGetString("status").String(), ret.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	Fail(fmt.Sprintf("no Lua value for %T", v))
	return lua.LNil
}
