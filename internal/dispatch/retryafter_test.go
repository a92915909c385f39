package dispatch

import (
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"120", 2 * time.Minute},
		{" 7 ", 7 * time.Second},
		{"Fri, 01 May 2026 12:01:30 GMT", 90 * time.Second},  // IMF-fixdate
		{"Friday, 01-May-26 12:01:30 GMT", 90 * time.Second}, // RFC 850
		{"Fri May  1 12:01:30 2026", 90 * time.Second},       // asctime
		{"Fri, 01 May 2026 11:59:00 GMT", 0},                 // in the past
		{"-5", 0},
		{"+5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999999999999999", maxRetryAfter},
		{"31622400", maxRetryAfter}, // 366 days
		{"86400", 24 * time.Hour},
		{"Fri, 01 May 2099 12:00:00 GMT", maxRetryAfter},
	}
	for _, tt := range tests {
		if got := parseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
