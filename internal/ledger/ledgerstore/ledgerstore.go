// Package ledgerstore opens the ledger a Location names, so that the
// manager and the test tools choose a driver in one place.
package ledgerstore

import (
	"context"
	"fmt"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
	"github.com/hookkeeper/hookkeeper/internal/ledger/postgres"
	"github.com/hookkeeper/hookkeeper/internal/ledger/sqlite"
)

// Open opens (and migrates) the ledger at loc.
func Open(ctx context.Context, loc ledger.Location) (ledger.Store, error) {
	switch loc.Driver {
	case ledger.SQLite:
		s, err := sqlite.Open(ctx, loc.Path)
		if err != nil {
			return nil, fmt.Errorf("opening the SQLite ledger %s: %w", loc, err)
		}
		return s, nil
	case ledger.Postgres:
		s, err := postgres.Open(ctx, loc.DSN)
		if err != nil {
			return nil, fmt.Errorf("opening the PostgreSQL ledger %s: %w", loc, err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("no ledger driver %q", loc.Driver)
	}
}
