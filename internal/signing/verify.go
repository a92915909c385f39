package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/sensitive"
)

// DefaultTolerance is how far a webhook-timestamp may be from now, either
// way, when Verify is given no tolerance; the reference libraries use the
// same.
const DefaultTolerance = 5 * time.Minute

// Verification failures; Verify wraps them with context.
var (
	ErrMissingHeader       = errors.New("missing webhook header")
	ErrInvalidTimestamp    = errors.New("invalid webhook-timestamp")
	ErrTimestampTooOld     = errors.New("webhook-timestamp too old")
	ErrTimestampTooNew     = errors.New("webhook-timestamp too new")
	ErrNoMatchingSignature = errors.New("no matching signature")
)

// Verify checks a signed message: the timestamp must be within tolerance of
// now (DefaultTolerance when tolerance <= 0) and at least one v1 entry of
// the signature header must match the signature by one of secrets
// (compared in constant time). Entries of other versions are ignored.
func Verify(secrets []sensitive.Bytes, id, timestampHeader, signatureHeader string, body []byte, now time.Time, tolerance time.Duration) error {
	switch {
	case id == "":
		return fmt.Errorf("verify: %w: %s", ErrMissingHeader, HeaderID)
	case timestampHeader == "":
		return fmt.Errorf("verify: %w: %s", ErrMissingHeader, HeaderTimestamp)
	case signatureHeader == "":
		return fmt.Errorf("verify: %w: %s", ErrMissingHeader, HeaderSignature)
	case len(secrets) == 0:
		return errors.New("verify: no signing secret")
	}
	if err := checkID(id); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	unix, ok := parseUnix(timestampHeader)
	if !ok {
		return fmt.Errorf("verify: %w: want unix seconds", ErrInvalidTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts := time.Unix(unix, 0)
	if now.Sub(ts) > tolerance {
		return fmt.Errorf("verify: %w: more than %s before now", ErrTimestampTooOld, tolerance)
	}
	if ts.Sub(now) > tolerance {
		return fmt.Errorf("verify: %w: more than %s after now", ErrTimestampTooNew, tolerance)
	}

	var (
		key      keyBuf
		sum      [sha256.Size]byte
		expected [sigLen]byte
	)
	defer clear(key[:])
	for i, s := range secrets {
		k, err := decodeKey(&key, s)
		if err != nil {
			return fmt.Errorf("verify: signing secret %d: %w", i, err)
		}
		mac(&sum, k, id, unix, body)
		want := base64.StdEncoding.AppendEncode(expected[:0], sum[:])
		for rest := signatureHeader; rest != ""; {
			var entry string
			entry, rest, _ = strings.Cut(rest, " ")
			version, sig, _ := strings.Cut(entry, ",")
			if version == "v1" && hmac.Equal([]byte(sig), want) {
				return nil
			}
		}
	}
	return fmt.Errorf("verify: %w", ErrNoMatchingSignature)
}

// parseUnix parses 1 to 18 decimal digits, nothing else (no sign, no
// spaces), so the value never overflows.
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
