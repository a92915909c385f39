// Package truncate bounds text for the places that have a size limit (a
// status field, a stored reason or error, a condition message) without
// ever splitting a UTF-8 character: one rule for all of them, so that no
// caller writes invalid UTF-8 into a Kubernetes object or the ledger.
//
// It imports nothing of hookkeeper: it is a leaf.
package truncate

import (
	"strings"
	"unicode/utf8"
)

// String returns s as valid UTF-8 (an invalid byte sequence becomes
// U+FFFD) of at most n bytes. When it must cut, it cuts at a character
// boundary and appends suffix (such as "..."), which counts toward n; a
// suffix longer than n is dropped.
func String(s string, n int, suffix string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	if len(suffix) > n {
		suffix = ""
	}
	cut := max(n-len(suffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + suffix
}
