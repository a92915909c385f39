package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		n        int
		suffix   string
		want     string
	}{
		{"short", "out of stock", 16, "...", "out of stock"},
		{"exactly the limit", "abcdef", 6, "...", "abcdef"},
		{"cut with a suffix", "abcdefg", 6, "...", "abc..."},
		{"cut without a suffix", "abcdefg", 6, "", "abcdef"},
		{"never inside a two-byte character", "abcdé", 5, "", "abcd"},
		{"never inside a three-byte character, before the suffix", "ab€cdefg", 7, "...", "ab..."},
		{"never inside a four-byte character", "a😀", 4, "", "a"},
		{"invalid UTF-8 replaced", "bad \xff byte", 64, "", "bad \uFFFD byte"},
		{"invalid UTF-8 replaced before cutting", "ab\xffcd", 4, "", "ab"},
		{"suffix longer than the limit", "abcdef", 2, "...", "ab"},
		{"zero limit", "abc", 0, "...", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := String(tc.in, tc.n, tc.suffix)
			if got != tc.want || len(got) > tc.n || !utf8.ValidString(got) {
				t.Fatalf("String(%q, %d, %q) = %q (%d bytes), want %q", tc.in, tc.n, tc.suffix, got, len(got), tc.want)
			}
		})
	}
}

// TestStringEveryCut cuts a text of one-, two-, three- and four-byte
// characters at every length: always valid, within the limit, and a prefix
// of the input followed by the suffix.
func TestStringEveryCut(t *testing.T) {
	const in = "aé€😀bé€😀"
	for n := 0; n <= len(in); n++ {
		for _, suffix := range []string{"", "..."} {
			got := String(in, n, suffix)
			if len(got) > n || !utf8.ValidString(got) {
				t.Fatalf("String(%q, %d, %q) = %q: %d bytes or invalid", in, n, suffix, got, len(got))
			}
			if got != in && !strings.HasPrefix(in, strings.TrimSuffix(got, suffix)) {
				t.Fatalf("String(%q, %d, %q) = %q: not a prefix of the input", in, n, suffix, got)
			}
		}
	}
}
