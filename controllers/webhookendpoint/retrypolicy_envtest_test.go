package webhookendpoint

import (
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/internal/testutil"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "ctrl-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// reconciled fetches the policy once its status describes its current
// generation.
func reconciled(key client.ObjectKey) func(Gomega) *hookv1.RetryPolicy {
	return func(g Gomega) *hookv1.RetryPolicy {
		var p hookv1.RetryPolicy
		g.Expect(k8sClient.Get(ctx, key, &p)).To(Succeed())
		g.Expect(p.Status.ObservedGeneration).To(Equal(p.Generation))
		return &p
	}
}

var _ = Describe("RetryPolicy controller", func() {
	DescribeTable("writes the effective schedule and horizon for each strategy",
		func(backoff hookv1.Backoff, horizon hookv1.Horizon, wantSchedule []string, wantAttempts int64, wantHorizon string) {
			ns := newNamespace()
			p := &hookv1.RetryPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
				Spec: hookv1.RetryPolicySpec{
					Backoff: backoff, Horizon: horizon,
					AttemptTimeout: testutil.Dur("10s"), ReplayWindow: *testutil.Dur("168h"),
				},
			}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())

			var got *hookv1.RetryPolicy
			Eventually(reconciled(client.ObjectKeyFromObject(p))).Should(Satisfy(func(r *hookv1.RetryPolicy) bool { got = r; return true }))
			Expect(got.Status.Schedule).To(Equal(wantSchedule))
			Expect(got.Status.Attempts).To(Equal(wantAttempts))
			Expect(got.Status.Horizon).To(Equal(wantHorizon))
			ready := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionReady)
			Expect(ready).NotTo(BeNil())
			Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			Expect(ready.Reason).To(Equal(hookv1.ReasonReconciled))
		},
		Entry("Exponential",
			hookv1.Backoff{Strategy: hookv1.BackoffExponential, InitialDelay: testutil.Dur("1s"), Factor: "3", JitterPercent: ptr.To[int32](0)},
			hookv1.Horizon{MaxAttempts: ptr.To[int32](4)},
			[]string{"0s", "1s", "4s", "13s"}, int64(4), "53s"),
		Entry("Linear, capped",
			hookv1.Backoff{Strategy: hookv1.BackoffLinear, InitialDelay: testutil.Dur("1m"), MaxDelay: testutil.Dur("2m"), JitterPercent: ptr.To[int32](0)},
			hookv1.Horizon{MaxAttempts: ptr.To[int32](4)},
			[]string{"0s", "1m", "3m", "5m"}, int64(4), "5m40s"),
		Entry("Fixed, bounded by age",
			hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("10m"), JitterPercent: ptr.To[int32](0)},
			hookv1.Horizon{MaxAge: testutil.Dur("30m")},
			[]string{"0s", "10m", "20m", "30m"}, int64(4), "30m10s"),
		Entry("Schedule, with jitter",
			hookv1.Backoff{Strategy: hookv1.BackoffSchedule, Schedule: []metav1.Duration{*testutil.Dur("10s"), *testutil.Dur("1m")}, JitterPercent: ptr.To[int32](50)},
			hookv1.Horizon{MaxAttempts: ptr.To[int32](4)},
			[]string{"0s", "10s", "1m10s", "2m10s"}, int64(4), "3m55s"),
	)

	It("recomputes the status when the spec changes", func() {
		ns := newNamespace()
		p := &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: hookv1.RetryPolicySpec{
				Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1m"), JitterPercent: ptr.To[int32](0)},
				Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](2)},
				ReplayWindow: *testutil.Dur("1h"),
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		key := client.ObjectKeyFromObject(p)
		Eventually(reconciled(key)).Should(HaveField("Status.Attempts", int64(2)))

		Eventually(func(g Gomega) {
			var cur hookv1.RetryPolicy
			g.Expect(k8sClient.Get(ctx, key, &cur)).To(Succeed())
			cur.Spec.Horizon.MaxAttempts = ptr.To[int32](5)
			g.Expect(k8sClient.Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())

		Eventually(reconciled(key)).Should(And(
			HaveField("Generation", int64(2)),
			HaveField("Status.Attempts", int64(5)),
			HaveField("Status.Schedule", []string{"0s", "1m", "2m", "3m", "4m"}),
		))
	})

	It("is not Ready when the replay window ends before the last automatic retry", func() {
		ns := newNamespace()
		p := &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
			Spec: hookv1.RetryPolicySpec{
				Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1h"), JitterPercent: ptr.To[int32](0)},
				Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](10)},
				ReplayWindow: *testutil.Dur("2h"),
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func(g Gomega) {
			got := reconciled(client.ObjectKeyFromObject(p))(g)
			ready := meta.FindStatusCondition(got.Status.Conditions, hookv1.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(hookv1.ReasonReplayWindowTooShort))
			g.Expect(ready.Message).To(ContainSubstring("raise spec.replayWindow"))
		}).Should(Succeed())
	})

	It("counts the endpoints that use the policy", func() {
		ns := newNamespace()
		p := &hookv1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
			Spec: hookv1.RetryPolicySpec{
				Backoff:      hookv1.Backoff{Strategy: hookv1.BackoffFixed, InitialDelay: testutil.Dur("1m")},
				Horizon:      hookv1.Horizon{MaxAttempts: ptr.To[int32](3)},
				ReplayWindow: *testutil.Dur("1h"),
			},
		}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		key := client.ObjectKeyFromObject(p)
		endpoint := func(name string) *hookv1.WebhookEndpoint {
			return &hookv1.WebhookEndpoint{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: hookv1.WebhookEndpointSpec{
					URL: "https://example.com/" + name, EventTypes: []hookv1.EventTypePattern{"*"},
					RetryPolicyRef: &hookv1.LocalObjectReference{Name: "shared"},
				},
			}
		}
		a, b := endpoint("a"), endpoint("b")
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Expect(k8sClient.Create(ctx, b)).To(Succeed())
		Eventually(reconciled(key)).Should(HaveField("Status.Endpoints", int32(2)))

		Expect(k8sClient.Delete(ctx, a)).To(Succeed())
		Eventually(reconciled(key)).Should(HaveField("Status.Endpoints", int32(1)))

		// Pointing b elsewhere recounts the policy it left.
		Eventually(func(g Gomega) {
			var cur hookv1.WebhookEndpoint
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(b), &cur)).To(Succeed())
			cur.Spec.RetryPolicyRef = &hookv1.LocalObjectReference{Name: "other"}
			g.Expect(k8sClient.Update(ctx, &cur)).To(Succeed())
		}).Should(Succeed())
		Eventually(reconciled(key)).Should(HaveField("Status.Endpoints", int32(0)))
	})
})

