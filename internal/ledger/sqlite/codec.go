package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// Times are stored as INTEGER unix nanoseconds UTC; a zero time.Time as
// NULL (nullable columns) so that "unset" survives the round trip.

func nanos(t time.Time) int64 { return t.UnixNano() }

// nullNanosPtr is NULL for nil.
func nullNanosPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n sql.NullInt64) *time.Time {
	if !n.Valid {
		return nil
	}
	t := fromNanos(n.Int64)
	return &t
}

// nullPolicy is a policy as its JSON column holds it: NULL for nil.
func nullPolicy(p *ledger.Policy) (any, error) {
	if p == nil {
		return nil, nil
	}
	return jsonText(p)
}

// nullBytes is NULL for an empty slice (no secrets, no excerpt).
func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// storedSecret is a signing secret as stored: sensitive.Bytes marshals to null on
// purpose, so the store writes the revealed bytes explicitly.
type storedSecret struct {
	Value    []byte `json:"value"`
	NotAfter int64  `json:"notAfter,omitempty"`
}

func encodeSecrets(ss []ledger.SigningSecret) ([]byte, error) {
	out := make([]storedSecret, len(ss))
	for i, s := range ss {
		out[i] = storedSecret{Value: s.Value.Reveal()}
		if !s.NotAfter.IsZero() {
			out[i].NotAfter = s.NotAfter.UnixNano()
		}
	}
	return json.Marshal(out)
}

func decodeSecrets(b []byte) ([]ledger.SigningSecret, error) {
	var in []storedSecret
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, err
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]ledger.SigningSecret, len(in))
	for i, s := range in {
		out[i] = ledger.SigningSecret{Value: sensitive.Bytes(s.Value)}
		if s.NotAfter != 0 {
			out[i].NotAfter = fromNanos(s.NotAfter)
		}
	}
	return out, nil
}

// jsonText marshals v for a JSON column.
func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

// scanEndpoint scans endpointCols.
func scanEndpoint(sc scanner) (ledger.Endpoint, error) {
	var (
		ep                            ledger.Endpoint
		types, policy, headers        string
		secrets, creds                []byte
		ackTimeout, updated           int64
		perSecond, burst, maxInFlight int64
	)
	err := sc.Scan(&ep.ID, &ep.Namespace, &ep.Name, &ep.URL, &types, &secrets, &policy, &ep.AckMode, &ackTimeout,
		&ep.Paused, &ep.DeadLetter, &perSecond, &burst, &maxInFlight, &headers, &ep.Version, &updated, &ep.Owner, &creds, &ep.Filter)
	if err != nil {
		return ep, err
	}
	ep.AckTimeout = time.Duration(ackTimeout)
	ep.RateLimit = ledger.RateLimit{PerSecond: int(perSecond), Burst: int(burst)}
	ep.MaxInFlight = int(maxInFlight)
	ep.UpdatedAt = fromNanos(updated)
	if err := json.Unmarshal([]byte(types), &ep.EventTypes); err != nil {
		return ep, fmt.Errorf("endpoint %s event types: %w", ep.ID, err)
	}
	if err := json.Unmarshal([]byte(policy), &ep.Policy); err != nil {
		return ep, fmt.Errorf("endpoint %s policy: %w", ep.ID, err)
	}
	if err := json.Unmarshal([]byte(headers), &ep.Headers); err != nil {
		return ep, fmt.Errorf("endpoint %s headers: %w", ep.ID, err)
	}
	if ep.Secrets, err = decodeSecrets(secrets); err != nil {
		return ep, fmt.Errorf("endpoint %s signing secrets: %w", ep.ID, err)
	}
	if ep.Credentials, err = credential.Load(creds); err != nil {
		return ep, fmt.Errorf("endpoint %s: %w", ep.ID, err)
	}
	return ep, nil
}

