package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// The Quota group: ledger.Quotas, each namespace's publish quota, checked
// and counted in the transaction that inserts its events. A refused
// publish inserts nothing and counts only as refused; a duplicate of an
// accepted one is neither refused nor counted; pruning gives back the
// payload bytes; concurrent writers never accept more than the quota.

func exerciseQuotas(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"RateHoldsWithinABatchAndAcrossBatches": testQuotaRate,
		"EventsPerDayResetsAtUTCMidnight":       testQuotaEventsPerDay,
		"PayloadBytesGivenBackByPrune":          testQuotaPayloadBytes,
		"DuplicatesNeitherRefusedNorCounted":    testQuotaDuplicates,
		"SetStartsFromTheLedgerAndKeepsUsage":   testQuotaSet,
		"OtherNamespacesUnlimited":              testQuotaOtherNamespaces,
		"ConcurrentWritersNeverExceed":          testQuotaConcurrent,
	})
}

func (f *fixture) setQuota(ns string, h ledger.QuotaHard, now time.Time) ledger.NamespaceQuota {
	f.t.Helper()
	q, err := f.s.QuotaSet(f.ctx, &ledger.QuotaSetParams{Namespace: ns, Hard: h, Now: now})
	if err != nil {
		f.t.Fatalf("QuotaSet(%s): %v", ns, err)
	}
	return q
}

func (f *fixture) quota(ns string, now time.Time) ledger.NamespaceQuota {
	f.t.Helper()
	q, err := f.s.QuotaGet(f.ctx, ns, now)
	if err != nil {
		f.t.Fatalf("QuotaGet(%s): %v", ns, err)
	}
	return q
}

// events returns n insert params of ns at now.
func events(n int, ns string, now time.Time) []*ledger.EventInsertParams {
	out := make([]*ledger.EventInsertParams, n)
	for i := range out {
		out[i] = event(ns, "order.created", now)
	}
	return out
}

// quotaOutcome counts a batch's results: accepted, and refused by which
// limit (other errors fail the test).
func (f *fixture) quotaOutcome(res []ledger.EventInsertResult) (accepted int, refused map[ledger.QuotaLimit]int, errs []*ledger.QuotaError) {
	f.t.Helper()
	refused = map[ledger.QuotaLimit]int{}
	for i, r := range res {
		if r.Err == nil {
			accepted++
			continue
		}
		qe, ok := errors.AsType[*ledger.QuotaError](r.Err)
		if !ok || !errors.Is(r.Err, ledger.ErrQuotaExceeded) {
			f.t.Fatalf("item %d: err = %v, want a *ledger.QuotaError", i, r.Err)
		}
		refused[qe.Limit]++
		errs = append(errs, qe)
	}
	return accepted, refused, errs
}

func testQuotaRate(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "order.*"), t0)
	f.setQuota("a", ledger.QuotaHard{PublishesPerSecond: 10}, t0)
	acc, ref, errs := f.quotaOutcome(f.insert(events(30, "a", at(0))...))
	if acc != 10 || ref[ledger.QuotaPublishesPerSecond] != 20 {
		t.Fatalf("first batch: %d accepted, refused %v; want 10 accepted, 20 refused for the rate", acc, ref)
	}
	if qe := errs[0]; qe.Namespace != "a" || qe.Hard != 10 || qe.RetryAfter <= 0 || qe.RetryAfter > 100*time.Millisecond {
		t.Errorf("refusal = %+v, want namespace a, hard 10, retry after one interval (100ms)", qe)
	}
	// Half a second later, half a second's worth.
	if acc, _, _ := f.quotaOutcome(f.insert(events(10, "a", at(500*time.Millisecond))...)); acc != 5 {
		t.Errorf("after 500ms: %d accepted, want 5", acc)
	}
	// Ten seconds at ten times the rate: what was left of the burst (5),
	// then one per interval (99), whatever was offered.
	total := 0
	for i := range 100 {
		now := at(time.Second + time.Duration(i)*100*time.Millisecond)
		a, _, _ := f.quotaOutcome(f.insert(events(10, "a", now)...))
		total += a
	}
	if total != 104 {
		t.Errorf("10 s at 100/s against 10/s: %d accepted, want 104", total)
	}
	q := f.quota("a", at(11*time.Second))
	if q.Used.EventsToday != int64(15+total) || q.Used.RefusedToday != int64(20+5+1000-total) {
		t.Errorf("used = %+v, want %d events and %d refused today", q.Used, 15+total, 20+5+1000-total)
	}
}

