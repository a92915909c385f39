package backoff_test

import (
	"math"
	"testing"
	"time"

	"github.com/hookkeeper/hookkeeper/internal/backoff"
)

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{5 * s, "5s"},
		{59 * s, "59s"},
		{5 * m, "5m"},
		{5*m + 30*s, "5m30s"},
		{90 * m, "1h30m"},
		{h, "1h"},
		{h + 5*s, "1h"},            // the second unit is zero; seconds are not shown
		{h + 59*m + 59*s, "1h59m"}, // truncated, not rounded
		{24 * h, "1d"},
		{52 * h, "2d4h"},
		{3*24*h + 2*h + 30*m, "3d2h"},
		{30 * 24 * h, "30d"},
		{1500 * ms, "1s500ms"},
		{250 * ms, "250ms"},
		{1500 * time.Microsecond, "1ms500µs"},
		{1, "1ns"},
		{-90 * s, "-1m30s"},
		{backoff.MaxDuration, "36500d"},
		{math.MaxInt64, "106751d23h"},
		{math.MinInt64, "-106751d23h"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := backoff.FormatDuration(tt.in); got != tt.want {
				t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
