package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/hookkeeper/hookkeeper/test/fixtures"
	"github.com/hookkeeper/hookkeeper/test/testenv"
)

// What a GitOps tool sees after it synced the samples: no drift (the
// controller never writes spec, and the server's defaults agree with a
// dry run), re-applying changes nothing, and deleting the samples and
// their namespace finishes (the finalizers are released; the upstream
// namespace controller empties the namespace, as in a cluster).
var _ = Describe("GitOps drift", func() {
	It("applies the samples server-side, shows no diff once reconciled, re-applies without a new generation, and deletes them and their namespace", func() {
		ns := useNamespace("e2e-drift")
		rcv := newReceiver("samples", false, answer(204))
		files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		// URLs on loopback: no traffic leaves the machine.
		url := regexp.MustCompile(`(?m)^  url: .*$`)
		var docs []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			Expect(err).NotTo(HaveOccurred())
			docs = append(docs, url.ReplaceAllString(string(b), "  url: "+loopbackURL(string(b), rcv, "/"+filepath.Base(f))))
		}
		manifests := strings.Join(docs, "---\n")
		applySS := func() {
			out, err := runKubectl(manifests, "apply", "--server-side", "--field-manager=gitops", "-n", ns, "-f", "-")
			Expect(err).NotTo(HaveOccurred(), out)
		}
		applySS()

		kinds := "retrypolicies,webhookendpoints,deliveryrecoveries,webhookeventtypes,webhookquotas"
		generations := func() string {
			return kubectl("get", kinds, "-n", ns, "-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}={.metadata.generation}/{.status.observedGeneration}{"\n"}{end}`)
		}
		By("every object reconciled (observedGeneration caught up)")
		var before string
		Eventually(func(g Gomega) {
			before = generations()
			lines := strings.Fields(before)
			g.Expect(lines).To(HaveLen(len(files)))
			for _, l := range lines {
				gen := strings.SplitN(l, "=", 2)[1]
				parts := strings.Split(gen, "/")
				g.Expect(parts[1]).To(Equal(parts[0]), l)
			}
		}).WithTimeout(60 * time.Second).Should(Succeed())

		By("kubectl diff --server-side printing nothing")
		out, err := runKubectl(manifests, "diff", "--server-side", "--field-manager=gitops", "-n", ns, "-f", "-")
		Expect(err).NotTo(HaveOccurred(), "kubectl diff found drift (exit 1) or failed:\n%s", out)
		Expect(out).To(BeEmpty())

		By("re-applying: no new generation (the API server sets it in the write itself)")
		applySS()
		Expect(generations()).To(Equal(before))

		By("deleting the samples and their namespace, as a GitOps prune does: nothing stays behind a finalizer")
		out, err = runKubectl(manifests+"---\n"+fixtures.Namespace(ns), "delete", "-n", ns, "--wait=false", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() error {
			_, err := runKubectl("", "get", "namespace", ns, "-o", "name")
			return err
		}).WithTimeout(2*time.Minute).Should(MatchError(ContainSubstring("NotFound")), func() string {
			return "the namespace is not gone; what is left in it with finalizers:\n" + finalized(ns) +
				"\nkube-controllers log:\n" + testenv.Tail(kubeControllers.Log, 40)
		})
		Expect(finalized(ns)).To(BeEmpty())
	})
})

// finalized lists the objects of every namespaced kind the API server
// serves that are in ns and carry a finalizer, as kind/name: [finalizers];
// a failure to list is part of the answer.
func finalized(ns string) string {
	kinds, err := runKubectl("", "api-resources", "--namespaced", "--verbs=list", "-o", "name")
	if err != nil {
		return err.Error()
	}
	out, err := runKubectl("", "get", strings.Join(strings.Fields(kinds), ","), "-n", ns, "--ignore-not-found",
		"-o", `jsonpath={range .items[?(@.metadata.finalizers)]}{.kind}/{.metadata.name}: {.metadata.finalizers}{"\n"}{end}`)
	if err != nil {
		return out + err.Error()
	}
	return strings.TrimSpace(out)
}
