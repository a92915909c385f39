package webhookendpoint

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hookv1 "github.com/hookkeeper/hookkeeper/api/v1alpha1"
	"github.com/hookkeeper/hookkeeper/controllers/eventtype"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
	"github.com/hookkeeper/hookkeeper/internal/publish"
)

// runManager starts a manager of opts on rc with book attached; the
// returned stop ends it and waits for it.
func runManager(rc *rest.Config, book *eventtype.EventTypeContracts, opts ctrl.Options) (stop func()) {
	GinkgoHelper()
	opts.Scheme = scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	mgr, err := ctrl.NewManager(rc, opts)
	Expect(err).NotTo(HaveOccurred())
	Expect(book.Attach(mgr)).To(Succeed())
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(Receive())
	}
}

// strictNamespace labels ns strict.
func strictNamespace(ns string) {
	GinkgoHelper()
	var n corev1.Namespace
	Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
	n.Labels = map[string]string{hookv1.StrictEventTypesLabel: "true"}
	Expect(k8sClient.Update(ctx, &n)).To(Succeed())
}

// publishWith publishes an event of typ in ns through a core held to book.
func publishWith(book publish.Contracts, ns, typ, data string) error {
	core, err := publish.New(publish.Config{Committer: eng, Contracts: book})
	Expect(err).NotTo(HaveOccurred())
	_, err = core.Publish(ctx, &publish.Request{Namespace: ns, Type: typ, Data: []byte(data)})
	return err
}

// contractRule is the rule of a contract refusal, "" when err is none.
func contractRule(err error) publish.Rule {
	if ce, ok := errors.AsType[*publish.ContractError](err); ok {
		return ce.Rule
	}
	return ""
}

