package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// ErrConflict marks a transaction that PostgreSQL aborted because of a
// concurrent one (deadlock, serialization failure) and that still failed
// after the store's own retries; the caller may try again.
var ErrConflict = errors.New("concurrent transaction conflict, try again")

// errKeyRace fails a transaction whose insert found an idempotency key
// that its preload had found free (eventBatch.queue): a retryable
// conflict, since the transaction run again finds the key's holder.
var errKeyRace = fmt.Errorf("%w: an idempotency key was taken by a concurrent transaction", ErrConflict)

// PostgreSQL error codes the store reacts to.
const (
	codeUniqueViolation      = "23505"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
	codeLockNotAvailable     = "55P03"
	codeTooManyConnections   = "53300"
	codeAdminShutdown        = "57P01"
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03"
	classConnectionException = "08"
)

// translate is the one place where native errors become the ledger's
// sentinels: it prefixes op and wraps ledger.ErrNotFound for a missing row,
// ledger.ErrIdempotencyConflict for a duplicate idempotency key that slipped
// past the store's own checks, ErrConflict for transient aborts, and
// ledger.ErrUnavailable for a server that cannot be reached (unreachable).
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
	}
	if unreachable(err) {
		return fmt.Errorf("%s: %w: %w", op, ledger.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case keyTaken(err) && !errors.Is(err, errKeyRace):
			return fmt.Errorf("%s: %w: %w", op, ledger.ErrIdempotencyConflict, err)
		case retryable(err) && !errors.Is(err, ErrConflict):
			return fmt.Errorf("%s: %w: %w", op, ErrConflict, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// keyTaken reports whether err is an insert's violation of the unique
// index of idempotency keys.
func keyTaken(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pgErr.Code == codeUniqueViolation && pgErr.ConstraintName == "events_idempotency"
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

// unreachable reports whether err says that the server could not be
// reached or was lost: a failed connect, a connection refused, reset or
// closed under a statement, a server shutting down, starting up or out of
// connections. The caller's own deadline is not among them: it says
// nothing about the server.
func unreachable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch pgErr.Code {
		case codeTooManyConnections, codeAdminShutdown, codeCrashShutdown, codeCannotConnectNow:
			return true
		}
		return strings.HasPrefix(pgErr.Code, classConnectionException)
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
