package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
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
		{"idempotency key raced after preload", fmt.Errorf("insert events: %w: %w", errKeyRace,
			&pgconn.PgError{Code: codeUniqueViolation, ConstraintName: "events_idempotency"}), ErrConflict, true},
		{"other unique index", &pgconn.PgError{Code: codeUniqueViolation, ConstraintName: "events_pkey"}, nil, false},
		{"deadlock", &pgconn.PgError{Code: codeDeadlockDetected}, ErrConflict, true},
		{"serialization", &pgconn.PgError{Code: codeSerializationFailure}, ErrConflict, true},
		{"own conflict", fmt.Errorf("key: %w", ErrConflict), ErrConflict, true},
		{"anything else", other, other, false},
		{"connect refused", &pgconn.ConnectError{Config: &pgconn.Config{}}, ledger.ErrUnavailable, false},
		{"connection reset", fmt.Errorf("receive: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET}), ledger.ErrUnavailable, false},
		{"connection lost", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), ledger.ErrUnavailable, false},
		{"conn closed", pgconn.ErrConnClosed, ledger.ErrUnavailable, false},
		{"admin shutdown", &pgconn.PgError{Code: codeAdminShutdown}, ledger.ErrUnavailable, false},
		{"starting up", &pgconn.PgError{Code: codeCannotConnectNow}, ledger.ErrUnavailable, false},
		{"too many connections", &pgconn.PgError{Code: codeTooManyConnections}, ledger.ErrUnavailable, false},
		{"connection exception", &pgconn.PgError{Code: "08006"}, ledger.ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := translate("do it", tc.err)
			if tc.want != nil && !errors.Is(got, tc.want) {
				t.Fatalf("translate(%v) = %v, want %v", tc.err, got, tc.want)
			}
			// A key raced after preload runs the transaction again: only a
			// key the store itself found taken is the caller's conflict.
			if conflict := errors.Is(got, ledger.ErrIdempotencyConflict); conflict != (tc.want == ledger.ErrIdempotencyConflict) {
				t.Fatalf("translate(%v) = %v: idempotency conflict %v", tc.err, got, conflict)
			}
			if unavailable := errors.Is(got, ledger.ErrUnavailable); unavailable != (tc.want == ledger.ErrUnavailable) {
				t.Fatalf("translate(%v) = %v: unavailable %v", tc.err, got, unavailable)
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
	// The caller's deadline is its own: not the server's unavailability.
	if got := translate("x", fmt.Errorf("connect: %w", &net.OpError{Op: "dial", Err: context.DeadlineExceeded})); errors.Is(got, ledger.ErrUnavailable) {
		t.Errorf("a deadline became %v", got)
	}
	if translate("x", nil) != nil {
		t.Fatal("translate(nil) != nil")
	}
}
