package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// fakeRecovery is a driver of one transaction: it reads rd, lists live,
// and records what RecoveryApply asks it to write.
type fakeRecovery struct {
	rd      RecoveryRead
	live    []NamespaceEndpoint
	readErr error

	ops       []string
	liveAsked []string
	written   []*RecoveryWrite
}

func (f *fakeRecovery) RecoveryTx(_ context.Context, op string, fn func(RecoveryStatements) error) error {
	f.ops = append(f.ops, op)
	if err := fn(f); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

func (f *fakeRecovery) RecoveryRead(context.Context, *RecoveryApplyParams) (RecoveryRead, error) {
	return f.rd, f.readErr
}

func (f *fakeRecovery) LiveEndpoints(_ context.Context, namespace string) ([]NamespaceEndpoint, error) {
	f.liveAsked = append(f.liveAsked, namespace)
	return f.live, nil
}

func (f *fakeRecovery) RecoveryWrite(_ context.Context, w *RecoveryWrite) error {
	f.written = append(f.written, w)
	return nil
}

func TestRecoveryApplyPlansTheRows(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ended := now.Add(-time.Hour)
	orig := Delivery{
		ID: "dlv_orig", EventID: "evt_orig", EndpointID: "ns/ep", State: StateExhausted,
		Resolution: ResolutionUnresolved, TerminalAt: &ended,
	}
	plain := Event{ID: "evt_orig", Namespace: "ns", Type: "order.paid", Data: json.RawMessage(`{"a":1}`), CreatedAt: ended}
	withSecrets := plain
	withSecrets.SecretNames, withSecrets.Secrets = []string{"token"}, sensitive.Bytes(`{"token":"x"}`)
	scrubbed := withSecrets
	scrubbed.Secrets = nil
	facts := func(e Event) RecoveryRead {
		return RecoveryRead{Found: true, Facts: RecoveryFacts{Delivery: orig, Event: e, ReplayFrom: ended}}
	}
	live := []NamespaceEndpoint{
		{ID: "ns/a", EventTypes: []string{ReissueRequestedEventType}},
		{ID: "ns/b", EventTypes: []string{"order.*"}},
		{ID: "ns/c", EventTypes: []string{"hookkeeper.*"}},
	}
	params := func(a RecoveryAction) *RecoveryApplyParams {
		return &RecoveryApplyParams{
			OperationKey: "drec:ns/r", DeliveryID: orig.ID, Action: a,
			NewEventID: "evt_new", NewDeliveryID: "dlv_new", Now: now,
		}
	}
	type want struct {
		outcome     RecoveryOutcome
		reason      string
		event       string // the new event's type, "" for none
		reissueOf   string
		deliveries  []string // endpoint of each new delivery
		retryOf     string
		resolution  Resolution
		request     bool
		askedLive   bool
		pendingOnEp int64
	}
	for _, tc := range []struct {
		name   string
		action RecoveryAction
		read   RecoveryRead
		live   []NamespaceEndpoint
		want   want
	}{
		{"retry", RecoveryRetry, facts(plain), live, want{
			outcome: OutcomeRetried, deliveries: []string{"ns/ep"}, retryOf: orig.ID, resolution: ResolutionRetried, pendingOnEp: 1,
		}},
		{"reissue of a complete event copies it", RecoveryReissue, facts(plain), live, want{
			outcome: OutcomeReissued, event: "order.paid", reissueOf: orig.EventID, deliveries: []string{"ns/ep"},
			resolution: ResolutionReissued, pendingOnEp: 1,
		}},
		{"reissue of an event with secrets asks its subscribers", RecoveryReissue, facts(withSecrets), live, want{
			outcome: OutcomeAwaitingReissue, event: ReissueRequestedEventType, deliveries: []string{"ns/a", "ns/c"},
			request: true, askedLive: true,
		}},
		{"reissue request without a subscriber is refused", RecoveryReissue, facts(withSecrets), live[1:2], want{
			outcome: OutcomeRefused, reason: RefusedNoReissueHandler, askedLive: true,
		}},
		{"dismiss", RecoveryDismiss, facts(plain), live, want{outcome: OutcomeDismissed, resolution: ResolutionDismissed}},
		{"a refusal of the plan is recorded", RecoveryRetry, facts(scrubbed), live, want{
			outcome: OutcomeRefused, reason: RefusedReissueRequired,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRecovery{rd: tc.read, live: tc.live}
			item, err := RecoveryApply(context.Background(), f, params(tc.action))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.written) != 1 {
				t.Fatalf("%d writes, want 1", len(f.written))
			}
			w, wt := f.written[0], tc.want
			if item != w.Item {
				t.Errorf("returned %+v, wrote %+v", item, w.Item)
			}
			if item.Outcome != wt.outcome || item.Reason != wt.reason || item.OperationKey != "drec:ns/r" ||
				item.DeliveryID != orig.ID || item.EventID != orig.EventID || !item.CreatedAt.Equal(now) || item.Replayed {
				t.Errorf("item %+v, want outcome %s reason %q", item, wt.outcome, wt.reason)
			}
			if w.Original.ID != orig.ID || !w.Now.Equal(now) {
				t.Errorf("write of %s at %v", w.Original.ID, w.Now)
			}
			switch {
			case wt.event == "" && w.Event != nil:
				t.Errorf("new event %+v, want none", w.Event)
			case wt.event != "" && (w.Event == nil || w.Event.Type != wt.event || w.Event.ID != "evt_new" ||
				w.Event.ReissueOf != wt.reissueOf || w.Event.Namespace != "ns" || len(w.Event.Secrets) != 0):
				t.Errorf("new event %+v, want type %s reissuing %q", w.Event, wt.event, wt.reissueOf)
			}
			var endpoints []string
			for _, d := range w.Deliveries {
				endpoints = append(endpoints, d.EndpointID)
				if d.State != StateScheduled || !d.DueAt.Equal(now) || d.RetryOf != wt.retryOf || d.ID == "" {
					t.Errorf("new delivery %+v", d)
				}
				if wt.event != "" && d.EventID != "evt_new" || wt.event == "" && d.EventID != orig.EventID {
					t.Errorf("new delivery %s of event %s", d.ID, d.EventID)
				}
			}
			if !slices.Equal(endpoints, wt.deliveries) {
				t.Errorf("new deliveries to %v, want %v", endpoints, wt.deliveries)
			}
			if len(w.Deliveries) == 1 && item.NewDeliveryID != "dlv_new" {
				t.Errorf("item's new delivery %q, want the caller's dlv_new", item.NewDeliveryID)
			}
			if (w.RequestEventID != "") != wt.request || (wt.request && item.NewEventID != w.RequestEventID) {
				t.Errorf("request event %q, item's new event %q", w.RequestEventID, item.NewEventID)
			}
			if w.Resolution != wt.resolution {
				t.Errorf("resolution %q, want %q", w.Resolution, wt.resolution)
			}
			if (len(f.liveAsked) > 0) != wt.askedLive {
				t.Errorf("live endpoints read %v times, want %v", f.liveAsked, wt.askedLive)
			}
			// The stats: the new deliveries pending, the original leaving
			// exhausted-unresolved when it is resolved.
			var ep StatsChange
			if c := w.Stats["ns/ep"]; c != nil {
				ep = *c
			}
			wantGone := int64(0)
			if wt.resolution != ResolutionNone {
				wantGone = -1
			}
			if ep.Counts[CounterPending] != wt.pendingOnEp || ep.Counts[CounterExhaustedUnresolved] != wantGone {
				t.Errorf("stats of ns/ep %+v, want pending %d, exhausted-unresolved %d", ep.Counts, wt.pendingOnEp, wantGone)
			}
			for _, h := range wt.deliveries {
				if h != "ns/ep" && (w.Stats[h] == nil || w.Stats[h].Counts[CounterPending] != 1) {
					t.Errorf("stats of handler %s: %+v", h, w.Stats[h])
				}
			}
		})
	}
}