// eventDest returns scan destinations for eventCols and a function that
// finishes the event once scanned.
func eventDest(ev *ledger.Event) ([]any, func() error) {
	var (
		data, secrets, hash []byte
		names               string
		scrubbed            sql.NullInt64
		created             int64
		scrubDue, pruned    sql.NullInt64
		validUntil          sql.NullInt64
		override            sql.NullString
	)
	dest := []any{&ev.ID, &ev.Namespace, &ev.Type, &data, &secrets, &names, &scrubbed, &ev.ReissueOf,
		&ev.IdempotencyKey, &hash, &created, &scrubDue, &pruned,
		&ev.TypeGeneration, &ev.ReplayClass, &validUntil, &override, &ev.Trace.Parent, &ev.Trace.State}
	return dest, func() error {
		ev.ValidUntil = fromNullNanos(validUntil)
		if override.Valid {
			ev.PolicyOverride = new(ledger.Policy)
			if err := json.Unmarshal([]byte(override.String), ev.PolicyOverride); err != nil {
				return fmt.Errorf("event %s policy override: %w", ev.ID, err)
			}
		}
		if len(data) > 0 {
			ev.Data = data
		}
		if len(secrets) > 0 {
			ev.Secrets = sensitive.Bytes(secrets)
		}
		if len(hash) > 0 {
			ev.BodyHash = hash
		}
		ev.SecretsScrubAt = fromNullNanos(scrubbed)
		ev.SecretsScrubDue = fromNullNanos(scrubDue)
		ev.PayloadPrunedAt = fromNullNanos(pruned)
		ev.CreatedAt = fromNanos(created)
		if err := json.Unmarshal([]byte(names), &ev.SecretNames); err != nil {
			return fmt.Errorf("event %s secret names: %w", ev.ID, err)
		}
		return nil
	}
}

// scanEvent scans eventCols.
func scanEvent(sc scanner) (ledger.Event, error) {
	var ev ledger.Event
	dest, finish := eventDest(&ev)
	if err := sc.Scan(dest...); err != nil {
		return ev, err
	}
	return ev, finish()
}

// sameNanos is true when a and b are stored as the same value.
func sameNanos(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return nanos(*a) == nanos(*b)
}

// stored sets d's times to what reading d back from its row returns
// (UTC, no monotonic reading), so that a delivery computed in Go is the
// one a query would answer.
func stored(d *ledger.Delivery) {
	d.DueAt, d.CreatedAt = fromNanos(nanos(d.DueAt)), fromNanos(nanos(d.CreatedAt))
	for _, t := range []**time.Time{&d.LeaseUntil, &d.FirstAttemptAt, &d.AckDeadline, &d.TerminalAt} {
		if *t != nil {
			v := fromNanos(nanos(**t))
			*t = &v
		}
	}
}

// deliveryDest returns scan destinations for deliveryCols and a function
// that finishes the delivery once scanned.
func deliveryDest(d *ledger.Delivery) ([]any, func()) {
	var (
		due, created                                      int64
		leaseUntil, firstAttempt, ackDeadline, terminalAt sql.NullInt64
		attempts, lastStatus                              int64
	)
	dest := []any{&d.ID, &d.EventID, &d.EndpointID, &d.State, &due, &d.LeaseOwner, &leaseUntil, &attempts,
		&firstAttempt, &ackDeadline, &lastStatus, &d.LastError, &d.ExhaustReason, &d.Resolution, &terminalAt, &created,
		&d.RetryOf, &d.ResolvedBy, &d.Resend}
	return dest, func() {
		d.DueAt = fromNanos(due)
		d.CreatedAt = fromNanos(created)
		d.LeaseUntil = fromNullNanos(leaseUntil)
		d.FirstAttemptAt = fromNullNanos(firstAttempt)
		d.AckDeadline = fromNullNanos(ackDeadline)
		d.TerminalAt = fromNullNanos(terminalAt)
		d.Attempts = int(attempts)
		d.LastStatus = int(lastStatus)
	}
}

// scanDelivery scans deliveryCols.
func scanDelivery(sc scanner) (ledger.Delivery, error) {
	var d ledger.Delivery
	dest, finish := deliveryDest(&d)
	if err := sc.Scan(dest...); err != nil {
		return d, err
	}
	finish()
	return d, nil
}

// collectDeliveries scans every row of deliveryCols.
func collectDeliveries(rows *sql.Rows) ([]ledger.Delivery, error) {
	defer rows.Close()
	var out []ledger.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}
