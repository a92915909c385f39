package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookkeeper/hookkeeper/internal/credential"
	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

const endpointColumns = `id, namespace, name, url, event_types, secret_values, secret_not_after,
	policy, ack_mode, ack_timeout, paused, dead_letter, rate_per_second, rate_burst,
	max_in_flight, headers, version, updated_at, owner, credentials, filter`

// EndpointUpsert implements ledger.Store.
func (s *Store) EndpointUpsert(ctx context.Context, params *ledger.EndpointUpsertParams) (ledger.Endpoint, error) {
	const op = "upsert endpoint"
	if params == nil {
		return ledger.Endpoint{}, fmt.Errorf("%s: nil params", op)
	}
	ep := params.Endpoint
	if ep.Namespace == "" || ep.Name == "" || ep.ID != ledger.EndpointID(ep.Namespace, ep.Name) {
		return ledger.Endpoint{}, fmt.Errorf("%s: ID %q must be namespace/name, both set (%q)", op, ep.ID, ledger.EndpointID(ep.Namespace, ep.Name))
	}
	policy, err := jsonValue(ep.Policy)
	if err != nil {
		return ledger.Endpoint{}, fmt.Errorf("%s %s: %w", op, ep.ID, err)
	}
	headers, err := jsonValue(ep.Headers)
	if err != nil {
		return ledger.Endpoint{}, fmt.Errorf("%s %s: %w", op, ep.ID, err)
	}
	values, notAfter := encodeSecrets(ep.Secrets)
	creds, err := ep.Credentials.Store()
	if err != nil {
		return ledger.Endpoint{}, fmt.Errorf("%s %s: credentials: %w", op, ep.ID, err)
	}
	var version int64
	err = s.tx(ctx, op+" "+ep.ID, func(tx *txn) error {
		b := &pgx.Batch{}
		b.Queue(`INSERT INTO endpoints (`+endpointColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 1, $17, $18, $19, $20)
			ON CONFLICT (id) DO UPDATE SET
				url = EXCLUDED.url, event_types = EXCLUDED.event_types,
				secret_values = EXCLUDED.secret_values, secret_not_after = EXCLUDED.secret_not_after,
				policy = EXCLUDED.policy, ack_mode = EXCLUDED.ack_mode, ack_timeout = EXCLUDED.ack_timeout,
				paused = EXCLUDED.paused, dead_letter = EXCLUDED.dead_letter,
				rate_per_second = EXCLUDED.rate_per_second, rate_burst = EXCLUDED.rate_burst,
				max_in_flight = EXCLUDED.max_in_flight, headers = EXCLUDED.headers, owner = EXCLUDED.owner,
				credentials = EXCLUDED.credentials, filter = EXCLUDED.filter,
				version = endpoints.version + 1, updated_at = EXCLUDED.updated_at, deleted_at = NULL
			RETURNING version`,
			ep.ID, ep.Namespace, ep.Name, ep.URL, ep.EventTypes, values, notAfter,
			policy, string(ep.AckMode), int64(ep.AckTimeout), ep.Paused, ep.DeadLetter,
			ep.RateLimit.PerSecond, ep.RateLimit.Burst, ep.MaxInFlight, headers, nanos(params.Now), ep.Owner, creds, ep.Filter,
		).QueryRow(func(row pgx.Row) error { return row.Scan(&version) })
		// Shard 0 of the stats is what makes the endpoint known to
		// EndpointStats (the other shards come with the first writes,
		// queueStats). The rows survive a delete, so a re-created endpoint
		// keeps counting its old deliveries. A new endpoint's counters are
		// a change (EndpointActivitySince).
		b.Queue(`INSERT INTO endpoint_stats (endpoint_id, shard, changed_at) VALUES ($1, 0, `+changeStampSQL+`)
			ON CONFLICT DO NOTHING`, ep.ID)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return ledger.Endpoint{}, err
	}
	ep.Version = version
	ep.UpdatedAt = fromNanos(nanos(params.Now))
	return ep, nil
}

// EndpointDelete implements ledger.Store.
func (s *Store) EndpointDelete(ctx context.Context, params *ledger.EndpointDeleteParams) (int, error) {
	const op = "delete endpoint"
	if params == nil {
		return 0, fmt.Errorf("%s: nil params", op)
	}
	var cancelled int
	err := s.tx(ctx, op+" "+params.ID, func(tx *txn) error {
		cancelled = 0
		// FOR UPDATE waits for the transactions that fan out to the
		// endpoint (they hold FOR KEY SHARE on it), so that their
		// deliveries are seen, and cancelled, below.
		var id string
		b := &pgx.Batch{}
		b.Queue(`SELECT id FROM endpoints WHERE id = $1 AND deleted_at IS NULL FOR UPDATE`, params.ID)
		b.Queue(`UPDATE endpoints SET deleted_at = $2, secret_values = NULL, secret_not_after = NULL, breaker_open = false
			WHERE id = $1 AND deleted_at IS NULL RETURNING id`, params.ID, nanos(params.Now),
		).QueryRow(func(row pgx.Row) error { return row.Scan(&id) })
		// An endpoint created again under its name starts closed.
		b.Queue(`DELETE FROM endpoint_breakers WHERE endpoint_id = $1`, params.ID)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err // ErrNoRows becomes ledger.ErrNotFound
		}
		rows, err := tx.Query(ctx, `
			WITH locked AS (
				SELECT id, state FROM deliveries
				WHERE endpoint_id = $1 AND state IN ('scheduled', 'in_flight', 'awaiting_ack')
				ORDER BY id
				FOR UPDATE
			)
			UPDATE deliveries d SET state = 'cancelled', lease_owner = '', lease_until = NULL, terminal_at = $2
			FROM locked WHERE d.id = locked.id
			RETURNING locked.state, d.event_id`, params.ID, nanos(params.Now))
		if err != nil {
			return err
		}
		delta := ledger.StatsDelta{}
		settled := ledger.SettledEvents{}
		var from, eventID string
		if _, err := pgx.ForEachRow(rows, []any{&from, &eventID}, func() error {
			delta.Move(params.ID, ledger.DeliveryState(from), ledger.ResolutionNone, ledger.StateCancelled, ledger.ResolutionNone)
			settled[eventID] = params.Now
			cancelled++
			return nil
		}); err != nil {
			return err
		}
		if err := execSettle(ctx, tx, settled); err != nil {
			return err
		}
		return applyStats(ctx, tx, delta)
	})
	return cancelled, err
}

// EndpointGet implements ledger.Store.
func (s *Store) EndpointGet(ctx context.Context, id string) (ledger.Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = $1 AND deleted_at IS NULL`, id)
	if err != nil {
		return ledger.Endpoint{}, translate("get endpoint "+id, err)
	}
	ep, err := pgx.CollectExactlyOneRow(rows, scanEndpoint)
	return ep, translate("get endpoint "+id, err)
}

// EndpointList implements ledger.Store.
func (s *Store) EndpointList(ctx context.Context) ([]ledger.Endpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE deleted_at IS NULL ORDER BY id`)
	if err != nil {
		return nil, translate("list endpoints", err)
	}
	eps, err := pgx.CollectRows(rows, scanEndpoint)
	return eps, translate("list endpoints", err)
}

// EndpointOwners implements ledger.Store.
func (s *Store) EndpointOwners(ctx context.Context, ids []string) (map[string]string, error) {
	const op = "read endpoint owners"
	owners := map[string]string{}
	if len(ids) == 0 {
		return owners, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, owner FROM endpoints WHERE id = ANY($1) AND owner <> ''`, ids)
	if err != nil {
		return nil, translate(op, err)
	}
	var id, owner string
	_, err = pgx.ForEachRow(rows, []any{&id, &owner}, func() error {
		owners[id] = owner
		return nil
	})
	if err != nil {
		return nil, translate(op, err)
	}
	return owners, nil
}