func TestRecoveryApplyReplaysAndRefuses(t *testing.T) {
	ctx := context.Background()
	p := &RecoveryApplyParams{OperationKey: "drec:ns/r", DeliveryID: "dlv_1", Action: RecoveryRetry, Now: time.Unix(0, 0)}

	recorded := RecoveryItem{OperationKey: p.OperationKey, DeliveryID: p.DeliveryID, Outcome: OutcomeRetried}
	f := &fakeRecovery{rd: RecoveryRead{Recorded: &recorded, Found: true}}
	item, err := RecoveryApply(ctx, f, p)
	if err != nil || !item.Replayed || item.Outcome != OutcomeRetried || len(f.written) != 0 {
		t.Errorf("recorded item: %+v, %v, %d writes", item, err, len(f.written))
	}
	if len(f.ops) != 1 || f.ops[0] != "recovery drec:ns/r of delivery dlv_1" {
		t.Errorf("transactions %q", f.ops)
	}

	f = &fakeRecovery{}
	if _, err := RecoveryApply(ctx, f, p); !errors.Is(err, ErrNotFound) || len(f.written) != 0 {
		t.Errorf("unknown delivery: %v, %d writes", err, len(f.written))
	}

	deleted := &fakeRecovery{rd: RecoveryRead{Found: true, Facts: RecoveryFacts{
		Delivery:        Delivery{ID: "dlv_1", State: StateExhausted, Resolution: ResolutionUnresolved},
		EndpointDeleted: true,
	}}}
	if _, err := RecoveryApply(ctx, deleted, p); !errors.Is(err, ErrEndpointDeleted) || len(deleted.written) != 0 {
		t.Errorf("deleted endpoint: %v, %d writes", err, len(deleted.written))
	}

	boom := errors.New("boom")
	f = &fakeRecovery{readErr: boom}
	if _, err := RecoveryApply(ctx, f, p); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}

	f = &fakeRecovery{}
	if _, err := RecoveryApply(ctx, f, &RecoveryApplyParams{DeliveryID: "dlv_1"}); err == nil || len(f.ops) != 0 {
		t.Errorf("params without an operation: %v, %d transactions", err, len(f.ops))
	}
}

