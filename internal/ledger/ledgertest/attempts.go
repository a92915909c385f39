package ledgertest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func exerciseAttempts(t *testing.T, newStore func(t *testing.T) ledger.Store) {
	subtests(t, newStore, map[string]func(t *testing.T, f *fixture){
		"RecordWithTheLeasesCopyIsRecordWithout": func(t *testing.T, f *fixture) {
			// AttemptRecordParams.Leased is a hint: a record that brings
			// its lease's copy gives what one without it gives, whether
			// the copy is the row, is stale (the row moved since), or is
			// of a lease that ran out and another owner claimed.
			f.upsert(endpoint("shop", "all", "*"), t0)
			f.insert(event("shop", "order.created", t0))
			f.insert(event("shop", "order.created", t0))
			f.insert(event("shop", "order.created", t0))
			claimed := f.claim("w", t0, time.Minute, 10)
			if len(claimed) != 3 {
				t.Fatalf("claimed %d deliveries, want 3", len(claimed))
			}
			fresh, stale, lost := claimed[0], claimed[1], claimed[2]

			p := attempt(fresh.Delivery.ID, "w", at(time.Second), 204, ledger.Next{State: ledger.StateDelivered})
			p.Leased = &fresh
			got := f.mustRecord(p)
			wantEqual(t, "recorded from a fresh copy, as stored", f.delivery(fresh.Delivery.ID), got)
			if got.State != ledger.StateDelivered || got.Attempts != 1 {
				t.Fatalf("recorded from a fresh copy: state %s after %d attempts, want delivered after 1", got.State, got.Attempts)
			}

			// The first attempt fails and schedules a retry; the second is
			// recorded with the first claim's copy, which still says no
			// attempt was made.
			retry := ledger.Next{State: ledger.StateScheduled, DueAt: at(2 * time.Second)}
			f.mustRecord(attempt(stale.Delivery.ID, "w", at(time.Second), 500, retry))
			again := f.claimOne("w", at(3*time.Second))
			if again.Delivery.ID != stale.Delivery.ID {
				t.Fatalf("claimed %s, want the retry of %s", again.Delivery.ID, stale.Delivery.ID)
			}
			p = attempt(stale.Delivery.ID, "w", at(4*time.Second), 204, ledger.Next{State: ledger.StateDelivered})
			p.Leased = &stale
			got = f.mustRecord(p)
			wantEqual(t, "recorded from a stale copy, as stored", f.delivery(stale.Delivery.ID), got)
			if got.Attempts != 2 || got.FirstAttemptAt == nil || !got.FirstAttemptAt.Equal(at(time.Second).Add(-100*time.Millisecond)) {
				t.Fatalf("recorded from a stale copy: %d attempts, first at %v; want 2, the first at %v",
					got.Attempts, got.FirstAttemptAt, at(time.Second).Add(-100*time.Millisecond))
			}

			// w's lease runs out and v claims the delivery: w's copy
			// names w, and its record loses.
			if c := f.claimOne("v", at(2*time.Minute)); c.Delivery.ID != lost.Delivery.ID {
				t.Fatalf("v claimed %s, want %s", c.Delivery.ID, lost.Delivery.ID)
			}
			p = attempt(lost.Delivery.ID, "w", at(2*time.Minute+time.Second), 204, ledger.Next{State: ledger.StateDelivered})
			p.Leased = &lost
			wantErr(t, "record from the copy of a lost lease", f.record(p).Err, ledger.ErrLeaseLost)
			if d := f.delivery(lost.Delivery.ID); d.State != ledger.StateInFlight || d.LeaseOwner != "v" || d.Attempts != 0 {
				t.Fatalf("after the lost record the delivery is %s, leased to %q after %d attempts; want in flight to v, none",
					d.State, d.LeaseOwner, d.Attempts)
			}
			f.wantCounts("shop/all", counts{InFlight: 1, Delivered: 2})
		},
		"WriteManyIsRecordThenInsertInOneCommit": func(t *testing.T, f *fixture) {
			// One batch records an attempt (and a stale one that fails
			// alone) and ingests a new event, a duplicate and a conflict:
			// each item gets what AttemptRecordMany then EventInsertMany
			// would give it, and the counters move by both.
			f.upsert(endpoint("shop", "all", "*"), t0)
			first := event("shop", "order.created", t0)
			first.IdempotencyKey = "k1"
			orig := f.insert(first)[0]
			c := f.claimOne("w", t0)
			fresh := event("shop", "order.created", at(time.Second))
			fresh.LeaseTo = &ledger.Lease{Owner: "w", Until: at(time.Minute)}
			dup := event("shop", "order.created", at(time.Second))
			dup.ID, dup.Data, dup.BodyHash, dup.IdempotencyKey = first.ID, first.Data, first.BodyHash, "k1"
			conflict := event("shop", "order.created", at(time.Second))
			conflict.IdempotencyKey = "k1"
			res, err := f.s.WriteMany(f.ctx, &ledger.WriteBatch{
				Attempts: []*ledger.AttemptRecordParams{
					attempt(c.Delivery.ID, "w", at(time.Second), 204, ledger.Next{State: ledger.StateDelivered}),
					attempt(c.Delivery.ID, "other", at(time.Second), 204, ledger.Next{State: ledger.StateDelivered}),
				},
				Events: []*ledger.EventInsertParams{fresh, dup, conflict},
			})
			if err != nil {
				t.Fatalf("WriteMany: %v", err)
			}
			if len(res.Attempts) != 2 || len(res.Events) != 3 {
				t.Fatalf("WriteMany: %d attempt and %d event results, want 2 and 3", len(res.Attempts), len(res.Events))
			}
			if res.Attempts[0].Err != nil || res.Attempts[0].Delivery.State != ledger.StateDelivered {
				t.Fatalf("recorded attempt: err %v, state %s", res.Attempts[0].Err, res.Attempts[0].Delivery.State)
			}
			wantEqual(t, "recorded delivery as stored", f.delivery(c.Delivery.ID), res.Attempts[0].Delivery)
			wantErr(t, "stale owner's attempt", res.Attempts[1].Err, ledger.ErrLeaseLost)
			if r := res.Events[0]; r.Err != nil || r.Duplicate || len(r.Leased) != 1 {
				t.Fatalf("new event: err %v duplicate %v leased %d", r.Err, r.Duplicate, len(r.Leased))
			}
			wantEqual(t, "new event's delivery as stored", f.delivery(res.Events[0].Deliveries[0].ID), res.Events[0].Deliveries[0])
			if r := res.Events[1]; !r.Duplicate || r.Event.ID != orig.Event.ID {
				t.Fatalf("duplicate: Duplicate %v, event %s, want %s", r.Duplicate, r.Event.ID, orig.Event.ID)
			}
			wantErr(t, "conflicting key", res.Events[2].Err, ledger.ErrIdempotencyConflict)
			f.wantCounts("shop/all", counts{InFlight: 1, Delivered: 1})
			if st := f.stats("shop/all"); st.LastSuccessAt == nil || !st.LastSuccessAt.Equal(at(time.Second)) {
				t.Fatalf("LastSuccessAt = %v, want %v", st.LastSuccessAt, at(time.Second))
			}
			if empty, err := f.s.WriteMany(f.ctx, &ledger.WriteBatch{}); err != nil || len(empty.Attempts)+len(empty.Events) != 0 {
				t.Fatalf("empty WriteMany: %+v, %v", empty, err)
			}
		},
		"RetryThenDelivered": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("w", t0)

			now1 := at(time.Second)
			p1 := attempt(id, "w", now1, 503, ledger.Next{State: ledger.StateScheduled, DueAt: at(time.Minute)})
			d := f.mustRecord(p1)
			want := ledger.Delivery{
				ID: id, EventID: d.EventID, EndpointID: "shop/all", State: ledger.StateScheduled,
				Attempts: 1, DueAt: at(time.Minute), FirstAttemptAt: ptr(p1.Attempt.StartedAt),
				LastStatus: 503, CreatedAt: t0,
			}
			wantEqual(t, "after a retryable failure", d, want)
			wantEqual(t, "DeliveryGet after a retryable failure", f.delivery(id), want)

			f.claimOne("w", at(time.Minute))
			now2 := at(time.Minute + time.Second)
			p2 := attempt(id, "w", now2, 204, ledger.Next{State: ledger.StateDelivered})
			d = f.mustRecord(p2)
			want.State, want.Attempts, want.LastStatus, want.TerminalAt = ledger.StateDelivered, 2, 204, ptr(now2)
			wantEqual(t, "after delivery", d, want)

			atts, err := f.s.AttemptList(f.ctx, id)
			if err != nil {
				t.Fatalf("AttemptList: %v", err)
			}
			a1, a2 := p1.Attempt, p2.Attempt
			a1.Number, a2.Number = 1, 2
			wantEqual(t, "attempts", atts, []ledger.Attempt{a1, a2})
		},
		"AwaitingAck": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("w", t0)
			d := f.mustRecord(attempt(id, "w", at(time.Second), 202, ledger.Next{State: ledger.StateAwaitingAck, AckDeadline: at(time.Hour)}))
			if d.State != ledger.StateAwaitingAck || d.AckDeadline == nil || !d.AckDeadline.Equal(at(time.Hour)) ||
				d.TerminalAt != nil || d.LeaseOwner != "" || d.LeaseUntil != nil || d.Attempts != 1 {
				t.Fatalf("awaiting ack: %+v", d)
			}
			if got := f.claim("x", at(2*time.Hour), time.Minute, 10); len(got) != 0 {
				t.Fatalf("claimed a delivery awaiting its acknowledgement: %v", claimedIDs(got))
			}
			st := f.stats("shop/all")
			if st.LastSuccessAt != nil || st.LastFailureAt != nil {
				t.Fatalf("an accepted, unacknowledged attempt is neither success nor failure: %+v", st)
			}
		},
		"Exhausted": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("w", t0)
			now := at(time.Second)
			p := attempt(id, "w", now, 0, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts})
			p.Attempt.Error = "dial tcp: connection refused"
			res := f.record(p)
			if res.Err != nil || res.DeadLetter != nil {
				t.Fatalf("exhaust without a dead-letter endpoint: err %v dead letter %v", res.Err, res.DeadLetter)
			}
			d := res.Delivery
			if d.State != ledger.StateExhausted || d.ExhaustReason != ledger.ExhaustMaxAttempts ||
				d.Resolution != ledger.ResolutionUnresolved || d.TerminalAt == nil || !d.TerminalAt.Equal(now) ||
				d.LastError != "dial tcp: connection refused" || d.LastStatus != 0 || d.Attempts != 1 {
				t.Fatalf("exhausted delivery: %+v", d)
			}
			got := f.list(ledger.DeliveryBrowseParams{Resolution: ledger.ResolutionUnresolved})
			wantEqual(t, "unresolved deliveries", idsOf(got), []string{id})
		},
		"WrongOwnerIsRefusedPerItem": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			a := f.publish("shop", "order.created", t0).Deliveries[0].ID
			b := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claim("w", t0, time.Minute, 2)
			now := at(time.Second)
			res, err := f.s.AttemptRecordMany(f.ctx, []*ledger.AttemptRecordParams{
				attempt(a, "intruder", now, 200, ledger.Next{State: ledger.StateDelivered}),
				attempt(b, "w", now, 200, ledger.Next{State: ledger.StateDelivered}),
				attempt("dlv_unknown", "w", now, 200, ledger.Next{State: ledger.StateDelivered}),
			})
			if err != nil {
				t.Fatalf("AttemptRecordMany: %v", err)
			}
			wantErr(t, "wrong owner", res[0].Err, ledger.ErrLeaseLost)
			if res[1].Err != nil || res[1].Delivery.State != ledger.StateDelivered {
				t.Fatalf("item after a refused one: err %v state %s", res[1].Err, res[1].Delivery.State)
			}
			wantErr(t, "unknown delivery", res[2].Err, ledger.ErrNotFound)
			if d := f.delivery(a); d.State != ledger.StateInFlight || d.Attempts != 0 || d.LeaseOwner != "w" {
				t.Fatalf("refused item changed its delivery: %+v", d)
			}
			if atts, err := f.s.AttemptList(f.ctx, a); err != nil || len(atts) != 0 {
				t.Fatalf("refused item recorded attempts: %v, %v", atts, err)
			}
			f.wantCounts("shop/all", counts{InFlight: 1, Delivered: 1})
		},
		"ReclaimedLeaseIsNeverDoubleCounted": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("slow", t0)
			f.claim("fast", at(time.Minute), time.Minute, 1)
			res := f.record(attempt(id, "slow", at(61*time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
			wantErr(t, "record after the lease was reclaimed", res.Err, ledger.ErrLeaseLost)
			d := f.mustRecord(attempt(id, "fast", at(62*time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
			if d.Attempts != 1 {
				t.Fatalf("attempts = %d, want 1", d.Attempts)
			}
			atts, err := f.s.AttemptList(f.ctx, id)
			if err != nil || len(atts) != 1 || atts[0].Number != 1 {
				t.Fatalf("AttemptList = %+v, %v; want one attempt numbered 1", atts, err)
			}
			f.wantCounts("shop/all", counts{Delivered: 1})
		},
		"SameDeliveryTwiceInOneBatch": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("w", t0)
			now := at(time.Second)
			res, err := f.s.AttemptRecordMany(f.ctx, []*ledger.AttemptRecordParams{
				attempt(id, "w", now, 503, ledger.Next{State: ledger.StateScheduled, DueAt: now}),
				attempt(id, "w", now, 200, ledger.Next{State: ledger.StateDelivered}),
			})
			if err != nil {
				t.Fatalf("AttemptRecordMany: %v", err)
			}
			if res[0].Err != nil {
				t.Fatalf("first item: %v", res[0].Err)
			}
			wantErr(t, "second item for the same lease", res[1].Err, ledger.ErrLeaseLost)
			if d := f.delivery(id); d.State != ledger.StateScheduled || d.Attempts != 1 {
				t.Fatalf("delivery after the batch: state %s attempts %d", d.State, d.Attempts)
			}
		},
		"InvalidNextChangesNothing": func(t *testing.T, f *fixture) {
			f.upsert(endpoint("shop", "all", "*"), t0)
			id := f.publish("shop", "order.created", t0).Deliveries[0].ID
			f.claimOne("w", t0)
			for _, next := range []ledger.Next{
				{State: ledger.StateInFlight},
				{State: ledger.StateCancelled},
				{State: ledger.StateScheduled},                                     // no DueAt
				{State: ledger.StateAwaitingAck},                                   // no AckDeadline
				{State: ledger.StateExhausted},                                     // no Reason
				{State: "bogus", DueAt: at(time.Hour), AckDeadline: at(time.Hour)}, // unknown
			} {
				res := f.record(attempt(id, "w", at(time.Second), 200, next))
				if res.Err == nil {
					t.Fatalf("Next %+v accepted", next)
				}
			}
			if d := f.delivery(id); d.State != ledger.StateInFlight || d.Attempts != 0 || d.LeaseOwner != "w" {
				t.Fatalf("invalid transitions changed the delivery: %+v", d)
			}
			f.mustRecord(attempt(id, "w", at(time.Second), 200, ledger.Next{State: ledger.StateDelivered}))
		},
		"DeadLetter":                 testDeadLetter,
		"DeadLetterNeedsTheEndpoint": testDeadLetterMissing,
	})
}

// testDeadLetter exhausts a delivery of an endpoint with a dead-letter
// endpoint and checks the event and the single delivery it produces.
func testDeadLetter(t *testing.T, f *fixture) {
	src := endpoint("shop", "orders", "order.*")
	src.DeadLetter = "shop/dlq"
	src.Owner = "team-orders"
	f.upsert(src, t0)
	dlq := endpoint("shop", "dlq", "nothing.matches")
	dlq.Paused = true // paused dead-letter endpoints still get theirs
	dlq.DeadLetter = "shop/dlq"
	f.upsert(dlq, t0)
	f.upsert(endpoint("shop", "firehose", "*"), t0)
	f.upsert(endpoint("other", "dlq", "*"), t0)

	ev := f.publish("shop", "order.created", t0)
	id := deliveryTo(t, ev, src.ID)
	f.claim("w", t0, time.Minute, 10, "shop/firehose")
	now := at(time.Second)
	p := attempt(id, "w", now, 410, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustGone})
	p.Attempt.Error = "endpoint is gone"
	res := f.record(p)
	if res.Err != nil || res.DeadLetter == nil {
		t.Fatalf("exhaust with a dead-letter endpoint: err %v dead letter %v", res.Err, res.DeadLetter)
	}
	dl := *res.DeadLetter
	want := ledger.Delivery{ID: dl.ID, EventID: dl.EventID, EndpointID: "shop/dlq", State: ledger.StateScheduled, DueAt: now, CreatedAt: now}
	wantEqual(t, "dead-letter delivery", dl, want)
	wantEqual(t, "DeliveryGet of the dead-letter delivery", f.delivery(dl.ID), want)

	dlEvent, err := f.s.EventGet(f.ctx, dl.EventID)
	if err != nil {
		t.Fatalf("EventGet of the dead-letter event: %v", err)
	}
	if dlEvent.Type != ledger.DeadLetterEventType || dlEvent.Namespace != "shop" || !dlEvent.CreatedAt.Equal(now) ||
		len(dlEvent.Secrets) != 0 || dlEvent.IdempotencyKey != "" {
		t.Fatalf("dead-letter event: %+v", dlEvent)
	}
	var data ledger.DeadLetterData
	if err := json.Unmarshal(dlEvent.Data, &data); err != nil {
		t.Fatalf("dead-letter data %s: %v", dlEvent.Data, err)
	}
	wantEqual(t, "dead-letter data", data, ledger.DeadLetterData{
		DeliveryID: id, EventID: ev.Event.ID, EventType: "order.created", Endpoint: src.ID, Owner: "team-orders",
		Reason: ledger.ExhaustGone, Attempts: 1, LastStatus: 410, LastError: "endpoint is gone", ExhaustedAt: now,
	})
	// Exactly one delivery of it: not fanned out to subscribers of "*".
	wantEqual(t, "deliveries of the dead-letter event", f.list(ledger.DeliveryBrowseParams{EventID: dl.EventID}), []ledger.Delivery{want})
	f.wantCounts("shop/dlq", counts{Pending: 1})
	f.wantCounts("shop/firehose", counts{Pending: 1})

	// A dead letter is not dead-lettered again, even to itself.
	dlq.Paused = false
	f.upsert(dlq, now)
	wantEqual(t, "claimed after unpausing", claimedIDs(f.claim("w", now, time.Minute, 10, "shop/firehose")), []string{dl.ID})
	again := f.record(attempt(dl.ID, "w", at(2*time.Second), 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustMaxAttempts}))
	if again.Err != nil || again.DeadLetter != nil {
		t.Fatalf("exhausting a dead letter: err %v dead letter %v, want none", again.Err, again.DeadLetter)
	}
	f.wantCounts("shop/dlq", counts{ExhaustedUnresolved: 1})
}