// scanEndpoint reads a row of endpointColumns.
func scanEndpoint(row pgx.CollectableRow) (ledger.Endpoint, error) {
	var (
		ep              ledger.Endpoint
		ackMode         string
		ackTimeout      int64
		values          [][]byte
		notAfter        []int64
		policy, headers []byte
		creds           []byte
		updatedAt       int64
	)
	err := row.Scan(&ep.ID, &ep.Namespace, &ep.Name, &ep.URL, &ep.EventTypes, &values, &notAfter,
		&policy, &ackMode, &ackTimeout, &ep.Paused, &ep.DeadLetter, &ep.RateLimit.PerSecond, &ep.RateLimit.Burst,
		&ep.MaxInFlight, &headers, &ep.Version, &updatedAt, &ep.Owner, &creds, &ep.Filter)
	if err != nil {
		return ledger.Endpoint{}, err
	}
	if err := json.Unmarshal(policy, &ep.Policy); err != nil {
		return ledger.Endpoint{}, fmt.Errorf("endpoint %s: decode policy: %w", ep.ID, err)
	}
	if err := json.Unmarshal(headers, &ep.Headers); err != nil {
		return ledger.Endpoint{}, fmt.Errorf("endpoint %s: decode headers: %w", ep.ID, err)
	}
	if ep.Secrets, err = decodeSecrets(values, notAfter); err != nil {
		return ledger.Endpoint{}, fmt.Errorf("endpoint %s: %w", ep.ID, err)
	}
	if ep.Credentials, err = credential.Load(creds); err != nil {
		return ledger.Endpoint{}, fmt.Errorf("endpoint %s: %w", ep.ID, err)
	}
	ep.AckMode = ledger.AckMode(ackMode)
	ep.AckTimeout = time.Duration(ackTimeout)
	ep.UpdatedAt = fromNanos(updatedAt)
	return ep, nil
}

// encodeSecrets splits signing secrets into two parallel arrays; nil stays
// NULL. Values are revealed only to be written (sensitive.Bytes marshals to null).
func encodeSecrets(secrets []ledger.SigningSecret) (values [][]byte, notAfter []int64) {
	if secrets == nil {
		return nil, nil
	}
	values = make([][]byte, len(secrets))
	notAfter = make([]int64, len(secrets))
	for i, sec := range secrets {
		values[i] = sec.Value.Reveal()
		if values[i] == nil {
			values[i] = []byte{}
		}
		notAfter[i] = nanos(sec.NotAfter)
	}
	return values, notAfter
}

// decodeSecrets is the inverse of encodeSecrets.
func decodeSecrets(values [][]byte, notAfter []int64) ([]ledger.SigningSecret, error) {
	if len(values) != len(notAfter) {
		return nil, errors.New("secret arrays differ in length")
	}
	if values == nil {
		return nil, nil
	}
	out := make([]ledger.SigningSecret, len(values))
	for i := range values {
		out[i] = ledger.SigningSecret{Value: sensitive.Bytes(values[i]), NotAfter: fromNanos(notAfter[i])}
	}
	return out, nil
}
