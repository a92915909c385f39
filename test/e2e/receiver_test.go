package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	_ "modernc.org/sqlite"

	hkreceiver "github.com/hookkeeper/hookkeeper/pkg/receiver"
)

// Issue #25's receiver half, end to end: a receiver built with
// pkg/receiver books an invoice whose answer is lost (processed, but
// hookkeeper saw 503s until the delivery exhausted), then gets the same
// event again from a DeliveryRecovery's Retry and from a Replay. Its table
// has one row; the package's record of the webhook-id is kept until the
// Hookkeeper-Replay-Until the deliveries carried, and Prune removes it
// after that time, not before.
//
// The header is the sender's half of the issue, built on another branch:
// until both are merged, the last assertions (every attempt carries it,
// the record keeps its value) fail here while the rest passes.
var _ = Describe("A receiver built with pkg/receiver", func() {
	It("books one row for an event processed, retried and replayed, and forgets it after its replay-until", func() {
		ns := useNamespace("e2e-receiver")

		// The receiver's own database, and the handler a newcomer writes.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(GinkgoT().TempDir(), "books.db")+
			"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(db.Close)
		_, err = db.Exec(`CREATE TABLE booked (webhook_id TEXT NOT NULL, invoice INTEGER NOT NULL)`) // no UNIQUE: the package alone de-duplicates
		Expect(err).NotTo(HaveOccurred())
		book := func(ctx context.Context, tx *sql.Tx, ev *hkreceiver.Event) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO booked (webhook_id, invoice) VALUES ($1, 42)`, ev.ID)
			return err
		}

		// The receiver answers 503 until its secret is known, and while
		// loseAnswers is set it processes but its answer is lost on the
		// way (as behind an ingress that timed out): hookkeeper sees 503.
		type seen struct {
			res         hkreceiver.Result
			replayUntil string
			delivery    string
		}
		var (
			rcv         atomic.Pointer[hkreceiver.Receiver]
			loseAnswers atomic.Bool
			mu          sync.Mutex
			log         []seen
		)
		loseAnswers.Store(true)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rc := rcv.Load()
			if rc == nil {
				http.Error(w, "no secret yet", http.StatusServiceUnavailable)
				return
			}
			rec := httptest.NewRecorder()
			res := rc.Receive(rec, r, book)
			mu.Lock()
			log = append(log, seen{res, r.Header.Get(hkreceiver.ReplayUntilHeader), r.Header.Get(hkreceiver.DeliveryIDHeader)})
			mu.Unlock()
			if loseAnswers.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
		}))
		DeferCleanup(srv.Close)
		received := func() []seen {
			mu.Lock()
			defer mu.Unlock()
			return append([]seen(nil), log...)
		}
		rows := func(id string) int {
			var n int
			Expect(db.QueryRow(`SELECT COUNT(*) FROM booked WHERE webhook_id = $1`, id).Scan(&n)).To(Succeed())
			return n
		}

		apply(policyYAML(ns, "two", "200ms", 2) + "---\n" +
			endpointYAML(ns, "books", srv.URL+"/invoices", "[invoice.*]", "two", ""))
		kubectlWait("webhookendpoint/books", "--for=condition=Ready", 30*time.Second)
		r, err := hkreceiver.New(context.Background(), db, hkreceiver.Options{Secrets: []string{string(signingSecret("books").Reveal())}})
		Expect(err).NotTo(HaveOccurred())
		rcv.Store(r)

		By("an invoice processed twice over, its answers lost: the delivery exhausts, one row")
		since := time.Now().UTC().Truncate(time.Second)
		event := api.publish(ns, "invoice-42", `{"type":"invoice.paid","data":{"invoice":42}}`).ID
		Eventually(func(g Gomega) {
			g.Expect(api.deliveryOf(g, ns, event).State).To(Equal("exhausted"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		got := received()
		Expect(got).To(HaveLen(2))
		Expect([]bool{got[0].res.Duplicate, got[1].res.Duplicate}).To(Equal([]bool{false, true}), "the second attempt is recognised")
		Expect(rows(event)).To(Equal(1))
		loseAnswers.Store(false)

		By("a DeliveryRecovery's Retry: a new delivery of the same webhook-id, recognised, delivered")
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: retry-books
  namespace: %s
spec:
  endpointRef:
    name: books
  action: Retry
`, ns))
		kubectlWait("deliveryrecovery/retry-books", "--for=condition=Complete", 30*time.Second)
		Expect(jsonpath("deliveryrecovery/retry-books", `{.status.counts.retried} {.status.counts.delivered}`)).To(Equal("1 1"))

		By("a Replay of the event to the endpoint: recognised again")
		apply(fmt.Sprintf(`apiVersion: hookkeeper.dev/v1alpha1
kind: DeliveryRecovery
metadata:
  name: replay-books
  namespace: %s
spec:
  endpointRef:
    name: books
  action: Replay
  replay:
    since: %q
    eventTypes: ["invoice.*"]
`, ns, since.Format(time.RFC3339)))
		kubectlWait("deliveryrecovery/replay-books", "--for=condition=Complete", 30*time.Second)
		Expect(jsonpath("deliveryrecovery/replay-books", `{.status.counts.replayed} {.status.counts.delivered}`)).To(Equal("1 1"))

		got = received()
		Expect(got).To(HaveLen(4))
		deliveries := map[string]bool{}
		for i, s := range got {
			Expect(s.res.Err).NotTo(HaveOccurred(), "request %d", i)
			Expect(s.res.WebhookID).To(Equal(event))
			Expect(s.res.Duplicate).To(Equal(i > 0), "request %d", i)
			deliveries[s.delivery] = true
		}
		Expect(deliveries).To(HaveLen(3), "the first delivery's two attempts, the Retry's and the Replay's deliveries")
		Expect(rows(event)).To(Equal(1), "one effect for four copies")

		By("the record kept until its replay-until, pruned after it")
		ctx := context.Background()
		rec, found, err := r.Lookup(ctx, event)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue())
		Expect(rec.ReplayUntil).To(BeTemporally(">", time.Now()))
		n, err := r.Prune(ctx, rec.ReplayUntil)
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(BeZero(), "kept until its replay-until")
		n, err = r.Prune(ctx, rec.ReplayUntil.Add(time.Millisecond))
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(int64(1)))
		_, found, err = r.Lookup(ctx, event)
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeFalse(), "gone after its replay-until")
		Expect(rows(event)).To(Equal(1), "the effect stays; only the de-duplication record goes")

		By("every attempt carried Hookkeeper-Replay-Until, and the record kept the latest")
		var latest time.Time
		for i, s := range got {
			Expect(s.replayUntil).NotTo(BeEmpty(), "request %d carries no %s: the manager must send it on every attempt (issue 25)", i, hkreceiver.ReplayUntilHeader)
			t, err := time.Parse(time.RFC3339, s.replayUntil)
			Expect(err).NotTo(HaveOccurred(), "request %d: %s %q", i, hkreceiver.ReplayUntilHeader, s.replayUntil)
			Expect(t.Location()).To(Equal(time.UTC))
			// hookkeeper keeps the event replayable for its replay window
			// (1h in the policy) after the publish at least.
			Expect(t).To(BeTemporally(">=", since.Add(time.Hour)))
			if t.After(latest) {
				latest = t
			}
		}
		Expect(rec.ReplayUntil).To(BeTemporally("~", latest, time.Millisecond), "the record kept the latest replay-until")
	})
})