var _ = Describe("The event types' contracts through an API-server outage", func() {
	const orderSchema = `{"type":"object","required":["amount"],"properties":{"amount":{"type":"number","minimum":0}}}`

	It("are applied to publishes, persisted in the ledger, and a book loaded from it holds publishes with no API server", func() {
		ns := newNamespace()
		strictNamespace(ns)
		policy := fastPolicy(ns, "typed", 2)
		et := eventType(ns, "order-created", "order.created", orderSchema, func(s *hookv1.WebhookEventTypeSpec) {
			s.RetryPolicyRef = &hookv1.LocalObjectReference{Name: policy.Name}
		})

		By("a contract created through the API holds the publishes of the manager's book")
		Eventually(func(g Gomega) {
			c, strict, err := contracts.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.NotReady).To(BeEmpty())
			g.Expect(c.Policy).NotTo(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		Expect(contractRule(publishWith(contracts, ns, "order.created", `{"amount":-1}`))).To(Equal(publish.RuleSchema))
		Expect(contractRule(publishWith(contracts, ns, "order.other", `{}`))).To(Equal(publish.RuleUnknownType))
		Expect(publishWith(contracts, ns, "order.created", `{"amount":1}`)).To(Succeed())

		By("a book loaded from the ledger, never attached to a manager, holds publishes to the same contracts")
		var offline *eventtype.EventTypeContracts
		Eventually(func(g Gomega) {
			g.Expect(contracts.Flush(ctx)).To(Succeed())
			var err error
			offline, err = eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{Snapshots: store})
			g.Expect(err).NotTo(HaveOccurred())
			c, strict, err := offline.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.NotReady).To(BeEmpty())
			g.Expect(c.Policy).NotTo(BeNil())
			g.Expect(c.Policy.Backoff.MaxAttempts).To(BeEquivalentTo(2))
		}).Should(Succeed())
		Expect(contractRule(publishWith(offline, ns, "order.created", `{"amount":-1}`))).To(Equal(publish.RuleSchema))
		Expect(contractRule(publishWith(offline, ns, "order.other", `{}`))).To(Equal(publish.RuleUnknownType))
		Expect(publishWith(offline, ns, "order.created", `{"amount":1}`)).To(Succeed())

		By("attached to a manager whose API server does not answer, the book goes on answering what it knew")
		dead := &rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}
		stop := runManager(dead, offline, ctrl.Options{})
		Consistently(func(g Gomega) {
			c, strict, err := offline.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).NotTo(BeNil())
		}).WithTimeout(2 * time.Second).Should(Succeed())
		Expect(contractRule(publishWith(offline, ns, "order.created", `{"amount":-1}`))).To(Equal(publish.RuleSchema))
		stop()

		By("a deleted WebhookEventType leaves the book and the ledger")
		Expect(k8sClient.Delete(ctx, et)).To(Succeed())
		Eventually(func(g Gomega) {
			c, _, err := contracts.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(c).To(BeNil())
			g.Expect(contracts.Flush(ctx)).To(Succeed())
			snaps, err := store.SnapshotList(ctx, "WebhookEventType") // the book's snapshots of event types
			g.Expect(err).NotTo(HaveOccurred())
			for _, s := range snaps {
				g.Expect(s.Namespace + "/" + s.Name).NotTo(Equal(ns + "/order-created"))
			}
		}).WithTimeout(20 * time.Second).Should(Succeed())
		reloaded, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{Snapshots: store})
		Expect(err).NotTo(HaveOccurred())
		Expect(contractRule(publishWith(reloaded, ns, "order.created", `{"amount":-1}`))).To(Equal(publish.RuleUnknownType))
	})

	It("refuses publishes as Unavailable until it has known the contracts, and not after", func() {
		empty, err := sqlite.Open(ctx, filepath.Join(GinkgoT().TempDir(), "ledger.db"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(empty.Close)
		var logMu sync.Mutex
		var logs strings.Builder
		log := funcr.New(func(prefix, args string) {
			logMu.Lock()
			defer logMu.Unlock()
			logs.WriteString(prefix + " " + args + "\n")
		}, funcr.Options{})
		logged := func() string { logMu.Lock(); defer logMu.Unlock(); return logs.String() }
		book, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{Snapshots: empty, Log: log})
		Expect(err).NotTo(HaveOccurred())
		_, _, err = book.Contract("anywhere", "order.created")
		Expect(err).To(MatchError(publish.ErrContractsUnknown))
		err = publishWith(book, "anywhere", "order.created", `{}`)
		ue, ok := errors.AsType[*publish.UnavailableError](err)
		Expect(ok).To(BeTrue(), "%v", err)
		Expect(ue.Reason).To(Equal(publish.ContractsUnknown))
		Expect(ue.RetryAfter).To(BeNumerically(">", 0))

		By("a manager whose API server does not answer leaves it unknown")
		stop := runManager(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}, book, ctrl.Options{})
		Consistently(func() error { _, _, err := book.Contract("anywhere", "x"); return err }).
			WithTimeout(2 * time.Second).Should(MatchError(publish.ErrContractsUnknown))
		Expect(logged()).To(ContainSubstring("cannot watch yet"), "the book follows the manager that started, and retries")
		stop()

		By("once a cache synced, it is known, and so is the book a later process loads from the ledger")
		stop = runManager(cfg, book, ctrl.Options{})
		Eventually(func() error { _, _, err := book.Contract("anywhere", "x"); return err }).
			WithTimeout(20 * time.Second).Should(Succeed())
		stop()
		Expect(book.Flush(ctx)).To(Succeed())
		later, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{Snapshots: empty})
		Expect(err).NotTo(HaveOccurred())
		c, strict, err := later.Contract("anywhere", "x")
		Expect(err).NotTo(HaveOccurred())
		Expect(c).To(BeNil())
		Expect(strict).To(BeFalse())
	})

	It("keeps the last known contracts between managers, and a new manager drops what was deleted meanwhile", func() {
		ns := newNamespace()
		strictNamespace(ns)
		eventType(ns, "kept", "order.kept", "")
		gone := eventType(ns, "gone", "order.gone", "")
		book, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{})
		Expect(err).NotTo(HaveOccurred())
		stop := runManager(cfg, book, ctrl.Options{})
		Eventually(func(g Gomega) {
			c, strict, err := book.Contract(ns, "order.gone")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).NotTo(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		stop()

		Expect(k8sClient.Delete(ctx, gone)).To(Succeed())
		c, _, err := book.Contract(ns, "order.gone")
		Expect(err).NotTo(HaveOccurred())
		Expect(c).NotTo(BeNil(), "with no manager running, the last known contract holds")

		stop = runManager(cfg, book, ctrl.Options{})
		defer stop()
		Eventually(func(g Gomega) {
			c, strict, err := book.Contract(ns, "order.gone")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
			g.Expect(c).To(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		c, _, err = book.Contract(ns, "order.kept")
		Expect(err).NotTo(HaveOccurred())
		Expect(c).NotTo(BeNil())
	})

	It("reads the strict label of watched namespaces with a get of each when the cache is confined to them", func() {
		ns := newNamespace()
		eventType(ns, "order-created", "order.created", "")
		book, err := eventtype.NewEventTypeContracts(ctx, eventtype.ContractsOptions{WatchNamespaces: []string{ns}, NamespaceRefresh: 200 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred())
		stop := runManager(cfg, book, ctrl.Options{Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
		defer stop()
		Eventually(func(g Gomega) {
			c, strict, err := book.Contract(ns, "order.created")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeFalse())
			g.Expect(c).NotTo(BeNil())
		}).WithTimeout(20 * time.Second).Should(Succeed())
		strictNamespace(ns)
		Eventually(func(g Gomega) {
			_, strict, err := book.Contract(ns, "order.other")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(strict).To(BeTrue())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		// Another namespace is outside the book: no contract, not strict.
		c, strict, err := book.Contract("default", "order.created")
		Expect(err).NotTo(HaveOccurred())
		Expect(c).To(BeNil())
		Expect(strict).To(BeFalse())
	})
})
