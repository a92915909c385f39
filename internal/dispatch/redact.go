package dispatch

import (
	"bytes"
	"encoding/json"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// minRedactLength is the shortest secret value searched for in an excerpt:
// shorter values (a "1", a "true") would redact innocent bytes and protect
// nothing.
const minRedactLength = 4

var redacted = []byte("[redacted]")

// redactSecrets removes the event's secret values from a response excerpt.
// A receiver that echoes the payload would otherwise put one-time secrets
// into the stored attempt, where they outlive the scrub of the event and
// show in the read API. Values are matched as raw strings and as their
// JSON-escaped form.
func redactSecrets(excerpt []byte, secrets sensitive.Bytes) []byte {
	if len(excerpt) == 0 || len(secrets) == 0 {
		return excerpt
	}
	var values map[string]json.RawMessage
	if json.Unmarshal(secrets.Reveal(), &values) != nil {
		return excerpt
	}
	for _, raw := range values {
		var s string
		needles := [][]byte{raw}
		if json.Unmarshal(raw, &s) == nil {
			needles = [][]byte{[]byte(s), bytes.Trim(raw, `"`)}
		}
		for _, n := range needles {
			if len(n) >= minRedactLength {
				excerpt = bytes.ReplaceAll(excerpt, n, redacted)
			}
		}
	}
	return excerpt
}

// redactValues replaces each of needles in excerpt, and a needle's start
// (of at least minRedactLength bytes) that ends the excerpt: an excerpt
// cut at MaxExcerpt must not keep the first half of a credential.
func redactValues(excerpt []byte, needles [][]byte) []byte {
	for _, n := range needles {
		if bytes.Contains(excerpt, n) {
			excerpt = bytes.ReplaceAll(excerpt, n, redacted)
		}
	}
	for _, n := range needles {
		for i := max(0, len(excerpt)-len(n)+1); i <= len(excerpt)-minRedactLength; i++ {
			if excerpt[i] == n[0] && bytes.HasPrefix(n, excerpt[i:]) {
				excerpt = append(excerpt[:i:i], redacted...)
				break
			}
		}
	}
	return excerpt
}
