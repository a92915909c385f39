package postgres

import "testing"

func TestNeedsAnalyze(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rows, live int64
		want       bool
	}{
		{"never analysed, few rows", -1, youngMinChange - 1, false},
		{"never analysed, enough rows", -1, youngMinChange, true},
		{"empty at its analysis, enough rows", 0, youngMinChange, true},
		{"young, grown by half again (rows updated as often: not a reason)", 5_000, 7_500, false},
		{"young, not yet doubled", 5_000, 9_999, false},
		{"young, doubled", 5_000, 10_000, true},
		{"small, doubled but by fewer rows than an analysis is worth", 400, 1_300, false},
		{"small, grown by enough rows", 400, 1_400, true},
		{"shrunk since (retention)", 5_000, 1_000, false},
		{"past young, doubled", youngRows, 2 * youngRows, false},
	} {
		if got := needsAnalyze(tc.rows, tc.live); got != tc.want {
			t.Errorf("%s: needsAnalyze(%d, %d) = %v, want %v", tc.name, tc.rows, tc.live, got, tc.want)
		}
	}
}
