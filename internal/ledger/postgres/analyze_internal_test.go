package postgres

import "testing"

func TestNeedsAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name          string
		rows, changed int64
		want          bool
	}{
		{"never analysed, few rows", -1, youngMinChange - 1, false},
		{"never analysed, enough rows", -1, youngMinChange, true},
		{"empty at its analysis, enough rows", 0, youngMinChange, true},
		{"young, not yet doubled", 5_000, 4_999, false},
		{"young, doubled", 5_000, 5_000, true},
		{"past young, doubled", youngRows, youngRows, false},
	} {
		if got := needsAnalyze(tc.rows, tc.changed); got != tc.want {
			t.Errorf("%s: needsAnalyze(%d, %d) = %v, want %v", tc.name, tc.rows, tc.changed, got, tc.want)
		}
	}
}
