package postgres_test

import (
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/ledgertest"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres/pgtest"
)

func TestConformance(t *testing.T) {
	ledgertest.Exercise(t, func(t *testing.T) ledger.Store {
		return pgtest.NewSchemaStore(t)
	})
}

func TestActivityExact(t *testing.T) {
	ledgertest.ExerciseActivityExact(t, func(t *testing.T) ledger.Store {
		s := pgtest.NewSchemaStore(t)
		s.SetActivityOverlap(0)
		return s
	})
}
