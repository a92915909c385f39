// Package ledgertest is the conformance suite that every ledger.Store
// implementation must pass, in the manner of river's riverdrivertest: one
// exported Exercise function, run by each driver's tests against fresh,
// empty stores, so that the embedded and the shared ledger cannot disagree
// on a rule of the contract.
//
// Every subtest gets its own store and runs in parallel. Time is pinned:
// every "now" comes from the params, starting at a fixed instant with
// microsecond precision (PostgreSQL's timestamp resolution); times are
// compared with time.Equal and JSON data in canonical form.
//
// Where the Store doc comments leave a detail open, the suite pins it, so
// that both drivers agree (the shared rules are in package ledger, mapped
// in its transitions.go; the Transition group checks that each store
// persists exactly what they compute):
//   - Every upsert increments Version, even an unchanged one; deleting and
//     recreating an endpoint continues its version count.
//   - A deleted endpoint is gone from EndpointGet, EndpointList and fan-out,
//     but its deliveries, attempts and EndpointStats stay readable; deletion
//     cancels awaiting_ack deliveries too, and cancelled deliveries get
//     TerminalAt = Now, no lease and no resolution.
//   - A delivery leaving in_flight loses its lease (LeaseOwner "", LeaseUntil
//     nil). FirstAttemptAt is the first attempt's StartedAt.
//   - Stats: an attempt whose Next is delivered sets LastSuccessAt = Now; one
//     whose Next is scheduled or exhausted sets LastFailureAt = Now and
//     LastFailureReason = ledger.FailureReason; awaiting_ack sets neither.
//   - An invalid Next (ledger.Next.Validate) fails its item, changing nothing.
//   - Unknown deliveries are ErrNotFound for AttemptRecordMany items,
//     DeliveryRelease and AttemptList (an existing delivery without attempts
//     lists none).
//   - A dead-letter target must exist, be undeleted and share the namespace;
//     it gets exactly one delivery whatever its EventTypes or Paused, and a
//     dead-letter event is never dead-lettered again (ledger.DeadLetters).
//   - The order of EventInsertResult.Deliveries is unspecified; claims order
//     by due time (ties unspecified).
//
// Left open: whether a holder whose lease expired but was not yet reclaimed
// may still record or release.
package ledgertest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// Exercise runs the conformance suite. newStore must return a fresh, empty,
// migrated store (its own database file or schema) on every call; it is
// called once per subtest, from parallel subtests, and should register the
// store's cleanup with t.Cleanup (Exercise does not close stores).
func Exercise(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	t.Helper()
	groups := []struct {
		name string
		run  func(t *testing.T, newStore func(t *testing.T) ledger.Store)
	}{
		{"Endpoint", exerciseEndpoints},
		{"Event", exerciseEvents},
		{"Claim", exerciseClaim},
		{"Attempt", exerciseAttempts},
		{"Stats", exerciseStats},
		{"Read", exerciseReads},
		{"Concurrency", exerciseConcurrency},
		{"Recovery", exerciseRecovery},
		{"Replay", exerciseReplay},
		{"Settlement", exerciseSettlement},
		{"HeldAcks", exerciseHeldAcks},
		{"Browse", exerciseBrowse},
		{"Transition", exerciseTransitions},
		{"Outcomes", exerciseOutcomes},
		{"Owner", exerciseOwner},
		{"Deferrals", exerciseDeferrals},
		{"Breakers", exerciseBreakers},
		{"Limits", exerciseLimits},
		{"Contract", exerciseContracts},
		{"Quota", exerciseQuotas},
		{"Snapshot", exerciseSnapshots},
		{"Trace", exerciseTrace},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			g.run(t, newStore)
		})
	}
}

// t0 is the pinned start of every subtest's clock. It has microsecond
// precision so that every driver stores it exactly.
var t0 = time.Date(2030, time.March, 4, 5, 6, 7, 123456000, time.UTC)

// at returns t0+d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// cmpOpts compares ledger values: times by instant, nil and empty slices
// alike. JSON data is canonicalized before comparing (see canon).
var cmpOpts = []cmp.Option{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }),
}

// fixture is one subtest's store with helpers that fail the test on error.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   ledger.Store
}

// subtests runs each case as a parallel subtest on its own fresh store.
func subtests(t *testing.T, newStore func(t *testing.T) ledger.Store, cases map[string]func(t *testing.T, f *fixture)) {
	t.Helper()
	names := make([]string, 0, len(cases))
	for name := range cases {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := cases[name]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, &fixture{t: t, ctx: t.Context(), s: newStore(t)})
		})
	}
}