// testDeadLetterMissing checks that no dead letter is produced when the
// named endpoint does not exist, was deleted, or is in another namespace.
func testDeadLetterMissing(t *testing.T, f *fixture) {
	for i, dlName := range []string{"shop/never", "shop/deleted", "other/dlq", ""} {
		src := endpoint("shop", "src", "*")
		src.DeadLetter = dlName
		f.upsert(src, t0)
		f.upsert(endpoint("shop", "deleted", "nothing"), t0)
		if _, err := f.s.EndpointDelete(f.ctx, &ledger.EndpointDeleteParams{ID: "shop/deleted", Now: t0}); err != nil {
			t.Fatalf("EndpointDelete: %v", err)
		}
		f.upsert(endpoint("other", "dlq", "nothing"), t0)
		now := at(time.Duration(i) * time.Minute)
		id := f.publish("shop", "order.created", now).Deliveries[0].ID
		f.claimOne("w", now)
		res := f.record(attempt(id, "w", now, 500, ledger.Next{State: ledger.StateExhausted, Reason: ledger.ExhaustNonRetryable}))
		if res.Err != nil || res.DeadLetter != nil {
			t.Fatalf("dead letter %q: err %v dead letter %+v, want none", dlName, res.Err, res.DeadLetter)
		}
	}
	if got := f.list(ledger.DeliveryBrowseParams{States: []ledger.DeliveryState{ledger.StateScheduled}}); len(got) != 0 {
		t.Fatalf("scheduled deliveries after exhausting without a dead-letter endpoint: %v", idsOf(got))
	}
}
