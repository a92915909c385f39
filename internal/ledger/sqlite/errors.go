package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// errAlreadyExists reports a unique constraint violation, such as an event
// ID used twice.
var errAlreadyExists = errors.New("already exists")

// translate wraps a driver error with op, mapping what the ledger contract
// names to its sentinels. It is the only place that looks at SQLite codes.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ledger.ErrNotFound)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch code := se.Code(); {
		case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE, code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%s: %w: %w", op, errAlreadyExists, err)
		case code&0xff == sqlite3.SQLITE_BUSY, code&0xff == sqlite3.SQLITE_LOCKED:
			// Writers in this process queue for the one write connection;
			// busy (past the busy timeout) means another process holds
			// the file: unavailable until it lets go.
			return fmt.Errorf("%s: ledger file is locked by another process: %w: %w", op, ledger.ErrUnavailable, err)
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}
