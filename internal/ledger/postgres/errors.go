package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// ErrConflict marks a transaction that PostgreSQL aborted because of a
// concurrent one (deadlock, serialization failure) and that still failed
// after the store's own retries; the caller may try again.
var ErrConflict = errors.New("concurrent transaction conflict, try again")

// PostgreSQL error codes the store reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
)

// translate is the one place where native errors become the ledger's
// sentinels: it prefixes op and wraps ledger.ErrNotFound for a missing row,
// ledger.ErrIdempotencyConflict for a duplicate idempotency key that slipped
// past the store's own checks, and ErrConflict for transient aborts.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == "events_idempotency":
			return fmt.Errorf("%s: %w: %w", op, ledger.ErrIdempotencyConflict, err)
		case retryable(err) && !errors.Is(err, ErrConflict):
			return fmt.Errorf("%s: %w: %w", op, ErrConflict, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// retryable reports whether a transaction failed only because of a
// concurrent one, so that running it again may succeed.
func retryable(err error) bool {
	if errors.Is(err, ErrConflict) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case codeSerializationFailure, codeDeadlockDetected, codeLockNotAvailable:
		return true
	}
	return false
}