var _ = Describe("the samples with the real kubectl", func() {
	It("applies config/samples and lists all three kinds with their columns", func() {
		ns := newNamespace()
		kubectl, err := testenv.Kubectl()
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := testenv.Kubeconfig(env, GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		run := func(args ...string) string {
			cmd := exec.Command(kubectl, append([]string{"--kubeconfig", kubeconfig, "--namespace", ns}, args...)...)
			out, err := cmd.CombinedOutput()
			ExpectWithOffset(1, err).NotTo(HaveOccurred(), "kubectl %s:\n%s", strings.Join(args, " "), out)
			return string(out)
		}

		out := run("apply", "-f", filepath.Join(testenv.RepoRoot(), "config", "samples"))
		for _, created := range []string{
			"retrypolicy.hookkeeper.dev/standard created", "retrypolicy.hookkeeper.dev/payments created",
			"webhookendpoint.hookkeeper.dev/n8n-ingress created", "webhookendpoint.hookkeeper.dev/audit-all created",
			"deliveryrecovery.hookkeeper.dev/n8n-outage-2026-11-28 created",
		} {
			Expect(out).To(ContainSubstring(created))
		}

		// The controller fills the horizon column of every policy.
		Eventually(func(g Gomega) {
			out := run("get", "retrypolicies")
			g.Expect(out).To(MatchRegexp(`NAME\s+STRATEGY\s+ATTEMPTS\s+HORIZON\s+READY\s+FIRST TRY\s+RECOVERED\s+EXHAUSTED 24H\s+AGE`))
			g.Expect(out).To(MatchRegexp(`standard\s+Schedule\s+8\s+1d6h\s+True`))
			g.Expect(out).To(MatchRegexp(`payments\s+Exponential\s+12\s+1h4m\s+True`))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		out = run("get", "hookkeeper")
		Expect(out).To(MatchRegexp(`NAME\s+URL\s+READY\s+BREAKER\s+PENDING\s+EXHAUSTED\s+LAST SUCCESS\s+FIRST TRY\s+AGE`))
		Expect(out).To(MatchRegexp(`NAME\s+ENDPOINT\s+ACTION\s+STATUS\s+MATCHED\s+RETRIED\s+REISSUED\s+REFUSED\s+AGE`))
		Expect(out).To(ContainSubstring("webhookendpoint.hookkeeper.dev/n8n-ingress"))
		Expect(out).To(MatchRegexp(`deliveryrecovery.hookkeeper.dev/n8n-outage-2026-11-28\s+n8n-ingress\s+Auto`))
		Expect(out).To(ContainSubstring("retrypolicy.hookkeeper.dev/standard"))

		// Applied with its endpoint in one go, the sample recovery waits
		// for it instead of failing, and then runs.
		Eventually(func(g Gomega) {
			g.Expect(run("get", "drec")).To(MatchRegexp(`n8n-outage-2026-11-28\s+n8n-ingress\s+Auto\s+Complete\s+0`))
		}).WithTimeout(30 * time.Second).Should(Succeed())

		// Short names resolve.
		for _, short := range []string{"rtp", "whep", "drec"} {
			Expect(run("get", short, "-o", "name")).NotTo(BeEmpty(), short)
		}
	})
})