func TestReissueOriginalsAndReplacement(t *testing.T) {
	results := []EventInsertResult{
		{Event: Event{ID: "evt_dup", ReissueOf: "evt_a"}, Duplicate: true},
		{Event: Event{ID: "evt_err", ReissueOf: "evt_b"}, Err: ErrIdempotencyConflict},
		{Event: Event{ID: "evt_plain"}},
		{Event: Event{ID: "evt_r1", ReissueOf: "evt_a"}, Deliveries: []Delivery{{ID: "dlv_x", EndpointID: "ns/x"}, {ID: "dlv_y", EndpointID: "ns/y"}}},
		{Event: Event{ID: "evt_r2", ReissueOf: "evt_a"}},
		{Event: Event{ID: "evt_r3", ReissueOf: "evt_c"}},
	}
	if got := ReissueOriginals(results); !slices.Equal(got, []string{"evt_a", "evt_c"}) {
		t.Errorf("originals %v, want [evt_a evt_c]", got)
	}
	if got := ReissueOriginals(results[2:3]); got != nil {
		t.Errorf("originals of a batch without reissues %v, want nil", got)
	}
	for _, tc := range []struct {
		original, endpoint, event, delivery string
	}{
		{"evt_a", "ns/y", "evt_r1", "dlv_y"}, // the first replacement wins
		{"evt_a", "ns/z", "evt_r1", ""},      // it has no delivery to the endpoint
		{"evt_c", "ns/x", "evt_r3", ""},
		{"evt_b", "ns/x", "", ""}, // a failed insert replaces nothing
	} {
		e, d := Replacement(results, tc.original, tc.endpoint)
		got := ""
		if e != nil {
			got = e.ID
		}
		if got != tc.event || d != tc.delivery {
			t.Errorf("Replacement(%s, %s) = %s %q, want %s %q", tc.original, tc.endpoint, got, d, tc.event, tc.delivery)
		}
	}
}