// endpoint returns a minimal endpoint of namespace ns subscribed to types.
func endpoint(ns, name string, types ...string) ledger.Endpoint {
	return ledger.Endpoint{
		ID:         ledger.EndpointID(ns, name),
		Namespace:  ns,
		Name:       name,
		URL:        "https://receiver.example/" + name,
		EventTypes: types,
		Secrets:    []ledger.SigningSecret{{Value: sensitive.Bytes("whsec_" + name)}},
		AckMode:    ledger.AckResponse,
	}
}

// upsert stores ep at now and returns the stored endpoint.
func (f *fixture) upsert(ep ledger.Endpoint, now time.Time) ledger.Endpoint {
	f.t.Helper()
	got, err := f.s.EndpointUpsert(f.ctx, &ledger.EndpointUpsertParams{Endpoint: ep, Now: now})
	if err != nil {
		f.t.Fatalf("EndpointUpsert(%s): %v", ep.ID, err)
	}
	return got
}

// event returns insert params for an event of type typ in ns at now, with a
// fresh ID and a small JSON body.
func event(ns, typ string, now time.Time) *ledger.EventInsertParams {
	id := ledger.NewID("evt", now)
	data := json.RawMessage(`{"id":"` + id + `","amount":42}`)
	return &ledger.EventInsertParams{
		ID:        id,
		Namespace: ns,
		Type:      typ,
		Data:      data,
		BodyHash:  hash(data),
		Now:       now,
	}
}

// hash is a stand-in for the ingest API's body hash.
func hash(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}

// insert ingests params as one batch and fails on a batch error.
func (f *fixture) insert(params ...*ledger.EventInsertParams) []ledger.EventInsertResult {
	f.t.Helper()
	res, err := f.s.EventInsertMany(f.ctx, params)
	if err != nil {
		f.t.Fatalf("EventInsertMany: %v", err)
	}
	if len(res) != len(params) {
		f.t.Fatalf("EventInsertMany returned %d results for %d params", len(res), len(params))
	}
	return res
}

// publish ingests one event of type typ in ns at now, expecting success.
func (f *fixture) publish(ns, typ string, now time.Time) ledger.EventInsertResult {
	f.t.Helper()
	res := f.insert(event(ns, typ, now))[0]
	if res.Err != nil {
		f.t.Fatalf("EventInsertMany item: %v", res.Err)
	}
	return res
}

// claim leases up to limit deliveries to owner at now for leaseFor.
func (f *fixture) claim(owner string, now time.Time, leaseFor time.Duration, limit int, exclude ...string) []ledger.ClaimedDelivery {
	f.t.Helper()
	got, err := f.s.DeliveryClaim(f.ctx, &ledger.DeliveryClaimParams{
		Owner: owner, Now: now, LeaseFor: leaseFor, Limit: limit, ExcludeEndpoints: exclude,
	})
	if err != nil {
		f.t.Fatalf("DeliveryClaim: %v", err)
	}
	return got
}

// claimOne claims at now and expects exactly one delivery.
func (f *fixture) claimOne(owner string, now time.Time) ledger.ClaimedDelivery {
	f.t.Helper()
	got := f.claim(owner, now, time.Minute, 10)
	if len(got) != 1 {
		f.t.Fatalf("DeliveryClaim at %v claimed %d deliveries, want 1: %v", now, len(got), claimedIDs(got))
	}
	return got[0]
}

// record records one attempt and returns its result, failing on a batch
// error only.
func (f *fixture) record(p *ledger.AttemptRecordParams) ledger.AttemptRecordResult {
	f.t.Helper()
	res, err := f.s.AttemptRecordMany(f.ctx, []*ledger.AttemptRecordParams{p})
	if err != nil {
		f.t.Fatalf("AttemptRecordMany: %v", err)
	}
	if len(res) != 1 {
		f.t.Fatalf("AttemptRecordMany returned %d results for 1 param", len(res))
	}
	return res[0]
}

// attempt returns params recording an attempt of delivery id by owner that
// started at now-100ms, took 100ms, and got status; next is the transition.
func attempt(id, owner string, now time.Time, status int, next ledger.Next) *ledger.AttemptRecordParams {
	return &ledger.AttemptRecordParams{
		DeliveryID: id,
		Owner:      owner,
		Attempt: ledger.Attempt{
			DeliveryID:      id,
			StartedAt:       now.Add(-100 * time.Millisecond),
			Duration:        100 * time.Millisecond,
			StatusCode:      status,
			ResponseExcerpt: []byte(fmt.Sprintf(`{"status":%d}`, status)),
		},
		Next: next,
		Now:  now,
	}
}

