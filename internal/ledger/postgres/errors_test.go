package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

func TestTranslate(t *testing.T) {
	other := errors.New("boom")
	for _, tc := range []struct {
		name      string
		err       error
		want      error
		retryable bool
	}{
		{"no rows", fmt.Errorf("scan: %w", pgx.ErrNoRows), ledger.ErrNotFound, false},
		{"idempotency index", &pgconn.PgError{Code: codeUniqueViolation, ConstraintName: "events_idempotency"}, ledger.ErrIdempotencyConflict, false},
		{"other unique index", &pgconn.PgError{Code: codeUniqueViolation, ConstraintName: "events_pkey"}, nil, false},
		{"deadlock", &pgconn.PgError{Code: codeDeadlockDetected}, ErrConflict, true},
		{"serialization", &pgconn.PgError{Code: codeSerializationFailure}, ErrConflict, true},
		{"own conflict", fmt.Errorf("key: %w", ErrConflict), ErrConflict, true},
		{"anything else", other, other, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate("do it", tc.err)
			if tc.want != nil && !errors.Is(got, tc.want) {
				t.Fatalf("translate(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if !errors.Is(got, tc.err) && !errors.Is(tc.err, pgx.ErrNoRows) {
				t.Fatalf("translate(%v) = %v lost the cause", tc.err, got)
			}
			if r := retryable(tc.err); r != tc.retryable {
				t.Fatalf("retryable(%v) = %v, want %v", tc.err, r, tc.retryable)
			}
			if got.Error()[:len("do it: ")] != "do it: " {
				t.Fatalf("translate(%v) = %q, want the operation first", tc.err, got)
			}
		})
	}
	if translate("x", nil) != nil {
		t.Fatal("translate(nil) != nil")
	}
}
