package ledger

import (
	"slices"
	"time"
)

// The secret rule of Settlement (the Secrets paragraph of
// settlementrules.go), stated once. The drivers apply it in one statement
// per transaction (SettleSecrets) or per sweep (ScrubDueSecrets), because
// it needs every delivery of the event; these functions are the
// specification of those statements, and the conformance suite's
// Transition group drives their cases through each store.

// SettledEvents collects the events of the deliveries a transaction ended,
// each with the instant its delivery ended; at the end of the transaction
// the driver applies SettleSecrets to each.
type SettledEvents map[string]time.Time

// Note records d's event if d is terminal.
func (s SettledEvents) Note(d Delivery, now time.Time) {
	if d.EventID != "" && d.State.Terminal() {
		s[d.EventID] = now
	}
}

// IDs returns the events in ID order, the order in which drivers lock them.
func (s SettledEvents) IDs() []string {
	ids := make([]string, 0, len(s))
	for id := range s {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// SecretsFacts is what decides what happens to an event's secrets.
type SecretsFacts struct {
	// HasSecrets: the event still holds secrets.
	HasSecrets bool
	// Pending: a delivery of the event is still pending.
	Pending bool
	// Grace is the longest SecretGracePeriod among the policies of the
	// endpoints of its deliveries.
	Grace time.Duration
}

// SecretsOutcome is what happens to an event's secrets.
type SecretsOutcome struct {
	// Scrub drops the secrets now (SecretsScrubAt = now).
	Scrub bool
	// SetDue replaces SecretsScrubDue with Due (nil clears it).
	SetDue bool
	Due    *time.Time
}

// SettleSecrets is the rule when a transition at now ends a delivery of an
// event: an event that holds secrets and has no pending delivery left
// loses them now when Grace is 0 (and SecretsScrubDue is cleared), or gets
// SecretsScrubDue = now + Grace. Otherwise nothing changes.
func SettleSecrets(f SecretsFacts, now time.Time) SecretsOutcome {
	if !f.HasSecrets || f.Pending {
		return SecretsOutcome{}
	}
	if f.Grace <= 0 {
		return SecretsOutcome{Scrub: true, SetDue: true}
	}
	due := now.Add(f.Grace).UTC()
	return SecretsOutcome{SetDue: true, Due: &due}
}

// ScrubDueSecrets is the rule of SecretsScrubDue for an event whose
// SecretsScrubDue has come and that still holds secrets: scrubbed (the due
// time is kept) unless a delivery became pending again, which disarms it
// (the transition that ends that delivery arms it again).
func ScrubDueSecrets(pending bool) SecretsOutcome {
	if pending {
		return SecretsOutcome{SetDue: true}
	}
	return SecretsOutcome{Scrub: true}
}

// Apply applies o to e, in memory, at now.
func (o SecretsOutcome) Apply(e *Event, now time.Time) {
	if o.Scrub {
		at := now.UTC()
		e.Secrets, e.SecretsScrubAt = nil, &at
	}
	if o.SetDue {
		e.SecretsScrubDue = nil
		if o.Due != nil {
			t := *o.Due
			e.SecretsScrubDue = &t
		}
	}
}

// DropUndeliveredSecrets applies the rule to a new event that reached no
// endpoint: no delivery will ever send its secrets, so it keeps none
// (SecretsScrubAt = its CreatedAt when it carried some).
func (e *Event) DropUndeliveredSecrets() {
	if len(e.Secrets) > 0 {
		at := e.CreatedAt
		e.SecretsScrubAt = &at
	}
	e.Secrets = nil
}
