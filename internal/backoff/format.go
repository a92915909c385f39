package backoff

import (
	"strconv"
	"time"
)

var formatUnits = []struct {
	size time.Duration
	name string
}{
	{24 * time.Hour, "d"},
	{time.Hour, "h"},
	{time.Minute, "m"},
	{time.Second, "s"},
	{time.Millisecond, "ms"},
	{time.Microsecond, "µs"},
	{time.Nanosecond, "ns"},
}

// FormatDuration renders a duration compactly for status fields and printer
// columns: the largest unit that fits, followed by the next smaller unit when
// that is non-zero; the rest is truncated. Units are d (24h), h, m, s, ms, µs
// and ns. Zero is "0s" and negative values get a leading "-".
//
//	0 -> "0s", 5s -> "5s", 5m -> "5m", 90m -> "1h30m", 52h -> "2d4h",
//	1h0m5s -> "1h", 1500ms -> "1s500ms", MaxDuration -> "36500d"
//
// Unlike time.Duration.String it never shows more than two units, so values
// stay short and stable enough for a column.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	sign, u := "", uint64(d)
	if d < 0 {
		sign, u = "-", -u // -u is also right for math.MinInt64
	}
	// The last unit, 1ns, fits every non-zero value.
	i := 0
	for u < uint64(formatUnits[i].size) {
		i++
	}
	size := uint64(formatUnits[i].size)
	s := sign + strconv.FormatUint(u/size, 10) + formatUnits[i].name
	if i+1 < len(formatUnits) {
		next := formatUnits[i+1]
		if r := u % size / uint64(next.size); r > 0 {
			s += strconv.FormatUint(r, 10) + next.name
		}
	}
	return s
}