func testQuotaEventsPerDay(t *testing.T, f *fixture) {
	f.setQuota("a", ledger.QuotaHard{EventsPerDay: 3}, t0)
	batch := events(5, "a", at(0))
	acc, ref, errs := f.quotaOutcome(f.insert(batch...))
	if acc != 3 || ref[ledger.QuotaEventsPerDay] != 2 {
		t.Fatalf("%d accepted, refused %v; want 3 and 2 for events per day", acc, ref)
	}
	midnight := time.Date(2030, time.March, 5, 0, 0, 0, 0, time.UTC)
	if got := errs[0].RetryAfter; got != midnight.Sub(t0) {
		t.Errorf("retry after %s, want %s (UTC midnight)", got, midnight.Sub(t0))
	}
	if q := f.quota("a", at(time.Hour)); q.Used.EventsToday != 3 || q.Used.RefusedToday != 2 {
		t.Errorf("used = %+v, want 3 events and 2 refused", q.Used)
	}
	// A refused event was not inserted.
	if _, err := f.s.EventGet(f.ctx, batch[4].ID); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("EventGet of a refused event: %v, want ErrNotFound", err)
	}
	if q := f.quota("a", midnight); q.Used.EventsToday != 0 || q.Used.RefusedToday != 0 {
		t.Errorf("used at midnight = %+v, want the day's counters at 0", q.Used)
	}
	if acc, _, _ := f.quotaOutcome(f.insert(events(4, "a", midnight)...)); acc != 3 {
		t.Errorf("next day: %d accepted, want 3", acc)
	}
}

func testQuotaPayloadBytes(t *testing.T, f *fixture) {
	one := events(1, "a", at(0))[0].QuotaBytes()
	f.setQuota("a", ledger.QuotaHard{PayloadBytesRetained: 2*one + one/2}, t0)
	acc, ref, errs := f.quotaOutcome(f.insert(events(3, "a", at(0))...))
	if acc != 2 || ref[ledger.QuotaPayloadBytesRetained] != 1 {
		t.Fatalf("%d accepted, refused %v; want 2 and 1 for payload bytes", acc, ref)
	}
	if errs[0].Used != 2*one || errs[0].RetryAfter != ledger.QuotaBytesRetryAfter {
		t.Errorf("refusal = %+v, want %d bytes used, retry after %s", errs[0], 2*one, ledger.QuotaBytesRetryAfter)
	}
	// The namespace has no endpoint: its events are undelivered, and their
	// payloads go after the default payload retention.
	res, err := f.s.Prune(f.ctx, &ledger.PruneParams{Now: at(2 * time.Hour), DefaultPayloadRetention: time.Hour,
		DefaultEvidenceRetention: 24 * time.Hour})
	if err != nil || res.PayloadsPruned != 2 {
		t.Fatalf("Prune = %+v, %v; want 2 payloads pruned", res, err)
	}
	if q := f.quota("a", at(2*time.Hour)); q.Used.PayloadBytesRetained != 0 {
		t.Errorf("retained after the prune = %d, want 0", q.Used.PayloadBytesRetained)
	}
	if acc, _, _ := f.quotaOutcome(f.insert(events(2, "a", at(2*time.Hour))...)); acc != 2 {
		t.Errorf("after the prune: %d accepted, want 2", acc)
	}
	// Deleting an event whose payload is still there gives its bytes back
	// too (evidence before payloads).
	res, err = f.s.Prune(f.ctx, &ledger.PruneParams{Now: at(4 * time.Hour), DefaultPayloadRetention: time.Hour,
		DefaultEvidenceRetention: time.Hour})
	if err != nil || res.EventsDeleted != 4 {
		t.Fatalf("Prune = %+v, %v; want 4 events deleted", res, err)
	}
	if q := f.quota("a", at(4*time.Hour)); q.Used.PayloadBytesRetained != 0 {
		t.Errorf("retained after deleting = %d, want 0", q.Used.PayloadBytesRetained)
	}
}

func testQuotaDuplicates(t *testing.T, f *fixture) {
	f.upsert(endpoint("a", "ep", "order.*"), t0)
	f.setQuota("a", ledger.QuotaHard{EventsPerDay: 1}, t0)
	p := event("a", "order.created", at(0))
	p.IdempotencyKey = "k1"
	first := f.insert(p)[0]
	if first.Err != nil {
		t.Fatalf("first publish: %v", first.Err)
	}
	again := *p
	again.ID = ledger.NewID("evt", at(time.Second))
	again.Now = at(time.Second)
	// The retry comes in a batch with a new event, which the quota refuses.
	res := f.insert(&again, event("a", "order.created", at(time.Second)))
	if res[0].Err != nil || !res[0].Duplicate || res[0].Event.ID != first.Event.ID {
		t.Errorf("retry = %+v, want the original, as a duplicate", res[0])
	}
	if !errors.Is(res[1].Err, ledger.ErrQuotaExceeded) {
		t.Errorf("new event: err = %v, want a quota refusal", res[1].Err)
	}
	if q := f.quota("a", at(time.Second)); q.Used.EventsToday != 1 || q.Used.RefusedToday != 1 {
		t.Errorf("used = %+v, want 1 event and 1 refused", q.Used)
	}
}

