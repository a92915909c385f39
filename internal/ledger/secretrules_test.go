package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

func TestSecretsRules(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := now.Add(-time.Hour)
	later := now.Add(time.Hour)
	holding := Event{ID: "evt_1", Secrets: sensitive.Bytes(`{"t":"x"}`), SecretNames: []string{"t"}}
	armed := holding
	armed.SecretsScrubDue = &earlier
	scrubbedAt := func(e Event, at time.Time, due *time.Time) Event {
		e.Secrets, e.SecretsScrubAt, e.SecretsScrubDue = nil, &at, due
		return e
	}
	for _, tc := range []struct {
		name   string
		before Event
		out    SecretsOutcome
		want   Event
	}{
		{"settle, no grace: scrubbed now, due cleared", armed,
			SettleSecrets(SecretsFacts{HasSecrets: true}, now), scrubbedAt(armed, now, nil)},
		{"settle with a grace: due then", holding,
			SettleSecrets(SecretsFacts{HasSecrets: true, Grace: time.Hour}, now), func() Event { e := holding; e.SecretsScrubDue = &later; return e }()},
		{"settle with a pending delivery: unchanged", armed,
			SettleSecrets(SecretsFacts{HasSecrets: true, Pending: true, Grace: time.Hour}, now), armed},
		{"settle without secrets: unchanged", Event{ID: "evt_2"},
			SettleSecrets(SecretsFacts{Grace: time.Hour}, now), Event{ID: "evt_2"}},
		{"due sweep: scrubbed, due kept", armed, ScrubDueSecrets(false), scrubbedAt(armed, now, &earlier)},
		{"due sweep with a delivery pending again: disarmed", armed, ScrubDueSecrets(true), holding},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.before
			tc.out.Apply(&got, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("event (-want +got):\n%s", diff)
			}
		})
	}

	created := now.Add(-time.Minute)
	e := Event{ID: "evt_3", CreatedAt: created, Secrets: sensitive.Bytes(`{"t":"x"}`), SecretNames: []string{"t"}}
	e.DropUndeliveredSecrets()
	if e.Secrets != nil || e.SecretsScrubAt == nil || !e.SecretsScrubAt.Equal(created) {
		t.Fatalf("DropUndeliveredSecrets: secrets %v, scrubbed at %v; want none, at CreatedAt", e.Secrets, e.SecretsScrubAt)
	}
	plain := Event{ID: "evt_4", CreatedAt: created}
	plain.DropUndeliveredSecrets()
	if plain.SecretsScrubAt != nil {
		t.Fatalf("DropUndeliveredSecrets of an event without secrets set SecretsScrubAt")
	}

	s := SettledEvents{}
	s.Note(Delivery{EventID: "evt_b", State: StateDelivered}, now)
	s.Note(Delivery{EventID: "evt_a", State: StateCancelled}, now)
	s.Note(Delivery{EventID: "evt_c", State: StateScheduled}, now)
	s.Note(Delivery{EventID: "evt_d", State: StateAwaitingAck}, now)
	if diff := cmp.Diff([]string{"evt_a", "evt_b"}, s.IDs()); diff != "" {
		t.Fatalf("SettledEvents notes terminal deliveries only, in ID order (-want +got):\n%s", diff)
	}
}
