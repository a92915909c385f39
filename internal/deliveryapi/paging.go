package deliveryapi

import (
	"encoding/base64"
	"encoding/json"

	"github.com/hookkeeper/hookkeeper/internal/ledger"
)

// DefaultPageSize is the page a list without limit gets: the server always
// pages (with a continue token), so that no request makes it load more than
// a page from the ledger.
const DefaultPageSize = 500

// continueToken is the opaque position of a list: the ID after which the
// next page starts. Ledger IDs grow with time and lists are ordered by ID,
// so a walk by tokens sees every row that existed when it started exactly
// once, and rows written meanwhile at most once.
type continueToken struct {
	V     int    `json:"v"`
	After string `json:"after"`
}

func encodeContinue(after string) string {
	b, _ := json.Marshal(continueToken{V: 1, After: after})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t continueToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.V != 1 || t.After == "" {
		return "", badSelector("continue token %q is not one this server issued", s)
	}
	return t.After, nil
}

// pageSize returns how many rows to return for a requested limit, and how
// many to ask the ledger for (one more, to know whether a next page exists).
func pageSize(limit int64) (size, ask int) {
	size = DefaultPageSize
	if limit > 0 && limit < int64(ledger.MaxListLimit) {
		size = int(limit)
	}
	if limit >= int64(ledger.MaxListLimit) {
		size = ledger.MaxListLimit - 1
	}
	return size, size + 1
}

// page cuts rows to size and returns the continue token for what follows.
func page[T any](rows []T, size int, id func(T) string) ([]T, string) {
	if len(rows) <= size {
		return rows, ""
	}
	rows = rows[:size]
	return rows, encodeContinue(id(rows[size-1]))
}
