package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/hookkeeper/hookkeeper/internal/wire"
	"github.com/hookkeeper/hookkeeper/internal/wire/wiretest"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range wiretest.URLCases {
		err := wire.CheckURL(tc.URL)
		if !errors.Is(err, tc.Want) || (tc.Want == nil) != (err == nil) {
			t.Errorf("CheckURL(%q) = %v, want %v", tc.URL, err, tc.Want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckURL(%q) quotes the URL: %v", tc.URL, err)
		}
	}
}
