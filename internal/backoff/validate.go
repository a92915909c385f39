package backoff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FieldError is one violated rule. Field is the JSON field name as it appears
// in the RetryPolicy spec (for example "factor" or "schedule[2]"), so callers
// can map it onto a field path or a status condition.
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// Validate checks the rules the arithmetic relies on and returns every
// violation as a *FieldError, joined with errors.Join (nil when valid).
// Rules that depend on the strategy are skipped when it is unknown, to avoid
// noise on top of the strategy error.
func (p Policy) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Detail: fmt.Sprintf(format, args...)})
	}
	nonNegative := func(field string, d time.Duration) {
		if d < 0 {
			bad(field, "must not be negative, got %s", d)
		}
	}

	known := true
	switch p.Strategy {
	case Exponential, Linear, Fixed, Schedule:
	case "":
		known = false
		bad("strategy", "is required: one of Exponential, Linear, Fixed, Schedule")
	default:
		known = false
		bad("strategy", "%q is not one of Exponential, Linear, Fixed, Schedule", p.Strategy)
	}

	switch {
	case known && p.Strategy != Schedule && p.InitialDelay <= 0:
		bad("initialDelay", "must be greater than zero for strategy %s, got %s", p.Strategy, p.InitialDelay)
	default:
		nonNegative("initialDelay", p.InitialDelay)
	}

	switch {
	case !known:
	case p.Strategy == Exponential && p.FactorMilli == 0:
		bad("factor", "is required for strategy Exponential")
	case p.Strategy == Exponential && (p.FactorMilli <= 1000 || p.FactorMilli > 10000):
		bad("factor", "must be greater than 1 and at most 10, got %s", formatMilli(p.FactorMilli))
	case p.Strategy != Exponential && p.FactorMilli != 0:
		bad("factor", "is only allowed with strategy Exponential")
	}

	nonNegative("maxDelay", p.MaxDelay)

	switch {
	case !known:
	case p.Strategy == Schedule && len(p.Schedule) == 0:
		bad("schedule", "is required for strategy Schedule")
	case p.Strategy != Schedule && len(p.Schedule) > 0:
		bad("schedule", "is only allowed with strategy Schedule")
	}
	for i, d := range p.Schedule {
		if d <= 0 {
			bad(fmt.Sprintf("schedule[%d]", i), "must be greater than zero, got %s", d)
		}
	}

	if p.JitterPercent < 0 || p.JitterPercent > 100 {
		bad("jitterPercent", "must be between 0 and 100, got %d", p.JitterPercent)
	}

	if p.MaxAttempts < 0 {
		bad("maxAttempts", "must not be negative, got %d", p.MaxAttempts)
	}
	nonNegative("maxAge", p.MaxAge)
	if p.MaxAttempts <= 0 && p.MaxAge <= 0 {
		bad("maxAttempts", "must be greater than zero when maxAge is not set: automatic retries must stop somewhere")
	}

	nonNegative("attemptTimeout", p.AttemptTimeout)
	nonNegative("retryAfterCap", p.RetryAfterCap)
	return errors.Join(errs...)
}

// ParseFactor parses the spec's factor, a decimal string such as "2", "1.5"
// or "1.25" with at most 3 decimal places, into milli-units (2000, 1500,
// 1250). No sign, exponent, spaces or bare dot are accepted. The value must be
// greater than 1 and at most 10. Errors are *FieldError for field "factor".
func ParseFactor(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if !isDigits(whole) || (dot && (!isDigits(frac) || len(frac) > 3)) {
		return 0, &FieldError{Field: "factor", Detail: fmt.Sprintf("%q is not a decimal number with at most 3 decimal places", s)}
	}
	outOfRange := &FieldError{Field: "factor", Detail: fmt.Sprintf("must be greater than 1 and at most 10, got %q", s)}
	whole = strings.TrimLeft(whole, "0")
	if len(whole) > 2 { // >= 100; also keeps Atoi below from overflowing
		return 0, outOfRange
	}
	w, _ := strconv.Atoi("0" + whole)
	f, _ := strconv.Atoi((frac + "000")[:3])
	v := int64(w)*1000 + int64(f)
	if v <= 1000 || v > 10000 {
		return 0, outOfRange
	}
	return v, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// formatMilli renders milli-units as a decimal: 1500 -> "1.5", -2000 -> "-2".
func formatMilli(v int64) string {
	sign := ""
	u := uint64(v)
	if v < 0 {
		sign, u = "-", -u
	}
	s := sign + strconv.FormatUint(u/1000, 10)
	if f := u % 1000; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", f), "0")
	}
	return s
}
