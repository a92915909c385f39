package ledger

import (
	"testing"
	"time"
)

func TestPruneOutcome(t *testing.T) {
	now := time.Date(2030, 1, 10, 0, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	p := &PruneParams{Now: now, DefaultPayloadRetention: time.Hour, DefaultEvidenceRetention: 3 * time.Hour}
	short := Policy{PayloadRetention: 10 * time.Minute, EvidenceRetention: 20 * time.Minute}
	long := Policy{PayloadRetention: 5 * time.Hour, EvidenceRetention: 10 * time.Hour}
	delivered := func(pol Policy, endedAgo time.Duration) PruneDelivery {
		return PruneDelivery{State: StateDelivered, TerminalAt: ago(endedAgo), Policy: pol}
	}
	for _, tc := range []struct {
		name                   string
		facts                  PruneFacts
		p                      *PruneParams
		deleted, payloadPruned bool
	}{
		{"within both retentions: kept", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 5*time.Minute)}}, p, false, false},
		{"past payload retention: payload pruned", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 15*time.Minute)}}, p, false, true},
		{"exactly at payload retention: payload pruned", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 10*time.Minute)}}, p, false, true},
		{"past evidence retention: deleted", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 30*time.Minute)}}, p, true, false},
		{"payload already pruned: not pruned again", PruneFacts{PayloadPruned: true, Deliveries: []PruneDelivery{delivered(short, 15*time.Minute)}}, p, false, false},
		{"payload already pruned, past evidence: deleted", PruneFacts{PayloadPruned: true, Deliveries: []PruneDelivery{delivered(short, 30*time.Minute)}}, p, true, false},
		{"the longest retention among endpoints decides", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 30*time.Minute), delivered(long, 30*time.Minute)}}, p, false, false},
		{"the latest end decides", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 30*time.Minute), delivered(short, 5*time.Minute)}}, p, false, false},
		{"a policy of 0 takes the default", PruneFacts{Deliveries: []PruneDelivery{delivered(Policy{}, 2*time.Hour)}}, p, false, true},
		{"a pending delivery keeps the event", PruneFacts{Deliveries: []PruneDelivery{delivered(short, 30*time.Minute), {State: StateScheduled, Policy: short}}}, p, false, false},
		{"unresolved exhaustion keeps the evidence, not the payload", PruneFacts{Deliveries: []PruneDelivery{
			{State: StateExhausted, Resolution: ResolutionUnresolved, TerminalAt: ago(30 * time.Minute), Policy: short}}}, p, false, true},
		{"resolved exhaustion is deleted", PruneFacts{Deliveries: []PruneDelivery{
			{State: StateExhausted, Resolution: ResolutionDismissed, TerminalAt: ago(30 * time.Minute), Policy: short}}}, p, true, false},
		{"cancelled ages like any end", PruneFacts{Deliveries: []PruneDelivery{
			{State: StateCancelled, TerminalAt: ago(30 * time.Minute), Policy: short}}}, p, true, false},
		{"retention 0 everywhere keeps forever", PruneFacts{Deliveries: []PruneDelivery{delivered(Policy{}, 1000*time.Hour)}},
			&PruneParams{Now: now}, false, false},
		{"undelivered within the default: kept", PruneFacts{CreatedAt: *ago(30 * time.Minute)}, p, false, false},
		{"undelivered past the payload default: pruned", PruneFacts{CreatedAt: *ago(2 * time.Hour)}, p, false, true},
		{"undelivered past the evidence default: deleted", PruneFacts{CreatedAt: *ago(4 * time.Hour)}, p, true, false},
		{"undelivered with a default of 0 is kept forever", PruneFacts{CreatedAt: *ago(4 * time.Hour)}, &PruneParams{Now: now}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deleted, pruned := PruneOutcome(&tc.facts, tc.p)
			if deleted != tc.deleted || pruned != tc.payloadPruned {
				t.Fatalf("PruneOutcome = deleted %v, payload pruned %v; want %v, %v", deleted, pruned, tc.deleted, tc.payloadPruned)
			}
		})
	}
	if len(PruneStages) == 0 || !PruneStages[0].Evidence || PruneStages[len(PruneStages)-1].Evidence {
		t.Fatalf("PruneStages %+v: evidence stages must come first", PruneStages)
	}
}
