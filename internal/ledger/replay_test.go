package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// fakeReplay is a driver of one replay transaction.
type fakeReplay struct {
	rd      ReplayRead
	live    []NamespaceEndpoint
	written []*RecoveryWrite
}

func (f *fakeReplay) ReplayTx(_ context.Context, op string, fn func(ReplayStatements) error) error {
	if err := fn(f); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

func (f *fakeReplay) ReplayRead(context.Context, *ReplayApplyParams) (ReplayRead, error) {
	return f.rd, nil
}

func (f *fakeReplay) LiveEndpoints(context.Context, string) ([]NamespaceEndpoint, error) {
	return f.live, nil
}

func (f *fakeReplay) RecoveryWrite(_ context.Context, w *RecoveryWrite) error {
	f.written = append(f.written, w)
	return nil
}

func TestReplayApplyPlansTheRows(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := Event{ID: "evt_1", Namespace: "ns", Type: "order.paid", Data: json.RawMessage(`{"a":1}`), CreatedAt: now.Add(-time.Hour)}
	exhausted := Delivery{ID: "dlv_old", EventID: "evt_1", EndpointID: "ns/ep", State: StateExhausted, Resolution: ResolutionUnresolved}
	facts := func(edit func(f *ReplayFacts)) ReplayRead {
		f := ReplayFacts{Event: ev, EndpointID: "ns/ep", Policy: Policy{ReplayWindow: 24 * time.Hour}, ReplayFrom: ev.CreatedAt}
		if edit != nil {
			edit(&f)
		}
		return ReplayRead{Found: true, Facts: f}
	}
	live := []NamespaceEndpoint{{ID: "ns/producer", EventTypes: []string{ReissueRequestedEventType}}}
	p := func(fb ReplayFallback) *ReplayApplyParams {
		return &ReplayApplyParams{OperationKey: "drec:ns/r", EventID: "evt_1", EndpointID: "ns/ep", OnUnreplayable: fb,
			NewEventID: "evt_new", NewDeliveryID: "dlv_new", Now: now}
	}
	for _, tc := range []struct {
		name       string
		fallback   ReplayFallback
		read       ReplayRead
		outcome    RecoveryOutcome
		reason     string
		deliveries []string // endpoint of each new delivery
		retryOf    string
		resolution Resolution
		replayed   string
		newEvent   string // type of the new event
	}{
		{name: "a new endpoint", fallback: ReplayRefuse, read: facts(nil), outcome: OutcomeReplayed,
			deliveries: []string{"ns/ep"}, replayed: "evt_1"},
		{name: "an exhausted delivery there is retried and resolved", fallback: ReplayRefuse,
			read: facts(func(f *ReplayFacts) { f.Unresolved = &exhausted }), outcome: OutcomeReplayed,
			deliveries: []string{"ns/ep"}, retryOf: "dlv_old", resolution: ResolutionRetried, replayed: "evt_1"},
		{name: "on its way", fallback: ReplayRefuse, read: facts(func(f *ReplayFacts) { f.Pending = true }),
			outcome: OutcomeSkipped, reason: SkippedAlreadyPending},
		{name: "scrubbed, refused", fallback: ReplayRefuse, read: facts(func(f *ReplayFacts) { f.Event.SecretNames = []string{"t"} }),
			outcome: OutcomeRefused, reason: RefusedReissueRequired},
		{name: "scrubbed, reissue requested", fallback: ReplayReissue,
			read:    facts(func(f *ReplayFacts) { f.Event.SecretNames = []string{"t"} }),
			outcome: OutcomeAwaitingReissue, deliveries: []string{"ns/producer"}, newEvent: ReissueRequestedEventType},
		{name: "past the window, copied and the exhausted one resolved", fallback: ReplayReissue,
			read: facts(func(f *ReplayFacts) {
				f.ReplayFrom, f.Unresolved = now.Add(-48*time.Hour), &exhausted
			}),
			outcome: OutcomeReissued, deliveries: []string{"ns/ep"}, resolution: ResolutionReissued, newEvent: "order.paid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReplay{rd: tc.read, live: live}
			item, err := ReplayApply(context.Background(), f, p(tc.fallback))
			if err != nil {
				t.Fatal(err)
			}
			if len(f.written) != 1 {
				t.Fatalf("%d writes, want 1", len(f.written))
			}
			w := f.written[0]
			if item != w.Item || item.Outcome != tc.outcome || item.Reason != tc.reason || item.Action != RecoveryReplay ||
				item.DeliveryID != "" || item.EventID != "evt_1" || w.ItemKey != "evt_1" || w.Original.EndpointID != "ns/ep" {
				t.Errorf("item %+v (written %+v, key %q), want outcome %s reason %q", item, w.Item, w.ItemKey, tc.outcome, tc.reason)
			}
			var endpoints []string
			for _, d := range w.Deliveries {
				endpoints = append(endpoints, d.EndpointID)
				if tc.newEvent == "" && (d.EventID != "evt_1" || d.RetryOf != tc.retryOf || d.ID != "dlv_new") {
					t.Errorf("new delivery %+v, want dlv_new of evt_1 retrying %q", d, tc.retryOf)
				}
			}
			if !slices.Equal(endpoints, tc.deliveries) {
				t.Errorf("new deliveries to %v, want %v", endpoints, tc.deliveries)
			}
			if w.Resolution != tc.resolution || w.ReplayedEvent != tc.replayed {
				t.Errorf("resolution %q, replayed event %q; want %q, %q", w.Resolution, w.ReplayedEvent, tc.resolution, tc.replayed)
			}
			if (w.Event == nil) != (tc.newEvent == "") || w.Event != nil && w.Event.Type != tc.newEvent {
				t.Errorf("new event %+v, want type %q", w.Event, tc.newEvent)
			}
			gone := int64(0)
			if tc.resolution != ResolutionNone {
				gone = -1
			}
			if c := w.Stats["ns/ep"]; gone != 0 && (c == nil || c.Counts[CounterExhaustedUnresolved] != gone) {
				t.Errorf("stats of ns/ep %+v, want exhausted-unresolved %d", c, gone)
			}
		})
	}

	recorded := RecoveryItem{OperationKey: "drec:ns/r", EventID: "evt_1", Action: RecoveryReplay, Outcome: OutcomeReplayed}
	f := &fakeReplay{rd: ReplayRead{Recorded: &recorded}}
	if item, err := ReplayApply(context.Background(), f, p(ReplayRefuse)); err != nil || !item.Replayed || len(f.written) != 0 {
		t.Errorf("recorded item: %+v, %v, %d writes", item, err, len(f.written))
	}
	f = &fakeReplay{}
	if _, err := ReplayApply(context.Background(), f, p(ReplayRefuse)); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown event: %v", err)
	}
	f = &fakeReplay{rd: facts(func(f *ReplayFacts) { f.EndpointDeleted = true })}
	if _, err := ReplayApply(context.Background(), f, p(ReplayRefuse)); !errors.Is(err, ErrEndpointDeleted) || len(f.written) != 0 {
		t.Errorf("deleted endpoint: %v, %d writes", err, len(f.written))
	}
	if _, err := ReplayApply(context.Background(), f, &ReplayApplyParams{EventID: "evt_1"}); err == nil {
		t.Error("params without an operation were accepted")
	}
}