// mustRecord records one attempt and fails on any error.
func (f *fixture) mustRecord(p *ledger.AttemptRecordParams) ledger.Delivery {
	f.t.Helper()
	res := f.record(p)
	if res.Err != nil {
		f.t.Fatalf("AttemptRecordMany item for %s: %v", p.DeliveryID, res.Err)
	}
	return res.Delivery
}

// delivery reads one delivery.
func (f *fixture) delivery(id string) ledger.Delivery {
	f.t.Helper()
	d, err := f.s.DeliveryGet(f.ctx, id)
	if err != nil {
		f.t.Fatalf("DeliveryGet(%s): %v", id, err)
	}
	return d
}

// list lists deliveries.
func (f *fixture) list(p ledger.DeliveryBrowseParams) []ledger.Delivery {
	f.t.Helper()
	views, err := f.s.DeliveryBrowse(f.ctx, &p)
	if err != nil {
		f.t.Fatalf("DeliveryBrowse(%+v): %v", p, err)
	}
	var got []ledger.Delivery
	for _, v := range views {
		got = append(got, v.Delivery)
	}
	return got
}

// stats reads an endpoint's counters, and checks that
// EndpointActivityList reads the same of it: so every check of counters in
// the suite checks both reads.
func (f *fixture) stats(id string) ledger.EndpointStats {
	f.t.Helper()
	st, err := f.s.EndpointStats(f.ctx, id)
	if err != nil {
		f.t.Fatalf("EndpointStats(%s): %v", id, err)
	}
	wantEqual(f.t, "EndpointActivityList's stats of "+id, f.activity(id).Stats, st)
	return st
}

// activity is EndpointActivityList's entry of an endpoint; it fails when
// there is none.
func (f *fixture) activity(id string) ledger.EndpointActivity {
	f.t.Helper()
	list, err := f.s.EndpointActivityList(f.ctx)
	if err != nil {
		f.t.Fatalf("EndpointActivityList: %v", err)
	}
	for _, a := range list {
		if a.Stats.EndpointID == id {
			return a
		}
	}
	f.t.Fatalf("EndpointActivityList has no entry of %s", id)
	return ledger.EndpointActivity{}
}

// counts are the counters of EndpointStats, without the last-outcome fields.
type counts struct {
	Pending, InFlight, AwaitingAck, Delivered, ExhaustedUnresolved, Cancelled int64
}

// wantCounts checks an endpoint's counters.
func (f *fixture) wantCounts(id string, want counts) {
	f.t.Helper()
	st := f.stats(id)
	got := counts{st.Pending, st.InFlight, st.AwaitingAck, st.Delivered, st.ExhaustedUnresolved, st.Cancelled}
	if got != want {
		f.t.Fatalf("EndpointStats(%s) counters = %+v, want %+v", id, got, want)
	}
}

// wantEqual fails with a diff when got and want differ.
func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpOpts...); diff != "" {
		t.Fatalf("%s mismatch (-want +got):\n%s", what, diff)
	}
}

// wantErr fails unless err matches target with errors.Is.
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v, want %v", what, err, target)
	}
}

// canon returns JSON in canonical form (keys sorted, no spaces), so that a
// driver that stores JSON as a parsed value compares equal.
func canon(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("invalid JSON %q: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// canonEvent returns e with canonical Data.
func canonEvent(t *testing.T, e ledger.Event) ledger.Event {
	t.Helper()
	e.Data = canon(t, e.Data)
	return e
}

// byID sorts deliveries by ID (returned copy).
func byID(ds []ledger.Delivery) []ledger.Delivery {
	out := slices.Clone(ds)
	slices.SortFunc(out, func(a, b ledger.Delivery) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// endpointsOf returns the sorted endpoint IDs of deliveries.
func endpointsOf(ds []ledger.Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.EndpointID)
	}
	sort.Strings(out)
	return out
}

// deliveryTo returns the ID of res's delivery to endpoint.
func deliveryTo(t *testing.T, res ledger.EventInsertResult, endpoint string) string {
	t.Helper()
	for _, d := range res.Deliveries {
		if d.EndpointID == endpoint {
			return d.ID
		}
	}
	t.Fatalf("event %s has no delivery to %s", res.Event.ID, endpoint)
	return ""
}

// idsOf returns the delivery IDs in order.
func idsOf(ds []ledger.Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// claimedIDs returns the IDs of claimed deliveries in order.
func claimedIDs(cs []ledger.ClaimedDelivery) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Delivery.ID)
	}
	return out
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
