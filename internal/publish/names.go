package publish

import "strings"

// MaxIdempotencyKeyLength bounds an idempotency key.
const MaxIdempotencyKeyLength = 255

// crockfordLower is the alphabet of ledger.NewID.
const crockfordLower = "0123456789abcdefghjkmnpqrstvwxyz"

// ValidNamespace reports whether s is a DNS-1123 label, as Kubernetes
// namespace names are: at most 63 lower-case alphanumerics or '-', starting
// and ending with an alphanumeric.
func ValidNamespace(s string) bool { return len(s) <= 63 && validLabel(s) }

// ValidObjectName reports whether s is a DNS-1123 subdomain, as the names
// of most Kubernetes objects (WebhookEndpoints included) are.
func ValidObjectName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !validLabel(label) {
			return false
		}
	}
	return true
}

// validLabel reports whether s is lower-case alphanumerics and '-',
// starting and ending with an alphanumeric (no length bound).
func validLabel(s string) bool {
	if len(s) == 0 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// ValidID reports whether s has the shape of ledger.NewID(prefix, …).
func ValidID(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != 26 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(crockfordLower, rest[i]) < 0 {
			return false
		}
	}
	return true
}

// ValidIdempotencyKey reports whether k is 1..255 printable ASCII
// characters (space included, as inside the key, not at its ends: HTTP
// trims those, so a key with them could not be sent again as it was).
func ValidIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > MaxIdempotencyKeyLength {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}