// fakeReplayPager serves pages of events in ID order, and counts its calls.
type fakeReplayPager struct {
	events []ReplayCandidate
	calls  int
}

func (f *fakeReplayPager) ReplayPage(_ context.Context, p *ReplayPageParams) ([]ReplayCandidate, error) {
	f.calls++
	var out []ReplayCandidate
	for _, e := range f.events {
		n := e.CreatedAt.UnixNano()
		if e.EventID >= p.FromID && e.EventID < p.ToID && e.EventID > p.AfterID && n >= p.Since && n < p.Until && len(out) < p.Limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func TestReplayListWalksPages(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	pg := &fakeReplayPager{}
	for i := range 600 {
		at := t0.Add(time.Duration(i) * time.Second)
		typ := "invoice.paid"
		if i%100 == 99 {
			typ = "order.created"
		}
		pg.events = append(pg.events, ReplayCandidate{EventID: NewID("evt", at), Type: typ, CreatedAt: at})
	}
	got, err := ReplayList(context.Background(), pg, &ReplayListParams{
		Namespace: "ns", EventTypes: []string{"order.*"}, Since: t0.Add(100 * time.Second), Until: t0.Add(time.Hour), Limit: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	var at []time.Duration
	for _, c := range got {
		at = append(at, c.CreatedAt.Sub(t0)/time.Second)
	}
	if want := []time.Duration{199, 299, 399, 499, 599}; !slices.Equal(at, want) || pg.calls != 2 {
		t.Errorf("candidates at %v s after %d pages, want %v after 2", at, pg.calls, want)
	}
	got, err = ReplayList(context.Background(), pg, &ReplayListParams{
		Namespace: "ns", EventTypes: []string{"*"}, Since: t0, Until: t0.Add(time.Hour), Limit: 3,
	})
	if err != nil || len(got) != 3 || got[0].CreatedAt != t0 {
		t.Errorf("the oldest three: %+v, %v", got, err)
	}
	if got, err := ReplayList(context.Background(), pg, &ReplayListParams{Namespace: "ns", EventTypes: []string{"*"}, Since: t0, Until: t0}); err != nil || got != nil {
		t.Errorf("an empty window: %+v, %v", got, err)
	}
	if _, err := ReplayList(context.Background(), pg, &ReplayListParams{Namespace: "ns", Until: t0}); err == nil {
		t.Error("a list without types was accepted")
	}
}
