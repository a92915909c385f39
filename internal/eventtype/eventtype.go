// Package eventtype validates event type names and matches them against an
// endpoint's filter. It is shared by the HTTP API (which refuses bad names) and
// the ledger (which fans an event out to the endpoints whose filter matches).
package eventtype

import (
	"fmt"
	"regexp"
	"strings"
)

// MaxLength bounds an event type name.
const MaxLength = 128

var namePattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]*(\.[a-zA-Z0-9][a-zA-Z0-9_-]*)*$`)

// Validate reports why name is not a valid event type: dot-separated
// segments of letters, digits, '_' and '-', each starting with a letter or
// digit, at most MaxLength characters.
func Validate(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("type is required")
	case len(name) > MaxLength:
		return fmt.Errorf("type must be at most %d characters", MaxLength)
	case !namePattern.MatchString(name):
		return fmt.Errorf("type %q must be dot-separated segments of letters, digits, '_' and '-'", name)
	}
	return nil
}

// Match reports whether name is selected by pattern: "*" matches every
// type, "prefix.*" every type under prefix (not prefix itself), anything
// else exactly that type.
func Match(pattern, name string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasSuffix(pattern, ".*"):
		return strings.HasPrefix(name, pattern[:len(pattern)-1])
	default:
		return pattern == name
	}
}

// MatchAny reports whether any of patterns selects name.
func MatchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if Match(p, name) {
			return true
		}
	}
	return false
}