func testQuotaSet(t *testing.T, f *fixture) {
	if _, err := f.s.QuotaGet(f.ctx, "a", t0); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("QuotaGet of no quota: %v, want ErrNotFound", err)
	}
	yesterday := event("a", "order.created", at(-6*time.Hour))
	today := events(2, "a", at(0))
	f.insert(append(today, yesterday)...)
	bytes := yesterday.QuotaBytes() + today[0].QuotaBytes() + today[1].QuotaBytes()
	q := f.setQuota("a", ledger.QuotaHard{EventsPerDay: 10, PublishesPerSecond: 5, PublishBurst: 2}, at(time.Minute))
	if q.Namespace != "a" || q.Used.EventsToday != 2 || q.Used.PayloadBytesRetained != bytes || q.Hard.PublishBurst != 2 {
		t.Errorf("new quota = %+v, want 2 events today and %d bytes retained", q, bytes)
	}
	f.publish("a", "order.created", at(2*time.Minute))
	q = f.setQuota("a", ledger.QuotaHard{EventsPerDay: 20}, at(3*time.Minute))
	if q.Hard.EventsPerDay != 20 || q.Hard.PublishesPerSecond != 0 || q.Used.EventsToday != 3 {
		t.Errorf("replaced quota = %+v, want the new limits and 3 events today", q)
	}
	if !q.UpdatedAt.Equal(at(3 * time.Minute)) {
		t.Errorf("UpdatedAt = %s, want %s", q.UpdatedAt, at(3*time.Minute))
	}
	if err := f.s.QuotaDelete(f.ctx, "a"); err != nil {
		t.Fatalf("QuotaDelete: %v", err)
	}
	if err := f.s.QuotaDelete(f.ctx, "a"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("QuotaDelete again: %v, want ErrNotFound", err)
	}
	if _, err := f.s.QuotaSet(f.ctx, &ledger.QuotaSetParams{Namespace: "a", Hard: ledger.QuotaHard{EventsPerDay: -1}, Now: t0}); err == nil {
		t.Errorf("QuotaSet of a negative limit succeeded")
	}
}

func testQuotaOtherNamespaces(t *testing.T, f *fixture) {
	f.setQuota("a", ledger.QuotaHard{EventsPerDay: 1}, t0)
	batch := append(events(3, "a", at(0)), events(3, "b", at(0))...)
	res := f.insert(batch...)
	for i, r := range res {
		if refused := r.Err != nil; refused != (i == 1 || i == 2) {
			t.Errorf("item %d (namespace %s): err = %v", i, batch[i].Namespace, r.Err)
		}
	}
	if _, err := f.s.QuotaGet(f.ctx, "b", t0); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("namespace b has a quota: %v", err)
	}
}

// testQuotaConcurrent: writers on their own connections (PostgreSQL)
// publish at once, in batches; exactly the quota is accepted.
func testQuotaConcurrent(t *testing.T, f *fixture) {
	const quota, writers, batches, size = 50, 4, 10, 5
	f.upsert(endpoint("a", "ep", "order.*"), t0)
	f.setQuota("a", ledger.QuotaHard{EventsPerDay: quota}, t0)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted int
		errs     []error
	)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				res, err := f.s.EventInsertMany(f.ctx, events(size, "a", at(time.Duration(w*batches+b)*time.Millisecond)))
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, r := range res {
					switch {
					case r.Err == nil:
						accepted++
					case !errors.Is(r.Err, ledger.ErrQuotaExceeded):
						errs = append(errs, fmt.Errorf("item: %w", r.Err))
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errors.Join(errs...))
	}
	if accepted != quota {
		t.Errorf("%d accepted, want exactly %d", accepted, quota)
	}
	q := f.quota("a", at(time.Second))
	if q.Used.EventsToday != quota || q.Used.RefusedToday != writers*batches*size-quota {
		t.Errorf("used = %+v, want %d events and %d refused", q.Used, quota, writers*batches*size-quota)
	}
}
