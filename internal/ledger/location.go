// Package ledger is the durable record of every event, delivery and attempt:
// the queue is the ledger. This file holds how a ledger is located; the
// stores themselves (embedded SQLite, shared PostgreSQL) live beside it.
package ledger

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// Driver names a ledger implementation.
type Driver string

const (
	// SQLite is the embedded default: one file, one active replica.
	SQLite Driver = "sqlite"
	// Postgres is the shared ledger for several replicas.
	Postgres Driver = "postgres"
)

// Location says which store to open and where.
type Location struct {
	Driver Driver
	// Path is the SQLite database file (SQLite only).
	Path string
	// DSN is the connection string handed to the driver (Postgres only).
	DSN string
}

// String renders the location without credentials, for logs.
func (l Location) String() string {
	switch l.Driver {
	case SQLite:
		return "sqlite://" + l.Path
	case Postgres:
		u, err := url.Parse(l.DSN)
		if err != nil {
			return "postgres://(unparseable)"
		}
		return u.Redacted()
	default:
		return "(no ledger)"
	}
}

// ParseLocation parses the --ledger flag: sqlite://<path> (a relative path
// is resolved against the working directory; sqlite:///abs for an absolute
// one) or postgres://user@host/db?... (also postgresql://).
func ParseLocation(s string) (Location, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return Location{}, fmt.Errorf("ledger %q: want sqlite://<path> or postgres://<dsn>", redact(s))
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		if rest == "" {
			return Location{}, fmt.Errorf("ledger %q: sqlite needs a file path, as in sqlite:///var/lib/hookkeeper/ledger.db", s)
		}
		if i := strings.IndexByte(rest, '?'); i >= 0 {
			return Location{}, fmt.Errorf("ledger %q: sqlite options are set by hookkeeper, not in the location", s)
		}
		path, err := filepath.Abs(rest)
		if err != nil {
			return Location{}, fmt.Errorf("ledger %q: %w", s, err)
		}
		return Location{Driver: SQLite, Path: path}, nil
	case "postgres", "postgresql":
		u, err := url.Parse(s)
		if err != nil || u.Host == "" {
			return Location{}, fmt.Errorf("ledger %q: postgres needs a URL with a host, as in postgres://hookkeeper@db:5432/hookkeeper", redact(s))
		}
		return Location{Driver: Postgres, DSN: s}, nil
	default:
		return Location{}, fmt.Errorf("ledger %q: unknown scheme %q, want sqlite or postgres", redact(s), scheme)
	}
}

// redact hides a password in a URL-shaped string so that a mistyped flag
// does not print credentials.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if strings.Contains(s, "@") {
			return "(location with credentials hidden)"
		}
		return s
	}
	return u.Redacted()
}
