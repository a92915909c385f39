package postgres_test

import (
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

// TestContractMigration takes a ledger through migration 00016 and back:
// an event from before carries no contract, the downgrade drops the
// columns and the index, and the upgrade again brings them back, after
// which a contract round-trips.
func TestContractMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := pgtest.NewSchema(t)
	if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, 15); err != nil {
		t.Fatal(err)
	}
	conn := rawConn(t, schema)
	if _, err := conn.Exec(ctx, `INSERT INTO events (id, namespace, type, data, secret_names, reissue_of, idempotency_key, created_at)
		VALUES ('evt_old', 'shop', 'order.created', '{}', '[]', '', '', 1)`); err != nil {
		t.Fatal(err)
	}
	columns := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = $1
			AND column_name IN ('type_generation', 'replay_class', 'valid_until', 'policy_override')`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, step := range []struct {
		version int64
		columns int
	}{{16, 5}, {15, 0}, {16, 5}} {
		if err := postgres.MigrateTo(ctx, pgtest.DSN(t), schema, step.version); err != nil {
			t.Fatal(err)
		}
		if got := columns(); got != step.columns {
			t.Fatalf("at version %d: %d contract columns, want %d", step.version, got, step.columns)
		}
	}
	s := pgtest.OpenStore(t, schema)
	old, err := s.EventGet(ctx, "evt_old")
	if err != nil || old.TypeGeneration != 0 || old.ReplayClass != "" || old.ValidUntil != nil || old.PolicyOverride != nil {
		t.Fatalf("the event from before = %+v, %v; want no contract", old, err)
	}
	upsert(t, s, endpoint("shop", "all", "*"))
	p := event("shop", "order.paid", t0, 16)
	until := at(time.Hour)
	p.TypeGeneration, p.ReplayClass, p.ValidUntil = 3, ledger.ReplayNever, &until
	p.PolicyOverride = &ledger.Policy{Name: "fast", ReplayWindow: time.Hour, RetryOn: []string{"5xx"}}
	res := insert(t, s, []*ledger.EventInsertParams{p})[0]
	got, err := s.EventGet(ctx, res.Event.ID)
	if err != nil || got.TypeGeneration != 3 || got.ReplayClass != ledger.ReplayNever || !got.ValidUntil.Equal(until) ||
		got.PolicyOverride == nil || got.PolicyOverride.Name != "fast" || got.PolicyOverride.ReplayWindow != time.Hour {
		t.Fatalf("EventGet = %+v, %v", got, err)
	}
}
