package sqlite

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// EndpointUpsert implements ledger.Store. Upserting a deleted endpoint
// recreates it; its version keeps counting, so no version is reused.
func (s *Store) EndpointUpsert(ctx context.Context, p *ledger.EndpointUpsertParams) (ledger.Endpoint, error) {
	ep := p.Endpoint
	if ep.ID == "" {
		ep.ID = ledger.EndpointID(ep.Namespace, ep.Name)
	}
	if ep.ID != ledger.EndpointID(ep.Namespace, ep.Name) {
		return ledger.Endpoint{}, fmt.Errorf("upsert endpoint %s: ID does not match namespace %q and name %q", ep.ID, ep.Namespace, ep.Name)
	}
	args, err := endpointArgs(ep, p)
	if err != nil {
		return ledger.Endpoint{}, fmt.Errorf("upsert endpoint %s: %w", ep.ID, err)
	}
	op := "upsert endpoint " + ep.ID
	err = s.write(ctx, op, func(t *wtx) error {
		if err := t.stmt(s.ws.endpointUpsert).QueryRowContext(t.ctx, args...).Scan(&ep.Version); err != nil {
			return translate(op, err)
		}
		// A new endpoint's counters are a change (EndpointActivitySince).
		if _, err := t.stmt(s.ws.statsEnsure).ExecContext(t.ctx, ep.ID, changeStamp()); err != nil {
			return translate(op+": stats", err)
		}
		return nil
	})
	if err != nil {
		return ledger.Endpoint{}, err
	}
	ep.UpdatedAt = p.Now.UTC()
	return ep, nil
}

// endpointArgs are the endpointUpsert arguments.
func endpointArgs(ep ledger.Endpoint, p *ledger.EndpointUpsertParams) ([]any, error) {
	types, err := jsonText(ep.EventTypes)
	if err != nil {
		return nil, fmt.Errorf("event types: %w", err)
	}
	secrets, err := encodeSecrets(ep.Secrets)
	if err != nil {
		return nil, fmt.Errorf("signing secrets: %w", err)
	}
	policy, err := jsonText(ep.Policy)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	headers, err := jsonText(ep.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	creds, err := ep.Credentials.Store()
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return []any{
		ep.ID, ep.Namespace, ep.Name, ep.URL, types, secrets, policy, string(ep.AckMode), int64(ep.AckTimeout),
		ep.Paused, ep.DeadLetter, int64(ep.RateLimit.PerSecond), int64(ep.RateLimit.Burst), int64(ep.MaxInFlight),
		headers, nanos(p.Now), ep.Owner, creds, ep.Filter,
	}, nil
}

// EndpointDelete implements ledger.Store. The endpoint row stays (deleted)
// so that its deliveries keep their history and its stats stay readable.
func (s *Store) EndpointDelete(ctx context.Context, p *ledger.EndpointDeleteParams) (int, error) {
	op := "delete endpoint " + p.ID
	var cancelled int64
	err := s.write(ctx, op, func(t *wtx) error {
		res, err := t.stmt(s.ws.endpointDelete).ExecContext(t.ctx, p.ID, nanos(p.Now))
		if err != nil {
			return translate(op, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return translate(op, err)
		} else if n == 0 {
			return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
		}
		if err := forgetBreaker(t, p.ID); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		ds := ledger.StatsDelta{}
		live, err := s.liveEvents(t, p.ID, p.Now, ds)
		if err != nil {
			return err
		}
		res, err = t.stmt(s.ws.deliveriesCancel).ExecContext(t.ctx, p.ID, nanos(p.Now))
		if err != nil {
			return translate(op+": cancel deliveries", err)
		}
		if cancelled, err = res.RowsAffected(); err != nil {
			return translate(op+": cancel deliveries", err)
		}
		if err := s.settle(t, live); err != nil {
			return err
		}
		return applyStats(t, s.ws.statsApply, ds)
	})
	return int(cancelled), err
}

// EndpointGet implements ledger.Store.
func (s *Store) EndpointGet(ctx context.Context, id string) (ledger.Endpoint, error) {
	ep, err := scanEndpoint(s.rs.endpointGet.QueryRowContext(ctx, id))
	if err != nil {
		return ledger.Endpoint{}, translate("get endpoint "+id, err)
	}
	return ep, nil
}

// EndpointList implements ledger.Store.
func (s *Store) EndpointList(ctx context.Context) ([]ledger.Endpoint, error) {
	rows, err := s.rs.endpointList.QueryContext(ctx)
	if err != nil {
		return nil, translate("list endpoints", err)
	}
	defer rows.Close()
	var out []ledger.Endpoint
	for rows.Next() {
		ep, err := scanEndpoint(rows)
		if err != nil {
			return nil, translate("list endpoints", err)
		}
		out = append(out, ep)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("list endpoints", err)
	}
	return out, nil
}

// EndpointOwners implements ledger.Store.
func (s *Store) EndpointOwners(ctx context.Context, ids []string) (map[string]string, error) {
	const op = "read endpoint owners"
	owners := map[string]string{}
	if len(ids) == 0 {
		return owners, nil
	}
	list, err := jsonText(ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT id, owner FROM endpoints
		WHERE id IN (SELECT value FROM json_each(?1)) AND owner <> ''`, list)
	if err != nil {
		return nil, translate(op, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, owner string
		if err := rows.Scan(&id, &owner); err != nil {
			return nil, translate(op, err)
		}
		owners[id] = owner
	}
	return owners, translate(op, rows.Err())
}
